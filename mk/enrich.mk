# Enrichment (issue 26).
#   bench-enrich  BenchmarkEnrich (enrich): whole flows built from a stream of 65,536 realistic
#                 ones (decoder columns, then Finalize) without enrichment ("off") and with
#                 every source on ("all": static exporter and interface metadata, the RIB over
#                 the synthetic full table, and the network attributes of 1,000 networks, a
#                 5,000-entry network source over HTTP and a GeoIP database over the full
#                 table's 1,062,046 prefixes, 20,000 records drawn with a Zipf law); all − off is the cost added per flow (goal:
#                 ≤ 150 ns, 0 allocs). "-uniform": remote addresses from random prefixes (worst
#                 case for caches), "all-hot": one flow repeated (the instructions alone),
#                 "metadata", "routing", "networks": one step each; "-ipv4", "-ipv6": the
#                 Zipf stream's flows whose remote address is IPv4 (IPv6). Then BenchmarkNetworksLoad:
#                 reading that GeoIP database and building the merged table (s/op, MB kept).
#                 One process per round, ENRICH_BENCH_COUNT rounds, so that a noisy machine
#                 hits all runs alike; benchstat prints the medians (cpu-ns/op is the loop
#                 thread's CPU time). Needs ../shared/testdata (or FLOWZERO_TESTDATA).
ENRICH_BENCH_COUNT ?= 6

.PHONY: bench-enrich
BENCH_TARGETS += bench-enrich

bench-enrich: tools
	@mkdir -p $(CACHE)/bench
	$(GO) test -c -o $(CACHE)/bench/enrich.test ./enrich/
	rm -f $(CACHE)/bench/enrich-all.txt && for i in $$(seq $(ENRICH_BENCH_COUNT)); do \
	  $(CACHE)/bench/enrich.test -test.run '^$$' -test.bench '^BenchmarkEnrich$$/^(off|all|all-hot|off-uniform|all-uniform|metadata|routing|networks|(off|all|routing|networks)-ipv[46])$$' \
	    -test.benchmem -test.benchtime=1s -test.count=1 | tee -a $(CACHE)/bench/enrich-all.txt; done
	$(CACHE)/bench/enrich.test -test.run '^$$' -test.bench '^BenchmarkNetworksLoad$$' -test.benchtime=1x \
	  -test.count=$(ENRICH_BENCH_COUNT) | tee $(CACHE)/bench/enrich-load.txt
	benchstat $(CACHE)/bench/enrich-all.txt
	benchstat $(CACHE)/bench/enrich-load.txt
