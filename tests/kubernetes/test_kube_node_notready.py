"""A node that turns NotReady while the Kubernetes backend uses it (issue 8: backend faults during a run).

Each test gets a KWOK node of its own (pool ``lost-<random>``, deleted afterwards) so the session's
pools stay Ready for other tests. KWOK's ``node-not-ready`` stage turns it NotReady: once the node
carries the label ``node-not-ready.stage.kwok.x-k8s.io=true`` KWOK posts ``Ready=False`` with the
reason and message of the node's annotations, as a kubelet whose runtime broke would. The exec of a
model run on a KWOK node runs on this host, so the test sees the run start (a marker file) and can
check that the abandoned process was killed.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from kubekit import BASE, POOL, SESSION, kube_matrix
from kubernetes.client.exceptions import ApiException
from support import evidence_of, statuses

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

STAGE = "node-not-ready.stage.kwok.x-k8s.io"
REASON = "KubeletNotReady"
MESSAGE = "container runtime is down: PLEG is not healthy: pleg was last seen active 3m0s ago"
LOGREG = "digits-logreg@digits-test"
STALL = "digits-stall@digits-test"


def ready(cluster: Cluster, name: str) -> str:
    """The node's Ready status (``True``/``False``/``Unknown``; ``Unknown`` without the condition)."""
    node: Any = cluster.core.read_node(name)  # the API's answer: the client's models make every field optional
    conds = node.status.conditions or []
    return next((c.status for c in conds if c.type == "Ready"), "Unknown")


def wait_ready(cluster: Cluster, name: str, want: bool, timeout_s: float = 60) -> None:
    """Wait until the node's Ready status is (``want``) or is not (not ``want``) ``True``."""
    deadline = time.monotonic() + timeout_s
    while (ready(cluster, name) == "True") != want:
        assert time.monotonic() < deadline, f"node {name} Ready={ready(cluster, name)} after {timeout_s} s"
        time.sleep(0.2)


def turn_not_ready(cluster: Cluster, name: str) -> None:
    """Label the node for KWOK's node-not-ready stage (Ready=False with REASON/MESSAGE)."""
    cluster.core.patch_node(name, {"metadata": {"labels": {STAGE: "true"}}})


def taints(cluster: Cluster, name: str) -> list[Any]:
    """The node's taints (V1Taint objects)."""
    node: Any = cluster.core.read_node(name)  # the API's answer: the client's models make every field optional
    return list(node.spec.taints or [])


@pytest.fixture
def lost_node(cluster: Cluster) -> Iterator[tuple[str, str]]:
    """``(pool, node name)`` of a Ready KWOK node of this test's own; deleted afterwards."""
    pool = f"lost-{uuid.uuid4().hex[:4]}"
    name = f"{pool}-{cluster.suffix}"
    cluster.core.create_node(
        {  # type: ignore[arg-type]  # a manifest dict, sent as it is
            "metadata": {
                "name": name,
                "annotations": {
                    "kwok.x-k8s.io/node": "fake",
                    f"{STAGE}/reason": REASON,
                    f"{STAGE}/message": MESSAGE,
                },
                "labels": {POOL: pool, SESSION: cluster.suffix, "kubernetes.io/hostname": name},
            },
            "spec": {"taints": []},
        }
    )
    try:
        cluster.core.patch_node_status(
            name, {"status": {"capacity": BASE, "allocatable": BASE, "conditions": []}}
        )
        wait_ready(cluster, name, True)
        # the node lifecycle controller taints a new node not-ready until it has seen it Ready
        deadline = time.monotonic() + 60
        while any(t.key.startswith("node.kubernetes.io/") for t in taints(cluster, name)):
            assert time.monotonic() < deadline, f"node {name} keeps its node.kubernetes.io taints"
            time.sleep(0.2)
        yield pool, name
    finally:
        try:
            cluster.core.delete_node(name)
        except ApiException:
            pass


def matrix(cluster: Cluster, pool: str, *, other: bool, stall: str | None) -> str:
    """Resource ``lost`` on ``pool`` (+ ``cpu`` on the session's CPU pool when ``other``); with
    ``stall`` (a command line) a first model ``digits-stall`` runs it on ``lost`` only."""
    resources = [{"name": "lost", "type": "cpu", "requests": {"cpu": "1"}, "pool": pool}]
    if other:
        resources.append({"name": "cpu", "type": "cpu", "requests": {"cpu": "1"}, "pool": "cpu"})
    doc = json.loads(kube_matrix(cluster.suffix, cluster.namespace, resources))
    if stall:
        first = doc["spec"]["models"][0]
        doc["spec"]["models"].insert(
            0, {**first, "name": "digits-stall", "entrypoint": ["{python}", "-c", stall]}
        )
        if other:
            doc["spec"]["exclude"] = [
                {"resource": "cpu", "model": "digits-stall", "reason": "stalls on purpose"}
            ]
    return json.dumps(doc, indent=1)


def items(ev: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """nodeid without the matrix prefix → item evidence."""
    return {i["nodeid"].split("::", 1)[1]: i for i in ev["items"]}


def data(item: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """The data of every record of ``kind`` in the item, in order."""
    return [r["data"] for r in item["records"] if r["kind"] == kind]


def failure(item: dict[str, Any]) -> tuple[str, str, str]:
    """``(status, category, owner)`` of a failed or errored item."""
    return item["status"], item["failure"]["category"], item["failure"]["owner"]


def stamp(text: str) -> float:
    """Epoch seconds of an RFC 3339 UTC time (``…Z``)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def pods_of(cluster: Cluster, run_id: str) -> list[str]:
    """Pods labelled with the run id that are not being deleted."""
    pods: list[Any] = cluster.core.list_pod_for_all_namespaces(label_selector=f"pytest-hetero.run-id={run_id}").items
    return [p.metadata.name for p in pods if p.metadata.deletion_timestamp is None]


def test_node_turning_not_ready_mid_run_abandons_the_run(
    pytester: pytest.Pytester, cluster: Cluster, run_id: str, lost_node: tuple[str, str]
) -> None:
    pool, node = lost_node
    marker = pytester.path / "stall-started"
    stall = f"import pathlib, time; pathlib.Path({str(marker)!r}).touch(); time.sleep(60)  # {run_id}"
    pytester.makefile(".matrix.yaml", k=matrix(cluster, pool, other=True, stall=stall))
    flipped: list[float] = []

    def flip() -> None:  # once the stalling run is in progress on the node
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if marker.exists():
            flipped.append(time.time())
            turn_not_ready(cluster, node)

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    started = time.monotonic()
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id)
    took = time.monotonic() - started
    flipper.join(5)
    got = items(evidence_of(pytester))
    assert flipped, "the stalling model run never started"

    model = got[f"lost::py::{STALL}::model"]
    assert failure(model) == ("error", "node_not_ready", "infrastructure")
    text = model["failure"]["message"]
    assert text.startswith(f"node {node} turned NotReady during the model run (Ready=False since ")
    assert f"{REASON}: {MESSAGE}; seen at " in text and "run abandoned after " in text
    (run,) = data(model, "model.run")
    assert (run["abandoned"], run["timed_out"], run["exit_code"], run["node"]) == (True, False, None, node)
    # abandoned, not waited out: the entrypoint sleeps 60 s (the bounds leave a loaded machine's KWOK and watch
    # their time; the gate reacts to the watch's event, KWOK's stage and the event's delivery are not the gate's)
    assert run["duration_s"] < 45 and model["duration_s"] < 50
    (lost,) = data(model, "model.node_not_ready")
    assert (lost["node"], lost["condition"]["status"], lost["condition"]["reason"]) == (node, "False", REASON)
    assert lost["condition"]["message"] == MESSAGE and lost["process_killed"] is True
    assert [t["status"] for t in lost["transitions"]] == ["True", "False"]
    assert [(t["reason"], t["message"]) for t in lost["transitions"][1:]] == [(REASON, MESSAGE)]
    seen = stamp(lost["seen_at"])
    assert stamp(lost["run_started_at"]) <= flipped[0] <= seen < flipped[0] + 30
    assert lost["abandoned_after_s"] < 45
    assert stamp(lost["transitions"][0]["seen_at"]) <= stamp(lost["transitions"][1]["seen_at"]) == seen

    assert got[f"lost::py::{STALL}::business"]["status"] == "blocked"
    assert got[f"lost::py::{STALL}::business"]["blocked_by"] == model["nodeid"]
    later = got[f"lost::py::{LOGREG}::model"]
    assert failure(later) == ("error", "node_not_ready", "infrastructure")
    assert later["failure"]["message"].startswith(
        f"node {node} turned NotReady during lost::py::{STALL}::model (Ready=False since "
    )
    assert "the model layer did not run" in later["failure"]["message"] and later["duration_s"] < 15  # no run: a read
    assert data(later, "model.run") == []
    assert got[f"lost::py::{LOGREG}::business"]["status"] == "blocked"

    assert {k: v for k, v in statuses(evidence_of(pytester)).items() if k.startswith("cpu::")} == {
        "cpu::discovery": "passed",
        "cpu::py::scheduling": "passed",
        "cpu::py::startup": "passed",
        f"cpu::py::{LOGREG}::model": "passed",
        f"cpu::py::{LOGREG}::business": "passed",
        f"cpu::py::{STALL}::model": "excluded",
        f"cpu::py::{STALL}::business": "excluded",
    }
    assert [got[f"lost::{k}"]["status"] for k in ("discovery", "py::scheduling", "py::startup")] == [
        "passed"
    ] * 3
    assert all(i["failure"] is None or i["failure"]["category"] != "harness" for i in got.values())
    assert took < 90
    assert pods_of(cluster, run_id) == []
    assert not [p for p in Path("/proc").glob("[0-9]*/cmdline") if alive_with(p, run_id)]


def alive_with(cmdline: Path, text: str) -> bool:
    """Whether the process of ``/proc/<pid>/cmdline`` exists and its command line contains ``text``."""
    try:
        return text.encode() in cmdline.read_bytes()
    except OSError:
        return False


def test_node_not_ready_before_the_model_run_fails_fast(
    pytester: pytest.Pytester, cluster: Cluster, run_id: str, lost_node: tuple[str, str]
) -> None:
    pool, node = lost_node
    pytester.makefile(".matrix.yaml", k=matrix(cluster, pool, other=False, stall=None))
    # turn the node NotReady between startup and the model run: in the run's own process
    pytester.makeconftest(
        f"""
        import os
        import time
        from kubernetes import client, config

        def pytest_runtest_setup(item):
            if not item.nodeid.endswith("::model"):
                return
            core = client.CoreV1Api(config.new_client_from_config(os.environ["KUBECONFIG"]))
            core.patch_node({node!r}, {{"metadata": {{"labels": {{{STAGE!r}: "true"}}}}}})
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                conds = core.read_node({node!r}).status.conditions or []
                if any(c.type == "Ready" and c.status != "True" for c in conds):
                    return
                time.sleep(0.2)
        """
    )
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id)
    got = items(evidence_of(pytester))
    assert got["lost::py::startup"]["status"] == "passed"
    model = got[f"lost::py::{LOGREG}::model"]
    assert failure(model) == ("error", "node_not_ready", "infrastructure")
    text = model["failure"]["message"]
    assert text.startswith(f"node {node} of pod ") and "is NotReady (Ready=False since " in text
    assert text.endswith(f", {REASON}: {MESSAGE}); the model layer did not run")
    (lost,) = data(model, "model.node_not_ready")
    assert (lost["node"], lost["condition"]["status"], lost["condition"]["message"]) == (
        node,
        "False",
        MESSAGE,
    )
    assert data(model, "model.run") == [] and model["duration_s"] < 15  # no run: a node read, however loaded
    assert got[f"lost::py::{LOGREG}::business"]["status"] == "blocked"
    assert pods_of(cluster, run_id) == []


def test_ready_condition_and_its_description() -> None:
    from kubernetes import client

    from pytest_hetero.backends.kubernetes.manifests import ListedNode
    from pytest_hetero.backends.kubernetes.nodes import NodeReadiness, ReadyCondition, describe, ready_condition

    lost: ReadyCondition = {
        "type": "Ready",
        "status": "Unknown",
        "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
        "lastTransitionTime": "2025-01-02T12:01:02Z",
    }
    node: ListedNode = {"metadata": {"name": "n1"}, "spec": {},
                        "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}, {**lost}]}}
    assert ready_condition(node) == lost
    assert describe(lost) == (
        "Ready=Unknown since 2025-01-02T12:01:02Z, NodeStatusUnknown: Kubelet stopped posting node status."
    )
    assert describe(ready_condition({"metadata": {"name": "n2"}, "spec": {}, "status": {}})) == (
        "Ready=Unknown, NoReadyCondition: the node reports no Ready condition"
    )
    watch = NodeReadiness(client.ApiClient())  # fed by hand: nothing is listed or watched
    watch.changed("MODIFIED", node, 0.0)
    assert watch.conditions["n1"] == lost
    watch.changed("DELETED", node, 0.0)
    assert watch.conditions["n1"]["reason"] == "NodeDeleted"
    watch.listed([], 0.0)  # a node kept before and not listed now was deleted
    assert watch.conditions["n1"]["reason"] == "NodeDeleted"


def test_one_node_watch_feeds_each_runs_watch_of_its_own_node(cluster: Cluster, lost_node: tuple[str, str]) -> None:
    """The session's one watch of every node (:class:`NodeReadiness`: one list, one watch stream) feeds a
    :class:`NodeWatch` per model run: two runs' watches of the lost node and one of a Ready pool node start at
    ``Ready=True``; when the lost node turns NotReady both of its watches turn, with KWOK's condition, and the other
    does not; a watch stopped before is fed no more; a node the watch does not hold is read once (here one that
    does not exist: ``NodeDeleted``)."""
    from pytest_hetero.backends.kubernetes.nodes import NodeReadiness

    _, name = lost_node
    other = cluster.nodes["cpu"][0]
    feed = NodeReadiness(cluster.api).start()
    try:
        a, b, c, stopped = feed.watch(name), feed.watch(name), feed.watch(other), feed.watch(name)
        stopped.stop()
        assert [[t["status"] for t in w.transitions] for w in (a, b, c, stopped)] == [["True"]] * 4
        assert not any(w.turned.is_set() for w in (a, b, c, stopped))
        turn_not_ready(cluster, name)
        assert a.turned.wait(60) and b.turned.wait(5)
        for w in (a, b):
            assert w.condition is not None
            assert (w.condition["status"], w.condition.get("reason"), w.condition.get("message")) == (
                "False", REASON, MESSAGE)
            assert [t["status"] for t in w.transitions] == ["True", "False"]
            assert w.seen_at == w.transitions[-1]["seen_at"] and w.error is None
        assert not c.turned.is_set() and [t["status"] for t in c.transitions] == ["True"]
        assert not stopped.turned.is_set() and [t["status"] for t in stopped.transitions] == ["True"]
        absent = f"absent-{uuid.uuid4().hex[:6]}"
        gone = feed.watch(absent)
        assert gone.turned.is_set() and gone.condition is not None
        assert (gone.condition["status"], gone.condition.get("reason")) == ("Unknown", "NodeDeleted")
        assert (feed.failures, feed.error) == (0, None)
        assert {n: len(s) for n, s in feed.subscribers.items()} == {name: 2, other: 1, absent: 1}
    finally:
        feed.stop()
