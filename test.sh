#!/usr/bin/env bash
# The README's test command: installs what the tests need when it is missing
# (redis-server for the shared-state tests, promtool for the alert rules and
# prometheus for the command's alert test, both in Debian's prometheus, ip
# from iproute2 for the network namespaces of the black-hole tests,
# rsvg-convert from librsvg2-bin to render replay's timeline, spin for the
# protocol's model), then checks the model (share/model/check.sh), then runs the
# tests of every module of the workspace with the race detector, then the
# zero-allocation test of the hot paths without it (the race detector
# changes allocation counts, so under -race that test skips). A test never
# skips for a missing server: it fails, so run this script rather than a
# bare go test.
set -euo pipefail
cd "$(dirname "$0")"

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
{ command -v promtool && command -v prometheus; } >/dev/null 2>&1 || need+=(prometheus)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v rsvg-convert >/dev/null 2>&1 || need+=(librsvg2-bin)
command -v spin >/dev/null 2>&1 || need+=(spin)
if [ "${#need[@]}" -gt 0 ]; then
  echo "test.sh: installing ${need[*]} (Debian packages)" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  # RUNLEVEL=1 keeps the packages' own services from starting: the tests
  # start their own servers.
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The model of the shared-state protocol (docs/model.md): spin must find no
# violation in it and one in each broken variant.
share/model/check.sh

# Every module of go.work: "./..." at the root does not descend into the
# nested modules.
go test -race -count=1 "$@" $(go list -m -f '{{.Dir}}/...')

# The zero-allocation test: it must run and pass here; a skip fails.
alloc=TestHotPathsDoNotAllocate
if ! out=$(go test -count=1 -run "^$alloc\$" -v . 2>&1) ||
  grep -q -- '--- SKIP' <<<"$out" || ! grep -q -- "^--- PASS: $alloc " <<<"$out"; then
  echo "$out"
  echo "test.sh: $alloc must run and pass without -race" >&2
  exit 1
fi
grep -E '^(--- |ok)' <<<"$out"
