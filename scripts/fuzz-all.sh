#!/usr/bin/env bash
# Runs every fuzz target of the main module (func FuzzXxx in *_test.go, outside bench/) for a
# short time, starting from its seed corpus (f.Add seeds and testdata/fuzz). A crash fails the
# run and leaves the crasher in the package's testdata/fuzz folder.
#   FUZZTIME  how long each target runs (default 5s)
#   FUZZTAGS  extra build tags
# New inputs are minimized for at most 100 runs: with the default (up to 60 s each) a short
# run spends its time minimizing large seeds instead of fuzzing.
# Go before 1.27 can fail a run with a bare "context deadline exceeded" when -fuzztime ends
# while a worker is mid-call (golang/go#75804): no input is written and nothing crashed. Such
# a run is retried once, and counted as a flake, not a failure, if it happens again.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-5s}
fail=0
count=0
while IFS= read -r file; do
  dir=$(dirname "$file")
  for name in $(grep -oE '^func (Fuzz[A-Za-z0-9_]*)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(/\1/'); do
    count=$((count + 1))
    echo "fuzz: ./$dir $name ($FUZZTIME)"
    log=$(mktemp "${TMPDIR:-/tmp}/fuzz-$name.XXXXXX.log")
    for attempt in 1 2; do
      if go test ${FUZZTAGS:+-tags "$FUZZTAGS"} -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 100x -parallel 2 "./$dir" >"$log" 2>&1; then
        break
      fi
      if grep -q 'context deadline exceeded' "$log" && ! grep -qE 'Failing input written|panic:|_test.go:[0-9]+:' "$log"; then
        if [ $attempt = 1 ]; then
          echo "fuzz: $name stopped with the fuzztime deadline race (golang/go#75804), retrying"
          continue
        fi
        echo "fuzz: $name hit the deadline race twice, no failing input: counted as a flake"
        break
      fi
      echo "FAIL: fuzz ./$dir $name (whole log: $log)"; tail -30 "$log"
      fail=1
      log= # kept for the whole story
      break
    done
    [ -z "$log" ] || rm -f "$log"
  done
done < <(git ls-files --cached --others --exclude-standard -- '*_test.go' | grep -v '^bench/' | xargs grep -l '^func Fuzz' 2>/dev/null | sort)
echo "fuzz: $count targets run"
exit $fail
