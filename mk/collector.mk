# Load benchmark of the collector (not part of make test): see scripts/bench-collector.sh.
.PHONY: bench-collector
bench-collector: build
	scripts/bench-collector.sh

# Whole-process CPU of a split collector (inlet + outlet) against mode: all, on a real broker:
# see scripts/bench-collector-split.sh (RATES, MODES, ROUNDS, DURATION, PPROF_DIR).
.PHONY: bench-collector-split
bench-collector-split: build kafka-fetch
	scripts/bench-collector-split.sh
