# flowzero — make run (demo), make test (everything CI runs), make bench (benchmarks).
# Everything make needs that is not in the Go toolchain (Kafka jars, libchdb, tools) is fetched
# into .cache/ (git-ignored) on first use.
SHELL       := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO      ?= go
CACHE   := $(CURDIR)/.cache
BIN     := $(CURDIR)/bin
VAR     := $(CURDIR)/var
FUZZTIME ?= 3s
export GOFLAGS ?= -buildvcs=false
export PATH := $(CACHE)/gobin:$(PATH)

# Fragments in mk/ add to these lists (integration steps that need real services, benchmarks).
INTEGRATION_TARGETS :=
BENCH_TARGETS :=
# Extra build tags and environment for the unit test run (for example the chdb tag once
# libchdb is fetched).
TEST_TAGS :=
TEST_DEPS :=

include $(sort $(wildcard mk/*.mk))

.PHONY: build test test-future vet unit fuzz integration bench run clean tools help

## build: bin/flowzero; with the embedded engine (-tags chdb) once libchdb is cached (make
## build-chdb fetches it), so that make run keeps a binary that make build-chdb made.
build:
	$(GO) build $(if $(wildcard $(CHDB_DIR)/VERSION),-tags chdb) -o $(BIN)/flowzero ./cmd/flowzero

## help: this list: the targets above, then each area's from mk/*.mk.
help:
	@grep -h '^## ' Makefile | sed 's/^## //'
	@for f in mk/*.mk; do echo; sed -n '/^[^#]/q;s/^# \{0,1\}//;p' "$$f"; done

## test: vet, unit tests with -race, every fuzz target briefly, then integration with real services,
## each phase timed (CI has 2 cores and 90 minutes: keep the total well under 15). make check is
## the quick pass for every commit (mk/check.mk).
TEST_PHASES := vet unit fuzz integration
test: deps
	@total=$$(date +%s); times=; for phase in $(TEST_PHASES); do \
	  start=$$(date +%s); $(MAKE) --no-print-directory $$phase; \
	  times="$$times $$phase $$(( $$(date +%s) - start ))s"; \
	done; echo "make test: all passed in $$(( $$(date +%s) - total ))s:$$times"

vet:
	@unformatted=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard -- '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet -tags 'chdb integration' ./...
	cd bench && $(GO) vet ./...

unit: $(TEST_DEPS)
	$(GO) test -race -count=1 -timeout 10m $(if $(TEST_TAGS),-tags '$(TEST_TAGS)') ./...

## test-future: the store and app tests with Go's test clock 40 days ahead
## ($$FLOWZERO_TEST_CLOCK_OFFSET, internal/testutil). The embedded engine keeps the machine's
## clock: libchdb.so reads the time through its own clock_gettime, which faketime (LD_PRELOAD)
## cannot move (it only slowed every statement to ~1 s), so the tests take what depends on the
## engine's clock (TTL) from the engine. Proves the suite holds on any date and with the two
## clocks apart.
FUTURE_OFFSET ?= 960h
FUTURE_PKGS   ?= ./store/... ./app/...
test-future: $(TEST_DEPS)
	FLOWZERO_TEST_CLOCK_OFFSET=$(FUTURE_OFFSET) $(GO) test -count=1 -timeout 10m \
	  $(if $(TEST_TAGS),-tags '$(TEST_TAGS)') $(FUTURE_PKGS)

fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz-all.sh

integration: $(INTEGRATION_TARGETS)

## bench: the benchmarks the issues ask for, each printed as a benchstat table.
bench: tools $(BENCH_TARGETS)

tools: $(CACHE)/gobin/benchstat

$(CACHE)/gobin/benchstat:
	GOBIN=$(CACHE)/gobin $(GO) install golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da

clean:
	rm -rf $(BIN) $(VAR)

## run: the collector fed by the built-in demo exporters, storing flows in the embedded
## engine (demo/collect.yaml; the binary of build-chdb, which fetches libchdb and builds the
## console) and archiving them under var/flows; it prints the web console's URL
## (http://127.0.0.1:8080/, beside /metrics and the API), then a summary every 30 s.
## Ctrl-C stops it cleanly.
RUN_FLAGS ?= --demo --summary 30s --config demo/collect.yaml
run: build-chdb
	$(BIN)/flowzero collect $(RUN_FLAGS)
