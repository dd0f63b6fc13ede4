# Schema: column list, FlowMessage encoding, .proto and ClickHouse DDL (owner: schema).
#   make bench-schema  BenchmarkFlowMessage/{default,all-columns,pbwire-only} (schema) and
#                      BenchmarkFlowEncode/{flowzero,goflow2} (bench/schema, peer in the same run),
#                      $(SCHEMA_BENCH_COUNT) runs each, summarized by benchstat (ns/flow, allocs)
SCHEMA_BENCH_COUNT ?= 8
SCHEMA_BENCH_OUT   := $(CACHE)/bench/schema.txt
SCHEMA_PEER_OUT    := $(CACHE)/bench/schema-peer.txt

.PHONY: bench-schema

bench-schema: $(CACHE)/gobin/benchstat
	@mkdir -p $(dir $(SCHEMA_BENCH_OUT))
	$(GO) test -run '^$$' -bench '^BenchmarkFlowMessage$$' -benchmem -count=$(SCHEMA_BENCH_COUNT) \
	  ./schema/ | tee $(SCHEMA_BENCH_OUT)
	cd bench && $(GO) test -run '^$$' -bench '^BenchmarkFlowEncode$$' -benchmem -count=$(SCHEMA_BENCH_COUNT) \
	  ./schema/ | tee $(SCHEMA_PEER_OUT)
	$(CACHE)/gobin/benchstat $(SCHEMA_BENCH_OUT)
	$(CACHE)/gobin/benchstat $(SCHEMA_PEER_OUT)

BENCH_TARGETS += bench-schema
