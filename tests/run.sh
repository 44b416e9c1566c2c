#!/usr/bin/env bash
# The project's test command (README, second command). On a fresh Debian machine, as root, it
# installs and starts everything the tests need, then runs the whole suite:
#   Python deps (editable install with test extras), a real Docker engine and the offline test
#   images, the real Kubernetes control plane with KWOK nodes (built from the Go module proxy, cached
#   under ~/.cache/pytest-hetero), a real node (kubelet + containerd + CNI + test device plugin) on a
#   plane of its own with a real Kueue, then pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export HETERO_CACHE="${HETERO_CACHE:-$HOME/.cache/pytest-hetero}"
step() { printf '\n==> %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }
# timed LABEL CMD...: run CMD, then print how long it took (the scripts also log TIMING lines)
timed() { local label="$1" t=$SECONDS; shift; "$@"; printf '    %s: %ss\n' "$label" "$((SECONDS - t))"; }

step "Python dependencies"
python3 -m pip install --quiet --disable-pip-version-check -e ".[test,nvidia,html,example-build]"

# the local backend confines the code under test with bubblewrap (tests/test_sandbox.py needs it)
step "bubblewrap"
command -v bwrap >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq --no-install-recommends bubblewrap; }

# The layout's gates: the import rules run with the suite (tests/test_architecture.py); lint and strict
# typing run first, so a violation stops CI before anything slow starts.
step "Static checks (ruff, mypy --strict)"
python3 -m ruff check pytest_hetero tests bench
python3 -m mypy

step "Docker engine and offline test images"
bash tests/infra/docker-engine.sh ensure
bash tests/infra/docker-engine.sh images

step "Kubernetes control plane (kube-apiserver, kube-scheduler, kube-controller-manager, etcd, kwok)"
bash tests/infra/kubeplane.sh build
bash tests/infra/kubeplane.sh start
eval "$(bash tests/infra/kubeplane.sh env)"

# Its own plane (state /tmp/hetero-realnode), so the KWOK plane's scheduling messages stay as they
# are; KUBECONFIG keeps naming the KWOK plane. The tests reach it through the `realnode` fixture.
step "Real node (kubelet, containerd, CNI, test device plugin) and Kueue on a plane of their own"
timed "real node build (kubelet, device plugin, pause image)" bash tests/infra/realnode.sh build
timed "real node start (plane, containerd + images, kubelet, device plugin)" bash tests/infra/realnode.sh start
timed "Kueue build" bash tests/infra/kueue.sh build
timed "Kueue start" bash tests/infra/kueue.sh start

if [ -f tests/infra/chromium.sh ]; then
  step "Headless Chromium, pdftotext and a CJK font for the HTML report and dossier tests"
  bash tests/infra/chromium.sh ensure
fi

# The ecosystem's own checkers the tests run: cosign verify-blob-attestation (the bundle's attestations) and
# actionlint (docs/ci), built from the Go module proxy at pinned versions and cached like the control plane.
step "cosign and actionlint (Go module proxy, cached under \$HETERO_CACHE/tools)"
timed "cosign + actionlint build" bash tests/infra/gotools.sh build
eval "$(bash tests/infra/gotools.sh env)"

step "pytest"
python3 -m pytest "$@"
