# Capture forwarder (issue 8): benchmarks of the wire format and of the whole path.
#   bench-capture-wire  BenchmarkCaptureWire/<size>/<format>/{encode,decode}: flowzero's framing
#                       against the seed article's fixed header, msgpack and JSON, one run; plus
#                       the pcapng packet writer against gopacket's NgWriter.
#   bench-capture       agent (pcap replay at max speed, 64- and 1500-byte packets) -> server ->
#                       pcapng on loopback: packets/s, MB/s (medians of 5 runs); fails on any lost packet.
# 20 rounds: fewer cannot tell the two binary encoders apart at 16 KiB (docs/design/capture.md).
CAPTURE_BENCH_COUNT ?= 20

.PHONY: bench-capture-wire bench-capture
BENCH_TARGETS += bench-capture-wire bench-capture

# The -count rounds run as separate processes, one after the other, so that every format is
# measured in every round: on a shared, noisy machine the load drifts over minutes, and
# -count=N alone would run all N rounds of one format before the next format.
bench-capture-wire: tools
	@mkdir -p $(CACHE)/bench
	cd bench && for i in $$(seq $(CAPTURE_BENCH_COUNT)); do \
	  $(GO) test -run '^$$' -bench '^BenchmarkCaptureWire$$' -benchmem -benchtime=300ms -count=1 ./capture/; \
	done | tee $(CACHE)/bench/capture-wire.txt
	for i in $$(seq $(CAPTURE_BENCH_COUNT)); do \
	  $(GO) test -run '^$$' -bench '^BenchmarkPcapngWrite$$' -benchmem -benchtime=300ms -count=1 ./capture/pcapng/; \
	done | tee $(CACHE)/bench/capture-pcapng.txt
	benchstat $(CACHE)/bench/capture-wire.txt
	benchstat $(CACHE)/bench/capture-pcapng.txt

bench-capture: tools
	@mkdir -p $(CACHE)/bench/capture-e2e
	cd bench && FLOWZERO_BENCH_DIR=$(CACHE)/bench/capture-e2e $(GO) test -run '^$$' \
	  -bench '^BenchmarkCaptureEndToEnd$$' -benchtime=1x -count=5 -timeout 30m ./capture/ \
	  | tee $(CACHE)/bench/capture-e2e.txt
	benchstat $(CACHE)/bench/capture-e2e.txt
