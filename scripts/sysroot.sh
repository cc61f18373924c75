#!/usr/bin/env bash
# Prepares cross-compilation for Tributary's static release builds: the cross
# C/C++ compiler for each target and a sysroot with the target's RocksDB and
# compression libraries (static archives and headers).
#
#   scripts/sysroot.sh arm64 armhf armel    # Debian architecture names
#
# The target's libraries come from Debian's archive for that architecture:
# the -dev packages are fetched with `apt-get download` and unpacked with
# `dpkg -x` into dist/sysroot/<arch>/. Nothing is installed for the foreign
# architecture: `apt-get install librocksdb-dev:arm64` would remove the amd64
# librocksdb-dev that normal builds link against. What this script changes on
# the machine is: the foreign architecture is added to dpkg (so that apt knows
# its package lists), and the cross compilers are installed (native amd64
# packages). Both with apt-get, as root or through sudo.
#
# A sysroot is rebuilt only when the candidate versions of its packages
# change: dist/sysroot/<arch>/.packages records what it was made from.
#
# Environment:
#   SYSROOT_DIR  where the sysroots go (default dist/sysroot)
set -euo pipefail
cd "$(dirname "$0")/.."

# The static link needs exactly these: librocksdb.a and the compression
# libraries Debian's RocksDB was built with (it references all five). Not
# needed, although librocksdb-dev depends on it: libgflags-dev (only RocksDB's
# command-line tools use gflags). libstdc++ and glibc come from the cross g++.
dev_pkgs=(librocksdb-dev libsnappy-dev liblz4-dev libzstd-dev libbz2-dev zlib1g-dev)
# The RocksDB release the Go binding (grocksdb v1.7.11) is written against.
want_rocksdb="7.8"

root="${SYSROOT_DIR:-dist/sysroot}"
cleanup_dir=""
trap '[ -z "$cleanup_dir" ] || rm -rf "$cleanup_dir"' EXIT

say() { echo "sysroot: $*" >&2; }
die() { say "$*"; exit 1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# triplet ARCH prints the GNU triplet of a Debian architecture.
triplet() {
  case "$1" in
    arm64) echo aarch64-linux-gnu ;;
    armhf) echo arm-linux-gnueabihf ;;
    armel) echo arm-linux-gnueabi ;;
    amd64) echo x86_64-linux-gnu ;;
    *) die "unsupported architecture '$1' (want arm64, armhf or armel)" ;;
  esac
}

apt_updated=""
apt_update() {
  [ -z "$apt_updated" ] || return 0
  apt_updated=yes
  say "apt-get update"
  # A mirror that is mid-sync for one list makes apt-get update exit non-zero
  # while every list this script needs is fine; the candidate checks below
  # decide whether what we need is known.
  as_root apt-get update -qq || say "apt-get update reported errors; carrying on with the lists it has"
}

# ensure_cross_compilers ARCH... installs the missing cross gcc and g++.
ensure_cross_compilers() {
  local arch tri pkgs=() p
  for arch in "$@"; do
    [ "$arch" = "$(dpkg --print-architecture)" ] && continue
    tri="$(triplet "$arch")"
    for p in "gcc-$tri" "g++-$tri"; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || pkgs+=("$p")
    done
  done
  [ ${#pkgs[@]} -eq 0 ] && return 0
  apt_update
  say "installing ${pkgs[*]}"
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
}

# ensure_foreign_archs ARCH... adds the architectures dpkg does not know yet,
# then fetches the package lists once.
ensure_foreign_archs() {
  local arch added=""
  for arch in "$@"; do
    [ "$arch" = "$(dpkg --print-architecture)" ] && continue
    dpkg --print-foreign-architectures | grep -qx "$arch" && continue
    say "adding architecture $arch to dpkg (package lists only; nothing is installed for it)"
    as_root dpkg --add-architecture "$arch"
    added=yes
  done
  if [ -n "$added" ]; then
    apt_updated=""
    apt_update
  fi
}

# candidates ARCH prints "pkg:arch=version" for each of dev_pkgs, one a line,
# in dev_pkgs order, or "pkg:arch=" for one apt knows no candidate for. One
# apt-cache call: each takes a second or two with several architectures.
candidates() {
  local arch="$1" p
  local specs=()
  for p in "${dev_pkgs[@]}"; do specs+=("$p:$arch"); done
  apt-cache policy "${specs[@]}" 2>/dev/null | awk -v order="${specs[*]}" '
    /^[^ ]/ { pkg = $1; sub(/:$/, "", pkg) }
    /Candidate:/ { if ($2 != "(none)") v[pkg] = $2 }
    END { n = split(order, o, " "); for (i = 1; i <= n; i++) print o[i] "=" v[o[i]] }'
}

build_sysroot() {
  local arch="$1" tri dest stamp want p tmp
  tri="$(triplet "$arch")"
  dest="$root/$arch"
  stamp="$dest/.packages"

  want="$(candidates "$arch")"
  if grep -q '=$' <<<"$want"; then
    apt_update
    want="$(candidates "$arch")"
  fi
  p="$(grep '=$' <<<"$want" | tr '\n' ' ')" || true
  [ -z "$p" ] || die "apt knows no candidate for ${p% }: check the apt sources and run apt-get update"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    say "$dest is up to date"
    return 0
  fi

  say "building $dest from ${dev_pkgs[*]} ($arch)"
  mkdir -p "$root"
  tmp="$(mktemp -d "$root/.tmp-$arch.XXXXXX")"
  cleanup_dir="$tmp"
  mkdir -p "$tmp/debs" "$tmp/root"
  # Pinned to the versions checked above, so the stamp tells the truth.
  local specs
  mapfile -t specs <<<"$want"
  # As root, apt-get download cannot drop to its sandbox user in a directory
  # that user may not write; it says so and downloads as root, which is what
  # this option asks for without the warning.
  local sandbox=()
  [ "$(id -u)" -eq 0 ] && sandbox=(-o APT::Sandbox::User=root)
  (cd "$tmp/debs" && apt-get "${sandbox[@]}" download -qq "${specs[@]}") ||
    die "apt-get download ${specs[*]} failed"
  for p in "$tmp"/debs/*.deb; do
    dpkg-deb -x "$p" "$tmp/root"
  done

  local lib="$tmp/root/usr/lib/$tri" a
  for a in librocksdb.a libsnappy.a liblz4.a libzstd.a libbz2.a libz.a; do
    [ -f "$lib/$a" ] || die "$a missing from the unpacked packages (looked in ${lib#"$tmp/root"})"
  done
  local vh="$tmp/root/usr/include/rocksdb/version.h" major minor
  [ -f "$vh" ] || die "rocksdb/version.h missing from librocksdb-dev:$arch"
  major="$(awk '/#define ROCKSDB_MAJOR/ { print $3 }' "$vh")"
  minor="$(awk '/#define ROCKSDB_MINOR/ { print $3 }' "$vh")"
  [ "$major.$minor" = "$want_rocksdb" ] ||
    die "librocksdb-dev:$arch is RocksDB $major.$minor; the Go binding needs $want_rocksdb"

  echo "$want" >"$tmp/root/.packages"
  rm -rf "$dest"
  mv "$tmp/root" "$dest"
  rm -rf "$tmp"
  cleanup_dir=""
  say "$dest ready (RocksDB $major.$minor)"
}

[ $# -gt 0 ] || { echo "usage: scripts/sysroot.sh ARCH... (arm64, armhf, armel)" >&2; exit 2; }
for arch in "$@"; do
  triplet "$arch" >/dev/null
done
for tool in dpkg dpkg-deb apt-get apt-cache; do
  command -v "$tool" >/dev/null || die "$tool not found: cross builds need a Debian-based machine"
done
ensure_cross_compilers "$@"
ensure_foreign_archs "$@"
for arch in "$@"; do
  build_sysroot "$arch"
done
