"""The training checks on the KWOK plane: its nodes are simulated (no process runs in a pod there), so the
communication item is not applicable, with that reason, and the job the engine made is gone; the checkpoint item of
a matrix naming no PersistentVolumeClaim is not applicable either, saying so. The jobs themselves run on the real
node (test_realnode_training.py)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from kubekit import kube_matrix
from kubernetes import client
from support import evidence_of

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster

pytestmark = pytest.mark.usefixtures("outside_inputs")


def test_training_items_on_a_simulated_node_are_not_applicable(pytester: pytest.Pytester, cluster: Cluster,
                                                               run_id: str) -> None:
    doc = json.loads(kube_matrix(cluster.suffix, cluster.namespace, [
        {"name": "cpu", "type": "cpu", "requests": {"cpu": "1", "memory": "256Mi"}, "pool": "cpu"}],
        layers={"model": {"timeout": "60s"}}))
    doc["spec"]["models"][0].update(task_type="training", training={"world_size": 2})
    pytester.makefile(".matrix.yaml", k=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "--hetero-kube-context", "hetero",
                       "-k", "communication or checkpoint")
    got = {i["nodeid"].split("::", 1)[1]: i for i in evidence_of(pytester)["items"]}
    for check, why in (("communication", "KWOK-simulated node"), ("checkpoint", "must name a PersistentVolumeClaim")):
        item = got[f"cpu::py::digits-logreg@digits-test::{check}::model"]
        assert item["status"] == "not_applicable", item.get("failure")
        assert why in json.dumps(item), item
    # no queue named (neither spec.task_queues nor the resource): the Job started at once, outside Kueue
    comm = got["cpu::py::digits-logreg@digits-test::communication::model"]
    sent = next(r["data"] for r in comm["records"] if r["kind"] == "training.k8s.job")
    assert (sent["queue"], sent["manifest"]["spec"]["suspend"]) == (None, False)
    assert "kueue.x-k8s.io/queue-name" not in sent["manifest"]["metadata"]["labels"]
    assert sent["manifest"]["spec"]["backoffLimitPerIndex"] == 0 and "backoffLimit" not in sent["manifest"]["spec"]
    batch: Any = client.BatchV1Api(cluster.api)
    assert [j.metadata.name for j in batch.list_namespaced_job(cluster.namespace,
                                                               label_selector=f"pytest-hetero.run-id={run_id}").items] == []


def test_cleanup_removes_a_job_configmap_left_by_a_dead_run(cluster: Cluster, run_id: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A run killed between start_job and remove_job leaves its programs' ConfigMap: `hetero cleanup` removes it
    (by the run-id label, like the Job, its pods and its Service)."""
    import os

    from pytest_hetero.cli import main

    core: Any = client.CoreV1Api(cluster.api)
    name = f"hetero-{run_id}-job"
    core.create_namespaced_config_map(cluster.namespace, {
        "metadata": {"name": name, "labels": {"pytest-hetero.run-id": run_id, "pytest-hetero.role": "workload"}},
        "data": {"allreduce.py": "print('left behind')\n"}})
    assert os.environ["KUBECONFIG"] == str(cluster.kubeconfig)
    assert main(["cleanup", "--backend", "kubernetes", "--run-id", run_id, "--kube-namespace", cluster.namespace,
                 "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(e["kind"], e["name"], e["removed"]) for e in listed] == [
        ("configmap", f"{cluster.namespace}/{name}", True)]
    assert [c.metadata.name for c in core.list_namespaced_config_map(
        cluster.namespace, label_selector=f"pytest-hetero.run-id={run_id}").items] == []
