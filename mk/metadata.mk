# Exporter and interface metadata: static, SNMP and classifier rules (issue 26, classify part).
#   bench-metadata  BenchmarkMetadataCache/{all-sources,static-only,none} (enrich: the
#              exporter and interface step per flow with static metadata, SNMP answers and
#              rules, all cache hits, beside static metadata alone and the bare loop, same run)
#              and BenchmarkExporterTable (the exporter lookup against a Go map), as benchstat
#              tables; cpu-ns/op is the benchmark thread's CPU time.
METADATA_BENCH_COUNT ?= 6

.PHONY: bench-metadata
BENCH_TARGETS += bench-metadata

bench-metadata: tools
	@mkdir -p $(CACHE)/bench
	$(GO) test -run '^$$' -bench '^(BenchmarkMetadataCache|BenchmarkExporterTable)$$' -benchmem \
	  -count=$(METADATA_BENCH_COUNT) ./enrich/ | tee $(CACHE)/bench/metadata.txt
	benchstat $(CACHE)/bench/metadata.txt
