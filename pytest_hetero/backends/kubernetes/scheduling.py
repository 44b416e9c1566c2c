"""Scheduling on Kubernetes: submit the resource × image workload the way a user's task goes, watch it placed.

``target.submit_as``: ``pod`` (default) — a Pod; ``job`` — a batch/v1 Job (backoffLimit 0);
``kueue-job`` — a suspended Job labelled ``kueue.x-k8s.io/queue-name: <resource.queue>`` (Kueue
admits and unsuspends it); ``volcano-job`` — a ``batch.volcano.sh/v1alpha1`` Job with
``schedulerName: volcano`` and ``queue: <resource.queue>``. Requests/limits, nodeSelector,
tolerations and priorityClassName come from the resource; extended resources get limit = request.

The workload pod idles (:data:`KEEP_ALIVE`) and is reused by startup and model items. When it does
not schedule, :func:`explain_pending` normalises the pod's PodScheduled condition, its events, the
Kueue Workload / Volcano PodGroup and their events (read by :mod:`.queues`) with
:func:`pytest_hetero.pending.explain`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal, overload

from kubernetes import client

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes.manifests import (
    Affinity,
    Container,
    EventJSON,
    EventList,
    JobManifest,
    JobSpec,
    ObjectMeta,
    PodManifest,
    PodSpec,
    PodTemplateSpec,
    QueueObject,
    ResourceRequirements,
    ServedPod,
    Toleration,
    Workload,
)
from pytest_hetero.backends.kubernetes.objects import parse_event, parse_pod
from pytest_hetero.backends.protocol import NodeFacts, Taint
from pytest_hetero.matrix.model import BASIC_RESOURCES as BASIC
from pytest_hetero.matrix.model import Resource
from pytest_hetero.matrix.tolerations import untolerated as matrix_untolerated
from pytest_hetero.pending import Reason, explain

KEEP_ALIVE = ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"]
"""Command of the workload container: idles, exits 0 on SIGTERM."""
SUBMIT_AS = ("pod", "job", "kueue-job", "volcano-job")
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
PINNED = "pytest-hetero.dev/pinned-to-node"
"""Annotation naming the node a node-coverage workload is pinned to."""


def resources(resource: Resource) -> ResourceRequirements:
    """``{"requests", "limits"}`` of the workload container (extended resources: limit = request)."""
    requests = {k: str(v) for k, v in resource.requests.items()}
    limits = {k: str(v) for k, v in resource.limits.items()}
    for name, value in requests.items():
        if name not in BASIC and not name.startswith("hugepages-"):
            limits.setdefault(name, value)
    return {"requests": requests, "limits": limits}


def pod_spec(
    resource: Resource,
    image: str,
    *,
    restart: str = "Always",
    scheduler: str | None = None,
    pull_policy: str | None = None,
) -> PodSpec:
    """The PodSpec of the resource × image workload."""
    container: Container = {
        "name": "workload",
        "image": image,
        "command": KEEP_ALIVE,
        "resources": resources(resource),
    }
    if pull_policy:
        container["imagePullPolicy"] = pull_policy
    spec: PodSpec = {
        "containers": [container],
        "restartPolicy": restart,
        "terminationGracePeriodSeconds": 2,
        "automountServiceAccountToken": False,
    }
    if resource.node_selector:
        spec["nodeSelector"] = dict(resource.node_selector)
    if resource.tolerations:
        spec["tolerations"] = [t.copy() for t in resource.tolerations]
    if resource.priority_class:
        spec["priorityClassName"] = resource.priority_class
    if scheduler:
        spec["schedulerName"] = scheduler
    return spec


@overload
def manifest(submit_as: Literal["pod"], name: str, namespace: str, labels: dict[str, str], resource: Resource,
             image: str, pull_policy: str | None = None, notes: dict[str, str] | None = None,
             pinned_to: str | None = None) -> PodManifest: ...
@overload
def manifest(submit_as: str, name: str, namespace: str, labels: dict[str, str], resource: Resource, image: str,
             pull_policy: str | None = None, notes: dict[str, str] | None = None,
             pinned_to: str | None = None) -> Workload: ...
def manifest(
    submit_as: str,
    name: str,
    namespace: str,
    labels: dict[str, str],
    resource: Resource,
    image: str,
    pull_policy: str | None = None,
    notes: dict[str, str] | None = None,
    pinned_to: str | None = None,
) -> Workload:
    """The object to create for ``submit_as`` (one of :data:`SUBMIT_AS`; ValueError otherwise);
    ``notes`` become annotations of the object and of its pod template; ``pinned_to``: the pod may only
    be placed on that node (:func:`pin`)."""
    body = _manifest(submit_as, name, namespace, labels, resource, image, pull_policy, notes)
    if pinned_to:
        pin(body, pinned_to)
    return body


def pin(body: Workload, node: str) -> None:
    """Restrict the pod(s) of ``body`` (a manifest of :func:`manifest`) to ``node``, the way the DaemonSet
    controller does: a required node affinity on the field ``metadata.name``. The scheduler still places
    the pod (resources, taints, selectors are checked), unlike ``spec.nodeName``, which bypasses it."""
    affinity: Affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    if body["apiVersion"] == "v1":
        body["spec"]["affinity"] = affinity
    elif body["apiVersion"] == "batch/v1":
        body["spec"]["template"]["spec"]["affinity"] = affinity
    else:
        for task in body["spec"]["tasks"]:
            task["template"]["spec"]["affinity"] = affinity


def _manifest(
    submit_as: str,
    name: str,
    namespace: str,
    labels: dict[str, str],
    resource: Resource,
    image: str,
    pull_policy: str | None,
    notes: dict[str, str] | None,
) -> Workload:
    meta: ObjectMeta = {
        "name": name,
        "namespace": namespace,
        "labels": dict(labels),
        "annotations": dict(notes or {}),
    }
    if submit_as == "pod":
        pod: PodManifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": pod_spec(resource, image, pull_policy=pull_policy),
        }
        return pod
    template: PodTemplateSpec = {
        "metadata": {"labels": dict(labels), "annotations": dict(notes or {})},
        "spec": pod_spec(
            resource,
            image,
            restart="Never",
            pull_policy=pull_policy,
            scheduler="volcano" if submit_as == "volcano-job" else None,
        ),
    }
    if submit_as in ("job", "kueue-job"):
        spec: JobSpec = {"backoffLimit": 0, "template": template, "ttlSecondsAfterFinished": 3600}
        if submit_as == "kueue-job":
            meta["labels"][KUEUE_QUEUE] = resource.queue or "default"
            spec["suspend"] = True
        job: JobManifest = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}
        return job
    if submit_as == "volcano-job":
        return {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": meta,
            "spec": {
                "schedulerName": "volcano",
                "queue": resource.queue or "default",
                "minAvailable": 1,
                "maxRetry": 1,
                "tasks": [{"name": "workload", "replicas": 1, "template": template}],
            },
        }
    raise ValueError(f"target.submit_as {submit_as!r} is not one of {', '.join(SUBMIT_AS)}")


def create(api: client.ApiClient, body: Workload) -> None:
    """Create ``body`` in its namespace (a Pod or a batch/v1 Job by :func:`.client.raw_request`: the manifest sent
    as it is, the answer not made into models). Raises ApiException (403 quota/RBAC, 404 missing CRD…)."""
    ns = body["metadata"]["namespace"]
    if body["kind"] == "Pod":
        kc.raw_request(api, "POST", f"/api/v1/namespaces/{ns}/pods", body, timeout_s=30)
    elif body["apiVersion"] == "batch/v1":
        kc.raw_request(api, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body, timeout_s=30)
    else:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", ns, "jobs", body, _request_timeout=30  # type: ignore[arg-type]
        )


def requests_of(body: Workload) -> dict[str, str] | None:
    """``resources.requests`` of the first container of ``body``'s pods (a Pod's spec, a Job's pod template;
    None when the container has none, and for a Volcano Job, whose tasks are not read)."""
    if body["apiVersion"] == "v1":
        spec = body["spec"]
    elif body["apiVersion"] == "batch/v1":
        spec = body["spec"]["template"]["spec"]
    else:
        return None
    return spec["containers"][0]["resources"].get("requests")


def scheduled(pods: list[ServedPod]) -> ServedPod | None:
    """The first live pod (JSON dicts as the pod watch keeps them) with ``spec.nodeName`` set, else None."""
    return next((raw for raw in pods if (pod := parse_pod(raw)).node_name and not pod.deleted), None)


def unschedulable(pods: list[ServedPod]) -> ServedPod | None:
    """The first live pod (JSON dicts as the pod watch keeps them) whose PodScheduled condition is False
    with reason Unschedulable, else None."""
    for raw in pods:
        pod = parse_pod(raw)
        if not pod.deleted and any(c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
                                   for c in pod.conditions):
            return raw
    return None


def events_for(api: client.ApiClient, namespace: str, name: str) -> list[EventJSON]:
    """Events of the object ``name`` in ``namespace`` (oldest first); [] when unreadable."""
    try:
        resp: Any = client.CoreV1Api(api).list_namespaced_event(
            namespace,
            field_selector=f"involvedObject.name={name}",
            _preload_content=False,
            _request_timeout=30,
        )
    except Exception:  # noqa: BLE001 - events are best effort (RBAC may lack them; the pod status holds the verdict)
        return []
    listed: EventList = json.loads(resp.data)
    return sorted(listed["items"], key=lambda e: str(e["lastTimestamp"] or e["eventTime"] or ""))


def explain_pending(
    pods: list[ServedPod],
    events: list[EventJSON],
    queue: Sequence[QueueObject],
    advertised: set[str] | None,
) -> list[Reason]:
    """Normalised reasons from pods, events (of the pods, the Job, the PodGroup) and queue objects
    (Kueue Workloads, Volcano PodGroups), deduplicated; see :func:`order_reasons` for the order.

    Warning events, and Normal events that carry a refusal (Volcano writes a queue's
    ``queue resource quota insufficient`` / ``resource in cluster is overused`` only as a Normal
    ``Unschedulable`` event), add the codes the objects did not give; an event repeating a code keeps
    its own counts in the object's reason's detail (``event_message``) when they differ.
    """
    out: list[Reason] = []
    for source in [*queue, *[p for p in pods if not parse_pod(p).deleted]]:
        out += [r for r in explain(source, advertised=advertised) if r not in out]
    for event in [e for e in events if parse_event(e).type in ("Warning", "Normal")]:
        for r in explain(event, advertised=advertised):
            same = next((i for i, x in enumerate(out) if x.code == r.code), None)
            if same is None and not (r.code == "unknown" and out):
                out.append(r)
            elif same is not None and r.source == "volcano" and r.quantities != out[same].quantities:
                out[same] = disagreeing(out[same], r)
    return order_reasons(out)


def disagreeing(state: Reason, event: Reason) -> Reason:
    """``state`` (read from an object's condition) with ``event``'s differing text kept in its detail:
    Volcano's PodGroup event and condition disagree on counts (the event says ``3/3 tasks in gang
    unschedulable`` where the condition says ``1/3``; client-go also stops repeating an event after
    25). The condition is the object's current state and decides; the event is kept for the record."""
    from dataclasses import replace

    return replace(state, detail={**state.detail, "event_message": event.message})


QUEUE_REFUSALS = frozenset({"queue_quota_insufficient", "queue_inactive", "queue_not_found",
                            "queue_request_exceeds_max"})


def order_reasons(reasons: list[Reason]) -> list[Reason]:
    """A Volcano queue's refusal before the gang's: a gang whose queue refused it reports ``0/0 tasks in
    gang unschedulable`` (no task was even offered to the nodes), a consequence, not the cause."""
    queue = [r for r in reasons if r.source == "volcano" and r.code in QUEUE_REFUSALS]
    return queue + [r for r in reasons if r not in queue] if queue else reasons


def untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> list[str]:
    """``key=value:effect`` of each NoSchedule/NoExecute taint no toleration tolerates (core/v1 rules;
    :func:`pytest_hetero.matrix.tolerations.untolerated`)."""
    return matrix_untolerated(taints, tolerations)


def applies(reason: Reason, pool: list[NodeFacts], tolerations: Sequence[Toleration]) -> bool:
    """Could ``reason`` come from a node of ``pool`` (node facts of the nodes the selector picks)?
    Other nodes' verdicts (their taints, their labels) say nothing about the pool."""
    if reason.code == "node_selector_mismatch":
        return not pool
    if reason.code == "untolerated_taint":
        return any(untolerated(f["taints"], tolerations) for f in pool)
    if reason.code == "node_not_ready":
        return any(f["ready"] != "True" for f in pool)
    return True


def primary(
    reasons: list[Reason],
    pool: list[NodeFacts] | None = None,
    tolerations: Sequence[Toleration] | None = None,
) -> Reason | None:
    """The reason that decides: not a preemption verdict; with the selector's ``pool`` known, one that
    can come from a pool node (see :func:`applies`); then most nodes."""
    candidates = [r for r in reasons if not r.preemption] or list(reasons)
    if pool is not None:
        candidates = [r for r in candidates if applies(r, pool, tolerations or [])] or candidates
    return max(candidates, key=lambda r: (r.code != "unknown", r.nodes or 0), default=None)


def name_taints(
    reasons: list[Reason], pool: list[NodeFacts], tolerations: Sequence[Toleration]
) -> list[Reason]:
    """Fill ``taint`` of an ``untolerated_taint`` reason the scheduler left unnamed (1.34 says only
    "had untolerated taint(s)") when the pool's nodes carry exactly one untolerated taint."""
    from dataclasses import replace

    found = sorted({t for f in pool for t in untolerated(f["taints"], tolerations)})
    if len(found) != 1:
        return reasons
    return [
        replace(r, taint=found[0], detail={**r.detail, "taint_from": "pool nodes"})
        if r.code == "untolerated_taint" and not r.taint
        else r
        for r in reasons
    ]
