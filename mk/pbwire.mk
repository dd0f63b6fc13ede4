# pbwire benchmarks (owner: pbwire).
#   make bench-pbwire   Perfetto's ProtoZero benchmark replicated in Go (bench/protozero: pbwire
#                       against a speed-of-light serializer, protowire, vtprotobuf, easyproto and
#                       proto.Marshal, -count=8) and pbwire's own micro-benchmarks (Compact,
#                       reader, scattered writer), each printed as a benchstat table.
# cpu-ns/op is the CPU time of the benchmark's own thread: on a shared, noisy machine it is the
# figure to compare; sec/op is wall-clock time.
PBWIRE_BENCH_COUNT ?= 8
PBWIRE_BENCH_TIME ?= 1s

.PHONY: bench-pbwire
BENCH_TARGETS += bench-pbwire

bench-pbwire: $(CACHE)/gobin/benchstat
	@mkdir -p $(VAR)
	cd bench && $(GO) test -run '^$$' -bench '^BenchmarkProtoZero$$' -count=$(PBWIRE_BENCH_COUNT) \
	  -benchtime=$(PBWIRE_BENCH_TIME) -benchmem ./protozero > $(VAR)/bench-protozero.txt
	$(CACHE)/gobin/benchstat $(VAR)/bench-protozero.txt
	$(GO) test -run '^$$' -bench . -count=$(PBWIRE_BENCH_COUNT) -benchmem ./pbwire > $(VAR)/bench-pbwire.txt
	$(CACHE)/gobin/benchstat $(VAR)/bench-pbwire.txt
