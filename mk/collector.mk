# Load benchmark of the collector (not part of make test): see scripts/bench-collector.sh.
.PHONY: bench-collector
bench-collector: build
	scripts/bench-collector.sh
