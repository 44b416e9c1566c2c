"""The five real recorded scheduling/startup captures: exactly the facts FACTS.md lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hetero.pending import explain

REAL = Path(__file__).resolve().parents[2] / "shared/fixtures/real"

pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason=f"real fixtures not present at {REAL}")


def _read(name: str) -> str:
    return (REAL / name).read_text(encoding="utf-8")


def test_hami_card_insufficient_memory_event() -> None:
    reasons = explain(_read("event-hami-failedscheduling-cardinsufficientmemory.txt"))
    assert [(r.source, r.code, r.nodes, r.total_nodes, r.preemption) for r in reasons] == [
        ("hami", "device_unfit", 1, 1, False),
        ("scheduler", "preemption_no_victims", 1, 1, True),
        ("hami", "device_memory_insufficient", 1, None, False),
    ]
    memory = reasons[2]
    assert memory.node_names == ("node-a1",)
    assert memory.owner == "infrastructure"
    assert memory.category == "device"
    assert memory.message == "1 nodes CardInsufficientMemory(node-a1)"
    assert reasons[0].message == "1 NodeUnfitPod"
    assert reasons[1].message == "1 No preemption victims found for incoming pod"


def test_kueue_workload_pending_on_hami_vgpu_quota() -> None:
    reasons = explain(_read("kueue-workload-pending-hami-vgpu-quota.yaml"))
    assert [r.to_dict() for r in reasons] == [
        {
            "source": "kueue",
            "code": "queue_quota_insufficient",
            "category": "queue",
            "owner": "platform",
            "cause": None,
            "resource": "nvidia.com/gpu",
            "nodes": None,
            "total_nodes": None,
            "node_names": [],
            "quantities": {"more_needed": "1", "requested": "1"},
            "flavor": "hami-t4",
            "taint": None,
            "preemption": False,
            "detail": {"condition_reason": "Pending", "pod_set": "main"},
            "message": "insufficient unused quota for nvidia.com/gpu in flavor hami-t4, 1 more needed",
        },
        {
            "source": "kueue",
            "code": "queue_quota_insufficient",
            "category": "queue",
            "owner": "platform",
            "cause": None,
            "resource": "nvidia.com/total-gpucores",
            "nodes": None,
            "total_nodes": None,
            "node_names": [],
            "quantities": {"more_needed": "50", "requested": "50"},
            "flavor": "hami-t4",
            "taint": None,
            "preemption": False,
            "detail": {"condition_reason": "Pending", "pod_set": "main"},
            "message": "insufficient unused quota for nvidia.com/total-gpucores in flavor hami-t4, 50 more needed",
        },
    ]


def test_volcano_podgroup_gang_wrapped_message() -> None:
    (reason,) = explain(_read("volcano-podgroup-gang-unschedulable-vgpu.txt"))
    assert (reason.source, reason.code, reason.owner) == ("volcano", "gang_unschedulable", "infrastructure")
    assert reason.message == (
        "1/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable; "
        "Pending: 1 Schedulable, 1 Unschedulable"
    )
    assert dict(reason.quantities) == {
        "unschedulable_tasks": "1",
        "tasks": "2",
        "pending": "2",
        "min_available": "2",
        "pending_schedulable": "1",
        "pending_unschedulable": "1",
    }
    assert dict(reason.detail) == {
        "phase": "Inqueue",
        "condition_reason": "NotEnoughResources",
        "condition_type": "Unschedulable",
    }


def test_resourcequota_denial_inside_a_mixed_capture() -> None:
    (reason,) = explain(_read("quota-exceeded-timeslicing-tenancy-l4.txt"))
    assert (reason.source, reason.code, reason.owner, reason.resource) == (
        "admission",
        "quota_exceeded",
        "platform",
        "nvidia.com/gpu",
    )
    assert dict(reason.quantities) == {"requested": "1", "used": "2", "limited": "2"}
    assert dict(reason.detail) == {
        "quota": "gpu",
        "quota_resource": "requests.nvidia.com/gpu",
        "object_kind": "pods",
        "object_name": "share-a3",
    }


def test_gfd_crashloop_behind_nvidia_container_cli_rpc_timeout() -> None:
    crash, cause = explain(_read("pod-describe-gfd-crashloop-nvidia-container-cli-rpc-timeout.txt"))
    assert (crash.code, crash.owner, crash.message) == ("crash_loop", "infrastructure", "CrashLoopBackOff")
    image = "nvcr.io/nvidia/gpu-feature-discovery:v0.8.0-ubi8"
    assert dict(crash.detail) == {
        "container": "gpu-feature-discovery",
        "last_state_reason": "StartError",
        "image": image,
    }
    assert (cause.source, cause.code, cause.owner) == ("kubelet", "device_runtime_error", "infrastructure")
    assert dict(cause.detail) == {
        "container": "gpu-feature-discovery",
        "state_reason": "StartError",
        "image": image,
    }
    assert cause.message == (
        "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create "
        "failed: unable to start container process: error during container init: error running hook #0: error "
        "running hook: exit status 1, stdout: , stderr: nvidia-container-cli.real: initialization error: driver "
        "rpc error: timed out: unknown"
    )


def test_non_scheduling_captures_are_not_misread() -> None:
    for name in (
        "node-describe-gpu-7-of-8-allocatable.txt",
        "nvidia-smi-table-h100-8gpu.txt",
        "npu-smi-info-910b3-8npu-healthy.txt",
        "dmesg-xid-119-gsp-timeout-h100.txt",
        "node-hami-register-annotation-rtxpro6000.txt",
    ):
        assert [r.code for r in explain(_read(name))] == ["unknown"], name
