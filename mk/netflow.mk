# NetFlow v5/v9 and IPFIX decoder (owner: decoder/netflow).
#   make bench-decoders-netflow  BenchmarkDecodeEncode/{netflow-v9,ipfix,netflow-v5}/{flowzero,goflow2}
#                                8 runs each, summarized by benchstat (ns/flow, allocs/op)
NETFLOW_BENCH_COUNT ?= 8
NETFLOW_BENCH_OUT   := $(CACHE)/bench/decoders-netflow.txt

.PHONY: bench-decoders-netflow

bench-decoders-netflow: $(CACHE)/gobin/benchstat
	@mkdir -p $(dir $(NETFLOW_BENCH_OUT))
	cd bench && $(GO) test -run '^$$' -bench '^BenchmarkDecodeEncode$$/^(netflow-v9|ipfix|netflow-v5)$$/' \
	  -benchmem -count=$(NETFLOW_BENCH_COUNT) ./decoders/ | tee $(NETFLOW_BENCH_OUT)
	$(CACHE)/gobin/benchstat $(NETFLOW_BENCH_OUT)

BENCH_TARGETS += bench-decoders-netflow
