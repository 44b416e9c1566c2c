#!/usr/bin/env bash
# The project's test command (README, second command). On a fresh Debian machine, as root, it
# installs and starts everything the tests need, then runs the whole suite:
#   Python deps (editable install with test extras), a real Docker engine and the offline test
#   images, the real Kubernetes control plane with KWOK nodes (built from the Go module proxy, cached
#   under ~/.cache/pytest-hetero), a real node (kubelet + containerd + CNI + test device plugin) on a
#   plane of its own with a real Kueue, then pytest. Extra arguments go to pytest.
#
# Cold-machine time is dominated by Go builds (kube-apiserver & co, Kueue, cosign). They need no apt
# and no Docker, so they start first, in background chains, while the foreground installs the
# Python deps, builds the Docker images and installs Chromium (apt stays in the foreground only: two
# apt-gets at once fight over dpkg's lock) and starts the planes; ruff and mypy run in a chain of their
# own once the Python deps are in (mypy's 30 s overlap the planes' start). Each chain's log is printed
# when it is joined; a failed chain fails the run with its log. Every step's time is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export HETERO_CACHE="${HETERO_CACHE:-$HOME/.cache/pytest-hetero}"
# Bytecode caches on: where PYTHONDONTWRITEBYTECODE is set (it is in this project's CI environment), every gate
# process the suite starts (hundreds) compiled the package from source and pytest rewrote the asserts of its 140
# modules again: about 1 s of CPU each, measured, on a suite that keeps both cores busy. __pycache__ is git-ignored.
unset PYTHONDONTWRITEBYTECODE
RUN_T0=$SECONDS
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/hetero-run.XXXXXX")"
TIMES="$LOGS/times"
: >"$TIMES"
step() { printf '\n==> %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }
# timed LABEL CMD...: run CMD, then print and record how long it took (the scripts also log TIMING lines)
timed() {
  local label="$1" t=$SECONDS rc=0; shift
  "$@" || rc=$?
  printf '    %s: %ss\n' "$label" "$((SECONDS - t))"
  printf '%-58s %5ss%s\n' "$label" "$((SECONDS - t))" "$([[ $rc -eq 0 ]] || echo " (failed, exit $rc)")" >>"$TIMES"
  return "$rc"
}
# bg NAME CMD...: run CMD in the background, its output in $LOGS/NAME.log, its time recorded by itself
declare -A BG_PID=()
bg() {
  local name="$1"; shift
  ( t=$SECONDS; "$@"; printf '%-58s %5ss (background)\n' "$name" "$((SECONDS - t))" >>"$TIMES" ) \
    >"$LOGS/$name.log" 2>&1 &
  BG_PID[$name]=$!
}
# join NAME: wait for a background chain, print its log, stop here when it failed
join() {
  local name="$1" rc=0
  wait "${BG_PID[$name]}" || rc=$?
  sed "s/^/    [$name] /" "$LOGS/$name.log"
  if [[ $rc -ne 0 ]]; then echo "ERROR: background step '$name' failed (exit $rc)" >&2; exit "$rc"; fi
}
summary() {
  printf '\n==> step times (wall, this run)\n'
  cat "$TIMES"
  printf '%-58s %5ss\n' "setup in all" "$((SECONDS - RUN_T0))"
}
# a setup step that fails still shows what ran and for how long; pytest's own line closes a full run
on_exit() { summary; local p; for p in "${BG_PID[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap on_exit EXIT

step "Go builds started in the background (Kubernetes plane; Kueue, cosign and actionlint; the NetworkPolicy enforcer)"
bg "kubeplane build (kube-apiserver, scheduler, controller-manager, etcd, kwok)" \
  bash tests/infra/kubeplane.sh build
BG_PLANE="kubeplane build (kube-apiserver, scheduler, controller-manager, etcd, kwok)"
bg "Kueue, cosign and actionlint builds" \
  bash -c 'bash tests/infra/kueue.sh build && bash tests/infra/gotools.sh build'
BG_TOOLS="Kueue, cosign and actionlint builds"
# kube-network-policies (the real node's NetworkPolicy enforcer, tests/kubernetes/test_realnode_boundaries.py):
# 389 s of this chain on a cold cache (2 shared cores, nice 10, module downloads included); skipped on a kernel
# without the nftables queue statement, where it cannot run (its start says why). There kube-router's firewall
# (tests/infra/kuberouter.sh, v2.1.0, test plane only) is built instead: 599 s cold on 2 shared cores
# (193 CPU-s, module downloads included); skipped where kube-network-policies is the enforcer
# (a chain of its own beside Kueue's, which is the longest: the enforcer's ~200 CPU-s share the cores rather
# than wait ~10 min behind it)
bg "NetworkPolicy enforcer build (kube-network-policies or kube-router)" \
  bash -c 'bash tests/infra/netpol.sh build-if-supported && bash tests/infra/kuberouter.sh build-if-supported'
BG_ENFORCER="NetworkPolicy enforcer build (kube-network-policies or kube-router)"

step "Python dependencies"
timed "python deps" python3 -m pip install --quiet --disable-pip-version-check -e ".[test,nvidia,html,example-build]"

# the local backend confines the code under test with bubblewrap (tests/test_sandbox.py needs it)
step "bubblewrap; nftables and ipset (the NetworkPolicy enforcers' tools, tests/infra/netpol.sh and kuberouter.sh)"
command -v bwrap >/dev/null 2>&1 && command -v nft >/dev/null 2>&1 && command -v ipset >/dev/null 2>&1 \
  || { apt-get update -qq && apt-get install -y -qq --no-install-recommends bubblewrap nftables ipset; }

# The layout's gates: the import rules run with the suite (tests/test_architecture.py); lint and strict
# typing run first, so a violation stops CI before anything slow starts.
step "Static checks (ruff, mypy --strict) started in the background: they need only the Python deps"
bg "ruff and mypy --strict" \
  bash -c 'python3 -m ruff check pytest_hetero tests bench && python3 -m mypy'
BG_STATIC="ruff and mypy --strict"

step "Docker engine and offline test images"
timed "docker engine" bash tests/infra/docker-engine.sh ensure
timed "docker test images" bash tests/infra/docker-engine.sh images

if [ -f tests/infra/chromium.sh ]; then
  step "Headless Chromium, pdftotext and a CJK font for the HTML report and dossier tests"
  timed "chromium, poppler, CJK font" bash tests/infra/chromium.sh ensure
fi

step "Kubernetes control plane (kube-apiserver, kube-scheduler, kube-controller-manager, etcd, kwok)"
timed "wait for the plane build" join "$BG_PLANE"
timed "kube plane start" bash tests/infra/kubeplane.sh start
eval "$(bash tests/infra/kubeplane.sh env)"

# Its own plane (state /tmp/hetero-realnode), so the KWOK plane's scheduling messages stay as they
# are; KUBECONFIG keeps naming the KWOK plane. The tests reach it through the `realnode` fixture.
# The kubelet builds here, after the plane: same wrapper module and flags, so it hits that build cache.
step "Real node (kubelet, containerd, CNI, test device plugin) and Kueue on a plane of their own"
timed "real node build (kubelet, device plugin, pause image)" bash tests/infra/realnode.sh build
timed "real node start (plane, containerd + images, kubelet, device plugin)" bash tests/infra/realnode.sh start
timed "wait for the Kueue/cosign/actionlint builds" join "$BG_TOOLS"
timed "Kueue start" bash tests/infra/kueue.sh start
timed "wait for the NetworkPolicy enforcer build" join "$BG_ENFORCER"

step "Static checks"
timed "wait for ruff and mypy --strict" join "$BG_STATIC"

# The ecosystem's own checkers the tests run: cosign verify-blob-attestation (the bundle's attestations) and
# actionlint (docs/ci), built from the Go module proxy at pinned versions and cached like the control plane.
eval "$(bash tests/infra/gotools.sh env)"

trap - EXIT
summary
# pytest-xdist workers (HETERO_TEST_WORKERS, default 4; 0 runs serially): the real node's and the Docker engine's
# tests each run in one lane, in order, on one worker; every worker has a KWOK plane of its own; other files are
# spread over the workers (tests/suite_setup.py). Most tests wait on pods, containers and processes, so four
# workers keep two cores busy.
WORKERS="${HETERO_TEST_WORKERS:-4}"
step "pytest ($([[ "$WORKERS" == 0 ]] && echo serial || echo "$WORKERS workers"))"
if [[ "$WORKERS" == 0 ]]; then exec python3 -m pytest "$@"; fi
exec python3 -m pytest -n "$WORKERS" "$@"
