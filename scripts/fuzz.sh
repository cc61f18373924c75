#!/usr/bin/env bash
# Runs every fuzz target in the module for a while each (default 30s).
#   scripts/fuzz.sh [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
go_cmd="$(command -v go || echo /usr/local/go/bin/go)"
fuzztime="${1:-30s}"
for pkg in $("$go_cmd" list ./...); do
  for target in $("$go_cmd" test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "== $pkg $target ($fuzztime)"
    "$go_cmd" test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
  done
done
