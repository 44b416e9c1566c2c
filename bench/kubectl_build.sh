#!/usr/bin/env bash
# Build kubectl at the plane's Kubernetes version in kubeplane.sh's wrapper module (cached; the
# apiserver's and kubelet's packages in the Go build cache make it quick). Prints its path.
# Used by bench_realnode_startup.py: the baseline talks to the plane with a client of its own version.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KUBEPLANE="$HERE/../tests/infra/kubeplane.sh"
K8S_VERSION="$(sed -n 's/^K8S_VERSION="\(v[0-9.]*\)".*/\1/p' "$KUBEPLANE")"
CACHE_ROOT="${HETERO_CACHE:-$HOME/.cache/pytest-hetero}"
OUT="$CACHE_ROOT/realnode/kubectl-${K8S_VERSION}/kubectl"
WRAP="$CACHE_ROOT/kube/wrap-k8s-${K8S_VERSION}"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
if [[ ! -x "$OUT" ]]; then
  [[ -f "$WRAP/go.mod" ]] || { echo "no wrapper module in $WRAP: run tests/infra/realnode.sh build first" >&2; exit 1; }
  mkdir -p "$(dirname "$OUT")"
  ld="-s -w -X k8s.io/component-base/version.gitVersion=${K8S_VERSION} -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION}"
  t=$SECONDS
  (cd "$WRAP" && GOFLAGS="-trimpath -buildvcs=false -mod=mod" CGO_ENABLED=0 GOTOOLCHAIN=local \
     nice -n "${HETERO_BUILD_NICE:-10}" "$GO" build -ldflags "$ld" -o "$OUT.tmp" k8s.io/kubernetes/cmd/kubectl)
  mv "$OUT.tmp" "$OUT"
  echo "built kubectl ${K8S_VERSION} in $((SECONDS - t))s" >&2
fi
echo "$OUT"
