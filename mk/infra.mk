# Real services for the integration tests (owner: storage/infrastructure).
#   make kafka-fetch   cache the Apache Kafka jars (Maven Central) under .cache/kafka
#   make kafka-start   start a single-node KRaft broker on 127.0.0.1:$(KAFKA_PORT) (kept running)
#   make kafka-stop    stop it
#   make kafka-integration  run every package's integration tests against a fresh broker
# Integration tests that need Kafka live in files tagged `//go:build integration` and get the
# broker from flowzero/internal/kafkatest (FLOWZERO_KAFKA_BROKERS).
KAFKA_PORT ?= 19092
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

# $(call with-kafka,COMMAND) runs COMMAND with FLOWZERO_KAFKA_BROKERS pointing at a broker of its
# own (free ports, fresh data directory under .cache), and stops and removes that broker when
# COMMAND ends, on success, failure or interruption alike (trap EXIT; INT/TERM exit).
# FLOWZERO_REQUIRE_SERVICES=1 makes a test that cannot reach a service fail instead of skip.
define with-kafka
	export KAFKA_PORT=auto KAFKA_DATA=$$(mktemp -d "$(CACHE)/kafka-run.XXXXXX"); \
	trap '$(KAFKA_SH) clean' EXIT; trap 'exit 130' INT TERM; \
	$(KAFKA_SH) start; \
	export FLOWZERO_KAFKA_BROKERS=$$($(KAFKA_SH) status) FLOWZERO_REQUIRE_SERVICES=1; \
	$(1)
endef

# Packages holding integration-tagged tests, except store (mk/store.mk runs those with chDB).
INTEGRATION_PKGS = $(sort $(dir $(shell git ls-files --cached --others --exclude-standard -- '*_test.go' \
	| grep -v -e '^bench/' -e '^store/' | xargs grep -l '^//go:build.*integration' 2>/dev/null)))

kafka-integration: kafka-fetch
	$(if $(INTEGRATION_PKGS),$(call with-kafka,$(GO) test -race -count=1 -timeout 10m -tags 'integration' $(addprefix ./,$(INTEGRATION_PKGS))),@echo "kafka-integration: no integration-tagged tests")

INTEGRATION_TARGETS += kafka-integration
