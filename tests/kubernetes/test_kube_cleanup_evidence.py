"""Cleanup is evidence: what the run created and could not delete is recorded, and the run is not clean.

Two real ways a workload outlives its run (compare kyverno/chainsaw#2531, where a failed cleanup
read as passed): a finalizer nobody clears (put on the run's pod through the API while the run goes
on, as a controller would), and an apiserver that refuses the deletion (the harness's
ServiceAccount without ``delete pods``). Either way evidence's ``cleanup`` names the object and why,
the verdict reads ``not_clean``, the signed predicate carries it, and pytest exits 1.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kubekit import kube_matrix
from realkit import real_matrix
from support import evidence_of
from test_kube_rbac import install_rbac

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster, RealNodeCluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

FINALIZER = "hetero-test.example/never-clears"
CPU = [{"name": "cpu", "type": "cpu", "requests": {"cpu": "1"}, "pool": "cpu"}]


def run_pods(cluster: Cluster, run_id: str) -> list[Any]:
    return cluster.core.list_pod_for_all_namespaces(label_selector=f"pytest-hetero.run-id={run_id}").items


def test_a_finalizer_that_never_clears_makes_the_run_not_clean(
    pytester: pytest.Pytester, realnode: RealNodeCluster
) -> None:
    """On the real node (KWOK's pod-delete stage empties finalizers itself, a kubelet does not)."""
    namespace, run_id = realnode.new_namespace("cleanup"), "c" + uuid.uuid4().hex[:10]
    core = realnode.core
    resource = {"name": "cpu", "type": "cpu", "requests": {"cpu": "100m"}}
    pytester.makefile(".matrix.yaml", k=real_matrix(realnode.info, namespace, [resource],
                                                    target={"cleanup_wait_s": 2}))

    def run_pods(_: Any, run: str) -> list[Any]:
        return core.list_namespaced_pod(namespace, label_selector=f"pytest-hetero.run-id={run}").items

    # a controller of the cluster puts its finalizer on the run's pod once it exists
    def finalize() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for pod in run_pods(None, run_id):
                core.patch_namespaced_pod(pod.metadata.name, namespace, {"metadata": {"finalizers": [FINALIZER]}})
                return
            time.sleep(0.2)

    controller = threading.Thread(target=finalize, daemon=True)
    controller.start()
    try:
        result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "scheduling or startup")
        ev = evidence_of(pytester)
        [pod] = run_pods(None, run_id)
        assert pod.metadata.deletion_timestamp is not None and pod.metadata.finalizers == [FINALIZER]
    finally:
        for p in run_pods(None, run_id):
            core.patch_namespaced_pod(p.metadata.name, namespace, {"metadata": {"finalizers": None}})
    assert {i["status"] for i in ev["items"]} == {"passed"}
    assert (ev["summary"]["verdict"], ev["summary"]["clean"], ev["summary"]["leftovers"]) == ("not_clean", False, 1)
    [left] = ev["cleanup"]["leftovers"]
    assert (left["backend"], left["kind"], left["namespace"], left["name"]) == (
        "kubernetes", "pod", namespace, pod.metadata.name)
    assert left["reason"] == f"still present 2 s after deletion: finalizers {FINALIZER} never cleared"
    assert left["detail"]["finalizers"] == [FINALIZER] and left["detail"]["deletionTimestamp"]
    assert left["remove"] == f"hetero cleanup --backend kubernetes --kube-namespace {namespace}"
    assert result.ret == 1  # every item passed; the run is still not clean
    result.stdout.fnmatch_lines(["verdict: NOT_CLEAN *", "cleanup: NOT CLEAN, 1 object(s) the run created*",
                                 f"    kubernetes pod {namespace}/{pod.metadata.name}: still present*"])
    bundle = next((pytester.path / "reports").iterdir())
    statement = json.loads(__import__("base64").b64decode(
        json.loads((bundle / "attestation.intoto.jsonl").read_text())["payload"]))
    predicate = statement["predicate"]
    assert predicate["verdict"] == "not_clean"
    assert predicate["cleanup"] == {"clean": False, "leftovers": [
        {"backend": "kubernetes", "kind": "pod", "namespace": namespace, "name": pod.metadata.name,
         "reason": left["reason"]}]}


def test_a_deletion_the_apiserver_refuses_is_a_leftover(
    pytester: pytest.Pytester, cluster: Cluster, run_id: str
) -> None:
    ns = cluster.new_namespace("hetero-cleanup")
    path = pytester.path / "sa.kubeconfig"
    path.write_text(yaml.safe_dump(install_rbac(cluster, ns, drop=("pods", "delete"))))
    pytester.makefile(".matrix.yaml", k=kube_matrix(cluster.suffix, ns, CPU, target={"kubeconfig": str(path)}))
    try:
        result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "scheduling")
        ev = evidence_of(pytester)
    finally:
        for p in run_pods(cluster, run_id):
            cluster.core.delete_namespaced_pod(p.metadata.name, p.metadata.namespace, grace_period_seconds=0)
    assert ev["summary"]["verdict"] == "not_clean" and result.ret == 1
    [left] = ev["cleanup"]["leftovers"]
    assert (left["kind"], left["namespace"], left["detail"]["status"]) == ("pod", ns, 403)
    assert left["reason"].startswith("delete refused: HTTP 403: pods ")
    assert f'User "system:serviceaccount:{ns}:pytest-hetero" cannot delete resource "pods"' in left["reason"]
