# Real services for the integration tests (owner: storage/infrastructure).
#   make kafka-fetch   cache the Apache Kafka jars (Maven Central) under .cache/kafka
#   make kafka-start   start a single-node KRaft broker on 127.0.0.1:$(KAFKA_PORT) (kept running;
#                      KAFKA_BROKERS=3 makes it a cluster on the ports from KAFKA_PORT on)
#   make kafka-stop    stop it
#   make kafka-integration  run every package's integration tests against a fresh cluster of
#                      $(KAFKA_TEST_BROKERS) brokers (replication factor 3, min.insync.replicas 2)
#   make kafka-suites  what make test runs: kafka-integration's and store-integration's tests
#                      on one fresh cluster
# Integration tests that need Kafka live in files tagged `//go:build integration` and get the
# broker from flowzero/internal/kafkatest (FLOWZERO_KAFKA_BROKERS).
KAFKA_PORT ?= 19092
# Brokers of the Kafka that the integration runs start (with-kafka).
KAFKA_TEST_BROKERS ?= 3
KAFKA_SH := $(CURDIR)/scripts/kafka.sh

.PHONY: kafka-fetch kafka-start kafka-stop kafka-status kafka-integration

kafka-fetch:
	@$(KAFKA_SH) fetch

kafka-start: kafka-fetch
	KAFKA_PORT=$(KAFKA_PORT) $(KAFKA_SH) start
	@KAFKA_PORT=$(KAFKA_PORT) $(KAFKA_SH) env

kafka-stop:
	KAFKA_PORT=$(KAFKA_PORT) $(KAFKA_SH) stop

kafka-status:
	KAFKA_PORT=$(KAFKA_PORT) $(KAFKA_SH) status

# $(call with-kafka,COMMAND) runs COMMAND with FLOWZERO_KAFKA_BROKERS pointing at a cluster of
# its own, KAFKA_TEST_BROKERS brokers (free ports, fresh data directory under .cache), and stops
# and removes that cluster when COMMAND ends, on success, failure or interruption alike (trap
# EXIT; INT/TERM exit).
# FLOWZERO_REQUIRE_SERVICES=1 makes a test that cannot reach a service fail instead of skip.
define with-kafka
	export KAFKA_PORT=auto KAFKA_BROKERS=$(KAFKA_TEST_BROKERS) KAFKA_DATA=$$(mktemp -d "$(CACHE)/kafka-run.XXXXXX"); \
	trap '$(KAFKA_SH) clean' EXIT; trap 'exit 130' INT TERM; \
	$(KAFKA_SH) start; \
	export FLOWZERO_KAFKA_BROKERS=$$($(KAFKA_SH) status) FLOWZERO_REQUIRE_SERVICES=1; \
	$(1)
endef

# Packages holding integration-tagged tests, except store (mk/store.mk runs those with chDB).
INTEGRATION_PKGS = $(sort $(dir $(shell git ls-files --cached --others --exclude-standard -- '*_test.go' \
	| grep -v -e '^bench/' -e '^store/' | xargs grep -l '^//go:build.*integration' 2>/dev/null)))

kafka-integration: kafka-fetch
	$(call with-kafka,$(MAKE) --no-print-directory kafka-integration-tests)

# kafka-integration-tests runs the tests against the brokers of FLOWZERO_KAFKA_BROKERS (a
# with-kafka cluster, or one of your own).
kafka-integration-tests:
	$(if $(INTEGRATION_PKGS),$(GO) test -race -count=1 -timeout 10m -tags 'integration' $(addprefix ./,$(INTEGRATION_PKGS)),@echo "kafka-integration: no integration-tagged tests")

# make test's integration phase runs every suite of KAFKA_SUITES (targets that take the
# brokers from FLOWZERO_KAFKA_BROKERS) one after the other on one cluster, started once.
KAFKA_SUITES += kafka-integration-tests
KAFKA_SUITES_DEPS += kafka-fetch
.PHONY: kafka-integration-tests kafka-suites
kafka-suites:
	@$(MAKE) --no-print-directory $(KAFKA_SUITES_DEPS)
	$(call with-kafka,$(MAKE) --no-print-directory $(KAFKA_SUITES))

INTEGRATION_TARGETS += kafka-suites
