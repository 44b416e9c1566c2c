#!/usr/bin/env bash
# kuberouter.sh - a REAL NetworkPolicy enforcer on the real node (tests/infra/realnode.sh) for kernels where
# kube-network-policies (tests/infra/netpol.sh) cannot run: kube-router's firewall alone
# (github.com/cloudnativelabs/kube-router/v2, its network policy controller: iptables filter chains and
# ipsets, no nftables queue statement; needs CONFIG_IP_SET and CONFIG_NETFILTER_XT_SET).
#
# SECURITY NOTE - TEST PLANE ONLY. The only iptables/ipset enforcer the Go module proxy serves here is
# kube-router v2.1.0, and security flaws are reported for v2.1.0 (/work/.library/env/packages: "prefer
# something else"). It is used because nothing else that enforces NetworkPolicy runs on this kernel
# (no CONFIG_NFT_QUEUE for kube-network-policies), and only under these limits: never a dependency of
# the plugin, never shipped or installed by it; firewall only (--run-firewall=true --run-router=false
# --run-service-proxy=false: no BGP, no IPVS, no routes, no CNI config written); health and metrics
# listeners off; started by tests/kubernetes/test_realnode_boundaries.py's enforcer fixture for the
# network tests only and stopped after them, its chains and ipsets removed; its credentials are a
# ServiceAccount token of the disposable test plane that can only list/watch what the controller reads.
# A platform must not take this version from here: run a maintained release of its own enforcer.
#
# It runs on the host as its DaemonSet would (hostNetwork, NET_ADMIN) with its own kubeconfig (the token
# of ServiceAccount kube-system/kube-router, the plane's CA). Pods a policy selects get a KUBE-POD-FW-*
# chain, entered from KUBE-ROUTER-FORWARD/-INPUT/-OUTPUT (jumped to at position 1 of the built-in
# chains); traffic no policy admits is REJECTed (icmp-port-unreachable: the peer reads "connection
# refused", not a timeout).
#
# Stop: kube-router leaves its rules in place on SIGTERM, and v2.1.0's --cleanup-config removes none of
# them: it cleans up an empty NetworkPolicyController (nil iptables and ipset handler maps), logs
# "Successfully cleaned the NetworkPolicyController configurations", then its service proxy's cleanup
# tries to flush EVERY IPVS service of the host and panics (nil pointer) on the NAT masquerade rule.
# Measured in a throwaway network namespace: a KUBE-ROUTER-FORWARD chain with its FORWARD jump, a
# KUBE-POD-FW-* chain and a KUBE-SRC-* ipset were all still there after it. So "stop" never runs it: it
# stops every kube-router this script started (by pid: the cached binary with this state's kubeconfig),
# deletes the jumps to kube-router's chains, flushes and deletes its chains (KUBE-ROUTER-*, KUBE-POD-FW-*,
# KUBE-NWPLCY-*) and destroys its ipsets (KUBE-SRC-*, KUBE-DST-*), then checks that none is left, and
# fails naming them otherwise.
#
# Docker: each sync of kube-router saves the whole filter table (iptables-save) and restores it
# (iptables-restore -T filter): a rule Docker adds between the two in the same table is lost until Docker
# writes it again. Syncs happen on pod, namespace and policy events of the real-node plane and every 5 min;
# the fixture keeps kube-router up for one test module only.
#
# Usage: tests/infra/kuberouter.sh {build|build-if-supported|start|stop|status|version|support|leftovers}
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# The only version the Go module proxy serves here; go.mod: go 1.21, k8s.io/* v0.29.
KR_VERSION="v2.1.0"
KR_MODULE="github.com/cloudnativelabs/kube-router/v2"

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
CACHE_ROOT="${HETERO_CACHE:-$HOME/.cache/pytest-hetero}"
RN_STATE="${HETERO_REALNODE_STATE:-/tmp/hetero-realnode}"
PLANE_STATE="$RN_STATE/plane"
STATE="$RN_STATE/kuberouter"
NODE_NAME="${HETERO_REALNODE_NAME:-hetero-realnode}"
SERVICE_CIDR="${HETERO_SERVICE_CIDR:-10.96.0.0/16}"   # kubeplane.sh's --service-cluster-ip-range

T0=$SECONDS
log() { printf '[kuberouter +%ss] %s\n' "$((SECONDS - T0))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
# go_build_cached, apt_ensure, kernel_config; plane_port, curl_admin, apply (the real-node plane's API)
# shellcheck source=tests/infra/enforcers.sh
source "$HERE/enforcers.sh"

cache_dir() { echo "$CACHE_ROOT/kube-router/kr-${KR_VERSION}"; }
kr_bin() { echo "$(cache_dir)/bin/kube-router"; }

cmd_build() {
  go_build_cached "kube-router ${KR_VERSION}" kube-router "$(kr_bin)" "${KR_MODULE}/cmd/kube-router@${KR_VERSION}" \
    kube-router 1.21
}

ipset_ensure() { apt_ensure ipset ipset; }  # kube-router runs the ipset command (Debian bookworm: ipset 7.17)

# Whether this kernel takes what kube-router writes: an ipset, an iptables rule matching it (xt_set), the
# physdev match and REJECT, tried in a throwaway network namespace (nothing of the host's is touched).
cmd_support() {
  ipset_ensure
  local said
  said="$(unshare --net sh -c '
    ipset create hetero-kr-check hash:ip timeout 0 &&
    iptables -N HETERO-KR-CHECK &&
    iptables -A HETERO-KR-CHECK -m physdev --physdev-is-bridged -m set --match-set hetero-kr-check src -j REJECT &&
    iptables -I FORWARD 1 -m comment --comment check -j HETERO-KR-CHECK' 2>&1 | head -n 2 | tr '\n' ' ')" || true
  if [[ -z "$said" ]]; then echo "this kernel accepts ipset, the iptables set and physdev matches and REJECT"; return; fi
  echo "this kernel ($(uname -r)) refuses what kube-router writes: ${said% }"
}

pid() { cat "$STATE/kr.pid" 2>/dev/null || true; }
alive() {
  local p; p="$(pid)"
  [[ -n "$p" && -d "/proc/$p" && "$(readlink -f "/proc/$p/exe" 2>/dev/null)" == "$(readlink -f "$(kr_bin)")" ]]
}
# Every kube-router this script started (whatever its pid file says): the cached binary run with this
# state's kubeconfig. Their pids, one a line.
ours() {
  local exe want; want="$(readlink -f "$(kr_bin)")"
  for exe in /proc/[0-9]*/exe; do
    [[ "$(readlink -f "$exe" 2>/dev/null)" == "$want" ]] || continue
    tr '\0' ' ' < "${exe%/exe}/cmdline" 2>/dev/null | grep -qF -- "--kubeconfig $STATE/kubeconfig " || continue
    local p="${exe#/proc/}"; echo "${p%/exe}"
  done
}
# The top-level chain and its jump from FORWARD (pkg/controllers/netpol: ensureTopLevelChains).
chains_present() { iptables -t filter -S FORWARD 2>/dev/null | grep -q -- '-j KUBE-ROUTER-FORWARD'; }

# What kube-router leaves on the host: its chains of the filter table and its ipsets, one a line.
cmd_leftovers() {
  iptables-save -t filter 2>/dev/null | sed -n 's/^:\(KUBE-ROUTER-[A-Z]*\|KUBE-POD-FW-[A-Z0-9]*\|KUBE-NWPLCY-[A-Z0-9]*\) .*/chain \1/p'
  if command -v ipset >/dev/null; then ipset list -n 2>/dev/null | sed -n 's/^\(KUBE-SRC-\|KUBE-DST-\)/ipset &/p'; fi
}

# Remove kube-router's rules: the jumps to its chains from any other chain, then its chains, then its sets.
remove_rules() {
  iptables-save -t filter | python3 -c '
import re, shlex, subprocess, sys
ours = re.compile(r"^(KUBE-ROUTER-(INPUT|FORWARD|OUTPUT)|KUBE-POD-FW-\S+|KUBE-NWPLCY-\S+)$")
save = sys.stdin.read().splitlines()
chains = [line[1:].split()[0] for line in save if line.startswith(":")]
for line in save:
    if not line.startswith("-A "):
        continue
    words = shlex.split(line)
    if ours.match(words[1]) or not any(ours.match(w) for w in words[2:]):
        continue
    subprocess.run(["iptables", "-t", "filter", "-D", *words[1:]], check=True)  # a jump into one of its chains
mine = [c for c in chains if ours.match(c)]
for verb in ("-F", "-X"):
    for chain in mine:
        subprocess.run(["iptables", "-t", "filter", verb, chain], check=True)
'
  if command -v ipset >/dev/null; then
    local set
    for set in $(ipset list -n 2>/dev/null | grep -E '^(KUBE-SRC-|KUBE-DST-)' || true); do ipset destroy "$set"; done
  fi
  local left; left="$(cmd_leftovers)"
  [[ -z "$left" ]] || die "kube-router's rules are still on the host after cleanup: $(tr '\n' ' ' <<<"$left")"
}

stop_enforcer() {
  local p left
  for p in $(ours); do
    log "stopping kube-router (pid $p)"
    kill "$p" 2>/dev/null || true
  done
  for _ in $(seq 1 80); do [[ -z "$(ours)" ]] && break; sleep 0.25; done
  for p in $(ours); do kill -9 "$p" 2>/dev/null || true; done
  sleep 0.2
  left="$(ours | tr '\n' ' ')"
  [[ -z "$left" ]] || die "kube-router still running after SIGKILL: pid $left"
  rm -f "$STATE/kr.pid"
  if [[ -n "$(cmd_leftovers)" ]]; then
    log "removing kube-router's chains and ipsets"
    remove_rules
  fi
}

cmd_start() {
  [[ -f "$PLANE_STATE/ports.env" ]] && HETERO_KUBE_STATE="$PLANE_STATE" bash "$HERE/kubeplane.sh" status >/dev/null 2>&1 \
    || die "the real-node plane is not running (tests/infra/realnode.sh start)"
  if alive && chains_present; then log "already running (pid $(pid))"; return 0; fi
  local support; support="$(cmd_support)"
  [[ "$support" == *" accepts "* ]] || die "kube-router cannot program its iptables rules: $support"
  cmd_build
  local t=$SECONDS
  stop_enforcer
  mkdir -p "$STATE/logs"
  [[ -f "$STATE/logs/kr.log" ]] && mv "$STATE/logs/kr.log" "$STATE/logs/kr.log.prev"
  apply /api/v1/namespaces/kube-system/serviceaccounts '{"metadata":{"name":"kube-router"}}'
  # what the firewall-only process reads: its informers (pods, namespaces, policies, and the services,
  # endpoints, EndpointSlices and nodes informers kube-router starts whatever runs) and its own Node
  apply /apis/rbac.authorization.k8s.io/v1/clusterroles '{"metadata":{"name":"hetero-kube-router"},"rules":[
    {"apiGroups":[""],"resources":["pods","namespaces","services","endpoints","nodes"],"verbs":["get","list","watch"]},
    {"apiGroups":["discovery.k8s.io"],"resources":["endpointslices"],"verbs":["list","watch"]},
    {"apiGroups":["networking.k8s.io"],"resources":["networkpolicies"],"verbs":["list","watch"]}]}'
  apply /apis/rbac.authorization.k8s.io/v1/clusterrolebindings '{"metadata":{"name":"hetero-kube-router"},
    "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"hetero-kube-router"},
    "subjects":[{"kind":"ServiceAccount","name":"kube-router","namespace":"kube-system"}]}'
  local token
  token="$(curl_admin -X POST -H 'Content-Type: application/json' \
    "https://127.0.0.1:$(plane_port)/api/v1/namespaces/kube-system/serviceaccounts/kube-router/token" \
    -d '{"spec":{"expirationSeconds":86400}}' \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["token"], end="")')" \
    || die "no token for ServiceAccount kube-system/kube-router"
  (umask 077; python3 - "$STATE/kubeconfig" "https://127.0.0.1:$(plane_port)" "$PLANE_STATE/pki/ca.crt" "$token" <<'PY'
import json, sys
path, server, ca, token = sys.argv[1:]
json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "kube-router",
           "clusters": [{"name": "plane", "cluster": {"server": server, "certificate-authority": ca}}],
           "users": [{"name": "kube-router", "user": {"token": token}}],
           "contexts": [{"name": "kube-router", "context": {"cluster": "plane", "user": "kube-router"}}]},
          open(path, "w"))
PY
  )
  log "starting kube-router ${KR_VERSION} firewall only (node $NODE_NAME, services $SERVICE_CIDR)"
  # the subshell execs into kube-router: $! is its pid (no setsid, which may fork); SIGHUP ignored
  ( trap '' HUP; exec "$(kr_bin)" --kubeconfig "$STATE/kubeconfig" --hostname-override "$NODE_NAME" \
      --run-firewall=true --run-router=false --run-service-proxy=false --run-loadbalancer=false \
      --enable-ipv4=true --enable-ipv6=false --service-cluster-ip-range "$SERVICE_CIDR" \
      --health-port 0 --metrics-port 0 --v 2 \
    >> "$STATE/logs/kr.log" 2>&1 < /dev/null 6>&- 7>&- 8>&- 9>&- ) &
  echo $! > "$STATE/kr.pid"
  local end=$((SECONDS + 60))
  until chains_present; do
    if ! alive; then
      tail -n 30 "$STATE/logs/kr.log" >&2
      stop_enforcer
      die "kube-router exited before programming its iptables chains (log: $STATE/logs/kr.log)"
    fi
    if (( SECONDS >= end )); then
      tail -n 30 "$STATE/logs/kr.log" >&2
      stop_enforcer
      die "kube-router programmed no iptables chain within 60s (log: $STATE/logs/kr.log)"
    fi
    sleep 0.5
  done
  log "TIMING start kube-router $((SECONDS - t))s"
}

cmd_status() {
  if alive && chains_present; then
    echo "kube-router ${KR_VERSION} firewall: running (pid $(pid)), FORWARD jumps to KUBE-ROUTER-FORWARD"
  else
    echo "kube-router ${KR_VERSION} firewall: DOWN"; return 1
  fi
}

lock_state() { mkdir -p "$RN_STATE"; exec 7>"$RN_STATE/kuberouter.lock"; flock 7; }

# build-if-supported: the setup's background build, only where it is the enforcer the tests will use: a
# kernel whose configuration says kube-network-policies cannot run (no CONFIG_NFT_QUEUE) and that has
# ipset and the iptables set match. Elsewhere skipped in seconds (no apt, no Go).
cmd_build_if_supported() {
  local config; config="$(kernel_config)"
  if ! grep -qx '# CONFIG_NFT_QUEUE is not set' <<<"$config"; then
    log "not built: kube-network-policies is the enforcer here (the kernel's configuration does not say it lacks nft_queue)"
    return 0
  fi
  if ! grep -qx 'CONFIG_IP_SET=[ym]' <<<"$config" || ! grep -qx 'CONFIG_NETFILTER_XT_SET=[ym]' <<<"$config"; then
    log "not built: this kernel ($(uname -r)) has no ipset or no iptables set match (CONFIG_IP_SET, CONFIG_NETFILTER_XT_SET)"
    return 0
  fi
  cmd_build
}

case "${1:-}" in
  build) cmd_build ;;
  build-if-supported) cmd_build_if_supported ;;
  start) lock_state; cmd_start ;;
  stop) lock_state; stop_enforcer ;;
  status) cmd_status ;;
  version) echo "$KR_VERSION" ;;
  support) cmd_support ;;
  leftovers) cmd_leftovers ;;
  *) echo "usage: $0 {build|build-if-supported|start|stop|status|version|support|leftovers}" >&2; exit 2 ;;
esac
