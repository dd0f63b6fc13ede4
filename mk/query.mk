# Query layer (owner: query):
#   bench-query  BenchmarkQuery (query/): the console's queries (home widgets, top 10 by SrcAS
#                over 1 h, 24 h and 7 days, a 24 h series by 3 dimensions, a 6 h Sankey of 3
#                dimensions, a 24 h Sankey ending on no bucket), on the table chosen and forced
#                onto the flows table (wall ms/op and the process's cpu-ms/op), on the data
#                set of $(QUERY_BENCH_DIR): the demo's traffic at 5,000 flows/s, 24 h in the
#                aggregated tables, the last hour in the flows table. It is built there the
#                first time (and when older than 5 days); its embedded store
#                ($(QUERY_BENCH_DIR)/chdb) is what the console's browser test can read.
#   bench-query-data  only build (or check) the data set.
#   bench-query-day  bench-query on a data set whose flows table holds the whole 24 h, as a
#                collector's does after a day (432 M rows in flows, 3.7 GB on disk, about
#                18 minutes to build, in $(CACHE)/bench-query-day): the queries forced onto
#                the flows table read their whole range there.

.PHONY: bench-query bench-query-data bench-query-day
QUERY_BENCH_DIR ?= $(abspath $(CACHE))/bench-query
QUERY_BENCH_COUNT ?= 5
QUERY_BENCH_FLOWS_HOURS ?= 1
QUERY_BENCH_ENV = FLOWZERO_BENCH_QUERY_DIR=$(QUERY_BENCH_DIR) FLOWZERO_BENCH_QUERY_FLOWS_HOURS=$(QUERY_BENCH_FLOWS_HOURS)

bench-query-data: chdb-fetch
	$(QUERY_BENCH_ENV) $(GO) test -tags chdb -run '^$$' -bench '^BenchmarkQuery$$/query=home/widget=flow-rate$$' \
	  -benchtime 1x -timeout 60m -v ./query/ | grep -E 'data set|^ok|FAIL'

bench-query: chdb-fetch tools
	@mkdir -p $(VAR)/bench
	$(QUERY_BENCH_ENV) $(GO) test -tags chdb -run '^$$' -bench '^BenchmarkQuery$$' -benchtime 3x \
	  -count $(QUERY_BENCH_COUNT) -timeout 90m ./query/ | tee $(VAR)/bench/query-$(QUERY_BENCH_FLOWS_HOURS)h.txt
	benchstat -col /table -row /query $(VAR)/bench/query-$(QUERY_BENCH_FLOWS_HOURS)h.txt

bench-query-day:
	$(MAKE) bench-query QUERY_BENCH_DIR=$(abspath $(CACHE))/bench-query-day QUERY_BENCH_FLOWS_HOURS=24 QUERY_BENCH_COUNT=3

BENCH_TARGETS += bench-query
