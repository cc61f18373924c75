#!/usr/bin/env bash
# Runs the local docker-compose cluster of deploy/compose: 3 coordinators, 3
# edge nodes replicating to them and a load generator writing to the edges.
#
#   scripts/cluster.sh up     build what is missing, make the cluster's CA and
#                             certificates if missing, start the cluster, wait
#                             for a raft leader and for every edge's data to
#                             be held by the coordinators, check that the
#                             coordinators' cluster and intake ports speak TLS
#                             with their certificates, then query c1 for
#                             points written to the edges and print them
#   scripts/cluster.sh down   remove the containers, the network, the volumes
#                             and the certificates (CLUSTER_RMI=1: the two
#                             images too)
#   scripts/cluster.sh check  only the wait, the TLS check and the query of `up`
#
# `up` builds the static amd64 binary dist/tributary-linux-amd64
# (scripts/release.sh build, RELEASE_TARGETS=amd64) when it is missing or
# predates --replicate-insecure-anywhere (after changing the code, run that
# build again), the pure-Go load generator (CGO_ENABLED=0) every time, and
# then (cheaply when nothing changed) the FROM-scratch images
# tributary-cluster:local (deploy/Dockerfile) and
# tributary-cluster-loadgen:local (deploy/compose/Dockerfile.loadgen) from
# dist/compose. Nothing is pulled. docker.io and docker-compose are installed
# with apt-get when missing.
#
# Mutual TLS: `up` makes, with openssl, two CAs, the cluster CA (signs the
# coordinators c1..c3) and the edge CA (signs the edges e1..e3), and one
# ECDSA certificate per node (each names its node id as its DNS SAN, for
# server and client use) in dist/compose/tls, once per cluster: a cluster
# that is up keeps its certificates; `down` deletes them with the volumes.
# The directory is private to you (0700); the compose file mounts each
# node's files into its container at /tls. Coordinators trust the cluster
# CA on their cluster port and the edge CA on their intake; edges trust the
# cluster CA (the coordinators' server certificates).
#
# Environment:
#   GO                          the go command (default: go on PATH, else /usr/local/go/bin/go)
#   TRIBUTARY_CLUSTER_GRPC_PORT c1's gRPC port on 127.0.0.1 (default 17070)
#   TRIBUTARY_CLUSTER_HTTP_PORT c1's HTTP port on 127.0.0.1 (default 17071)
#   TRIBUTARY_CLUSTER_SERIES    sensors the load generator writes per edge (default 64)
#   CLUSTER_TIMEOUT             seconds to wait for the cluster (default 240)
#   CLUSTER_RMI                 1: `down` also removes the images
set -euo pipefail
cd "$(dirname "$0")/.."

go_cmd="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
project=tributary-cluster
compose_file=deploy/compose/docker-compose.yml
ctx=dist/compose
bin=dist/tributary-linux-amd64
image="${TRIBUTARY_CLUSTER_IMAGE:-tributary-cluster:local}"
loadgen_image="${TRIBUTARY_CLUSTER_LOADGEN_IMAGE:-tributary-cluster-loadgen:local}"
grpc_addr="127.0.0.1:${TRIBUTARY_CLUSTER_GRPC_PORT:-17070}"
http_addr="127.0.0.1:${TRIBUTARY_CLUSTER_HTTP_PORT:-17071}"
timeout="${CLUSTER_TIMEOUT:-240}"
edges=(e1 e2 e3)
coordinators=(c1 c2 c3)
tls_dir="$ctx/tls"

say() { echo "cluster: $*" >&2; }
die() { say "$*"; exit 1; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

apt_install() {
  say "installing $*"
  as_root apt-get update -qq || say "apt-get update reported errors; carrying on with the lists it has"
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

need_docker() {
  command -v docker >/dev/null || apt_install docker.io
  command -v docker-compose >/dev/null || apt_install docker-compose
  command -v python3 >/dev/null || die "python3 missing (docker-compose needs it too)"
  command -v openssl >/dev/null || apt_install openssl
  docker info >/dev/null 2>&1 || die "the docker daemon does not answer (start it, or add yourself to the docker group)"
}

# quiet runs a command and shows its output only when it fails (the classic
# builder warns on every build that it is deprecated).
quiet() {
  local out
  out="$("$@" 2>&1)" || { echo "$out" >&2; die "failed: $*"; }
}

compose() { docker-compose -p "$project" -f "$compose_file" "$@"; }

build() {
  local start=$SECONDS
  # The static binary, rebuilt when it predates the query tunnels the
  # coordinators reach the edges through (an older dist/ from `make release`).
  if [ ! -x "$bin" ] || ! "$bin" node -h 2>&1 | grep -q -- --query-tunnel; then
    say "building $bin (scripts/release.sh build, amd64 only)"
    RELEASE_TARGETS=amd64 GO="$go_cmd" scripts/release.sh build
  fi
  mkdir -p "$ctx/data"
  chmod 0750 "$ctx/data"
  cp -f "$bin" "$ctx/tributary-linux-amd64"
  CGO_ENABLED=0 GOOS=linux GOARCH=amd64 "$go_cmd" build -trimpath -ldflags '-s -w' \
    -o "$ctx/loadgen" ./bench/internal/loadgen/cmd/loadgen
  # Two COPYs each; the builder's cache makes a rebuild of unchanged files
  # a no-op (same image id, containers kept).
  quiet docker build -q -f deploy/Dockerfile --build-arg TARGETARCH=amd64 \
    --build-arg VERSION="$("$bin" version | awk '{print $2}')" -t "$image" "$ctx"
  quiet docker build -q -f deploy/compose/Dockerfile.loadgen -t "$loadgen_image" "$ctx"
  say "images $image ($(docker image inspect -f '{{.Size}}' "$image" | numfmt --to=iec)) and $loadgen_image ($(docker image inspect -f '{{.Size}}' "$loadgen_image" | numfmt --to=iec)) ready in $((SECONDS - start)) s"
}

# certs makes the two CAs and a certificate per node in $tls_dir, unless
# they are there: the running containers use them.
certs() {
  local n ca all=("${coordinators[@]}" "${edges[@]}") missing=0
  for n in ca edge-ca "${all[@]}"; do
    [ -s "$tls_dir/$n.crt" ] || missing=1
  done
  [ $missing = 1 ] || return 0
  say "making the cluster and edge CAs and certificates for ${all[*]} in $tls_dir (openssl, ECDSA P-256, 1 year)"
  rm -rf "$tls_dir"
  mkdir -p "$tls_dir"
  chmod 0700 "$tls_dir"
  # Two CAs: a certificate issued to an edge must not pass the handshake
  # of a coordinator's cluster port (coordinators refuse to start with one
  # CA for both unless --allow-shared-ca).
  quiet openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$tls_dir/ca.key" -out "$tls_dir/ca.crt" -days 365 -subj "/CN=tributary compose cluster CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
  quiet openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$tls_dir/edge-ca.key" -out "$tls_dir/edge-ca.crt" -days 365 -subj "/CN=tributary compose edge CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
  for n in "${all[@]}"; do
    ca=ca
    [[ " ${edges[*]} " == *" $n "* ]] && ca=edge-ca
    # The node id is the first (only) DNS SAN: coordinators check it
    # against --id and the edge's node id; the compose host name is the same.
    printf 'subjectAltName=DNS:%s\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n' "$n" >"$tls_dir/$n.ext"
    quiet openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -keyout "$tls_dir/$n.key" -out "$tls_dir/$n.csr" -subj "/CN=$n"
    quiet openssl x509 -req -in "$tls_dir/$n.csr" -CA "$tls_dir/$ca.crt" -CAkey "$tls_dir/$ca.key" \
      -set_serial "0x$(openssl rand -hex 16)" -days 365 -extfile "$tls_dir/$n.ext" -out "$tls_dir/$n.crt"
    rm -f "$tls_dir/$n.csr" "$tls_dir/$n.ext"
  done
  # The containers run as uid 65532, which must read its key through the
  # bind mount; the directory's 0700 keeps other local users out.
  chmod 0644 "$tls_dir"/*.crt "$tls_dir"/c?.key "$tls_dir"/e?.key
  chmod 0600 "$tls_dir/ca.key" "$tls_dir/edge-ca.key"
}

# check_tls fails unless every coordinator's cluster (7444) and intake
# (7443) port completes a TLS handshake with a certificate that the
# cluster's CA signed for that coordinator's name, with a client
# certificate from the CA that port trusts (the cluster CA on 7444, the
# edge CA on 7443), and refuses a client that presents no certificate; the
# cluster port must also refuse an edge's certificate.
check_tls() {
  local c ip port client out
  for c in "${coordinators[@]}"; do
    ip="$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$(compose ps -q "$c")")"
    [ -n "$ip" ] || die "no address for $c"
    for port in 7444 7443; do
      client=e1
      [ "$port" = 7444 ] && client=c1
      out="$(openssl s_client -connect "$ip:$port" -CAfile "$tls_dir/ca.crt" -verify_hostname "$c" \
        -verify_return_error -cert "$tls_dir/$client.crt" -key "$tls_dir/$client.key" -brief </dev/null 2>&1)" ||
        die "$c:$port: no TLS handshake with a certificate for $c from the cluster CA (client $client): $out"
      # Without a client certificate the server ends the connection (TLS
      # 1.3 sends that alert after the handshake: wait a second for it).
      out="$(sleep 1 | openssl s_client -connect "$ip:$port" -CAfile "$tls_dir/ca.crt" -brief 2>&1)" &&
        die "$c:$port accepted a client without a certificate: $out"
      grep -q "certificate required" <<<"$out" || die "$c:$port: refused a client without a certificate, but not for that: $out"
    done
    # An edge's certificate is from a CA the cluster port does not trust.
    out="$(sleep 1 | openssl s_client -connect "$ip:7444" -CAfile "$tls_dir/ca.crt" \
      -cert "$tls_dir/e1.crt" -key "$tls_dir/e1.key" -brief 2>&1)" &&
      die "$c:7444 accepted an edge's certificate: $out"
    grep -qi "unknown ca\|bad certificate" <<<"$out" || die "$c:7444: refused an edge's certificate, but not for its CA: $out"
  done
  say "mutual TLS: c1..c3 present certificates from the cluster CA on their cluster and intake ports, refuse clients without one, and refuse edges' certificates on the cluster port"
}

# fleet prints c1's GET /api/v1/fleet summary: "LEADER EDGE=HELD_POINTS ...".
fleet() {
  curl -fsS --max-time 5 "http://$http_addr/api/v1/fleet" 2>/dev/null | python3 -c '
import json, sys
f = json.load(sys.stdin)
held = {n["id"]: sum(r.get("points", 0) for r in n.get("held") or []) for n in f.get("nodes") or [] if n.get("role") == "edge"}
print(f["raft"]["leader"], " ".join("%s=%d" % kv for kv in sorted(held.items())))
'
}

# wait_ready waits until c1 sees a raft leader and every edge has points
# held by the coordinators (shipped and acknowledged, not only queryable on
# the edge).
wait_ready() {
  local start=$SECONDS line leader ok e
  while :; do
    line="$(fleet || true)"
    if [ -n "$line" ]; then
      leader="${line%% *}"
      ok=1
      for e in "${edges[@]}"; do
        [[ " $line " =~ \ $e=([0-9]+)\  ]] && [ "${BASH_REMATCH[1]}" -gt 0 ] || ok=0
      done
      if [ "$leader" != 0 ] && [ $ok = 1 ]; then
        say "raft leader is member $leader; points held for the edges: ${line#* } ($((SECONDS - start)) s)"
        return 0
      fi
    fi
    if [ $((SECONDS - start)) -ge "$timeout" ]; then
      compose ps >&2 || true
      compose logs --tail 20 >&2 || true
      die "no leader or no replicated edge data after $timeout s (c1 fleet: ${line:-no answer})"
    fi
    sleep 2
  done
}

# check queries c1 for the newest sample of one sensor on every edge, and
# for the number of points per edge of the last 10 minutes; it fails unless
# every edge is in both answers.
check() {
  local out e
  wait_ready
  check_tls
  say "query through c1 ($grpc_addr): newest temperature of sensor s0 of dev-0000, per edge"
  out="$("$bin" query --addr "$grpc_addr" --timeout 30s --since 10m --last \
    'temperature{device="dev-0000",sensor="s0"}')" || die "query through c1 failed"
  echo "$out"
  for e in "${edges[@]}"; do
    grep -q "edge=\"\?$e\"\?" <<<"$out" || die "the answer through c1 has no series of edge $e"
  done
  say "query through c1: points per edge in the last 10 minutes"
  out="$("$bin" query --addr "$grpc_addr" --timeout 30s --since 10m --step 10m --fn count --agg sum --by edge \
    '{__name__=~"temperature|humidity|pressure|voltage"}')" || die "count query through c1 failed"
  echo "$out"
  for e in "${edges[@]}"; do
    grep -q "$e" <<<"$out" || die "the count through c1 has no edge $e"
  done
  say "cluster is up: c1 answers with data written to e1, e2 and e3 (gRPC $grpc_addr, HTTP http://$http_addr)"
}

up() {
  local start=$SECONDS
  need_docker
  build
  certs
  say "starting the cluster (docker-compose -p $project up -d)"
  compose up -d
  check
  say "up in $((SECONDS - start)) s; stop with: make cluster-down"
}

down() {
  local start=$SECONDS
  need_docker
  compose down -v --remove-orphans
  rm -rf "$tls_dir"
  if [ "${CLUSTER_RMI:-0}" = 1 ]; then
    docker image rm "$image" "$loadgen_image" >/dev/null 2>&1 || true
  fi
  say "down in $((SECONDS - start)) s (containers, network, volumes and certificates removed)"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  check) need_docker; check ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
