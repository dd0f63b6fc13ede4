# sFlow v5 decoder and packet-header parser (owner: decoder/sflow, decoder/packet).
#   make bench-decoders-sflow  BenchmarkDecodeEncode/sflow/{flowzero,goflow2} on data-1140.pcap
#                              (5 flows), 8 runs each, summarized by benchstat (ns/flow,
#                              allocs/op), plus the packet parser's own benchmarks
SFLOW_BENCH_COUNT ?= 8
SFLOW_BENCH_OUT   := $(CACHE)/bench/decoders-sflow.txt

.PHONY: bench-decoders-sflow

bench-decoders-sflow: $(CACHE)/gobin/benchstat
	@mkdir -p $(dir $(SFLOW_BENCH_OUT))
	cd bench && $(GO) test -run '^$$' -bench '^BenchmarkDecodeEncode$$/^sflow$$/' \
	  -benchmem -count=$(SFLOW_BENCH_COUNT) ./decoders/ | tee $(SFLOW_BENCH_OUT)
	$(GO) test -run '^$$' -bench . -benchmem -count=$(SFLOW_BENCH_COUNT) ./decoder/packet/ ./decoder/sflow/ \
	  | tee -a $(SFLOW_BENCH_OUT)
	$(CACHE)/gobin/benchstat $(SFLOW_BENCH_OUT)

BENCH_TARGETS += bench-decoders-sflow
