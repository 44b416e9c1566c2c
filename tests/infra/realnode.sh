#!/usr/bin/env bash
# realnode.sh - one REAL Kubernetes node on a control plane of its own, for pytest-hetero tests.
#
# On its own kubeplane.sh plane (state $STATE/plane, so the KWOK plane other tests use never sees it):
#   a second Debian containerd (own config/root/state/socket; CRI, cgroupfs, overlayfs, runc,
#   restrict_oom_score_adj), CNI from Debian containernetworking-plugins (bridge + host-local +
#   loopback), a kubelet built from the Go module proxy at the plane's Kubernetes version, a pause
#   image built offline from the kubernetes module source, the Docker engine's test images imported,
#   and the test device plugin (tests/infra/deviceplugin) serving stand-in nvidia.com/gpu and
#   huawei.com/Ascend910 devices through the real device-plugin API.
#
# Usage: tests/infra/realnode.sh {build|start|stop [--keep-plane]|stop-kubelet|status|env}
# See tests/infra/README.md ("Real node") for versions, cache keys, timings and the processes left running.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KUBEPLANE="$HERE/kubeplane.sh"

# ---- pinned versions (changing any of them changes a cache key) ---------------------------------
# The kubelet must be the plane's version: read it from kubeplane.sh rather than repeat it.
K8S_VERSION="$(sed -n 's/^K8S_VERSION="\(v[0-9.]*\)".*/\1/p' "$KUBEPLANE")"
K8S_STAGING="$(sed -n 's/^K8S_STAGING="\(v[0-9.]*\)".*/\1/p' "$KUBEPLANE")"
PAUSE_VERSION="3.10.1"          # build/pause/Makefile TAG in k8s.io/kubernetes v1.34.4
CNI_PACKAGE="containernetworking-plugins"   # Debian bookworm: 1.1.1
CONTAINERD_PACKAGE="containerd"             # Debian bookworm: 1.6.20
TEST_IMAGES=(pytest-hetero/shell-only:1 pytest-hetero/py311-onnx:1)  # from tests/infra/docker-engine.sh

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
CACHE_ROOT="${HETERO_CACHE:-$HOME/.cache/pytest-hetero}"
STATE="${HETERO_REALNODE_STATE:-/tmp/hetero-realnode}"
PLANE_STATE="$STATE/plane"
NODE_NAME="${HETERO_REALNODE_NAME:-hetero-realnode}"
TAINT_KEY="hetero-test/real-node"
GPU_COUNT="${HETERO_REALNODE_GPUS:-4}"
NPU_COUNT="${HETERO_REALNODE_NPUS:-4}"
POD_SUBNET="${HETERO_REALNODE_POD_SUBNET:-10.89.0.0/24}"
CLUSTER_DNS="10.96.0.10"        # in kubeplane.sh's service CIDR; nothing answers there (no DNS tests)
# The kubelet's device manager socket dir is fixed, whatever --root-dir says.
DEVICE_PLUGIN_DIR="/var/lib/kubelet/device-plugins"
PAUSE_IMAGE="hetero.local/pause:${PAUSE_VERSION}"

T0=$SECONDS
log() { printf '[realnode +%ss] %s\n' "$((SECONDS - T0))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# --------------------------------------------------------------------------------------- cache --
rn_cache() { echo "$CACHE_ROOT/realnode"; }
kubelet_bin() { echo "$(rn_cache)/kubelet-${K8S_VERSION}/kubelet"; }
pause_tar() { echo "$(rn_cache)/pause-${PAUSE_VERSION}-k8s-${K8S_VERSION}/pause-oci.tar"; }
# The device plugin is ours: its key is a hash of its source and of the replayed captures.
deviceplugin_key() {
  (cd "$HERE/deviceplugin" && cat go.mod go.sum main.go) | cat - "$HERE/../data/replay/"*.txt | sha256sum | cut -c1-12
}
deviceplugin_dir() { echo "$(rn_cache)/deviceplugin-$(deviceplugin_key)"; }

go_env() {
  # Same flags as kubeplane.sh, so the kubelet build hits the apiserver's Go build cache.
  export GOFLAGS="-trimpath -buildvcs=false -mod=mod -gcflags=all=-dwarf=false"
  export GOMAXPROCS="${GOMAXPROCS:-$(nproc)}"
  export CGO_ENABLED=0
  export GOTOOLCHAIN=local
}

apt_ensure() {
  local pkg="$1" probe="$2"
  [[ -e "$probe" ]] && return 0
  log "apt-get install $pkg"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null 2>&1 || {
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null || die "apt-get install $pkg failed"
  }
  [[ -e "$probe" ]] || die "$pkg installed but $probe is missing"
}

# The kubelet is built in kubeplane.sh's wrapper module (requires k8s.io/kubernetes, replaces each
# staging module with its published version), regenerated here when absent.
build_kubelet() {
  local out; out="$(kubelet_bin)"
  [[ -x "$out" ]] && { log "kubelet ${K8S_VERSION} cached: $out"; return; }
  [[ -x "$GO" ]] || die "go not found and no cached kubelet in $out"
  go_env
  local wrap="$CACHE_ROOT/kube/wrap-k8s-${K8S_VERSION}"
  if [[ ! -f "$wrap/go.mod" ]]; then
    mkdir -p "$wrap"
    local gomod
    gomod="$(cd "$wrap" && GOFLAGS='' "$GO" mod download -json "k8s.io/kubernetes@${K8S_VERSION}" \
             | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
    {
      printf 'module hetero.local/kubewrap\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
      sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*$#\t\1 => \1 '"${K8S_STAGING}"'#p' "$gomod"
      echo ")"
    } > "$wrap/go.mod"
  fi
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=${K8S_VERSION}"
  ld+=" -X k8s.io/component-base/version.gitMajor=1"
  ld+=" -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
  ld+=" -X k8s.io/component-base/version.gitTreeState=clean"
  ld+=" -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION}"
  local t=$SECONDS
  log "building kubelet ${K8S_VERSION} in $wrap"
  mkdir -p "$(dirname "$out")"
  (cd "$wrap" && nice -n "${HETERO_BUILD_NICE:-10}" "$GO" build -ldflags "$ld" -o "$out.tmp" k8s.io/kubernetes/cmd/kubelet)
  mv "$out.tmp" "$out"
  log "built kubelet in $((SECONDS - t))s"
}

build_deviceplugin() {
  local dir; dir="$(deviceplugin_dir)"
  [[ -x "$dir/hetero-device-plugin" ]] && { log "device plugin cached: $dir"; return; }
  [[ -x "$GO" ]] || die "go not found and no cached device plugin in $dir"
  go_env
  local t=$SECONDS
  log "building the test device plugin (key $(deviceplugin_key))"
  mkdir -p "$dir.tmp/replay"
  (cd "$HERE/deviceplugin" && nice -n "${HETERO_BUILD_NICE:-10}" "$GO" build -ldflags "-s -w" \
     -o "$dir.tmp/hetero-device-plugin" .)
  cp "$HERE/../data/replay/"*.txt "$dir.tmp/replay/"
  rm -rf "$dir"; mv "$dir.tmp" "$dir"
  # builds of older sources (a running one keeps its deleted binary until `start` replaces it)
  find "$(rn_cache)" -maxdepth 1 -name 'deviceplugin-*' ! -name "$(basename "$dir")" -exec rm -rf {} +
  log "built device plugin in $((SECONDS - t))s"
}

# sha256 of a file, as an OCI digest
digest_of() { echo "sha256:$(sha256sum "$1" | cut -d' ' -f1)"; }

# The sandbox image: pause.c from the kubernetes module, built static, packed as an OCI archive by
# hand (one uncompressed layer), so no registry is ever needed.
build_pause() {
  local tar; tar="$(pause_tar)"
  [[ -s "$tar" ]] && { log "pause image cached: $tar"; return; }
  command -v gcc >/dev/null || apt_ensure gcc /usr/bin/gcc
  local src
  src="$(cd /tmp && GOFLAGS='' "$GO" mod download -json "k8s.io/kubernetes@${K8S_VERSION}" \
         | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')/build/pause/linux/pause.c"
  [[ -f "$src" ]] || die "no $src in the k8s.io/kubernetes module"
  local w; w="$(mktemp -d)"
  mkdir -p "$w/rootfs" "$w/oci/blobs/sha256"
  gcc -Os -Wall -Werror -static -DVERSION="v${PAUSE_VERSION}-hetero" -o "$w/rootfs/pause" "$src"
  strip "$w/rootfs/pause" 2>/dev/null || true
  tar --numeric-owner --owner=0 --group=0 --mtime=@0 -C "$w/rootfs" -cf "$w/layer.tar" pause
  local layer config manifest ls cs ms
  layer="$(digest_of "$w/layer.tar")"; ls="$(stat -c %s "$w/layer.tar")"
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["%s"]}}' \
    "$layer" > "$w/config.json"
  config="$(digest_of "$w/config.json")"; cs="$(stat -c %s "$w/config.json")"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"%s","size":%s}]}' \
    "$config" "$cs" "$layer" "$ls" > "$w/manifest.json"
  manifest="$(digest_of "$w/manifest.json")"; ms="$(stat -c %s "$w/manifest.json")"
  mv "$w/layer.tar" "$w/oci/blobs/sha256/${layer#sha256:}"
  mv "$w/config.json" "$w/oci/blobs/sha256/${config#sha256:}"
  mv "$w/manifest.json" "$w/oci/blobs/sha256/${manifest#sha256:}"
  printf '{"imageLayoutVersion":"1.0.0"}' > "$w/oci/oci-layout"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$manifest" "$ms" "$PAUSE_IMAGE" "$PAUSE_VERSION" > "$w/oci/index.json"
  mkdir -p "$(dirname "$tar")"
  tar --numeric-owner --owner=0 --group=0 -C "$w/oci" -cf "$tar.tmp" oci-layout index.json blobs
  mv "$tar.tmp" "$tar"
  rm -rf "$w"
  log "built pause image $PAUSE_IMAGE ($(stat -c %s "$tar") bytes): $tar"
}

cmd_build() {
  local t=$SECONDS
  bash "$KUBEPLANE" build 6>&- 7>&-
  apt_ensure "$CONTAINERD_PACKAGE" /usr/bin/containerd
  apt_ensure "$CNI_PACKAGE" /usr/lib/cni/bridge
  command -v runc >/dev/null || apt_ensure runc /usr/sbin/runc
  lock_build
  local s=$SECONDS; build_kubelet; log "TIMING build kubelet $((SECONDS - s))s"
  s=$SECONDS; build_deviceplugin; log "TIMING build device-plugin $((SECONDS - s))s"
  s=$SECONDS; build_pause; log "TIMING build pause $((SECONDS - s))s"
  exec 6>&-  # release the build lock: kubeplane.sh start takes it too
  log "build done in $((SECONDS - t))s"
}

# ------------------------------------------------------------------------------------ runtime --
COMPONENTS=(containerd kubelet deviceplugin)

pid_of() { local f="$STATE/run/$1.pid"; [[ -f "$f" ]] && cat "$f" || true; }
exe_of() {
  case "$1" in
    containerd) echo /usr/bin/containerd ;;
    kubelet) kubelet_bin ;;
    deviceplugin) echo "$(deviceplugin_dir)/hetero-device-plugin" ;;
  esac
}
# alive NAME: the pid file points at a live process running that component's binary (any cached
# build of it: a process of an older build must still be found, to be stopped).
alive() {
  local pid; pid="$(pid_of "$1")"
  [[ -n "$pid" && -d "/proc/$pid" ]] || return 1
  local exe; exe="$(readlink "/proc/$pid/exe" 2>/dev/null)"
  [[ "$(basename "${exe% (deleted)}")" == "$(basename "$(exe_of "$1")")" ]]
}
# current NAME: alive, and running the binary this script would start now.
current() {
  alive "$1" && [[ "$(readlink -f "/proc/$(pid_of "$1")/exe")" == "$(readlink -f "$(exe_of "$1")")" ]]
}

launch() {
  local name="$1"; shift
  log "starting $name"
  # fds 6/7 are our flock locks: daemons must not inherit (and hold) them.
  setsid nohup "$@" >> "$STATE/logs/$name.log" 2>&1 < /dev/null 6>&- 7>&- &
  echo $! > "$STATE/run/$name.pid"
}

wait_for() {
  local desc="$1" secs="$2"; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    (( SECONDS >= end )) && die "timed out after ${secs}s waiting for $desc (logs: $STATE/logs)"
    sleep 0.5
  done
}

stop_pid() {
  local name="$1" pid
  alive "$name" || { rm -f "$STATE/run/$name.pid"; return 0; }
  pid="$(pid_of "$name")"
  log "stopping $name (pid $pid)"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 60); do [[ -d "/proc/$pid" ]] || break; sleep 0.25; done
  [[ -d "/proc/$pid" ]] && kill -9 "$pid" 2>/dev/null || true
  rm -f "$STATE/run/$name.pid"
}

# The node IP: the address of the interface carrying the default route (the kubelet must not serve
# on loopback: the apiserver dials the node's InternalIP).
node_ip() {
  if [[ -n "${HETERO_REALNODE_IP:-}" ]]; then echo "$HETERO_REALNODE_IP"; return; fi
  local ip
  ip="$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1)"
  [[ -n "$ip" ]] || ip="$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1)"
  [[ -n "$ip" ]] || die "no non-loopback IPv4 address found (set HETERO_REALNODE_IP)"
  echo "$ip"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

ctr_() { ctr --address "$STATE/containerd/containerd.sock" -n k8s.io "$@"; }

plane_api() {
  local d="$PLANE_STATE/pki" port
  port="$(sed -n 's/^APISERVER_PORT=//p' "$PLANE_STATE/ports.env")"
  local path="$1"; shift
  curl -sS --fail --max-time 10 --cacert "$d/ca.crt" --cert "$d/admin.crt" --key "$d/admin.key" \
    "$@" "https://127.0.0.1:${port}${path}"
}

# node_field PYEXPR: evaluate PYEXPR on the Node object `n` (json); prints the result
node_field() {
  plane_api "/api/v1/nodes/$NODE_NAME" 2>/dev/null | python3 -c "import json,sys; n=json.load(sys.stdin); print($1)"
}
node_ready() { [[ "$(node_field "next((c['status'] for c in n['status'].get('conditions',[]) if c['type']=='Ready'),'')")" == "True" ]]; }
# The node lifecycle controller's taints (not-ready, unreachable) outlive Ready=True by a few seconds
# after a kubelet restart: a pod created in between is judged against a NoExecute taint it does not
# tolerate. The node is usable only once they are gone.
no_lifecycle_taint() {
  [[ "$(node_field "sum(t['key'] in ('node.kubernetes.io/not-ready','node.kubernetes.io/unreachable') for t in n['spec'].get('taints') or [])")" == "0" ]]
}
node_allocatable() { node_field "n['status'].get('allocatable',{}).get('$1','0')"; }
node_capacity() { node_field "n['status'].get('capacity',{}).get('$1','0')"; }
# Capacity, not allocatable: a device a test marked Unhealthy lowers only allocatable.
devices_advertised() {
  [[ "$(node_capacity nvidia.com/gpu)" == "$GPU_COUNT" && "$(node_capacity huawei.com/Ascend910)" == "$NPU_COUNT" ]]
}

ca_fingerprint() { openssl x509 -noout -fingerprint -sha256 -in "$PLANE_STATE/pki/ca.crt" | cut -d= -f2; }

sign() {
  local name="$1" subj="$2" ext="$3" d="$STATE/pki"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$d/$name.key" -subj "$subj" -out "$d/$name.csr" 2>/dev/null
  printf '%s\n' "$ext" > "$d/$name.ext"
  openssl x509 -req -in "$d/$name.csr" -CA "$PLANE_STATE/pki/ca.crt" -CAkey "$PLANE_STATE/pki/ca.key" \
    -CAcreateserial -CAserial "$d/ca.srl" -days 365 -sha256 -extfile "$d/$name.ext" -out "$d/$name.crt" 2>/dev/null
  rm -f "$d/$name.csr" "$d/$name.ext"
  chmod 600 "$d/$name.key"
}

# Node identity (Node authorizer + NodeRestriction): O=system:nodes, CN=system:node:<name>; a serving
# cert for the node IP. Remade whenever the plane's CA changed (a plane restart makes a fresh PKI).
make_node_pki() {
  local ip="$1" d="$STATE/pki"
  rm -rf "$d"; mkdir -p "$d"; chmod 700 "$d"
  sign kubelet-client "/O=system:nodes/CN=system:node:$NODE_NAME" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  sign kubelet-serving "/O=system:nodes/CN=system:node:$NODE_NAME" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:$ip,DNS:$NODE_NAME"
  cp "$PLANE_STATE/pki/ca.crt" "$d/ca.crt"
  ca_fingerprint > "$d/ca.fingerprint"
  local port b64='base64 -w0'
  port="$(sed -n 's/^APISERVER_PORT=//p' "$PLANE_STATE/ports.env")"
  cat > "$STATE/kubelet.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: hetero-realnode
  cluster:
    server: https://127.0.0.1:${port}
    certificate-authority-data: $($b64 < "$d/ca.crt")
users:
- name: node
  user:
    client-certificate-data: $($b64 < "$d/kubelet-client.crt")
    client-key-data: $($b64 < "$d/kubelet-client.key")
contexts:
- name: hetero-realnode
  context: {cluster: hetero-realnode, user: node}
current-context: hetero-realnode
KC
  chmod 600 "$STATE/kubelet.kubeconfig"
}

write_containerd_config() {
  local c="$STATE/containerd"
  mkdir -p "$c/root" "$c/state" "$STATE/cni/net.d" "$STATE/cni/ipam"
  cat > "$c/config.toml" <<TOML
# Written by tests/infra/realnode.sh: a containerd of the real node's own, never the Docker engine's.
version = 2
root = "$c/root"
state = "$c/state"
# The snapshotters this machine cannot use only add noise to the log.
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = "$c/containerd.sock"

[ttrpc]
  address = "$c/containerd.sock.ttrpc"

[debug]
  address = "$c/debug.sock"

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # These VMs lack CAP_SYS_RESOURCE: without this every pod fails with "runc create failed: ...
  # can't get final child's PID from pipe: EOF" (runc cannot lower oom_score_adj).
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
    max_conf_num = 1
TOML
  cat > "$STATE/cni/net.d/10-hetero-realnode.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "hetero-realnode",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "hetero-rn0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_SUBNET"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$STATE/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
}

containerd_up() { ctr_ version >/dev/null 2>&1; }

start_containerd() {
  if alive containerd && containerd_up; then return 0; fi
  stop_pid containerd
  write_containerd_config
  launch containerd /usr/bin/containerd --config "$STATE/containerd/config.toml"
  wait_for "containerd socket" 60 containerd_up
}

# import_image NAME KEY TARFILE-PRODUCER...: import unless the image in our containerd carries
# label hetero.key=KEY; pinned so the kubelet's image GC never removes it.
image_key_in_ctr() {
  ctr_ images ls "name==$1" 2>/dev/null | awk -v n="$1" '$1 == n {print $NF}' | tr ',' '\n' \
    | sed -n 's/^hetero.key=//p'
}
normalise() { case "$1" in */*/*|*.*/*) echo "$1" ;; */*) echo "docker.io/$1" ;; *) echo "docker.io/library/$1" ;; esac; }

import_images() {
  local key t
  key="$(sha256sum "$(pause_tar)" | cut -c1-12)"
  if [[ "$(image_key_in_ctr "$PAUSE_IMAGE")" != "$key" ]]; then
    t=$SECONDS
    ctr_ images import --snapshotter overlayfs "$(pause_tar)" >/dev/null
    ctr_ images label "$PAUSE_IMAGE" "hetero.key=$key" io.cri-containerd.pinned=pinned >/dev/null
    log "imported $PAUSE_IMAGE in $((SECONDS - t))s"
  fi
  local img full id
  for img in "${TEST_IMAGES[@]}"; do
    full="$(normalise "$img")"
    if ! id="$(docker image inspect -f '{{.Id}}' "$img" 2>/dev/null)"; then
      if [[ "${CI:-}" == "true" ]]; then die "test image $img is not in the Docker engine (run tests/infra/docker-engine.sh images)"; fi
      log "WARNING: test image $img is not in the Docker engine; pods using it will fail to pull"
      continue
    fi
    key="${id#sha256:}"; key="${key:0:12}"
    [[ "$(image_key_in_ctr "$full")" == "$key" ]] && continue
    t=$SECONDS
    docker save "$img" | ctr_ images import --snapshotter overlayfs - >/dev/null
    ctr_ images label "$full" "hetero.key=$key" io.cri-containerd.pinned=pinned >/dev/null
    log "imported $img ($full) from the Docker engine in $((SECONDS - t))s"
  done
}

write_kubelet_config() {
  local ip="$1" port="$2" hport="$3" d="$STATE/pki"
  cat > "$STATE/kubelet-config.yaml" <<CFG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
port: $port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $hport
tlsCertFile: $d/kubelet-serving.crt
tlsPrivateKeyFile: $d/kubelet-serving.key
rotateCertificates: false
serverTLSBootstrap: false
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $d/ca.crt}
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://$STATE/containerd/containerd.sock
imageServiceEndpoint: unix://$STATE/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
failSwapOn: false
clusterDNS: [$CLUSTER_DNS]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
registerNode: true
registerWithTaints:
- {key: $TAINT_KEY, value: "true", effect: NoSchedule}
# A shared 2-core VM: never evict or garbage-collect the imported test images.
evictionHard: {memory.available: 50Mi, nodefs.available: 1%, nodefs.inodesFree: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
nodeStatusUpdateFrequency: 5s
nodeStatusReportFrequency: 30s
nodeLeaseDurationSeconds: 10
syncFrequency: 10s
maxPods: 30
CFG
}

start_kubelet() {
  local ip="$1"
  if current kubelet; then return 0; fi
  stop_pid kubelet
  local port hport
  port="$(free_port)"; hport="$(free_port)"
  write_kubelet_config "$ip" "$port" "$hport"
  echo "KUBELET_PORT=$port
KUBELET_HEALTHZ_PORT=$hport
NODE_IP=$ip" > "$STATE/ports.env"
  mkdir -p "$STATE/kubelet" "$DEVICE_PLUGIN_DIR"
  launch kubelet "$(kubelet_bin)" --config "$STATE/kubelet-config.yaml" \
    --kubeconfig "$STATE/kubelet.kubeconfig" --root-dir "$STATE/kubelet" --cert-dir "$STATE/pki" \
    --hostname-override "$NODE_NAME" --node-ip "$ip" \
    --node-labels "$TAINT_KEY=true" --v "${HETERO_KUBELET_V:-2}"
  wait_for "kubelet /healthz" 90 curl -sf --max-time 2 "http://127.0.0.1:$hport/healthz"
  wait_for "node $NODE_NAME Ready" 90 node_ready
}

start_deviceplugin() {
  if current deviceplugin && devices_advertised; then return 0; fi
  stop_pid deviceplugin
  local dir; dir="$(deviceplugin_dir)"
  mkdir -p "$STATE/deviceplugin"
  launch deviceplugin "$dir/hetero-device-plugin" --state "$STATE/deviceplugin" \
    --kubelet-dir "$DEVICE_PLUGIN_DIR" --nvidia "$GPU_COUNT" --ascend "$NPU_COUNT" \
    --nvidia-smi "$dir/replay/nvidia-smi-table-h100-8gpu.txt" \
    --npu-smi "$dir/replay/npu-smi-info-910b3-8npu-healthy.txt"
  wait_for "capacity nvidia.com/gpu=$GPU_COUNT huawei.com/Ascend910=$NPU_COUNT on $NODE_NAME" 60 devices_advertised
}

# fds 6/7 (our locks) are closed: the plane's daemons must not inherit and hold them.
# The node's heartbeat: the kubelet renews its Lease every 2.5 s (a quarter of nodeLeaseDurationSeconds, 10 s),
# and the plane's node lifecycle controller, checking every 2 s, marks the node Unknown 12 s after the last
# renewal: four renewals may be missed under load before it does (with the defaults, renewals every 10 s against
# the KWOK plane's 20 s grace, one late renewal was enough), and the tests that stop the kubelet wait 12 s, not 20.
plane() {
  HETERO_KUBE_STATE="$PLANE_STATE" HETERO_NODE_GRACE="${HETERO_REALNODE_GRACE:-12s}" HETERO_NODE_MONITOR_PERIOD=2s \
    bash "$KUBEPLANE" "$@" 6>&- 7>&-
}

cmd_start() {
  if plane status >/dev/null 2>&1 && healthy_node; then
    log "already running (node $NODE_NAME, KUBECONFIG=$PLANE_STATE/admin.kubeconfig)"; return 0
  fi
  cmd_build
  mkdir -p "$STATE/logs" "$STATE/run"
  local s=$SECONDS
  plane start
  log "TIMING start plane $((SECONDS - s))s"
  local ip; ip="$(node_ip)"
  if [[ "$(cat "$STATE/pki/ca.fingerprint" 2>/dev/null)" != "$(ca_fingerprint)" ]]; then
    # A fresh plane (new CA, empty etcd): the node must register again with new credentials.
    stop_pid deviceplugin; stop_pid kubelet
    make_node_pki "$ip"
  fi
  s=$SECONDS; start_containerd; import_images; log "TIMING start containerd+images $((SECONDS - s))s"
  s=$SECONDS; start_kubelet "$ip"; log "TIMING start kubelet $((SECONDS - s))s"
  s=$SECONDS; start_deviceplugin; log "TIMING start device-plugin $((SECONDS - s))s"
  wait_for "node $NODE_NAME without the not-ready/unreachable taints" 90 no_lifecycle_taint
  healthy_node || die "real node not healthy after start (logs: $STATE/logs)"
  log "real node $NODE_NAME ($ip) up in $((SECONDS - T0))s; KUBECONFIG=$PLANE_STATE/admin.kubeconfig"
}

healthy_node() {
  local c
  for c in "${COMPONENTS[@]}"; do current "$c" || return 1; done
  containerd_up && node_ready && no_lifecycle_taint && devices_advertised \
    && [[ "$(cat "$STATE/pki/ca.fingerprint" 2>/dev/null)" == "$(ca_fingerprint)" ]]
}

# Pods first (so the kubelet itself stops their containers and tears their sandboxes and CNI down),
# then the device plugin, the kubelet, whatever containers are left, containerd, the kubelet's
# mounts, and the plane.
cmd_stop() {
  # Kueue runs against this plane: stop it (and remove its webhook configurations) first.
  if [[ -d "$STATE/kueue" ]]; then bash "$HERE/kueue.sh" stop 6>&- 7>&- || true; fi
  if alive kubelet && [[ -f "$PLANE_STATE/ports.env" ]]; then
    local pods
    pods="$(plane_api "/api/v1/pods?fieldSelector=spec.nodeName=$NODE_NAME" 2>/dev/null \
            | python3 -c 'import json,sys; print(" ".join(p["metadata"]["namespace"]+"/"+p["metadata"]["name"] for p in json.load(sys.stdin)["items"]))' || true)"
    if [[ -n "$pods" ]]; then
      log "deleting pods left on $NODE_NAME: $pods"
      local p
      for p in $pods; do
        plane_api "/api/v1/namespaces/${p%%/*}/pods/${p#*/}?gracePeriodSeconds=1" -X DELETE -o /dev/null || true
      done
      local end=$((SECONDS + 30))
      while (( SECONDS < end )); do
        [[ "$(plane_api "/api/v1/pods?fieldSelector=spec.nodeName=$NODE_NAME" 2>/dev/null \
              | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))' || echo 0)" == "0" ]] && break
        sleep 1
      done
    fi
  fi
  stop_pid deviceplugin
  stop_pid kubelet
  if containerd_up; then
    local id
    for id in $(ctr_ tasks ls -q 2>/dev/null); do
      log "killing leftover container task $id"
      ctr_ tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    sleep 1
    for id in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks rm -f "$id" >/dev/null 2>&1 || true; done
    for id in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers rm "$id" >/dev/null 2>&1 || true; done
  fi
  stop_pid containerd
  unmount_under "$STATE/kubelet"
  unmount_under "$STATE/containerd"
  if [[ "${1:-}" != "--keep-plane" ]]; then plane stop || true; fi
}

# unmount_under DIR: every mount at or below DIR, deepest first (the kubelet bind-mounts its root dir
# onto itself and mounts pod volumes below it).
unmount_under() {
  local d="$1" m
  [[ -d "$d" ]] || return 0
  while read -r m; do
    log "unmounting $m"
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done < <(awk -v d="$d" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/self/mounts | sort -r)
}

cmd_status() {
  local rc=0 c
  plane status || rc=1
  for c in "${COMPONENTS[@]}"; do
    if alive "$c"; then echo "$c: running (pid $(pid_of "$c"))"; else echo "$c: DOWN"; rc=1; fi
  done
  if [[ -f "$PLANE_STATE/ports.env" ]] && node_ready; then
    echo "node $NODE_NAME: Ready; nvidia.com/gpu capacity $(node_capacity nvidia.com/gpu) allocatable $(node_allocatable nvidia.com/gpu); huawei.com/Ascend910 capacity $(node_capacity huawei.com/Ascend910) allocatable $(node_allocatable huawei.com/Ascend910)"
  else
    echo "node $NODE_NAME: NOT Ready"; rc=1
  fi
  return "$rc"
}

cmd_env() {
  cat <<ENV
export KUBECONFIG=$PLANE_STATE/admin.kubeconfig
export HETERO_REALNODE_NODE=$NODE_NAME
export HETERO_REALNODE_TAINT=$TAINT_KEY=true:NoSchedule
export HETERO_REALNODE_CONTAINERD=$STATE/containerd/containerd.sock
export HETERO_REALNODE_DEVICEPLUGIN=$STATE/deviceplugin
export HETERO_REALNODE_GPUS=$GPU_COUNT
export HETERO_REALNODE_NPUS=$NPU_COUNT
ENV
}

# fd 6 locks the binary cache, fd 7 the state dir (kubeplane.sh uses 8 and 9).
lock_build() { mkdir -p "$CACHE_ROOT/kube"; exec 6>"$CACHE_ROOT/kube/.build.lock"; flock 6; }
lock_state() { mkdir -p "$(dirname "$STATE")"; exec 7>"$STATE.lock"; flock 7; }

main() {
  local sub="${1:-}"; shift || true
  case "$sub" in
    build) cmd_build "$@" ;;
    start) lock_state; cmd_start "$@" ;;
    stop) lock_state; cmd_stop "$@" ;;
    # Only the kubelet (node NotReady tests); the next `start` brings it back.
    stop-kubelet) lock_state; stop_pid kubelet ;;
    status) cmd_status "$@" ;;
    env) cmd_env "$@" ;;
    *) echo "usage: $0 {build|start|stop [--keep-plane]|stop-kubelet|status|env}" >&2; exit 2 ;;
  esac
}

main "$@"; exit $?
