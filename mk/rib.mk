# RIB (issue 6): benchmarks over the shared routing data (../shared/testdata/rib).
#   bench-rib       BenchmarkLookup/{flowzero,bart-fast,bart-table,gobgp}: random addresses inside
#                   the 1,062,046 prefixes of bart-prefixes.txt.gz, attributes read; and
#                   BenchmarkLoadMRT/{gc=400,gc=100}: synth-rib-fulltable-4peers.mrt.gz, s/load
#                   and bytes/route after GC, with and without the loader's GC target; and
#                   BenchmarkParseMRT, BenchmarkParseBMP/{flowzero,gobgp}: the same bytes decoded
#                   by rib/bgp, rib/mrt, rib/bmp and by gobgp's packet parsers (per entry of the
#                   1-peer full table, per route monitoring message of the vMX capture).
#                   The flowzero and bart runs are interleaved (one process per round,
#                   RIB_BENCH_COUNT rounds) so that a noisy machine hits them alike; gobgp's
#                   ListPath, four orders of magnitude slower, runs in one process (its table
#                   takes a minute to build). benchstat prints the medians.
#   rib-fulltable   flowzero rib load on the 4-peer full table: prefixes, peers, time, memory.
RIB_BENCH_COUNT ?= 6
RIB_DATA ?= $(CURDIR)/../shared/testdata/rib

.PHONY: bench-rib rib-fulltable
BENCH_TARGETS += bench-rib

bench-rib: tools
	@mkdir -p $(CACHE)/bench
	cd bench && $(GO) test -c -o $(CACHE)/bench/rib.test ./rib/
	cd bench/rib && rm -f $(CACHE)/bench/rib-lookup.txt && for i in $$(seq $(RIB_BENCH_COUNT)); do \
	  $(CACHE)/bench/rib.test -test.run '^$$' -test.bench '^BenchmarkLookup$$/^(flowzero|bart-fast|bart-table)$$' \
	    -test.benchmem -test.benchtime=1s -test.count=1 | tee -a $(CACHE)/bench/rib-lookup.txt; done
	cd bench/rib && $(CACHE)/bench/rib.test -test.run '^$$' -test.bench '^BenchmarkLookup$$/^gobgp$$' \
	  -test.benchmem -test.benchtime=2000x -test.count=$(RIB_BENCH_COUNT) -test.timeout 60m \
	  | tee -a $(CACHE)/bench/rib-lookup.txt
	cd bench/rib && $(CACHE)/bench/rib.test -test.run '^$$' -test.bench '^BenchmarkLoadMRT$$' -test.benchmem \
	  -test.benchtime=1x -test.count=$(RIB_BENCH_COUNT) -test.timeout 30m | tee $(CACHE)/bench/rib-load.txt
	cd bench/rib && rm -f $(CACHE)/bench/rib-parse.txt && for i in $$(seq $(RIB_BENCH_COUNT)); do \
	  $(CACHE)/bench/rib.test -test.run '^$$' -test.bench '^BenchmarkParseMRT$$' -test.benchtime=1x \
	    -test.count=1 | tee -a $(CACHE)/bench/rib-parse.txt; \
	  $(CACHE)/bench/rib.test -test.run '^$$' -test.bench '^BenchmarkParseBMP$$' -test.benchmem \
	    -test.count=1 | tee -a $(CACHE)/bench/rib-parse.txt; done
	benchstat $(CACHE)/bench/rib-lookup.txt
	benchstat $(CACHE)/bench/rib-load.txt
	benchstat $(CACHE)/bench/rib-parse.txt

rib-fulltable: build
	$(BIN)/flowzero rib load $(RIB_DATA)/synth-rib-fulltable-4peers.mrt.gz
