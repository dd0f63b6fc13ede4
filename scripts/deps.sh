#!/usr/bin/env bash
# Installs the Debian packages that tests run as real programs, when one is missing:
#   faketime  (runs a program at another date: clock-shifted runs of C and C++ code)
#   chromium  (the console's browser tests)
#   snmpd, snmp (SNMP enrichment tests: a real agent, and snmpget to check it)
# Quick and silent when every command is there. As root with apt-get, it installs what is missing
# (apt-get update first) and fails if that fails; otherwise it says what to install and exits 0,
# so that the tests needing a missing program skip, saying so.
set -euo pipefail

# command → Debian package
declare -A package=(
  [faketime]=faketime
  [chromium]=chromium
  [snmpd]=snmpd
  [snmpget]=snmp
)

missing=()
for cmd in faketime chromium snmpd snmpget; do
  # snmpd lives in /usr/sbin, which is not on every user's PATH.
  if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ]; then
    missing+=("${package[$cmd]}")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "deps: missing Debian packages: ${missing[*]} (as root: apt-get install -y ${missing[*]}); the tests that need them skip" >&2
  exit 0
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -qq || ! apt-get install -y -qq "${missing[@]}" >/dev/null; then
  echo "deps: apt-get install ${missing[*]} failed" >&2
  exit 1
fi
