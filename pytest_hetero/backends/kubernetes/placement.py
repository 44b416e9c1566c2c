"""What the scheduling item records once its workload is placed, or why it is not.

Placed: ``scheduling.placed`` with node, requested vs allocated (the pod's resources after
admission, the node's allocatable), the scheduler's decision time (PodScheduled
``lastTransitionTime``, 1 s resolution), when the run's watch first saw the binding and when the
item recorded it (epoch seconds). Not placed: ``scheduling.pending`` keeps every normalised reason,
the pod's conditions, its events (and the Job's) and the Kueue Workload / Volcano PodGroup verdict,
because events expire; the pending pod is kept as an artifact.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from kubernetes import client

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import inventory
from pytest_hetero.backends.kubernetes import scheduling as ks
from pytest_hetero.backends.protocol import Placement, Step
from pytest_hetero.pending import summarise

if TYPE_CHECKING:
    from pytest_hetero.backends.kubernetes.session import KubeSession


def record_placed(
    session: KubeSession,
    ctx: Step,
    workload: dict[str, Any],
    pod: dict[str, Any],
    waited_s: float,
) -> None:
    """Record ``scheduling.placed`` for ``pod`` (JSON dict); ``waited_s`` from submission to the verdict."""
    node = pod["spec"]["nodeName"]
    known = session.nodes.get(node, {}).get("allocatable") or {}
    if any(n not in known for n in ctx.resource.requests):
        refresh_nodes(session, list(ctx.resource.requests), node)
    facts = session.nodes.get(node, {})
    cond: dict[str, Any] = next(
        (c for c in pod["status"].get("conditions") or [] if c.get("type") == "PodScheduled"), {}
    )
    workload["pod"] = pod["metadata"]["name"]
    session.seen_nodes.add(node)
    ctx.record(
        "scheduling.placed",
        pod=pod["metadata"]["name"],
        node=node,
        waited_s=round(waited_s, 4),
        decided_at=cond.get("lastTransitionTime"),
        recorded_epoch_s=time.time(),
        observed_epoch_s=session.pods().bound_at.get(pod["metadata"]["name"]),
        requested=ks.resources(ctx.resource),
        allocated={
            "node": node,
            "resources": pod["spec"]["containers"][0].get("resources"),
            "node_allocatable": facts.get("allocatable"),
            "node_simulated": facts.get("simulated"),
        },
    )


def refresh_nodes(session: KubeSession, names: list[str], wanted: str) -> None:
    """One node list (not one read per placement) into ``session.nodes``; best effort without list nodes."""
    try:
        resp: Any = session.core.list_node(_preload_content=False, _request_timeout=kc.API_TIMEOUT_S)
        for node in json.loads(resp.data).get("items") or []:
            known = session.nodes.get(node["metadata"]["name"], {}).get("capacity") or {}
            session.nodes[node["metadata"]["name"]] = inventory.node_facts(
                node, sorted({*known, *names})
            )
    except Exception as exc:  # noqa: BLE001 - allocation evidence is best effort
        session.nodes[wanted] = {"name": wanted, "error": str(exc)}


def pool_nodes(session: KubeSession, ctx: Step) -> list[dict[str, Any]] | None:
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
    return [inventory.node_facts(n, list(ctx.resource.requests)) for n in json.loads(resp.data)["items"]]


def owner_uid(session: KubeSession, workload: dict[str, Any]) -> str | None:
    """Uid of the Job / Volcano Job behind a workload (None for a plain pod or when unreadable)."""
    try:
        if workload["kind"] in ("job", "kueue-job"):
            job = client.BatchV1Api(session.api).read_namespaced_job(
                workload["name"], session.namespace, _request_timeout=kc.API_TIMEOUT_S
            )
            return str(job.metadata.uid) if job.metadata else None
        if workload["kind"] == "volcano-job":
            obj: Any = client.CustomObjectsApi(session.api).get_namespaced_custom_object(
                "batch.volcano.sh", "v1alpha1", session.namespace, "jobs", workload["name"]
            )
            return str(obj["metadata"]["uid"])
    except Exception:  # noqa: BLE001 - explained from what can be read
        return None
    return None


def unscheduled(
    session: KubeSession, ctx: Step, workload: dict[str, Any], timed_out: float | None
) -> Placement:
    """Record ``scheduling.pending``; return the Placement (not placed) with the decisive reason
    (:func:`.scheduling.primary`; None when nothing explains the wait — for a ``kueue-job`` without a
    Workload the message then asks whether Kueue is installed)."""
    api, ns = session.api, session.namespace
    pods = session.pods().by_key(workload["probe"])
    events = [e for p in pods for e in ks.events_for(api, ns, p["metadata"]["name"])]
    queue: list[dict[str, Any]] = []
    if workload["kind"] != "pod":
        events += ks.events_for(api, ns, workload["name"])
        uid = owner_uid(session, workload)
        queue = ks.queue_objects(api, ns, uid) if uid and workload["kind"] != "job" else []
    advertised = {n for f in session.nodes.values() for n, v in (f.get("capacity") or {}).items() if v}
    pool, tolerations = pool_nodes(session, ctx), [dict(t) for t in ctx.resource.tolerations]
    reasons = ks.name_taints(
        ks.explain_pending(pods, events, queue, advertised or None), pool or [], tolerations
    )
    slim = [
        {
            k: e.get(k)
            for k in (
                "type",
                "reason",
                "message",
                "count",
                "firstTimestamp",
                "lastTimestamp",
                "source",
                "reportingComponent",
            )
        }
        for e in events
    ]
    ctx.artifact("pending-pod.json", json.dumps(pods, indent=1), "application/json")
    ctx.record(
        "scheduling.pending",
        object=workload["name"],
        submit_as=workload["kind"],
        timed_out_after_s=timed_out,
        reasons=[r.to_dict() for r in reasons],
        events=slim,
        queue_objects=[
            {
                "kind": q.get("kind"),
                "name": q.get("metadata", {}).get("name"),
                "conditions": (q.get("status") or {}).get("conditions"),
            }
            for q in queue
        ],
        conditions=[(p.get("status") or {}).get("conditions") for p in pods],
    )
    decisive = ks.primary(reasons, pool, tolerations)
    if decisive is None:
        hint = ""
        if workload["kind"] == "kueue-job" and not queue:
            hint = (
                f"; no Kueue Workload exists for it: is Kueue installed and LocalQueue "
                f"{ctx.resource.queue or 'default'} present in {ns}?"
            )
        elif workload["kind"] != "pod" and not pods:
            hint = "; no pod was created for it"
        return Placement(placed=False, message=(
            f"{workload['kind']} {workload['name']} not scheduled within {timed_out or 0:g} s and "
            f"nothing explains why (pods: {len(pods)}){hint}"))
    return Placement(placed=False, decisive=decisive.to_dict(),
                     message=f"{workload['name']} not scheduled: {summarise(reasons)}")
