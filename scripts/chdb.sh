#!/usr/bin/env bash
# Fetches chDB's libchdb.so (the real ClickHouse engine as a shared library) from npm
# (@chdb/lib-linux-x64-gnu) into $CHDB_DIR (default .cache/chdb). Idempotent: a cached library
# of the pinned version is kept. No Python, no Docker. The npm package ships no C header: the
# cgo binding in store/chdb declares the few functions of the stable C API (chdb.h) it uses.
#   chdb.sh fetch   fetch once (later calls return at once)
#   chdb.sh dir     print the directory (for CGO flags)
#   CHDB_VERSION    npm version (default 26.7.3-stable.1; `npm view @chdb/lib-linux-x64-gnu versions`)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
CHDB_VERSION=${CHDB_VERSION:-26.7.3-stable.1}
CHDB_DIR=${CHDB_DIR:-$root/.cache/chdb}
pkg=@chdb/lib-linux-x64-gnu

fetch() {
  if [ -f "$CHDB_DIR/libchdb.so" ] &&
     [ "$(cat "$CHDB_DIR/VERSION" 2>/dev/null)" = "$CHDB_VERSION" ]; then
    return 0
  fi
  command -v npm >/dev/null || {
    echo "chdb: npm not found: install Node.js's npm (Debian: apt install npm)" >&2
    exit 1
  }
  local start=$SECONDS
  mkdir -p "$(dirname "$CHDB_DIR")"
  tmp=$(mktemp -d "$(dirname "$CHDB_DIR")/chdb-fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "chdb: npm pack $pkg@$CHDB_VERSION (≈180 MB)" >&2
  (cd "$tmp" && npm_config_cache="$tmp/npm-cache" npm pack --silent "$pkg@$CHDB_VERSION" >/dev/null 2>npm.log) || {
    cat "$tmp/npm.log" >&2
    echo "chdb: npm pack failed; available versions: npm view $pkg versions" >&2
    exit 1
  }
  tar -xzf "$tmp"/*.tgz -C "$tmp"
  local so
  so=$(find "$tmp/package" -name 'libchdb.so*' -type f | head -1)
  if [ -z "$so" ]; then
    echo "chdb: libchdb.so missing from the package:" >&2
    find "$tmp/package" -maxdepth 3 >&2
    exit 1
  fi
  rm -rf "$CHDB_DIR"
  mkdir -p "$CHDB_DIR"
  mv "$so" "$CHDB_DIR/libchdb.so"
  echo "$CHDB_VERSION" >"$CHDB_DIR/VERSION"
  echo "chdb: $CHDB_DIR ready in $((SECONDS - start)) s" >&2
}

case "${1:-}" in
  fetch) fetch ;;
  dir) echo "$CHDB_DIR" ;;
  *) echo "usage: $0 fetch|dir" >&2; exit 2 ;;
esac
