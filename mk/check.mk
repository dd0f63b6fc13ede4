# Quick feedback before a commit (issue 21): under 2 minutes on a warm cache. make test stays
# what CI runs.
#   make check      gofmt, go vet, staticcheck, govulncheck, then the unit tests without -race
#                   and without the fuzz phase
#   make lint       staticcheck on the main module (with and without the engine's build tags,
#                   merged) and on bench/
#   make vulncheck  govulncheck on the main module's dependencies, against a database built from
#                   golang.org/x/vulndb (Go module proxy) under .cache/vulndb: called
#                   vulnerabilities of a required module fail, the standard library's (fixed by a
#                   newer Go, not by go.mod) are printed as warnings (VULN_STDLIB=fail fails them)
#   make deps       the Debian packages the tests use (faketime, chromium, snmpd, snmp), installed
#                   when missing and running as root
# The tools are pinned here and installed by make under .cache/gobin, one file per version.
STATICCHECK_VERSION ?= v0.8.2
GOVULNCHECK_VERSION ?= v1.9.0
# golang.org/x/vulndb is published as pseudo-versions: `go list -m golang.org/x/vulndb@latest`
# names the newest the proxy has.
VULNDB_VERSION ?= v0.0.0-20261105234957-e22db6528018
VULN_STDLIB ?= warn

STATICCHECK := $(CACHE)/gobin/staticcheck-$(STATICCHECK_VERSION)
GOVULNCHECK := $(CACHE)/gobin/govulncheck-$(GOVULNCHECK_VERSION)
VULNDB_DIR  := $(CACHE)/vulndb/$(VULNDB_VERSION)

# Build configurations staticcheck checks and merges (a finding such as "unused" is reported
# only when it holds in every configuration): the engine's tags, and none (the !chdb files).
define STATICCHECK_MATRIX
engine: -tags=chdb,integration
plain: -tags=
endef
export STATICCHECK_MATRIX

.PHONY: check lint vulncheck unit-quick deps

# Every step runs and reports, even after one fails; the last line gives each step's time.
CHECK_STEPS := vet lint vulncheck unit-quick
check:
	@total=$$(date +%s); times=; failed=; for step in $(CHECK_STEPS); do \
	  start=$$(date +%s); $(MAKE) --no-print-directory $$step || failed="$$failed $$step"; \
	  times="$$times $$step $$(( $$(date +%s) - start ))s"; \
	done; \
	if [ -z "$$failed" ]; then echo "make check: all passed in $$(( $$(date +%s) - total ))s:$$times"; \
	else echo "make check: FAILED ($${failed# }) in $$(( $$(date +%s) - total ))s:$$times"; exit 1; fi

# Both modules are checked even when the first has findings.
lint: $(STATICCHECK)
	status=0; printf '%s\n' "$$STATICCHECK_MATRIX" | $(STATICCHECK) -matrix ./... || status=1; \
	  (cd bench && $(STATICCHECK) ./...) || status=1; exit $$status

vulncheck: $(GOVULNCHECK)
	@GO=$(GO) scripts/vulndb.sh $(VULNDB_VERSION) $(VULNDB_DIR)
	$(GOVULNCHECK) -db file://$(VULNDB_DIR) -format json ./... | $(GO) run ./scripts/vulnpolicy -stdlib=$(VULN_STDLIB)

# The unit tests as make test runs them (same tags, so the engine's tests too), without the race
# detector.
unit-quick: $(TEST_DEPS)
	$(GO) test -count=1 -timeout 5m $(if $(TEST_TAGS),-tags '$(TEST_TAGS)') ./...

tools: $(STATICCHECK) $(GOVULNCHECK)

deps:
	@scripts/deps.sh

# go install writes the plain name; the versioned copy is what make runs, so that changing a
# pin above installs that version.
$(CACHE)/gobin/staticcheck-%:
	@mkdir -p $(@D)
	tmp=$$(mktemp -d) && GOBIN=$$tmp $(GO) install honnef.co/go/tools/cmd/staticcheck@$* && mv $$tmp/staticcheck $@ && rmdir $$tmp

$(CACHE)/gobin/govulncheck-%:
	@mkdir -p $(@D)
	tmp=$$(mktemp -d) && GOBIN=$$tmp $(GO) install golang.org/x/vuln/cmd/govulncheck@$* && mv $$tmp/govulncheck $@ && rmdir $$tmp
