"""Node coverage on the KWOK plane (issue 32): the startup check on each node of a pool, each through a pod
pinned to its node by a node affinity and placed by the real kube-scheduler; evidence per node; a status,
and a ``hetero publish --dry-run``, that cover exactly the nodes that ran.

Each test makes its own pool of KWOK CPU nodes (label ``hetero-test.pool: cov-<tag>``), deleted afterwards.
On KWOK the container states come from KWOK stages and exec runs on this host, as evidence says
(``startup.simulation``); placement is the real scheduler's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from kubekit import POOL, SESSION, keep_status, kube_matrix, schedulable
from kubernetes.client.exceptions import ApiException
from support import REPO, evidence_of, statuses

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

COMBO = "digits-logreg@digits-test"
ACCEL = "example.com/accel"
"""An extended resource a device plugin advertises (the kubelet lowers its allocatable for an Unhealthy device)."""


def hetero(*argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``hetero`` from this tree (a real process)."""
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "pytest_hetero.cli", *argv], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120, check=False)


@pytest.fixture
def make_pool(cluster: Cluster) -> Iterator[Callable[..., tuple[str, list[str]]]]:
    """``make_pool(n, small=k)``: a new pool of ``n`` KWOK CPU nodes (32 CPUs each; the last ``k`` with
    500m allocatable, too small for the test's 1-CPU request), schedulable; returns (pool label, names)."""
    made: list[str] = []

    def make(n: int, small: int = 0, devices: int = 0, unhealthy: int = 0) -> tuple[str, list[str]]:
        tag = uuid.uuid4().hex[:5]
        names = [f"cov{i}-{cluster.suffix}-{tag}" for i in range(n)]
        statuses_of: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
        for i, name in enumerate(names):
            cap = {"cpu": "32", "memory": "128Gi", "pods": "110", **({ACCEL: str(devices)} if devices else {})}
            alloc = {**cap, "cpu": "500m"} if i >= n - small else dict(cap)
            if devices and i >= n - unhealthy:  # its device plugin reported a device Unhealthy: the kubelet lowers it
                alloc[ACCEL] = str(devices - 1)
            cluster.core.create_node({  # type: ignore[arg-type]  # a manifest dict, sent as it is
                "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                             "labels": {POOL: f"cov-{tag}", SESSION: cluster.suffix, "kubernetes.io/hostname": name}},
                "spec": {}})
            made.append(name)
            statuses_of[name] = (cap, alloc)
            cluster.core.patch_node_status(name, {"status": {"capacity": cap, "allocatable": alloc, "conditions": []}})
        deadline = time.monotonic() + 60
        while not all(schedulable(cluster.core.read_node(n)) for n in names):
            assert time.monotonic() < deadline, f"nodes {names} not schedulable after 60 s"
            time.sleep(0.3)
        for name, (cap, alloc) in statuses_of.items():  # KWOK may have written its default status over ours
            keep_status(cluster.core, name, cap, alloc, deadline)
        return f"cov-{tag}", names

    yield make
    for name in made:
        try:
            cluster.core.delete_node(name)
        except ApiException:
            pass


def run_gate(pytester: pytest.Pytester, cluster: Cluster, run_id: str, pool: str, coverage: Any,
             resource: dict[str, Any] | None = None) -> dict[str, Any]:
    """The digits case on a CPU resource of ``pool`` (or ``resource``; ``coverage`` unless None), signed; its
    evidence."""
    resource = dict(resource or {"name": "cpu", "type": "cpu", "requests": {"cpu": "1", "memory": "256Mi"}},
                    pool=pool)
    if coverage is not None:
        resource["coverage"] = coverage
    doc = json.loads(kube_matrix(cluster.suffix, cluster.namespace, [resource], name="cov"))
    doc["spec"]["validation"] = {"valid_for": "2h", "domain": "cov.hetero.test"}
    pytester.makefile(".matrix.yaml", cov=json.dumps(doc))
    assert hetero("keygen", str(pytester.path / "key")).returncode == 0
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "--hetero-kube-context", "hetero",
                                "--hetero-sign-key", str(pytester.path / "key"))
    ev = evidence_of(pytester)
    ev["_ret"] = result.ret
    return ev


def items(ev: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {i["nodeid"].split("::", 1)[1]: i for i in ev["items"]}


def records(item: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r["data"] for r in item["records"] if r["kind"] == kind]


def node_levels(pool: dict[str, Any]) -> dict[str, str]:
    return {e["node"]: e["task_types"]["batch-inference"]["level"] for e in pool["node_status"]}


def publish_dry_run(pytester: pytest.Pytester) -> dict[str, Any]:
    [bundle] = sorted((pytester.path / "reports").iterdir())
    done = hetero("publish", str(bundle), "--to", "kubernetes", "--key", str(pytester.path / "key.pub"), "--dry-run")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_every_node_of_a_four_node_pool_runs_the_startup_check(
        pytester: pytest.Pytester, cluster: Cluster, run_id: str, make_pool: Callable[..., tuple[str, list[str]]]
) -> None:
    pool, names = make_pool(4)
    ev = run_gate(pytester, cluster, run_id, pool, "every")
    got = items(ev)
    assert ev["_ret"] == 0, [i["failure"] for i in ev["items"] if i["failure"]]
    assert set(statuses(ev).values()) == {"passed"} and "cpu::py::nodes::startup" in got
    cover = got["cpu::py::nodes::startup"]
    [choice] = records(cover, "startup.coverage")
    assert (choice["coverage"], sorted(choice["pool"]), choice["chosen"], choice["not_exercised"]) == (
        "every", sorted(names), sorted(names), [])
    per_node = records(cover, "startup.node")
    assert sorted(r["node"] for r in per_node) == sorted(names)  # 4 nodes, one record each
    assert {(r["outcome"], tuple(r["proven"]), r["simulated"]) for r in per_node} == {
        ("passed", ("scheduling", "startup", "model"), True)}
    # each node ran the smoke model run (the plan's first model x dataset) in its own pinned pod
    assert {json.dumps(r["smoke"], sort_keys=True) for r in per_node} == {json.dumps(
        {"model": "digits-logreg", "dataset": "digits-test", "outcome": "passed", "category": None}, sort_keys=True)}
    runs = records(cover, "model.run")
    pods = {r["node"]: r["pod"] for r in per_node}
    assert sorted((r["node"], r["pod"], r["exit_code"]) for r in runs) == sorted((n, pods[n], 0) for n in names)
    assert {r["isolation"]["shared_between_runs"] for r in runs} == {False}
    assert len(records(cover, "model.outputs")) == 4
    # each pinned pod was placed by the scheduler on its own node (a node affinity, not spec.nodeName)
    placed = records(cover, "scheduling.placed")
    assert sorted(p["node"] for p in placed) == sorted(names)
    for sub in records(cover, "scheduling.submitted"):
        spec = sub["manifest"]["spec"]
        assert "nodeName" not in spec
        term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert term == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [sub["pinned_to"]]}]}]
    assert sorted(d["node"] for d in records(cover, "startup.device_init")) == sorted(names)

    main = records(got["cpu::py::scheduling"], "scheduling.placed")[0]["node"]
    assert records(got[f"cpu::py::{COMBO}::model"], "model.run")[0]["node"] == main
    [status] = ev["validation"]["pools"]
    assert (sorted(status["nodes"]), status["unvalidated"], status["model_runs_on"]) == (
        sorted(names), [], sorted(names))
    # the model items ran on one node: it is validated to business; the smoke runs prove the others to model
    assert node_levels(status) == {n: "business" if n == main else "model" for n in names}
    assert ev["untested"]["nodes"] == []

    out = publish_dry_run(pytester)
    key = "validation.cov.hetero.test/batch-inference"
    assert {e["node"]: (e["labels"][key], e["conditions"][0]["status"]) for e in out["plan"]} == {
        n: ("business", "True") if n == main else ("model", "False") for n in names}
    assert out["not_exercised"] == [] and out["applied"] == []


def test_coverage_one_exercises_one_node_and_publish_labels_it_alone(
        pytester: pytest.Pytester, cluster: Cluster, run_id: str, make_pool: Callable[..., tuple[str, list[str]]]
) -> None:
    pool, names = make_pool(4)
    ev = run_gate(pytester, cluster, run_id, pool, None)
    got = items(ev)
    assert ev["_ret"] == 0, [i["failure"] for i in ev["items"] if i["failure"]]
    assert len(got) == 5 and "cpu::py::nodes::startup" not in got
    main = records(got["cpu::py::scheduling"], "scheduling.placed")[0]["node"]
    [status] = ev["validation"]["pools"]
    assert (status["nodes"], node_levels(status), status["coverage"]) == ([main], {main: "business"}, "one")
    others = sorted(set(names) - {main})
    assert sorted(u["node"] for u in status["unvalidated"]) == others
    assert sorted((u["node"], u["pool"], u["status"]) for u in ev["untested"]["nodes"]) == [
        (n, "cpu", "unvalidated") for n in others]
    assert {u["reason"] for u in ev["untested"]["nodes"]} == {
        f"not exercised: coverage one ran the pool's workload on {main} only"}

    out = publish_dry_run(pytester)
    assert [e["node"] for e in out["plan"]] == [main]
    assert sorted(e["node"] for e in out["not_exercised"]) == others


def test_a_node_that_cannot_hold_the_workload_fails_alone(
        pytester: pytest.Pytester, cluster: Cluster, run_id: str, make_pool: Callable[..., tuple[str, list[str]]]
) -> None:
    pool, names = make_pool(4, small=1)
    small = names[-1]
    ev = run_gate(pytester, cluster, run_id, pool, "every")
    got = items(ev)
    cover = got["cpu::py::nodes::startup"]
    assert cover["status"] == "failed" and ev["_ret"] == 1
    assert cover["failure"]["category"] == "insufficient_resource", cover["failure"]
    assert "startup failed on 1 of 4 node(s) of pool cpu" in cover["failure"]["message"]
    assert small in cover["failure"]["message"]
    outcomes = {r["node"]: (r["outcome"], r["proven"]) for r in records(cover, "startup.node")}
    assert outcomes == {n: ("failed", []) if n == small else ("passed", ["scheduling", "startup", "model"])
                        for n in names}
    assert sorted(r["node"] for r in records(cover, "model.run")) == sorted(set(names) - {small})  # no smoke there
    [pending] = records(cover, "scheduling.pending")
    assert pending["pinned_to"] == small
    # the model items depend on the workload's own startup, which passed: they ran
    assert got[f"cpu::py::{COMBO}::business"]["status"] == "passed"
    main = records(got["cpu::py::scheduling"], "scheduling.placed")[0]["node"]
    [status] = ev["validation"]["pools"]
    assert status["task_types"]["batch-inference"]["level"] == "scheduling"  # the pool: one node failed
    assert node_levels(status) == {n: "business" if n == main else "discovery" if n == small else "model"
                                   for n in names}
    out = publish_dry_run(pytester)
    key = "validation.cov.hetero.test/batch-inference"
    plan = {e["node"]: (e["labels"][key], e["conditions"][0]["status"]) for e in out["plan"]}
    assert plan[small] == ("discovery", "False") and plan[main] == ("business", "True")


def test_every_node_on_a_pool_where_one_devices_plugin_reports_an_unhealthy_device(
        pytester: pytest.Pytester, cluster: Cluster, run_id: str, make_pool: Callable[..., tuple[str, list[str]]]
) -> None:
    """Four nodes whose device plugin advertises 4 accelerators; on one it reported a device Unhealthy (allocatable
    3 of 4). Discovery fails on that node only, the pool's higher layers go on on the other three, no status
    validates the degraded node, and publish labels the nodes that passed, not it."""
    pool, names = make_pool(4, devices=4, unhealthy=1)
    degraded, healthy = names[-1], names[:-1]
    accel = {"name": "cpu", "type": "cpu", "requests": {"cpu": "1", "memory": "256Mi", ACCEL: "1"}}
    ev = run_gate(pytester, cluster, run_id, pool, "every", accel)
    got = items(ev)
    assert ev["_ret"] == 1  # a failure: the degraded node's
    found = got["cpu::discovery"]
    assert (found["status"], found["failure"]["category"], found["failure"]["owner_category"]) == (
        "failed", "allocatable_below_capacity", "infrastructure")
    assert found["failure"]["nodes"] == [degraded]
    assert found["failure"]["message"].startswith(f"discovery failed on 1 of 4 node(s) of pool cpu ({degraded}; ")
    assert f"node {degraded}: allocatable {ACCEL} 3 < capacity 4" in found["failure"]["message"]
    assert records(found, "discovery.nodes") == [
        {"coverage": "every", "failed": {degraded: ["allocatable_below_capacity"]}, "passed": healthy}]
    # the higher layers went on: every item but discovery passed
    assert {k: v["status"] for k, v in got.items() if k != "cpu::discovery"} == dict.fromkeys(
        ["cpu::py::scheduling", "cpu::py::startup", "cpu::py::nodes::startup", f"cpu::py::{COMBO}::model",
         f"cpu::py::{COMBO}::business"], "passed")
    [status] = ev["validation"]["pools"]
    levels = node_levels(status)
    assert levels[degraded] == "none"  # whatever ran there: discovery failed on it
    assert all(levels[n] in ("model", "business") for n in healthy), levels
    assert status["task_types"]["batch-inference"]["level"] == "none"  # the pool as a whole: discovery failed
    out = publish_dry_run(pytester)
    key = "validation.cov.hetero.test/batch-inference"
    plan = {e["node"]: (e["labels"].get(key), e["conditions"][0]["status"]) for e in out["plan"]}
    assert plan[degraded] == (None, "False"), plan  # its level label removed, its condition False
    assert {n: plan[n] for n in healthy} == {n: (levels[n], "True" if levels[n] == "business" else "False")
                                             for n in healthy}, plan


def test_a_cordoned_node_discovery_failed_on_is_published_not_validated_though_nothing_ran_there(
        pytester: pytest.Pytester, cluster: Cluster, run_id: str, make_pool: Callable[..., tuple[str, list[str]]]
) -> None:
    """Three nodes, one cordoned: discovery fails on it alone (coverage every), the higher layers go on on the
    other two, and nothing runs on it (the scheduler and the coverage item leave it). It is still one of the pool's
    nodes at level none, so publish removes its level label and sets its condition False instead of leaving what an
    earlier bundle published there."""
    pool, names = make_pool(3)
    cordoned, healthy = names[-1], names[:-1]
    cluster.core.patch_node(cordoned, {"spec": {"unschedulable": True}})
    ev = run_gate(pytester, cluster, run_id, pool, "every")
    found = items(ev)["cpu::discovery"]
    assert (found["status"], found["failure"]["category"], found["failure"]["nodes"]) == (
        "failed", "node_unschedulable", [cordoned])
    [status] = ev["validation"]["pools"]
    levels = node_levels(status)
    assert levels[cordoned] == "none" and all(levels[n] in ("startup", "model", "business") for n in healthy), levels
    assert [u["node"] for u in status["unvalidated"]] == []
    out = publish_dry_run(pytester)
    key = "validation.cov.hetero.test/batch-inference"
    plan = {e["node"]: (e["labels"].get(key), e["conditions"][0]["status"]) for e in out["plan"]}
    assert plan[cordoned] == (None, "False"), plan
