"""Volcano PodGroup conditions, queue refusals and describe text."""

from __future__ import annotations

import pytest

from pytest_hetero.errors import ParseError
from pytest_hetero.pending.volcano import (
    classify_queue_text,
    parse_gang_message,
    parse_podgroup,
    parse_podgroup_text,
    parse_volcano_message,
)


def test_podgroup_object_old_wording() -> None:
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "job-1"},
        "spec": {"minMember": 1, "queue": "test"},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "Unschedulable",
                    "status": "True",
                    "reason": "NotEnoughResources",
                    "message": "1/0 tasks in gang unschedulable: pod group is not ready, 1 minAvailable.",
                },
                {"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled"},
            ],
        },
    }
    (reason,) = parse_podgroup(pg)
    assert (reason.code, dict(reason.quantities)) == (
        "gang_unschedulable",
        {"unschedulable_tasks": "1", "tasks": "0", "min_available": "1"},
    )
    assert dict(reason.detail) == {
        "phase": "Pending",
        "podgroup": "job-1",
        "queue": "test",
        "condition_reason": "NotEnoughResources",
    }


def test_releasing_and_succeeded_stats() -> None:
    (reason,) = parse_gang_message(
        "3/4 tasks in gang unschedulable: pod group is not ready, 1 Succeeded,\n"
        "      3 Releasing, 4 minAvailable"
    )
    assert dict(reason.quantities) == {
        "unschedulable_tasks": "3",
        "tasks": "4",
        "succeeded": "1",
        "releasing": "3",
        "min_available": "4",
    }


def test_condition_without_message_still_names_the_gang() -> None:
    (reason,) = parse_podgroup(
        {"status": {"conditions": [{"type": "Unschedulable", "reason": "NotEnoughResources"}]}}
    )
    assert (reason.code, reason.message) == ("gang_unschedulable", "NotEnoughResources")
    assert parse_podgroup({"status": {"conditions": [{"type": "Unschedulable", "status": "False"}]}}) == []


def test_queue_refusals() -> None:
    (quota,) = classify_queue_text("queue resource quota insufficient")
    assert (quota.source, quota.code, quota.owner, quota.resource) == (
        "volcano",
        "queue_quota_insufficient",
        "platform",
        None,
    )
    named = classify_queue_text(
        "queue resource quota insufficient: insufficient cpu, insufficient nvidia.com/gpu"
    )
    assert [r.resource for r in named] == ["cpu", "nvidia.com/gpu"]
    (closed,) = classify_queue_text("queue gpu-q is closed")
    assert (closed.code, dict(closed.detail)) == ("queue_inactive", {"queue": "gpu-q"})
    (over,) = classify_queue_text("queue research is overused")
    assert (over.code, dict(over.detail)) == ("queue_quota_insufficient", {"queue": "research"})
    (missing,) = classify_queue_text('queue "nope" not found')
    assert (missing.code, dict(missing.detail)) == ("queue_not_found", {"queue": "nope"})


def test_volcano_message_dispatch() -> None:
    assert [r.code for r in parse_volcano_message("0/3 nodes are unavailable: 3 Insufficient cpu.")] == [
        "insufficient_resource"
    ]
    assert parse_volcano_message("nothing here") == []


def test_describe_text_with_unknown_message() -> None:
    (reason,) = parse_podgroup_text(
        "Message: the moon is in the wrong phase\nReason:  NotEnoughPods\nType:    Unschedulable\n"
    )
    assert (reason.code, reason.detail["condition_reason"]) == ("gang_unschedulable", "NotEnoughPods")
    assert parse_podgroup_text("Reason: x") == []


def test_bad_shapes() -> None:
    with pytest.raises(ParseError):
        parse_podgroup({"status": ["x"]})
    with pytest.raises(ParseError):
        parse_podgroup({"status": {"conditions": {"type": "Unschedulable"}}})


def test_uninqueueable_condition_is_a_queue_reason() -> None:
    pg = {
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "Uninqueueable", "status": "True", "reason": "NotInqueueable", "message": ""}
            ],
        }
    }
    (reason,) = parse_podgroup(pg)
    assert (reason.code, reason.owner, dict(reason.detail)) == (
        "queue_quota_insufficient",
        "platform",
        {"phase": "Pending", "condition_reason": "NotInqueueable"},
    )


def test_gang_message_of_volcano_before_v0_3_says_job_is_not_ready() -> None:
    """volcano-sh/volcano#520 renamed ``job is not ready`` to ``pod group is not ready``; both are the gang verdict
    (the old wording was read as a node NotReady plus two unknown fragments)."""
    from pytest_hetero.pending.scheduler import parse_scheduler_message

    (r,) = parse_scheduler_message("10/6 tasks in gang unschedulable: job is not ready, 10 minAvailable, 6 Pending.",
                                   source="volcano")
    assert (r.code, dict(r.quantities)) == ("gang_unschedulable", {"unschedulable_tasks": "10", "tasks": "6",
                                                                   "min_available": "10", "pending": "6"})
