#!/usr/bin/env bash
# Regenerates the protobuf and gRPC modules of the Python SDK from
# proto/tributary/v1/tributary.proto into sdk/python/tributary/_gen/ (or into
# the directory given as the only argument), byte for byte reproducibly.
#
# protoc writes tributary/v1/tributary_pb2.py and tributary_pb2_grpc.py with
# absolute imports ("from tributary.v1 import tributary_pb2"), which would
# collide with the SDK's own package name "tributary". This script flattens
# them into one package, tributary._gen, and rewrites:
#   - the gRPC module's import of the messages into a relative import
#     ("from . import tributary_pb2 as ..."), so the package works from any
#     location on sys.path;
#   - the module name passed to the protobuf builder, so generated classes
#     report their real module (tributary._gen.tributary_pb2), which pickle
#     and repr rely on.
# The descriptor keeps its proto path (tributary/v1/tributary.proto).
#
# Needs Debian's protoc 3.21 (package protobuf-compiler) and
# grpc_python_plugin (package protobuf-compiler-grpc); `make deps` installs
# both. Other protoc versions emit different code: the committed files are
# from 3.21.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$here/tributary/_gen}"
plugin="${GRPC_PYTHON_PLUGIN:-$(command -v grpc_python_plugin || true)}"

if ! command -v protoc >/dev/null 2>&1 || [ -z "$plugin" ] || [ ! -x "$plugin" ]; then
  echo "generate.sh: protoc and grpc_python_plugin are required: run make deps" >&2
  exit 1
fi
case "$(protoc --version)" in
  "libprotoc 3.21."*) ;;
  *) echo "generate.sh: warning: $(protoc --version) differs from the 3.21 that produced the committed code" >&2 ;;
esac

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && protoc -I proto \
  --python_out="$tmp" \
  --plugin=protoc-gen-grpc_python="$plugin" --grpc_python_out="$tmp" \
  proto/tributary/v1/tributary.proto)

mkdir -p "$out"
sed -e "s/'tributary\.v1\.tributary_pb2'/'tributary._gen.tributary_pb2'/" \
  "$tmp/tributary/v1/tributary_pb2.py" >"$out/tributary_pb2.py"
sed -e 's/^from tributary\.v1 import tributary_pb2 as /from . import tributary_pb2 as /' \
  "$tmp/tributary/v1/tributary_pb2_grpc.py" >"$out/tributary_pb2_grpc.py"
grep -q "'tributary._gen.tributary_pb2'" "$out/tributary_pb2.py" || { echo "generate.sh: module name rewrite did not apply" >&2; exit 1; }
grep -q '^from \. import tributary_pb2 as ' "$out/tributary_pb2_grpc.py" || { echo "generate.sh: import rewrite did not apply" >&2; exit 1; }
cat >"$out/__init__.py" <<'PY'
"""Generated protobuf and gRPC code for tributary.v1. DO NOT EDIT.

Produced by sdk/python/generate.sh from proto/tributary/v1/tributary.proto;
the public API of the SDK is the package tributary, not this one.
"""
PY
