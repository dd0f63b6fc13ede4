# RIB (issue 6): benchmarks over the shared routing data (../shared/testdata/rib).
#   bench-rib       BenchmarkLookup/{flowzero,bart-fast,bart-table,gobgp} (random addresses inside
#                   the 1,062,046 prefixes of bart-prefixes.txt.gz, attributes read) and
#                   BenchmarkLoadMRT (synth-rib-fulltable-4peers.mrt.gz: s/load, bytes/route after
#                   GC), RIB_BENCH_COUNT runs each, printed by benchstat (medians).
#   rib-fulltable   flowzero rib load on the 4-peer full table: prefixes, peers, time, memory.
RIB_BENCH_COUNT ?= 6
RIB_DATA ?= $(CURDIR)/../shared/testdata/rib

.PHONY: bench-rib rib-fulltable
BENCH_TARGETS += bench-rib

bench-rib: tools
	@mkdir -p $(CACHE)/bench
	cd bench && $(GO) test -run '^$$' -bench '^BenchmarkLookup$$' -benchmem -benchtime=1s \
	  -count=$(RIB_BENCH_COUNT) -timeout 60m ./rib/ | tee $(CACHE)/bench/rib-lookup.txt
	cd bench && $(GO) test -run '^$$' -bench '^BenchmarkLoadMRT$$' -benchmem -benchtime=1x \
	  -count=$(RIB_BENCH_COUNT) -timeout 30m ./rib/ | tee $(CACHE)/bench/rib-load.txt
	benchstat $(CACHE)/bench/rib-lookup.txt
	benchstat $(CACHE)/bench/rib-load.txt

rib-fulltable: build
	$(BIN)/flowzero rib load $(RIB_DATA)/synth-rib-fulltable-4peers.mrt.gz
