"""Startup of the resource × image workload pod: wait until its container runs, or say why not.

Startup waits (on the pod watch) until the workload container runs, or a container state says it
will not: waiting ``ErrImagePull``/``ImagePullBackOff``/``InvalidImageName``/
``CreateContainerConfigError``/``CreateContainerError``/``RunContainerError``/``CrashLoopBackOff``,
terminated (``OOMKilled``, exit codes; for a pod the kubelet restarts, only when no restart follows
within :data:`RESTART_GRACE_S`, so a crash loop reads as the kubelet's ``CrashLoopBackOff``), or a
kubelet rejection (pod ``Failed``, e.g. ``UnexpectedAdmissionError`` when a device plugin's
Allocate fails). The failure message quotes the kubelet's reason and message. Reasons are
normalised by :func:`pytest_hetero.pending.explain`; the pod status, its events and logs are kept.
The device-initialisation payload then runs through ``pods/exec`` (the engine's run verb).

On a KWOK-simulated node (annotation ``kwok.x-k8s.io/node: fake``) container states come from KWOK
stages, no image is pulled, and exec runs on the KWOK host, not in the image: evidence says so in
``startup.simulation`` and every exec record carries ``simulated: true``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

from kubernetes import client

from pytest_hetero.backends.kubernetes import nodes as kube_node
from pytest_hetero.backends.kubernetes import scheduling as ks
from pytest_hetero.backends.kubernetes import submit
from pytest_hetero.backends.kubernetes.manifests import ServedPod
from pytest_hetero.backends.kubernetes.objects import NO_STATUS, Pod, parse_event, parse_pod, unseen_pod
from pytest_hetero.backends.protocol import ActionFailed, ImageIdentity, Placement, Started, StartedOn, Step
from pytest_hetero.pending import summarise
from pytest_hetero.pending.model import Reason
from pytest_hetero.pending.startup import pull_category

if TYPE_CHECKING:
    from pytest_hetero.backends.kubernetes.session import KubeSession

STUCK = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
        "ErrImageNeverPull",
    }
)
"""Waiting reasons after which the container will not start by itself."""


RESTART_GRACE_S = 20.0
"""Seconds a terminated container of a ``restartPolicy: Always`` pod is given to be restarted before
its termination is the verdict: a real kubelet restarts it at once and, when it ends again, says
``CrashLoopBackOff`` (with the last exit kept in ``lastState``), which is the class reported then."""


RESTARTED_UNEXPLAINED = frozenset({"container_exit_nonzero", "container_exited"})
"""Categories of a stopped container that a restart can still turn into the kubelet's own verdict (a crash loop):
:func:`stopped` waits up to :data:`RESTART_GRACE_S` for it."""
STOP_SETTLE_S = 5.0
"""Seconds an exec into the workload pod that ended without an exit status waits for the pod's status to
show why (the kubelet reports a container's stop within a relist or two, ~1–2 s here)."""


def restart_count(pod: Pod) -> int:
    """The sum of the restart counts of ``pod``'s containers."""
    return sum(s.restart_count for s in pod.container_statuses)


def verdict(pods: list[ServedPod], restart_grace: bool = False) -> tuple[str, ServedPod] | None:
    """``("running", pod)``, ``("failed", pod)`` or None (still starting) for the workload's pods (JSON dicts
    as the pod watch keeps them, read through :func:`~.objects.parse_pod`; the pod is returned as given).

    A terminated container of a pod the kubelet restarts (``restartPolicy: Always``) is final only with
    ``restart_grace`` (its grace ran out, see :data:`RESTART_GRACE_S`); a waiting reason in
    :data:`STUCK`, a terminated container of any other pod, or pod phase Failed/Succeeded is final."""
    for raw in pods:
        pod = parse_pod(raw)
        if pod.deleted:
            continue
        statuses = pod.container_statuses
        restarts = pod.restart_policy == "Always"
        if pod.phase in ("Failed", "Succeeded"):
            return "failed", raw
        for entry in statuses:
            if entry.waiting is not None and entry.waiting.reason in STUCK:
                return "failed", raw
            if entry.terminated and (restart_grace or not restarts):
                return "failed", raw
        if pod.phase == "Running" and statuses and all(e.running for e in statuses):
            return "running", raw
    return None


def terminated_seen(pods: list[ServedPod]) -> bool:
    """True when a live pod (JSON dict) has a container in the terminated state (it may be restarted)."""
    return any(e.terminated for p in map(parse_pod, pods) if not p.deleted for e in p.container_statuses)


def waiter(grace_s: float = RESTART_GRACE_S) -> Callable[[list[ServedPod]], tuple[str, ServedPod] | None]:
    """A ``PodWatch.wait`` predicate: :func:`verdict`, with the restart grace counted from the first
    time a terminated container was seen (``grace_s`` seconds)."""
    first: list[float] = []

    def done(pods: list[ServedPod]) -> tuple[str, ServedPod] | None:
        if terminated_seen(pods) and not first:
            first.append(time.monotonic())
        return verdict(pods, restart_grace=bool(first) and time.monotonic() - first[0] >= grace_s)

    return done


def state_text(pod: Pod) -> str:
    """What the kubelet says of the workload pod in one line: the pod's phase reason and message
    (kubelet admission: ``UnexpectedAdmissionError``), else the first container's waiting reason and
    message, or its terminated reason and exit code (the last one before a restart when waiting)."""
    if pod.reason:
        return f"pod {pod.phase}, {pod.reason}: {pod.message or ''}".rstrip(": ")
    for entry in pod.container_statuses:
        ended = entry.ended or entry.last_ended
        code = f"{ended.reason}, exit {ended.exit_code}" if ended else ""
        waiting = entry.waiting
        if waiting is not None:
            after = f" (last: {code}; {entry.restart_count} restarts)" if entry.last_ended else ""
            return f"{waiting.reason}: {waiting.message or ''}".rstrip(": ") + after
        if ended is not None and code:
            return f"terminated {code}" + (f": {ended.message}" if ended.message else "")
    return f"phase {pod.phase}"


class ImageFacts(TypedDict):
    """The workload container's image as the node reports it: ``image``, ``image_id`` (``imageID``), and
    ``digest`` (the part after ``@``, else the whole id); None where the node reports none."""

    image: str | None
    image_id: str | None
    digest: str | None


def image_identity(pod: Pod) -> ImageFacts:
    """``{"image", "image_id", "digest"}`` of the workload container as the node reports it."""
    entry = pod.container_statuses[0] if pod.container_statuses else NO_STATUS
    image_id = str(entry.image_id or "")
    return {
        "image": entry.image,
        "image_id": image_id or None,
        "digest": image_id.split("@", 1)[1] if "@" in image_id else (image_id or None),
    }


KUBELET_NO_LOG = "unable to retrieve container logs for "
"""How the kubelet's body begins when the runtime does not know the container asked for (kuberuntime
``GetContainerLogs``)."""
LOG_TRIES = 3
LOG_RETRY_S = 1.0


def read_logs(core: client.CoreV1Api, namespace: str, pod: str, previous: bool = False,
              container: str = "workload") -> str:
    """The last 2,000 lines of ``container``'s log, or a line saying why there is none (never raises).

    The kubelet answers 200 with the body ``unable to retrieve container logs for <id>`` (that one line, nothing
    else: a container's own log that begins with it is its log) when the runtime does not know the container at
    that moment (a crash-looping container's previous instance being replaced): the read is
    tried :data:`LOG_TRIES` times, :data:`LOG_RETRY_S` apart, and the kubelet's words are kept in the line saying
    why there is no log, never passed off as the container's output."""
    said = ""
    for attempt in range(LOG_TRIES):
        if attempt:
            time.sleep(LOG_RETRY_S)
        try:
            text = core.read_namespaced_pod_log(
                pod, namespace, container=container, previous=previous, tail_lines=2000, _request_timeout=30
            )
        except Exception as exc:  # noqa: BLE001 - logs are evidence, not a verdict
            return f"(logs unavailable: {getattr(exc, 'status', '')} {getattr(exc, 'reason', exc)})"
        text = "" if text is None else str(text)
        said_only = text.strip()
        if not (said_only.startswith(KUBELET_NO_LOG) and "\n" not in said_only):  # the kubelet's one line, alone
            return text
        said = text.strip()[:300]
    return f"(logs unavailable: the kubelet said {said!r} {LOG_TRIES} times)"


def start(session: KubeSession, ctx: Step, pinned: str | None = None) -> Started:
    """Wait until the item's workload container runs (placing it first when no scheduling item did;
    ``pinned``: the workload pinned to that node); record ``startup.pod`` (image digest as the node reports
    it) and ``startup.simulation`` on a KWOK node; return the Started pod (its node's facts, the image
    identity as the node reports it).

    Raises EngineUnavailable ``node_not_ready`` (:func:`.nodes.ensure_ready`) when the pod's node is
    not Ready; ActionFailed with the category of the normalised reasons (:func:`startup_category`) when the pod will not
    start (``container_exited``/``startup_timeout``, platform, when nothing explains it), or with the
    decisive Pending reason when it could not be placed.
    """
    key = submit.workload_key(ctx.resource.name, ctx.image.name, pinned)
    workload = session.workloads.get(key)
    if workload is None or workload.pod is None:
        if pinned is None:
            ctx.record("startup.note", message="no placed workload from a scheduling item; submitted here")
        session.pods()
        placed = submit.place(session, ctx, ctx.timeout_s, pinned)
        if isinstance(placed, Placement):
            code = placed.decisive["code"] if placed.decisive else None
            raise ActionFailed(placed.message, code or "scheduling_timeout")
        workload = session.workloads[key]
    found = session.pods().wait(workload.probe, waiter(), ctx.timeout_s)
    pods = session.pods().by_key(workload.probe)
    pod: ServedPod = found[1] if found else (pods[-1] if pods else unseen_pod(workload.pod or ""))
    seen = parse_pod(pod)
    name = seen.name
    facts, why = session.nodes.get(seen.node_name), session.unread_nodes.get(seen.node_name)
    node = seen.node_name if facts is not None or why is not None else None
    simulated = session.simulated(seen.node_name)
    session.restarts[name] = restart_count(seen)
    ident = image_identity(seen)
    if ident["digest"]:
        session.digests[ctx.image.name] = ident["digest"]
    ctx.record(
        "startup.pod",
        pod=name,
        node=node,
        phase=seen.phase,
        pinned_to=pinned,
        container_statuses=seen.served_container_statuses,
        **ident,
        declared_digest=ctx.image.digest,
    )
    if simulated:
        ctx.record(
            "startup.simulation",
            node=node,
            simulated=[
                "container state (KWOK stage)",
                "image pull (none)",
                "exec (runs on the KWOK host, not in the image)",
            ],
            real=["apiserver admission", "scheduler placement", "pod status/events", "exec/log API path"],
        )
    kube_node.ensure_ready(session, ctx, workload, seen.node_name)
    if found is None or found[0] == "failed":
        startup_failed(session, ctx, pod, found is None)
    where = "the KWOK host (simulated node: not inside the image)" if simulated else f"pod {name}"
    identity = ImageIdentity(digest=ident["digest"], known=(ident["digest"] or "",),
                             what=f"image {ctx.image.reference}")
    return Started(name=name, handle=name, where=where, simulated=simulated, identity=identity,
                   node=None if node is None else StartedOn(node, facts))


def startup_failed(
    session: KubeSession, ctx: Step, pod: ServedPod, timed_out: bool
) -> None:
    """Record ``startup.failed`` for ``pod`` (JSON dict: reasons, events, the container log) and raise
    ActionFailed with the category of its reasons (:func:`startup_category`; ``container_exited`` /
    ``startup_timeout`` when no reason explains it); the message states the facts, the owner is the
    failure table's. Never returns.
    """
    name = pod["metadata"]["name"]
    events = ks.events_for(session.api, session.namespace, name)
    reasons = ks.explain_pending([pod], events, [], None)
    seen = parse_pod(pod)
    restarted = any(s.restart_count for s in seen.container_statuses)
    ctx.artifact("container.log", read_logs(session.core, session.namespace, name, previous=restarted))
    ctx.record(
        "startup.failed",
        pod=name,
        timed_out=timed_out,
        reasons=[r.to_dict() for r in reasons],
        events=[parse_event(e).brief() for e in events],
    )
    phase = seen.phase
    if not reasons and phase in ("Succeeded", "Failed"):
        raise ActionFailed(
            f"pod {name} ended ({phase}) instead of idling for the layers after it (a Job's pod "
            "completed? on KWOK the pod-complete stage ends Job pods at once)",
            "container_exited")
    if not reasons:
        raise ActionFailed(
            f"pod {name} not running after {ctx.timeout_s:g} s (phase {phase})",
            "startup_timeout")
    raise ActionFailed(f"pod {name} did not start: {state_text(seen)} ({summarise(reasons, facts_only=True)})",
                       startup_category(reasons))


def stopped(session: KubeSession, name: str, when: str, settle_s: float = 0.0) -> ActionFailed | None:
    """The fault of workload pod ``name`` when its container stopped or restarted since startup saw it
    running (an exec into it then gives no report: the stop is the fact, as on Docker), else None.

    The pod is read from the apiserver until a stop shows or ``settle_s`` seconds passed. The fault's
    category is that of the pod's normalised reasons (:func:`startup_category`: an OOM kill is
    ``startup_oom_killed``), ``container_exited`` when none explains it, ``container_removed`` when
    the pod is gone. None too when the pod cannot be read (the exec's own result then stands). A stop that only
    says the container exited (:data:`RESTARTED_UNEXPLAINED`) in a pod the kubelet restarts is read again for up
    to :data:`RESTART_GRACE_S` (the grace :func:`waiter` gives startup) so the kubelet's own verdict, a crash loop,
    is the category whatever the timing.
    """
    deadline = time.monotonic() + settle_s
    first_stop: float | None = None
    while True:
        try:
            raw = session.core.read_namespaced_pod(name, session.namespace, _request_timeout=30)
        except client.ApiException as exc:
            if exc.status == 404:
                return ActionFailed(f"pod {name} disappeared {when}", "container_removed")
            return None
        except Exception:  # noqa: BLE001 - unreadable: the exec's own result stands
            return None
        pod: ServedPod = session.core.api_client.sanitize_for_serialization(raw)
        seen = parse_pod(pod)
        running = bool(seen.container_statuses) and all(e.running for e in seen.container_statuses)
        if running and restart_count(seen) <= session.restarts.get(name, 0):
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.5)
            continue
        reasons = ks.explain_pending([pod], ks.events_for(session.api, session.namespace, name), [], None)
        category = startup_category(reasons) if reasons else "container_exited"
        if category in RESTARTED_UNEXPLAINED and seen.restart_policy == "Always":
            # a plain non-zero exit the kubelet will restart: its own verdict (CrashLoopBackOff, with the last
            # exit) comes within the restart grace, as startup's wait gives it (the same fact, the same category,
            # whether the exit came before startup saw the container running or during its check)
            first_stop = time.monotonic() if first_stop is None else first_stop
            if time.monotonic() - first_stop < RESTART_GRACE_S:
                time.sleep(0.5)
                continue
        if not reasons:
            return ActionFailed(f"pod {name}'s container stopped {when}: {state_text(seen)}", "container_exited")
        return ActionFailed(f"pod {name}'s container stopped {when}: {state_text(seen)} "
                            f"({summarise(reasons, facts_only=True)})", category)


def startup_category(reasons: list[Reason]) -> str:
    """The category of a pod that did not start, from its normalised reasons (decisive first): a crash
    loop is named by its cause when one is known (a driver/runtime error behind a CrashLoopBackOff is
    that error, the same fact Docker reports), and an OOM kill before any model code ran is
    ``startup_oom_killed`` (the same category Docker's startup gives it); an image pull failure is
    named by its cause (:func:`pytest_hetero.pending.startup.pull_category`), as Docker names it; a
    container whose program is not in the image (``command_not_found``: the gate's shell) is
    ``interpreter_missing``, as Docker's startup names it."""
    first = reasons[0]
    if first.code == "crash_loop":
        first = next((r for r in reasons[1:] if r.code not in ("crash_loop", "container_exit_nonzero")), first)
    if first.code == "image_pull_failed":
        return first.cause or pull_category(f"{first.message} {first.detail.get('state_reason', '')}")
    if first.cause == "command_not_found":
        return "interpreter_missing"
    return "startup_oom_killed" if first.code == "oom_killed" else first.code
