"""The Kubernetes parsers read objects shaped as the apiserver serves them at their emptiest.

Each object is what ``GET``/``LIST`` answers (Go's ``encoding/json`` of the API types, the raw body the
backend reads with ``_preload_content=False``) in a state the run meets first: a pod just created (status
holds only ``phase``/``qosClass``), a container still waiting (``lastState: {}``, ``imageID: ""``), a node
without taints, a scheduler event recorded through ``events.k8s.io/v1`` and read through ``core/v1``
(``source: {}``, the times null, ``count`` omitted), an EndpointSlice of a Service with no ready pod
(``endpoints``/``ports`` null) and a Kueue Workload created but not yet seen by Kueue (no ``status``).
The fields the parsers subscript (``Required`` in :mod:`pytest_hetero.backends.kubernetes.manifests`) are
all present in these shapes; the parsers read them without a KeyError and fill the absent optional ones.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_hetero.backends.kubernetes.objects import parse_event, parse_node, parse_pod, parse_slice
from pytest_hetero.backends.kubernetes.queues import parse_workload

JUST_CREATED_POD = """{"kind": "Pod", "apiVersion": "v1",
 "metadata": {"name": "p0", "namespace": "hetero", "uid": "u", "resourceVersion": "101",
              "creationTimestamp": "2026-12-04T02:00:00Z"},
 "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "resources": {},
                          "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                          "imagePullPolicy": "IfNotPresent"}],
          "restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
          "securityContext": {}, "schedulerName": "default-scheduler", "priority": 0,
          "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"},
 "status": {"phase": "Pending", "qosClass": "BestEffort"}}"""

WAITING_STATUS = """{"phase": "Pending", "hostIP": "10.0.0.2", "startTime": "2026-12-04T02:00:01Z",
 "qosClass": "BestEffort",
 "conditions": [{"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                 "lastTransitionTime": "2026-12-04T02:00:01Z"}],
 "containerStatuses": [{"name": "main", "state": {"waiting": {"reason": "ContainerCreating"}}, "lastState": {},
                        "ready": false, "restartCount": 0, "image": "busybox:1.36", "imageID": "",
                        "started": false}]}"""

NODE_WITHOUT_TAINTS = """{"metadata": {"name": "kwok-node-0", "uid": "n", "resourceVersion": "7",
  "creationTimestamp": "2026-12-04T01:00:00Z", "labels": {"type": "kwok"}},
 "spec": {},
 "status": {"capacity": {"cpu": "32"}, "allocatable": {"cpu": "32"},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-12-04T02:00:00Z",
                            "lastTransitionTime": "2026-12-04T01:00:00Z", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}}, "nodeInfo": {"machineID": "",
            "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "",
            "kubeletVersion": "fake", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}}}"""

SCHEDULER_EVENT = """{"metadata": {"name": "p0.17e0", "namespace": "hetero", "uid": "e", "resourceVersion": "120",
  "creationTimestamp": "2026-12-04T02:00:00Z"},
 "involvedObject": {"kind": "Pod", "namespace": "hetero", "name": "p0", "uid": "u", "apiVersion": "v1",
                    "resourceVersion": "101"},
 "reason": "FailedScheduling",
 "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
 "source": {}, "firstTimestamp": null, "lastTimestamp": null, "type": "Warning",
 "eventTime": "2026-12-04T02:00:00.123456Z", "action": "Scheduling", "reportingComponent": "default-scheduler",
 "reportingInstance": "default-scheduler-control-plane"}"""

EMPTY_SLICE = """{"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
 "metadata": {"name": "svc-abcde", "namespace": "hetero", "generateName": "svc-",
              "labels": {"kubernetes.io/service-name": "svc"}},
 "addressType": "IPv4", "endpoints": null, "ports": null}"""

NEW_WORKLOAD = """{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
 "metadata": {"name": "job-p0-1a2b3", "namespace": "hetero", "creationTimestamp": "2026-12-04T02:00:00Z"},
 "spec": {"active": true, "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
          "priority": 0, "priorityClassSource": "", "queueName": "hetero-queue"}}"""


def _load(text: str) -> Any:
    return json.loads(text)


def test_a_just_created_pod_reads_with_no_container_status() -> None:
    """Status with only phase/qosClass (no conditions, no containerStatuses, no podIP)."""
    pod = parse_pod(_load(JUST_CREATED_POD))
    assert (pod.name, pod.phase, pod.ip, pod.node_name) == ("p0", "Pending", None, "")
    assert [c.name for c in pod.containers] == ["main"] and pod.containers[0].requests == {}
    assert pod.conditions == () and pod.container_statuses == ()


def test_a_waiting_container_reads_with_empty_last_state_and_image_id() -> None:
    """``lastState: {}`` and ``imageID: ""`` as served while the container is created."""
    raw = _load(JUST_CREATED_POD)
    raw["status"] = _load(WAITING_STATUS)
    (status,) = parse_pod(raw).container_statuses
    assert (status.name, status.image_id, status.restart_count, status.running) == ("main", "", 0, False)
    assert status.last_ended is None


def test_a_node_without_taints_reads_with_none() -> None:
    """A node whose ``spec`` is ``{}`` (a KWOK node: no taints, no podCIDR)."""
    node = parse_node(_load(NODE_WITHOUT_TAINTS))
    assert (node.name, node.taints, node.unschedulable) == ("kwok-node-0", [], False)
    assert node.capacity == {"cpu": "32"} and [c.type for c in node.conditions] == ["Ready"]


def test_an_events_api_event_read_through_core_v1() -> None:
    """The scheduler's event: ``source: {}``, the core/v1 times null, ``count`` omitted."""
    event = parse_event(_load(SCHEDULER_EVENT))
    assert (event.type, event.reason, event.count, event.source_host) == ("Warning", "FailedScheduling", None, None)


def test_an_endpoint_slice_without_endpoints_or_ports() -> None:
    """``endpoints`` and ``ports`` are served null (not omitted) on a slice of a Service with no ready pod."""
    eps = parse_slice(_load(EMPTY_SLICE))
    assert (eps.endpoints, eps.ports) == ([], [])


def test_a_workload_kueue_has_not_seen_reads_without_status() -> None:
    """A Workload as its job controller created it: no ``status`` yet, so no condition and no admission."""
    seen = parse_workload(_load(NEW_WORKLOAD))
    assert (seen.name, seen.queue_name, seen.cluster_queue, seen.conditions, seen.pod_sets) == (
        "job-p0-1a2b3", "hetero-queue", None, (), ())
    assert not seen.holds("Admitted")
