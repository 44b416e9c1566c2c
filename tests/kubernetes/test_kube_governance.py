"""Maintenance and preemption probes on the KWOK plane's real scheduler, as a tenant whose
ServiceAccount token makes the attempts: a cordoned, a tainted (not tolerated) and a NotReady node
receive no workload; a high-priority workload preempts a low one (eviction recorded) and a second
low one waits.

The cordoned node and the one-GPU node are made by the tests (KWOK nodes of their own pools); the
tainted and NotReady ones are the session's ``tainted`` and ``notready`` pools (kubekit)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest
from kubekit import BASE, POOL, SESSION, kube_matrix, schedulable
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from support import evidence_of

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


@contextmanager
def own_node(cluster: Cluster, stem: str, gpus: str, cordon: bool) -> Iterator[str]:
    """A KWOK node with ``gpus`` GPUs in a pool of its own (deleted afterwards); yields the pool name."""
    pool = f"{stem}-{uuid.uuid4().hex[:5]}"
    name = f"{pool}-{cluster.suffix}"
    cap = {**BASE, "nvidia.com/gpu": gpus}
    # tainted for this pool alone: no other test's pod (on this shared plane) can take its GPU
    taints = [] if cordon else [{"key": "hetero-test/gov", "value": pool, "effect": "NoSchedule"}]
    cluster.core.create_node({"metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},  # type: ignore[arg-type]  # a manifest dict, sent as it is
                                           "labels": {POOL: pool, SESSION: cluster.suffix}},
                              "spec": {"unschedulable": cordon, "taints": taints},
                              "status": {"capacity": cap, "allocatable": cap}})
    try:
        deadline = time.monotonic() + 60
        while not (schedulable if not cordon else _ready_and_settled)(cluster.core.read_node(name)) \
                and time.monotonic() < deadline:
            time.sleep(0.3)
        yield pool
    finally:
        try:
            cluster.core.delete_node(name)
        except ApiException:
            pass


def _ready_and_settled(node: Any) -> bool:
    """Ready, and the node lifecycle controller has taken back the not-ready taint a new node starts with (a
    cordoned node is never schedulable: only its cordon, and the controller's unschedulable taint, may stay)."""
    ready = any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))
    return ready and not any(t.key == "node.kubernetes.io/not-ready" for t in (node.spec.taints or []))


@pytest.fixture
def cordoned(cluster: Cluster) -> Iterator[str]:
    """A cordoned KWOK node with 8 GPUs in pool ``cordoned-<x>``; its pool name."""
    with own_node(cluster, "cordoned", "8", cordon=True) as pool:
        yield pool


@pytest.fixture
def one_gpu(cluster: Cluster) -> Iterator[str]:
    """A schedulable KWOK node with exactly 1 GPU in pool ``onegpu-<x>``; its pool name."""
    with own_node(cluster, "onegpu", "1", cordon=False) as pool:
        yield pool


@pytest.fixture
def priorities(cluster: Cluster) -> Iterator[tuple[str, str]]:
    """PriorityClasses (low 100, high 100000; unique names, deleted afterwards)."""
    sched = client.SchedulingV1Api(cluster.api)
    tag = uuid.uuid4().hex[:5]
    names = (f"gov-low-{tag}", f"gov-high-{tag}")
    for name, value in zip(names, (100, 100000), strict=True):
        sched.create_priority_class({"metadata": {"name": name, "labels": {SESSION: cluster.suffix}}, "value": value,  # type: ignore[arg-type]  # a manifest dict, sent as it is
                                     "preemptionPolicy": "PreemptLowerPriority"})
    try:
        yield names
    finally:
        for name in names:
            sched.delete_priority_class(name)


@pytest.fixture
def tenant(cluster: Cluster) -> Iterator[dict[str, Any]]:
    """Tenant ``a``: namespace, ServiceAccount ``tenant`` with a Role on pods there."""
    ns = cluster.new_namespace("gov-maint")
    cluster.core.create_namespaced_service_account(ns, {"metadata": {"name": "tenant"}})  # type: ignore[arg-type]  # a manifest dict, sent as it is
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    rbac.create_namespaced_role(ns, {"metadata": {"name": "tenant"}, "rules": [  # type: ignore[arg-type]  # a manifest dict, sent as it is
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "delete"]}]})
    rbac.create_namespaced_role_binding(ns, {  # type: ignore[arg-type]  # a manifest dict, sent as it is
        "metadata": {"name": "tenant"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                    "name": "tenant"},
        "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": ns}]})
    yield {"name": "a", "namespace": ns, "service_account": "tenant"}


def test_cordoned_tainted_and_notready_nodes_receive_no_workload_of_the_tenant(
    pytester: pytest.Pytester, cluster: Cluster, cordoned: str, tenant: dict[str, Any], run_id: str
) -> None:
    resources = [{"name": pool, "type": "gpu", "requests": {"nvidia.com/gpu": "1"}, "pool": pool}
                 for pool in (cordoned, "tainted", "notready", "gpu")]
    doc = json.loads(kube_matrix(cluster.suffix, cluster.namespace, resources,
                                 layers={"scheduling": {"timeout": "20s"}}))
    doc["spec"]["governance"] = {"tenants": [tenant], "probes": [
        {"name": f"maint-{r['name']}", "kind": "maintenance", "resource": r["name"], "as": "a"} for r in resources]}
    pytester.makefile(".matrix.yaml", k=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "governance")
    items = {i["nodeid"].split("::")[1]: i for i in evidence_of(pytester)["items"]}

    def attempt(pool: str) -> dict[str, Any]:
        item = items[pool]
        assert item["status"] == "passed", item.get("failure")
        got: dict[str, Any]
        [got] = [r["data"] for r in item["records"] if r["kind"] == "governance.attempt"]
        assert got["identity"] == f"system:serviceaccount:{tenant['namespace']}:tenant"
        assert got["outcome"] == "pending" and got["facts"]["node"] is None
        cleanup = [r["data"] for r in item["records"] if r["kind"] == "governance.cleanup"][-1]
        assert cleanup["leftovers"] == [] and [o["gone"] for o in cleanup["objects"]] == [True]
        return got

    node = f"{cordoned}-{cluster.suffix}"
    got = attempt(cordoned)
    # the node lifecycle controller adds its own taint to a cordoned node: both are named
    assert (got["facts"]["target_node"], got["facts"]["maintenance"][0]) == (node, "cordoned (spec.unschedulable: true)")
    assert set(got["facts"]["maintenance"][1:]) <= {"untolerated taint node.kubernetes.io/unschedulable:NoSchedule"}
    assert "node_unschedulable" in [r["code"] for r in got["reasons"]]
    assert "1 node(s) were unschedulable" in got["message"]
    got = attempt("tainted")
    assert got["facts"]["maintenance"] == ["untolerated taint dedicated=training:NoSchedule"]
    assert "untolerated_taint" in [r["code"] for r in got["reasons"]]
    assert "1 node(s) had untolerated taint(s)" in got["message"]
    got = attempt("notready")
    assert got["facts"]["maintenance"][0].startswith("not Ready (")  # the node's reason, else its status
    assert {"node_not_ready", "untolerated_taint"} & {r["code"] for r in got["reasons"]}
    healthy = items["gpu"]  # nothing in maintenance: not proven, never a pass
    assert healthy["status"] == "not_applicable"
    assert "is cordoned, NotReady or tainted against the resource: nothing to refuse" in json.dumps(healthy)


def test_a_high_priority_workload_preempts_a_low_one_and_a_second_low_one_waits(
    pytester: pytest.Pytester, cluster: Cluster, one_gpu: str, priorities: tuple[str, str], tenant: dict[str, Any],
    run_id: str
) -> None:
    low, high = priorities
    resources = [{"name": "onegpu", "type": "gpu", "requests": {"nvidia.com/gpu": "1"}, "pool": one_gpu,
                  "tolerations": [{"key": "hetero-test/gov", "operator": "Equal", "value": one_gpu,
                                   "effect": "NoSchedule"}]}]
    doc = json.loads(kube_matrix(cluster.suffix, cluster.namespace, resources,
                                 layers={"scheduling": {"timeout": "30s"}}))
    doc["spec"]["governance"] = {"tenants": [tenant], "probes": [
        {"name": "prio", "kind": "preemption", "resource": "onegpu", "as": "a", "high": high, "low": low}]}
    pytester.makefile(".matrix.yaml", k=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "governance")
    [item] = evidence_of(pytester)["items"]
    assert item["status"] == "passed", item.get("failure")
    tried = {r["data"]["role"]: r["data"] for r in item["records"] if r["kind"] == "governance.attempt"}
    node = f"{one_gpu}-{cluster.suffix}"
    assert (tried["low"]["outcome"], tried["low"]["facts"]["node"]) == ("placed", node)
    assert (tried["high"]["outcome"], tried["high"]["facts"]["node"]) == ("placed", node)
    victim = tried["high"]["facts"]["victim"]
    assert victim["evicted"] and victim["pod"].startswith("hetero-gov-prio-low-")
    # the victim is usually gone by the time the preemptor is placed: its condition is read when it is
    # still there, the scheduler's Preempted event always
    assert victim["disruption"] in ([], [{"reason": "PreemptionByScheduler", "message":
                                          "default-scheduler: preempting to accommodate a higher priority pod"}])
    assert victim["events"] and victim["events"][0].startswith("Preempted by pod "), victim
    waiter = tried["waiter"]
    assert waiter["outcome"] == "pending" and waiter["facts"]["node"] is None
    assert {"insufficient_resource", "preemption_not_helpful", "preemption_no_victims"} & {
        r["code"] for r in waiter["reasons"]}, waiter
    cleanup = [r["data"] for r in item["records"] if r["kind"] == "governance.cleanup"][-1]
    assert cleanup["leftovers"] == [] and len(cleanup["objects"]) == 3
