"""Drift-driven reruns on the real apiserver of the KWOK plane: a run with ``--hetero-snapshot`` signs what
the matrix depends on; after a driver label changes on one pool's node, ``--hetero-affected-from-cluster``
runs only that pool's items (the other pool ``deselected (unchanged since bundle …)``), ``hetero plan``
shows the same mapping without running, and the change record's intended vs observed impact is signed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from kubekit import POOL, SESSION, kube_matrix, schedulable
from kubernetes.client.exceptions import ApiException
from support import REPO
from test_kube_publish import hetero, wait_for

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

DRIVER = "nvidia.com/cuda.driver.major"


def gate(tmp: Path, cluster: Cluster, *args: str) -> dict[str, Any]:
    """Run the gate (profile quick) on tmp/d.matrix.yaml; return the single new bundle's evidence and path."""
    before = set((tmp / "reports").iterdir()) if (tmp / "reports").exists() else set()
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig),
           "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                          str(tmp / "d.matrix.yaml"), "--hetero-profile", "quick", "--hetero-kube-context", "hetero",
                          "--hetero-report-dir", str(tmp / "reports"), "--hetero-sign-key", str(tmp / "key"), *args],
                         capture_output=True, text=True, env=env, cwd=tmp, timeout=600, check=False)
    new = sorted(set((tmp / "reports").iterdir()) - before)
    assert len(new) == 1, run.stdout[-3000:] + run.stderr[-3000:]
    evidence = json.loads((new[0] / "evidence.json").read_text())
    return {"evidence": evidence, "bundle": new[0], "stdout": run.stdout}


@pytest.fixture
def pools(cluster: Cluster) -> Any:
    tag = uuid.uuid4().hex[:5]
    names = {p: f"drift{p}-{cluster.suffix}-{tag}" for p in ("a", "b")}
    cap = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    for pool, name in names.items():
        cluster.core.create_node({"metadata": {  # type: ignore[arg-type]  # a manifest dict, sent as it is
            "name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {POOL: f"drift-{pool}-{tag}", SESSION: cluster.suffix, "kubernetes.io/hostname": name,
                       DRIVER: "550"}}})
        cluster.core.patch_node_status(name, {"status": {"capacity": cap, "allocatable": cap, "conditions": []}})
    try:
        for name in names.values():
            wait_for(lambda n=name: schedulable(cluster.core.read_node(n)), 60, f"node {name} Ready")
        yield tag, names
    finally:
        for name in names.values():
            try:
                cluster.core.delete_node(name)
            except ApiException:
                pass


def test_only_what_the_cluster_change_affects_runs(cluster: Cluster, pools: Any, tmp_path: Path) -> None:
    tag, names = pools
    doc = json.loads(kube_matrix(cluster.suffix, cluster.namespace, [
        {"name": "a", "type": "cpu", "requests": {"cpu": "1"}, "pool": f"drift-a-{tag}"},
        {"name": "b", "type": "cpu", "requests": {"cpu": "1"}, "pool": f"drift-b-{tag}"}], name="d"))
    doc["spec"]["profiles"] = {"quick": {"layers": ["discovery", "scheduling", "startup"]}}
    (tmp_path / "d.matrix.yaml").write_text(json.dumps(doc))
    assert hetero("keygen", str(tmp_path / "key")).returncode == 0
    first = gate(tmp_path, cluster, "--hetero-snapshot")
    [snap] = first["evidence"]["cluster"]["snapshots"]
    assert snap["snapshot"]["nodes"][names["a"]]["labels"][DRIVER] == "550"
    statement = json.loads((first["bundle"] / "statement.intoto.json").read_text())
    assert statement["predicate"]["cluster"]["snapshots"] == [{k: snap[k] for k in ("matrix", "taken_at", "sha256")}]

    cluster.core.patch_node(names["a"], {"metadata": {"labels": {DRIVER: "560"}}})
    planned = hetero("plan", str(tmp_path / "d.matrix.yaml"), "--profile", "quick", "--affected-from-cluster",
                     str(first["bundle"]), "--key", str(tmp_path / "key.pub"), "--context", "hetero", "--json",
                     "--change", "operator=alice; ticket=OPS-7; reason=driver 560 on pool b; intended=b")
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    change = f"changed in the cluster: node {names['a']}: labels.{DRIVER} 550 → 560"
    assert plan["affected"] == {"a::py::startup": change, "a::discovery": "dependency of an affected item",
                                "a::py::scheduling": "dependency of an affected item"}
    label = f"bundle {first['evidence']['run']['id']} (verified)"
    assert {d["id"]: d["reason"] for d in plan["deselected"] if "profile" not in d["reason"]} == {
        i: f"deselected (unchanged since {label})" for i in ("b::discovery", "b::py::scheduling", "b::py::startup")}
    record = plan["cluster"]["change_record"]
    assert (record["observed"], record["unintended"], record["not_observed"]) == (["a"], ["a"], ["b"])

    second = gate(tmp_path, cluster, "--hetero-affected-from-cluster", str(first["bundle"]), "--hetero-change",
                  "operator=alice; ticket=OPS-7; reason=driver 560 on pool b; intended=b")
    evidence = second["evidence"]
    ran = {i["nodeid"].split("::", 1)[1] for i in evidence["items"]}
    assert ran == {"a::discovery", "a::py::scheduling", "a::py::startup"}
    untested = {e["nodeid"].split("::", 1)[1]: e["reason"] for e in evidence["untested"]["items"]
                if e["status"] == "deselected" and "profile" not in e["reason"]}
    assert untested == {i: f"deselected (unchanged since {label})"
                        for i in ("b::discovery", "b::py::scheduling", "b::py::startup")}
    [drift] = evidence["cluster"]["drift"]
    node_changes = [c for c in drift["changes"] if c["kind"] == "node" and c["name"] in names.values()]
    assert node_changes == [{"kind": "node", "name": names["a"], "field": f"labels.{DRIVER}", "old": "550",
                             "new": "560"}]
    predicate = json.loads((second["bundle"] / "statement.intoto.json").read_text())["predicate"]
    signed = predicate["cluster"]["change_record"]
    assert (signed["operator"], signed["ticket"], signed["intended"], signed["observed"], signed["unintended"]) == (
        "alice", "OPS-7", ["b"], ["a"], ["a"])
    assert "change record: intended ['b']; observed ['a']; unintended ['a']; not observed ['b']" in second["stdout"]
    assert hetero("verify", str(second["bundle"]), "--key", str(tmp_path / "key.pub")).returncode == 0


def test_a_baseline_without_snapshot_is_a_usage_error(cluster: Cluster, tmp_path: Path) -> None:
    doc = json.loads(kube_matrix(cluster.suffix, cluster.namespace, [
        {"name": "a", "type": "cpu", "requests": {"cpu": "1"}, "pool": "cpu"}], name="d"))
    doc["spec"]["profiles"] = {"quick": {"layers": ["discovery"]}}
    (tmp_path / "d.matrix.yaml").write_text(json.dumps(doc))
    assert hetero("keygen", str(tmp_path / "key")).returncode == 0
    first = gate(tmp_path, cluster)
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig),
           "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(tmp_path / "d.matrix.yaml"),
                          "--hetero-affected-from-cluster", str(first["bundle"]), "--hetero-sign-key",
                          str(tmp_path / "key"), "--hetero-report-dir", str(tmp_path / "r2")],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False)
    assert run.returncode == 4, run.stdout[-2000:]
    assert "holds no cluster snapshot of matrix d" in run.stderr and "--hetero-snapshot" in run.stderr
