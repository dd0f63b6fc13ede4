# Hostile run (issue 24), part of make test: for 10 s, on loopback only, malformed datagrams
# (noise, headers over noise, real datagrams cut or altered, 64 KiB datagrams) from 32
# sources at up to 2,000 a second go to the collector beside the real captures replayed in a
# loop; it asserts that every flow of the captures is decoded, that no flow comes out of a
# datagram refused as malformed, that the log stays short and that resident memory stays
# bounded. It needs the shared captures (../shared/testdata, or $FLOWZERO_TESTDATA) and fails
# without them.
#   make hostile                                  the 10 s run
#   make hostile FLOWZERO_HOSTILE_DURATION=2m     a longer one
FLOWZERO_HOSTILE_DURATION ?= 10s

.PHONY: hostile

hostile:
	$(GO) vet -tags hostile ./app/
	FLOWZERO_HOSTILE_DURATION=$(FLOWZERO_HOSTILE_DURATION) \
	  $(GO) test -count=1 -timeout 10m -tags hostile -run '^TestHostile$$' -v ./app/ | grep -E '^(---|ok|FAIL|PASS|panic)|hostile_test.go'

INTEGRATION_TARGETS += hostile

# API memory under abuse (issue 24 item 6, not in make test): BenchmarkLookupRSS (bench/ribhttp)
# starts a flowzero binary with a full table and sends rounds of 32 parallel lookups of
# 100,000 addresses; it reports the binary's resident memory before (base-MB), at its
# highest (peak-MB) and the difference (growth-MB). Each binary of API_RSS_BINS (variant
# name=path, default bin/flowzero) runs once per round, alternating, API_RSS_COUNT rounds. It
# needs the shared full table (../shared/testdata, or $FLOWZERO_TESTDATA).
#   make bench-api-rss API_RSS_BINS="base=/tmp/flowzero-base new=bin/flowzero"
API_RSS_COUNT ?= 5
API_RSS_BINS  ?= new=$(BIN)/flowzero
.PHONY: bench-api-rss
BENCH_TARGETS += bench-api-rss

bench-api-rss: build tools
	@mkdir -p $(CACHE)/bench
	cd bench && $(GO) test -c -o $(CACHE)/bench/ribhttp.test ./ribhttp/
	rm -f $(CACHE)/bench/api-rss.txt
	cd bench/ribhttp && for i in $$(seq $(API_RSS_COUNT)); do for v in $(API_RSS_BINS); do \
	  echo "variant: $${v%%=*}" >> $(CACHE)/bench/api-rss.txt; \
	  out=$$(FLOWZERO_BIN=$$(cd $(CURDIR) && realpath $${v#*=}) $(CACHE)/bench/ribhttp.test -test.run '^$$' \
	    -test.bench '^BenchmarkLookupRSS$$' -test.benchtime 1x -test.timeout 30m -test.v); \
	  grep -E '^Benchmark[^ ]+[[:space:]]+[0-9]' <<<"$$out" | tee -a $(CACHE)/bench/api-rss.txt || { echo "$$out"; exit 1; }; \
	done; done
	benchstat -col variant $(CACHE)/bench/api-rss.txt
