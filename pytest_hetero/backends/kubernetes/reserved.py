"""Reserved capacity for critical inference: a serving Deployment loaded while a training burst fills its pool.

The engine half of a ``reserved-inference`` governance probe (:mod:`pytest_hetero.layers.reserved` judges it):

1. reads the PriorityClasses ``reserve.priority_class`` (serving; optional) and ``reserve.burst.priority_class``
   (value, preemption policy); the platform creates them, the probe never does (a missing one: ActionFailed
   ``configuration``);
2. deploys the served model as Deployment + Service ``hetero-reserve-<probe>-<random>`` (the serving container
   contract of :mod:`.serving`, ``reserve.replicas`` replicas, the resource's requests, the serving
   PriorityClass), as the tenant ``as`` (else the gate) in its namespace, and waits for the rollout and a ready
   endpoint (:func:`.serving.wait_rolled_out`);
3. loads it (the layer's ``measure``) for :data:`BEFORE_WINDOWS` windows, creates ``reserve.burst.pods`` burst
   Pods (the resource's requests, the burst PriorityClass, the image idling), then loads it window after window
   for ``reserve.duration``; each window is sent to the ready endpoints of the Service's EndpointSlice as they
   are when the window starts (a client following the endpoints as kube-proxy does, one window late);
4. meanwhile a watcher thread lists the probe's pods every :data:`POLL_S` seconds and notes each change
   (created, scheduled, nominated, unschedulable with the scheduler's message, Ready, not Ready, deleting with its
   DisruptionTarget condition, gone); once the burst window ends the namespace's events of those pods
   (``Preempted``, ``Killing``, ``FailedScheduling``, ``Scheduled``…) join the timeline;
5. deletes the burst pods, the Deployment (foreground: gone once its pods are) and the Service, and waits
   until each is gone (a leftover is reported, never hidden).

A serving pod removed before the cleanup began is a victim of the burst: the layer reads ``victims``; the
scheduler's ``Preempted`` event names the preemptor by UID, mapped back to the burst pod's name.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from datetime import datetime
from typing import Any, TypedDict, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import scheduling as ks
from pytest_hetero.backends.kubernetes import serving as kube_serving
from pytest_hetero.backends.kubernetes import tenancy
from pytest_hetero.backends.kubernetes.manifests import DeploymentManifest, ServiceManifest
from pytest_hetero.backends.kubernetes.session import KubeSession
from pytest_hetero.backends.labels import LABEL
from pytest_hetero.backends.protocol import (
    ActionFailed,
    BurstPod,
    CleanupRecord,
    Leftover,
    Measure,
    PriorityFacts,
    ReserveEvent,
    ReserveReport,
    ReserveVictim,
    ServingRequest,
    Step,
    UsageFacts,
    WindowStats,
)
from pytest_hetero.matrix.model import GovernanceProbe, Image, Resource

POLL_S = 0.5
"""Seconds between two listings of the probe's pods (the timeline's resolution for what it observes)."""
BEFORE_WINDOWS = 2
"""Load windows before the burst starts (the service's latency without the burst, for comparison)."""
EVENT_REASONS = frozenset({"Preempted", "Killing", "FailedScheduling", "Scheduled", "Started", "Unhealthy",
                           "FailedPreStopHook", "Evicted", "TaintManagerEviction"})
"""Event reasons of the probe's pods kept in the timeline."""
GONE_WAIT_S = 60.0
MANAGED_BY = "endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io"
"""Label selector of the EndpointSlices kube-controller-manager's endpoint-slice controller writes for a Service."""


@dataclasses.dataclass(frozen=True)
class _Shim:
    """The two things :func:`.serving.manifests` reads of a step: the resource and the image."""

    resource: Resource
    image: Image


class Burst(TypedDict):
    """The burst of a reserved-inference probe: its pods' ``priority_class`` and how many ``pods``."""

    priority_class: str
    pods: int


class ReserveSettings(TypedDict):
    """``probe.reserve`` with defaults and durations in seconds (see :func:`settings`)."""

    model: str
    dataset: str | None
    priority_class: str | None
    replicas: int
    min_ready: int
    burst: Burst
    p95_ms: float
    max_error_rate: float
    window_s: float
    duration_s: float


def settings(probe: GovernanceProbe) -> ReserveSettings:
    """``probe.reserve`` with defaults and durations in seconds: ``model``, ``dataset`` (None: the matrix's
    first), ``priority_class`` (None), ``replicas``, ``min_ready`` (default replicas), ``burst`` (``priority_class``,
    ``pods``), ``p95_ms``, ``max_error_rate`` (0), ``window_s`` (2), ``duration_s`` (20)."""
    r = probe.reserve
    assert r is not None  # the matrix check requires reserve of a reserved-inference probe  # noqa: S101
    return {"model": r.model, "dataset": r.dataset, "priority_class": r.priority_class, "replicas": r.replicas,
            "min_ready": r.min_ready, "burst": {"priority_class": r.burst["priority_class"], "pods": r.burst["pods"]},
            "p95_ms": r.p95_ms, "max_error_rate": r.max_error_rate, "window_s": r.window_s, "duration_s": r.duration_s}


def priority_class(api: client.ApiClient, name: str | None) -> PriorityFacts | None:
    """``{"name", "value", "preemption_policy", "global_default"}`` of PriorityClass ``name`` (None for None).
    ActionFailed ``configuration`` when it does not exist."""
    if name is None:
        return None
    try:
        pc: Any = client.SchedulingV1Api(api).read_priority_class(name, _request_timeout=kc.API_TIMEOUT_S)
    except ApiException as exc:
        if exc.status == 404:
            raise ActionFailed(f"PriorityClass {name} does not exist: the platform creates the PriorityClasses the "
                               "reserved-inference probe names (reserve.priority_class, reserve.burst.priority_class)",
                               "configuration") from None
        raise kc.api_outcome(exc, f"read PriorityClass {name}") from None
    return {"name": name, "value": int(pc.value), "preemption_policy": pc.preemption_policy,
            "global_default": bool(pc.global_default)}


def _epoch(stamp: Any) -> float | None:
    """Epoch seconds of an RFC 3339 time (``2026-12-02T13:50:01.123456Z``), None when absent or unreadable."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))


def _unschedulable(pod: Any) -> str | None:
    for c in pod.status.conditions or []:
        if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
            return str(c.message or "Unschedulable")
    return None


@dataclasses.dataclass
class PodState:
    """What the last listing showed of one pod: its ``node`` (None: unbound), ``ready``, ``deleting`` (a
    deletion timestamp), the ``nominated`` node, the scheduler's ``unschedulable`` message, and ``gone``
    (absent from a listing after it was seen)."""

    node: str | None = None
    ready: bool = False
    deleting: bool = False
    nominated: str | None = None
    unschedulable: str | None = None
    gone: bool = False


class Watcher(threading.Thread):
    """Lists the probe's pods (``selectors``: role → label selector) every :data:`POLL_S` seconds and notes
    every change (see the module docstring); ``ready`` holds ``(epoch, serving pods Ready and not deleting)``
    per listing. Never raises: a listing that fails is noted once per error text."""

    def __init__(self, api: client.ApiClient, namespace: str, selectors: dict[str, str]) -> None:
        super().__init__(daemon=True, name="hetero-reserve-watch")
        self.core, self.namespace, self.selectors = client.CoreV1Api(api), namespace, selectors
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.state: dict[str, PodState] = {}
        self.roles: dict[str, str] = {}
        self.uids: dict[str, str] = {}
        self.notes: list[ReserveEvent] = []
        self.ready: list[tuple[float, int]] = []
        self.errors: list[str] = []

    def run(self) -> None:
        """Poll until :meth:`stop`; an error that is not a listing's is noted and ends the watch (the windows
        after it have no listing: the layer judges them unobserved)."""
        while True:
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - noted: the windows without a listing say the rest
                with self.lock:
                    self.errors.append(f"the watch stopped: {type(exc).__name__}: {exc}"[:300])
                return
            if self.halt.wait(POLL_S):
                return

    def stop(self) -> None:
        """Stop polling and wait for the thread; one last listing is made."""
        self.halt.set()
        self.join(timeout=30)
        self.poll()

    def note(self, t: float, pod: str, what: str, message: str = "") -> ReserveEvent:
        """Add one observed change; the entry (its facts are added to it)."""
        entry: ReserveEvent = {"t": round(t, 3), "pod": pod, "role": self.roles.get(pod, ""), "what": what,
                               "source": "observed", "message": message}
        self.notes.append(entry)
        return entry

    def poll(self) -> None:
        """One listing of every role's pods; notes the changes since the last one."""
        now = time.time()
        with self.lock:
            ready = 0
            for role, selector in self.selectors.items():
                try:
                    pods: list[Any] = self.core.list_namespaced_pod(self.namespace, label_selector=selector,
                                                                    _request_timeout=kc.API_TIMEOUT_S).items
                except Exception as exc:  # noqa: BLE001 - noted, the next listing tries again
                    text = f"{type(exc).__name__}: {exc}"[:300]
                    if text not in self.errors:
                        self.errors.append(text)
                    return
                live = set()
                for pod in pods:
                    name = pod.metadata.name
                    live.add(name)
                    self.roles[name], self.uids[pod.metadata.uid] = role, name
                    self._changes(now, name, pod)
                    if role == "serving" and self.state[name].ready and not self.state[name].deleting:
                        ready += 1
                for name, st in self.state.items():
                    if self.roles.get(name) == role and name not in live and not st.gone:
                        st.gone = True
                        self.note(now, name, "gone")
            self.ready.append((now, ready))

    def _changes(self, now: float, name: str, pod: Any) -> None:
        new = PodState(node=pod.spec.node_name, ready=_ready(pod), deleting=pod.metadata.deletion_timestamp is not None,
                       nominated=pod.status.nominated_node_name, unschedulable=_unschedulable(pod))
        old = self.state.get(name)
        if old is None:
            made = pod.metadata.creation_timestamp
            created = self.note(now, name, "created")
            created["priority"] = pod.spec.priority
            created["created_at"] = made.timestamp() if isinstance(made, datetime) else None
            old = PodState()
        if new.node and new.node != old.node:
            self.note(now, name, "scheduled")["node"] = new.node
        if new.nominated and new.nominated != old.nominated:
            self.note(now, name, "nominated")["node"] = new.nominated
        if new.unschedulable and not old.unschedulable:
            self.note(now, name, "unschedulable", new.unschedulable)
        if new.ready != old.ready:
            self.note(now, name, "ready" if new.ready else "not-ready")
        if new.deleting and not old.deleting:
            cond = [{"reason": c.reason, "message": c.message} for c in pod.status.conditions or []
                    if c.type == "DisruptionTarget"]
            message = "; ".join(f"{c['reason']}: {c['message']}" for c in cond)
            self.note(now, name, "deleting", message)["disruption"] = cond
        self.state[name] = new

    def ready_min(self, start: float, end: float) -> int | None:
        """Fewest serving pods Ready (and not deleting) in a listing between ``start`` and ``end`` (epoch)."""
        with self.lock:
            seen = [n for t, n in self.ready if start <= t <= end]
        return min(seen) if seen else None


def ready_endpoints(api: client.ApiClient, namespace: str, name: str) -> list[tuple[str, str]]:
    """``[(pod name, "http://IP:PORT")]`` of the ready endpoints of Service ``name``'s EndpointSlices that the
    endpoint-slice controller manages (label ``endpointslice.kubernetes.io/managed-by``: a hand-made slice carrying
    the Service's name, which whoever may create EndpointSlices in the namespace can add, is not followed)."""
    slices = client.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={name},{MANAGED_BY}",
        _request_timeout=kc.API_TIMEOUT_S).items
    out = []
    for sl in slices:
        port = next((p.port for p in sl.ports or [] if p.name == "http"), None)
        for ep in sl.endpoints or []:
            if port and ep.conditions is not None and ep.conditions.ready and ep.addresses:
                out.append((str(ep.target_ref.name if ep.target_ref else ""), f"http://{ep.addresses[0]}:{port}"))
    return sorted(out)


def events(api: client.ApiClient, namespace: str, pods: dict[str, str], uids: dict[str, str]) -> list[ReserveEvent]:
    """Timeline entries of the namespace's events (reasons in :data:`EVENT_REASONS`) about ``pods`` (name →
    role); a ``Preempted`` event's ``by`` is the pod whose UID (or name) its message names. ``resolution_s``: the
    event's time precision (the scheduler's events carry ``eventTime``, microseconds; the kubelet's ``Killing``,
    ``Started``, ``Unhealthy`` only ``firstTimestamp``, whole seconds, so one may read up to 1 s early). Best
    effort: [] when events cannot be read."""
    try:
        found: Any = client.CoreV1Api(api).list_namespaced_event(namespace, _request_timeout=kc.API_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - events are best effort; the observed changes carry the verdict
        return []
    out = []
    for e in found.items:
        obj = e.involved_object
        if obj is None or obj.kind != "Pod" or obj.name not in pods or e.reason not in EVENT_REASONS:
            continue
        when = e.event_time or e.first_timestamp or e.last_timestamp
        t = when.timestamp() if isinstance(when, datetime) else _epoch(when)
        entry: ReserveEvent = {"t": round(t, 3) if t else None, "pod": obj.name, "role": pods[obj.name],
                               "resolution_s": 1e-6 if e.event_time else 1.0,
                               "what": e.reason, "source": "event", "message": str(e.message or ""),
                               "count": e.count or 1, "reporter": (e.reporting_component or
                                                                   (e.source.component if e.source else "") or "")}
        if e.reason == "Preempted":
            entry["by"] = next((n for u, n in uids.items() if u in entry["message"] or f"/{n} " in entry["message"]
                                or entry["message"].endswith(f"/{n}")), None)
        out.append(entry)
    return out


def _create(identity: tenancy.Identity, body: DeploymentManifest | ServiceManifest) -> None:
    kind, ns = body["kind"], body["metadata"]["namespace"]
    try:
        if kind == "Deployment":
            client.AppsV1Api(identity.api).create_namespaced_deployment(
                ns, body, _request_timeout=kc.API_TIMEOUT_S)  # type: ignore[arg-type]  # a manifest dict, sent as it is
        else:
            client.CoreV1Api(identity.api).create_namespaced_service(
                ns, body, _request_timeout=kc.API_TIMEOUT_S)  # type: ignore[arg-type]  # a manifest dict, sent as it is
    except ApiException as exc:
        raise kc.api_outcome(exc, f"create {kind} {body['metadata']['name']} in namespace {ns} as "
                                  f"{identity.subject}") from None


def _remove(api: client.ApiClient, namespace: str, name: str) -> tuple[list[CleanupRecord], list[Leftover]]:
    """Delete the Deployment (foreground) and Service ``name`` and wait until both are gone. Never raises."""
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    calls: dict[str, tuple[Any, Any]] = {
        "deployment": (lambda: apps.delete_namespaced_deployment(name, namespace, propagation_policy="Foreground",
                                                                 _request_timeout=kc.API_TIMEOUT_S),
                       lambda: apps.read_namespaced_deployment(name, namespace, _request_timeout=kc.API_TIMEOUT_S)),
        "service": (lambda: core.delete_namespaced_service(name, namespace, _request_timeout=kc.API_TIMEOUT_S),
                    lambda: core.read_namespaced_service(name, namespace, _request_timeout=kc.API_TIMEOUT_S))}
    left: list[Leftover] = []
    for kind, (delete, _) in calls.items():
        try:
            delete()
        except ApiException as exc:
            if exc.status != 404:
                left.append(Leftover(kind, name, f"delete refused: HTTP {exc.status}: {kc.status_message(exc)}",
                                     namespace))
        except Exception as exc:  # noqa: BLE001 - reported as a leftover
            left.append(Leftover(kind, name, f"delete failed: {type(exc).__name__}: {exc}", namespace))
    deadline = time.monotonic() + GONE_WAIT_S
    records: list[CleanupRecord] = []
    for kind, (_, read) in calls.items():
        gone = False
        while not gone:
            try:
                read()
            except ApiException as exc:
                gone = exc.status == 404
            except Exception:  # noqa: BLE001, S110 - keep trying until the deadline
                pass
            if gone or time.monotonic() >= deadline:
                break
            time.sleep(tenancy.POLL_S)
        records.append({"kind": kind, "namespace": namespace, "name": name, "gone": gone})
        if not gone and not any(x.kind == kind for x in left):
            left.append(Leftover(kind, name, f"still present {GONE_WAIT_S:g} s after deletion", namespace))
    return records, left


def probe(session: KubeSession, step: Step, probe: GovernanceProbe, request: ServingRequest,
          measure: Measure) -> ReserveReport:
    """Carry out a reserved-inference probe (see the module docstring). Raises ActionFailed ``configuration``
    for a PriorityClass that does not exist, ``preemption_not_exercised`` for a burst class that never preempts
    (``preemptionPolicy: Never``), both before anything is created; the serving layer's ``endpoint_not_ready``
    (:class:`.serving.NotReady`, with the kubelet's reason) when the Deployment never becomes ready, the API's
    outcome of a refused create; whatever it created is removed in every case."""
    conf = settings(probe)
    api = session.api
    classes = {"serving": priority_class(api, conf["priority_class"]),
               "burst": priority_class(api, conf["burst"]["priority_class"])}
    burst_class = classes["burst"]
    if burst_class is not None and burst_class["preemption_policy"] == "Never":
        raise ActionFailed(f"PriorityClass {conf['burst']['priority_class']} of the burst "
                           "(reserve.burst.priority_class) has preemptionPolicy Never: its pods never ask to preempt, "
                           "so the reservation would not be tested; name a class with preemptionPolicy "
                           "PreemptLowerPriority (the training workloads' class)", "preemption_not_exercised")
    tenant = step.matrix.tenant(probe.acting_as) if probe.acting_as else None
    identity = tenancy.act_as(api, tenant, session.namespace)
    ns, tag = identity.namespace, uuid.uuid4().hex[:5]
    name = kc.dns_name("hetero-reserve", probe.name, limit=50) + f"-{tag}"
    image = step.matrix.image(probe.image) if probe.image else step.matrix.images[0]
    resource = dataclasses.replace(step.resource, priority_class=conf["priority_class"])
    bodies = kube_serving.manifests(session, cast(Step, _Shim(resource, image)), request, ns, name)
    deployment = next(b for b in bodies if b["kind"] == "Deployment")
    deployment["spec"]["replicas"] = conf["replicas"]
    deployment["spec"]["template"]["spec"].setdefault("terminationGracePeriodSeconds", 2)
    group = f"{name}-burst"
    selectors = {"serving": ",".join(f"{k}={v}" for k, v in deployment["spec"]["selector"]["matchLabels"].items()),
                 "burst": f"{LABEL}probe={group}"}
    report = ReserveReport(serving={"deployment": name, "namespace": ns, "replicas": conf["replicas"],
                                    "min_ready": conf["min_ready"], "priority_class": classes["serving"],
                                    "image": image.reference, "identity": identity.subject},
                           burst={"priority_class": classes["burst"], "requested": conf["burst"]["pods"],
                                  "requests": dict(resource.requests)})
    created = tenancy.Created()
    watcher = Watcher(api, ns, selectors)
    deployed = False
    try:
        for body in (b for b in bodies if b["kind"] in ("Deployment", "Service")):
            _create(identity, body)
            deployed = True
        try:
            _, facts = kube_serving.wait_rolled_out(session, ns, name, request.ready_timeout_s, "endpoint_not_ready")
        except kube_serving.NotReady as exc:
            kube_serving.keep_not_ready(step, exc)  # the kubelet's account and the server's log tail
            raise
        report.serving["ready"] = facts
        watcher.start()
        _run(session, step, conf, report, watcher, identity, created, ns, name, group, image, measure)
    finally:
        if watcher.is_alive():
            watcher.stop()
        begun = time.time()
        report.cleanup, report.leftovers = tenancy.delete_all(api, created)
        if deployed:
            records, left = _remove(api, ns, name)
            report.cleanup += records
            report.leftovers += left
        report.serving["cleanup_began"] = round(begun, 3)
        report.usage = held(watcher, report, ns, dict(step.resource.requests), time.time())
    return report


@dataclasses.dataclass
class FirstSeen:
    """When the watcher first noted a pod (epoch s, None: never): ``created`` (its creationTimestamp, else the
    note's time), ``scheduled`` and ``gone``."""

    created: float | None = None
    scheduled: float | None = None
    gone: float | None = None


def held(watcher: Watcher, report: ReserveReport, namespace: str, requests: dict[str, str], gone_at: float
         ) -> list[UsageFacts]:
    """Usage facts of every pod the watcher saw (:data:`~pytest_hetero.backends.protocol.USAGE_FACTS` and
    ``role``): submitted at its creationTimestamp, placed when seen scheduled, released when seen gone, else at
    ``gone_at`` (its deletion confirmed by the cleanup; None when it is a leftover); outcome ``refused`` (never
    placed), ``failed`` (a serving victim of the burst) or ``completed`` (held until the probe removed it)."""
    first: dict[str, FirstSeen] = {}
    for note in watcher.notes:  # the watcher's own notes: each has a time
        at = first.setdefault(note["pod"], FirstSeen())
        if note["what"] == "created" and at.created is None:
            at.created = note.get("created_at") or note["t"]
        elif note["what"] == "scheduled" and at.scheduled is None:
            at.scheduled = note["t"]
        elif note["what"] == "gone" and at.gone is None:
            at.gone = note["t"]
    victims = {v["pod"] for v in report.victims}
    left = bool(report.leftovers)
    out: list[UsageFacts] = []
    for pod, role in sorted(watcher.roles.items()):
        at = first.get(pod) or FirstSeen()
        placed = at.scheduled
        out.append({"workload": f"pod/{namespace}/{pod}", "object": "pod", "name": pod, "namespace": namespace,
                    "requests": {k: str(v) for k, v in requests.items()}, "submitted": at.created,
                    "placed": placed, "released": at.gone or (None if left else round(gone_at, 3)),
                    "outcome": "refused" if placed is None else "failed" if pod in victims else "completed",
                    "simulated": False, "role": role})
    return out


def _run(session: KubeSession, step: Step, conf: ReserveSettings, report: ReserveReport, watcher: Watcher,
         identity: tenancy.Identity, created: tenancy.Created, ns: str, name: str, group: str, image: Image,
         measure: Measure) -> None:
    """The windows before the burst, the burst, the windows during it; fills ``report``."""
    api, window = session.api, conf["window_s"]
    before: list[tuple[float, float, list[str], WindowStats]] = []
    for _ in range(BEFORE_WINDOWS):
        before.append(_window(api, ns, name, window, measure))
    t0 = time.time()
    burst_res = dataclasses.replace(step.resource, priority_class=conf["burst"]["priority_class"])
    pull = session.conf.image_pull_policy
    labels = kc.labels(session.settings.run_id, session.owner, "governance", matrix=step.matrix.name,
                       resource=step.resource.name, probe=group)
    refused = []
    for i in range(conf["burst"]["pods"]):
        body = ks.manifest("pod", f"{group}-{i}", ns, labels, burst_res, image.reference, pull,
                           kc.created_annotations())
        error = tenancy.create(identity, body, created)
        if error is not None:
            refused.append(f"{body['metadata']['name']}: {type(error).__name__}: {error}"[:500])
    report.burst["started"], report.burst["refused"] = round(t0, 3), refused
    during = []
    while time.time() - t0 < conf["duration_s"]:
        during.append(_window(api, ns, name, min(window, max(0.5, conf["duration_s"] - (time.time() - t0))), measure))
    watcher.stop()
    for phase, windows in (("before", before), ("burst", during)):
        for start, end, pods, stats in windows:
            report.windows.append({"phase": phase, "from_s": round(start - t0, 3), "to_s": round(end - t0, 3),
                                   "endpoints": pods, "ready_min": watcher.ready_min(start, end), **stats})
    timeline = [*watcher.notes, *events(api, ns, watcher.roles, watcher.uids)]
    for entry in timeline:
        entry["at_s"] = round(entry["t"] - t0, 3) if entry["t"] else None
    report.timeline = sorted(timeline, key=lambda e: (e["t"] is None, e["t"] or 0.0))
    report.serving["watch_errors"] = watcher.errors
    _burst_pods(report, watcher)
    report.victims = victims(report.timeline, t0)


def _window(api: client.ApiClient, ns: str, name: str, seconds: float, measure: Measure
            ) -> tuple[float, float, list[str], WindowStats]:
    start = time.time()
    try:
        found = ready_endpoints(api, ns, name)
    except Exception:  # noqa: BLE001 - an unreadable EndpointSlice: no endpoint to send to this window
        found = []
    stats = measure([url for _, url in found], seconds)
    return start, time.time(), [pod for pod, _ in found], stats


def _burst_pods(report: ReserveReport, watcher: Watcher) -> None:
    """Each burst pod's end state and whether the burst asked to preempt (see :class:`ReserveReport`)."""
    pods: list[BurstPod] = []
    for pod, role in sorted(watcher.roles.items()):
        if role != "burst":
            continue
        st = watcher.state.get(pod) or PodState()
        pods.append({"name": pod, "node": st.node, "placed": bool(st.node),
                     "nominated": st.nominated, "pending": st.unschedulable})
    preemptors = {e.get("by") for e in report.timeline if e["what"] == "Preempted"}
    asked = [e for e in report.timeline if e["role"] == "burst" and e["what"] in ("unschedulable", "nominated",
                                                                                  "FailedScheduling")]
    for p in pods:
        p["preempted_for"] = p["name"] in preemptors
    report.burst["pods"] = pods
    report.burst["placed"] = sum(1 for p in pods if p["placed"])
    report.burst["asked_to_preempt"] = bool(asked) or bool(preemptors - {None})


def victims(timeline: list[ReserveEvent], t0: float) -> list[ReserveVictim]:
    """Serving pods removed (deleting, gone) or reported ``Preempted`` after the burst started (epoch ``t0``):
    ``[{"pod", "at_s" (first sign), "by", "evidence": [what was seen]}]``, in order."""
    out: dict[str, ReserveVictim] = {}
    for e in timeline:
        if e["role"] != "serving" or e["what"] not in ("Preempted", "deleting", "gone") or (e["t"] or 0) < t0:
            continue
        v = out.setdefault(e["pod"], {"pod": e["pod"], "at_s": e["at_s"], "by": None, "evidence": []})
        v["by"] = v["by"] or e.get("by")
        v["evidence"].append(f"{e['what']} at {e['at_s']} s" + (f": {e['message']}" if e["message"] else ""))
    return list(out.values())
