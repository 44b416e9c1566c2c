#!/usr/bin/env bash
# netpol.sh - a REAL NetworkPolicy enforcer on the real node (tests/infra/realnode.sh): kube-network-policies
# (sigs.k8s.io/kube-network-policies, the Kubernetes SIG Network's standalone enforcer; it works with any
# CNI, here the plain bridge plugin, which enforces nothing itself).
#
# Built from the Go module proxy, cached by version. It runs on the host, as its DaemonSet would
# (hostNetwork, NET_ADMIN), with the token of its own ServiceAccount (the install.yaml ClusterRole: list and
# watch pods, namespaces, networkpolicies): rest.InClusterConfig reads fixed paths, so the token and the
# plane CA are bind-mounted on /var/run/secrets/kubernetes.io/serviceaccount inside a private mount
# namespace (the host's paths are untouched). It programs an nftables table that sends each new
# connection of a pod to NFQUEUE (the nft "queue" statement) and answers accept/drop from the policies.
#
# --fail-open: packets queued while nobody listens are accepted, so a stopped or crashed enforcer leaves
# the node's pod network working for every other test. "start" waits until its nftables table exists and
# fails with the enforcer's own error otherwise (e.g. a kernel without nft_queue: CONFIG_NFT_QUEUE).
#
# "forward": pod-to-pod traffic on the node's bridge is let through the host's FORWARD chain (Docker sets
# its policy to DROP and br_netfilter hands bridged frames to it, so without this rule no pod of the node
# reaches another, policy or not). Idempotent; the rule is the node's network, not the enforcer's.
#
# Usage: tests/infra/netpol.sh {build|start|stop|status|version|forward}
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# The newest release the Go module proxy serves here (v0.7.0, v0.8.0); go.mod: go 1.23, k8s.io/* v0.32.3.
KNP_VERSION="v0.8.0"
QUEUE_ID="${HETERO_NETPOL_QUEUE:-100}"

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
CACHE_ROOT="${HETERO_CACHE:-$HOME/.cache/pytest-hetero}"
RN_STATE="${HETERO_REALNODE_STATE:-/tmp/hetero-realnode}"
PLANE_STATE="$RN_STATE/plane"
STATE="$RN_STATE/netpol"
NODE_NAME="${HETERO_REALNODE_NAME:-hetero-realnode}"
BRIDGE="${HETERO_REALNODE_BRIDGE:-hetero-rn0}"     # realnode.sh's CNI bridge
SA_DIR_IN_POD="/var/run/secrets/kubernetes.io/serviceaccount"

T0=$SECONDS
log() { printf '[netpol +%ss] %s\n' "$((SECONDS - T0))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
# go_build_cached, apt_ensure, kernel_config; plane_port, curl_admin, apply (the real-node plane's API)
# shellcheck source=tests/infra/enforcers.sh
source "$HERE/enforcers.sh"

cache_dir() { echo "$CACHE_ROOT/kube-network-policies/knp-${KNP_VERSION}"; }
knp_bin() { echo "$(cache_dir)/bin/kube-network-policies"; }

cmd_build() {
  go_build_cached "kube-network-policies ${KNP_VERSION}" kube-network-policies "$(knp_bin)" \
    "sigs.k8s.io/kube-network-policies/cmd@${KNP_VERSION}" cmd 1.23
}

nft_ensure() { apt_ensure nft nftables; }  # the nft command reads the ruleset (Debian bookworm: nftables 1.0.6)

pid() { cat "$STATE/knp.pid" 2>/dev/null || true; }
alive() {
  local p; p="$(pid)"
  [[ -n "$p" && -d "/proc/$p" && "$(readlink -f "/proc/$p/exe" 2>/dev/null)" == "$(readlink -f "$(knp_bin)")" ]]
}
# The table the enforcer programs (pkg/networkpolicy/controller.go: tableName, inet family).
table_present() { nft list tables 2>/dev/null | grep -qx 'table inet kube-network-policies'; }

# Whether this kernel accepts the nftables "queue" statement the enforcer's rules use, tried in a throwaway
# network namespace (nothing of the host's ruleset is touched), with the kernel's own configuration.
queue_support() {
  local said config=""
  said="$(unshare --net nft -f - 2>&1 <<'NFT' | head -n 1
add table inet hetero-queue-check
add chain inet hetero-queue-check c { type filter hook forward priority 0; }
add rule inet hetero-queue-check c queue num 100 bypass
NFT
)" || true
  config="$(kernel_config | grep -E '^(# )?CONFIG_NFT_QUEUE[ =]' || true)"
  if [[ -z "$said" ]]; then echo "this kernel accepts the nftables queue statement"; return; fi
  echo "this kernel ($(uname -r)) refuses the nftables queue statement: nft: ${said}${config:+; /proc/config.gz: $config}"
}

stop_enforcer() {
  alive || { rm -f "$STATE/knp.pid"; return 0; }
  local p; p="$(pid)"
  log "stopping kube-network-policies (pid $p; it removes its nftables table on SIGTERM)"
  kill "$p" 2>/dev/null || true
  for _ in $(seq 1 80); do [[ -d "/proc/$p" ]] || break; sleep 0.25; done
  [[ -d "/proc/$p" ]] && kill -9 "$p" 2>/dev/null || true
  rm -f "$STATE/knp.pid"
}

cmd_start() {
  [[ -f "$PLANE_STATE/ports.env" ]] && HETERO_KUBE_STATE="$PLANE_STATE" bash "$HERE/kubeplane.sh" status >/dev/null 2>&1 \
    || die "the real-node plane is not running (tests/infra/realnode.sh start)"
  if alive && table_present; then log "already running (pid $(pid))"; return 0; fi
  nft_ensure
  # a kernel that refuses the queue statement refuses every rule the enforcer writes: say so before a build
  local support; support="$(queue_support)"
  [[ "$support" == *" accepts "* ]] || die "kube-network-policies cannot program its nftables rules: $support"
  cmd_build
  local t=$SECONDS
  stop_enforcer
  mkdir -p "$STATE/logs" "$STATE/sa"
  [[ -f "$STATE/logs/knp.log" ]] && mv "$STATE/logs/knp.log" "$STATE/logs/knp.log.prev"
  apply /api/v1/namespaces/kube-system/serviceaccounts \
    '{"metadata":{"name":"kube-network-policies"}}'
  apply /apis/rbac.authorization.k8s.io/v1/clusterroles '{"metadata":{"name":"kube-network-policies"},"rules":[
    {"apiGroups":[""],"resources":["pods","namespaces"],"verbs":["list","watch"]},
    {"apiGroups":["networking.k8s.io"],"resources":["networkpolicies"],"verbs":["list","watch"]}]}'
  apply /apis/rbac.authorization.k8s.io/v1/clusterrolebindings '{"metadata":{"name":"kube-network-policies"},
    "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"kube-network-policies"},
    "subjects":[{"kind":"ServiceAccount","name":"kube-network-policies","namespace":"kube-system"}]}'
  curl_admin -X POST -H 'Content-Type: application/json' \
    "https://127.0.0.1:$(plane_port)/api/v1/namespaces/kube-system/serviceaccounts/kube-network-policies/token" \
    -d '{"spec":{"expirationSeconds":86400}}' \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["token"], end="")' > "$STATE/sa/token"
  cp "$PLANE_STATE/pki/ca.crt" "$STATE/sa/ca.crt"; echo -n kube-system > "$STATE/sa/namespace"
  chmod 600 "$STATE/sa/token"
  local metrics; metrics="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  log "starting kube-network-policies ${KNP_VERSION} (node $NODE_NAME, nfqueue $QUEUE_ID, fail-open)"
  # the mount namespace is private to the enforcer: the bind mount is gone with it
  KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$(plane_port)" setsid nohup \
    unshare --mount --propagation private sh -c \
      'mkdir -p "$1" 2>/dev/null || mount -t tmpfs none /var/run/secrets; mkdir -p "$1"; mount --bind "$2" "$1" && shift 2 && exec "$@"' \
      sh "$SA_DIR_IN_POD" "$STATE/sa" \
      "$(knp_bin)" --hostname-override "$NODE_NAME" --disable-nri --fail-open --nfqueue-id "$QUEUE_ID" \
      --metrics-bind-address "127.0.0.1:$metrics" --v 2 \
    >> "$STATE/logs/knp.log" 2>&1 < /dev/null 6>&- 7>&- 8>&- 9>&- &
  local launcher=$!
  local end=$((SECONDS + 60))
  # the launcher execs into the enforcer: its pid is the enforcer's once the exec is done
  until [[ "$(readlink -f "/proc/$launcher/exe" 2>/dev/null)" == "$(readlink -f "$(knp_bin)")" ]]; do
    [[ -d "/proc/$launcher" ]] || break
    (( SECONDS < end )) || break
    sleep 0.1
  done
  echo "$launcher" > "$STATE/knp.pid"
  until table_present; do
    if grep -q '"syncing nftables rules" error=' "$STATE/logs/knp.log"; then
      local said; said="$(grep -A2 '"syncing nftables rules" error=' "$STATE/logs/knp.log" | sed -n 2p | sed 's/^[[:space:]]*//')"
      stop_enforcer
      die "kube-network-policies cannot program its nftables rules (${said:-see its log}): $(queue_support) (log: $STATE/logs/knp.log)"
    fi
    if ! alive; then
      tail -n 30 "$STATE/logs/knp.log" >&2
      die "kube-network-policies exited before programming its nftables table (log: $STATE/logs/knp.log)"
    fi
    if (( SECONDS >= end )); then
      tail -n 30 "$STATE/logs/knp.log" >&2
      stop_enforcer
      die "kube-network-policies programmed no nftables table within 60s (log: $STATE/logs/knp.log)"
    fi
    sleep 0.5
  done
  log "TIMING start kube-network-policies $((SECONDS - t))s"
}

cmd_stop() { stop_enforcer; }

cmd_forward() {
  local chain=FORWARD rule
  iptables -n -L DOCKER-USER >/dev/null 2>&1 && chain=DOCKER-USER   # Docker's chain for the host's own rules
  rule=(-i "$BRIDGE" -o "$BRIDGE" -m comment --comment "hetero-realnode: pod to pod on the node bridge" -j ACCEPT)
  iptables -C "$chain" "${rule[@]}" 2>/dev/null && return 0
  iptables -I "$chain" 1 "${rule[@]}"
  log "pod-to-pod forwarding on $BRIDGE accepted ($chain)"
}

cmd_status() {
  if alive && table_present; then
    echo "kube-network-policies ${KNP_VERSION}: running (pid $(pid)), nftables table inet kube-network-policies present"
  else
    echo "kube-network-policies ${KNP_VERSION}: DOWN"; return 1
  fi
}

lock_state() { mkdir -p "$RN_STATE"; exec 7>"$RN_STATE/netpol.lock"; flock 7; }

# build-if-supported: the setup's background build, skipped (in seconds, no apt) where the kernel's own
# configuration says it has no nftables queue statement (the enforcer could not run there; start says why)
cmd_build_if_supported() {
  local config; config="$(kernel_config)"
  if grep -qx '# CONFIG_NFT_QUEUE is not set' <<<"$config"; then
    log "not built: this kernel ($(uname -r)) has no nftables queue statement (CONFIG_NFT_QUEUE is not set)"
    return 0
  fi
  cmd_build
}

case "${1:-}" in
  build) cmd_build ;;
  build-if-supported) cmd_build_if_supported ;;
  start) lock_state; cmd_start ;;
  stop) lock_state; cmd_stop ;;
  status) cmd_status ;;
  version) echo "$KNP_VERSION" ;;
  forward) lock_state; cmd_forward ;;
  *) echo "usage: $0 {build|build-if-supported|start|stop|status|version|forward}" >&2; exit 2 ;;
esac
