# NetFlow v5/v9 and IPFIX decoder (owner: decoder/netflow).
#   make bench-decoders-netflow  BenchmarkDecodeEncode/{netflow-v9,ipfix,netflow-v5}/{flowzero,goflow2}
#                                8 rounds, benchstat medians (ns/flow, cpu-ns/flow, B/op, allocs/op)
# The rounds run -count=1 in a loop so that flowzero and GoFlow2 alternate: on a shared,
# noisy machine, -count=8 would measure all runs of one implementation before the other's.
NETFLOW_BENCH_COUNT ?= 8
NETFLOW_BENCH_OUT   := $(CACHE)/bench/decoders-netflow.txt

.PHONY: bench-decoders-netflow

bench-decoders-netflow: $(CACHE)/gobin/benchstat
	@mkdir -p $(dir $(NETFLOW_BENCH_OUT))
	cd bench && $(GO) test -c -o $(CACHE)/bench/decoders.test ./decoders/
	: > $(NETFLOW_BENCH_OUT)
	cd bench/decoders && for i in $$(seq $(NETFLOW_BENCH_COUNT)); do \
	  $(CACHE)/bench/decoders.test -test.run '^$$' -test.bench '^BenchmarkDecodeEncode$$/^(netflow-v9|ipfix|netflow-v5)$$/' \
	    -test.benchmem -test.count=1 | tee -a $(NETFLOW_BENCH_OUT); done
	$(CACHE)/gobin/benchstat $(NETFLOW_BENCH_OUT)

BENCH_TARGETS += bench-decoders-netflow
