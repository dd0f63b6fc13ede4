#!/usr/bin/env bash
# Builds the Go vulnerability database that govulncheck reads (-db file://DIR) from the
# golang.org/x/vulndb module, fetched through the Go module proxy like any module: vuln.go.dev
# is not reachable from our machines, the proxy is. The module holds the OSV reports
# (data/osv/GO-*.json); its own cmd/indexdb writes them in the v1 layout govulncheck reads
# (index/db.json, index/modules.json, ID/<id>.json).
#   scripts/vulndb.sh VERSION DIR   build DIR for that module version, unless DIR/VERSION says
#                                   it is already there (quick, offline, when cached)
# The version is pinned in mk/check.mk (VULNDB_VERSION): bump it to see newer reports.
set -euo pipefail
version=${1:?usage: vulndb.sh VERSION DIR}
dir=${2:?usage: vulndb.sh VERSION DIR}
GO=${GO:-go}

if [ -f "$dir/VERSION" ] && [ "$(cat "$dir/VERSION")" = "$version" ] && [ -f "$dir/index/modules.json" ]; then
  exit 0
fi
echo "vulndb: building the vulnerability database golang.org/x/vulndb@$version into $dir"
src=$($GO mod download -json "golang.org/x/vulndb@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$src" ] || [ ! -d "$src/data/osv" ]; then
  echo "vulndb: golang.org/x/vulndb@$version has no data/osv folder (downloaded to '${src:-nowhere}')" >&2
  exit 1
fi
mkdir -p "$(dirname "$dir")"
tmp=$(mktemp -d "$(dirname "$dir")/vulndb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# indexdb runs from the module cache at the same version, so the reports and the indexer agree.
$GO run "golang.org/x/vulndb/cmd/indexdb@$version" -vulns "$src/data/osv" -out "$tmp/db"
echo "$version" > "$tmp/db/VERSION"
rm -rf "$dir"
mv "$tmp/db" "$dir"
echo "vulndb: $(ls "$dir/ID" | grep -c '\.json$') reports"
