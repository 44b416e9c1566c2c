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

import pytest

from pytest_hetero.backends.kubernetes.objects import (
    parse_event,
    parse_metadata,
    parse_node,
    parse_pod,
    parse_slice,
    parse_status,
)
from pytest_hetero.backends.kubernetes.queues import parse_queue, parse_workload

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


EXEC_EXIT_STATUS = """{"metadata": {}, "status": "Failure",
 "message": "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit status 3",
 "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}"""

NOT_FOUND_BODY = """{"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
 "message": "pods \\"p0\\" not found", "reason": "NotFound", "details": {"name": "p0", "kind": "pods"}, "code": 404}"""

NEW_LOCAL_QUEUE = """{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
 "metadata": {"name": "hetero-queue", "namespace": "hetero"}, "spec": {"clusterQueue": "cq"},
 "status": {"flavorUsage": [{"name": "default", "resources": [{"name": "cpu", "total": "0"}]}],
            "admittedWorkloads": 0, "reservingWorkloads": 0, "pendingWorkloads": 0}}"""

OWNED_POD_META = """{"name": "job-0-x", "namespace": "hetero", "generateName": "job-0-",
 "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": "j-1", "controller": true,
                      "blockOwnerDeletion": true}],
 "finalizers": ["batch.kubernetes.io/job-tracking"]}"""


def test_a_status_reads_an_exec_exit_and_a_not_found_kind() -> None:
    """An exec error channel's Status gives its ExitCode cause; a 404 body its details.kind; a body that is not a
    JSON object reads as no Status (the callers fall back on the raw text)."""
    ran = parse_status(EXEC_EXIT_STATUS)
    assert ran is not None and (ran.status, ran.causes, ran.kind) == ("Failure", (("ExitCode", "3"),), None)
    gone = parse_status(NOT_FOUND_BODY.encode())
    assert gone is not None and (gone.kind, gone.message) == ("pods", 'pods "p0" not found')
    assert (parse_status("[1]"), parse_status("not json"), parse_status(None)) == (None, None, parse_status("{}"))


GATEWAY_BODY = """{"code": 403, "message": "denied by the gateway", "status": "PERMISSION_DENIED",
 "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "IAM_PERMISSION_DENIED"}]}"""
"""A refusal answered by an API gateway in front of the apiserver (a ``google.rpc.Status``: ``details`` a list)."""


def test_a_body_whose_details_are_not_a_status_s_still_gives_its_message() -> None:
    """A JSON object that is not a ``metav1.Status`` (``details`` a list, or ``causes`` not a list of objects) still
    reads as its ``message``, with no kind and no causes, as the callers read it before the one parser: the refused
    call's error says what the gateway said instead of raising AttributeError; an exec error channel whose
    ExitCode cause is no number falls back on the message's ``exit status N``."""
    from kubernetes.client.exceptions import ApiException

    from pytest_hetero.backends.kubernetes.client import api_outcome, not_found_kind, status_message
    from pytest_hetero.backends.kubernetes.podexec import exit_code

    gateway = parse_status(GATEWAY_BODY)
    assert gateway is not None and (gateway.message, gateway.kind, gateway.causes) == ("denied by the gateway", None, ())
    odd = [parse_status(json.dumps({"message": "m", "details": details}))
           for details in ("text", {"causes": "x"}, {"causes": ["x", None, {"reason": "ExitCode", "message": "2"}]})]
    assert [(s.message, s.kind, s.causes) if s else None for s in odd] == [
        ("m", None, ()), ("m", None, ()), ("m", None, (("ExitCode", "2"),))]
    exc = ApiException(status=403, reason="Forbidden")
    exc.body = GATEWAY_BODY
    assert (status_message(exc), not_found_kind(exc)) == ("denied by the gateway", "")
    assert str(api_outcome(exc, "create pod p0")) == "create pod p0: HTTP 403: denied by the gateway"
    assert exit_code(json.dumps({"status": "Failure", "message": "command terminated with non-zero exit code: "
                                 "exit status 4", "details": {"causes": [{"reason": "ExitCode", "message": ["3"]}]}})) == 4


def test_a_local_queue_of_old_kueue_reads_its_flavor_usage_apart() -> None:
    """A LocalQueue of Kueue before v0.9 names its usage ``flavorUsage``: kept apart from ``flavorsUsage`` (None)."""
    queue = parse_queue(_load(NEW_LOCAL_QUEUE))
    assert (queue.flavors_usage, queue.flavors_reservation, queue.admitted_workloads) == (None, None, 0)
    assert queue.flavor_usage == [{"name": "default", "resources": [{"name": "cpu", "total": "0"}]}]


def test_metadata_reads_owners_their_uids_and_finalizers() -> None:
    meta = parse_metadata(_load(OWNED_POD_META))
    assert (meta.owners, meta.owner_uids, meta.finalizers) == ((("Job", "job"),), ("j-1",), ["batch.kubernetes.io/job-tracking"])
    assert (meta.labels, meta.created, meta.resource_version) == ({}, None, None)


def test_a_pod_keeps_its_conditions_and_container_statuses_as_served() -> None:
    raw = _load(JUST_CREATED_POD)
    raw["status"] = _load(WAITING_STATUS)
    pod = parse_pod(raw)
    assert pod.served_conditions == _load(WAITING_STATUS)["conditions"]
    assert pod.served_container_statuses == _load(WAITING_STATUS)["containerStatuses"]
    fresh = parse_pod(_load(JUST_CREATED_POD))
    assert (fresh.served_conditions, fresh.served_container_statuses) == (None, None)


def test_an_object_that_does_not_fit_its_served_shape_is_refused_naming_the_field() -> None:
    """A field absent that the apiserver always serves, or served with another type, is refused by the one
    conversion with a ``msgspec.ValidationError`` (a ValueError) whose message names the field's ``$.path``."""
    import msgspec
    import pytest

    raw = _load(JUST_CREATED_POD)
    raw["status"] = _load(WAITING_STATUS)
    raw["status"]["containerStatuses"][0]["restartCount"] = "none"
    with pytest.raises(msgspec.ValidationError, match=r"\$\.status\.containerStatuses\[0\]\.restartCount"):
        parse_pod(raw)
    node = _load(NODE_WITHOUT_TAINTS)
    del node["metadata"]["name"]
    with pytest.raises(ValueError, match=r"missing required field `name` - at `\$\.metadata`"):
        parse_node(node)


ADMITTED_WORKLOAD = """{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
 "metadata": {"name": "job-p0-1a2b3", "namespace": "hetero", "creationTimestamp": "2026-12-04T02:00:00Z"},
 "spec": {"queueName": "hetero-queue", "priority": 10,
          "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "batch"}},
 "status": {"conditions": [{"type": "QuotaReserved", "status": "True", "observedGeneration": 1,
                            "lastTransitionTime": "2026-12-04T02:00:01Z", "reason": "QuotaReserved",
                            "message": "Quota reserved in ClusterQueue cq"},
                           {"type": "Admitted", "status": "True", "observedGeneration": 1,
                            "lastTransitionTime": "2026-12-04T02:00:02Z", "reason": "Admitted",
                            "message": "The workload is admitted"}],
            "admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": "main", "count": 1, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "100m"}}]}}}"""


def test_an_admitted_workload_keeps_its_conditions_as_served() -> None:
    """A Workload is read once into its declared shape: the admission's queue and pod sets, the v1beta2 priority
    class, and its conditions as served (every ``metav1.Condition`` field, ``observedGeneration`` too)."""
    raw = _load(ADMITTED_WORKLOAD)
    seen = parse_workload(raw)
    assert (seen.cluster_queue, seen.priority, seen.priority_ref, seen.created) == (
        "cq", 10, ("batch", "WorkloadPriorityClass"), "2026-12-04T02:00:00Z")
    assert seen.served_conditions == raw["status"]["conditions"] and seen.holds("Admitted")
    assert [s.fields() for s in seen.pod_sets] == [
        {"name": "main", "count": 1, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "100m"}}]


def test_a_workload_s_nulls_read_as_absent_and_a_misshapen_one_is_refused_by_path() -> None:
    """null where Kueue leaves a field out reads as absent (as the field-by-field reads did: an empty
    ``priorityClassRef`` is no reference, a null ``podSetAssignments`` no pod set); an admission without its
    ``clusterQueue`` (required by Kueue's API: a KeyError before) or a count that is no number (passed through
    before) is refused at the parse, a ValueError naming the field's path."""
    empty = parse_workload(_load('{"kind": "Workload", "metadata": {}, "spec": {"priorityClassRef": {}}, "status": null}'))
    assert (empty.name, empty.priority_ref, empty.conditions, empty.served_conditions) == (None, None, (), None)
    unset = _load(ADMITTED_WORKLOAD)
    unset["spec"] = None
    unset["status"]["admission"]["podSetAssignments"] = None
    seen = parse_workload(unset)
    assert (seen.queue_name, seen.cluster_queue, seen.pod_sets) == (None, "cq", ())
    broken = _load(ADMITTED_WORKLOAD)
    del broken["status"]["admission"]["clusterQueue"]
    with pytest.raises(ValueError, match=r"`clusterQueue` - at `\$\.status\.admission`"):
        parse_workload(broken)
    odd = _load(ADMITTED_WORKLOAD)
    odd["status"]["admission"]["podSetAssignments"][0]["count"] = "1"
    with pytest.raises(ValueError, match=r"\$\.status\.admission\.podSetAssignments\[0\]\.count"):
        parse_workload(odd)


def test_a_queue_s_null_status_and_null_flavor_resources_read_as_empty() -> None:
    """A queue without ``status`` (or a null one) reads as every counter absent; a flavor whose ``resources`` are
    null (not ``omitempty`` in Kueue's API) counts nothing; a counter that is no number is refused by path."""
    from pytest_hetero.backends.kubernetes.accounts import _queue_account
    from pytest_hetero.backends.kubernetes.queues import Queue

    assert parse_queue({"kind": "ClusterQueue"}) == parse_queue(_load('{"status": null}')) == Queue()
    raw = _load(NEW_LOCAL_QUEUE)
    raw["status"]["flavorUsage"][0]["resources"] = None
    assert _queue_account(raw)["usage"] == {}
    raw["status"]["admittedWorkloads"] = "0"
    with pytest.raises(ValueError, match=r"\$\.status\.admittedWorkloads"):
        parse_queue(raw)


def test_a_local_queue_reads_the_cluster_queue_it_leads_to() -> None:
    """A LocalQueue's name and ``spec.clusterQueue`` (None without a spec, or a null one)."""
    from pytest_hetero.backends.kubernetes.queues import parse_local_queue

    queue = parse_local_queue(_load(NEW_LOCAL_QUEUE))
    assert (queue.name, queue.cluster_queue) == ("hetero-queue", "cq")
    bare = [parse_local_queue(_load(text)) for text in ('{"metadata": {"name": "q"}}',
                                                        '{"metadata": {"name": "q"}, "spec": null}')]
    assert [(q.name, q.cluster_queue) for q in bare] == [("q", None), ("q", None)]


def test_a_queue_object_keeps_its_conditions_as_served() -> None:
    """``scheduling.pending`` keeps a PodGroup's or Workload's conditions as served (Volcano's ``transitionID``
    too); one without status (Kueue has not seen it) has none."""
    from pytest_hetero.backends.kubernetes.queues import parse_queue_object

    cond = {"type": "Unschedulable", "status": "True", "transitionID": "5f3c", "reason": "NotEnoughResources",
            "message": "1/1 tasks in gang unschedulable", "lastTransitionTime": "2026-12-04T02:00:01Z"}
    group = parse_queue_object(_load(json.dumps({"kind": "PodGroup", "metadata": {"name": "pg"},
                                                 "status": {"conditions": [cond]}})))
    new = parse_queue_object(_load(NEW_WORKLOAD))
    assert [(q.kind, q.metadata.name, q.conditions) for q in (group, new)] == [
        ("PodGroup", "pg", [cond]), ("Workload", "job-p0-1a2b3", None)]


def test_shapes_read_after_their_module_left_sys_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """A nested in-process pytest run (pytester's, as the realnode tests run the gate) drops the modules it imported
    from ``sys.modules`` when it ends, while their package keeps the module object; msgspec resolves a shape's
    postponed annotations through ``sys.modules`` on first use, so each module declaring shapes resolves them at
    import (:func:`pytest_hetero.declared.resolve`): a fresh copy of each, gone from
    ``sys.modules`` before any shape of it was used, still reads its objects (it raised NameError)."""
    import importlib
    import sys

    import pytest_hetero.backends.kubernetes as package

    fresh = {}
    for short in ("boundaries", "queues", "session", "snapshot", "managed"):
        name = f"pytest_hetero.backends.kubernetes.{short}"
        monkeypatch.setattr(package, short, importlib.import_module(name))
        monkeypatch.delitem(sys.modules, name)
        fresh[short] = importlib.import_module(name)
        monkeypatch.delitem(sys.modules, name)
    assert fresh["queues"].parse_workload(_load(ADMITTED_WORKLOAD)).cluster_queue == "cq"
    assert fresh["queues"].parse_queue(_load(NEW_LOCAL_QUEUE)).admitted_workloads == 0
    assert fresh["queues"].parse_local_queue(_load(NEW_LOCAL_QUEUE)).cluster_queue == "cq"
    assert fresh["queues"].parse_queue_object(_load(NEW_WORKLOAD)).conditions is None
    assert fresh["boundaries"].parse_policy({"metadata": {"namespace": "b", "name": "n"},
                                             "spec": {"podSelector": {}}}).ref == "b/n"
    assert fresh["boundaries"].parse_service({"metadata": {"name": "s"}, "spec": {}}).name == "s"
    assert fresh["boundaries"].parse_claim({"metadata": {"name": "c"}, "spec": {"resources": {}},
                                            "status": {}}).volume is None
    assert fresh["session"].parse_target({"python": "python3.12"}).python == "python3.12"
    assert fresh["snapshot"].parse_object({"metadata": {"name": "o"}}).metadata.name == "o"
    assert fresh["managed"]._entry({"metadata": {"name": "o"}}, "nodes", "")["name"] == "o"
