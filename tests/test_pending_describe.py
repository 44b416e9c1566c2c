"""kubectl describe pod / get events captures and Pod/Event objects, including startup failures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from pytest_hetero.pending import Reason
from pytest_hetero.pending.describe import (
    parse_describe,
    parse_event_object,
    parse_events_table,
    parse_pod,
    unwrap,
)
from pytest_hetero.pending.startup import classify_startup

PENDING_1_29 = """\
Name:             cuda-vectoradd
Namespace:        default
Status:           Pending
Containers:
  cuda-vectoradd:
    Image:      nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
    Limits:
      nvidia.com/gpu:  1
Conditions:
  Type           Status
  PodScheduled   False
Events:
  Type     Reason            Age                 From               Message
  ----     ------            ----                ----               -------
  Warning  FailedScheduling  2m (x3 over 12m)    default-scheduler  0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 2 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.
"""

IMAGE_PULL = """\
Containers:
  train:
    Image:          registry.example.com/ml/train:v9
    State:          Waiting
      Reason:       ImagePullBackOff
    Ready:          False
Events:
  Type     Reason     Age                From               Message
  ----     ------     ----               ----               -------
  Normal   Scheduled  60s                default-scheduler  Successfully assigned ml/train to gpu-node-1
  Normal   Pulling    20s (x3 over 60s)  kubelet            Pulling image "registry.example.com/ml/train:v9"
  Warning  Failed     20s (x3 over 60s)  kubelet            Failed to pull image "registry.example.com/ml/train:v9": rpc error: code = NotFound desc = failed to pull and unpack image "registry.example.com/ml/train:v9": failed to resolve reference "registry.example.com/ml/train:v9": registry.example.com/ml/train:v9: not found
  Warning  Failed     20s (x3 over 60s)  kubelet            Error: ErrImagePull
  Warning  BackOff    5s (x4 over 59s)   kubelet            Back-off pulling image "registry.example.com/ml/train:v9"
"""

OOM = """\
Containers:
  llm:
    State:          Waiting
      Reason:       CrashLoopBackOff
    Last State:     Terminated
      Reason:       OOMKilled
      Exit Code:    137
      Started:      Mon, 01 Jan 2024 10:00:00 +0000
      Finished:     Mon, 01 Jan 2024 10:00:40 +0000
    Ready:          False
    Restart Count:  4
"""


def _codes(reasons: list[Reason]) -> list[tuple[str, str, str]]:
    return [(r.source, r.code, r.owner) for r in reasons]


def test_pending_pod_describe_1_29() -> None:
    reasons = parse_describe(PENDING_1_29)
    assert [(r.code, r.nodes, r.total_nodes, r.resource, r.taint, r.preemption) for r in reasons] == [
        ("untolerated_taint", 1, 3, None, "node-role.kubernetes.io/control-plane", False),
        ("insufficient_resource", 2, 3, "nvidia.com/gpu", None, False),
        ("preemption_not_helpful", 1, 3, None, None, True),
        ("preemption_no_victims", 2, 3, None, None, True),
    ]


def test_image_pull_not_found_is_the_image_owners() -> None:
    reasons = parse_describe(IMAGE_PULL)
    assert _codes(reasons) == [("kubelet", "image_pull_failed", "image")] * 4
    assert [r.cause for r in reasons] == ["image_pull_failed", "image_not_found", "image_pull_failed", "image_pull_failed"]
    assert reasons[0].detail["container"] == "train"
    assert reasons[0].message == "ImagePullBackOff"
    assert reasons[1].message.startswith('Failed to pull image "registry.example.com/ml/train:v9": rpc error')


@pytest.mark.parametrize(
    ("message", "cause", "owner"),
    [
        (
            'Failed to pull image "r.local/x:1": dial tcp: lookup r.local on 10.96.0.10:53: no such host',
            "registry_unreachable",
            "infrastructure",
        ),
        (
            'Failed to pull image "nvcr.io/nvidia/private:1": failed to authorize: 401 Unauthorized',
            "pull_denied",
            "image",
        ),
        ('Failed to pull image "docker.io/libary/pytorch:2": manifest unknown', "image_not_found", "image"),
    ],
)
def test_image_pull_owner_by_cause(message: str, cause: str, owner: str) -> None:
    """The reader names the cause (the categories Docker's pull errors get); the owner is the failure
    table's: the network is the infrastructure's, registry credentials and tags the image owner's (the
    registry credentials were "platform" here, the image's owner on Docker)."""
    (reason,) = parse_event_object({"type": "Warning", "reason": "Failed", "message": message})
    assert (reason.code, reason.cause, reason.owner) == ("image_pull_failed", cause, owner)


def test_oom_behind_crashloop() -> None:
    crash, oom = parse_describe(OOM)
    assert (crash.code, crash.owner, crash.detail["last_state_reason"]) == (
        "crash_loop",
        "algorithm",
        "OOMKilled",
    )
    assert (oom.code, oom.owner, dict(oom.detail)) == (
        "oom_killed",
        "algorithm",
        {"container": "llm", "exit_code": "137"},
    )


@pytest.mark.parametrize(
    ("reason", "message", "exit_code", "code", "owner"),
    [
        (
            "CreateContainerConfigError",
            'secret "hf-token" not found',
            None,
            "container_config_error",
            "platform",
        ),
        (
            "RunContainerError",
            (
                "failed to start container: Error response from daemon: could not select device "
                'driver "" with capabilities: [[gpu]]'
            ),
            None,
            "device_runtime_error",
            "infrastructure",
        ),
        (
            "CreateContainerError",
            'failed to get sandbox runtime: no runtime for "nvidia" is configured',
            None,
            "device_runtime_error",
            "infrastructure",
        ),
        (
            "StartError",
            'exec: "torchrun": executable file not found in $PATH: unknown',
            "128",
            "container_start_error",
            "image",  # cause command_not_found: the program is not in the image (it was "matrix-author")
        ),
        (
            "ContainerCannotRun",
            "OCI runtime create failed: container_linux.go:380: cgroup error",
            "128",
            "container_start_error",
            "infrastructure",
        ),
        ("Error", "", "1", "container_exit_nonzero", "image"),
        ("Completed", "", "0", None, None),
        ("ContainerCreating", "", None, None, None),
    ],
)
def test_startup_states(
    reason: str, message: str, exit_code: str | None, code: str | None, owner: str | None
) -> None:
    found = classify_startup(reason, message, exit_code=exit_code)
    assert ((found.code, found.owner) if found else (None, None)) == (code, owner)


def test_unwrap_splits_pasted_labels_only() -> None:
    assert unwrap("    Host Port:      <none>          State:          Waiting   ") == [
        "    Host Port:      <none>",
        "State:          Waiting",
    ]
    assert unwrap("    Message:   error running hook #0: x") == ["    Message:   error running hook #0: x"]


def test_event_message_wrapped_onto_next_line() -> None:
    text = (
        "Events:\n  Type     Reason            Age   From               Message\n"
        "  ----     ------            ----  ----               -------\n"
        "  Warning  FailedScheduling  5s    default-scheduler  0/4 nodes are available: 4 Insufficient\n"
        "nvidia.com/gpu.\n"
    )
    (reason,) = parse_describe(text)
    assert (reason.code, reason.nodes, reason.resource) == ("insufficient_resource", 4, "nvidia.com/gpu")


def test_unrecognised_warning_event_is_kept_as_unknown() -> None:
    text = (
        "Events:\n  Type     Reason   Age   From     Message\n  ----     ------   ----  ----     -------\n"
        "  Warning  Weird    5s    kubelet  something odd happened\n"
        "  Normal   Pulled   5s    kubelet  Container image already present\n"
    )
    (reason,) = parse_describe(text)
    assert (reason.source, reason.code, reason.message, dict(reason.detail)) == (
        "kubelet",
        "unknown",
        "something odd happened",
        {"event_reason": "Weird"},
    )


def test_get_events_table_with_namespace_column() -> None:
    text = """\
NAMESPACE   LAST SEEN   TYPE      REASON             OBJECT                 MESSAGE
ml          2m          Warning   FailedScheduling   pod/train-0            0/8 nodes are available: 8 node(s) didn't match Pod's node affinity/selector. preemption: 0/8 nodes are available: 8 Preemption is not helpful for scheduling.
ml          2m          Normal    Scheduled          pod/eval-0             Successfully assigned ml/eval-0 to n1
ml          30s         Warning   FailedCreate       job/bench              Error creating: pods "bench-x" is forbidden: exceeded quota: gpu, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4
volcano     10s         Normal    Unschedulable      podgroup/pg-1          queue resource quota insufficient
"""
    reasons = parse_events_table(text)
    assert [(r.source, r.code, r.nodes) for r in reasons] == [
        ("scheduler", "node_selector_mismatch", 8),
        ("scheduler", "preemption_not_helpful", 8),
        ("admission", "quota_exceeded", None),
    ]


def test_get_events_table_without_namespace() -> None:
    text = (
        "LAST SEEN   TYPE      REASON            OBJECT          MESSAGE\n"
        "16s         Warning   FilteringFailed   pod/hami-big    1 nodes CardInsufficientCore(gpu-a)\n"
    )
    (reason,) = parse_events_table(text)
    assert (reason.source, reason.code, reason.node_names) == (
        "hami",
        "device_cores_insufficient",
        ("gpu-a",),
    )


def test_event_objects_core_and_events_k8s_io() -> None:
    core = {
        "kind": "Event",
        "type": "Warning",
        "reason": "FailedScheduling",
        "source": {"component": "volcano"},
        "message": "0/2 nodes are unavailable: 2 Insufficient nvidia.com/gpu.",
    }
    assert [(r.source, r.code, r.nodes) for r in parse_event_object(core)] == [
        ("volcano", "insufficient_resource", 2)
    ]
    new = {
        "type": "Warning",
        "reason": "OOMKilling",
        "reportingController": "kernel-monitor",
        "note": "Memory cgroup out of memory: Killed process 4242 (python)",
    }
    assert [r.code for r in parse_event_object(new)] == ["oom_killed"]
    assert parse_event_object({"type": "Normal", "reason": "Scheduled", "message": "ok"}) == []


def _pod(status: Mapping[str, Any], spec: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": spec or {},
        "status": status,
    }


def test_pod_scheduled_false_refined_to_affinity() -> None:
    affinity: dict[str, Any] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
    }
    cond = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
    }
    (reason,) = parse_pod(_pod({"phase": "Pending", "conditions": [cond]}, {"affinity": affinity}))
    assert (reason.code, reason.nodes, reason.owner) == ("node_affinity_mismatch", 3, "platform")
    (plain,) = parse_pod(_pod({"phase": "Pending", "conditions": [cond]}, {"nodeSelector": {"gpu": "h100"}}))
    assert plain.code == "node_selector_mismatch"


def test_pod_scheduling_gated_and_kubelet_rejections() -> None:
    gated = _pod(
        {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates",
                }
            ]
        },
        {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]},
    )
    (reason,) = parse_pod(gated)
    assert (reason.code, dict(reason.detail)) == ("scheduling_gated", {"gates": "kueue.x-k8s.io/admission"})
    out_of = _pod(
        {
            "phase": "Failed",
            "reason": "OutOfnvidia.com/gpu",
            "message": "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 1, "
            "used: 8, capacity: 8",
        }
    )
    (reason,) = parse_pod(out_of)
    assert (reason.source, reason.code, reason.resource, dict(reason.quantities)) == (
        "kubelet",
        "insufficient_resource",
        "nvidia.com/gpu",
        {"requested": "1", "used": "8", "capacity": "8"},
    )
    unexpected = _pod(
        {
            "phase": "Failed",
            "reason": "UnexpectedAdmissionError",
            "message": "Allocate failed due to rpc error: code = Unknown desc = no healthy devices",
        }
    )
    assert [r.code for r in parse_pod(unexpected)] == ["device_allocation_failed"]


def test_pod_container_statuses() -> None:
    status = {
        "containerStatuses": [
            {"name": "main", "state": {"terminated": {"reason": "Error", "exitCode": 3, "message": "boom"}}},
            {"name": "side", "state": {"running": {}}},
        ],
        "initContainerStatuses": [
            {
                "name": "fetch",
                "state": {
                    "waiting": {
                        "reason": "CreateContainerConfigError",
                        "message": 'configmap "model-cfg" not found',
                    }
                },
            }
        ],
    }
    reasons = parse_pod(_pod(status))
    assert [(r.code, r.detail["container"]) for r in reasons] == [
        ("container_config_error", "fetch"),
        ("container_exit_nonzero", "main"),
    ]
    assert reasons[1].detail["exit_code"] == "3"


def test_taint_detail_withheld_by_newer_schedulers_and_age_less_rows() -> None:
    text = (
        "Events:\n"
        "  Warning  FailedScheduling  default-scheduler  0/3 nodes are available: \n"
        "  3 node(s) had untolerated taint(s).\n"
    )
    (reason,) = parse_describe(text)
    assert (reason.code, reason.nodes, reason.total_nodes, reason.taint) == ("untolerated_taint", 3, 3, None)


def test_old_kubelet_from_column_with_node_name() -> None:
    text = (
        "Events:\n"
        "  Type     Reason   Age                From                Message\n"
        "  ----     ------   ----               ----                -------\n"
        "  Warning  BackOff  2m (x10 over 5m)   kubelet, gpu-node-3  Back-off restarting failed container\n"
    )
    (reason,) = parse_describe(text)
    # no last state known: the table's crash_loop row, the image's container (it was "algorithm")
    assert (reason.source, reason.code, reason.owner) == ("kubelet", "crash_loop", "image")


def test_pod_json_records_the_image() -> None:
    status = {
        "containerStatuses": [
            {
                "name": "infer",
                "image": "nvcr.io/nim/meta/llama3:1.0",
                "state": {"waiting": {"reason": "ErrImagePull", "message": "401 Unauthorized"}},
            }
        ]
    }
    (reason,) = parse_pod(_pod(status))
    assert (reason.code, reason.cause, reason.owner, dict(reason.detail)) == (
        "image_pull_failed",
        "pull_denied",
        "image",
        {"container": "infer", "image": "nvcr.io/nim/meta/llama3:1.0"},
    )


@pytest.mark.parametrize(
    ("reason", "message", "code", "resource", "quantities"),
    [
        (
            "UnexpectedAdmissionError",
            (
                "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 1, "
                "Available: 0, which is unexpected"
            ),
            "device_allocation_failed",
            "nvidia.com/gpu",
            {"requested": "1", "available": "0"},
        ),
        (
            "UnexpectedAdmissionError",
            "Allocate failed due to rpc error: code = Unknown desc = no healthy Ascend910 devices, which is unexpected",
            "device_allocation_failed",
            None,
            {},
        ),
        ("NodeAffinity", "Pod Predicate NodeAffinity failed", "node_affinity_mismatch", None, {}),
        (
            "Evicted",
            "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 9Gi.",
            "node_pressure",
            "ephemeral-storage",
            {},
        ),
    ],
)
def test_kubelet_rejection_events(
    reason: str, message: str, code: str, resource: str | None, quantities: dict[str, str]
) -> None:
    (found,) = parse_event_object({"type": "Warning", "reason": reason, "message": message})
    assert (found.source, found.code, found.resource, dict(found.quantities), found.owner) == (
        "kubelet",
        code,
        resource,
        quantities,
        "platform" if code == "node_affinity_mismatch" else "infrastructure",
    )


def test_ascend_docker_runtime_failure() -> None:
    found = classify_startup(
        "RunContainerError",
        "failed to create containerd task: OCI runtime create failed: ascend-docker-cli: mount device "
        "/dev/davinci3 failed: no such file or directory: unknown",
    )
    assert found is not None
    assert (found.code, found.owner) == ("device_runtime_error", "infrastructure")


def test_events_as_json_event_list() -> None:
    from pytest_hetero.pending import explain

    doc = {
        "apiVersion": "v1",
        "kind": "EventList",
        "items": [
            {
                "kind": "Event",
                "type": "Warning",
                "reason": "FailedScheduling",
                "source": {"component": "default-scheduler"},
                "message": "0/4 nodes are available: 4 Insufficient nvidia.com/mig-1g.10gb. preemption: 0/4 nodes "
                "are available: 4 No preemption victims found for incoming pod.",
            },
            {
                "kind": "Event",
                "type": "Warning",
                "reason": "FailedCreate",
                "source": {"component": "job-controller"},
                "message": 'Error creating: pods "j-1" is forbidden: User "system:serviceaccount:ml:runner" '
                'cannot create resource "pods" in API group "" in the namespace "ml"',
            },
        ],
    }
    import json

    got = explain(json.dumps(doc))
    assert [(r.source, r.code, r.resource, r.nodes) for r in got] == [
        ("scheduler", "insufficient_resource", "nvidia.com/mig-1g.10gb", 4),
        ("scheduler", "preemption_no_victims", None, 4),
        ("apiserver", "forbidden_rbac", "pods", None),
    ]


FULL_VOLCANO_1_30 = """\
Name:             mpi-worker-1
Namespace:        ml
Priority:         0
Service Account:  default
Node:             <none>
Labels:           volcano.sh/job-name=mpi
Annotations:      scheduling.k8s.io/group-name: mpi-pg
                  hami.io/vgpu-devices-to-allocate: ;
Status:           Pending
IP:
IPs:              <none>
Controlled By:    Job/mpi
Init Containers:
  wait-for-master:
    Image:      busybox:1.36
    State:      Waiting
      Reason:   PodInitializing
    Ready:      False
Containers:
  worker:
    Image:      nvcr.io/nvidia/pytorch:24.05-py3
    Port:       <none>
    Host Port:  <none>
    Limits:
      nvidia.com/gpu:     1
      nvidia.com/gpumem:  20000
    State:      Waiting
      Reason:   ContainerCreating
    Environment:  <none>
    Mounts:
      /var/run/secrets/kubernetes.io/serviceaccount from kube-api-access-x (ro)
Conditions:
  Type           Status
  PodScheduled   False
Volumes:
  kube-api-access-x:
    Type:                    Projected (a volume that contains injected data from multiple sources)
QoS Class:                   BestEffort
Node-Selectors:              nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3
Tolerations:                 node.kubernetes.io/not-ready:NoExecute op=Exists for 300s
                             nvidia.com/gpu:NoSchedule op=Exists
Events:
  Type     Reason            Age                 From     Message
  ----     ------            ----                ----     -------
  Warning  FailedScheduling  12s (x4 over 2m)    volcano  0/3 nodes are unavailable: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 2 Insufficient nvidia.com/gpu.
  Warning  Unschedulable     12s (x20 over 2m)   volcano  1/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable; Pending: 2 Unschedulable
"""


def test_full_volcano_describe_has_no_spurious_reasons() -> None:
    reasons = parse_describe(FULL_VOLCANO_1_30)
    assert [(r.source, r.code, r.nodes, r.total_nodes, r.resource) for r in reasons] == [
        ("volcano", "untolerated_taint", 1, 3, None),
        ("volcano", "insufficient_resource", 2, 3, "nvidia.com/gpu"),
        ("volcano", "gang_unschedulable", None, None, None),
    ]
    assert reasons[2].quantities["pending_unschedulable"] == "2"


def test_get_events_wide_cuts_the_message_at_its_column() -> None:
    widths = (12, 10, 18, 13, 12, 20, 70, 13, 8, 0)
    rows = [
        ("LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE", "FIRST SEEN", "COUNT", "NAME"),
        ("3m", "Warning", "FailedScheduling", "pod/train-0", "", "default-scheduler",
         "0/2 nodes are available: 2 Insufficient huawei.com/Ascend910.", "10m", "7", "train-0.17a"),
        ("3m", "Warning", "Weird", "pod/train-0", "", "kubelet", "two  spaces", "10m", "1", "train-0.17b"),
    ]  # fmt: skip
    text = "\n".join("".join(f"{cell:<{w}}" for cell, w in zip(row, widths, strict=True)) for row in rows)
    first, second = parse_events_table(text)
    assert (first.code, first.nodes, first.resource) == ("insufficient_resource", 2, "huawei.com/Ascend910")
    assert (second.source, second.code, second.message) == ("kubelet", "unknown", "two  spaces")


def test_kubernetes_1_2_to_1_9_describe_event_rows() -> None:
    """Old ``FirstSeen LastSeen Count From SubObjectPath Type Reason Message`` rows: tabs or re-flowed spaces,
    braced reporters with a node, a SubObjectPath, and the 1.2-1.3 rows without a Type column."""
    from pytest_hetero.pending.events import classify_row, parse_event_rows

    lines = [
        "  FirstSeen\tLastSeen\tCount\tFrom\t\t\tSubObjectPath\t\tType\t\tReason\t\tMessage",
        "  ---------\t--------\t-----\t----\t\t\t-------------\t\t--------\t------\t\t-------",
        "  3m\t\t3m\t\t1\t{kubelet node-1}\tspec.containers{cuda}\tWarning\t\tBackOff\t\tBack-off restarting failed "
        "docker container",
        "  5m   1m   12   {default-scheduler }   Warning   FailedScheduling   No nodes are available that match all "
        "of the following predicates:: Insufficient alpha.kubernetes.io/nvidia-gpu (3).",
        "  1h\t\t1h\t\t1\t{default-scheduler }\t\t\tScheduled\tSuccessfully assigned x to node-1",
        "  2d\t\t1d\t\t4\tkubelet, node-2\t\t\tWarning\t\tFailedScheduling\tpod (x) failed to fit in any node",
    ]
    rows = parse_event_rows(lines)
    assert [(r.type, r.reason, r.age, r.count, r.over, r.source, r.lines) for r in rows] == [
        ("Warning", "BackOff", "3m", 1, "3m", "kubelet, node-1", [2]),
        ("Warning", "FailedScheduling", "1m", 12, "5m", "default-scheduler", [3]),
        ("Normal", "Scheduled", "1h", 1, "1h", "default-scheduler", [4]),
        ("Warning", "FailedScheduling", "1d", 4, "2d", "kubelet, node-2", [5]),
    ]
    assert [[(r.code, r.resource) for r in classify_row(row)] for row in rows] == [
        [("crash_loop", None)], [("insufficient_resource", "alpha.kubernetes.io/nvidia-gpu")], [],
        [("unschedulable_unexplained", None)]]
