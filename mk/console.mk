# Web console (issue 23): the front end in console/frontend (Vite, TypeScript, Vue 3, Apache
# ECharts, CodeMirror 6), built into console/dist, which the Go package console embeds.
#   make console       build the assets: npm ci into .cache/console (keyed by the lock file's
#                      hash, linked as console/frontend/node_modules), then vite build; make,
#                      make build and make run do it first, and only when a source changed
#   make console-test  type check (vue-tsc) and the front end's unit tests (vitest; the time
#                      parsing tests again in three more time zones); part of make test's unit phase
#   make console-dev   Vite's dev server on http://127.0.0.1:5173 with the fake API of
#                      console/frontend/dev; FLOWZERO_API=http://127.0.0.1:8080 uses a collector's
#   make console-size  the JavaScript shipped, raw and gzip (budget: 1.5 MB gzip)
#   make console-e2e   the console in Chromium against a collector with the demo exporters and
#                      the embedded store (console/e2e; screenshots in var/console-e2e); part of
#                      make test's integration phase; skips without Chromium (make deps)
#   make console-perf  Home and a 24 h Visualize query timed in Chromium (medians) on the data
#                      set of make bench-query (built by make bench-query-data, in .cache)
CONSOLE_FRONTEND := console/frontend
CONSOLE_DIST     := console/dist
CONSOLE_NPM      := $(CONSOLE_FRONTEND)/scripts/install-deps.sh $(CACHE)
CONSOLE_SOURCES  := $(shell find $(CONSOLE_FRONTEND) -name node_modules -prune -o -name dev -prune \
	-o -type f ! -name '*.test.ts' -print 2>/dev/null)
CONSOLE_TEST_ZONES ?= America/Los_Angeles Asia/Kolkata Pacific/Kiritimati

.PHONY: console console-deps console-test console-dev console-size console-clean console-e2e console-perf

console: $(CONSOLE_DIST)/index.html

console-deps:
	@$(CONSOLE_NPM)

# vite build writes into console/dist, emptied first except for the .gitkeep that lets a
# clone without the build compile (it then serves console/placeholder.html).
$(CONSOLE_DIST)/index.html: $(CONSOLE_SOURCES)
	@$(CONSOLE_NPM)
	find $(CONSOLE_DIST) -mindepth 1 ! -name .gitkeep -delete
	cd $(CONSOLE_FRONTEND) && node_modules/.bin/vite build --logLevel warn
	@touch $@

build build-chdb: console
unit: console-test
clean: console-clean

console-test: console-deps
	cd $(CONSOLE_FRONTEND) && node_modules/.bin/vue-tsc --noEmit -p tsconfig.json
	cd $(CONSOLE_FRONTEND) && NO_COLOR=1 node_modules/.bin/vitest run --reporter=dot
	cd $(CONSOLE_FRONTEND) && for tz in $(CONSOLE_TEST_ZONES); do \
	  TZ=$$tz NO_COLOR=1 node_modules/.bin/vitest run --reporter=dot src/lib/time.test.ts || exit 1; done

console-dev: console-deps
	cd $(CONSOLE_FRONTEND) && node_modules/.bin/vite

console-size: console
	@cd $(CONSOLE_DIST) && total=0; totalgz=0; for f in $$(find . -name '*.js' | sort); do \
	  raw=$$(stat -c %s $$f); gz=$$(gzip -9c $$f | wc -c); total=$$((total+raw)); totalgz=$$((totalgz+gz)); \
	  printf '%9d %9d  %s\n' $$raw $$gz $$f; done; \
	  printf '%9d %9d  JavaScript shipped (bytes raw, gzip -9)\n' $$total $$totalgz

# The browser test embeds the built console and runs the engine: both are made first.
console-e2e: console chdb-fetch
	$(GO) test -count=1 -timeout 5m -tags 'chdb integration' -run '^TestConsole$$' -v ./console/e2e

INTEGRATION_TARGETS += console-e2e

QUERY_BENCH_DIR ?= $(abspath $(CACHE))/bench-query
console-perf: console chdb-fetch
	@test -f $(QUERY_BENCH_DIR)/dataset.json || { echo "console-perf: no data set in $(QUERY_BENCH_DIR): make bench-query-data builds it"; exit 1; }
	FLOWZERO_CONSOLE_BENCH=$(QUERY_BENCH_DIR)/chdb $(GO) test -count=1 -timeout 20m -tags 'chdb integration' \
	  -run '^TestConsolePerformance$$' -v ./console/e2e

console-clean:
	find $(CONSOLE_DIST) -mindepth 1 ! -name .gitkeep -delete
