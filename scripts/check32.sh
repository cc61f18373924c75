#!/usr/bin/env bash
# Type-checks every package of the module, tests included, as 32-bit ARM
# code (GOARCH=arm GOARM=6, the Pi Zero and Pi 1): a constant that overflows
# a 32-bit int, or an int64 given where an int is wanted, fails here instead
# of in `make release`. It runs `go vet`, which compiles nothing for the
# target beyond type information and links nothing, so no ARM RocksDB is
# needed: cgo only reads RocksDB's C header, which is the same on every
# architecture, through a directory holding nothing but that header's
# folder (the build machine's other headers must not reach a cross
# compiler).
#
#   scripts/check32.sh [packages]      default ./...
#
# Environment: GO (the go command). The cross compilers come from
# scripts/deps.sh (gcc-arm-linux-gnueabi, g++-arm-linux-gnueabi); on a
# 32-bit ARM machine its own compilers are used.
set -euo pipefail
cd "$(dirname "$0")/.."

go_cmd="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
cc=arm-linux-gnueabi-gcc cxx=arm-linux-gnueabi-g++
case "$(dpkg --print-architecture 2>/dev/null || true)" in
  armel|armhf) cc=gcc cxx=g++ ;;
esac
command -v "$cc" >/dev/null || { echo "check32: $cc not found: run scripts/deps.sh" >&2; exit 1; }
[ -f /usr/include/rocksdb/c.h ] || { echo "check32: /usr/include/rocksdb/c.h not found: run scripts/deps.sh" >&2; exit 1; }

inc="$(mktemp -d "${TMPDIR:-/tmp}/tributary-check32.XXXXXX")"
trap 'rm -rf "$inc"' EXIT
ln -s /usr/include/rocksdb "$inc/rocksdb"

[ $# -gt 0 ] || set -- ./...
echo "32-bit ARM (GOARM=6) type check of $*"
CGO_ENABLED=1 GOOS=linux GOARCH=arm GOARM=6 CC="$cc" CXX="$cxx" \
  CGO_CFLAGS="-isystem $inc" CGO_CXXFLAGS="-isystem $inc" \
  "$go_cmd" vet "$@"
