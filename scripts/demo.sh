#!/usr/bin/env bash
# Demo, in two acts. `make demo` runs it after `make build`.
#
# 1. `tributary local` (a coordinator and an edge node in one process) on a
#    fresh data directory: write ten minutes of CAN-bus data from three
#    vehicles over gRPC and a building's climate readings as InfluxDB line
#    protocol over HTTP, run the queries a new user would try (gRPC, PromQL,
#    OpenTSDB) through the coordinator, and wait until the coordinator holds
#    every acknowledged point (its replicated WAL segments, from the catalog).
# 2. Stop it and start the coordinator alone on its half of the data
#    directory: with the edge gone, the same queries are answered from the
#    replicated data only, and every answer is checked again.
#
#   scripts/demo.sh [tribench demo flags, e.g. --vehicles 5 --minutes 30]
#
# Environment:
#   DEMO_DIR   where each run's data directory is made (default ./demo-data)
#   DEMO_PORT  loopback port for the gRPC listener (default: a free one)
#   DEMO_HTTP_PORT  loopback port for the HTTP listener (default: a free one)
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
node_log="$base/$run.local.log"
coord_log="$base/$run.coordinator.log"
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
cluster_port="$(free_port "$port")"
intake_port="$(free_port "$http_port")"
addr="127.0.0.1:$port"
http_addr="127.0.0.1:$http_port"
cluster_addr="127.0.0.1:$cluster_port"
intake_addr="127.0.0.1:$intake_port"

node_pid=""
stop_node() {
  [ -n "$node_pid" ] || return 0
  local pid="$node_pid" status=0
  node_pid=""
  kill -TERM "$pid" 2>/dev/null || true
  # The edge flushes its head to RocksDB before exiting; give it time.
  for _ in $(seq 300); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "demo: server did not exit 30 s after SIGTERM; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" || status=$?
  return "$status"
}
# Never leave a server behind, whatever happens.
trap 'stop_node || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_ready LOG: wait until the server started last logs that it is ready.
wait_ready() {
  for _ in $(seq 300); do
    if grep -qE 'msg="[a-z]+ ready' "$1"; then return 0; fi
    kill -0 "$node_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "demo: the server did not become ready; last lines of $1:" >&2
  tail -n 20 "$1" >&2
  return 1
}

# stop_checked LOG: stop the server, showing its log if it failed.
stop_checked() {
  if ! stop_node; then
    echo "demo: the server exited with an error; last lines of $1:" >&2
    tail -n 20 "$1" >&2
    return 1
  fi
}

end_ms="$(date +%s%3N)"

echo "demo: act 1: starting $bin local on $addr (gRPC) and $http_addr (HTTP) (data $data_dir, log $node_log)"
"$bin" local --data-dir "$data_dir" --listen "$addr" --http-listen "$http_addr" \
  --cluster-listen "$cluster_addr" --intake-listen "$intake_addr" \
  --wal-sync always --wal-segment-age 2s --log-level info >"$node_log" 2>&1 &
node_pid=$!
wait_ready "$node_log"
echo "demo: local ready (pid $node_pid): writes go to the edge node, queries through the coordinator"
echo
"$go_cmd" run ./bench/cmd/tribench demo --addr "$addr" --http-addr "$http_addr" \
  --fleet-url "http://$http_addr/api/v1/fleet" --end-ms "$end_ms" "$@"
echo
echo "demo: stopping local (SIGTERM)"
stop_checked "$node_log"

echo
echo "demo: act 2: the edge is gone; starting the coordinator alone on $data_dir/coordinator (log $coord_log)"
"$bin" coordinator --id local-coordinator --raft-id 1 --data-dir "$data_dir/coordinator" --insecure-cluster \
  --peers "1=local-coordinator@$cluster_addr" --cluster-listen "$cluster_addr" --intake-listen "$intake_addr" \
  --listen "$addr" --http-listen "$http_addr" --log-level info >"$coord_log" 2>&1 &
node_pid=$!
wait_ready "$coord_log"
echo "demo: coordinator ready (pid $node_pid): every answer now comes from the replicated data"
echo
"$go_cmd" run ./bench/cmd/tribench demo --addr "$addr" --http-addr "$http_addr" --end-ms "$end_ms" --skip-write \
  --fleet-url "http://$http_addr/api/v1/fleet" "$@"
echo
echo "demo: stopping the coordinator (SIGTERM)"
stop_checked "$coord_log"
echo "demo: data is in $data_dir (edge: $data_dir/edge, coordinator: $data_dir/coordinator)"
echo "demo: restart both with: $bin local --data-dir $data_dir --listen $addr --http-listen $http_addr --cluster-listen $cluster_addr --intake-listen $intake_addr"
