# BMP listener, enrichment and the RIB lookup API (issue 6, BMP/enrichment part).
#   bench-bmp  BenchmarkRouteMonitoring (rib/bmp: the 17 route monitoring messages of the vMX
#              capture applied to the RIB), BenchmarkEnrich/{flowzero,two-lookups} (enrich: one
#              flow against the synthetic full table, with the bare two RIB lookups as the
#              speed of light in the same run) and BenchmarkHTTPLookup (rib/ribhttp: batches
#              of 1,000 addresses through POST /api/v0/rib/lookup), as benchstat tables.
BMP_BENCH_COUNT ?= 6

.PHONY: bench-bmp
BENCH_TARGETS += bench-bmp

bench-bmp: tools
	@mkdir -p $(CACHE)/bench
	$(GO) test -run '^$$' -bench '^BenchmarkRouteMonitoring$$' -benchmem -count=$(BMP_BENCH_COUNT) \
	  ./rib/bmp/ | tee $(CACHE)/bench/bmp-route-monitoring.txt
	$(GO) test -run '^$$' -bench '^BenchmarkEnrich$$/^(flowzero|two-lookups)$$' -benchmem -count=$(BMP_BENCH_COUNT) \
	  ./enrich/ | tee $(CACHE)/bench/enrich.txt
	$(GO) test -run '^$$' -bench '^BenchmarkHTTPLookup$$' -benchmem -count=$(BMP_BENCH_COUNT) \
	  ./rib/ribhttp/ | tee $(CACHE)/bench/rib-http-lookup.txt
	benchstat $(CACHE)/bench/bmp-route-monitoring.txt
	benchstat $(CACHE)/bench/enrich.txt
	benchstat $(CACHE)/bench/rib-http-lookup.txt

#   bench-rib-api  BenchmarkRIBLookupAPI (bench/ribhttp): POST /api/v0/rib/lookup over loopback
#              HTTP with 1, 20 and 1,000 addresses per request against gobgpd's gRPC ListPath
#              with 1 and 20 (the seed problem's setup), same table (RIPE RIS 2002 dump), same
#              run; lookups/s medians.
.PHONY: bench-rib-api
BENCH_TARGETS += bench-rib-api

bench-rib-api: tools
	@mkdir -p $(CACHE)/bench
	cd bench && $(GO) test -run '^$$' -bench '^BenchmarkRIBLookupAPI$$' -benchmem -benchtime=2s \
	  -count=$(BMP_BENCH_COUNT) -timeout 30m ./ribhttp/ | tee $(CACHE)/bench/rib-api.txt
	benchstat $(CACHE)/bench/rib-api.txt
