#!/usr/bin/env bash
# kubeplane.sh - a real, local Kubernetes control plane for pytest-hetero tests.
#
# Builds (from the Go module proxy, at pinned versions) and runs on 127.0.0.1:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok.
# Nodes are simulated by KWOK; no kubelet, no container runtime.
#
# Usage: tests/infra/kubeplane.sh {build|start|stop|status|env}
# See tests/infra/README.md for versions, ports and timings.
set -euo pipefail

# ---- pinned versions (changing any of them changes the cache key) ----------
K8S_VERSION="v1.34.4"     # k8s.io/kubernetes; go.mod says go 1.24.0
K8S_STAGING="v0.34.4"     # matching k8s.io/<staging> module version
ETCD_VERSION="v3.6.4"     # the etcd version Kubernetes v1.34 ships with
KWOK_VERSION="v0.7.0"     # sigs.k8s.io/kwok; go.mod says go 1.24.0

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
CACHE_ROOT="${HETERO_CACHE:-$HOME/.cache/pytest-hetero}"
STATE="${HETERO_KUBE_STATE:-/tmp/hetero-kube}"

log() { printf '[kubeplane %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Binaries are static, so the key is the component versions only: a warm cache
# starts without any Go toolchain installed.
version_key() { echo "k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"; }
bin_dir() { echo "$CACHE_ROOT/kube/$(version_key)/bin"; }

BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

have_all_binaries() {
  local b d; d="$(bin_dir)"
  for b in "${BINARIES[@]}"; do [[ -x "$d/$b" ]] || return 1; done
  [[ -d "$(dirname "$d")/crds" && -d "$(dirname "$d")/stages" ]]
}

# go build environment: 2 cores, small static-ish binaries, no VCS stamping, no DWARF (-s -w strips it from the
# binary anyway; not generating it took 10% off the compile CPU of a cold kwok build: 243.6 → 219.3 CPU-s, measured).
go_env() {
  export GOFLAGS="-trimpath -buildvcs=false -mod=mod -gcflags=all=-dwarf=false"
  export GOMAXPROCS="${GOMAXPROCS:-$(nproc)}"
  export CGO_ENABLED=0
  export GOTOOLCHAIN=local
}

# Kubernetes cannot be `go install`ed directly: its go.mod replaces every
# k8s.io/<staging> module with ./staging/src/... (ignored outside the main
# module) and requires them at v0.0.0. A generated wrapper module requires
# k8s.io/kubernetes and replaces each staging module with its published v0.X.Y.
build_kubernetes() {
  local out="$1" wrap="$CACHE_ROOT/kube/wrap-k8s-${K8S_VERSION}"
  mkdir -p "$wrap"
  local gomod
  gomod="$(cd "$wrap" && GOFLAGS='' "$GO" mod download -json "k8s.io/kubernetes@${K8S_VERSION}" \
           | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
  [[ -f "$gomod" ]] || die "could not download k8s.io/kubernetes@${K8S_VERSION} go.mod"
  {
    echo "module hetero.local/kubewrap"
    echo
    echo "go 1.24.0"
    echo
    echo "require k8s.io/kubernetes ${K8S_VERSION}"
    echo
    echo "replace ("
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*$#\t\1 => \1 '"${K8S_STAGING}"'#p' "$gomod"
    echo ")"
  } > "$wrap/go.mod"
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=${K8S_VERSION}"
  ld+=" -X k8s.io/component-base/version.gitMajor=1"
  ld+=" -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
  ld+=" -X k8s.io/component-base/version.gitTreeState=clean"
  ld+=" -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION}"
  local c
  for c in kube-apiserver kube-controller-manager kube-scheduler; do
    [[ -x "$out/$c" ]] && { log "$c already built"; continue; }
    log "building $c ${K8S_VERSION} (slow on few cores)"
    (cd "$wrap" && "$GO" build -ldflags "$ld" -o "$out/$c.tmp" "k8s.io/kubernetes/cmd/$c")
    mkdir -p "$out" && mv "$out/$c.tmp" "$out/$c"
  done
}

# etcd's server/go.mod also uses relative replaces, so wrap it the same way.
build_etcd() {
  local out="$1" wrap="$CACHE_ROOT/kube/wrap-etcd-${ETCD_VERSION}"
  [[ -x "$out/etcd" ]] && { log "etcd already built"; return; }
  mkdir -p "$wrap"
  cat > "$wrap/go.mod" <<GOMOD
module hetero.local/etcdwrap

go 1.23.0

require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}

replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 ${ETCD_VERSION}
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 ${ETCD_VERSION}
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 ${ETCD_VERSION}
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 ${ETCD_VERSION}
)
GOMOD
  log "building etcd ${ETCD_VERSION}"
  (cd "$wrap" && "$GO" build -ldflags "-s -w" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3)
  mkdir -p "$out" && mv "$out/etcd.tmp" "$out/etcd"
}

# KWOK's go.mod has no replace directives: plain `go install pkg@version`.
build_kwok() {
  local out="$1"
  [[ -x "$out/kwok" ]] && { log "kwok already built"; return; }
  log "building kwok ${KWOK_VERSION}"
  local tmpbin; tmpbin="$(mktemp -d)"
  GOBIN="$tmpbin" "$GO" install -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
  mkdir -p "$out" && mv "$tmpbin/kwok" "$out/kwok"; rmdir "$tmpbin"
}

# KWOK's CRD manifests (Exec, Logs, ...) and Stage manifests come from the
# same module version: crds/ and stages/ next to bin/.
KWOK_STAGE_FILES=(
  node/fast/node-initialize.yaml     # default: node becomes Ready
  node/heartbeat/node-heartbeat.yaml # default: condition heartbeats
  node/chaos/node-not-ready.yaml     # label node-not-ready.stage.kwok.x-k8s.io=true -> Ready=False
  pod/fast/pod-ready.yaml            # default: pod Running + Ready
  pod/fast/pod-complete.yaml         # default: Job pods Succeeded
  pod/fast/pod-delete.yaml           # default: graceful delete finishes
)
copy_kwok_assets() {
  local root; root="$(dirname "$1")"
  [[ -d "$root/crds" && -d "$root/stages" ]] && return
  local dir f
  dir="$(GOFLAGS='' "$GO" mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')"
  [[ -d "$dir/kustomize/crd/bases" ]] || die "kwok module has no kustomize/crd/bases"
  rm -rf "$root/crds" "$root/stages" "$root/assets.tmp"
  mkdir -p "$root/assets.tmp/crds" "$root/assets.tmp/stages"
  cp "$dir"/kustomize/crd/bases/*.yaml "$root/assets.tmp/crds/"
  for f in "${KWOK_STAGE_FILES[@]}"; do cp "$dir/kustomize/stage/$f" "$root/assets.tmp/stages/"; done
  chmod 644 "$root"/assets.tmp/*/*.yaml
  mv "$root/assets.tmp/crds" "$root/crds"; mv "$root/assets.tmp/stages" "$root/stages"; rmdir "$root/assets.tmp"
}

cmd_build() {
  local out; out="$(bin_dir)"
  if have_all_binaries; then log "binaries present in $out"; return 0; fi
  [[ -x "$GO" ]] || die "go not found and no cached binaries in $out (install Go >= 1.24 or set GO=)"
  go_env
  mkdir -p "$out"
  local t0=$SECONDS
  log "cache: $out"
  build_etcd "$out"
  build_kwok "$out"
  copy_kwok_assets "$out"
  build_kubernetes "$out"
  log "build done in $((SECONDS - t0))s"
  ls -la "$out" >&2
}

# ---------------------------------------------------------------- runtime --
# Node selection: kwok manages (heartbeats, pod lifecycle, exec/logs) exactly
# the Nodes annotated with this; anything else is left alone.
KWOK_NODE_SELECTOR="kwok.x-k8s.io/node=fake"
# KWOK custom resources served as CRDs so tests/backends can create them live.
KWOK_CRDS="Exec,ClusterExec,Logs,ClusterLogs,Attach,ClusterAttach,PortForward,ClusterPortForward"
SERVICE_CIDR="10.96.0.0/16"
POD_CIDR="10.244.0.1/16"
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

kubeconfig_path() { echo "$STATE/admin.kubeconfig"; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# openssl helpers ------------------------------------------------------------
# sign_cert NAME SUBJECT EXT  -> $STATE/pki/NAME.{key,crt}, signed by the CA
sign_cert() {
  local name="$1" subj="$2" ext="$3" d="$STATE/pki"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$d/$name.key" -subj "$subj" \
    -out "$d/$name.csr" 2>/dev/null
  printf '%s\n' "$ext" > "$d/$name.ext"
  openssl x509 -req -in "$d/$name.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days 365 -sha256 -extfile "$d/$name.ext" -out "$d/$name.crt" 2>/dev/null
  rm -f "$d/$name.csr" "$d/$name.ext"
}

make_pki() {
  local d="$STATE/pki"; mkdir -p "$d"; chmod 700 "$d"
  openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$d/ca.key" -days 365 \
    -subj "/CN=hetero-kube-ca" -out "$d/ca.crt" 2>/dev/null
  local client="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  local serving="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  sign_cert apiserver "/CN=kube-apiserver" "$serving"
  sign_cert kwok-serving "/CN=kwok" "$serving"
  sign_cert admin "/O=system:masters/CN=hetero-admin" "$client"
  sign_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
  sign_cert controller-manager "/CN=system:kube-controller-manager" "$client"
  sign_cert scheduler "/CN=system:kube-scheduler" "$client"
  # service-account token signing key pair
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
  openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
  chmod 600 "$d"/*.key
}

# write_kubeconfig FILE CERTNAME  (certs embedded: the file is self-contained)
write_kubeconfig() {
  local f="$1" c="$2" d="$STATE/pki"
  local b64='base64 -w0'
  cat > "$f" <<KC
apiVersion: v1
kind: Config
clusters:
- name: hetero
  cluster:
    server: https://127.0.0.1:${APISERVER_PORT}
    certificate-authority-data: $($b64 < "$d/ca.crt")
users:
- name: $c
  user:
    client-certificate-data: $($b64 < "$d/$c.crt")
    client-key-data: $($b64 < "$d/$c.key")
contexts:
- name: hetero
  context: {cluster: hetero, user: $c, namespace: default}
current-context: hetero
KC
  chmod 600 "$f"
}

# process helpers ---------------------------------------------------------------
pid_of() { local f="$STATE/run/$1.pid"; [[ -f "$f" ]] && cat "$f" || true; }

# alive NAME: the pid file points at a live process running our binary.
alive() {
  local pid; pid="$(pid_of "$1")"
  [[ -n "$pid" ]] && [[ -d "/proc/$pid" ]] || return 1
  [[ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" == *"/bin/$1" ]]
}

# launch NAME ARGS...: daemonize a component, log to $STATE/logs/NAME.log
launch() {
  local name="$1"; shift
  local bin; bin="$(bin_dir)/$name"
  log "starting $name"
  # fds 8/9 are our flock locks: the daemon must not inherit (and hold) them.
  setsid nohup "$bin" "$@" >> "$STATE/logs/$name.log" 2>&1 < /dev/null 8>&- 9>&- &
  echo $! > "$STATE/run/$name.pid"
}

# wait_for DESC SECONDS CMD...: poll CMD until it succeeds
wait_for() {
  local desc="$1" secs="$2"; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if (( SECONDS >= end )); then die "timed out after ${secs}s waiting for $desc (logs: $STATE/logs)"; fi
    sleep 0.5
  done
}

# api GET PATH via the admin client cert; prints the body
api() {
  local d="$STATE/pki"
  curl -sS --fail --max-time 5 --cacert "$d/ca.crt" --cert "$d/admin.crt" --key "$d/admin.key" \
    "$@"
}
api_url() { echo "https://127.0.0.1:${APISERVER_PORT}$1"; }

apiserver_ready() { [[ "$(api "$(api_url /readyz)" 2>/dev/null)" == "ok" ]]; }

load_ports() {
  [[ -f "$STATE/ports.env" ]] || return 1
  # shellcheck disable=SC1091
  source "$STATE/ports.env"
}

healthy() {
  load_ports || return 1
  local c
  for c in "${COMPONENTS[@]}"; do alive "$c" || return 1; done
  apiserver_ready || return 1
  curl -sk --max-time 3 "https://127.0.0.1:${KWOK_PORT}/healthz" >/dev/null || return 1
}

# The apiserver's audit policy (issue 35: who changed what, when): Metadata level (who, verb, object,
# time; never a body) for the writes to the objects a pool's validation depends on; nothing else is
# logged. Subresources are not listed, so node/quota/queue *status* writes (heartbeats, usage) are not
# either. ConfigMaps: the device-plugin configurations by name (GPU operator, HAMi, Ascend, this
# suite's test device plugin); a create has no name in its URL, so only updates/patches/deletes of
# them match. The log is JSON lines of audit.k8s.io/v1 Event, $STATE/audit/audit.log (read by
# `--hetero-audit-log`).
write_audit_policy() {
  cat > "$1" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
    resources:
      - {group: "", resources: [nodes, resourcequotas]}
      - {group: kueue.x-k8s.io, resources: [resourceflavors, clusterqueues, localqueues, cohorts, workloadpriorityclasses, admissionchecks, topologies]}
      - {group: scheduling.volcano.sh, resources: [queues, podgroups]}
      - {group: batch.volcano.sh, resources: [jobs]}
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
    resources:
      - group: ""
        resources: [configmaps]
        resourceNames: [device-plugin-config, nvidia-device-plugin-config, time-slicing-config, default-mig-parted-config, hami-device-plugin, hami-scheduler-device, hami-scheduler-newversion, ascend-device-plugin-config, hetero-device-plugin-config]
  - level: None
POLICY
}

# --------------------------------------------------------------- commands --
cmd_start() {
  if healthy; then log "already running (KUBECONFIG=$(kubeconfig_path))"; return 0; fi
  cmd_build
  local t0=$SECONDS
  # Not healthy: clear leftovers and start a fresh cluster; keep the old logs.
  cmd_stop >/dev/null 2>&1 || true
  if [[ -d "$STATE/logs" ]]; then rm -rf "$STATE/logs.prev"; mv "$STATE/logs" "$STATE/logs.prev"; fi
  rm -rf "$STATE/etcd" "$STATE/pki" "$STATE/run" "$STATE"/*.kubeconfig "$STATE/ports.env" "$STATE/kwok"
  mkdir -p "$STATE/logs" "$STATE/run" "$STATE/kwok" "$STATE/audit"
  write_audit_policy "$STATE/audit/policy.yaml"
  local bd; bd="$(bin_dir)"

  ETCD_PORT="$(free_port)"; ETCD_PEER_PORT="$(free_port)"; APISERVER_PORT="$(free_port)"
  KCM_PORT="$(free_port)"; SCHEDULER_PORT="$(free_port)"; KWOK_PORT="$(free_port)"
  cat > "$STATE/ports.env" <<PORTS
ETCD_PORT=$ETCD_PORT
ETCD_PEER_PORT=$ETCD_PEER_PORT
APISERVER_PORT=$APISERVER_PORT
KCM_PORT=$KCM_PORT
SCHEDULER_PORT=$SCHEDULER_PORT
KWOK_PORT=$KWOK_PORT
PORTS
  make_pki
  write_kubeconfig "$STATE/admin.kubeconfig" admin
  write_kubeconfig "$STATE/controller-manager.kubeconfig" controller-manager
  write_kubeconfig "$STATE/scheduler.kubeconfig" scheduler
  local pki="$STATE/pki"

  launch etcd --name hetero --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "hetero=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync --quota-backend-bytes 2147483648 --log-level warn
  wait_for "etcd /health" 30 curl -sf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health"

  launch kube-apiserver --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$APISERVER_PORT" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" --allow-privileged=true \
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP,Hostname \
    --endpoint-reconciler-type none --profiling=false \
    --audit-policy-file "$STATE/audit/policy.yaml" --audit-log-path "$STATE/audit/audit.log" \
    --audit-log-format json --audit-log-maxsize 100 --audit-log-maxbackup 2
  wait_for "kube-apiserver /readyz" 120 apiserver_ready

  launch kube-controller-manager --kubeconfig "$STATE/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$STATE/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$KCM_PORT" --leader-elect=false \
    --controllers '*' --use-service-account-credentials=true \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --node-monitor-grace-period "${HETERO_NODE_GRACE:-20s}" \
    --node-monitor-period "${HETERO_NODE_MONITOR_PERIOD:-5s}" --profiling=false

  launch kube-scheduler --kubeconfig "$STATE/scheduler.kubeconfig" \
    --authentication-kubeconfig "$STATE/scheduler.kubeconfig" \
    --authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --leader-elect=false --profiling=false

  install_kwok_crds
  cat > "$STATE/kwok/kwok.yaml" <<KWOKCFG
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options: {}
KWOKCFG
  local f
  for f in "$bd"/../stages/*.yaml; do printf -- '---\n' >> "$STATE/kwok/kwok.yaml"; cat "$f" >> "$STATE/kwok/kwok.yaml"; done
  launch kwok --config "$STATE/kwok/kwok.yaml" --kubeconfig "$STATE/admin.kubeconfig" \
    --manage-nodes-with-annotation-selector "$KWOK_NODE_SELECTOR" \
    --node-ip 127.0.0.1 --node-port "$KWOK_PORT" --server-address "127.0.0.1:$KWOK_PORT" \
    --tls-cert-file "$pki/kwok-serving.crt" --tls-private-key-file "$pki/kwok-serving.key" \
    --cidr "$POD_CIDR" --node-lease-duration-seconds 40 --enable-crds "$KWOK_CRDS"

  wait_for "kube-controller-manager /healthz" 60 curl -skf --max-time 2 "https://127.0.0.1:$KCM_PORT/healthz"
  wait_for "kube-scheduler /healthz" 60 curl -skf --max-time 2 "https://127.0.0.1:$SCHEDULER_PORT/healthz"
  wait_for "kwok /healthz" 60 curl -skf --max-time 2 "https://127.0.0.1:$KWOK_PORT/healthz"
  wait_for "default ServiceAccount" 60 api "$(api_url /api/v1/namespaces/default/serviceaccounts/default)"
  healthy || die "control plane not healthy after start (logs: $STATE/logs)"
  log "control plane up in $((SECONDS - t0))s; KUBECONFIG=$(kubeconfig_path)"
}

# KWOK CRDs (Exec, Logs, ...) ship in the kwok module; build copies them next
# to the binaries. The apiserver accepts YAML bodies, so no kubectl is needed.
install_kwok_crds() {
  local crd_dir f kind; crd_dir="$(dirname "$(bin_dir)")/crds"
  local IFS=,
  for kind in $KWOK_CRDS; do
    f="$(grep -il "^    kind: $kind\$" "$crd_dir"/*.yaml | head -1)"
    [[ -n "$f" ]] || die "no CRD manifest for kwok kind $kind in $crd_dir"
    api -o /dev/null -X POST -H 'Content-Type: application/yaml' --data-binary "@$f" \
      "$(api_url /apis/apiextensions.k8s.io/v1/customresourcedefinitions)" \
      || die "failed to create CRD from $f"
  done
  local name
  for kind in $KWOK_CRDS; do
    f="$(grep -il "^    kind: $kind\$" "$crd_dir"/*.yaml | head -1)"
    name="$(sed -n 's/^  name: //p' "$f" | head -1)"
    wait_for "CRD $name established" 30 sh -c \
      "curl -sf --max-time 3 --cacert '$STATE/pki/ca.crt' --cert '$STATE/pki/admin.crt' --key '$STATE/pki/admin.key' \
        '$(api_url "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$name")' | grep -q '\"type\": \"Established\"'"
  done
}

cmd_stop() {
  local c pid i
  for ((i=${#COMPONENTS[@]}-1; i>=0; i--)); do
    c="${COMPONENTS[$i]}"
    if alive "$c"; then
      pid="$(pid_of "$c")"; log "stopping $c (pid $pid)"
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 40); do [[ -d "/proc/$pid" ]] || break; sleep 0.25; done
      [[ -d "/proc/$pid" ]] && kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$STATE/run/$c.pid"
  done
}

cmd_status() {
  local c rc=0
  load_ports 2>/dev/null || { echo "not started (no $STATE/ports.env)"; return 1; }
  for c in "${COMPONENTS[@]}"; do
    if alive "$c"; then echo "$c: running (pid $(pid_of "$c"))"; else echo "$c: DOWN"; rc=1; fi
  done
  if apiserver_ready; then echo "apiserver: https://127.0.0.1:$APISERVER_PORT readyz ok"
  else echo "apiserver: https://127.0.0.1:$APISERVER_PORT NOT ready"; rc=1; fi
  if curl -sk --max-time 3 "https://127.0.0.1:${KWOK_PORT}/healthz" >/dev/null; then
    echo "kwok server (fake kubelet): https://127.0.0.1:$KWOK_PORT healthz ok"
  else echo "kwok server (fake kubelet): https://127.0.0.1:$KWOK_PORT NOT healthy"; rc=1; fi
  echo "KUBECONFIG=$(kubeconfig_path)"
  return "$rc"
}

cmd_env() {
  echo "export KUBECONFIG=$(kubeconfig_path)"
}

# Serialize concurrent callers (e.g. pytest-xdist workers all calling
# ensure_plane): fd 8 locks the binary cache, fd 9 the state dir.
lock_build() { mkdir -p "$CACHE_ROOT/kube"; exec 8>"$CACHE_ROOT/kube/.build.lock"; flock 8; }
lock_state() { mkdir -p "$(dirname "$STATE")"; exec 9>"$STATE.lock"; flock 9; }

main() {
  local sub="${1:-}"; shift || true
  case "$sub" in
    build) lock_build; cmd_build "$@" ;;
    start) lock_state; lock_build; cmd_start "$@" ;;
    stop) lock_state; cmd_stop "$@" ;;
    status) cmd_status "$@" ;;
    env) cmd_env "$@" ;;
    bindir) bin_dir ;;
    *) echo "usage: $0 {build|start|stop|status|env}" >&2; exit 2 ;;
  esac
}

main "$@"; exit $?
