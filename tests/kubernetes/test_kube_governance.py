"""Maintenance probes on the KWOK plane's real scheduler: a cordoned, a tainted (not tolerated) and a
NotReady node receive no workload of a tenant, whose ServiceAccount token makes the attempts.

The cordoned node is made by this test (a KWOK node of its own pool, ``spec.unschedulable``); the
tainted and NotReady ones are the session's ``tainted`` and ``notready`` pools (kubekit)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from kubekit import BASE, POOL, SESSION, kube_matrix
from kubernetes import client
from kubernetes.client.rest import ApiException
from support import evidence_of

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster


@pytest.fixture
def cordoned(cluster: Cluster) -> Iterator[str]:
    """A cordoned KWOK node with 8 GPUs in pool ``cordoned-<x>`` (deleted afterwards); its pool name."""
    pool = "cordoned-" + uuid.uuid4().hex[:5]
    name = f"{pool}-{cluster.suffix}"
    cap = {**BASE, "nvidia.com/gpu": "8"}
    cluster.core.create_node({"metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                                           "labels": {POOL: pool, SESSION: cluster.suffix}},
                              "spec": {"unschedulable": True}, "status": {"capacity": cap, "allocatable": cap}})
    try:
        yield pool
    finally:
        try:
            cluster.core.delete_node(name)
        except ApiException:
            pass


@pytest.fixture
def tenant(cluster: Cluster) -> Iterator[dict[str, Any]]:
    """Tenant ``a``: namespace, ServiceAccount ``tenant`` with a Role on pods there."""
    ns = cluster.new_namespace("gov-maint")
    cluster.core.create_namespaced_service_account(ns, {"metadata": {"name": "tenant"}})
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    rbac.create_namespaced_role(ns, {"metadata": {"name": "tenant"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "delete"]}]})
    rbac.create_namespaced_role_binding(ns, {
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
        [got] = [r["data"] for r in item["records"] if r["kind"] == "governance.attempt"]
        assert got["identity"] == f"system:serviceaccount:{tenant['namespace']}:tenant"
        assert got["outcome"] == "pending" and got["facts"]["node"] is None
        cleanup = [r["data"] for r in item["records"] if r["kind"] == "governance.cleanup"][-1]
        assert cleanup["leftovers"] == [] and [o["gone"] for o in cleanup["objects"]] == [True]
        return got

    node = f"{cordoned}-{cluster.suffix}"
    got = attempt(cordoned)
    # the node lifecycle controller adds its own taint to a cordoned node: both are named
    assert (got["facts"]["target_node"], got["facts"]["maintenance"][0]) == (node, "cordoned")
    assert set(got["facts"]["maintenance"][1:]) <= {"taint node.kubernetes.io/unschedulable:NoSchedule"}
    assert "node_unschedulable" in [r["code"] for r in got["reasons"]]
    assert "1 node(s) were unschedulable" in got["message"]
    got = attempt("tainted")
    assert got["facts"]["maintenance"] == ["taint dedicated=training:NoSchedule"]
    assert "untolerated_taint" in [r["code"] for r in got["reasons"]]
    assert "1 node(s) had untolerated taint(s)" in got["message"]
    got = attempt("notready")
    assert got["facts"]["maintenance"][0] == "NotReady (Ready=False)"
    assert {"node_not_ready", "untolerated_taint"} & {r["code"] for r in got["reasons"]}
    healthy = items["gpu"]  # nothing in maintenance: not proven, never a pass
    assert healthy["status"] == "not_applicable"
    assert "is cordoned, NotReady or tainted against the resource: nothing to refuse" in json.dumps(healthy)
