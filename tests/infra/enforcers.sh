# Sourced by the real node's NetworkPolicy enforcer scripts (netpol.sh, kuberouter.sh): what both do the same
# way. Needs the caller's log() and die(), GO and CACHE_ROOT; the plane helpers need PLANE_STATE (the real-node
# plane's state folder: ports.env, pki/).

# go_build_cached LABEL CACHE_SUBDIR BIN PACKAGE@VERSION INSTALLED_NAME GO_MIN: `go install` PACKAGE into BIN
# (static, trimmed, nice), once per cache: a second caller waits on the build lock and finds it cached.
go_build_cached() {
  local label="$1" sub="$2" bin="$3" pkg="$4" built="$5" go_min="$6"
  local dir; dir="$(dirname "$(dirname "$bin")")"
  if [[ -x "$bin" ]]; then log "$label cached: $dir"; return; fi
  [[ -x "$GO" ]] || die "go not found and no cached $label in $dir (needs Go >= $go_min)"
  mkdir -p "$CACHE_ROOT/$sub"
  exec 6>"$CACHE_ROOT/$sub/.build.lock"; flock 6
  if [[ -x "$bin" ]]; then log "$label cached: $dir"; return; fi
  export GOFLAGS="-trimpath -buildvcs=false -gcflags=all=-dwarf=false" CGO_ENABLED=0 GOTOOLCHAIN=local
  local t=$SECONDS tmp; tmp="$(mktemp -d "$CACHE_ROOT/$sub/.build.XXXXXX")"
  log "building $label (go install $pkg)"
  GOBIN="$tmp/bin" nice -n "${HETERO_BUILD_NICE:-10}" "$GO" install -ldflags "-s -w" "$pkg"
  mkdir -p "$(dirname "$bin")"; mv "$tmp/bin/$built" "$bin"; rm -rf "$tmp"
  log "TIMING build $label $((SECONDS - t))s"
}

# apt_ensure COMMAND PACKAGE: install PACKAGE when COMMAND is missing (tests/run.sh installs both enforcers'
# tools in its foreground apt step; this is for a script run on its own)
apt_ensure() {
  command -v "$1" >/dev/null && return 0
  log "apt-get install $2"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null 2>&1 || {
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null || die "apt-get install $2 failed"
  }
}

# kernel_config: the running kernel's configuration (/proc/config.gz), empty where it is not exposed
kernel_config() { [[ -r /proc/config.gz ]] && zcat /proc/config.gz 2>/dev/null || true; }

# plane_port, curl_admin, apply: the real-node plane's API as its admin
plane_port() { sed -n 's/^APISERVER_PORT=//p' "$PLANE_STATE/ports.env"; }
curl_admin() {
  local d="$PLANE_STATE/pki"
  curl -sf --max-time 10 --cacert "$d/ca.crt" --cert "$d/admin.crt" --key "$d/admin.key" "$@"
}
apply() {  # apply <collection path under the API> <json>: create, or leave it as it is when it exists
  local code
  code="$(curl_admin -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
          "https://127.0.0.1:$(plane_port)$1" -d "$2" || true)"
  [[ "$code" == 201 || "$code" == 409 ]] || die "POST $1 answered HTTP ${code:-nothing}"
}
