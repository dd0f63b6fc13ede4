# Storage (owner: storage/infrastructure): chDB's libchdb.so for the embedded ClickHouse engine,
# the store package's integration run against a real Kafka, and its benchmark.
#   make chdb-fetch         cache libchdb.so (npm @chdb/lib-linux-x64-gnu) under .cache/chdb
#   make build-chdb         bin/flowzero with the embedded engine (outputs.store, store migrate/query)
#   make store-integration  Kafka → chDB Kafka engine → flows table, and an outlet's units stored
#                           once after a crash or a kill -9 (outlet, app), against a fresh broker
#   make bench-store        sustained insert rate and bytes on disk per flow (not in make test)
CHDB_DIR := $(CACHE)/chdb

.PHONY: chdb-fetch build-chdb store-integration bench-store

chdb-fetch:
	@CHDB_DIR=$(CHDB_DIR) scripts/chdb.sh fetch

# The binary finds libchdb.so in CHDB_DIR (rpath), where chdb-fetch put it.
build-chdb: chdb-fetch
	$(GO) build -tags chdb -o $(BIN)/flowzero ./cmd/flowzero

# The unit run builds the cgo binding (store/chdb, tag chdb) and runs the engine tests. The
# binding's #cgo directives already point at .cache/chdb; these flags also cover a CHDB_DIR
# given on the command line. -race works with libchdb (checked with chDB 26.7).
TEST_TAGS += chdb
TEST_DEPS += chdb-fetch
export CGO_LDFLAGS := $(CGO_LDFLAGS) -L$(CHDB_DIR) -Wl,-rpath,$(CHDB_DIR)

# The store packages holding integration-tagged tests (the Kafka engine's).
STORE_INTEGRATION_PKGS = $(sort $(dir $(shell git ls-files --cached --others --exclude-standard -- 'store/*_test.go' \
	| xargs grep -l '^//go:build.*integration' 2>/dev/null)))

store-integration: chdb-fetch kafka-fetch
	$(call with-kafka,$(MAKE) --no-print-directory store-integration-tests)

# store-integration-tests runs the tests against the brokers of FLOWZERO_KAFKA_BROKERS.
store-integration-tests:
	$(GO) test -race -count=1 -timeout 10m -tags 'integration chdb' -run 'Kafka' $(addprefix ./,$(STORE_INTEGRATION_PKGS)) && \
	  $(GO) test -race -count=1 -timeout 10m -tags 'integration chdb' \
	    -run '^(TestUnitsStoredOnce|TestSplitKillOutletStore|TestSplitServerStoredOnce)$$' ./outlet/ ./app/

.PHONY: store-integration-tests
KAFKA_SUITES += store-integration-tests
KAFKA_SUITES_DEPS += chdb-fetch

BENCH_COUNT ?= 5
bench-store: chdb-fetch tools
	@mkdir -p $(VAR)/bench
	$(GO) test -tags chdb -run '^$$' -bench 'BenchmarkStoreInsert' -skip '/table=sink-sustained' -benchtime 2x -count $(BENCH_COUNT) -timeout 60m ./store \
	  | tee $(VAR)/bench/store.txt
	$(GO) test -tags chdb -run '^$$' -bench 'BenchmarkStoreInsert/table=sink-sustained$$' -benchtime 1x -count $(BENCH_COUNT) -timeout 60m ./store \
	  | tee $(VAR)/bench/store-sustained.txt
	$(GO) test -tags chdb -run '^$$' -bench 'BenchmarkStoreSinkWrite' -benchmem -count $(BENCH_COUNT) ./store \
	  | tee $(VAR)/bench/store-write.txt
	$(GO) test -run '^$$' -bench 'BenchmarkStoreNativeEncode|BenchmarkStoreAggregate' -benchmem -count $(BENCH_COUNT) ./store/native \
	  | tee -a $(VAR)/bench/store-write.txt
	benchstat -col /format -row /table $(VAR)/bench/store.txt
	benchstat $(VAR)/bench/store-sustained.txt
	benchstat -col /impl $(VAR)/bench/store-write.txt

BENCH_TARGETS += bench-store
