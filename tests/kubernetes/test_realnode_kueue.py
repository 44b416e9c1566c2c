"""Scheduling through the real Kueue (v0.19.2 on the real node's plane): admission recorded, refusals in
Kueue's own words with its granular reasons; the Workload read as ``kueue.x-k8s.io/v1beta2``, the
version API discovery found. Volcano (not buildable here) through its real outputs.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kubekit import kube_matrix
from realkit import GPU, STANDIN, VENDOR_LABELS, data, failure, kueue_queues, real_matrix, run
from support import FIXTURES, evidence_of

from pytest_hetero.backends.kubernetes import scheduling as ks
from pytest_hetero.backends.kubernetes.manifests import EventJSON
from pytest_hetero.backends.kubernetes.queues import KUEUE, Served

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster, RealNodeCluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

PRODUCED = FIXTURES / "produced-here"


@pytest.fixture(scope="module")
def queues(realnode: RealNodeCluster, real_kueue: Any, realnode_images: dict[str, str]) -> Iterator[dict[str, str]]:
    """A ResourceFlavor for the real node, a ClusterQueue with 2 GPUs of quota, LocalQueue ``lq``."""
    realnode.core.patch_node(realnode.info.node, {"metadata": {"labels": VENDOR_LABELS}})
    with kueue_queues(realnode, "kueue-run", GPU, 2) as made:
        yield made


def kueue_run(pytester: pytest.Pytester, realnode: RealNodeCluster, queues: dict[str, str], gpus: str,
              *args: str, wait: str = "30s") -> dict[str, dict[str, Any]]:
    """The GPU row through LocalQueue ``lq`` asking for ``gpus``; ``wait`` is the scheduling layer's timeout (a
    refusal is only recorded when it ends: the gate does not give up earlier on a queue's word)."""
    resource = {"name": "gpu", "type": "gpu", "vendor": "nvidia", "requests": {GPU: gpus}, "queue": queues["lq"]}
    text = real_matrix(realnode.info, queues["ns"], [resource], target={"submit_as": "kueue-job"},
                       images=[{"name": "acc", "reference": STANDIN, "for": ["gpu"]}],
                       layers={"scheduling": {"timeout": wait}, "startup": {"timeout": "60s"}}, framework=False)
    return run(pytester, text, "q" + uuid.uuid4().hex[:9], *args)


def test_an_admitted_job_records_cluster_queue_flavor_usage_and_wait(
    pytester: pytest.Pytester, realnode: RealNodeCluster, queues: dict[str, str]
) -> None:
    got = kueue_run(pytester, realnode, queues, "1", "-k", "scheduling or startup")
    assert got["gpu::acc::scheduling"]["status"] == "passed"
    assert got["gpu::acc::startup"]["status"] == "passed"  # the admitted Job's pod ran on the real node
    queue = data(got["gpu::acc::scheduling"], "scheduling.queue")
    assert (queue["controller"], queue["admitted"], queue["api_version"]) == ("kueue", True, "kueue.x-k8s.io/v1beta2")
    assert (queue["cluster_queue"], queue["local_queue"]) == (queues["cq"], "lq")
    assert (queue["flavors"], queue["resource_usage"]) == ({GPU: queues["rf"]}, {GPU: "1"})
    assert queue["quota_reserved_message"] == f"Quota reserved in ClusterQueue {queues['cq']}"
    assert 0 <= queue["wait_s"] < 30 and queue["admitted_at"] and queue["created_at"]
    # the ClusterQueue's own status as read then (Kueue updates it asynchronously: its totals may lag)
    [reserved] = queue["cluster_queue_status"]["flavorsReservation"]
    assert (reserved["name"], [r["name"] for r in reserved["resources"]]) == (queues["rf"], [GPU])


def test_a_job_above_the_queue_maximum_is_refused_in_kueues_words(
    pytester: pytest.Pytester, realnode: RealNodeCluster, queues: dict[str, str]
) -> None:
    # Kueue marks the Workload ExceedsMaxQuota within a second of its creation; 10 s leaves it ample time
    got = kueue_run(pytester, realnode, queues, "3", "-k", "scheduling", wait="10s")
    item = got["gpu::acc::scheduling"]
    assert failure(item) == ("failed", "queue_request_exceeds_max", "platform")
    pending = data(item, "scheduling.pending")
    assert pending["queue"]["api"] == "kueue.x-k8s.io/v1beta2" and pending["queue"]["error"] is None
    first = pending["reasons"][0]
    assert (first["source"], first["flavor"], first["detail"]["condition_reason"]) == (
        "kueue", queues["rf"], "ExceedsMaxQuota")
    assert first["message"] == (f"insufficient quota for {GPU} in flavor {queues['rf']}, previously considered "
                                "podsets requests (0) + current podset request (3) > maximum capacity (2)")
    [wl] = pending["queue_objects"]
    assert wl["kind"] == "Workload"


def test_no_kueue_served_is_said_from_api_discovery(pytester: pytest.Pytester, cluster: Cluster,
                                                    run_id: str) -> None:
    """The KWOK plane has no Kueue: the suspended Job never runs, and the item says why from API
    discovery (it used to guess "is Kueue installed and LocalQueue present?")."""
    resource = {"name": "cpu", "type": "cpu", "requests": {"cpu": "1"}, "pool": "cpu", "queue": "lq"}
    doc = json.loads(kube_matrix(cluster.suffix, cluster.namespace, [resource], target={"submit_as": "kueue-job"},
                                 layers={"scheduling": {"timeout": "3s"}}))
    pytester.makefile(".matrix.yaml", k=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "scheduling")
    [item] = evidence_of(pytester)["items"]
    assert failure(item) == ("failed", "scheduling_timeout", "platform")
    assert item["failure"]["message"].endswith(
        "; the apiserver serves no kueue.x-k8s.io API (API discovery): the controller is not installed")
    assert data(item, "scheduling.pending")["queue"]["served"] is False


def test_versions_are_chosen_by_discovery() -> None:
    assert Served({"kueue.x-k8s.io": ["v1beta2", "v1beta1"]}).version(KUEUE) == "v1beta2"
    assert Served({"kueue.x-k8s.io": ["v1beta1"]}).version(KUEUE) == "v1beta1"  # Kueue before v0.15
    assert Served({"kueue.x-k8s.io": ["v1alpha1"]}).describe(KUEUE) == (
        "kueue.x-k8s.io served only in versions v1alpha1 (this backend reads v1beta2, v1beta1)")
    assert Served(error="HTTP 403: forbidden").describe(KUEUE).startswith("kueue.x-k8s.io unknown: API discovery failed")


# ------------------------------------------------------------------------------------ Volcano --
def _events_of(name: str) -> list[EventJSON]:
    items: list[EventJSON] = yaml.safe_load((PRODUCED / "vc-events.yaml").read_text())["items"]
    return [e for e in items if e["involvedObject"]["name"] == name]


def test_volcano_queue_refusal_is_read_from_its_normal_event() -> None:
    """Volcano v1.15.1: a gang over its queue's capability. The PodGroup has no condition; the reason is
    only in a Normal event; the Warning gang event (0/0 tasks) is its consequence."""
    pg = yaml.safe_load((PRODUCED / "vc-pg-over-queue.yaml").read_text())
    events = _events_of(pg["metadata"]["name"])
    reasons = ks.explain_pending([], events, [pg], None)
    assert [(r.source, r.code, r.resource) for r in reasons] == [
        ("volcano", "queue_quota_insufficient", GPU), ("volcano", "gang_unschedulable", None)]
    assert reasons[0].message == "resource in cluster is overused: overused nvidia.com/gpu"
    assert ks.primary(reasons) == reasons[0]


def test_volcano_gang_condition_decides_over_its_disagreeing_event() -> None:
    """The PodGroup condition says 1/3 tasks unschedulable; its event says 3/3 (and client-go stopped
    repeating it): the condition, the object's state, is the reason; the event is kept beside it."""
    pg = yaml.safe_load((PRODUCED / "vc-pg-over-node.yaml").read_text())
    events = _events_of(pg["metadata"]["name"]) + _events_of("gang-over-node-worker-2")
    reasons = ks.explain_pending([], events, [pg], None)
    gang = next(r for r in reasons if r.code == "gang_unschedulable")
    assert (gang.quantities["unschedulable_tasks"], gang.quantities["tasks"]) == ("1", "3")
    assert gang.detail["event_message"].startswith("3/3 tasks in gang unschedulable")
    assert [r.code for r in reasons].count("gang_unschedulable") == 1
    assert ("insufficient_resource", GPU) in [(r.code, r.resource) for r in reasons]


def test_fixtures_are_the_real_run() -> None:
    assert Path(PRODUCED / "README.md").read_text().startswith("# Outputs of real controllers")
