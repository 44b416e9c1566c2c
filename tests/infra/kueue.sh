#!/usr/bin/env bash
# kueue.sh - a REAL Kueue controller manager on the real-node plane (tests/infra/realnode.sh).
#
# Built from the Go module proxy (sigs.k8s.io/kueue/cmd/kueue), cached by version; CRDs and webhook
# manifests copied from the same module's config/components; the manager runs out of cluster with the
# plane's admin kubeconfig, its webhooks served on 127.0.0.1 with a certificate signed by the plane CA,
# and the webhook / CRD-conversion configurations pointing at that URL (the plane has no kube-proxy).
# Only the batch/job integration is enabled (see kueue_manifests.py for what is changed and why).
#
# Usage: tests/infra/kueue.sh {build|start|stop|status}
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# ---- pinned version (changing it changes the cache key) -------------------------------------------
# The newest release the Go module proxy serves here (v0.20.x is refused, 403); serves
# kueue.x-k8s.io v1beta1 (deprecated) and v1beta2 (storage). go.mod: go 1.26.0, k8s.io/* v0.36.2.
KUEUE_VERSION="v0.19.2"
KUEUE_COMMIT="8eab68778fc1b52affe165fdf5af29d1e9b4f3cb"   # the proxy's .info Origin.Hash for the tag
FRAMEWORKS="batch/job"
# VisibilityOnDemand off: its API server would need an APIService the plane cannot route to.
# UnadmittedWorkloadsObservability (Beta, off by default in v0.19): the granular QuotaReserved
# reasons (WaitingForQuota, ExceedsMaxQuota, NoMatchingFlavor, ...) instead of "Pending".
FEATURE_GATES="${HETERO_KUEUE_FEATURE_GATES:-VisibilityOnDemand=false,UnadmittedWorkloadsObservability=true}"

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
CACHE_ROOT="${HETERO_CACHE:-$HOME/.cache/pytest-hetero}"
RN_STATE="${HETERO_REALNODE_STATE:-/tmp/hetero-realnode}"
PLANE_STATE="$RN_STATE/plane"
STATE="$RN_STATE/kueue"
# The manager reads its metrics serving cert from this fixed path when internal cert management is
# off (cmd/kueue/main.go); it is the one file this script writes outside its state dir.
METRICS_CERT_DIR="/etc/kueue/metrics/certs"

T0=$SECONDS
log() { printf '[kueue +%ss] %s\n' "$((SECONDS - T0))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

cache_dir() { echo "$CACHE_ROOT/kueue/kueue-${KUEUE_VERSION}"; }
kueue_bin() { echo "$(cache_dir)/bin/kueue"; }

cmd_build() {
  local dir; dir="$(cache_dir)"
  if [[ -x "$dir/bin/kueue" && -d "$dir/manifests" ]]; then log "kueue ${KUEUE_VERSION} cached: $dir"; return; fi
  [[ -x "$GO" ]] || die "go not found and no cached kueue in $dir (needs Go >= 1.26)"
  mkdir -p "$CACHE_ROOT/kueue"
  exec 6>"$CACHE_ROOT/kueue/.build.lock"; flock 6
  if [[ -x "$dir/bin/kueue" && -d "$dir/manifests" ]]; then log "kueue ${KUEUE_VERSION} cached: $dir"; return; fi
  export GOFLAGS="-trimpath -buildvcs=false -gcflags=all=-dwarf=false" CGO_ENABLED=0 GOTOOLCHAIN=local
  local t=$SECONDS tmp; tmp="$(mktemp -d "$CACHE_ROOT/kueue/.build.XXXXXX")"
  if [[ ! -x "$dir/bin/kueue" ]]; then
    log "building kueue ${KUEUE_VERSION} (go install sigs.k8s.io/kueue/cmd/kueue; slow on few cores)"
    local ld="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=${KUEUE_VERSION}"
    ld+=" -X sigs.k8s.io/kueue/pkg/version.GitCommit=${KUEUE_COMMIT}"
    GOBIN="$tmp/bin" nice -n "${HETERO_BUILD_NICE:-10}" "$GO" install -ldflags "$ld" "sigs.k8s.io/kueue/cmd/kueue@${KUEUE_VERSION}"
    mkdir -p "$dir/bin"; mv "$tmp/bin/kueue" "$dir/bin/kueue"
    log "TIMING build kueue $((SECONDS - t))s"
  fi
  local src
  src="$(cd "$tmp" && GOFLAGS='' "$GO" mod download -json "sigs.k8s.io/kueue@${KUEUE_VERSION}" \
         | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')/config/components"
  [[ -d "$src/crd/bases" && -f "$src/webhook/manifests.yaml" ]] || die "no CRDs / webhook manifests in $src"
  mkdir -p "$tmp/manifests/crd" "$tmp/manifests/webhook"
  cp -r "$src/crd/bases" "$src/crd/patches" "$src/crd/kustomization.yaml" "$tmp/manifests/crd/"
  cp "$src/webhook/manifests.yaml" "$tmp/manifests/webhook/"
  chmod -R u+w,go+r "$tmp/manifests"
  rm -rf "$dir/manifests"; mv "$tmp/manifests" "$dir/manifests"
  rm -rf "$tmp"
  log "build done in $((SECONDS - t))s: $dir"
}

# ------------------------------------------------------------------------------------ runtime --
plane_port() { sed -n 's/^APISERVER_PORT=//p' "$PLANE_STATE/ports.env"; }
pki_args() {
  local d="$PLANE_STATE/pki"
  echo --api "https://127.0.0.1:$(plane_port)" --ca "$d/ca.crt" --cert "$d/admin.crt" --key "$d/admin.key"
}
ca_fingerprint() { openssl x509 -noout -fingerprint -sha256 -in "$PLANE_STATE/pki/ca.crt" | cut -d= -f2; }

pid() { cat "$STATE/kueue.pid" 2>/dev/null || true; }
alive() {
  local p; p="$(pid)"
  [[ -n "$p" && -d "/proc/$p" && "$(readlink -f "/proc/$p/exe" 2>/dev/null)" == "$(readlink -f "$(kueue_bin)")" ]]
}
load_ports() { [[ -f "$STATE/ports.env" ]] && source "$STATE/ports.env"; }
ready() { load_ports && curl -sf --max-time 2 "http://127.0.0.1:${HEALTH_PORT}/readyz" >/dev/null; }
webhook_serving() { load_ports && curl -s --max-time 2 --cacert "$STATE/certs/ca.crt" "https://127.0.0.1:${WEBHOOK_PORT}/" -o /dev/null; }
healthy() {
  alive && ready && [[ "$(cat "$STATE/ca.fingerprint" 2>/dev/null)" == "$(ca_fingerprint)" ]] \
    && [[ "$(cat "$STATE/feature-gates" 2>/dev/null)" == "$FEATURE_GATES" ]]
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

sign_serving() {
  local out="$1" cn="$2" d; d="$(dirname "$out")"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$out.key" -subj "/CN=$cn" -out "$out.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$out.ext"
  openssl x509 -req -in "$out.csr" -CA "$PLANE_STATE/pki/ca.crt" -CAkey "$PLANE_STATE/pki/ca.key" \
    -CAcreateserial -CAserial "$d/ca.srl" -days 365 -sha256 -extfile "$out.ext" -out "$out.crt" 2>/dev/null
  rm -f "$out.csr" "$out.ext"; chmod 600 "$out.key"
}

stop_manager() {
  alive || { rm -f "$STATE/kueue.pid"; return 0; }
  local p; p="$(pid)"
  log "stopping kueue (pid $p)"
  kill "$p" 2>/dev/null || true
  for _ in $(seq 1 60); do [[ -d "/proc/$p" ]] || break; sleep 0.25; done
  [[ -d "/proc/$p" ]] && kill -9 "$p" 2>/dev/null || true
  rm -f "$STATE/kueue.pid"
}

cmd_start() {
  [[ -f "$PLANE_STATE/ports.env" ]] && HETERO_KUBE_STATE="$PLANE_STATE" bash "$HERE/kubeplane.sh" status >/dev/null 2>&1 \
    || die "the real-node plane is not running (tests/infra/realnode.sh start)"
  if healthy; then log "already running (webhooks on https://127.0.0.1:$WEBHOOK_PORT)"; return 0; fi
  cmd_build
  python3 -c 'import yaml' 2>/dev/null || die "PyYAML missing (apt-get install python3-yaml or pip install pyyaml)"
  local t=$SECONDS
  stop_manager
  mkdir -p "$STATE/logs" "$STATE/certs" "$METRICS_CERT_DIR"
  [[ -f "$STATE/logs/kueue.log" ]] && mv "$STATE/logs/kueue.log" "$STATE/logs/kueue.log.prev"
  cp "$PLANE_STATE/pki/ca.crt" "$STATE/certs/ca.crt"
  sign_serving "$STATE/certs/tls" "kueue-webhook"
  sign_serving "$STATE/certs/metrics" "kueue-metrics"
  install -m 600 "$STATE/certs/metrics.key" "$METRICS_CERT_DIR/tls.key"
  install -m 644 "$STATE/certs/metrics.crt" "$METRICS_CERT_DIR/tls.crt"
  WEBHOOK_PORT="$(free_port)"; HEALTH_PORT="$(free_port)"; METRICS_PORT="$(free_port)"
  printf 'WEBHOOK_PORT=%s\nHEALTH_PORT=%s\nMETRICS_PORT=%s\n' "$WEBHOOK_PORT" "$HEALTH_PORT" "$METRICS_PORT" > "$STATE/ports.env"
  local fw
  fw="$(printf '  - "%s"\n' ${FRAMEWORKS//,/ })"
  cat > "$STATE/config.yaml" <<CFG
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:$HEALTH_PORT
metrics:
  bindAddress: 127.0.0.1:$METRICS_PORT
webhook:
  host: 127.0.0.1
  port: $WEBHOOK_PORT
  certDir: $STATE/certs
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
manageJobsWithoutQueueName: false
integrations:
  frameworks:
$fw
CFG
  # webhook/conversion configurations from the previous run point at a port nobody serves now
  python3 "$HERE/kueue_manifests.py" delete-webhooks $(pki_args) || true
  python3 "$HERE/kueue_manifests.py" apply --manifests "$(cache_dir)/manifests" \
    --url "https://127.0.0.1:$WEBHOOK_PORT" --frameworks "$FRAMEWORKS" $(pki_args)
  log "starting kueue ${KUEUE_VERSION}"
  KUBECONFIG="$PLANE_STATE/admin.kubeconfig" setsid nohup "$(kueue_bin)" --config "$STATE/config.yaml" \
    --feature-gates="$FEATURE_GATES" --zap-log-level=2 \
    >> "$STATE/logs/kueue.log" 2>&1 < /dev/null 6>&- 7>&- 8>&- 9>&- &
  echo $! > "$STATE/kueue.pid"
  local end=$((SECONDS + 120))
  until ready && webhook_serving; do
    alive || { tail -n 20 "$STATE/logs/kueue.log" >&2; die "kueue exited (log: $STATE/logs/kueue.log)"; }
    (( SECONDS < end )) || die "kueue not ready after 120s (log: $STATE/logs/kueue.log)"
    sleep 0.5
  done
  python3 "$HERE/kueue_manifests.py" apply --webhooks --manifests "$(cache_dir)/manifests" \
    --url "https://127.0.0.1:$WEBHOOK_PORT" --frameworks "$FRAMEWORKS" $(pki_args)
  ca_fingerprint > "$STATE/ca.fingerprint"
  echo "$FEATURE_GATES" > "$STATE/feature-gates"
  log "TIMING start kueue $((SECONDS - t))s (webhooks https://127.0.0.1:$WEBHOOK_PORT, readyz http://127.0.0.1:$HEALTH_PORT/readyz)"
}

# The webhook configurations go first: with failurePolicy Fail they would refuse every Job (and
# every Kueue object) once nothing serves them.
cmd_stop() {
  if [[ -f "$PLANE_STATE/ports.env" ]] && HETERO_KUBE_STATE="$PLANE_STATE" bash "$HERE/kubeplane.sh" status >/dev/null 2>&1; then
    python3 "$HERE/kueue_manifests.py" delete-webhooks $(pki_args) || true
  fi
  stop_manager
  rm -f "$STATE/ca.fingerprint" "$STATE/feature-gates"
}

cmd_status() {
  if healthy; then
    echo "kueue ${KUEUE_VERSION}: running (pid $(pid)), readyz ok, feature gates $FEATURE_GATES, webhooks https://127.0.0.1:$WEBHOOK_PORT"
  else
    echo "kueue ${KUEUE_VERSION}: DOWN"; return 1
  fi
}

lock_state() { mkdir -p "$RN_STATE"; exec 7>"$RN_STATE/kueue.lock"; flock 7; }

case "${1:-}" in
  build) cmd_build ;;
  start) lock_state; cmd_start ;;
  stop) lock_state; cmd_stop ;;
  status) cmd_status ;;
  version) echo "$KUEUE_VERSION" ;;
  *) echo "usage: $0 {build|start|stop|status}" >&2; exit 2 ;;
esac
