"""Per-run model runs (``--hetero-model-runs per-run``) on the KWOK plane: each run is a Pod of its own, placed by
the real scheduler on a pool node, but a KWOK node runs the exec on this host: isolation between model runs is
stated not proven there (the real node's case, where it is proven, is tests/kubernetes/test_realnode_spread.py)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from kubekit import kube_matrix
from support import evidence_of, survivors

from pytest_hetero.backends.labels import RUN_ID

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster

pytestmark = pytest.mark.usefixtures("outside_inputs")


def test_per_run_pods_on_kwok_nodes_say_the_exec_ran_on_the_host(
    pytester: pytest.Pytester, cluster: Cluster, run_id: str
) -> None:
    doc = json.loads(kube_matrix(cluster.suffix, cluster.namespace,
                                 [{"name": "cpu", "type": "cpu", "requests": {"cpu": "1"}, "pool": "cpu"}]))
    first = doc["spec"]["models"][0]
    doc["spec"]["models"] = [first, {**first, "name": "second"}]
    pytester.makefile(".matrix.yaml", k=json.dumps(doc))
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "--hetero-kube-context",
                                "hetero", "--hetero-model-runs", "per-run", "--hetero-concurrency", "2",
                                "-k", "not business")
    ev = evidence_of(pytester)
    models = {i["nodeid"].split("::", 1)[1]: i for i in ev["items"] if i["layer"] == "model"}
    assert result.ret == 0, [i["failure"] for i in ev["items"] if i["failure"]]
    assert sorted(models) == ["cpu::py::digits-logreg@digits-test::model", "cpu::py::second@digits-test::model"]
    pods, roots = set(), set()
    for item in models.values():
        [run] = [r["data"] for r in item["records"] if r["kind"] == "model.run"]
        assert (run["exit_code"], run["simulated"]) == (0, True)
        assert run["spread"]["node"] in cluster.nodes["cpu"] and run["spread"]["concurrency"] == 2
        assert run["isolation"]["shared_between_runs"] is True and "KWOK host" in run["isolation"]["reason"]
        parts: list[Any] = [r["data"]["part"] for r in item["records"] if r["kind"] == "scope.not_proven"]
        assert "isolation between model runs" in parts
        pods.add(run["spread"]["pod"])
        roots.add(run["run_dir"].split("/runs/")[0])
    assert len(pods) == 2  # a Pod per run
    # each run's inputs went to a folder of its own on the KWOK host (this host), removed after its run
    assert len(roots) == 2 and not [r for r in roots if Path(r).exists()], roots


def test_free_concurrency_is_what_the_pools_nodes_hold_beside_their_pods(
    pytester: pytest.Pytester, cluster: Cluster, run_id: str
) -> None:
    """``concurrency: free`` on the cpu pool (2 KWOK nodes of 32 CPUs), runs asking for 12 CPUs: 2 per node, 4 at once,
    counted from the nodes' allocatable and what their pods request (the startup pod the gate deleted not
    counted), recorded per node; 5 runs, so the fifth waits for a slot."""
    doc = json.loads(kube_matrix(cluster.suffix, cluster.namespace,
                                 [{"name": "cpu", "type": "cpu", "requests": {"cpu": "12"}, "pool": "cpu",
                                   "model_runs": "per-run", "concurrency": "free"}]))
    first = doc["spec"]["models"][0]
    doc["spec"]["models"] = [{**first, "name": f"m{i}"} for i in range(1, 6)]
    pytester.makefile(".matrix.yaml", k=json.dumps(doc))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run_id,
                                "--hetero-kube-context", "hetero", "-k", "not business")
    ev = evidence_of(pytester)
    models = {i["nodeid"].split("::", 1)[1]: i for i in ev["items"] if i["layer"] == "model"}
    assert result.ret == 0, [i["failure"] for i in ev["items"] if i["failure"]]
    [spread] = [r["data"] for r in models["cpu::py::m1@digits-test::model"]["records"] if r["kind"] == "model.spread"]
    free = spread["free_capacity"]
    assert (spread["concurrency_setting"], spread["concurrency"], spread["launched"]) == ("free", 4, 5)
    assert {n: (f["fits"], f["bound_by"]) for n, f in free["nodes"].items()} == {
        name: (2, "cpu") for name in cluster.nodes["cpu"]}
    assert (free["total"], free["width"], free["unavailable"]) == (4, 4, None)
    assert spread["startup_workload_released"]
    runs = [next(r["data"] for r in i["records"] if r["kind"] == "model.run") for i in models.values()]
    assert all(r["spread"]["concurrency"] == 4 and r["spread"]["node"] in cluster.nodes["cpu"] for r in runs)


def test_a_run_pod_deleted_by_someone_else_fails_that_run_only_and_no_pod_is_left(
    pytester: pytest.Pytester, cluster: Cluster, run_id: str
) -> None:
    """Three per-run models at once; someone else deletes the ``victim`` run's Pod while its model runs (a thread of
    this test, with the admin client): that item reports ``pod_deleted`` (owner infrastructure), naming the pod; the
    other two pass with their own pods; no pod of the run is left in the namespace (but going)."""
    doc = json.loads(kube_matrix(cluster.suffix, cluster.namespace,
                                 [{"name": "cpu", "type": "cpu", "requests": {"cpu": "1"}, "pool": "cpu"}]))
    first = doc["spec"]["models"][0]
    token = f"hetero-victim-{run_id}"  # KWOK runs the exec on this host: the model's process is seen here
    victim = {**first, "name": "victim", "entrypoint": ["{python}", "-c", f"import time; time.sleep(8)  # {token}"]}
    doc["spec"]["models"] = [first, victim, {**first, "name": "second"}]
    pytester.makefile(".matrix.yaml", k=json.dumps(doc))
    deleted: list[str] = []
    stop = threading.Event()

    def delete_the_victims_pod() -> None:
        while not stop.is_set():
            pods: Any = cluster.core.list_namespaced_pod(cluster.namespace, label_selector=f"{RUN_ID}={run_id}")
            running = [p.metadata.name for p in pods.items
                       if p.metadata.name.startswith("run-cpu-victim") and p.status.phase == "Running"]
            if running and survivors(token):  # its inputs copied, its model started (not a fixed 2 s after Running)
                cluster.core.delete_namespaced_pod(running[0], cluster.namespace, grace_period_seconds=0)
                deleted.append(running[0])
                return
            stop.wait(0.2)

    killer = threading.Thread(target=delete_the_victims_pod, daemon=True)
    killer.start()
    try:
        pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "--hetero-kube-context", "hetero",
                           "--hetero-model-runs", "per-run", "--hetero-concurrency", "3", "-k", "not business")
    finally:
        stop.set()
        killer.join(10)
    ev = evidence_of(pytester)
    models = {i["nodeid"].split("::", 1)[1]: i for i in ev["items"] if i["layer"] == "model"}
    [pod] = deleted
    hit = models["cpu::py::victim@digits-test::model"]
    assert (hit["status"], hit["failure"]["category"], hit["failure"]["owner"]) == ("error", "pod_deleted",
                                                                                    "infrastructure")
    assert pod in hit["failure"]["message"]
    pods = set()
    for nodeid in ("cpu::py::digits-logreg@digits-test::model", "cpu::py::second@digits-test::model"):
        item = models[nodeid]
        assert item["status"] == "passed", item["failure"]
        [run] = [r["data"] for r in item["records"] if r["kind"] == "model.run"]
        assert run["exit_code"] == 0 and run["spread"]["concurrency"] == 3 and run["spread"]["pod"] != pod
        pods.add(run["spread"]["pod"])
    assert len(pods) == 2
    left: Any = cluster.core.list_namespaced_pod(cluster.namespace, label_selector=f"{RUN_ID}={run_id}")
    assert [p.metadata.name for p in left.items if not p.metadata.deletion_timestamp] == []
