#!/usr/bin/env bash
# Runs the tests of the packages given as GOARCH=386 binaries (32-bit ints,
# as on 32-bit ARM) when this kernel runs 32-bit x86 programs. Some kernels
# are built without 32-bit support (and Go's 386 binaries crash under
# qemu-i386 7.2: "morestack on gsignal"): there the packages and their
# tests are only compiled and vetted for 386, and the script says loudly
# that they were not run.
#
#   GO=go scripts/test386.sh ./pkg/...
set -euo pipefail
GO="${GO:-go}"
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
printf 'package main\n\nfunc main() {}\n' > "$probe/main.go"
(cd "$probe" && GOARCH=386 CGO_ENABLED=0 GOFLAGS= "$GO" build -o probe main.go)
if "$probe/probe" 2>/dev/null; then
  exec env GOARCH=386 CGO_ENABLED=0 "$GO" test -count=1 "$@"
fi
echo "test386: NOT RUN: this kernel does not run 32-bit x86 programs; the packages and their tests are compiled and vetted for GOARCH=386 only"
GOARCH=386 CGO_ENABLED=0 "$GO" vet "$@"
