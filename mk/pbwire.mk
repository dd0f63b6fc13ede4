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

# Regenerates bench/protozero/testpb (committed) with protoc and the plugins pinned here.
PROTOC_GEN_GO_VERSION ?= v1.36.12
PROTOC_GEN_GO_VTPROTO_VERSION ?= v0.6.0
.PHONY: bench-pbwire-generate
bench-pbwire-generate:
	@command -v protoc >/dev/null || { echo "protoc not found (apt-get install protobuf-compiler)"; exit 1; }
	GOBIN=$(CACHE)/gobin $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(CACHE)/gobin $(GO) install github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto@$(PROTOC_GEN_GO_VTPROTO_VERSION)
	cd bench/protozero/testpb && $(GO) generate .
