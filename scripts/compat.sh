#!/usr/bin/env bash
# Runs the compatibility tests (compat/) against real third-party clients:
# installs their Debian packages, runs `go test -json` over compat (the
# TSBS tools come from TRIBUTARY_TSBS_BIN when set, as make compat does) and
# prints a table per client and one JSON line
# {"clients":N,"passed":N,"failed":N}. Exits non-zero when a client failed.
set -uo pipefail
GO=${GO:-go}
cd "$(dirname "$0")/.."
scripts/deps.sh compat || exit 1
TRIBUTARY_COMPAT=1 $GO test -json -count=1 -p 1 -timeout 20m ${COMPAT_FLAGS:-} ./compat/ | $GO run ./compat/report
