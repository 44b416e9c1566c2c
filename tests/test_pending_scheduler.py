"""kube-scheduler FailedScheduling wording across Kubernetes 1.18-1.34, Volcano and HAMi."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_hetero.pending.scheduler import parse_hami_message, parse_scheduler_message


def _rows(message: str, **kw: Any) -> list[tuple[object, ...]]:
    return [
        (r.source, r.code, r.nodes, r.total_nodes, r.resource, r.taint, r.preemption)
        for r in parse_scheduler_message(message, **kw)
    ]


def test_v1_18_insufficient_gpu_and_old_taint_wording() -> None:
    msg = (
        "0/5 nodes are available: 1 node(s) had taint {node-role.kubernetes.io/master: }, that the pod "
        "didn't tolerate, 4 Insufficient nvidia.com/gpu."
    )
    assert _rows(msg) == [
        ("scheduler", "untolerated_taint", 1, 5, None, "node-role.kubernetes.io/master", False),
        ("scheduler", "insufficient_resource", 4, 5, "nvidia.com/gpu", None, False),
    ]


def test_v1_18_node_selector_wording() -> None:
    assert _rows("0/3 nodes are available: 3 node(s) didn't match node selector.") == [
        ("scheduler", "node_selector_mismatch", 3, 3, None, None, False)
    ]


def test_v1_28_full_message_with_preemption_part() -> None:
    msg = (
        "0/7 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node "
        "affinity/selector, 1 node(s) had untolerated taint {nvidia.com/gpu: present}, 3 node(s) had taint "
        "{dedicated: training}, that the pod didn't tolerate. preemption: 0/7 nodes are available: 1 No "
        "preemption victims found for incoming pod, 6 Preemption is not helpful for scheduling."
    )
    assert _rows(msg) == [
        ("scheduler", "insufficient_resource", 1, 7, "nvidia.com/gpu", None, False),
        ("scheduler", "node_selector_mismatch", 2, 7, None, None, False),
        ("scheduler", "untolerated_taint", 1, 7, None, "nvidia.com/gpu=present", False),
        ("scheduler", "untolerated_taint", 3, 7, None, "dedicated=training", False),
        ("scheduler", "preemption_no_victims", 1, 7, None, None, True),
        ("scheduler", "preemption_not_helpful", 6, 7, None, None, True),
    ]
    owners = [r.owner for r in parse_scheduler_message(msg)]
    assert owners == [
        "infrastructure",
        "platform",
        "platform",
        "platform",
        "platform",
        "platform",
    ]


def test_v1_26_double_period_and_dra_note() -> None:
    msg = (
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had "
        "untolerated taint {app: webapp}. no new claims to deallocate, preemption: 0/2 nodes are available: "
        "2 Preemption is not helpful for scheduling.."
    )
    assert _rows(msg) == [
        ("scheduler", "node_selector_mismatch", 1, 2, None, None, False),
        ("scheduler", "untolerated_taint", 1, 2, None, "app=webapp", False),
        ("scheduler", "preemption_not_helpful", 2, 2, None, None, True),
    ]


@pytest.mark.parametrize(
    ("fragment", "code"),
    [
        ("node(s) were unschedulable", "node_unschedulable"),
        ("node(s) had volume node affinity conflict", "volume_binding"),
        ("node(s) didn't find available persistent volumes to bind", "volume_binding"),
        ("node(s) exceed max volume count", "volume_binding"),
        ("Too many pods", "too_many_pods"),
        ("node(s) didn't have free ports for the requested pod ports", "port_conflict"),
        ("node(s) didn't match pod affinity rules", "pod_affinity"),
        ("node(s) didn't match pod anti-affinity rules", "pod_affinity"),
        ("node(s) didn't satisfy existing pods anti-affinity rules", "pod_affinity"),
        ("node(s) didn't match pod topology spread constraints", "topology_spread"),
        ("node(s) didn't match pod topology spread constraints (missing required label)", "topology_spread"),
        ("node(s) didn't match the requested node name", "node_name_mismatch"),
        ("node(s) didn't match Pod's node affinity", "node_affinity_mismatch"),
        ("node(s) didn't match scheduler-enforced node affinity", "node_affinity_mismatch"),
        ("node(s) had untolerated taint {node.kubernetes.io/not-ready: }", "node_not_ready"),
        ("node(s) had untolerated taint {node.kubernetes.io/unreachable: }", "node_not_ready"),
        (
            "node(s) had taint {node.kubernetes.io/unschedulable: }, that the pod didn't tolerate",
            "node_unschedulable",
        ),
        ("node(s) had untolerated taint {node.kubernetes.io/disk-pressure: }", "node_pressure"),
        ("node(s) had taints that the pod didn't tolerate", "untolerated_taint"),
        ("node(s) were not ready", "node_not_ready"),
        ("node(s) had memory pressure", "node_pressure"),
        ("cannot allocate all claims", "device_claim_unallocatable"),
        ("Insufficient cpu", "insufficient_resource"),
        ("Insufficient huawei.com/Ascend910", "insufficient_resource"),
        ("node(s) were frobnicated by a custom plugin", "unknown"),
    ],
)
def test_each_plugin_wording(fragment: str, code: str) -> None:
    (reason,) = parse_scheduler_message(f"0/4 nodes are available: 4 {fragment}.")
    assert (reason.code, reason.nodes, reason.total_nodes, reason.message) == (code, 4, 4, f"4 {fragment}")


def test_not_ready_taint_keeps_key_and_owner() -> None:
    (reason,) = parse_scheduler_message(
        "0/1 nodes are available: 1 node(s) had untolerated taint "
        "{node.kubernetes.io/not-ready: }. preemption: "
    )
    assert (reason.code, reason.taint, reason.owner) == (
        "node_not_ready",
        "node.kubernetes.io/not-ready",
        "infrastructure",
    )


def test_prefilter_rejection_without_counts() -> None:
    msg = (
        '0/3 nodes are available: persistentvolumeclaim "rc-missing" not found. preemption: 0/3 nodes are '
        "available: 3 No preemption victims found for incoming pod.."
    )
    assert _rows(msg) == [
        ("scheduler", "volume_binding", None, 3, None, None, False),
        ("scheduler", "preemption_no_victims", 3, 3, None, None, True),
    ]


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("pod has unbound immediate PersistentVolumeClaims", "volume_binding"),
        (
            (
                "0/1 nodes are available: 1 pod has unbound immediate PersistentVolumeClaims. preemption: 0/1 nodes "
                "are available: 1 Preemption is not helpful for scheduling."
            ),
            "volume_binding",
        ),
        ("no nodes available to schedule pods", "no_nodes"),
        ("0/0 nodes are available: ", "no_nodes"),
    ],
)
def test_messages_without_the_usual_head(message: str, code: str | None) -> None:
    reasons = parse_scheduler_message(message)
    assert [r.code for r in reasons][:1] == ([code] if code else [])


def test_advertised_resources_tell_missing_from_full() -> None:
    msg = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu, 3 Insufficient cpu."
    codes = [(r.code, r.resource) for r in parse_scheduler_message(msg, advertised={"cpu", "memory"})]
    assert codes == [("resource_not_advertised", "nvidia.com/gpu"), ("insufficient_resource", "cpu")]


def test_wrapped_message_is_joined() -> None:
    msg = "0/3 nodes are available: 2 Insufficient\n   nvidia.com/gpu, 1 node(s) were\n unschedulable."
    assert _rows(msg) == [
        ("scheduler", "insufficient_resource", 2, 3, "nvidia.com/gpu", None, False),
        ("scheduler", "node_unschedulable", 1, 3, None, None, False),
    ]


def test_volcano_failed_scheduling_wording() -> None:
    msg = (
        "all nodes are unavailable: 1 plugin InterPodAffinity predicates failed node(s) didn't match pod "
        "affinity/anti-affinity, node(s) didn't match pod affinity rules, 2 node(s) resource fit failed."
    )
    assert _rows(msg, source="volcano") == [
        ("volcano", "pod_affinity", 1, None, None, None, False),
        ("volcano", "insufficient_resource", 2, None, None, None, False),
    ]
    assert _rows("0/3 nodes are unavailable: 3 Insufficient nvidia.com/gpu.", source="volcano") == [
        ("volcano", "insufficient_resource", 3, 3, "nvidia.com/gpu", None, False)
    ]
    assert _rows(
        "0/2060 nodes are unavailable: 2053 task node selector does not match node labels, 7 "
        "Insufficient cpu",
        source="volcano",
    ) == [
        ("volcano", "node_selector_mismatch", 2053, 2060, None, None, False),
        ("volcano", "insufficient_resource", 7, 2060, "cpu", None, False),
    ]


def test_hami_filtering_failed_with_several_nodes_and_reasons() -> None:
    reasons = parse_hami_message(
        "3 nodes CardInsufficientMemory(node-a,node-b,node-c) 2 nodes CardTimeSlicingExhausted(node-d,node-e)"
    )
    assert [(r.code, r.nodes, r.node_names) for r in reasons] == [
        ("device_memory_insufficient", 3, ("node-a", "node-b", "node-c")),
        ("device_count_insufficient", 2, ("node-d", "node-e")),
    ]


@pytest.mark.parametrize(
    ("name", "code", "owner"),
    [
        ("CardInsufficientCore", "device_cores_insufficient", "infrastructure"),
        ("CardTypeMismatch", "device_type_mismatch", "platform"),
        ("CardUuidMismatch", "device_type_mismatch", "platform"),
        ("NumaNotFit", "device_numa_unfit", "infrastructure"),
        ("NodeInsufficientDevice", "device_count_insufficient", "infrastructure"),
        ("ResourceQuotaNotFit", "quota_exceeded", "platform"),
        ("CardSomethingNew", "unknown", "platform"),
    ],
)
def test_hami_reason_names(name: str, code: str, owner: str) -> None:
    (reason,) = parse_hami_message(f"1 nodes {name}(gpu-node-7)")
    assert (reason.source, reason.code, reason.owner, reason.node_names) == (
        "hami",
        code,
        owner,
        ("gpu-node-7",),
    )


def test_hami_no_available_node_and_card_tally() -> None:
    (none,) = parse_hami_message("no available node, 3 nodes do not meet")
    assert (none.code, none.nodes) == ("device_unfit", 3)
    (tally,) = parse_hami_message("1/1 CardInsufficientMemory")
    assert (tally.code, dict(tally.detail)) == ("device_memory_insufficient", {"cards": "1/1"})
    assert parse_hami_message("nothing HAMi here") == []


def test_blank_message_gives_nothing() -> None:
    assert parse_scheduler_message("  \n ") == []


def test_volcano_gang_verdict_in_a_pod_condition_is_not_a_node_reason() -> None:
    msg = "1/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable"
    (reason,) = parse_scheduler_message(msg, source="volcano")
    assert (reason.source, reason.code, reason.quantities["min_available"]) == (
        "volcano",
        "gang_unschedulable",
        "2",
    )


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_non_blank_message_gives_at_least_one_reason(message: str) -> None:
    reasons = parse_scheduler_message(message)
    assert bool(reasons) == bool(message.split())


def test_old_predicate_names_get_the_code_of_their_modern_wording() -> None:
    """Every Kubernetes 1.2-1.9 predicate name is classified as the 1.9+ message of the same predicate."""
    from pytest_hetero.pending.scheduler import PREDICATE_WORDING

    for name, wording in PREDICATE_WORDING.items():
        (old,) = parse_scheduler_message(f"No nodes are available that match all of the following predicates:: {name} (2).")
        (new,) = parse_scheduler_message(f"0/3 nodes are available: 2 {wording}.")
        assert (old.code, old.nodes, old.owner, old.detail["predicate"]) == (new.code, 2, new.owner, name), name
        assert old.code != "unknown", name


def test_old_predicate_message_of_the_issue_keeps_every_reason() -> None:
    text = ("No nodes are available that match all of the following predicates:: Insufficient nvidia.com/gpu (2), "
            "MatchNodeSelector (1), PodToleratesNodeTaints (1), NoDiskConflict (3).")
    modern = ("0/7 nodes are available: 2 Insufficient nvidia.com/gpu, 1 node(s) didn't match node selector, "
              "1 node(s) had taints that the pod didn't tolerate, 3 node(s) had no available disk.")
    old, new = parse_scheduler_message(text), parse_scheduler_message(modern)
    assert [(r.code, r.resource, r.nodes) for r in old] == [(r.code, r.resource, r.nodes) for r in new] == [
        ("insufficient_resource", "nvidia.com/gpu", 2), ("node_selector_mismatch", None, 1),
        ("untolerated_taint", None, 1), ("volume_binding", None, 3)]
    assert [r.total_nodes for r in old] == [None] * 4  # the old form printed no total


def test_old_forms_per_node_summary_and_single_reason() -> None:
    per_node = ("pod (nginx) failed to fit in any node\nfit failure on node (n1): PodExceedsFreeCPU\n"
                "fit failure on node (n2): MatchNodeSelector\nfit failure on node (n3): PodExceedsFreeCPU")
    assert [(r.code, r.resource, r.nodes, r.node_names) for r in parse_scheduler_message(per_node)] == [
        ("insufficient_resource", "cpu", 2, ("n1", "n3")), ("node_selector_mismatch", None, 1, ("n2",))]
    summary = "fit failure summary on nodes : Insufficient pods (1), PodToleratesNodeNoExecuteTaints (2)"
    assert [(r.code, r.nodes) for r in parse_scheduler_message(summary)] == [("too_many_pods", 1),
                                                                          ("untolerated_taint", 2)]
    assert [r.code for r in parse_scheduler_message("Failed for reason PodFitsPorts and possibly others")] == [
        "port_conflict"]
    assert [r.code for r in parse_scheduler_message("pod (x) failed to fit in any node")] == [
        "unschedulable_unexplained"]
    (unknown,) = parse_scheduler_message("No nodes are available that match all of the predicates: SomeNewPredicate (4).")
    assert (unknown.code, unknown.nodes, unknown.message) == ("unknown", 4, "SomeNewPredicate (4)")
