#!/usr/bin/env bash
# The project's test command (README, second command). On a fresh Debian machine, as root, it
# installs and starts everything the tests need, then runs the whole suite:
#   Python deps (editable install with test extras), a real Docker engine and the offline test
#   images, the real Kubernetes control plane (built from the Go module proxy, cached under
#   ~/.cache/pytest-hetero), then pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export HETERO_CACHE="${HETERO_CACHE:-$HOME/.cache/pytest-hetero}"
step() { printf '\n==> %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }

step "Python dependencies"
python3 -m pip install --quiet --disable-pip-version-check -e ".[test,nvidia,html,example-build]"

step "Docker engine and offline test images"
bash tests/infra/docker-engine.sh ensure
bash tests/infra/docker-engine.sh images

step "Kubernetes control plane (kube-apiserver, kube-scheduler, kube-controller-manager, etcd, kwok)"
bash tests/infra/kubeplane.sh build
bash tests/infra/kubeplane.sh start
eval "$(bash tests/infra/kubeplane.sh env)"

if [ -f tests/infra/chromium.sh ]; then
  step "Headless Chromium for the HTML report tests"
  bash tests/infra/chromium.sh ensure
fi

step "pytest"
python3 -m pytest "$@"
