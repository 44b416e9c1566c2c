"""matrices/example-k8s.matrix.yaml on the real node's plane: its real rows on the real node, its large
pools on KWOK nodes created there (labelled as the example expects), evidence saying which is which."""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from kubekit import BASE, GFD, SESSION, schedulable
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from realkit import VENDOR_LABELS
from support import REPO, evidence_of

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import RealNodeCluster

EXAMPLE = REPO / "matrices" / "example-k8s.matrix.yaml"


@pytest.fixture
def example_pools(realnode: RealNodeCluster) -> Iterator[dict[str, str]]:
    """One CPU and one 8-GPU H100 KWOK node labelled ``hetero-example.pool`` on the real node's plane
    (its kwok manages them); deleted afterwards. The real node gets the labels GFD / the Ascend plugin
    would give it."""
    core = realnode.core
    core.patch_node(realnode.info.node, {"metadata": {"labels": VENDOR_LABELS}})
    names = {"cpu": f"example-cpu-{realnode.suffix}", "gpu": f"example-gpu-{realnode.suffix}"}
    extra = {"cpu": ({}, {}), "gpu": ({"nvidia.com/gpu": "8"}, GFD)}
    for pool, name in names.items():
        cap = {**BASE, **extra[pool][0]}
        core.create_node({"metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},  # type: ignore[arg-type]  # a manifest dict, sent as it is
                                       "labels": {"hetero-example.pool": pool, SESSION: realnode.suffix,
                                                  **extra[pool][1]}},
                          "status": {"capacity": cap, "allocatable": cap}})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(schedulable(core.read_node(n)) for n in names.values()):
        time.sleep(0.3)
    yield names
    for name in names.values():
        try:
            core.delete_node(name)
        except ApiException:
            pass


def run_example(pytester: pytest.Pytester, realnode: RealNodeCluster, monkeypatch: pytest.MonkeyPatch,
                *args: str) -> None:
    """Run matrices/example-k8s.matrix.yaml (its cases copied beside it) on the real node's plane in a
    fresh namespace whose pods on KWOK nodes exec on this host (a KWOK ClusterExec, removed after)."""
    shutil.copytree(REPO / "cases", pytester.path / "cases")
    (pytester.path / ".hetero-root").touch()  # a project, as a checkout is: the matrix's ../cases stay inside it
    (pytester.path / "matrices").mkdir()
    shutil.copy(EXAMPLE, pytester.path / "matrices" / EXAMPLE.name)
    monkeypatch.setenv("KUBECONFIG", str(realnode.info.kubeconfig))
    namespace = realnode.new_namespace("example")
    custom = client.CustomObjectsApi(realnode.api)
    custom.create_cluster_custom_object("kwok.x-k8s.io", "v1alpha1", "clusterexecs", {
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterExec", "metadata": {"name": namespace},
        "spec": {"selector": {"matchNamespaces": [namespace]}, "execs": [{"local": {"workDir": "/tmp"}}]}})
    time.sleep(1)  # kwok picks a new rule up through its watch
    try:
        pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", "x" + uuid.uuid4().hex[:9],
                           "--hetero-kube-namespace", namespace, *args, "matrices")
    finally:
        custom.delete_cluster_custom_object("kwok.x-k8s.io", "v1alpha1", "clusterexecs", namespace)


def test_example_matrix(pytester: pytest.Pytester, realnode: RealNodeCluster, example_pools: dict[str, str],
                        monkeypatch: pytest.MonkeyPatch) -> None:
    run_example(pytester, realnode, monkeypatch)
    ev = evidence_of(pytester)
    got = {i["nodeid"].split("::", 1)[1]: i for i in ev["items"]}
    combo = "digits-logreg@digits-test"
    statuses = {k: v["status"] for k, v in got.items()}
    assert statuses == {
        **{f"cpu-real::{k}": "passed" for k in ("discovery", "py311::scheduling", "py311::startup",
                                                f"py311::{combo}::model", f"py311::{combo}::business")},
        **{f"{r}::{k}": "passed" for r in ("gpu-real", "npu-real", "gpu-h100") for k in ("discovery", "py311::scheduling")},
        **{f"{r}::py311::startup": "failed" for r in ("gpu-real", "npu-real", "gpu-h100")},
        **{f"{r}::py311::{combo}::{layer}": "blocked" for r in ("gpu-real", "npu-real", "gpu-h100")
           for layer in ("model", "business")},
        **{f"cpu-pool::{k}": "passed" for k in ("discovery", "py311::scheduling", "py311::startup",
                                                f"py311::{combo}::model", f"py311::{combo}::business")},
    }, {k: (v["status"], (v["failure"] or {}).get("message")) for k, v in got.items() if v["status"] != "passed"}
    real_model = next(r["data"] for r in got[f"cpu-real::py311::{combo}::model"]["records"] if r["kind"] == "model.run")
    assert (real_model["simulated"], real_model["node"]) == (False, realnode.info.node)
    kwok_model = next(r["data"] for r in got[f"cpu-pool::py311::{combo}::model"]["records"] if r["kind"] == "model.run")
    assert kwok_model["simulated"] is True
    # models share the workload pod unreset: named as not proven (the verdict could not be pass)
    assert real_model["isolation"]["shared_between_runs"] is True
    shared = [p for p in ev["untested"]["not_proven"] if p["part"] == "isolation between model runs"]
    assert sorted(p["nodeid"].split("::", 1)[1] for p in shared) == [
        f"cpu-pool::py311::{combo}::model", f"cpu-real::py311::{combo}::model"]
    assert shared[0]["reason"] == ("the workload pod's file system and processes are not reset between model "
                                   "runs: an earlier run could have changed this run's result")
    for row in ("gpu-real", "npu-real"):
        failure = got[f"{row}::py311::startup"]["failure"]
        assert (failure["category"], failure["owner"]) == ("driver_missing", "infrastructure")
        devices = next(r["data"] for r in got[f"{row}::py311::startup"]["records"] if r["kind"] == "startup.devices")
        assert (devices["allocated"], devices["visible"], devices["verdict"]) == (1, 1, "ok")
    h100 = got["gpu-h100::py311::startup"]["failure"]
    assert (h100["category"], h100["owner"]) == ("device_not_visible", "infrastructure")
    [fingerprint] = ev["target"]
    assert set(fingerprint["simulated_nodes"]) == set(example_pools.values())
    assert realnode.info.node in fingerprint["nodes"] and realnode.info.node not in fingerprint["simulated_nodes"]
