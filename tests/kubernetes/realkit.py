"""Helpers of the tests that run the plugin against the real node (tests/infra/realnode.sh).

Matrices name the real node's plane by ``target.kubeconfig`` (``KUBECONFIG`` stays the KWOK
plane's) and land every resource on the node by its nodeSelector and toleration. The node carries
the labels GPU Feature Discovery and the Ascend device plugin would set (:data:`VENDOR_LABELS`),
which discovery's label contract checks; the device-plugin controls are global to the node, so a
test that sets one holds :func:`controls` exclusively.
"""

from __future__ import annotations

import fcntl
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support import clear_reports, evidence_of, matrix_text

GPU = "nvidia.com/gpu"
NPU = "huawei.com/Ascend910"
PYTHON = "pytest-hetero/py311-onnx:1"
STANDIN = "pytest-hetero/accel-standin:2"
ABSENT = "127.0.0.1:1/hetero/absent:1"
COMBO = "digits-logreg@digits-test"
VENDOR_LABELS = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "accelerator": "huawei-Ascend910"}
"""What GPU Feature Discovery / the Ascend device plugin would label the node with (the replayed
captures are an H100 and a 910B3 host)."""


def on_node(info: Any, resource: dict[str, Any]) -> dict[str, Any]:
    """``resource`` with the real node's nodeSelector and toleration added."""
    return {**resource, "node_selector": {**info.node_selector, **resource.get("node_selector", {})},
            "tolerations": [info.toleration, *resource.get("tolerations", [])]}


def real_matrix(info: Any, namespace: str, resources: list[dict[str, Any]], *,
                images: list[dict[str, Any]] | None = None, layers: dict[str, Any] | None = None,
                target: dict[str, Any] | None = None, models: list[dict[str, Any]] | None = None,
                framework: bool = True) -> str:
    """A kubernetes-backend matrix on the digits case whose resources land on the real node; without
    ``framework`` its model declares no runtime (an image then needs the interpreter its entrypoint runs,
    ``{python}``, but no ONNX Runtime)."""
    doc = json.loads(matrix_text(
        resources=[on_node(info, r) for r in resources], backend="kubernetes",
        images=images or [{"name": "py", "reference": PYTHON, "for": ["cpu", "gpu", "npu"]}],
        layers=layers or {"discovery": {"timeout": "20s"}, "scheduling": {"timeout": "60s"},
                          "startup": {"timeout": "90s"}, "model": {"timeout": "2m"}}))
    doc["spec"]["target"] = {"backend": "kubernetes", "kubeconfig": str(info.kubeconfig), "namespace": namespace,
                             "pull_policy": "never", **(target or {})}
    if models is not None:
        doc["spec"]["models"] = models
    if not framework:
        for model in doc["spec"]["models"]:
            model.pop("runtime", None)
    return json.dumps(doc, indent=1)


def run(pytester: pytest.Pytester, text: str, run_id: str, *args: str) -> dict[str, dict[str, Any]]:
    """Write the matrix, run pytest on it; nodeid without the matrix prefix → item evidence."""
    pytester.makefile(".matrix.yaml", k=text)
    clear_reports(pytester)
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, *args)
    return {i["nodeid"].split("::", 1)[1]: i for i in evidence_of(pytester)["items"]}


def data(item: dict[str, Any], kind: str) -> dict[str, Any]:
    """The data of the item's (last) record of ``kind``."""
    found = [r["data"] for r in item["records"] if r["kind"] == kind]
    assert found, f"{item['nodeid']} has no {kind} record: {[r['kind'] for r in item['records']]}"
    return dict(found[-1])


def failure(item: dict[str, Any]) -> tuple[str, str, str]:
    """``(status, category, owner)`` of an item."""
    fail = item.get("failure") or {}
    return item["status"], fail.get("category", ""), fail.get("owner", "")


@contextmanager
def controls(info: Any, exclusive: bool) -> Iterator[None]:
    """Hold the device-plugin controls: exclusively to set one, shared to rely on none being set
    (pytest-xdist workers and parallel sessions on this machine share the node)."""
    lock = Path(info.device_plugin_state) / "control" / ".hetero-tests.lock"
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


KUEUE_API = ("kueue.x-k8s.io", "v1beta2")
"""Kueue's API group and the version the real Kueue stores."""


@contextmanager
def kueue_queues(realnode: Any, prefix: str, resource: str, quota: Any) -> Iterator[dict[str, str]]:
    """A new namespace (``realnode.new_namespace(prefix)``), a ResourceFlavor for the real node, a ClusterQueue
    of ``quota`` of ``resource`` for that namespace and LocalQueue ``lq`` pointing to it: ``{"ns", "rf", "cq",
    "lq"}``. The namespace, ClusterQueue and ResourceFlavor are deleted afterwards (already gone is fine)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    ns = realnode.new_namespace(prefix)
    suffix = uuid.uuid4().hex[:5]
    made = {"ns": ns, "rf": f"{prefix}-{suffix}", "cq": f"cq-{prefix}-{suffix}", "lq": "lq"}
    custom = client.CustomObjectsApi(realnode.api)
    group, version = KUEUE_API
    try:
        custom.create_cluster_custom_object(group, version, "resourceflavors", {
            "apiVersion": f"{group}/{version}", "kind": "ResourceFlavor", "metadata": {"name": made["rf"]},
            "spec": {"nodeLabels": realnode.info.node_selector, "tolerations": [realnode.info.toleration]}})
        custom.create_cluster_custom_object(group, version, "clusterqueues", {
            "apiVersion": f"{group}/{version}", "kind": "ClusterQueue", "metadata": {"name": made["cq"]},
            "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                     "resourceGroups": [{"coveredResources": [resource], "flavors": [
                         {"name": made["rf"], "resources": [{"name": resource, "nominalQuota": quota}]}]}]}})
        custom.create_namespaced_custom_object(group, version, ns, "localqueues", {
            "apiVersion": f"{group}/{version}", "kind": "LocalQueue", "metadata": {"name": "lq"},
            "spec": {"clusterQueue": made["cq"]}})
        yield made
    finally:
        client.CoreV1Api(realnode.api).delete_namespace(ns)
        for plural, name in (("clusterqueues", made["cq"]), ("resourceflavors", made["rf"])):
            try:
                custom.delete_cluster_custom_object(group, version, plural, name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
