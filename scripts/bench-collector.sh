#!/usr/bin/env bash
# Load benchmark of `flowzero collect` (make bench-collector; not part of make test).
# Replays generated NetFlow v9 datagrams (flowzero demo --write-pcap) on loopback into the
# collector at increasing rates, first with the file sink, then with the Kafka sink on a real
# broker (scripts/kafka.sh), and prints per rate: flows sent and received, the datagrams the
# kernel dropped (SO_RXQ_OVFL), the loss, the collector's CPU (cores) and peak RSS. The loss
# counters must be exact: datagrams sent = received + kernel drops.
#   RATES     flows per second to try (default "250000 500000 1000000 1500000")
#   DURATION  seconds per rate (default 10)
#   SINKS     "file kafka" (default)
set -euo pipefail
cd "$(dirname "$0")/.."
RATES=${RATES:-"250000 500000 1000000 1500000"}
DURATION=${DURATION:-10}
SINKS=${SINKS:-"file kafka"}
BIN=$PWD/bin/flowzero
WORK=$(mktemp -d "${TMPDIR:-/tmp}/flowzero-bench.XXXXXX")
PCAP=$PWD/.cache/bench/load-nfv9.pcap
PCAP_FLOWS=200000
mkdir -p "$(dirname "$PCAP")"
[ -f "$PCAP" ] || "$BIN" demo --write-pcap "$PCAP" --flows $PCAP_FLOWS --protocol netflow-v9 >/dev/null
DGRAMS_PER_PCAP=$("$BIN" decode "$PCAP" 2>&1 >/dev/null | awk '/datagrams/ {print $1}')
PORT=$((20000 + RANDOM % 20000)); HPORT=$((PORT + 1))
kafka_started=
cleanup() {
  [ -n "${CPID:-}" ] && kill "$CPID" 2>/dev/null || true
  [ -n "$kafka_started" ] && scripts/kafka.sh clean >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

metric() { # sum of a metric's samples
  curl -fsS "http://127.0.0.1:$HPORT/metrics" | awk -v m="$1" '$1 ~ "^"m"({|$)" {s += $2} END {printf "%.0f", s}'
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

printf '%-6s %9s %10s %10s %8s %7s %6s %8s\n' sink rate sent received k-drops loss% cores rss-MiB
for sink in $SINKS; do
  if [ "$sink" = kafka ] && [ -z "$kafka_started" ]; then
    scripts/kafka.sh fetch >/dev/null
    export KAFKA_PORT=auto KAFKA_DATA="$WORK/kafka"
    scripts/kafka.sh start >/dev/null
    kafka_started=1
    BROKER=$(scripts/kafka.sh status)
  fi
  for rate in $RATES; do
    cat >"$WORK/config.yaml" <<YAML
log: {level: warn}
collector:
  listeners: [{protocol: netflow, address: "127.0.0.1:$PORT", workers: 2, receive-buffer: 33554432}]
  http: {listen: "127.0.0.1:$HPORT"}
outputs:
  file: {enabled: $([ "$sink" = file ] && echo true || echo false), directory: "$WORK/flows", compression: ${FILE_COMPRESSION:-zstd}, max-files: 4, rotate-size: 268435456}
  kafka: {enabled: $([ "$sink" = kafka ] && echo true || echo false), brokers: ["${BROKER:-127.0.0.1:9092}"], topic-prefix: "bench-$rate", compression: lz4}
YAML
    "$BIN" collect --config "$WORK/config.yaml" 2>"$WORK/collector.log" &
    CPID=$!
    for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$HPORT/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
    t0=$(cpu_ticks $CPID)
    loops=$(( (rate * DURATION + PCAP_FLOWS - 1) / PCAP_FLOWS ))
    dgram_rate=$(( rate * DGRAMS_PER_PCAP / PCAP_FLOWS ))
    start=$(date +%s.%N)
    "$BIN" replay --quiet --to "127.0.0.1:$PORT" --rate "$dgram_rate" --loop "$loops" "$PCAP" >/dev/null
    end=$(date +%s.%N)
    sent_dgrams=$(( loops * DGRAMS_PER_PCAP ))
    # Wait (at most 10 s) until every datagram sent is received or counted as a kernel drop:
    # the collector may still be working through its socket buffers.
    for _ in $(seq 100); do
      [ $(( $(metric flowzero_collector_datagrams_total) + $(metric flowzero_collector_kernel_drops_total) )) -ge "$sent_dgrams" ] && break
      sleep 0.1
    done
    drained=$(date +%s.%N)
    t1=$(cpu_ticks $CPID)
    rss=$(awk '/VmHWM/ {printf "%.0f", $2/1024}' /proc/$CPID/status)
    received=$(metric flowzero_collector_flows_total)
    dgrams=$(metric flowzero_collector_datagrams_total)
    kdrops=$(metric flowzero_collector_kernel_drops_total)
    kill -TERM $CPID; wait $CPID || true; CPID=
    sent=$(( loops * PCAP_FLOWS ))
    wall=$(echo "$end - $start" | bc -l)
    cores=$(echo "($t1 - $t0) / $(getconf CLK_TCK) / ($drained - $start)" | bc -l)
    loss=$(echo "100 * ($sent - $received) / $sent" | bc -l)
    printf '%-6s %9d %10d %10d %8d %7.3f %6.2f %8d' "$sink" "$((sent * 10 / $(printf '%.0f' "$(echo "$wall*10" | bc -l)") ))" "$sent" "$received" "$kdrops" "$loss" "$cores" "$rss"
    if [ $((dgrams + kdrops)) -ne "$sent_dgrams" ]; then
      printf '  accounting: sent %d datagrams, received %d + kernel drops %d' "$sent_dgrams" "$dgrams" "$kdrops"
    fi
    echo
  done
done
