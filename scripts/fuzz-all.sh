#!/usr/bin/env bash
# Runs every fuzz target of the main module (func FuzzXxx in *_test.go, outside bench/) for a
# short time, starting from its seed corpus (f.Add seeds and testdata/fuzz). A crash fails the
# run and leaves the crasher in the package's testdata/fuzz folder.
#   FUZZTIME  how long each target runs (default 5s)
#   FUZZTAGS  extra build tags
# New inputs are minimized for at most 100 runs: with the default (up to 60 s each) a short
# run spends its time minimizing large seeds instead of fuzzing.
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
    if ! go test ${FUZZTAGS:+-tags "$FUZZTAGS"} -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 100x -parallel 2 "./$dir" >"${TMPDIR:-/tmp}/fuzz-$name.log" 2>&1; then
      echo "FAIL: fuzz ./$dir $name"; tail -30 "${TMPDIR:-/tmp}/fuzz-$name.log"
      fail=1
    fi
  done
done < <(git ls-files --cached --others --exclude-standard -- '*_test.go' | grep -v '^bench/' | xargs grep -l '^func Fuzz' 2>/dev/null | sort)
echo "fuzz: $count targets run"
exit $fail
