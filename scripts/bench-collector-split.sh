#!/usr/bin/env bash
# Whole-process CPU of a split collector against mode: all (make bench-collector-split; not
# part of make test). On a real broker (scripts/kafka.sh), replays the same generated NetFlow v9
# pcap (flowzero demo --write-pcap) on loopback at fixed rates into
#   all          one `flowzero collect` (mode: all) producing flows to the Kafka flows topic;
#   split[:C]    an inlet process (mode: inlet, datagrams topic compressed with C, default: the
#                inlet's default) and an outlet process (mode: outlet) producing the same flows
#                to the same kind of flows topic;
# in rounds that alternate the modes (their order reversed every other round), and prints per
# run the datagrams and flows sent, received, produced and dropped (kernel and counted) and the
# CPU (utime+stime from /proc: every thread, Go runtime, GC, franz-go and its compression
# included) of each process per datagram and per flow, then the medians per mode and rate and
# the ratio split/all. Before reading the CPU it waits for the whole run to drain: every
# datagram received or counted dropped, the outlet's consumer lag 0 (datagrams consumed =
# datagrams the inlet delivered), every flow produced acknowledged or counted dropped. The
# accounting is checked exactly: a run whose counts do not add up is flagged (sent = received +
# kernel drops; received = forwarded + collector drops; forwarded = delivered + inlet drops;
# delivered = consumed; flows = produced + dropped; data sets the outlet dropped are shown).
# Also printed: the broker's CPU per flow, the bytes per datagram and per flow in the
# topics' log segments (after compression), and the datagrams per Kafka record of the inlet.
#   RATES      flows per second (default "100000 250000 500000")
#   MODES      default "all split"; e.g. "all split:lz4 split:zstd split:none split:lz4/50ms";
#              "floor" runs bench/udpfloor instead of an inlet: a process that receives the
#              datagrams as the collector does and drops them, the floor of an inlet's CPU per
#              datagram at that rate ("floor:gather=1ms" sleeps after a read as batch-wait does;
#              "floor:blocking" reads with blocking recvmmsg on locked threads, not the poller;
#              "floor:afpacket" reads an AF_PACKET ring on lo; "floor:afpacket,produce" also
#              writes the datagrams to the broker with udpfloor's minimal producer, packed as
#              the inlet packs them ("crc-by-record": its CRC32C a record at a time, as each
#              closes); block-timeout=D, linger=D and gomaxprocs=N as for split);
#              in a split mode, gomaxprocs=N sets the inlet's GOMAXPROCS and workers=N its
#              listener's workers ("split:compression=none,gomaxprocs=1,workers=1");
#              receive=af-packet and block-timeout=D set the listener's keys, in a split
#              mode or after "all:" ("all:receive=af-packet split:receive=af-packet")
#              (split:COMPRESSION[/LINGER] sets the inlet's compression and linger,
#              split:KEY=VALUE,... any keys of the inlet section: "split:key=batch,compression=none");
#              any mode may take rps=CPU ("split:compression=none,rps=1", "floor:afpacket,rps=1"):
#              for that run the kernel's receive path on lo (the replay's datagrams, the
#              af-packet ring, the broker's TCP receive and the acknowledgements) runs on CPU
#              (receive packet steering, /sys/class/net/lo/queues/rx-0/rps_cpus, root only)
#              and the inlet, the udpfloor process or mode all's collector is pinned to the
#              other CPUs: without it, loopback charges the broker's TCP receive to the process
#              that sends to it, which a real inlet's broker, on another host, does not
#              (pin=CPU pins the same process to CPU without steering, to tell the two apart);
#              a mode may end
#              with @BINARY to run another build of flowzero (a before/after comparison:
#              "all split@/tmp/base/bin/flowzero split")
#   ROUNDS     rounds of every mode and rate (default 3)
#   DURATION   seconds of replay per run (default 10)
#   PARTITIONS of the datagrams topic (default 8)
#   FLOWS_COMPRESSION  compression of the Kafka flows output in both modes (default: its default)
#   PPROF_DIR  when set, a 10 s CPU profile of each process is taken at the middle of each replay
#              into that directory (the processes serve /debug/pprof)
#   KEEP_FAILED  directory where a split run whose accounting does not add up leaves the
#              metrics of its inlet and outlet and their logs
#   RESULTS    file to keep the per-run table in (default: a temporary file)
set -euo pipefail
cd "$(dirname "$0")/.."
RATES=${RATES:-"100000 250000 500000"}
MODES=${MODES:-"all split"}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
PARTITIONS=${PARTITIONS:-8}
BIN=${BIN:-$PWD/bin/flowzero}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/flowzero-bench-split.XXXXXX")
RESULTS=${RESULTS:-$WORK/results.tsv}
PCAP=$PWD/.cache/bench/load-nfv9.pcap
PCAP_FLOWS=200000
mkdir -p "$(dirname "$PCAP")"
[ -f "$PCAP" ] || "$BIN" demo --write-pcap "$PCAP" --flows $PCAP_FLOWS --protocol netflow-v9 >/dev/null
DGRAMS_PER_PCAP=$("$BIN" decode "$PCAP" 2>&1 >/dev/null | awk '/datagrams/ {print $1}')
TCK=$(getconf CLK_TCK)
BASE=$((20000 + RANDOM % 20000))
PORT=$BASE; HPORT_A=$((BASE + 1)); HPORT_B=$((BASE + 2))
PIDS=()
RPS_FILE=/sys/class/net/lo/queues/rx-0/rps_cpus
RPS_BEFORE=$(cat "$RPS_FILE" 2>/dev/null || true)
PIN=()
cleanup() {
  [ -z "${STEERED:-}" ] || echo "$RPS_BEFORE" >"$RPS_FILE" 2>/dev/null || true
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  scripts/kafka.sh clean >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

metric() { # metric HTTP-PORT NAME: the sum of a metric's samples
  curl -fsS "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 ~ "^"m"({|$)" {s += $2} END {printf "%.0f", s}'
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
sys_ticks() { awk '{print $15}' "/proc/$1/stat"; }
wait_until() { # wait_until SECONDS WHAT COMMAND...: poll COMMAND every 0.1 s
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    if [ $SECONDS -ge $deadline ]; then echo "bench: timed out waiting for $what" >&2; return 1; fi
    sleep 0.1
  done
}
topic_bytes() { # topic_bytes PREFIX: bytes of the log segments of the topics named PREFIX* (compressed)
  find "$KAFKA_DATA/data" -path "$KAFKA_DATA/data/$1*/*.log" -printf '%s\n' | awk '{s += $1} END {printf "%.0f", s}'
}
healthy() { curl -fsS "http://127.0.0.1:$1/healthz" >/dev/null 2>&1; }
outlet_ready() { [ "$(metric "$1" flowzero_outlet_ready 2>/dev/null)" = 1 ]; }

export KAFKA_PORT=auto KAFKA_DATA="$WORK/kafka"
scripts/kafka.sh fetch >/dev/null
scripts/kafka.sh start >/dev/null
BROKER=$(scripts/kafka.sh status)
KPID=$(cat "$KAFKA_DATA/kafka.pid")

flows_output() { # the Kafka flows output section, the same in both modes
  echo "outputs:"
  echo "  file: {enabled: false}"
  echo "  kafka: {enabled: true, brokers: [\"$BROKER\"], topic-prefix: \"$1\"${FLOWS_COMPRESSION:+, compression: $FLOWS_COMPRESSION}}"
}

start() { # start CONFIG LOG: run a collector ($RUNBIN, default $BIN), its pid in $STARTED
  local pin=("${PIN[@]}")
  [ -z "${NOPIN:-}" ] || pin=()
  "${pin[@]}" "${RUNBIN:-$BIN}" collect --config "$1" 2>"$2" &
  STARTED=$!
  PIDS+=("$STARTED")
}

stop() { # stop PID
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  local keep=() p
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}

profile() { # profile HTTP-PORT NAME: a CPU profile in the background, at the middle of the replay
  [ -n "${PPROF_DIR:-}" ] || return 0
  mkdir -p "$PPROF_DIR"
  (sleep $((DURATION / 2 > 5 ? DURATION / 2 - 5 : 0))
    curl -fsS -o "$PPROF_DIR/$2.pprof" "http://127.0.0.1:$1/debug/pprof/profile?seconds=10" || true) &
}

# replay RATE: send the pcap at RATE flows/s; sets LOOPS, SENT_DGRAMS, SENT_FLOWS, WALL
replay() {
  LOOPS=$(( ($1 * DURATION + PCAP_FLOWS - 1) / PCAP_FLOWS ))
  local dgram_rate=$(( $1 * DGRAMS_PER_PCAP / PCAP_FLOWS )) t0 t1
  t0=$(date +%s.%N)
  /usr/bin/time -f '%U %S' -o "$WORK/replay.time" \
    "$BIN" replay --quiet --to "127.0.0.1:$PORT" --rate "$dgram_rate" --loop "$LOOPS" "$PCAP" >/dev/null
  t1=$(date +%s.%N)
  # The sender's CPU: on loopback it also pays the kernel's receive path up to the socket
  # buffer (or the af-packet ring), which no receiving process is charged for.
  REPLAY_NSD=$(awk -v n="$(( LOOPS * DGRAMS_PER_PCAP ))" '{printf "%.0f", ($1 + $2) * 1e9 / n}' "$WORK/replay.time")
  WALL=$(echo "$t1 - $t0" | bc -l)
  SENT_DGRAMS=$(( LOOPS * DGRAMS_PER_PCAP ))
  SENT_FLOWS=$(( LOOPS * PCAP_FLOWS ))
}

received_all() { # every datagram sent is received or a kernel drop
  [ $(( $(metric "$1" flowzero_collector_datagrams_total) + $(metric "$1" flowzero_collector_kernel_drops_total) )) -ge "$SENT_DGRAMS" ]
}
flows_settled() { # HTTP-PORT: every flow handed to the Kafka output is acknowledged or counted dropped
  local s
  s=$(metric "$1" flowzero_kafka_flows_sent_total)
  [ $(( $(metric "$1" flowzero_kafka_flows_delivered_total) + $(metric "$1" flowzero_kafka_flows_dropped_total) )) -ge "$s" ]
}
all_drained() { # mode all: every flow counted went to the Kafka output, which settled them
  [ "$(metric "$HPORT_A" flowzero_kafka_flows_sent_total)" -ge "$(metric "$HPORT_A" flowzero_collector_flows_total)" ] &&
    flows_settled "$HPORT_A"
}
inlet_settled() {
  local s
  s=$(metric "$HPORT_A" flowzero_inlet_datagrams_sent_total)
  [ $(( $(metric "$HPORT_A" flowzero_inlet_datagrams_delivered_total) + $(metric "$HPORT_A" flowzero_inlet_datagrams_dropped_total) )) -ge "$s" ]
}
outlet_drained() { # consumer lag 0: the outlet consumed every datagram the inlet delivered
  [ "$(metric "$HPORT_B" flowzero_outlet_datagrams_total)" -ge "$(metric "$HPORT_A" flowzero_inlet_datagrams_delivered_total)" ] &&
    [ "$(metric "$HPORT_B" flowzero_outlet_flows_total)" -eq "$(metric "$HPORT_B" flowzero_kafka_flows_sent_total)" ] &&
    flows_settled "$HPORT_B"
}

# Columns of $RESULTS (one line per run; cpu in ns of CPU per datagram or flow received).
echo -e "round\tmode\trate\tsent_dgrams\trecv_dgrams\tkdrops\tcdrops\tsent_flows\tflows\tproduced\tfdrops\tin_ns_dgram\tin_ns_flow\tout_ns_flow\ttotal_ns_flow\tbroker_ns_flow\tin_sys_pct\tkafka_bytes_dgram\tkafka_bytes_flow\tok\treplay_ns_dgram" >"$RESULTS"

# listener_keys SPEC: the listener's keys in a mode's spec (receive=..., block-timeout=...),
# as YAML to add to the listener; listener_rest SPEC: the spec without them.
listener_keys() { # receive=af-packet reads loopback, where the replay sends
  echo "$1" | tr ',' '\n' | grep -E '^(receive|block-timeout)=' | sed 's/=/: /; s/^/, /; s/af-packet$/af-packet, interface: lo/' | tr -d '\n' || true
}
listener_rest() { echo "$1" | tr ',' '\n' | grep -vE '^(receive|block-timeout)=' | paste -sd, - || true; }

run_all() { # run_all ROUND RATE MODE [LABEL] (all, or all:receive=af-packet,...)
  local id="a$1-$2-$RANDOM" t0 t1 k0 k1 lkeys
  local m=${3%@*}; lkeys=$(listener_keys "${m#all:}")
  cat >"$WORK/all.yaml" <<YAML
log: {level: warn}
collector:
  listeners: [{protocol: netflow, address: "127.0.0.1:$PORT", workers: 2, receive-buffer: 33554432$lkeys}]
  http: {listen: "127.0.0.1:$HPORT_A", pprof: true}
$(flows_output "$id")
YAML
  start "$WORK/all.yaml" "$WORK/all.log"; local pid=$STARTED
  wait_until 30 "the collector to serve" healthy "$HPORT_A"
  t0=$(cpu_ticks "$pid"); k0=$(cpu_ticks "$KPID")
  profile "$HPORT_A" "${3//[\/@:.]/-}-$2-r$1"
  replay "$2"
  wait_until 30 "the datagrams to be received" received_all "$HPORT_A" || true
  wait_until 120 "the flows to be produced" all_drained || true
  t1=$(cpu_ticks "$pid"); k1=$(cpu_ticks "$KPID")
  local recv kd cd flows prod fd
  recv=$(metric "$HPORT_A" flowzero_collector_datagrams_total)
  kd=$(metric "$HPORT_A" flowzero_collector_kernel_drops_total)
  cd=$(metric "$HPORT_A" flowzero_collector_dropped_total)
  flows=$(metric "$HPORT_A" flowzero_collector_flows_total)
  prod=$(metric "$HPORT_A" flowzero_kafka_flows_delivered_total)
  fd=$(metric "$HPORT_A" flowzero_kafka_flows_dropped_total)
  stop "$pid"
  local fb; fb=$(topic_bytes "$id")
  local ok=ok
  [ $((recv + kd)) -eq "$SENT_DGRAMS" ] || ok="dgrams:sent$SENT_DGRAMS!=recv$recv+kdrops$kd"
  [ $((prod + fd)) -eq "$flows" ] || ok="$ok,flows:$flows!=produced$prod+drops$fd"
  [ "$cd" -eq 0 ] && [ "$kd" -eq 0 ] && [ "$flows" -ne "$SENT_FLOWS" ] && ok="$ok,flows:sent$SENT_FLOWS!=$flows"
  local nsf=$(( (t1 - t0) * 1000000000 / TCK / (flows > 0 ? flows : 1) ))
  echo -e "$1\t${4:-$3}\t$2\t$SENT_DGRAMS\t$recv\t$kd\t$cd\t$SENT_FLOWS\t$flows\t$prod\t$fd\t-\t-\t$nsf\t$nsf\t$(( (k1 - k0) * 1000000000 / TCK / (flows > 0 ? flows : 1) ))\t-\t-\t$(( fb / (flows > 0 ? flows : 1) ))\t$ok\t$REPLAY_NSD" >>"$RESULTS"
}

run_split() { # run_split ROUND RATE MODE (split or split:COMPRESSION, without @BINARY)
  local id="s$1-$2-${3#split}-$RANDOM" spec=${3#split:} t0 t1 u0 u1 k0 k1 s0 s1 procs=
  [ "$spec" = "$3" ] && spec=
  case $spec in *gomaxprocs=*) # the inlet's GOMAXPROCS, not a key of its configuration
    procs=$(echo "$spec" | sed -E 's/.*gomaxprocs=([0-9]+).*/\1/')
    spec=$(echo "$spec" | sed -E 's/,?gomaxprocs=[0-9]+//; s/^,//') ;;
  esac
  local workers=2 lkeys
  lkeys=$(listener_keys "$spec"); spec=$(listener_rest "$spec")
  case $spec in *workers=*) # the inlet listener's workers, a key of the collector's listener
    workers=$(echo "$spec" | sed -E 's/.*workers=([0-9]+).*/\1/')
    spec=$(echo "$spec" | sed -E 's/,?workers=[0-9]+//; s/^,//') ;;
  esac
  id=${id//[:\/@.=,]/}
  local compression=${spec%%/*} linger= inlet_section=
  case $spec in */*) linger=${spec#*/} ;; esac
  [ -n "$compression$linger" ] && inlet_section="inlet: {${compression:+compression: $compression}${compression:+${linger:+, }}${linger:+linger: $linger}}"
  case $spec in *=*) inlet_section="inlet: {$(echo "$spec" | sed 's/=/: /g; s/,/, /g')}" ;; esac
  cat >"$WORK/inlet.yaml" <<YAML
log: {level: warn}
mode: inlet
collector:
  listeners: [{protocol: netflow, address: "127.0.0.1:$PORT", workers: $workers, receive-buffer: 33554432$lkeys}]
  http: {listen: "127.0.0.1:$HPORT_A", pprof: true}
datagrams: {brokers: ["$BROKER"], topic: "dg-$id", partitions: $PARTITIONS}
$inlet_section
YAML
  cat >"$WORK/outlet.yaml" <<YAML
log: {level: warn}
mode: outlet
collector:
  http: {listen: "127.0.0.1:$HPORT_B", pprof: true}
datagrams: {brokers: ["$BROKER"], topic: "dg-$id", partitions: $PARTITIONS}
outlet: {group: "g-$id", state: {topic: "st-$id"}}
$(flows_output "$id")
YAML
  GOMAXPROCS=${procs:-${GOMAXPROCS:-}} start "$WORK/inlet.yaml" "$WORK/inlet.log"; local ipid=$STARTED
  NOPIN=1 start "$WORK/outlet.yaml" "$WORK/outlet.log"; local opid=$STARTED
  wait_until 30 "the inlet to serve" healthy "$HPORT_A"
  wait_until 60 "the outlet to be ready" outlet_ready "$HPORT_B"
  t0=$(cpu_ticks "$ipid"); u0=$(cpu_ticks "$opid"); k0=$(cpu_ticks "$KPID"); s0=$(sys_ticks "$ipid")
  profile "$HPORT_A" "inlet-${4//[\/@:.]/-}-$2-r$1"; profile "$HPORT_B" "outlet-${4//[\/@:.]/-}-$2-r$1"
  replay "$2"
  wait_until 30 "the datagrams to be received" received_all "$HPORT_A" || true
  wait_until 60 "the inlet to deliver" inlet_settled || true
  t1=$(cpu_ticks "$ipid"); s1=$(sys_ticks "$ipid")
  wait_until 600 "the outlet to drain" outlet_drained || true
  u1=$(cpu_ticks "$opid"); k1=$(cpu_ticks "$KPID")
  local recv kd cd isent idel idrop odg pd flows prod fd
  recv=$(metric "$HPORT_A" flowzero_collector_datagrams_total)
  kd=$(metric "$HPORT_A" flowzero_collector_kernel_drops_total)
  cd=$(metric "$HPORT_A" flowzero_collector_dropped_total)
  isent=$(metric "$HPORT_A" flowzero_inlet_datagrams_sent_total)
  idel=$(metric "$HPORT_A" flowzero_inlet_datagrams_delivered_total)
  idrop=$(metric "$HPORT_A" flowzero_inlet_datagrams_dropped_total)
  local irec; irec=$(metric "$HPORT_A" flowzero_inlet_records_sent_total 2>/dev/null || echo 0)
  [ "${irec:-0}" -gt 0 ] && echo "round $1 $4 $2 flows/s: $(echo "scale=2; $isent / $irec" | bc) datagrams per Kafka record" >&2
  odg=$(metric "$HPORT_B" flowzero_outlet_datagrams_total)
  pd=$(( $(metric "$HPORT_B" flowzero_outlet_pending_dropped_total) + $(metric "$HPORT_B" flowzero_outlet_invalid_records_total) + $(metric "$HPORT_B" flowzero_outlet_decode_errors_total) ))
  flows=$(metric "$HPORT_B" flowzero_outlet_flows_total)
  prod=$(metric "$HPORT_B" flowzero_kafka_flows_delivered_total)
  fd=$(metric "$HPORT_B" flowzero_kafka_flows_dropped_total)
  if [ -n "${KEEP_FAILED:-}" ]; then # what a run that does not add up looked like, before stopping
    mkdir -p "$KEEP_FAILED"
    curl -fsS "http://127.0.0.1:$HPORT_A/metrics" >"$KEEP_FAILED/$id-inlet.metrics" || true
    curl -fsS "http://127.0.0.1:$HPORT_B/metrics" >"$KEEP_FAILED/$id-outlet.metrics" || true
  fi
  stop "$opid"; stop "$ipid"
  local db fb; db=$(topic_bytes "dg-$id"); fb=$(topic_bytes "$id")
  local ok=ok
  [ $((recv + kd)) -eq "$SENT_DGRAMS" ] || ok="dgrams:sent$SENT_DGRAMS!=recv$recv+kdrops$kd"
  [ $((isent + cd)) -eq "$recv" ] || ok="$ok,inlet:recv$recv!=forwarded$isent+drops$cd"
  [ $((idel + idrop)) -eq "$isent" ] || ok="$ok,inlet:forwarded$isent!=delivered$idel+drops$idrop"
  [ "$odg" -eq "$idel" ] || ok="$ok,lag:consumed$odg!=delivered$idel"
  [ $((prod + fd)) -eq "$flows" ] || ok="$ok,flows:$flows!=produced$prod+drops$fd"
  # Data sets dropped by the outlet (pending without a template, invalid records, decode
  # errors) are counted in sets or datagrams, not flows: they are shown, not converted.
  [ "$pd" -ne 0 ] && ok="$ok,outlet-dropped-sets:$pd"
  [ $((kd + cd + idrop + pd)) -eq 0 ] && [ "$flows" -ne "$SENT_FLOWS" ] && ok="$ok,flows:sent$SENT_FLOWS!=$flows"
  cd=$((cd + idrop))
  if [ -n "${KEEP_FAILED:-}" ]; then
    if [ "$ok" = ok ]; then rm -f "$KEEP_FAILED/$id"-*.metrics; else cp "$WORK/inlet.log" "$WORK/outlet.log" "$KEEP_FAILED/" && echo "bench: $ok: metrics and logs kept in $KEEP_FAILED/$id-*" >&2; fi
  fi
  local f=$((flows > 0 ? flows : 1))
  local in_nsd=$(( (t1 - t0) * 1000000000 / TCK / (recv > 0 ? recv : 1) ))
  local in_nsf=$(( (t1 - t0) * 1000000000 / TCK / f )) out_nsf=$(( (u1 - u0) * 1000000000 / TCK / f ))
  echo -e "$1\t$4\t$2\t$SENT_DGRAMS\t$recv\t$kd\t$cd\t$SENT_FLOWS\t$flows\t$prod\t$fd\t$in_nsd\t$in_nsf\t$out_nsf\t$((in_nsf + out_nsf))\t$(( (k1 - k0) * 1000000000 / TCK / f ))\t$(( (s1 - s0) * 100 / (t1 > t0 ? t1 - t0 : 1) ))\t$(( db / (idel > 0 ? idel : 1) ))\t$(( fb / f ))\t$ok\t$REPLAY_NSD" >>"$RESULTS"
}

run_floor() { # run_floor ROUND RATE MODE [LABEL]: bench/udpfloor in place of the inlet
  local spec=${3#floor} gather=0 blocking=false t0 t1 s0 s1 k0 k1 ring= args=() procs= opt
  for opt in $(echo "${spec#:}" | tr ',' ' '); do
    case $opt in
    gather=*) gather=${opt#gather=} ;;
    blocking) blocking=true ;;
    afpacket) ring=lo ;;
    block-timeout=*) args+=(-block-timeout "${opt#block-timeout=}") ;;
    linger=*) args+=(-linger "${opt#linger=}") ;;
    gomaxprocs=*) procs=${opt#gomaxprocs=} ;;
    crc-by-record) args+=(-crc-by-record) ;;
    produce) args+=(-produce "$BROKER" -topic "fl-$1-$2-$RANDOM" -partitions "$PARTITIONS") ;;
    *) echo "bench: unknown floor option $opt" >&2; exit 2 ;;
    esac
  done
  GOMAXPROCS=${procs:-${GOMAXPROCS:-}} "${PIN[@]}" "$FLOOR" -listen "127.0.0.1:$PORT" -http "127.0.0.1:$HPORT_A" -workers 2 -receive-buffer 33554432 -gather "$gather" -blocking=$blocking -afpacket "$ring" "${args[@]}" 2>"$WORK/floor.log" &
  local pid=$!; PIDS+=("$pid")
  wait_until 30 "udpfloor to serve" healthy "$HPORT_A"
  t0=$(cpu_ticks "$pid"); s0=$(sys_ticks "$pid"); k0=$(cpu_ticks "$KPID")
  replay "$2"
  wait_until 30 "the datagrams to be received" received_all "$HPORT_A" || true
  case " ${args[*]} " in *" -produce "*) wait_until 60 "the producer to deliver" inlet_settled || true ;; esac
  t1=$(cpu_ticks "$pid"); s1=$(sys_ticks "$pid"); k1=$(cpu_ticks "$KPID")
  local recv del; recv=$(metric "$HPORT_A" flowzero_collector_datagrams_total)
  del=$(metric "$HPORT_A" flowzero_inlet_datagrams_delivered_total)
  stop "$pid"
  local ok=ok broker=-
  [ "$recv" -eq "$SENT_DGRAMS" ] || ok="dgrams:sent$SENT_DGRAMS!=recv$recv"
  case " ${args[*]} " in *" -produce "*)
    [ "$del" -eq "$recv" ] || ok="$ok,delivered$del!=recv$recv"
    broker=$(( (k1 - k0) * 1000000000 / TCK / SENT_FLOWS )) ;;
  esac
  local in_nsd=$(( (t1 - t0) * 1000000000 / TCK / (recv > 0 ? recv : 1) ))
  echo -e "$1\t${4:-$3}\t$2\t$SENT_DGRAMS\t$recv\t0\t0\t$SENT_FLOWS\t-\t-\t-\t$in_nsd\t-\t-\t-\t$broker\t$(( (s1 - s0) * 100 / (t1 > t0 ? t1 - t0 : 1) ))\t-\t-\t$ok\t$REPLAY_NSD" >>"$RESULTS"
}

# steer CPU: the receive path on lo runs on CPU and the measured process on the other CPUs
# (an empty CPU: as the machine was, rps_cpus restored if a run changed it).
STEERED=
steer() {
  PIN=()
  if [ -z "$1" ]; then
    [ -z "$STEERED" ] || echo "$RPS_BEFORE" >"$RPS_FILE"
    STEERED=
    return
  fi
  STEERED=1
  local others
  others=$(seq 0 $(($(nproc) - 1)) | grep -vx "$1" | paste -sd, -)
  if [ -z "$others" ] || ! printf '%x' $((1 << $1)) >"$RPS_FILE" 2>/dev/null; then
    echo "bench: rps=$1 needs root, $RPS_FILE and more than one CPU" >&2
    exit 2
  fi
  PIN=(taskset -c "$others")
}
case " $MODES " in *" floor"*)
  FLOOR=$WORK/udpfloor
  (cd bench && go build -o "$FLOOR" ./udpfloor) ;;
esac

echo "bench: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $DGRAMS_PER_PCAP datagrams of $PCAP_FLOWS flows per pcap, broker $BROKER, results in $RESULTS" >&2
for round in $(seq "$ROUNDS"); do
  order=$MODES
  [ $((round % 2)) -eq 0 ] && order=$(echo "$MODES" | tr ' ' '\n' | tac | tr '\n' ' ')
  for rate in $RATES; do
    for mode in $order; do
      RUNBIN=
      case $mode in *@*) RUNBIN=${mode#*@} ;; esac
      run=$mode
      steer ""
      case $run in *rps=* | *pin=*)
        case $run in
        *rps=*) steer "$(echo "$run" | sed -E 's/.*rps=([0-9]+).*/\1/')" ;;
        *) PIN=(taskset -c "$(echo "$run" | sed -E 's/.*pin=([0-9]+).*/\1/')") ;;
        esac
        run=$(echo "$run" | sed -E 's/,?(rps|pin)=[0-9]+//; s/:,/:/; s/:(@|$)/\1/') ;;
      esac
      case ${run%@*} in
      all | all:*) run_all "$round" "$rate" "$run" "$mode" ;;
      split | split:*) run_split "$round" "$rate" "${run%@*}" "$mode" ;;
      floor | floor:*) run_floor "$round" "$rate" "$run" "$mode" ;;
      *) echo "bench: unknown mode $mode" >&2; exit 2 ;;
      esac
      tail -1 "$RESULTS" | awk -F'\t' '{printf "round %s %-11s %7d flows/s: sent %d dgrams, recv %d, k-drops %d, drops %d; flows %d, produced %d; inlet %s ns/dgram; ns/flow inlet %s outlet %s total %s broker %s (inlet sys %s%%); Kafka bytes/dgram %s, bytes/flow %s; replay %s ns/dgram  %s\n", $1, $2, $3, $4, $5, $6, $7, $9, $10, $12, $13, $14, $15, $16, $17, $18, $19, $21, $20}' >&2
    done
  done
done
echo "bench: load after $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# Medians per mode and rate, and the ratio of each split mode's total CPU per flow to all's.
echo
printf '%-11s %8s %4s %9s %9s %8s %8s %10s %7s %11s %11s %12s %11s %7s %8s %8s %12s\n' mode rate runs dgrams flows k-drops drops in-ns/dgram in-sys% in-ns/flow out-ns/flow total-ns/flw broker-ns/f vs-all B/dgram B/flow replay-ns/dg
awk -F'\t' 'NR > 1 { k = $2 "\t" $3; n[k]++; for (c = 4; c <= 21; c++) v[k, c, n[k]] = $c; if ($20 != "ok") bad[k]++ }
function median(k, c,   i, j, t, m, a) {
  m = n[k]; for (i = 1; i <= m; i++) a[i] = v[k, c, i]
  if (a[1] == "-") return "-"
  for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
  return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
END {
  for (k in n) { split(k, kk, "\t"); if (kk[1] == "all") base[kk[2]] = median(k, 15) }
  for (k in n) {
    split(k, kk, "\t"); r = (kk[2] in base && base[kk[2]] > 0) ? sprintf("%.2f", median(k, 15) / base[kk[2]]) : "-"
    printf "%-11s %8d %4d %9d %9d %8d %8d %10s %7s %11s %11s %12s %11s %7s %8s %8s %12s%s\n", kk[1], kk[2], n[k], median(k, 5), median(k, 9), median(k, 6), median(k, 7),
      median(k, 12), median(k, 17), median(k, 13), median(k, 14), median(k, 15), median(k, 16), r, median(k, 18), median(k, 19), median(k, 21), (k in bad) ? "  (" bad[k] " runs with accounting errors)" : ""
  }
}' "$RESULTS" | sort -k2,2n -k1,1
if [ "$RESULTS" = "$WORK/results.tsv" ]; then
  echo
  column -t -s$'\t' "$RESULTS"
fi
