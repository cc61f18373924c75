#!/usr/bin/env bash
# Installs the system packages Tributary needs to build and test, when they
# are missing. Uses apt-get directly as root, or through sudo otherwise.
#
#   scripts/deps.sh        build and test packages
#   scripts/deps.sh k8s    also etcd-server, for make k8s-test
#   scripts/deps.sh k8s-e2e also what make k8s-e2e runs a node with:
#                          etcd-server, containerd, runc,
#                          containernetworking-plugins, nftables, iproute2
#                          and docker.io (to build the images)
#   scripts/deps.sh compat also the clients of make compat (prometheus,
#                          collectd, mosquitto with its clients, python3-influxdb)
set -euo pipefail

pkgs=(librocksdb-dev libsnappy-dev liblz4-dev libzstd-dev libbz2-dev zlib1g-dev mosquitto
      protobuf-compiler libprotobuf-dev protobuf-compiler-grpc python3-grpcio python3-protobuf
      python3-influxdb prometheus prometheus-alertmanager
      gcc g++ make git)
# The 32-bit ARM type check of make test (scripts/check32.sh) uses the armel
# cross compilers unless this machine is a 32-bit ARM one itself.
case "$(dpkg --print-architecture)" in
  armel|armhf) ;;
  *) pkgs+=(gcc-arm-linux-gnueabi g++-arm-linux-gnueabi) ;;
esac
case "${1:-}" in
  "") ;;
  k8s) pkgs+=(etcd-server) ;;
  k8s-e2e) pkgs+=(etcd-server containerd runc containernetworking-plugins nftables iproute2 docker.io) ;;
  compat) pkgs+=(prometheus collectd-core mosquitto-clients python3-influxdb) ;;
  *) echo "usage: scripts/deps.sh [k8s|k8s-e2e|compat]" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
  echo "deps: Go 1.26 or newer is required (https://go.dev/doc/install); put it on PATH or in /usr/local/go" >&2
  exit 1
fi
