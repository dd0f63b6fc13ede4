#!/usr/bin/env bash
# Runs every fuzz target of the main module (func FuzzXxx in *_test.go, outside bench/) for a
# short time, starting from its seed corpus (f.Add seeds and testdata/fuzz). A crash fails the
# run and leaves the crasher in the package's testdata/fuzz folder, as go test -fuzz does.
#   FUZZTIME  how long each target runs (default 3s, as make test runs it)
#   FUZZTAGS  extra build tags
#   FUZZJOBS  how many targets run at a time (default 2), sharing the cores between them
# Each package's instrumented test binary is built once (go test -c -fuzz), in the background
# while the previous package fuzzes, and runs each of its targets from the package's folder
# with go test's corpus cache (GOCACHE/fuzz/<package>): a go test -fuzz per target would build
# and link the instrumented binary again each time, one after the other.
# New inputs are minimized for at most 100 runs: with the default (up to 60 s each) a short
# run spends its time minimizing large seeds instead of fuzzing.
# Go before 1.27 can fail a run with a bare "context deadline exceeded" when -fuzztime ends
# while a worker is mid-call (golang/go#75804): no input is written and nothing crashed. Such
# a run is retried once, and counted as a flake, not a failure, if it happens again.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
FUZZTIME=${FUZZTIME:-3s}
GO=${GO:-go}
module=$($GO list -m)
fuzzcache="$($GO env GOCACHE)/fuzz"
bindir=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-bin.XXXXXX")

# The packages holding fuzz targets, then each package's targets.
dirs=$(git ls-files --cached --others --exclude-standard -- '*_test.go' | grep -v '^bench/' \
  | xargs grep -l '^func Fuzz' 2>/dev/null | xargs -n1 dirname | sort -u)
binary() { echo "$bindir/$(echo "$1" | tr / _).test"; }
# The builder leaves BIN.ok or BIN.failed (with the compiler's output) for each package in turn.
(
  for dir in $dirs; do
    bin=$(binary "$dir")
    if $GO test -c -fuzz . ${FUZZTAGS:+-tags "$FUZZTAGS"} -o "$bin" "./$dir" >"$bin.log" 2>&1; then
      touch "$bin.ok"
    else
      mv "$bin.log" "$bin.failed"
    fi
  done
) &
builder=$!
trap 'kill $builder 2>/dev/null || true; wait; rm -rf "$bindir"' EXIT

# fuzz_one DIR NAME BIN runs one target and prints its lines when it ends (targets run side
# by side, so their lines are not interleaved); its exit status is the target's result.
fuzz_one() {
  local dir=$1 name=$2 bin=$3 out log attempt status=0
  out="fuzz: ./$dir $name ($FUZZTIME)"
  log=$(mktemp "${TMPDIR:-/tmp}/fuzz-$name.XXXXXX.log")
  for attempt in 1 2; do
    if (cd "$root/$dir" && "$bin" -test.run '^$' -test.fuzz "^${name}\$" -test.fuzztime "$FUZZTIME" \
        -test.fuzzminimizetime 100x -test.parallel "$workers" -test.timeout 10m \
        -test.fuzzcachedir "$fuzzcache/$module/$dir") >"$log" 2>&1; then
      break
    fi
    if grep -q 'context deadline exceeded' "$log" && ! grep -qE 'Failing input written|panic:|_test.go:[0-9]+:' "$log"; then
      if [ "$attempt" = 1 ]; then
        out+=$'\n'"fuzz: $name stopped with the fuzztime deadline race (golang/go#75804), retrying"
        continue
      fi
      out+=$'\n'"fuzz: $name hit the deadline race twice, no failing input: counted as a flake"
      break
    fi
    out+=$'\n'"FAIL: fuzz ./$dir $name (whole log: $log)"$'\n'"$(tail -30 "$log")"
    status=1
    log= # kept for the whole story
    break
  done
  [ -z "$log" ] || rm -f "$log"
  echo "$out"
  return $status
}

# FUZZJOBS targets run at a time, each with cores/FUZZJOBS workers (at least one): on 2
# cores, two targets of one worker each.
jobs=${FUZZJOBS:-2}
workers=$(( $(nproc) / jobs )); [ "$workers" -ge 1 ] || workers=1
fail=0
count=0
pids=()
start=$SECONDS
# reap waits for one running target (not the builder) and records its result.
reap() {
  local rc=0 done_pid=
  wait -n -p done_pid "${pids[@]}" || rc=$?
  local left=() p
  for p in "${pids[@]}"; do [ "$p" = "$done_pid" ] || left+=("$p"); done
  pids=("${left[@]}")
  [ $rc = 0 ] || fail=1
}
for dir in $dirs; do
  names=$(cat "$dir"/*_test.go | grep -oE '^func (Fuzz[A-Za-z0-9_]*)\(' | sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(/\1/' | sort)
  bin=$(binary "$dir")
  while [ ! -e "$bin.ok" ] && [ ! -e "$bin.failed" ]; do
    kill -0 $builder 2>/dev/null || [ -e "$bin.ok" ] || [ -e "$bin.failed" ] || { echo "FAIL: fuzz: the builder stopped before ./$dir"; exit 1; }
    sleep 0.1
  done
  if [ -e "$bin.failed" ]; then
    echo "FAIL: fuzz ./$dir: the fuzz test binary does not build:"; cat "$bin.failed"
    fail=1
    continue
  fi
  for name in $names; do
    count=$((count + 1))
    [ "${#pids[@]}" -lt "$jobs" ] || reap
    fuzz_one "$dir" "$name" "$bin" &
    pids+=($!)
  done
done
while [ "${#pids[@]}" -gt 0 ]; do reap; done
echo "fuzz: $count targets run in $((SECONDS - start))s"
exit $fail
