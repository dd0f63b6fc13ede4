#!/usr/bin/env bash
# Runs a real Apache Kafka on 127.0.0.1 from the Maven Central jars, for the integration tests
# and local runs (no Docker): one KRaft node (broker+controller in one JVM) by default, or a
# cluster of KAFKA_BROKERS such nodes, every one a voter of the controller quorum.
#
#   kafka.sh fetch           copy the broker's jars into $KAFKA_HOME/lib once (mvn, scripts/kafka/pom.xml)
#   kafka.sh start           format the storage if new, start every node, wait until each serves
#   kafka.sh stop            stop every node started from $KAFKA_DATA (TERM, then KILL after 30 s)
#   kafka.sh stop-broker I   stop node I (1..KAFKA_BROKERS) only; the others keep serving
#   kafka.sh start-broker I  start node I again (on its data) and wait until it serves
#   kafka.sh status          exit 0 and print the bootstrap list (127.0.0.1:P1,127.0.0.1:P2,...)
#                            when every node runs; exit 1 naming the nodes down otherwise
#   kafka.sh env             print FLOWZERO_KAFKA_BROKERS=<bootstrap list>
#   kafka.sh clean           stop every node (KILL after 5 s), then remove $KAFKA_DATA
#
# Environment (several runs may share a machine, so everything is configurable):
#   KAFKA_BROKERS          number of nodes (default 1; remembered in $KAFKA_DATA/brokers at start).
#                          With 3 or more, topics default to replication factor 3 and
#                          min.insync.replicas 2 (consumer offsets and transaction state too)
#   KAFKA_PORT             client listener port of node 1 (default 19092); node I listens on
#                          KAFKA_PORT+I-1. "auto" picks free ports at start and remembers them in
#                          $KAFKA_DATA/port
#   KAFKA_CONTROLLER_PORT  KRaft controller port of node 1 (default KAFKA_PORT+KAFKA_BROKERS);
#                          node I's is KAFKA_CONTROLLER_PORT+I-1
#   KAFKA_HOME             jar cache (default .cache/kafka)
#   KAFKA_DATA             data, config, log and pid of the nodes (default $KAFKA_HOME/run-$KAFKA_PORT);
#                          with several nodes, node I's are in $KAFKA_DATA/node-I
#   KAFKA_HEAP             JVM heap of each node (default 512m for one node, 256m each in a cluster)
#   KAFKA_START_TIMEOUT    seconds to wait for "Kafka Server started" (default 120)
# stop/start keep the data (the outage tests restart nodes); start on a fresh directory formats it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
KAFKA_PORT=${KAFKA_PORT:-19092}
KAFKA_HOME=${KAFKA_HOME:-$root/.cache/kafka}
KAFKA_DATA=${KAFKA_DATA:-$KAFKA_HOME/run-$KAFKA_PORT}
KAFKA_START_TIMEOUT=${KAFKA_START_TIMEOUT:-120}
lib=$KAFKA_HOME/lib

log() { echo "kafka: $*" >&2; }

# need stops with what to install when a tool the broker needs is missing.
need() {
  command -v "$1" >/dev/null || { log "$1 not found: install $2"; exit 1; }
}

port_busy() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# The node count is chosen at the first start and remembered: later commands on the same
# directory (stop-broker, status, clean) need not repeat it.
if [ -z "${KAFKA_BROKERS:-}" ]; then
  if [ -f "$KAFKA_DATA/brokers" ]; then KAFKA_BROKERS=$(cat "$KAFKA_DATA/brokers"); else KAFKA_BROKERS=1; fi
fi
case "$KAFKA_BROKERS" in
  [1-9]) ;;
  *) log "KAFKA_BROKERS must be 1 to 9, not $KAFKA_BROKERS"; exit 2 ;;
esac
n=$KAFKA_BROKERS
if [ "$n" -eq 1 ]; then KAFKA_HEAP=${KAFKA_HEAP:-512m}; else KAFKA_HEAP=${KAFKA_HEAP:-256m}; fi

# An "auto" port is chosen once, at the start on a fresh data directory, and reused by the
# later commands (and restarts) on the same directory. The 2N ports of the nodes follow it.
if [ "$KAFKA_PORT" = auto ]; then
  if [ -f "$KAFKA_DATA/port" ]; then
    KAFKA_PORT=$(cat "$KAFKA_DATA/port")
  elif [ "${1:-}" = start ]; then
    # Below the kernel's ephemeral range: a port in it can be taken by any outgoing
    # connection between this check and the broker's bind, or while a broker is stopped.
    lo=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    span=$((lo - 20000 - 2 * n))
    [ "$span" -gt 1000 ] || span=20000
    for _ in $(seq 1 50); do
      p=$((20000 + RANDOM % span)) free=1
      for q in $(seq "$p" $((p + 2 * n - 1))); do
        if port_busy "$q"; then free=0; break; fi
      done
      if [ $free = 1 ]; then KAFKA_PORT=$p; break; fi
    done
    [ "$KAFKA_PORT" != auto ] || { log "no free ports found"; exit 1; }
    mkdir -p "$KAFKA_DATA"
    echo "$KAFKA_PORT" >"$KAFKA_DATA/port"
  else
    KAFKA_PORT=0 # nothing was started from this directory
  fi
fi
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + n))}

# Per node I (1..n): its directory (the data directory itself for a single node, as before),
# client and controller ports.
node_dir() { if [ "$n" -eq 1 ]; then echo "$KAFKA_DATA"; else echo "$KAFKA_DATA/node-$1"; fi; }
node_port() { echo $((KAFKA_PORT + $1 - 1)); }
node_cport() { echo $((KAFKA_CONTROLLER_PORT + $1 - 1)); }
bootstrap() {
  local i list=
  for i in $(seq 1 "$n"); do list="$list${list:+,}127.0.0.1:$(node_port "$i")"; done
  echo "$list"
}

fetch() {
  # The stamp holds the pom's checksum, so editing the pom (a version bump) re-fetches.
  local sum
  sum=$(sha256sum "$root/scripts/kafka/pom.xml" | cut -d' ' -f1)
  if [ -f "$lib/.complete" ] && [ "$(cat "$lib/.complete")" = "$sum" ]; then
    return 0
  fi
  need mvn "Maven 3 (Debian: apt install maven)"
  local start=$SECONDS
  log "fetching broker jars from Maven Central into $lib"
  rm -rf "$lib"
  mkdir -p "$KAFKA_HOME"
  (cd "$root/scripts/kafka" &&
    mvn -q -B -Dstyle.color=never "-Dmaven.repo.local=$KAFKA_HOME/m2" \
      org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
      -DoutputDirectory="$lib" -DincludeScope=runtime)
  echo "$sum" >"$lib/.complete"
  log "$(find "$lib" -name '*.jar' | wc -l) jars in $((SECONDS - start)) s"
}

running() {
  local pidfile
  pidfile=$(node_dir "$1")/kafka.pid
  [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

write_config() {
  local i=$1 dir voters= j rf=$((n < 3 ? n : 3)) isr=$((n < 3 ? 1 : 2))
  dir=$(node_dir "$i")
  for j in $(seq 1 "$n"); do voters="$voters${voters:+,}$j@127.0.0.1:$(node_cport "$j")"; done
  mkdir -p "$dir"
  cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$(node_port "$i"),CONTROLLER://127.0.0.1:$(node_cport "$i")
advertised.listeners=PLAINTEXT://127.0.0.1:$(node_port "$i")
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data
num.partitions=1
default.replication.factor=$rf
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$isr
min.insync.replicas=$isr
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
log.retention.hours=24
# The log cleaner's dedupe buffer takes 128 MiB by default, half a 256 MiB heap: a node died at
# start with OutOfMemoryError allocating it (make test, 2026-11-27). Tests compact little.
log.cleaner.dedupe.buffer.size=16777216
PROPS
  cat >"$dir/log4j2.properties" <<'PROPS'
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.statechange.name = state.change.logger
logger.statechange.level = warn
logger.request.name = kafka.request.logger
logger.request.level = warn
PROPS
}

# format_node formats node I's storage with the cluster's ID when it is new (in the background
# for several nodes at once: each is a JVM of a few seconds).
format_node() {
  local i=$1 dir
  dir=$(node_dir "$i")
  [ ! -f "$dir/data/meta.properties" ] || return 0
  java -XX:TieredStopAtLevel=1 -Xshare:auto "-Dlog4j2.configurationFile=$dir/log4j2.properties" \
    -cp "$lib/*" kafka.tools.StorageTool format -t "$(cat "$KAFKA_DATA/cluster-id")" \
    -c "$dir/server.properties" >"$dir/format.log" 2>&1 || {
    cat "$dir/format.log" >&2
    return 1
  }
}

# cluster_id is a KRaft cluster ID: 16 random bytes in unpadded URL-safe base64, not starting
# with "-" (as StorageTool random-uuid makes them, without a JVM).
cluster_id() {
  local id=-
  while [ "${id:0:1}" = - ]; do
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
  done
  echo "$id"
}

# launch starts node I in the background; wait_started waits for it.
launch() {
  local i=$1 dir
  dir=$(node_dir "$i")
  : >"$dir/kafka.log"
  # setsid: the broker gets its own process group, so a Ctrl-C in make does not kill it halfway
  # and stop() still finds it by its pid.
  setsid bash -c 'exec "$@"' kafka java "-Xms$KAFKA_HEAP" "-Xmx$KAFKA_HEAP" -XX:+UseG1GC \
    -Djava.awt.headless=true "-Dlog4j2.configurationFile=$dir/log4j2.properties" \
    -cp "$lib/*" kafka.Kafka "$dir/server.properties" >>"$dir/kafka.log" 2>&1 </dev/null &
  echo $! >"$dir/kafka.pid"
}

wait_started() {
  local i=$1 dir deadline=$((SECONDS + KAFKA_START_TIMEOUT))
  dir=$(node_dir "$i")
  while ! grep -q 'Kafka Server started' "$dir/kafka.log"; do
    if ! running "$i"; then
      log "node $i exited during startup; last lines of $dir/kafka.log:"
      tail -40 "$dir/kafka.log" >&2
      rm -f "$dir/kafka.pid"
      return 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      log "node $i not started after ${KAFKA_START_TIMEOUT} s; last lines of $dir/kafka.log:"
      tail -40 "$dir/kafka.log" >&2
      return 1
    fi
    sleep 0.2
  done
}

# start_nodes starts the nodes given that are not running, all at once (a cluster's
# controllers need a quorum to finish starting), and waits for each; on failure it stops
# every node of the directory.
start_nodes() {
  fetch
  need java "Java 17 or later (Debian: apt install openjdk-17-jre-headless)"
  local i started=() t0=$SECONDS
  mkdir -p "$KAFKA_DATA"
  echo "$n" >"$KAFKA_DATA/brokers"
  [ -f "$KAFKA_DATA/cluster-id" ] || cluster_id >"$KAFKA_DATA/cluster-id"
  for i in "$@"; do
    if running "$i"; then
      log "node $i already running (pid $(cat "$(node_dir "$i")/kafka.pid")) on 127.0.0.1:$(node_port "$i")"
      continue
    fi
    for p in "$(node_port "$i")" "$(node_cport "$i")"; do
      if port_busy "$p"; then
        log "port 127.0.0.1:$p is already in use by another process; set KAFKA_PORT/KAFKA_CONTROLLER_PORT"
        exit 1
      fi
    done
    write_config "$i"
    started+=("$i")
  done
  local pids=()
  for i in ${started[@]+"${started[@]}"}; do
    format_node "$i" &
    pids+=($!)
  done
  for pid in ${pids[@]+"${pids[@]}"}; do wait "$pid" || exit 1; done
  for i in ${started[@]+"${started[@]}"}; do launch "$i"; done
  for i in ${started[@]+"${started[@]}"}; do
    wait_started "$i" || { stop_nodes $(seq 1 "$n"); exit 1; }
  done
  [ ${#started[@]} -gt 0 ] || return 0
  if [ "$n" -eq 1 ]; then
    log "started on 127.0.0.1:$KAFKA_PORT (pid $(cat "$KAFKA_DATA/kafka.pid"), $((SECONDS - t0)) s, data $KAFKA_DATA)"
  else
    log "started node(s) ${started[*]} of $n on $(bootstrap) ($((SECONDS - t0)) s, heap $KAFKA_HEAP each, data $KAFKA_DATA)"
  fi
}

# stop_nodes stops the nodes given: TERM to all, then KILL those alive after $grace seconds
# (30; clean, which removes the data, gives 5: the last nodes of a cluster stopped at once
# wait for a controller quorum that is gone).
grace=30
stop_nodes() {
  local i pids=() dir
  for i in "$@"; do
    dir=$(node_dir "$i")
    if running "$i"; then
      pids+=("$(cat "$dir/kafka.pid")")
      kill -TERM "${pids[-1]}" 2>/dev/null || true
    fi
  done
  for pid in ${pids[@]+"${pids[@]}"}; do
    for _ in $(seq 1 $((grace * 5))); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "pid $pid still alive after $grace s, killing it"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.5
    fi
  done
  for i in "$@"; do rm -f "$(node_dir "$i")/kafka.pid"; done
  [ ${#pids[@]} -eq 0 ] || log "stopped (pid ${pids[*]})"
}

node_arg() {
  case "${1:-}" in
    [1-9]) [ "$1" -le "$n" ] && return 0 ;;
  esac
  log "node must be 1 to $n, not '${1:-}'"
  exit 2
}

case "${1:-}" in
  fetch) fetch ;;
  start) start_nodes $(seq 1 "$n") ;;
  stop) stop_nodes $(seq 1 "$n") ;;
  stop-broker) node_arg "${2:-}"; stop_nodes "$2" ;;
  start-broker) node_arg "${2:-}"; start_nodes "$2" ;;
  status)
    down=
    for i in $(seq 1 "$n"); do running "$i" || down="$down $i"; done
    if [ -z "$down" ]; then bootstrap; elif [ "$n" -eq 1 ]; then log "not running"; exit 1; else log "node(s)$down of $n not running"; exit 1; fi ;;
  env) echo "FLOWZERO_KAFKA_BROKERS=$(bootstrap)" ;;
  clean) grace=5; stop_nodes $(seq 1 "$n"); rm -rf "$KAFKA_DATA" ;;
  *) sed -n '2,30p' "$0" >&2; exit 2 ;;
esac
