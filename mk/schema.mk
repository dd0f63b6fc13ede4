# Schema: column list, FlowMessage encoding, .proto and ClickHouse DDL (owner: schema).
#   make bench-schema  BenchmarkFlowMessage/{default,all-columns,pbwire-only,speed-of-light}
#                      (schema; pbwire-only writes the same bytes with pbwire alone, speed-of-light
#                      the same fields as raw fixed-width appends) and BenchmarkFlowEncode/{flowzero,goflow2}
#                      (bench/schema, GoFlow2's generated protobuf as the peer), summarized by
#                      benchstat (ns/op, cpu-ns/op: CPU time of the benchmark thread, steady on this
#                      shared machine; B/flow, allocs). The test binaries are built once and
#                      run $(SCHEMA_BENCH_COUNT) times in turn, so that every variant sees the
#                      same machine load (go test -count would run all runs of one variant in a row).
SCHEMA_BENCH_COUNT ?= 8
SCHEMA_BENCH_TIME  ?= 500ms
SCHEMA_BENCH_DIR   := $(CACHE)/bench

.PHONY: bench-schema

bench-schema: $(CACHE)/gobin/benchstat
	@mkdir -p $(SCHEMA_BENCH_DIR)
	$(GO) test -c -o $(SCHEMA_BENCH_DIR)/schema.test ./schema/
	cd bench && $(GO) test -c -o $(SCHEMA_BENCH_DIR)/bench-schema.test ./schema/
	rm -f $(SCHEMA_BENCH_DIR)/schema.txt $(SCHEMA_BENCH_DIR)/schema-peer.txt
	for i in $$(seq $(SCHEMA_BENCH_COUNT)); do \
	  (cd schema && $(SCHEMA_BENCH_DIR)/schema.test -test.run '^$$' -test.bench '^BenchmarkFlowMessage$$' \
	    -test.benchmem -test.benchtime $(SCHEMA_BENCH_TIME)) >> $(SCHEMA_BENCH_DIR)/schema.txt; \
	  (cd bench/schema && $(SCHEMA_BENCH_DIR)/bench-schema.test -test.run '^$$' -test.bench '^BenchmarkFlowEncode$$' \
	    -test.benchmem -test.benchtime $(SCHEMA_BENCH_TIME)) >> $(SCHEMA_BENCH_DIR)/schema-peer.txt; \
	done
	$(CACHE)/gobin/benchstat $(SCHEMA_BENCH_DIR)/schema.txt
	$(CACHE)/gobin/benchstat $(SCHEMA_BENCH_DIR)/schema-peer.txt

BENCH_TARGETS += bench-schema
