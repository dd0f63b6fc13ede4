#!/usr/bin/env bash
# Installs the console's npm dependencies (npm ci, from package-lock.json) into a directory
# of the cache keyed by the lock file's hash and the platform, and links it as
# console/frontend/node_modules. A fresh clone only needs Node and npm; a second worktree
# or a clean checkout with the same lock file reuses the installed tree without the network.
#
#   install-deps.sh CACHE_DIR   (make console-deps passes the repository's .cache)
set -euo pipefail

cache=${1:?usage: install-deps.sh CACHE_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
command -v npm >/dev/null || { echo "console: npm not found (Debian: apt install npm; Node 20.19 or later)" >&2; exit 1; }
command -v node >/dev/null || { echo "console: node not found (Debian: apt install nodejs)" >&2; exit 1; }
node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a==20&&b>=19)?0:1)' \
  || { echo "console: Node $(node --version) is too old: the build needs 20.19 or later" >&2; exit 1; }

key=$(cat "$here/package-lock.json" "$here/package.json" | sha256sum | cut -c1-16)-$(node -p 'process.platform+"-"+process.arch')
dest=$cache/console/node_modules-$key
if [ ! -d "$dest/node_modules" ]; then
  mkdir -p "$cache/console"
  tmp=$(mktemp -d "$cache/console/tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  cp "$here/package.json" "$here/package-lock.json" "$tmp/"
  echo "console: npm ci into $dest"
  (cd "$tmp" && npm ci --no-audit --no-fund --loglevel=warn --cache "$cache/npm")
  # Another worktree sharing the cache may have finished first: keep whichever is there.
  mv -T "$tmp" "$dest" 2>/dev/null || true
fi
# Trees of lock files no worktree has used for two weeks are removed.
touch "$dest"
find "$cache/console" -maxdepth 1 -name 'node_modules-*' -mtime +14 ! -path "$dest" -exec rm -rf {} + 2>/dev/null || true
link=$here/node_modules
if [ "$(readlink "$link" 2>/dev/null)" != "$dest/node_modules" ]; then
  if [ -e "$link" ] && [ ! -L "$link" ]; then
    echo "console: $link is a directory, not the cache link: remove it (rm -rf) and run make again" >&2
    exit 1
  fi
  ln -sfn "$dest/node_modules" "$link"
fi
