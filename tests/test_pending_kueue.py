"""Kueue Workload conditions and flavor-assignment messages (v0.4-v0.14 wording)."""

from __future__ import annotations

import pytest

from pytest_hetero.errors import ParseError
from pytest_hetero.pending.kueue import parse_kueue_message, parse_workload


def _workload(*conditions: dict[str, str], requests: dict[str, str] | None = None) -> dict[str, object]:
    status: dict[str, object] = {"conditions": list(conditions)}
    if requests:
        status["resourceRequests"] = [{"name": "main", "resources": requests}]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "job-train-3f2a", "namespace": "ml"},
        "spec": {"queueName": "team-a"},
        "status": status,
    }


def test_quota_reserved_false_with_two_flavor_reasons_and_max_capacity() -> None:
    wl = _workload(
        {
            "type": "QuotaReserved",
            "status": "False",
            "reason": "Pending",
            "message": "couldn't assign flavors to pod set workers: insufficient unused quota for cpu in "
            "flavor on-demand, 3 more needed, insufficient quota for nvidia.com/gpu in flavor "
            "a100, request > maximum capacity (16 > 8)",
        },
        requests={"cpu": "12", "nvidia.com/gpu": "16"},
    )
    cpu, gpu = parse_workload(wl)
    assert (cpu.code, cpu.resource, cpu.flavor, dict(cpu.quantities)) == (
        "queue_quota_insufficient",
        "cpu",
        "on-demand",
        {"more_needed": "3", "requested": "12"},
    )
    assert (gpu.code, gpu.resource, gpu.flavor, dict(gpu.quantities)) == (
        "queue_request_exceeds_max",
        "nvidia.com/gpu",
        "a100",
        {"requested": "16", "maximum": "8"},
    )
    assert dict(gpu.detail) == {
        "workload": "job-train-3f2a",
        "local_queue": "team-a",
        "condition_type": "QuotaReserved",
        "condition_reason": "Pending",
        "pod_set": "workers",
    }


def test_newer_max_capacity_wording_and_cohort() -> None:
    (prev,) = parse_kueue_message(
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h100, previously "
        "considered podsets requests (4) + current podset request (8) > maximum capacity (8)"
    )
    assert dict(prev.quantities) == {"previously_requested": "4", "requested": "8", "maximum": "8"}
    (cohort,) = parse_kueue_message(
        "couldn't assign flavors to pod set main: insufficient unused quota in cohort "
        "for memory in flavor default, 64Gi more needed"
    )
    assert (cohort.code, cohort.resource, dict(cohort.quantities), cohort.detail["cohort"]) == (
        "queue_quota_insufficient",
        "memory",
        {"more_needed": "64Gi"},
        "true",
    )


@pytest.mark.parametrize(
    ("message", "code", "extra"),
    [
        ("ClusterQueue cq-gpu is inactive", "queue_inactive", {"clusterqueue": "cq-gpu"}),
        ("LocalQueue lq-missing doesn't exist", "queue_not_found", {"localqueue": "lq-missing"}),
        ("ClusterQueue cq-x doesn't exist", "queue_not_found", {"clusterqueue": "cq-x"}),
        ("Workload namespace doesn't match ClusterQueue selector", "queue_namespace_mismatch", {}),
        ("ClusterQueue cq-gone not found", "queue_not_found", {"clusterqueue": "cq-gone"}),
        ("The workload has failed admission checks", "admission_check_failed", {}),
        ("Workload didn't fit in the remaining quota", "queue_quota_insufficient", {}),
        (
            ("resources didn't satisfy LimitRange constraints: spec.podSets[0].template.spec.containers[0]"
            '.resources.limits[cpu]: Invalid value: "4": greater than the maximum allowed (2)'),
            "limitrange_violation",
            {},
        ),
        (
            "couldn't assign flavors to pod set main: resource nvidia.com/mig-1g.10gb unavailable in ClusterQueue",
            "queue_resource_not_covered",
            {"pod_set": "main"},
        ),
        (
            "couldn't assign flavors to pod set main: flavor spot doesn't match node affinity",
            "queue_flavor_mismatch",
            {"pod_set": "main"},
        ),
        (
            "couldn't assign flavors to pod set main: borrowing limit for nvidia.com/gpu in flavor t4 exceeded",
            "queue_quota_insufficient",
            {"pod_set": "main", "borrowing_limit": "exceeded"},
        ),
        (
            "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default in ClusterQueue",
            "queue_request_exceeds_max",
            {"pod_set": "main"},
        ),
    ],
)
def test_queue_messages(message: str, code: str, extra: dict[str, str]) -> None:
    (reason,) = parse_kueue_message(message)
    assert (reason.source, reason.code, dict(reason.detail)) == ("kueue", code, extra)


def test_untolerated_taint_in_flavor() -> None:
    (reason,) = parse_kueue_message(
        "couldn't assign flavors to pod set main: untolerated taint {spot=true:NoSchedule} in flavor spot"
    )
    assert (reason.code, reason.taint, reason.flavor, reason.owner) == (
        "queue_flavor_mismatch",
        "spot=true:NoSchedule",
        "spot",
        "platform",
    )


def test_admitted_workload_has_no_reason_and_eviction_has_one() -> None:
    admitted = _workload(
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "ok"},
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "ok"},
        {
            "type": "PodsReady",
            "status": "False",
            "reason": "PodsReady",
            "message": "Not all pods are ready or succeeded",
        },
    )
    assert parse_workload(admitted) == []
    evicted = _workload(
        {
            "type": "Evicted",
            "status": "True",
            "reason": "Preempted",
            "message": "Preempted to accommodate a workload (UID: 1234) due to prioritization in the "
            "ClusterQueue",
        }
    )
    (reason,) = parse_workload(evicted)
    assert (reason.code, reason.detail["condition_reason"]) == ("workload_evicted", "Preempted")
    timeout = _workload({"type": "Evicted", "status": "True", "reason": "PodsReadyTimeout", "message": ""})
    assert [r.code for r in parse_workload(timeout)] == ["workload_evicted"]


def test_unknown_message_is_kept() -> None:
    wl = _workload(
        {
            "type": "QuotaReserved",
            "status": "False",
            "reason": "Pending",
            "message": "The workload is waiting for admission check gpu-prov",
        }
    )
    (reason,) = parse_workload(wl)
    assert (reason.code, reason.message) == (
        "unknown",
        "The workload is waiting for admission check gpu-prov",
    )


def test_bad_shapes_raise_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_workload({"status": "Pending"})
    with pytest.raises(ParseError):
        parse_workload({"status": {"conditions": "QuotaReserved"}})


def _granular_workload(reason: str, message: str) -> dict[str, object]:
    """A v1beta2 Workload as Kueue v0.19.2 wrote it with UnadmittedWorkloadsObservability on (texts
    from tests/kubernetes/test_realnode_infra.py's real Kueue)."""
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "job-too-big-1"},
            "spec": {"queueName": "lq"},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": reason,
                                       "message": message}]}}


@pytest.mark.parametrize(
    ("reason", "message", "code"),
    [
        ("ExceedsMaxQuota", "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in "
         "flavor real-1, previously considered podsets requests (0) + current podset request (3) > maximum "
         "capacity (2)", "queue_request_exceeds_max"),
        ("WaitingForQuota", "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
         "in flavor real-1, 1 more needed", "queue_quota_insufficient"),
        ("NoMatchingFlavor", "couldn't assign flavors to pod set main: flavor real-1 doesn't match node affinity",
         "queue_flavor_mismatch"),
    ],
)
def test_granular_reasons_of_kueue_0_19_agree_with_the_message(reason: str, message: str, code: str) -> None:
    (found,) = parse_workload(_granular_workload(reason, message))
    assert (found.code, found.flavor, found.detail["condition_reason"]) == (code, "real-1", reason)


def test_granular_reason_decides_between_flavors_and_names_unmatched_messages() -> None:
    both = ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor a, "
            "1 more needed, flavor b doesn't match node affinity")
    first, second = parse_workload(_granular_workload("NoMatchingFlavor", both))
    assert (first.code, first.flavor, second.code, second.flavor) == (
        "queue_flavor_mismatch", "b", "queue_quota_insufficient", "a")
    # wording this reader does not know still gets the code Kueue's own reason names, not "unknown"
    (topo,) = parse_workload(_granular_workload(
        "TopologyPlacementFailed", 'couldn\'t assign flavors to pod set main: topology "rack" doesn\'t fit'))
    assert (topo.code, topo.category, topo.owner) == ("queue_topology_unfit", "queue", "platform")
    (blocked,) = parse_workload(_granular_workload("WaitingForPodsReady", "Waiting for all admitted workloads"))
    assert blocked.code == "queue_admission_blocked"
    # progress, not a refusal: nothing to report yet
    assert parse_workload(_granular_workload("PendingEvaluation", "Workload is pending evaluation")) == []
