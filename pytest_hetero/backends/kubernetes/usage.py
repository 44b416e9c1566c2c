"""Usage facts of the gate's Kubernetes workloads (:data:`~pytest_hetero.backends.protocol.USAGE_FACTS`),
read from the pods as the apiserver stores them: requests from the pod spec, ``submitted`` from the
workload's create call (else the pod's ``metadata.creationTimestamp``), ``placed`` from the PodScheduled
condition's ``lastTransitionTime`` (status True), ``started``/``ended`` from the ``workload`` container's
``state.running.startedAt`` / ``state.terminated.startedAt``/``finishedAt`` (the earliest start when it
restarted: ``lastState.terminated.startedAt``), ``attempts`` 1 + ``restartCount``. RFC 3339 times with
1 s resolution (the API's ``metav1.Time``). Facts only: no verdict is drawn here.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from pytest_hetero.backends.kubernetes.manifests import ServedPod
from pytest_hetero.backends.kubernetes.objects import (
    NO_CONTAINER,
    NO_STATUS,
    Container,
    ContainerStatus,
    Pod,
    find,
    parse_pod,
)
from pytest_hetero.backends.kubernetes.scheduling import requests_of
from pytest_hetero.evidence.usage import epoch

if TYPE_CHECKING:
    from pytest_hetero.backends.kubernetes.session import KubeSession, WorkloadRecord
    from pytest_hetero.backends.protocol import UsageFacts

PHASE_OUTCOME = {"Pending": "pending", "Running": "running", "Succeeded": "completed", "Failed": "failed"}
"""Pod phase → the usage fact ``outcome``."""


def _container(pod: Pod) -> tuple[Container, ContainerStatus]:
    """The ``workload`` container's spec and status (the first container's when none is so named)."""
    spec = pod.containers or (NO_CONTAINER,)
    status = pod.container_statuses
    c = next((x for x in spec if x.name == "workload"), spec[0])
    s = next((x for x in status if x.name == c.name), status[0] if status else NO_STATUS)
    return c, s


def pod_facts(session: KubeSession, seen: Pod, submitted: float | None = None,
              tenant: str | None = None) -> UsageFacts:
    """The usage facts of pod ``seen`` (:func:`~.objects.parse_pod` of its JSON); ``submitted``: epoch
    seconds of the create call (else the pod's creationTimestamp); ``tenant``: who submitted it (None: the gate)."""
    spec, cstatus = _container(seen)
    cond = find(seen.conditions, "PodScheduled", "True")
    ended, last = cstatus.ended, cstatus.last_ended
    starts = [t for t in (epoch(last.started_at if last else None), epoch(cstatus.running_since),
                          epoch(ended.started_at if ended else None)) if t is not None]
    node = seen.node_name
    namespace = seen.namespace or session.namespace
    name = seen.name or None
    return {"workload": f"pod/{namespace}/{name}", "object": "pod", "name": name,
            "namespace": namespace, "tenant": tenant,
            "requests": dict(spec.requests),
            "submitted": submitted if submitted is not None else epoch(seen.created),
            "placed": epoch(cond.last_transition if cond else None), "started": min(starts) if starts else None,
            "ended": epoch(ended.finished_at if ended else None), "released": epoch(seen.deleting_since),
            "attempts": 1 + cstatus.restart_count,
            "outcome": PHASE_OUTCOME.get(str(seen.phase), "pending"), "node": node or None,
            "simulated": session.simulated(node)}


def workload_facts(session: KubeSession, workload: WorkloadRecord | None, pod: ServedPod | None = None,
                   outcome: str | None = None) -> UsageFacts:
    """The usage facts of the gate's resource × image ``workload`` (its record in ``session.workloads``; None:
    no record was made): of ``pod`` when given, else of its latest pod in the run's watch, else of the manifest
    alone (not created, or no pod yet: requests and submission time only). ``outcome`` overrides the pod's."""
    if pod is None and workload is not None:
        pods = session.pods().by_key(workload.probe)
        pod = pods[-1] if pods else None
    submitted = workload.submitted_at if workload is not None else None
    if pod is not None:
        facts = pod_facts(session, parse_pod(pod), submitted)
    else:
        body = workload.body if workload is not None else None
        requests = (requests_of(body) or {}) if body is not None else {}
        kind = str((workload.kind if workload is not None else None) or "pod")
        name = workload.name if workload is not None else None
        facts = {"workload": f"{kind.lower()}/{session.namespace}/{name}",
                 "object": kind, "name": name,
                 "namespace": session.namespace, "tenant": None, "requests": dict(requests),
                 "submitted": submitted, "attempts": 1, "outcome": "pending"}
    if outcome is not None:
        facts["outcome"] = outcome
    return facts


def exec_facts(session: KubeSession, workload: WorkloadRecord, begun: float, ended: float) -> UsageFacts:
    """The usage facts of one model run exec'd in ``workload``'s pod from ``begun`` to ``ended`` (epoch s):
    the pod's requests over the run's wall time, counted for the model (object ``exec``, ``within`` the pod,
    so the pod is not counted twice for its namespace)."""
    pod = workload_facts(session, workload)
    return {"workload": f"exec/{session.namespace}/{workload.pod}/{uuid.uuid4().hex[:8]}", "object": "exec",
            "within": pod["workload"], "name": workload.pod, "namespace": session.namespace,
            "tenant": None, "requests": pod["requests"], "started": begun, "ended": ended, "released": ended,
            "attempts": 1, "simulated": pod.get("simulated", False)}
