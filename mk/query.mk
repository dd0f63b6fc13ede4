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

.PHONY: bench-query bench-query-data
QUERY_BENCH_DIR ?= $(abspath $(CACHE))/bench-query
QUERY_BENCH_COUNT ?= 5

bench-query-data: chdb-fetch
	FLOWZERO_BENCH_QUERY_DIR=$(QUERY_BENCH_DIR) $(GO) test -tags chdb -run '^$$' -bench '^BenchmarkQuery$$/query=home/widget=flow-rate$$' \
	  -benchtime 1x -timeout 60m -v ./query/ | grep -E 'data set|^ok|FAIL'

bench-query: chdb-fetch tools
	@mkdir -p $(VAR)/bench
	FLOWZERO_BENCH_QUERY_DIR=$(QUERY_BENCH_DIR) $(GO) test -tags chdb -run '^$$' -bench '^BenchmarkQuery$$' -benchtime 3x \
	  -count $(QUERY_BENCH_COUNT) -timeout 60m ./query/ | tee $(VAR)/bench/query.txt
	benchstat -col /table -row /query $(VAR)/bench/query.txt

BENCH_TARGETS += bench-query
