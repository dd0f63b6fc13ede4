#!/usr/bin/env bash
# Runs a real single-node Apache Kafka broker (KRaft, broker+controller in one JVM) from the
# Maven Central jars, bound to 127.0.0.1, for the integration tests and local runs. No Docker.
#
#   kafka.sh fetch    copy the broker's jars into $KAFKA_HOME/lib once (mvn, scripts/kafka/pom.xml)
#   kafka.sh start    format the storage if new, start the broker, wait until it serves
#   kafka.sh stop     stop the broker started from $KAFKA_DATA (TERM, then KILL after 30 s)
#   kafka.sh status   exit 0 and print the bootstrap address when the broker runs
#   kafka.sh env      print FLOWZERO_KAFKA_BROKERS=127.0.0.1:PORT
#   kafka.sh clean    stop, then remove $KAFKA_DATA
#
# Environment (several runs may share a machine, so everything is configurable):
#   KAFKA_PORT             client listener port (default 19092); "auto" picks a free pair of
#                          ports at start and remembers it in $KAFKA_DATA/port
#   KAFKA_CONTROLLER_PORT  KRaft controller port (default KAFKA_PORT+1)
#   KAFKA_HOME             jar cache (default .cache/kafka)
#   KAFKA_DATA             data, config, log and pid of this broker (default $KAFKA_HOME/run-$KAFKA_PORT)
#   KAFKA_HEAP             JVM heap (default 512m)
#   KAFKA_START_TIMEOUT    seconds to wait for "Kafka Server started" (default 120)
# stop/start keep the data (the outage tests restart the broker); start on a fresh directory formats it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
KAFKA_PORT=${KAFKA_PORT:-19092}
KAFKA_HOME=${KAFKA_HOME:-$root/.cache/kafka}
KAFKA_DATA=${KAFKA_DATA:-$KAFKA_HOME/run-$KAFKA_PORT}
KAFKA_HEAP=${KAFKA_HEAP:-512m}
KAFKA_START_TIMEOUT=${KAFKA_START_TIMEOUT:-120}
lib=$KAFKA_HOME/lib
pidfile=$KAFKA_DATA/kafka.pid
logfile=$KAFKA_DATA/kafka.log

log() { echo "kafka: $*" >&2; }

# need stops with what to install when a tool the broker needs is missing.
need() {
  command -v "$1" >/dev/null || { log "$1 not found: install $2"; exit 1; }
}

port_busy() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# An "auto" port is chosen once, at the start on a fresh data directory, and reused by the
# later commands (and restarts) on the same directory.
if [ "$KAFKA_PORT" = auto ]; then
  if [ -f "$KAFKA_DATA/port" ]; then
    KAFKA_PORT=$(cat "$KAFKA_DATA/port")
  elif [ "${1:-}" = start ]; then
    for _ in $(seq 1 50); do
      p=$((20000 + RANDOM % 20000))
      if ! port_busy "$p" && ! port_busy $((p + 1)); then KAFKA_PORT=$p; break; fi
    done
    [ "$KAFKA_PORT" != auto ] || { log "no free port found"; exit 1; }
    mkdir -p "$KAFKA_DATA"
    echo "$KAFKA_PORT" >"$KAFKA_DATA/port"
  else
    KAFKA_PORT=0 # nothing was started from this directory
  fi
fi
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}

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
  [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

write_config() {
  mkdir -p "$KAFKA_DATA"
  cat >"$KAFKA_DATA/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$KAFKA_DATA/data
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
min.insync.replicas=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
log.retention.hours=24
PROPS
  cat >"$KAFKA_DATA/log4j2.properties" <<'PROPS'
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

java_cmd() {
  java "-Xms$KAFKA_HEAP" "-Xmx$KAFKA_HEAP" -XX:+UseG1GC -Djava.awt.headless=true \
    "-Dlog4j2.configurationFile=$KAFKA_DATA/log4j2.properties" -cp "$lib/*" "$@"
}

start() {
  fetch
  need java "Java 17 or later (Debian: apt install openjdk-17-jre-headless)"
  if running; then
    log "already running (pid $(cat "$pidfile")) on 127.0.0.1:$KAFKA_PORT"
    return 0
  fi
  for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
    if port_busy "$p"; then
      log "port 127.0.0.1:$p is already in use by another process; set KAFKA_PORT/KAFKA_CONTROLLER_PORT"
      exit 1
    fi
  done
  local start=$SECONDS
  write_config
  if [ ! -f "$KAFKA_DATA/data/meta.properties" ]; then
    local id
    id=$(java_cmd kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)
    java_cmd kafka.tools.StorageTool format -t "$id" -c "$KAFKA_DATA/server.properties" >"$KAFKA_DATA/format.log" 2>&1 || {
      cat "$KAFKA_DATA/format.log" >&2
      exit 1
    }
  fi
  : >"$logfile"
  # setsid: the broker gets its own process group, so a Ctrl-C in make does not kill it halfway
  # and stop() still finds it by its pid.
  setsid bash -c 'exec "$@"' kafka java "-Xms$KAFKA_HEAP" "-Xmx$KAFKA_HEAP" -XX:+UseG1GC \
    -Djava.awt.headless=true "-Dlog4j2.configurationFile=$KAFKA_DATA/log4j2.properties" \
    -cp "$lib/*" kafka.Kafka "$KAFKA_DATA/server.properties" >>"$logfile" 2>&1 </dev/null &
  echo $! >"$pidfile"
  local deadline=$((SECONDS + KAFKA_START_TIMEOUT))
  while ! grep -q 'Kafka Server started' "$logfile"; do
    if ! running; then
      log "broker exited during startup; last lines of $logfile:"
      tail -40 "$logfile" >&2
      rm -f "$pidfile"
      exit 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      log "not started after ${KAFKA_START_TIMEOUT} s; stopping it. Last lines of $logfile:"
      tail -40 "$logfile" >&2
      stop
      exit 1
    fi
    sleep 0.2
  done
  log "started on 127.0.0.1:$KAFKA_PORT (pid $(cat "$pidfile"), $((SECONDS - start)) s, data $KAFKA_DATA)"
}

stop() {
  if ! running; then
    rm -f "$pidfile"
    return 0
  fi
  local pid
  pid=$(cat "$pidfile")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "pid $pid still alive after 30 s, killing it"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
  fi
  rm -f "$pidfile"
  log "stopped (pid $pid)"
}

case "${1:-}" in
  fetch) fetch ;;
  start) start ;;
  stop) stop ;;
  status)
    if running; then echo "127.0.0.1:$KAFKA_PORT"; else log "not running"; exit 1; fi ;;
  env) echo "FLOWZERO_KAFKA_BROKERS=127.0.0.1:$KAFKA_PORT" ;;
  clean) stop; rm -rf "$KAFKA_DATA" ;;
  *) sed -n '2,20p' "$0" >&2; exit 2 ;;
esac
