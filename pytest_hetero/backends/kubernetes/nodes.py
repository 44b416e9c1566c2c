"""Readiness of the node a workload pod runs on: a cheap check before a layer, a watch during a model run.

A node whose ``Ready`` condition is ``False`` or ``Unknown`` (kubelet stopped, container runtime or
network plugin down, the node lifecycle controller lost its heartbeat) cannot be trusted to finish a
run, nor to answer for one. Before startup's payload and before each model run the node is read once
(``GET /api/v1/nodes/<name>``); during a model run a :class:`NodeWatch`, fed by the session's one watch of
every node (:class:`NodeReadiness`), signals the exec loop to abandon the run as soon as Ready leaves
``True``. Either way the item ends ``error``, category ``node_not_ready``, owner ``infrastructure``, naming
the node and its condition; the workload is marked lost (``workload.node_lost``) so later items of the same
resource × image fail fast without touching the pod. A node that cannot be read (RBAC, apiserver down) is
noted, never turned into a verdict.
Condition fields follow the Kubernetes ``NodeCondition`` (``type``, ``status``, ``reason``,
``message``, ``lastTransitionTime``, ``lastHeartbeatTime``).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, TypedDict

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes.manifests import ConditionJSON, ListedNode
from pytest_hetero.backends.kubernetes.objects import parse_condition
from pytest_hetero.backends.kubernetes.watch import ListWatch
from pytest_hetero.backends.protocol import EngineUnavailable, RunFailure, Step
from pytest_hetero.evidence.model import utc_now

if TYPE_CHECKING:
    from pytest_hetero.backends.kubernetes.session import KubeSession, WorkloadRecord

CATEGORY = "node_not_ready"
WATCH_TIMEOUT_S = 60
"""Server-side timeout of one node watch request (seconds); the thread then watches again from where it was."""


ReadyCondition = ConditionJSON
"""A node's ``Ready`` condition as the apiserver serves it (``NodeCondition``: ``type`` and ``status`` always;
the times, ``reason`` and ``message`` when set), or as :func:`unknown` makes one."""


def _ready(raw: ConditionJSON) -> ReadyCondition:
    """The Ready condition from its JSON (``type`` and ``status`` always served), keys in the API's order."""
    cond: ReadyCondition = {"type": raw["type"], "status": raw["status"]}
    if "lastHeartbeatTime" in raw:
        cond["lastHeartbeatTime"] = raw["lastHeartbeatTime"]
    if "lastTransitionTime" in raw:
        cond["lastTransitionTime"] = raw["lastTransitionTime"]
    if "reason" in raw:
        cond["reason"] = raw["reason"]
    if "message" in raw:
        cond["message"] = raw["message"]
    return cond


def ready_condition(node: ListedNode) -> ReadyCondition:
    """The node's Ready condition (of its JSON's ``status.conditions[]``, as a GET, LIST or watch event serves
    it: ``status`` always); a node without one reads as ``status: Unknown``, reason ``NoReadyCondition``. A
    deleted node's is :func:`deleted`."""
    for cond in node["status"].get("conditions") or []:
        if cond["type"] == "Ready":
            return _ready(cond)
    return unknown("NoReadyCondition", "the node reports no Ready condition")


def deleted() -> ReadyCondition:
    """The Ready condition of a node the watch saw deleted (``status: Unknown``, reason ``NodeDeleted``)."""
    return unknown("NodeDeleted", "the Node object was deleted")


def unknown(reason: str, message: str) -> ReadyCondition:
    """A Ready condition of status ``Unknown`` with ``reason`` and ``message`` (no timestamps)."""
    return {"type": "Ready", "status": "Unknown", "reason": reason, "message": message}


def describe(cond: ReadyCondition) -> str:
    """``Ready=Unknown since <lastTransitionTime>, NodeStatusUnknown: Kubelet stopped posting node status.``
    for a Ready condition."""
    seen = parse_condition(cond)
    since = f" since {seen.last_transition}" if seen.last_transition else ""
    why = ": ".join(str(x) for x in (seen.reason, seen.message) if x)
    return f"Ready={seen.status}{since}" + (f", {why}" if why else "")


class Transition(TypedDict):
    """One change of a node's Ready status a :class:`NodeWatch` saw: the condition's ``status``, ``reason``,
    ``message``, ``lastTransitionTime`` (None where the condition has none) and ``seen_at`` (UTC, RFC 3339)."""

    status: str
    reason: str | None
    message: str | None
    lastTransitionTime: str | None
    seen_at: str


def read(core: client.CoreV1Api, name: str) -> ListedNode:
    """The Node ``name`` as served (one GET, :func:`.client.raw_request`). Raises ApiException / urllib3 errors as
    the client does."""
    node: ListedNode = kc.raw_request(core.api_client, "GET", f"/api/v1/nodes/{name}")
    return node


def ensure_ready(session: KubeSession, ctx: Step, workload: WorkloadRecord, node: str) -> None:
    """Before a layer touches the workload pod: raise EngineUnavailable ``node_not_ready`` (owner
    ``infrastructure``) when an earlier item lost the workload's node, or when ``node`` (name; "" =
    unknown, nothing checked) is not Ready now; record ``<layer>.node_not_ready`` with the condition.

    A node that is gone (404) counts as not Ready (``NodeDeleted``); one that cannot be read otherwise
    is recorded as ``<layer>.node_check`` and the layer goes on. When the session's node watch is running and holds
    the node (:meth:`NodeReadiness.held`), its condition is the answer (what the run's own :class:`NodeWatch` then
    begins with): no GET per model run; else one GET of the node.
    """
    lost = workload.node_lost
    if lost:
        kind = f"{ctx.layer}.node_not_ready"
        ctx.record(kind, node=lost["node"], earlier_item=lost["item"], condition=lost["condition"])
        raise EngineUnavailable(
            f"node {lost['node']} {lost['said']} {lost['item']} ({describe(lost['condition'])}); "
            f"its workload pod {workload.pod} is not used again: the {ctx.layer} layer did not run",
            CATEGORY)
    if not node:
        return
    feed = session.node_feed
    held = feed.held(node) if feed is not None else None
    try:
        cond = held if held is not None else ready_condition(read(session.core, node))
    except ApiException as exc:
        if exc.status != 404:
            ctx.record(f"{ctx.layer}.node_check", node=node, checked=False, error=f"HTTP {exc.status}")
            return
        cond = unknown("NodeDeleted", "the Node object no longer exists")
    except Exception as exc:  # noqa: BLE001 - no answer is no verdict on the node
        error = f"{type(exc).__name__}: {exc}"[:300]
        ctx.record(f"{ctx.layer}.node_check", node=node, checked=False, error=error)
        return
    if cond["status"] == "True":
        return
    ctx.record(f"{ctx.layer}.node_not_ready", node=node, condition=cond, checked_at=utc_now())
    workload.node_lost = {
        "node": node,
        "said": "was NotReady before",
        "item": ctx.planned.id,
        "condition": cond,
    }
    raise EngineUnavailable(
        f"node {node} of pod {workload.pod} is NotReady ({describe(cond)}); "
        f"the {ctx.layer} layer did not run",
        CATEGORY)


class NodeReadiness(ListWatch):
    """Every node's Ready condition, kept by one list-watch of the session (:class:`.watch.ListWatch`: list, then
    watch from its resourceVersion; resumes after a dropped connection, re-lists after ``410 Gone``), fed to the
    :class:`NodeWatch` of each model run in flight: one list and one watch stream per gate process however many runs
    watch nodes (a list + watch per run held a thread and an API connection each, and 64 runs at once overflowed the
    client's pool).

    Only each node's Ready condition is kept (not the Node). ``error`` is the last watch failure (it retries with
    backoff), ``failures`` counts them; ``tried`` is set once the first list answered or failed."""

    def __init__(self, api: client.ApiClient) -> None:
        super().__init__(api, "/api/v1/nodes", "", WATCH_TIMEOUT_S, "hetero-node-watch", (0.2, 5.0))
        self.core = client.CoreV1Api(api)
        self.conditions: dict[str, ReadyCondition] = {}
        self.subscribers: dict[str, list[NodeWatch]] = {}
        self.lock = threading.Lock()

    def start(self) -> NodeReadiness:
        """Start the watch thread (once; it lists first); return self. Never raises (failures land in ``error``)."""
        with self.lock:
            self.run()
        return self

    def watch(self, name: str) -> NodeWatch:
        """A started :class:`NodeWatch` of node ``name``, seeded with its condition now: the watch's when it holds
        the node, else one GET of it (a node added since the list, or the list failed; 404: deleted). Waits for
        the first list to answer up to :data:`~.client.API_TIMEOUT_S` seconds. Never raises."""
        self.start()
        self.tried.wait(kc.API_TIMEOUT_S)
        sub = NodeWatch(self, name)
        with self.lock:
            self.subscribers.setdefault(name, []).append(sub)
            cond = self.conditions.get(name)
            if cond is not None:
                sub.observe(cond)
        if cond is None:
            try:
                seen = ready_condition(read(self.core, name))
            except ApiException as exc:
                if exc.status != 404:
                    sub.own_error = f"HTTP {exc.status}: {exc.reason}"[:300]
                    return sub
                seen = deleted()
            except Exception as exc:  # noqa: BLE001 - no answer: the watch may still tell
                sub.own_error = f"{type(exc).__name__}: {exc}"[:300]
                return sub
            with self.lock:
                if not sub.transitions:  # a watch event of the node came first: it is newer
                    sub.observe(seen)
        return sub

    def held(self, name: str) -> ReadyCondition | None:
        """Node ``name``'s Ready condition as this watch holds it now (what a :class:`NodeWatch` of it begins with),
        None when it holds none (not listed yet) or when the watch has failed at any time (``error``: what it holds
        may be older than it looks)."""
        with self.lock:
            return None if self.error is not None else self.conditions.get(name)

    def forget(self, sub: NodeWatch) -> None:
        """Stop feeding ``sub``."""
        with self.lock:
            subs = self.subscribers.get(sub.name) or []
            if sub in subs:
                subs.remove(sub)
            if not subs:
                self.subscribers.pop(sub.name, None)

    def _seen(self, name: str, cond: ReadyCondition) -> None:
        """Keep node ``name``'s condition and tell its watchers (under the lock)."""
        self.conditions[name] = cond
        for sub in self.subscribers.get(name) or ():
            sub.observe(cond)

    def listed(self, items: list[Any], now: float) -> None:
        """Keep every listed node's condition; a node kept before and not listed now was deleted."""
        with self.lock:
            names = set()
            for node in items:
                name = str(node["metadata"]["name"])
                names.add(name)
                self._seen(name, ready_condition(node))
            for gone in [n for n in self.conditions if n not in names]:
                self._seen(gone, deleted())

    def changed(self, kind: str, obj: Any, now: float) -> None:
        """Keep the event's node's condition (a deleted node's reads ``NodeDeleted``) and tell its watchers."""
        seen: ListedNode = obj
        with self.lock:
            self._seen(seen["metadata"]["name"], deleted() if kind == "DELETED" else ready_condition(seen))


class NodeWatch:
    """One model run's watch of one node's Ready condition, fed by the session's :class:`NodeReadiness`.

    ``turned`` is set once Ready is not ``True`` (or the node is deleted); ``condition`` is that
    condition (None before), ``seen_at`` the UTC time (RFC 3339) the watch saw it; ``transitions`` lists every change
    of the Ready status the watch saw from its start (the first: the status then), in order, as ``{"status",
    "reason", "message", "lastTransitionTime", "seen_at"}``; ``error`` the last failure of the watch or of the
    node's read since this watch began (None when there was none).
    """

    def __init__(self, feed: NodeReadiness, name: str) -> None:
        self.feed, self.name = feed, name
        self.turned = threading.Event()
        self.condition: ReadyCondition | None = None
        self.seen_at = ""
        self.transitions: list[Transition] = []
        self.own_error: str | None = None
        self._failures = feed.failures

    @property
    def error(self) -> str | None:
        """The last failure of the session's node watch since this watch began, else of the node's own read."""
        return self.feed.error if self.feed.failures > self._failures else self.own_error

    def observe(self, cond: ReadyCondition) -> None:
        """Note the node's Ready condition ``cond`` (from the feed, under its lock)."""
        status, seen = cond["status"], parse_condition(cond)
        if not self.transitions or self.transitions[-1]["status"] != status:
            self.transitions.append(
                {
                    "status": status,
                    "reason": seen.reason,
                    "message": seen.message,
                    "lastTransitionTime": seen.last_transition,
                    "seen_at": utc_now(),
                }
            )
        if status != "True" and not self.turned.is_set():
            self.condition, self.seen_at = cond, self.transitions[-1]["seen_at"]
            self.turned.set()

    def stop(self) -> None:
        """Stop watching (the session's watch goes on). Never raises."""
        self.feed.forget(self)


def abandoned(
    session: KubeSession,
    ctx: Step,
    workload: WorkloadRecord,
    watch: NodeWatch,
    started_at: str,
    after_s: float,
    killed: bool | None,
) -> RunFailure:
    """The model run on ``watch.name`` was abandoned ``after_s`` seconds in (it began at ``started_at``,
    RFC 3339): record ``model.node_not_ready`` (condition, the transitions the watch saw with
    timestamps, whether the run's process was killed: None = kill not attempted), mark the workload
    lost, and return the ExecResult ``failure`` dict (status ``error``)."""
    cond = watch.condition or unknown("NotObserved", "the node watch saw no Ready condition")
    ctx.record(
        "model.node_not_ready",
        node=watch.name,
        pod=workload.pod,
        condition=cond,
        seen_at=watch.seen_at,
        transitions=watch.transitions,
        run_started_at=started_at,
        abandoned_after_s=round(after_s, 3),
        process_killed=killed,
        watch_error=watch.error,
    )
    workload.node_lost = {
        "node": watch.name,
        "said": "turned NotReady during",
        "item": ctx.planned.id,
        "condition": cond,
    }
    return {
        "status": "error",
        "category": CATEGORY,
        "message": (
            f"node {watch.name} turned NotReady during the model run ({describe(cond)}; seen at "
            f"{watch.seen_at}); run abandoned after {after_s:.1f} s"
        ),
    }
