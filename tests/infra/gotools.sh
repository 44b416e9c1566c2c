#!/usr/bin/env bash
# gotools.sh - the ecosystem's own checkers that the tests run, built from the Go module proxy.
#
#   cosign     github.com/sigstore/cosign/v2  (cosign verify-blob-attestation: the bundle's attestations)
#   actionlint github.com/rhysd/actionlint    (the GitHub Actions example in docs/ci/)
#
# Built at pinned versions into $HETERO_CACHE/tools/<tool>-<version>/bin (default ~/.cache/pytest-hetero),
# keyed by version like kubeplane.sh: a warm cache needs no Go toolchain and no network.
# Usage: tests/infra/gotools.sh {build [TOOL…] | path TOOL | env}
#   build  build what is not cached yet (all tools by default), printing TIMING lines
#   path   print the binary's path (exit 1 when it is not built)
#   env    print `export HETERO_COSIGN=… HETERO_ACTIONLINT=…` for the tools that are built
set -euo pipefail

COSIGN_VERSION="v2.6.1"       # github.com/sigstore/cosign/v2; go.mod says go 1.24
ACTIONLINT_VERSION="v1.7.12"  # github.com/rhysd/actionlint

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
CACHE_ROOT="${HETERO_CACHE:-$HOME/.cache/pytest-hetero}"

log() { printf '[gotools %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

version_of() {
  case "$1" in
    cosign) echo "$COSIGN_VERSION" ;;
    actionlint) echo "$ACTIONLINT_VERSION" ;;
    *) die "unknown tool $1 (cosign, actionlint)" ;;
  esac
}
package_of() {
  case "$1" in
    cosign) echo "github.com/sigstore/cosign/v2/cmd/cosign@$COSIGN_VERSION" ;;
    actionlint) echo "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION" ;;
  esac
}
bin_path() { echo "$CACHE_ROOT/tools/$1-$(version_of "$1")/bin/$1"; }

build_one() {
  local tool="$1" out tmp t
  out="$(bin_path "$tool")"
  if [[ -x "$out" ]]; then log "$tool $(version_of "$tool") cached at $out"; return 0; fi
  [[ -x "$GO" ]] || die "go not found and $tool is not cached at $out (install Go >= 1.24 or set GO=)"
  tmp="$(dirname "$out").tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  t=$SECONDS
  log "building $tool $(version_of "$tool") from the Go module proxy (slow on few cores)"
  # static binary, no VCS stamping; nice: the build shares the machine with running tests
  GOFLAGS="-trimpath -buildvcs=false -mod=mod -gcflags=all=-dwarf=false" CGO_ENABLED=0 GOTOOLCHAIN=local GOBIN="$tmp" \
    nice -n 10 "$GO" install -ldflags "-s -w" "$(package_of "$tool")"
  mkdir -p "$(dirname "$out")"
  mv "$tmp/$tool" "$out"
  rm -rf "$tmp"
  log "TIMING $tool build: $((SECONDS - t))s"
}

case "${1:-}" in
  build)
    shift
    tools=("$@")
    [[ ${#tools[@]} -gt 0 ]] || tools=(actionlint cosign)
    for tool in "${tools[@]}"; do build_one "$tool"; done
    ;;
  path)
    p="$(bin_path "${2:?tool}")"
    [[ -x "$p" ]] || exit 1
    echo "$p"
    ;;
  env)
    for tool in cosign actionlint; do
      p="$(bin_path "$tool")"
      [[ -x "$p" ]] && echo "export HETERO_${tool^^}=$p"
    done
    ;;
  *) die "usage: $0 {build [TOOL…]|path TOOL|env}" ;;
esac
