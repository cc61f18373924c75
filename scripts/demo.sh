#!/usr/bin/env bash
# Demo: start a Tributary node on a fresh data directory, write ten minutes of
# CAN-bus data from three vehicles to it over gRPC, run the queries a new user
# would try, then write climate readings as InfluxDB line protocol over HTTP
# and read them back with PromQL and OpenTSDB's API, and stop the node. `make demo` runs it after `make build`.
#
#   scripts/demo.sh [tribench demo flags, e.g. --vehicles 5 --minutes 30]
#
# Environment:
#   DEMO_DIR   where each run's data directory is made (default ./demo-data)
#   DEMO_PORT  loopback port for the node's gRPC listener (default: a free one)
#   DEMO_HTTP_PORT  loopback port for its HTTP listener (default: a free one)
#   BIN        the tributary binary (default bin/tributary)
set -euo pipefail
cd "$(dirname "$0")/.."

bin="${BIN:-bin/tributary}"
go_cmd="$(command -v go || echo /usr/local/go/bin/go)"
if [ ! -x "$bin" ]; then
  echo "demo: $bin not found; run 'make build' first" >&2
  exit 1
fi

# A new directory per run: the demo writes the ten minutes before now, which
# must not land behind data an earlier run wrote into the same node.
base="${DEMO_DIR:-./demo-data}"
run="$(date +%Y%m%d-%H%M%S)"
data_dir="$base/$run"
node_log="$base/$run.node.log"
mkdir -p "$data_dir"

# A loopback port nobody listens on (the node reports it if it cannot bind).
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  local candidate
  for _ in $(seq 50); do
    candidate=$((20000 + RANDOM % 12000)) # below the ephemeral range (32768+)
    if ! port_in_use "$candidate" && [ "$candidate" != "${1:-}" ]; then echo "$candidate"; return 0; fi
  done
  echo "demo: found no free loopback port" >&2
  return 1
}
port="${DEMO_PORT:-$(free_port)}"
http_port="${DEMO_HTTP_PORT:-$(free_port "$port")}"
addr="127.0.0.1:$port"
http_addr="127.0.0.1:$http_port"

node_pid=""
stop_node() {
  [ -n "$node_pid" ] || return 0
  local pid="$node_pid" status=0
  node_pid=""
  kill -TERM "$pid" 2>/dev/null || true
  # The node flushes its head to RocksDB before exiting; give it time.
  for _ in $(seq 300); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "demo: node did not exit 30 s after SIGTERM; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" || status=$?
  return "$status"
}
# Never leave a node behind, whatever happens.
trap 'stop_node || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "demo: starting $bin node on $addr (gRPC) and $http_addr (HTTP) (data $data_dir, log $node_log)"
"$bin" node --data-dir "$data_dir" --listen "$addr" --http-listen "$http_addr" \
  --wal-sync always --log-level info >"$node_log" 2>&1 &
node_pid=$!

ready=""
for _ in $(seq 300); do
  if grep -qiw ready "$node_log"; then ready=yes; break; fi
  kill -0 "$node_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$ready" ]; then
  echo "demo: the node did not become ready; last lines of $node_log:" >&2
  tail -n 20 "$node_log" >&2
  exit 1
fi

echo "demo: node ready (pid $node_pid)"
echo
"$go_cmd" run ./bench/cmd/tribench demo --addr "$addr" --http-addr "$http_addr" "$@"
echo

echo "demo: stopping the node (SIGTERM)"
if ! stop_node; then
  echo "demo: the node exited with an error; last lines of $node_log:" >&2
  tail -n 20 "$node_log" >&2
  exit 1
fi
echo "demo: data is in $data_dir (node log: $node_log)"
echo "demo: restart it with: $bin node --data-dir $data_dir --listen $addr --http-listen $http_addr"
