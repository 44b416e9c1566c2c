"""Discovery judges more than Ready, on the real node: cordon, untolerated taints, unhealthy devices,
node conditions a health agent sets. Each is a named difference with its owner.

The node's health is changed for real and put back: ``spec.unschedulable`` (what ``kubectl cordon``
writes), the test device plugin's ``unhealthy`` control (the kubelet lowers allocatable), and a
condition written to the node's status as node-problem-detector writes its own (``GPUMissing``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from realkit import GPU, VENDOR_LABELS, controls, data, failure, real_matrix, run

from pytest_hetero.backends.protocol import NodeFacts
from pytest_hetero.judge.failures import owner_category
from pytest_hetero.layers.discovery import node_health_differences
from pytest_hetero.matrix.model import Resource

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import RealNodeCluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def read_node(realnode: RealNodeCluster, name: str) -> Any:
    """The node as the API answers it (the client's models make every field optional)."""
    return realnode.core.read_node(name)


@pytest.fixture(scope="module")
def ns(realnode: RealNodeCluster) -> Iterator[str]:
    realnode.core.patch_node(realnode.info.node, {"metadata": {"labels": VENDOR_LABELS}})
    name = realnode.new_namespace("discovery")
    yield name
    realnode.core.delete_namespace(name)


RUN = "d" + uuid.uuid4().hex[:8]
"""One run id for the module: a second run in a test then rewrites the same bundle folder."""


def discover(pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, resources: list[dict[str, Any]],
             target: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    return run(pytester, real_matrix(realnode.info, ns, resources, target=target), RUN, "-k", "discovery")


def gpu(name: str = "gpu", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": "gpu", "vendor": "nvidia", "requests": {GPU: "1"}, **extra}


def test_a_cordoned_node_is_named(pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str) -> None:
    node = realnode.info.node
    with controls(realnode.info, exclusive=True):  # the node's health is everyone's: others wait
        realnode.core.patch_node(node, {"spec": {"unschedulable": True}})
        try:
            got = discover(pytester, realnode, ns, [gpu()])
        finally:
            realnode.core.patch_node(node, {"spec": {"unschedulable": None}})
            # the node lifecycle controller takes its node.kubernetes.io/unschedulable taint back a moment
            # later: the next test holding the controls must not meet it
            deadline = time.monotonic() + 30
            while any(t.key == "node.kubernetes.io/unschedulable"
                      for t in read_node(realnode, node).spec.taints or []):
                assert time.monotonic() < deadline, "the cordon's taint was not taken back"
                time.sleep(0.2)
    item = got["gpu::discovery"]
    assert failure(item) == ("failed", "node_unschedulable", "infrastructure")
    # the node lifecycle's node.kubernetes.io/unschedulable taint stands for the same cordon: named once
    assert [(d["code"], d["field"]) for d in data(item, "discovery.snapshot")["differences"]] == [
        ("node_unschedulable", "spec.unschedulable")]


def test_a_taint_the_resource_does_not_tolerate(pytester: pytest.Pytester, realnode: RealNodeCluster,
                                                ns: str) -> None:
    doc = json.loads(real_matrix(realnode.info, ns, [gpu("untolerating")]))
    doc["spec"]["resources"][0]["tolerations"] = []  # nodeSelector of the real node, no toleration of its taint
    with controls(realnode.info, exclusive=False):  # no other test's cordon or condition on the node meanwhile
        got = run(pytester, json.dumps(doc), RUN, "-k", "discovery")
    item = got["untolerating::discovery"]
    assert failure(item) == ("failed", "untolerated_taint", "platform")
    [diff] = data(item, "discovery.snapshot")["differences"]
    assert (diff["field"], diff["observed"]) == ("taints[hetero-test/real-node]", "hetero-test/real-node=true:NoSchedule")


def test_unhealthy_devices_lower_allocatable(pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str) -> None:
    n = realnode.info.gpus
    with controls(realnode.info, exclusive=True):
        control = realnode.info.control(GPU, "unhealthy")
        control.write_text(f"{n - 1}\n")
        try:
            deadline = time.monotonic() + 30
            while read_node(realnode, realnode.info.node).status.allocatable.get(GPU) != str(n - 1):
                assert time.monotonic() < deadline, "allocatable did not drop"
                time.sleep(0.5)
            got = discover(pytester, realnode, ns, [gpu()])
        finally:
            control.unlink()
            deadline = time.monotonic() + 30
            while read_node(realnode, realnode.info.node).status.allocatable.get(GPU) != str(n):
                assert time.monotonic() < deadline, "allocatable did not come back"
                time.sleep(0.5)
    item = got["gpu::discovery"]
    assert failure(item) == ("failed", "allocatable_below_capacity", "infrastructure")
    [diff] = data(item, "discovery.snapshot")["differences"]
    assert (diff["expected"], diff["observed"]) == (str(n), str(n - 1))


def test_a_health_agents_condition_is_named(pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str) -> None:
    node = realnode.info.node
    condition = {"type": "GPUMissing", "status": "True", "reason": "GPUFellOffTheBus",
                 "message": "GPU 00000000:19:00.0 is lost (Xid 79)"}
    with controls(realnode.info, exclusive=True):
        realnode.core.patch_node_status(node, {"status": {"conditions": [condition]}})
        try:
            got = discover(pytester, realnode, ns, [gpu()])
            # a configured list narrows what is judged: another agent's condition type only
            narrowed = discover(pytester, realnode, ns, [gpu()], target={"node_problem_conditions": ["XIDErrors"]})
        finally:
            realnode.core.patch_node_status(node, {"status": {"conditions": [
                {"type": "GPUMissing", "$patch": "delete"}]}})
    item = got["gpu::discovery"]
    assert failure(item) == ("failed", "node_condition", "infrastructure")
    assert item["failure"]["message"] == (f"node {node}: condition GPUMissing=True (GPUFellOffTheBus: GPU "
                                          "00000000:19:00.0 is lost (Xid 79))")
    assert narrowed["gpu::discovery"]["status"] == "passed"
    assert data(narrowed["gpu::discovery"], "discovery.snapshot")["judged_conditions"] == ["XIDErrors"]
    seen = data(narrowed["gpu::discovery"], "discovery.snapshot")["nodes"][0]["conditions"]
    assert {"type": "GPUMissing", "status": "True"}.items() <= next(c for c in seen if c["type"] == "GPUMissing").items()


def test_lifecycle_taints_of_a_not_ready_node_are_not_named_twice() -> None:
    """Rules on facts as the engine reports them (no cluster): a NotReady node's not-ready taint and a
    cordon's unschedulable taint are the same fact as the condition / the cordon."""
    resource = Resource(name="r", type="gpu", vendor="nvidia", requests={GPU: "1"})
    facts: NodeFacts = {"name": "n1", "resource_version": None, "ready": "False", "ready_reason": None,
             "ready_message": None, "labels": {}, "capacity": {}, "allocatable": {}, "simulated": False,
             "unschedulable": True, "conditions": [
        {"type": "MemoryPressure", "status": "False", "reason": None, "message": None, "lastTransitionTime": None},
        {"type": "DiskPressure", "status": "True", "reason": "Full", "message": None, "lastTransitionTime": None}],
        "taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                   {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                   {"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"},
                   {"key": "gpu", "value": "busy", "effect": "PreferNoSchedule"}]}
    found = node_health_differences(resource, facts)
    # the checks name categories only; the one failure table gives their owners
    assert [(d["code"], d["field"], owner_category(d["code"], "discovery")) for d in found] == [
        ("node_unschedulable", "spec.unschedulable", "infrastructure"),
        ("lifecycle_taint", "taints[node.kubernetes.io/disk-pressure]", "infrastructure"),
        ("node_condition", "conditions[DiskPressure]", "infrastructure")]
    assert node_health_differences(resource, facts, judged=("GPUMissing",))[-1]["code"] == "lifecycle_taint"
