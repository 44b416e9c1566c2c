"""What the scheduling item records once its workload is placed, or why it is not.

Placed: ``scheduling.placed`` with node, requested vs allocated (the pod's resources after
admission, the node's allocatable), the scheduler's decision time (PodScheduled
``lastTransitionTime``, 1 s resolution), when the run's watch first saw the binding and when the
item recorded it (epoch seconds); a Kueue Job's admission (``scheduling.queue``: ClusterQueue,
flavors, quota used, wait). Not placed: ``scheduling.pending`` keeps every normalised reason,
the pod's conditions, its events (and the Job's) and the Kueue Workload / Volcano PodGroup verdict,
because events expire; the pending pod is kept as an artifact.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from kubernetes import client

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import inventory, queues
from pytest_hetero.backends.kubernetes import scheduling as ks
from pytest_hetero.backends.kubernetes.manifests import NodeList, QueueObject, ServedPod
from pytest_hetero.backends.kubernetes.objects import find, parse_node, parse_pod
from pytest_hetero.backends.protocol import NodeFacts, Placement, Step
from pytest_hetero.pending import summarise

if TYPE_CHECKING:
    from pytest_hetero.backends.kubernetes.session import KubeSession, WorkloadRecord


def record_placed(
    session: KubeSession,
    ctx: Step,
    workload: WorkloadRecord,
    pod: ServedPod,
    waited_s: float,
) -> None:
    """Record ``scheduling.placed`` for ``pod`` (JSON dict); ``waited_s`` from submission to the verdict."""
    node = pod["spec"]["nodeName"]
    listed = session.nodes.get(node)
    known = (listed["allocatable"] if listed else None) or {}
    if any(n not in known for n in ctx.resource.requests):
        refresh_nodes(session, list(ctx.resource.requests), node)
    facts = session.nodes.get(node)
    cond = find(parse_pod(pod).conditions, "PodScheduled")
    workload.pod = pod["metadata"]["name"]
    session.seen_nodes.add(node)
    if workload.kind == "kueue-job":
        record_admission(session, ctx, workload)
    ctx.record(
        "scheduling.placed",
        pod=pod["metadata"]["name"],
        node=node,
        waited_s=round(waited_s, 4),
        decided_at=cond.last_transition if cond else None,
        recorded_epoch_s=time.time(),
        observed_epoch_s=session.pods().bound_at.get(pod["metadata"]["name"]),
        requested=ks.resources(ctx.resource),
        allocated={
            "node": node,
            "resources": pod["spec"]["containers"][0]["resources"],
            "node_allocatable": facts["allocatable"] if facts else None,
            "node_simulated": facts["simulated"] if facts else None,
        },
    )


def refresh_nodes(session: KubeSession, names: list[str], wanted: str) -> None:
    """One node list (not one read per placement) into ``session.nodes``; best effort without list nodes."""
    try:
        resp: Any = session.core.list_node(_preload_content=False, _request_timeout=kc.API_TIMEOUT_S)
        body: NodeList = json.loads(resp.data)
        for node in (parse_node(item) for item in body["items"]):
            listed = session.nodes.get(node.name)
            known = (listed["capacity"] if listed else None) or {}
            session.listed(inventory.node_facts(node, sorted({*known, *names})))
    except Exception as exc:  # noqa: BLE001 - allocation evidence is best effort
        session.unreadable(wanted, str(exc))


def pool_nodes(session: KubeSession, ctx: Step) -> list[NodeFacts] | None:
    """Facts of the nodes the resource's selector picks; None without a selector or without list nodes."""
    selector = ctx.resource.node_selector
    if not selector:
        return None
    try:
        resp: Any = session.core.list_node(
            label_selector=",".join(f"{k}={v}" for k, v in sorted(selector.items())),
            _preload_content=False,
            _request_timeout=kc.API_TIMEOUT_S,
        )
    except Exception:  # noqa: BLE001 - the verdict then falls back to node counts
        return None
    return [inventory.node_facts(parse_node(n), list(ctx.resource.requests)) for n in json.loads(resp.data)["items"]]


def owner_uid(session: KubeSession, workload: WorkloadRecord) -> str | None:
    """Uid of the Job / Volcano Job behind a workload (None for a plain pod or when unreadable)."""
    try:
        if workload.kind in ("job", "kueue-job"):
            job = client.BatchV1Api(session.api).read_namespaced_job(
                workload.name, session.namespace, _request_timeout=kc.API_TIMEOUT_S
            )
            return str(job.metadata.uid) if job.metadata else None
        if workload.kind == "volcano-job":
            obj: Any = client.CustomObjectsApi(session.api).get_namespaced_custom_object(
                "batch.volcano.sh", "v1alpha1", session.namespace, "jobs", workload.name
            )
            return str(obj["metadata"]["uid"])
    except Exception:  # noqa: BLE001 - explained from what can be read
        return None
    return None


def record_admission(session: KubeSession, ctx: Step, workload: WorkloadRecord) -> None:
    """Record ``scheduling.queue`` for a placed ``kueue-job``: its admitted Workload (ClusterQueue,
    flavors, quota used, wait; :func:`.queues.kueue_admission`), or why it cannot be read."""
    served = session.served()
    version = served.version(queues.KUEUE)
    uid = owner_uid(session, workload)
    found, error = (queues.read_objects(session.api, served, queues.KUEUE, "workloads", session.namespace,
                                        label_selector=f"{queues.JOB_UID}={uid}") if uid else ([], None))
    if version is None or not found:
        ctx.record("scheduling.queue", controller="kueue", api=served.describe(queues.KUEUE), admitted=None,
                   error=error or f"no Workload found for Job {workload.name} (uid {uid})")
        return
    ctx.record("scheduling.queue", controller="kueue", admitted=True,
               **queues.kueue_admission(session.api, version, found[0], workload.submitted_at))


class QueueNote(TypedDict):
    """How the queue objects behind an unplaced Job were read: the ``controller`` (``kueue``/``volcano``), its
    ``api`` as discovery describes it, whether it is ``served``, the Job's uid (``job_uid``; None when it cannot
    be read) and the read's ``error`` (None when it succeeded)."""

    controller: str
    api: str
    served: bool
    job_uid: str | None
    error: str | None


def queue_state(session: KubeSession, workload: WorkloadRecord) -> tuple[Sequence[QueueObject], QueueNote | None]:
    """The queue objects behind an unplaced Job (its Kueue Workloads or Volcano PodGroups) and what
    evidence says of reading them (:class:`QueueNote`; None for a pod or a plain Job): ``served`` is False
    when API discovery found no version of the controller's API."""
    which = {"kueue-job": ("kueue", queues.KUEUE, "workloads"),
             "volcano-job": ("volcano", queues.VOLCANO, "podgroups")}.get(workload.kind)
    if which is None:
        return [], None
    name, api_group, plural = which
    served, uid = session.served(), owner_uid(session, workload)
    note: QueueNote = {"controller": name, "api": served.describe(api_group),
                            "served": served.version(api_group) is not None, "job_uid": uid, "error": None}
    if uid is None:
        note["error"] = f"{workload.kind} {workload.name} cannot be read (deleted?)"
        return [], note
    if plural == "workloads":
        loads, note["error"] = queues.read_objects(session.api, served, api_group, "workloads", session.namespace,
                                                   label_selector=f"{queues.JOB_UID}={uid}")
        return loads, note
    groups, note["error"] = queues.read_objects(session.api, served, api_group, "podgroups", session.namespace)
    return queues.owned_by(groups, uid), note


def no_reason_hint(ctx: Step, workload: WorkloadRecord, pods: list[ServedPod], queue: Sequence[QueueObject],
                   note: QueueNote | None, namespace: str) -> str:
    """Why nothing explains an unplaced workload, as far as the cluster lets one say (a message tail)."""
    if note is not None and note["error"]:
        return f"; its {note['controller']} objects could not be read: {note['error']}"
    if note is not None and not note["served"]:
        return f"; {note['api']}"
    if workload.kind == "kueue-job" and not queue:
        return (f"; Kueue ({note['api'] if note is not None else None}) created no Workload for it: is LocalQueue "
                f"{ctx.resource.queue or 'default'} present in {namespace}, and Kueue's batch/job integration on?")
    if workload.kind != "pod" and not pods:
        return "; no pod was created for it"
    return ""


SLIM_EVENT: tuple[Literal["type", "reason", "message", "count", "firstTimestamp", "lastTimestamp", "source",
                          "reportingComponent"], ...] = (
    "type", "reason", "message", "count", "firstTimestamp", "lastTimestamp", "source", "reportingComponent")
"""The fields of an event ``scheduling.pending`` keeps (None where the event has none)."""


def unscheduled(
    session: KubeSession, ctx: Step, workload: WorkloadRecord, timed_out: float | None
) -> Placement:
    """Record ``scheduling.pending``; return the Placement (not placed) with the decisive reason
    (:func:`.scheduling.primary`; None when nothing explains the wait — for a ``kueue-job`` without a
    Workload the message then asks whether Kueue is installed)."""
    api, ns = session.api, session.namespace
    pods = session.pods().by_key(workload.probe)
    events = [e for p in pods for e in ks.events_for(api, ns, p["metadata"]["name"])]
    if workload.kind != "pod":
        events += ks.events_for(api, ns, workload.name)
    queue, note = queue_state(session, workload)
    events += [e for q in queue if q["kind"] == "PodGroup" for e in ks.events_for(api, ns, q["metadata"]["name"])]
    advertised = {n for f in session.nodes.values() for n, v in f["capacity"].items() if v}
    pool, tolerations = pool_nodes(session, ctx), ctx.resource.tolerations
    reasons = ks.name_taints(
        ks.explain_pending(pods, events, queue, advertised or None), pool or [], tolerations
    )
    slim = [{k: e.get(k) for k in SLIM_EVENT} for e in events]
    ctx.artifact("pending-pod.json", json.dumps(pods, indent=1), "application/json")
    ctx.record(
        "scheduling.pending",
        object=workload.name,
        submit_as=workload.kind,
        pinned_to=workload.node,
        timed_out_after_s=timed_out,
        reasons=[r.to_dict() for r in reasons],
        events=slim,
        queue_objects=[
            {"kind": q.kind, "name": q.metadata.name, "conditions": q.conditions}
            for q in map(queues.parse_queue_object, queue)
        ],
        conditions=[parse_pod(p).served_conditions for p in pods],
        **({"queue": note} if note is not None else {}),
    )
    pinned = workload.node
    # a workload pinned to one node is kept off every other node by its own affinity: that says nothing
    deciding = [r for r in reasons if r.code != "node_affinity_mismatch"] or reasons if pinned else reasons
    decisive = ks.primary(deciding, pool, tolerations)
    where = f" on node {pinned}" if pinned else ""
    if decisive is None:
        hint = no_reason_hint(ctx, workload, pods, queue, note, ns)
        return Placement(placed=False, message=(
            f"{workload.kind} {workload.name} not scheduled{where} within {timed_out or 0:g} s and "
            f"nothing explains why (pods: {len(pods)}){hint}"))
    return Placement(placed=False, decisive=decisive.to_dict(),
                     message=f"{workload.name} not scheduled{where}: {summarise(reasons, facts_only=True)}")
