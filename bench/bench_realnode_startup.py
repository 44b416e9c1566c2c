"""Startup-to-exec on the real node: the plugin's scheduling + startup items vs ``kubectl run`` + ``kubectl exec``.

On the real node (tests/infra/realnode.sh: kubelet, containerd, CNI), one CPU resource × the
shell-only image (already in the node's containerd). Both sides do the same work:

* plugin: ``pytest <matrix> -k "scheduling or startup"`` in this process: create the pod, watch it
  placed and its container running, the device payload by exec (through the apiserver → kubelet),
  the container's log, its events when needed, then delete the pod and see it gone;
* kubectl (built at the plane's version by ``bench/kubectl_build.sh``, cached): ``kubectl run`` the same
  pod (same toleration, nodeSelector, command, resources) → ``kubectl wait --for=condition=Ready`` →
  ``kubectl exec … -- sh -c <the same payload>`` → ``kubectl logs`` → ``kubectl delete --wait``.

Plugin timing: from the start of the run-test loop to the end of the backend's close (LoopTimer):
interpreter start, imports, collection and the bundle written after the loop are outside it.
kubectl timing: the five commands end to end, their process starts included. Interleaved rounds,
medians and spread; prints the ratio (no target is set by the issue: the figure is reported).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.loop_timer import LoopTimer  # (the repository root is on sys.path)
from bench.realnode_handle import realnode  # (the repository root is on sys.path)
from pytest_hetero.backends.kubernetes.scheduling import KEEP_ALIVE
from pytest_hetero.probes.payload import payload_script

IMAGE = "pytest-hetero/shell-only:1"



def matrix_doc(info: Any, namespace: str) -> dict[str, Any]:
    """One CPU resource on the real node × the shell-only image; no model runs (-k selects)."""
    digits = ROOT / "cases" / "digits"
    return {
        "apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": "bench-realnode"},
        "spec": {
            "target": {"backend": "kubernetes", "kubeconfig": str(info.kubeconfig), "namespace": namespace,
                       "pull_policy": "never"},
            "layers": {"scheduling": {"timeout": "60s"}, "startup": {"timeout": "60s"}},
            "resources": [{"name": "cpu", "type": "cpu", "requests": {"cpu": "100m"},
                           "node_selector": info.node_selector, "tolerations": [info.toleration]}],
            "images": [{"name": "sh", "reference": IMAGE}],
            "models": [{"name": "m", "version": "1", "uri": str(digits / "model" / "digits-logreg-1.0.0.onnx"),
                        "sha256": "d2230a9096140b09d443879ca3b0d7cb0021917896a8f462f79806de1109b523",
                        "code": str(digits), "entrypoint": ["true"]}],
            "datasets": [{"name": "d", "version": "1", "uri": str(digits / "data" / "digits-test-1.0.0.csv"),
                          "sha256": "3678e2fa8f107ffa5d8518cc07a46b9e4ce67e89d65b2f88e4c391638d965bfb"}],
        },
    }


def plugin_once(info: Any, namespace: str) -> float:
    """One plugin run of the scheduling and startup items; seconds of its run-test loop and close."""
    with tempfile.TemporaryDirectory(prefix="hetero-bench-rn-") as tmp:
        path = Path(tmp) / "bench.matrix.yaml"
        path.write_text(json.dumps(matrix_doc(info, namespace)))
        timer = LoopTimer()
        code = pytest.main([str(path), "-q", "-p", "no:cacheprovider", "-k", "scheduling or startup",
                            "--hetero-report-dir", str(Path(tmp) / "reports"), "--rootdir", tmp, "--no-header",
                            "--tb=line"], plugins=[timer])
        if code != 0:
            raise SystemExit(f"plugin run failed (exit {code})")
        return timer.seconds


def kubectl_once(kubectl: str, info: Any, namespace: str) -> float:
    """The same pod through kubectl: run, wait Ready, exec the payload, logs, delete (waits until gone)."""
    name = f"kubectl-{uuid.uuid4().hex[:8]}"
    overrides = {"spec": {"tolerations": [info.toleration], "nodeSelector": info.node_selector,
                          "terminationGracePeriodSeconds": 2, "automountServiceAccountToken": False,
                          "containers": [{"name": name, "image": IMAGE, "command": KEEP_ALIVE,
                                          "imagePullPolicy": "Never",
                                          "resources": {"requests": {"cpu": "100m"}}}]}}
    base = [kubectl, "--kubeconfig", str(info.kubeconfig), "-n", namespace]
    steps = [
        [*base, "run", name, f"--image={IMAGE}", "--restart=Always", f"--overrides={json.dumps(overrides)}"],
        [*base, "wait", "--for=condition=Ready", f"pod/{name}", "--timeout=60s"],
        [*base, "exec", name, "--", "/bin/sh", "-c", payload_script()],
        [*base, "logs", name],
        [*base, "delete", "pod", name, "--wait=true"],
    ]
    start = time.perf_counter()
    for argv in steps:
        subprocess.run(argv, check=True, capture_output=True, timeout=120)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Interleaved rounds; print medians, spread and the ratio plugin / kubectl."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds of each (default 5)")
    args = parser.parse_args(argv)
    # the matrix is written to a temporary folder and names the repository's digits case: allow it
    os.environ["HETERO_ALLOW_PATHS"] = os.pathsep.join(
        p for p in (os.environ.get("HETERO_ALLOW_PATHS", ""), str(ROOT / "cases")) if p)
    info = realnode()
    kubectl = subprocess.run(["bash", str(ROOT / "bench" / "kubectl_build.sh")], check=True, capture_output=True,
                             text=True).stdout.strip()
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(info.kubeconfig)))  # type: ignore[no-untyped-call]
    namespace = f"hetero-bench-rn-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]  # a manifest dict, sent as it is
    plugin_s: list[float] = []
    kubectl_s: list[float] = []
    try:
        plugin_once(info, namespace)  # warm: imports, image metadata, connection pools
        for round_no in range(args.rounds):
            order = ("plugin", "kubectl") if round_no % 2 == 0 else ("kubectl", "plugin")
            for which in order:
                if which == "plugin":
                    plugin_s.append(plugin_once(info, namespace))
                else:
                    kubectl_s.append(kubectl_once(kubectl, info, namespace))
            print(f"round {round_no + 1}: plugin {plugin_s[-1]:.2f} s, kubectl {kubectl_s[-1]:.2f} s", flush=True)
    finally:
        core.delete_namespace(namespace)
    ratio = statistics.median(plugin_s) / statistics.median(kubectl_s)
    print(f"ran: {args.rounds} interleaved rounds on node {info.node}, image {IMAGE}, kubectl {kubectl}")
    print(f"median plugin {statistics.median(plugin_s):.2f} s ({min(plugin_s):.2f}-{max(plugin_s):.2f}), "
          f"kubectl {statistics.median(kubectl_s):.2f} s ({min(kubectl_s):.2f}-{max(kubectl_s):.2f})")
    print(f"ratio plugin/kubectl = {ratio:.2f}")
    print("outside the plugin timing: interpreter start, imports, collection, the bundle written after the loop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
