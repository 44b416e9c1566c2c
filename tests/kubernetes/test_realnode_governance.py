"""Governance probes on the real node's plane, with its real Kueue (v0.19.2) and the real ResourceQuota
admission and quota controller: tenants are ServiceAccounts whose tokens the gate requests; every probe
passes only when the cluster itself refuses (or, for attribution, counts) as the matrix expects.

The tenants' platform configuration (namespaces, Roles, quotas, ClusterQueues) is made here as a
platform team would; one tenant (``leaky``) is deliberately also bound in tenant A's namespace, so a
probe of it must fail with the sentence of what it could do.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kubernetes import client, utils
from kubernetes.client.exceptions import ApiException
from realkit import GPU, PYTHON, STANDIN, data, failure, real_matrix, run
from support import REPO, evidence_of

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import RealNodeCluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

API = ("kueue.x-k8s.io", "v1beta2")
RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "watch", "delete"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "watch", "delete"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": ["get", "list"]},
]


def _bind(rbac: client.RbacAuthorizationV1Api, ns: str, sa_ns: str, sa: str, name: str) -> None:
    rbac.create_namespaced_role_binding(ns, {  # type: ignore[arg-type]  # a manifest dict, sent as it is
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": sa_ns}]})


@pytest.fixture(scope="module")
def tenants(realnode: RealNodeCluster, real_kueue: Any, realnode_images: dict[str, str]) -> Iterator[dict[str, Any]]:
    """Namespaces a, b, leaky and the gate's; ServiceAccount ``tenant`` in each tenant namespace with a
    Role on pods, jobs and Kueue workloads of its own namespace (leaky's also in a's); a ResourceQuota
    of 1 GPU and 3 pods in a; a ClusterQueue per tenant (1 GPU nominal) with LocalQueue ``lq`` (a)
    and ``lq-b`` (b), and ``to-b`` in a's namespace pointing at b's ClusterQueue. ``leaky``'s
    ServiceAccount is also bound to b's Role. Both are the misconfigurations under test."""
    core, rbac = realnode.core, client.RbacAuthorizationV1Api(realnode.api)
    custom = client.CustomObjectsApi(realnode.api)
    suffix = uuid.uuid4().hex[:5]
    ns = {t: realnode.new_namespace(f"gov-{t}") for t in ("a", "b", "leaky", "gate")}
    made: dict[str, Any] = {"ns": ns, "rf": f"gov-rf-{suffix}", "cq": {t: f"gov-{t}-{suffix}" for t in ("a", "b")},
                            "lq": {"a": "lq", "b": "lq-b"}}
    group, version = API
    try:
        for t in ("a", "b", "leaky"):
            core.create_namespaced_service_account(ns[t], {"metadata": {"name": "tenant"}})  # type: ignore[arg-type]  # a manifest dict, sent as it is
            rbac.create_namespaced_role(ns[t], {"metadata": {"name": "tenant"}, "rules": RULES})  # type: ignore[arg-type]  # a manifest dict, sent as it is
            _bind(rbac, ns[t], ns[t], "tenant", "tenant")
        _bind(rbac, ns["b"], ns["leaky"], "tenant", "leaky-tenant")  # the misconfiguration under test
        core.create_namespaced_resource_quota(ns["a"], {"metadata": {"name": "tenant-a"}, "spec": {  # type: ignore[arg-type]  # a manifest dict, sent as it is
            "hard": {f"requests.{GPU}": "1", "pods": "3"}}})
        custom.create_cluster_custom_object(group, version, "resourceflavors", {
            "apiVersion": f"{group}/{version}", "kind": "ResourceFlavor", "metadata": {"name": made["rf"]},
            "spec": {"nodeLabels": realnode.info.node_selector, "tolerations": [realnode.info.toleration]}})
        for t in ("a", "b"):
            custom.create_cluster_custom_object(group, version, "clusterqueues", {
                "apiVersion": f"{group}/{version}", "kind": "ClusterQueue", "metadata": {"name": made["cq"][t]},
                "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns[t]}},
                         "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                             {"name": made["rf"], "resources": [{"name": GPU, "nominalQuota": 1}]}]}]}})
            custom.create_namespaced_custom_object(group, version, ns[t], "localqueues", {
                "apiVersion": f"{group}/{version}", "kind": "LocalQueue", "metadata": {"name": made["lq"][t]},
                "spec": {"clusterQueue": made["cq"][t]}})
        # the misconfiguration Kueue must contain: a LocalQueue in a's namespace pointing at b's ClusterQueue
        custom.create_namespaced_custom_object(group, version, ns["a"], "localqueues", {
            "apiVersion": f"{group}/{version}", "kind": "LocalQueue", "metadata": {"name": "to-b"},
            "spec": {"clusterQueue": made["cq"]["b"]}})
        yield made
    finally:
        for plural, name in [*(("clusterqueues", q) for q in made["cq"].values()), ("resourceflavors", made["rf"])]:
            try:
                custom.delete_cluster_custom_object(group, version, plural, name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        for name in ns.values():
            core.delete_namespace(name)


def governed(realnode: RealNodeCluster, made: dict[str, Any], probes: list[dict[str, Any]],
             submit_as: str = "pod") -> str:
    """The matrix text: resource ``gpu`` (1 stand-in GPU on the real node, LocalQueue ``lq``), the
    tenants a, b and leaky, and ``probes``."""
    resource = {"name": "gpu", "type": "gpu", "vendor": "nvidia", "requests": {GPU: "1"}, "queue": "lq"}
    doc = json.loads(real_matrix(realnode.info, made["ns"]["gate"], [resource], target={"submit_as": submit_as},
                                 images=[{"name": "acc", "reference": STANDIN, "for": ["gpu"]},
                                         {"name": "py", "reference": PYTHON, "for": ["gpu"]}],
                                 layers={"scheduling": {"timeout": "40s"}}, framework=False))
    ns = made["ns"]
    doc["spec"]["governance"] = {
        "tenants": [{"name": "a", "namespace": ns["a"], "service_account": "tenant", "queue": "lq",
                     "cluster_queue": made["cq"]["a"]},
                    {"name": "b", "namespace": ns["b"], "service_account": "tenant", "queue": "lq-b",
                     "cluster_queue": made["cq"]["b"]},
                    {"name": "leaky", "namespace": ns["leaky"], "service_account": "tenant"}],
        "probes": probes}
    return json.dumps(doc, indent=1)


def _attempts(item: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["data"]["role"]: r["data"] for r in item["records"] if r["kind"] == "governance.attempt"}


def _clean(item: dict[str, Any]) -> None:
    cleanup = data(item, "governance.cleanup")
    assert cleanup["leftovers"] == [] and all(o["gone"] for o in cleanup["objects"]), cleanup


def test_tenant_isolation_and_resourcequota_are_refused_by_the_cluster_as_the_tenant(
    pytester: pytest.Pytester, realnode: RealNodeCluster, tenants: dict[str, Any]
) -> None:
    ns = tenants["ns"]
    probes: list[dict[str, Any]] = [
        {"name": "a-not-into-b", "kind": "tenant-isolation", "resource": "gpu", "as": "a", "target": "b"},
        {"name": "leaky-not-into-b", "kind": "tenant-isolation", "resource": "gpu", "as": "leaky", "target": "b"},
        {"name": "a-quota", "kind": "quota", "resource": "gpu", "as": "a", "above": {GPU: 2}, "within": {GPU: 1}}]
    got = run(pytester, governed(realnode, tenants, probes), "g" + uuid.uuid4().hex[:9], "-k", "governance")
    iso = got["gpu::governance::a-not-into-b::scheduling"]
    assert iso["status"] == "passed", iso.get("failure")
    who = data(iso, "governance.identity")
    assert (who["subject"], who["tenant"]) == (f"system:serviceaccount:{ns['a']}:tenant", "a")
    assert who["method"].startswith("TokenRequest for ServiceAccount") and who["observer"] != who["subject"]
    tried = _attempts(iso)
    assert set(tried) == {"submit-into-target", "list-target-pods", "list-target-workloads", "submit-to-target-queue",
                          "submit-via-target-cluster-queue"}
    into = tried["submit-into-target"]
    assert (into["outcome"], into["facts"]["http_status"], into["identity"]) == ("refused", 403, who["subject"])
    assert into["message"] == (f'pods is forbidden: User "system:serviceaccount:{ns["a"]}:tenant" cannot create '
                               f'resource "pods" in API group "" in the namespace "{ns["b"]}"')
    assert [r["code"] for r in tried["list-target-pods"]["reasons"]][:1] == ["forbidden_rbac"]
    assert tried["list-target-workloads"]["message"].startswith(
        f'workloads.kueue.x-k8s.io is forbidden: User "system:serviceaccount:{ns["a"]}:tenant" cannot list')
    queue = tried["submit-to-target-queue"]  # Kueue itself leaves a Job naming b's queue in a's namespace
    assert queue["outcome"] == "pending" and "queue_not_found" in [r["code"] for r in queue["reasons"]], queue
    assert queue["message"] == "LocalQueue lq-b doesn't exist", queue
    via = tried["submit-via-target-cluster-queue"]  # a's LocalQueue to-b points at b's ClusterQueue
    assert via["outcome"] == "pending" and via["action"].endswith(" on queue to-b"), via
    assert "queue_namespace_mismatch" in [r["code"] for r in via["reasons"]], via
    assert via["message"].startswith("workload namespace doesn't match ClusterQueue selector"), via
    _clean(iso)

    leak = got["gpu::governance::leaky-not-into-b::scheduling"]
    assert failure(leak) == ("failed", "governance_not_enforced", "platform")
    assert leak["failure"]["message"].startswith(
        "tenant leaky could create a workload in tenant b's namespace (create Pod hetero-gov-leaky-not-into-b-")
    _clean(leak)  # the pod it could create is gone again

    quota = got["gpu::governance::a-quota::scheduling"]
    assert quota["status"] == "passed", quota.get("failure")
    above, within = _attempts(quota)["above"], _attempts(quota)["within"]
    costs = data(quota, "governance.ledger")  # the refused request held nothing; the admitted one is counted
    assert [w["role"] for w in costs["workloads"]] == ["within"] and costs["waste"]["refused"] == 1
    assert (above["outcome"], above["reasons"][0]["code"]) == ("refused", "quota_exceeded")
    assert above["reasons"][0]["quantities"] == {"requested": "2", "used": "0", "limited": "1"}
    assert above["message"].endswith(f"is forbidden: exceeded quota: tenant-a, requested: requests.{GPU}=2, "
                                     f"used: requests.{GPU}=0, limited: requests.{GPU}=1")
    assert (within["outcome"], within["facts"]["node"]) == ("placed", realnode.info.node)
    _clean(quota)


def test_attribution_counts_exactly_the_request_under_the_tenant_and_releases_it(
    pytester: pytest.Pytester, realnode: RealNodeCluster, tenants: dict[str, Any]
) -> None:
    """submit_as pod: ResourceQuota ``used`` of tenant a's namespace rises by the workload's 1 GPU and
    1 pod while it holds them and returns after cleanup; the ledger holds its GPU-seconds."""
    probes: list[dict[str, Any]] = [{"name": "a-usage", "kind": "attribution", "resource": "gpu", "as": "a"}]
    got = run(pytester, governed(realnode, tenants, probes), "g" + uuid.uuid4().hex[:9], "-k", "governance")
    item = got["gpu::governance::a-usage::scheduling"]
    assert item["status"] == "passed", item.get("failure")
    checked = data(item, "governance.attribution")
    assert checked["expected"] == {"resourcequota/tenant-a": {f"requests.{GPU}": "1", "pods": "1"}}
    usage = data(item, "governance.usage")
    assert usage["during"]["resourcequota/tenant-a"]["used"] == {f"requests.{GPU}": "1", "pods": "1"}
    assert usage["after"]["resourcequota/tenant-a"]["used"] == {f"requests.{GPU}": "0", "pods": "0"}
    ledger = data(item, "governance.ledger")  # the GPU-seconds the probe's pod held in a's namespace
    [pod] = ledger["workloads"]
    assert (pod["role"], pod["namespace"], pod["requests"]) == ("workload", tenants["ns"]["a"], {GPU: "1"})
    assert ledger["resource_seconds"] == {tenants["ns"]["a"]: {GPU: pod["held_s"]}} and pod["held_s"] > 0
    assert (ledger["tenant"], ledger["waste"]["attempts"], ledger["waste"]["refused"]) == ("a", 1, 0)
    # the run-wide usage ledger counts the probe's pod under tenant a's namespace and project, once
    [facts] = [r["data"] for r in item["records"] if r["kind"] == "usage.workload"]
    assert (facts["tenant"], facts["namespace"], facts["object"]) == ("a", tenants["ns"]["a"], "pod")
    section = evidence_of(pytester)["usage"]
    assert section["resource_seconds"]["by_project"]["a"] == {GPU: pytest.approx(pod["held_s"], abs=0.002)}
    assert section["resource_seconds"]["by_namespace"][tenants["ns"]["a"]] == {
        GPU: pytest.approx(pod["held_s"], abs=0.002)}
    assert section["governance"]["probes"] == 1 and section["governance"]["resource_seconds"] == \
        ledger["resource_seconds"]
    _clean(item)


def test_through_kueue_the_queues_count_the_request_and_kueue_refuses_above_the_nominal_quota(
    pytester: pytest.Pytester, realnode: RealNodeCluster, tenants: dict[str, Any]
) -> None:
    """submit_as kueue-job: the ClusterQueue and LocalQueue usage (and the ResourceQuota, once the
    admitted Job's pod exists) rise by 1 GPU and return; 2 GPUs on a 1-GPU ClusterQueue stay pending."""
    probes: list[dict[str, Any]] = [{"name": "a-queue-usage", "kind": "attribution", "resource": "gpu", "as": "a"},
              {"name": "a-queue-quota", "kind": "quota", "resource": "gpu", "as": "a", "above": {GPU: 2}}]
    got = run(pytester, governed(realnode, tenants, probes, "kueue-job"), "g" + uuid.uuid4().hex[:9],
              "-k", "governance")
    item = got["gpu::governance::a-queue-usage::scheduling"]
    assert item["status"] == "passed", item.get("failure")
    cq, lq = f"clusterqueue/{tenants['cq']['a']}", f"localqueue/{tenants['ns']['a']}/lq"
    assert data(item, "governance.attribution")["expected"] == {
        "resourcequota/tenant-a": {f"requests.{GPU}": "1", "pods": "1"}, cq: {f"*/{GPU}": "1"}, lq: {f"*/{GPU}": "1"}}
    usage = data(item, "governance.usage")
    assert usage["during"][cq]["usage"] == {f"{tenants['rf']}/{GPU}": "1"}
    assert usage["after"][cq]["usage"] == {f"{tenants['rf']}/{GPU}": "0"}
    _clean(item)
    over = got["gpu::governance::a-queue-quota::scheduling"]
    assert over["status"] == "passed", over.get("failure")
    above = _attempts(over)["above"]
    assert above["outcome"] == "pending" and above["reasons"][0]["code"] == "queue_request_exceeds_max"
    _clean(over)


def _least_privilege(realnode: RealNodeCluster, made: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """deploy/rbac.yaml into the gate's namespace and deploy/rbac-governance.yaml for tenants a and b
    (cluster-scoped names made unique); ``(kubeconfig of the harness ServiceAccount, cluster objects)``."""
    ns = made["ns"]
    tag = uuid.uuid4().hex[:5]
    docs = [d for f in ("rbac.yaml", "rbac-governance.yaml")
            for d in yaml.safe_load_all((REPO / "deploy" / f).read_text()) if d]
    bindings = [d for d in docs if d["kind"] == "RoleBinding" and d["metadata"]["name"] == "pytest-hetero-governance"]
    docs = [d for d in docs if d not in bindings]
    for tenant, doc in zip(("a", "b"), bindings, strict=True):
        doc["metadata"]["namespace"] = ns[tenant]
        docs.append(doc)
    cluster_scoped = []
    for doc in docs:
        meta = doc["metadata"]
        if meta.get("namespace") == "hetero-validation":
            meta["namespace"] = ns["gate"]
        if "namespace" not in meta:
            meta["name"] = f"{meta['name']}-{tag}"
            cluster_scoped.append(doc)
        if doc["kind"] in ("ClusterRoleBinding", "RoleBinding") and doc["roleRef"]["kind"] == "ClusterRole":
            doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{tag}"
        for subject in doc.get("subjects", []):
            subject["namespace"] = ns["gate"]
        utils.create_from_dict(realnode.api, doc)  # type: ignore[no-untyped-call]
    answer: Any = realnode.core.create_namespaced_service_account_token(
        "pytest-hetero", ns["gate"], {"spec": {"expirationSeconds": 3600}})  # type: ignore[arg-type]  # a manifest dict, sent as it is
    token = answer.status.token  # (the client's models make every field optional)
    admin = yaml.safe_load(Path(realnode.info.kubeconfig).read_text())
    return {"apiVersion": "v1", "kind": "Config", "clusters": admin["clusters"],
            "users": [{"name": "sa", "user": {"token": token}}],
            "contexts": [{"name": "sa", "context": {"cluster": admin["clusters"][0]["name"], "user": "sa"}}],
            "current-context": "sa"}, cluster_scoped


def test_deploy_rbac_governance_is_enough_for_the_probes_as_the_harness_service_account(
    pytester: pytest.Pytester, realnode: RealNodeCluster, tenants: dict[str, Any]
) -> None:
    """The harness as ServiceAccount pytest-hetero with deploy/rbac.yaml + deploy/rbac-governance.yaml only:
    it can request the tenants' tokens, observe, read quotas and queue usage, and clean up."""
    kubeconfig, cluster_scoped = _least_privilege(realnode, tenants)
    try:
        path = pytester.path / "sa.kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig))
        probes = [{"name": "a-not-into-b", "kind": "tenant-isolation", "resource": "gpu", "as": "a", "target": "b"},
                  {"name": "a-queue-usage", "kind": "attribution", "resource": "gpu", "as": "a"},
                  {"name": "a-no-gpu", "kind": "device-isolation", "resource": "gpu", "as": "a", "image": "py"}]
        doc = json.loads(governed(realnode, tenants, probes, "kueue-job"))
        doc["spec"]["target"]["kubeconfig"] = str(path)
        got = run(pytester, json.dumps(doc), "g" + uuid.uuid4().hex[:9], "-k", "governance")
        for name in ("a-not-into-b", "a-queue-usage", "a-no-gpu"):
            item = got[f"gpu::governance::{name}::scheduling"]
            assert item["status"] == "passed", item.get("failure")
            assert data(item, "governance.identity")["observer"] == f"system:serviceaccount:{tenants['ns']['gate']}:pytest-hetero"
            _clean(item)
    finally:
        rbac = client.RbacAuthorizationV1Api(realnode.api)
        for doc in cluster_scoped:
            delete = (rbac.delete_cluster_role if doc["kind"] == "ClusterRole" else rbac.delete_cluster_role_binding)
            delete(doc["metadata"]["name"])


def test_a_pod_without_an_accelerator_request_on_the_gpu_node_sees_no_device(
    pytester: pytest.Pytester, realnode: RealNodeCluster, tenants: dict[str, Any]
) -> None:
    """On the real node (kubelet, containerd, the test device plugin handing /dev/nvidia<i> and
    NVIDIA_VISIBLE_DEVICES to pods that request GPUs), a pod of tenant a that requests none runs and
    sees neither in the plain Python image; in the CUDA-like stand-in image, which sets
    NVIDIA_VISIBLE_DEVICES=all as the nvidia/cuda images do, the probe fails: that variable hands every
    GPU to the pod wherever the NVIDIA container toolkit honours it. A pod requesting N seeing exactly N
    is the startup layer's claim (test_realnode_layers)."""
    probes: list[dict[str, Any]] = [{"name": "a-no-gpu", "kind": "device-isolation", "resource": "gpu", "as": "a", "image": "py"},
              {"name": "a-no-gpu-cuda", "kind": "device-isolation", "resource": "gpu", "as": "a", "image": "acc"}]
    got = run(pytester, governed(realnode, tenants, probes), "g" + uuid.uuid4().hex[:9], "-k", "governance")
    item = got["gpu::governance::a-no-gpu::scheduling"]
    assert item["status"] == "passed", item.get("failure")
    [attempt] = _attempts(item).values()
    assert (attempt["outcome"], attempt["facts"]["node"], attempt["facts"]["log_complete"]) == (
        "completed", realnode.info.node, True)
    assert attempt["facts"]["requests"] == {"cpu": "10m"}  # the GPU request removed, nothing else asked
    seen = data(item, "governance.devices")
    assert (seen["device_nodes"], seen["visible_env"], seen["breaches"]) == ([], {}, [])
    _clean(item)
    cuda = got["gpu::governance::a-no-gpu-cuda::scheduling"]
    assert failure(cuda) == ("failed", "device_isolation_breach", "platform")
    assert cuda["failure"]["message"].startswith(
        f"a pod of a without an accelerator request on node {realnode.info.node} sees NVIDIA_VISIBLE_DEVICES=all (")
    assert data(cuda, "governance.devices")["device_nodes"] == []  # no NVIDIA runtime here: the variable alone
    _clean(cuda)
