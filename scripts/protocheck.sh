#!/usr/bin/env bash
# Lint and breaking-change checks for the Protocol Buffers API in proto/.
# The policy it enforces is docs/api-compat.md; the rules are in buf.yaml.
#
#   scripts/protocheck.sh                  lint, then buf breaking against the
#                                          newest release baseline
#   scripts/protocheck.sh release TAG [--allow-breaking]
#                                          check, then write the baseline
#                                          proto/releases/TAG.binpb
#   scripts/protocheck.sh selftest         prove the checks fail on a lint
#                                          violation and on breaking changes
#   scripts/protocheck.sh buf ARGS...      run the pinned buf in the repo root
#
# Release baselines are buf images (`buf build -o`, with source info) named
# after a semantic-version tag: proto/releases/v0.1.0.binpb. "Newest" is by
# semantic-version precedence, not by file date or name order.
#
# buf is built from the module pinned in tools/buf into bin/buf. The first
# build needs the Go module cache (or the module proxy) and takes one to a
# few minutes; later runs reuse it and need no network. buf.yaml declares no
# remote dependencies, so buf itself never contacts a registry.
#
# Environment: GO (go command), BUF (use this buf binary instead of building
# one), PROTOCHECK_ERROR_FORMAT (buf --error-format: text, json,
# github-actions, ...; default text).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
releases_rel="proto/releases"
error_format="${PROTOCHECK_ERROR_FORMAT:-text}"

die() { echo "protocheck: $*" >&2; exit 1; }

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

# ensure_buf sets $buf to a runnable buf binary, building bin/buf from
# tools/buf when it is missing or stale (`go build` relinks only when an input
# changed, so an up-to-date binary costs well under a second).
ensure_buf() {
  if [ -n "${BUF:-}" ]; then
    buf="$BUF"
    return
  fi
  local go_cmd="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
  [ -x "$go_cmd" ] || command -v "$go_cmd" >/dev/null 2>&1 ||
    die "go not found: put Go 1.26 or newer on PATH or set GO"
  buf="$root/bin/buf"
  [ -x "$buf" ] || echo "protocheck: building bin/buf from tools/buf (first build takes a few minutes)" >&2
  mkdir -p "$root/bin"
  # GOWORK=off: tools/buf is its own module, never part of a workspace.
  # -mod=readonly: never rewrite tools/buf/go.mod or go.sum here.
  if ! (cd "$root/tools/buf" && GOWORK=off \
        "$go_cmd" build -mod=readonly -o "$buf" github.com/bufbuild/buf/cmd/buf); then
    die "build buf from tools/buf failed (the first build needs the Go module cache or the module proxy)"
  fi
}

# ---- semantic versions -------------------------------------------------------

# Semantic Versioning 2.0.0 with a leading "v", without build metadata (it has
# no precedence, so two baselines could not be ordered).
semver_re='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-((0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*))?$'

is_semver() { [[ "$1" =~ $semver_re ]]; }

# semver_sort reads tags, one a line, and prints them in ascending precedence
# (semver.org, rule 11: numeric core, then a pre-release sorts before its
# release, identifiers compared numerically or in ASCII order).
semver_sort() {
  LC_ALL=C awk '
    function cmpnum(a, b) { a += 0; b += 0; return a < b ? -1 : (a > b ? 1 : 0) }
    function cmpid(a, b,   an, bn) {
      an = a ~ /^[0-9]+$/; bn = b ~ /^[0-9]+$/
      if (an && bn) return cmpnum(a, b)
      if (an) return -1
      if (bn) return 1
      return a < b ? -1 : (a > b ? 1 : 0)
    }
    function cmp(a, b,   ca, cb, pa, pb, x, y, na, nb, i, c) {
      sub(/^v/, "", a); sub(/^v/, "", b)
      i = index(a, "-"); if (i) { ca = substr(a, 1, i - 1); pa = substr(a, i + 1) } else { ca = a; pa = "" }
      i = index(b, "-"); if (i) { cb = substr(b, 1, i - 1); pb = substr(b, i + 1) } else { cb = b; pb = "" }
      split(ca, x, "."); split(cb, y, ".")
      for (i = 1; i <= 3; i++) if ((c = cmpnum(x[i], y[i])) != 0) return c
      if (pa == "" && pb == "") return 0
      if (pa == "") return 1
      if (pb == "") return -1
      na = split(pa, x, "."); nb = split(pb, y, ".")
      for (i = 1; i <= na && i <= nb; i++) if ((c = cmpid(x[i], y[i])) != 0) return c
      return cmpnum(na, nb)
    }
    NF { v[n++] = $0 }
    END {
      for (i = 1; i < n; i++) {
        t = v[i]
        for (j = i - 1; j >= 0 && cmp(v[j], t) > 0; j--) v[j + 1] = v[j]
        v[j + 1] = t
      }
      for (i = 0; i < n; i++) print v[i]
    }'
}

# list_baselines DIR prints the tags of DIR/*.binpb in ascending precedence,
# and fails on a baseline whose name is not a tag (a typo would otherwise
# silently drop it from "newest").
list_baselines() {
  local dir="$1" f tag tags=()
  [ -d "$dir" ] || return 0
  for f in "$dir"/*.binpb; do
    [ -e "$f" ] || continue
    tag="$(basename "$f" .binpb)"
    is_semver "$tag" || die "$f: baseline name is not a vMAJOR.MINOR.PATCH[-PRERELEASE] tag"
    tags+=("$tag")
  done
  [ ${#tags[@]} -eq 0 ] || printf '%s\n' "${tags[@]}" | semver_sort
}

# newest_baseline DIR prints the newest tag in DIR, or nothing.
newest_baseline() {
  local all
  all="$(list_baselines "$1")" || exit 1
  [ -z "$all" ] || printf '%s\n' "$all" | tail -n 1
}

# ---- checks --------------------------------------------------------------------

# run_lint WS lints the buf workspace WS.
run_lint() {
  echo "== buf lint"
  (cd "$1" && "$buf" lint --error-format "$error_format")
}

# run_breaking WS TAG checks WS against WS/proto/releases/TAG.binpb.
run_breaking() {
  local image="$releases_rel/$2.binpb"
  echo "== buf breaking against $2 ($image)"
  (cd "$1" && "$buf" breaking --error-format "$error_format" --against "$image")
}

# check WS: lint, then breaking against the newest baseline.
check() {
  local ws="$1" tag
  tag="$(newest_baseline "$ws/$releases_rel")"
  [ -n "$tag" ] || die "no release baseline in $releases_rel: cut the first with scripts/protocheck.sh release v0.1.0"
  run_lint "$ws" || { echo "protocheck: lint failed (rules: buf.yaml; policy: docs/api-compat.md)" >&2; return 1; }
  run_breaking "$ws" "$tag" || {
    echo "protocheck: breaking change against $tag (policy: docs/api-compat.md)" >&2
    return 1
  }
  echo "protocheck: lint clean, no breaking change against $tag"
}

# release WS TAG ALLOW_BREAKING writes WS/proto/releases/TAG.binpb after
# checking the proto against the newest existing baseline.
release() {
  local ws="$1" tag="$2" allow="$3" dir="$1/$releases_rel" newest out tmp
  is_semver "$tag" || die "release: $tag is not a vMAJOR.MINOR.PATCH[-PRERELEASE] tag"
  out="$dir/$tag.binpb"
  [ ! -e "$out" ] || die "release: $releases_rel/$tag.binpb already exists; a published baseline is never rewritten"
  newest="$(newest_baseline "$dir")"
  if [ -n "$newest" ]; then
    [ "$(printf '%s\n%s\n' "$newest" "$tag" | semver_sort | tail -n 1)" = "$tag" ] ||
      die "release: $tag is not newer than the newest baseline $newest"
    run_lint "$ws" || die "release: lint failed; fix it before cutting $tag"
    if ! run_breaking "$ws" "$newest"; then
      [ "$allow" = 1 ] || die "release: breaking change against $newest; see docs/api-compat.md (--allow-breaking only after review)"
      echo "protocheck: release: breaking change against $newest accepted with --allow-breaking" >&2
    fi
  else
    run_lint "$ws" || die "release: lint failed; fix it before cutting $tag"
  fi
  mkdir -p "$dir"
  tmp="$(mktemp "$dir/.$tag.XXXXXX")"
  # Source info stays in: buf breaking refuses an --against image without it.
  if ! (cd "$ws" && "$buf" build -o "$tmp#format=binpb"); then
    rm -f "$tmp"
    die "release: buf build failed"
  fi
  chmod 0644 "$tmp" # mktemp creates 0600
  mv "$tmp" "$out"
  echo "protocheck: wrote $releases_rel/$tag.binpb; commit it with the release"
}

# ---- selftest ------------------------------------------------------------------

st_pass=0
st_fail=0
st_ok() { st_pass=$((st_pass + 1)); echo "ok   $1"; }
st_bad() { st_fail=$((st_fail + 1)); echo "FAIL $1"; [ -z "${2:-}" ] || printf '%s\n' "$2" | sed 's/^/     /'; }

# edit FILE OLD NEW replaces the one line equal to OLD; it fails when OLD is
# not there exactly once, so a stale edit cannot make a case pass vacuously.
edit() {
  local file="$1" old="$2" new="$3" n
  n="$(grep -cxF -- "$old" "$file" || true)"
  [ "$n" = 1 ] || { echo "selftest: $file: expected exactly one line '$old', found $n" >&2; return 1; }
  OLD="$old" NEW="$new" awk '$0 == ENVIRON["OLD"] { if (ENVIRON["NEW"] != "") print ENVIRON["NEW"]; next } { print }' \
    "$file" > "$file.new" && mv "$file.new" "$file"
}

# expect_violation NAME RULE CMD... runs CMD in a fresh copy of the pristine
# workspace after the case's edits (a function named by $setup) and requires
# buf's "violations found" exit status (100) with RULE among the violations.
# Any other failure (for example a proto that no longer compiles) fails the
# case: it would prove nothing about the rule.
expect_violation() {
  local name="$1" rule="$2" setup="$3" ws out rc
  shift 3
  ws="$st_dir/$name"
  cp -R "$st_dir/pristine" "$ws"
  if ! (cd "$ws" && "$setup"); then st_bad "$name: setup failed"; return; fi
  rc=0
  out="$(cd "$ws" && "$buf" "$@" --error-format json 2>&1)" || rc=$?
  if [ "$rc" -ne 100 ]; then
    st_bad "$name: want exit 100 (violations) with $rule, got exit $rc" "$out"
  elif ! grep -qF "\"type\":\"$rule\"" <<<"$out"; then
    st_bad "$name: violations found, but not $rule" "$out"
  else
    st_ok "$name: $rule"
  fi
}

# expect_ok NAME CMD... requires CMD to succeed in the pristine workspace.
expect_ok() {
  local name="$1" out
  shift
  if out="$(cd "$st_dir/pristine" && "$@" 2>&1)"; then st_ok "$name"; else st_bad "$name" "$out"; fi
}

# expect_fail NAME WANT CMD... requires CMD to fail with WANT in its output.
expect_fail() {
  local name="$1" want="$2" out
  shift 2
  if out="$(cd "$st_dir/pristine" && "$@" 2>&1)"; then
    st_bad "$name: succeeded, want failure with '$want'" "$out"
  elif ! grep -qF -- "$want" <<<"$out"; then
    st_bad "$name: failed without '$want'" "$out"
  else
    st_ok "$name"
  fi
}

v1=proto/tributary/v1/tributary.proto

# Breaking changes, each caught by a different FILE rule.
mut_renumber() { edit "$v1" '  string value = 2;' '  string value = 20;'; }
mut_type() { edit "$v1" '  int64 limit_series = 9;' '  string limit_series = 9;'; }
mut_rename_field() { edit "$v1" '  int64 accepted = 1;' '  int64 accepted_points = 1;'; }
mut_rename_enum_value() { edit "$v1" '  AGGREGATE_LAST = 7;' '  AGGREGATE_NEWEST = 7;'; }
# Wire- and JSON-compatible, but deletes a method from generated clients and
# servers: the reason buf.yaml uses FILE rather than WIRE_JSON.
mut_delete_rpc() { edit "$v1" '  rpc Status(StatusRequest) returns (StatusResponse);' ''; }
# Lint violations.
mut_camel_field() { printf '\nmessage Extra {\n  string camelCase = 1;\n}\n' >> "$v1"; }
# The v1 exceptions in buf.yaml must not cover new packages.
mut_v2_enum() {
  mkdir -p proto/tributary/v2
  printf 'syntax = "proto3";\n\npackage tributary.v2;\n\nenum Kind {\n  KIND_UNSPECIFIED = 0;\n  GAUGE = 1;\n}\n' \
    > proto/tributary/v2/kind.proto
}
mut_add_field() { edit "$v1" 'message SeriesRequest {' $'message SeriesRequest {\n  int64 limit_points = 5;'; }

# check_json runs check with JSON output, so a case can look for a rule id.
# It runs in the command substitution's subshell: error_format is not changed
# for the caller.
check_json() { error_format=json; check "$1"; }

selftest() {
  st_dir="$(mktemp -d)"
  trap 'rm -rf "$st_dir"' EXIT
  local p="$st_dir/pristine"
  mkdir -p "$p"
  cp "$root/buf.yaml" "$p/"
  local f
  while IFS= read -r f; do
    mkdir -p "$p/$(dirname "$f")"
    cp "$root/$f" "$p/$f"
  done < <(cd "$root" && find proto -name '*.proto')
  (cd "$p" && "$buf" build -o "$st_dir/base.binpb") || die "selftest: the current proto does not build"
  mkdir -p "$p/$releases_rel"
  cp "$st_dir/base.binpb" "$p/$releases_rel/v0.0.1.binpb"

  # The unmodified proto must pass, or the failures below would prove nothing.
  expect_ok "pristine lint and breaking" check "$p"

  expect_violation renumber-field FIELD_NO_DELETE mut_renumber breaking --against "$releases_rel/v0.0.1.binpb"
  expect_violation change-field-type FIELD_SAME_TYPE mut_type breaking --against "$releases_rel/v0.0.1.binpb"
  expect_violation rename-field FIELD_SAME_NAME mut_rename_field breaking --against "$releases_rel/v0.0.1.binpb"
  expect_violation rename-enum-value ENUM_VALUE_SAME_NAME mut_rename_enum_value breaking --against "$releases_rel/v0.0.1.binpb"
  expect_violation delete-rpc RPC_NO_DELETE mut_delete_rpc breaking --against "$releases_rel/v0.0.1.binpb"
  expect_violation lint-camel-case-field FIELD_LOWER_SNAKE_CASE mut_camel_field lint
  expect_violation lint-exceptions-scoped-to-v1 ENUM_VALUE_PREFIX mut_v2_enum lint

  # Semantic-version order, not name order; pre-releases before releases.
  local got want="v0.2.0-rc.1 v0.2.0 v0.10.0 v1.0.0-alpha v1.0.0-alpha.1 v1.0.0-alpha.beta v1.0.0-beta.2 v1.0.0-beta.11 v1.0.0-rc.1 v1.0.0"
  got="$(printf '%s\n' v1.0.0 v0.10.0 v1.0.0-rc.1 v1.0.0-beta.11 v0.2.0 v1.0.0-alpha.beta v1.0.0-alpha \
    v0.2.0-rc.1 v1.0.0-beta.2 v1.0.0-alpha.1 | semver_sort | tr '\n' ' ')"
  if [ "$got" = "$want " ]; then st_ok "semver order"; else st_bad "semver order" "got  $got"$'\n'"want $want"; fi
  local bad
  for bad in 1.0.0 v1.0 v01.0.0 v1.0.0-01 v1.0.0+build v1.0.0-; do
    if is_semver "$bad"; then st_bad "semver rejects $bad"; else st_ok "semver rejects $bad"; fi
  done

  # release mode: refuses what it must, then writes a baseline that becomes
  # the newest.
  expect_fail "release rejects a non-tag" "not a vMAJOR.MINOR.PATCH" release "$p" 0.2.0 0
  expect_fail "release refuses to rewrite a baseline" "already exists" release "$p" v0.0.1 0
  expect_fail "release refuses an older tag" "not newer" release "$p" v0.0.1-rc.1 0
  (cd "$p" && mut_renumber)
  expect_fail "release refuses a breaking change" "breaking change against v0.0.1" release "$p" v0.1.0 0
  cp "$root/$v1" "$p/$v1"
  (cd "$p" && mut_add_field)
  expect_ok "release after a compatible change" release "$p" v0.1.0 0
  got="$(newest_baseline "$p/$releases_rel")"
  if [ "$got" = v0.1.0 ]; then st_ok "new baseline is the newest"; else st_bad "new baseline is the newest" "got $got"; fi
  # The new baseline holds the added field: removing it again is breaking.
  cp "$root/$v1" "$p/$v1"
  expect_fail "check against the new baseline" '"type":"FIELD_NO_DELETE"' check_json "$p"

  echo "selftest: $st_pass passed, $st_fail failed"
  [ "$st_fail" -eq 0 ]
}

# ---- main ----------------------------------------------------------------------

mode="${1:-check}"
[ $# -eq 0 ] || shift
case "$mode" in
  check)
    [ $# -eq 0 ] || die "check takes no arguments"
    ensure_buf
    check "$root"
    ;;
  release)
    [ $# -ge 1 ] && [ $# -le 2 ] || die "usage: scripts/protocheck.sh release TAG [--allow-breaking]"
    tag="$1"
    shift
    allow=0
    case "${1:-}" in
      "") ;;
      --allow-breaking) allow=1 ;;
      *) die "release: unknown flag $1" ;;
    esac
    ensure_buf
    release "$root" "$tag" "$allow"
    ;;
  selftest)
    [ $# -eq 0 ] || die "selftest takes no arguments"
    ensure_buf
    selftest
    ;;
  buf)
    ensure_buf
    cd "$root"
    exec "$buf" "$@"
    ;;
  help | -h | --help) usage ;;
  *) usage >&2; exit 2 ;;
esac
