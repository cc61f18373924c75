#!/usr/bin/env bash
# Runs every fuzz target in the module for a while each (default 30s).
#   scripts/fuzz.sh [DURATION]
# FUZZ_PKGS limits the packages (go list patterns, default ./...);
# FUZZ_PARALLEL sets the fuzzing workers (default: one per CPU).
# FUZZ_SAVE=1 copies the inputs the fuzzer found new coverage with (the Go
# build cache keeps them) into the package's testdata/fuzz/<Target>/, at
# most FUZZ_SAVE_MAX (default 8) per target, smallest first, skipping
# those already there: a small corpus to commit.
# A target that fails stops the run (its failing input is in testdata/fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
go_cmd="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
fuzztime="${1:-30s}"
save="${FUZZ_SAVE:-0}"
save_max="${FUZZ_SAVE_MAX:-8}"
cache="$("$go_cmd" env GOCACHE)/fuzz"
module="$("$go_cmd" list -m)"
targets=0
unlisted=()
for pkg in $("$go_cmd" list ${FUZZ_PKGS:-./...}); do
  if ! list="$("$go_cmd" test -list '^Fuzz' "$pkg" 2>&1)"; then
    echo "== $pkg: cannot list its tests:"; echo "$list" | head -5
    unlisted+=("$pkg")
    continue
  fi
  for target in $(grep '^Fuzz' <<<"$list" || true); do
    echo "== $pkg $target ($fuzztime)"
    "$go_cmd" test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" ${FUZZ_PARALLEL:+-parallel "$FUZZ_PARALLEL"} "$pkg"
    targets=$((targets + 1))
    if [ "$save" = 1 ] && [ -d "$cache/$pkg/$target" ]; then
      dir="${pkg#"$module"}"; dir=".${dir}/testdata/fuzz/$target"
      mkdir -p "$dir"
      added=0
      # Smallest first; the cache names files by content hash, as go test does.
      while read -r _ f; do
        [ "$added" -ge "$save_max" ] && break
        name="$(basename "$f")"
        [ -e "$dir/$name" ] && continue
        cp "$f" "$dir/$name"
        added=$((added + 1))
      done < <(find "$cache/$pkg/$target" -type f -printf '%s %p\n' | sort -n)
      echo "   saved $added new corpus entries in $dir"
    fi
  done
done
echo "== $targets fuzz targets run for $fuzztime each"
if [ "${#unlisted[@]}" -gt 0 ]; then
  echo "== packages whose tests did not build: ${unlisted[*]}"
  exit 1
fi
