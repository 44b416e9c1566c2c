"""Readiness of the node a workload pod runs on: a cheap check before a layer, a watch during a model run.

A node whose ``Ready`` condition is ``False`` or ``Unknown`` (kubelet stopped, container runtime or
network plugin down, the node lifecycle controller lost its heartbeat) cannot be trusted to finish a
run, nor to answer for one. Before startup's payload and before each model run the node is read once
(``GET /api/v1/nodes/<name>``); during a model run one :class:`NodeWatch` (``watch`` on nodes with
field selector ``metadata.name=<node>``) signals the exec loop to abandon the run as soon as Ready
leaves ``True``. Either way the item ends ``error``, category ``node_not_ready``, owner
``infrastructure``, naming the node and its condition; the workload is marked lost
(``workload["node_lost"]``) so later items of the same resource × image fail fast without touching
the pod. A node that cannot be read (RBAC, apiserver down) is noted, never turned into a verdict.
Condition fields follow the Kubernetes ``NodeCondition`` (``type``, ``status``, ``reason``,
``message``, ``lastTransitionTime``, ``lastHeartbeatTime``).
"""

from __future__ import annotations

import json
import threading
from contextlib import closing
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes.manifests import ConditionJSON, ServedNode
from pytest_hetero.backends.kubernetes.watch import close_watch, watch_events
from pytest_hetero.backends.protocol import EngineUnavailable, RunFailure, Step
from pytest_hetero.evidence.model import utc_now
from pytest_hetero.signals import quiet_thread

if TYPE_CHECKING:
    from pytest_hetero.backends.kubernetes.session import KubeSession, WorkloadRecord

CATEGORY = "node_not_ready"
WATCH_TIMEOUT_S = 60
"""Server-side timeout of one node watch request (seconds); the thread then re-lists and watches again."""


class ReadyCondition(TypedDict):
    """A node's ``Ready`` condition as the apiserver serves it (``NodeCondition``: ``type`` and ``status``
    always; the times, ``reason`` and ``message`` when set), or as :func:`unknown` makes one."""

    type: str
    status: str
    lastHeartbeatTime: NotRequired[str]
    lastTransitionTime: NotRequired[str]
    reason: NotRequired[str]
    message: NotRequired[str]


def _ready(raw: ConditionJSON) -> ReadyCondition:
    """The Ready condition from its JSON, keys in the API's order; a missing ``status`` reads ``Unknown``."""
    cond: ReadyCondition = {"type": str(raw.get("type")), "status": str(raw.get("status", "Unknown"))}
    if "lastHeartbeatTime" in raw:
        cond["lastHeartbeatTime"] = raw["lastHeartbeatTime"]
    if "lastTransitionTime" in raw:
        cond["lastTransitionTime"] = raw["lastTransitionTime"]
    if "reason" in raw:
        cond["reason"] = raw["reason"]
    if "message" in raw:
        cond["message"] = raw["message"]
    return cond


def ready_condition(node: ServedNode) -> ReadyCondition:
    """The node's Ready condition (of its JSON's ``status.conditions[]``); a node without one, or one
    the watch saw deleted (``deleted`` key), reads as ``status: Unknown`` with a reason saying why."""
    if node.get("deleted"):
        return unknown("NodeDeleted", "the Node object was deleted")
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return _ready(cond)
    return unknown("NoReadyCondition", "the node reports no Ready condition")


def unknown(reason: str, message: str) -> ReadyCondition:
    """A Ready condition of status ``Unknown`` with ``reason`` and ``message`` (no timestamps)."""
    return {"type": "Ready", "status": "Unknown", "reason": reason, "message": message}


def describe(cond: ReadyCondition) -> str:
    """``Ready=Unknown since <lastTransitionTime>, NodeStatusUnknown: Kubelet stopped posting node status.``
    for a Ready condition."""
    since = f" since {cond['lastTransitionTime']}" if cond.get("lastTransitionTime") else ""
    why = ": ".join(str(x) for x in (cond.get("reason"), cond.get("message")) if x)
    return f"Ready={cond['status']}{since}" + (f", {why}" if why else "")


class Transition(TypedDict):
    """One change of a node's Ready status a :class:`NodeWatch` saw: the condition's ``status``, ``reason``,
    ``message``, ``lastTransitionTime`` (None where the condition has none) and ``seen_at`` (UTC, RFC 3339)."""

    status: str
    reason: str | None
    message: str | None
    lastTransitionTime: str | None
    seen_at: str


def read(core: client.CoreV1Api, name: str) -> ServedNode:
    """The Node ``name`` as served (one GET). Raises ApiException / urllib3 errors as the client does."""
    resp: Any = core.read_node(name, _preload_content=False, _request_timeout=kc.API_TIMEOUT_S)
    node: ServedNode = json.loads(resp.data)
    return node


def ensure_ready(session: KubeSession, ctx: Step, workload: WorkloadRecord, node: str) -> None:
    """Before a layer touches the workload pod: raise EngineUnavailable ``node_not_ready`` (owner
    ``infrastructure``) when an earlier item lost the workload's node, or when ``node`` (name; "" =
    unknown, nothing checked) is not Ready now; record ``<layer>.node_not_ready`` with the condition.

    A node that is gone (404) counts as not Ready (``NodeDeleted``); one that cannot be read otherwise
    is recorded as ``<layer>.node_check`` and the layer goes on.
    """
    lost = workload.get("node_lost")
    if lost:
        kind = f"{ctx.layer}.node_not_ready"
        ctx.record(kind, node=lost["node"], earlier_item=lost["item"], condition=lost["condition"])
        raise EngineUnavailable(
            f"node {lost['node']} {lost['said']} {lost['item']} ({describe(lost['condition'])}); "
            f"its workload pod {workload.get('pod')} is not used again: the {ctx.layer} layer did not run",
            CATEGORY)
    if not node:
        return
    try:
        cond = ready_condition(read(session.core, node))
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
    workload["node_lost"] = {
        "node": node,
        "said": "was NotReady before",
        "item": ctx.planned.id,
        "condition": cond,
    }
    raise EngineUnavailable(
        f"node {node} of pod {workload.get('pod')} is NotReady ({describe(cond)}); "
        f"the {ctx.layer} layer did not run",
        CATEGORY)


class NodeWatch:
    """Watches one node's Ready condition in a daemon thread (list, then watch from its resourceVersion;
    re-lists after a dropped connection or a watch timeout).

    ``turned`` is set once Ready is not ``True`` (or the node is deleted); ``condition`` is that
    condition (None before), ``seen_at`` the UTC time (RFC 3339) the watch saw it; ``transitions`` lists every change
    of the Ready status the watch saw, in order, as ``{"status", "reason", "message",
    "lastTransitionTime", "seen_at"}``; ``error`` the last watch failure (it retries with backoff).
    """

    def __init__(self, api: client.ApiClient, name: str) -> None:
        self.core, self.name = client.CoreV1Api(api), name
        self.turned = threading.Event()
        self.condition: ReadyCondition | None = None
        self.seen_at = ""
        self.transitions: list[Transition] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._resp: Any = None

    def start(self) -> NodeWatch:
        """Start the watch thread; return self. Never raises (failures land in ``error``)."""
        threading.Thread(target=self._loop, name=f"hetero-node-watch-{self.name}", daemon=True).start()
        return self

    def _keep(self, resp: Any) -> None:
        """Hold the open watch response so :meth:`stop` can close it."""
        self._resp = resp

    def _observe(self, node: ServedNode) -> None:
        cond = ready_condition(node)
        status = cond["status"]
        if not self.transitions or self.transitions[-1]["status"] != status:
            self.transitions.append(
                {
                    "status": status,
                    "reason": cond.get("reason"),
                    "message": cond.get("message"),
                    "lastTransitionTime": cond.get("lastTransitionTime"),
                    "seen_at": utc_now(),
                }
            )
        if status != "True" and not self.turned.is_set():
            self.condition, self.seen_at = cond, self.transitions[-1]["seen_at"]
            self.turned.set()

    def _loop(self) -> None:
        quiet_thread()
        backoff = 0.2
        selector = f"metadata.name={self.name}"
        while not self._stop.is_set() and not self.turned.is_set():
            try:
                listed: Any = self.core.list_node(
                    field_selector=selector, _preload_content=False, _request_timeout=kc.API_TIMEOUT_S
                )
                body = json.loads(listed.data)
                for node in body.get("items") or []:
                    self._observe(node)
                if not body.get("items"):
                    self._observe({"deleted": True})
                events = watch_events(self.core.list_node, resource_version=body["metadata"].get("resourceVersion"),
                                      timeout_s=WATCH_TIMEOUT_S, on_response=self._keep, field_selector=selector)
                with closing(events):  # releases the connection on break and return too
                    for kind, obj in events:
                        if kind == "ERROR":
                            break  # e.g. 410 Gone: re-list
                        if kind in ("ADDED", "MODIFIED", "DELETED"):
                            seen: ServedNode = obj
                            self._observe({**seen, "deleted": True} if kind == "DELETED" else seen)
                        if self._stop.is_set() or self.turned.is_set():
                            return
                backoff = 0.2
            except Exception as exc:  # noqa: BLE001 - dropped or refused: retried, the run goes on meanwhile
                if self._stop.is_set():
                    return
                self.error = f"{type(exc).__name__}: {exc}"[:300]
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def stop(self) -> None:
        """Stop the watch (closes its stream). Never raises."""
        self._stop.set()
        close_watch(self._resp)


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
        pod=workload.get("pod"),
        condition=cond,
        seen_at=watch.seen_at,
        transitions=watch.transitions,
        run_started_at=started_at,
        abandoned_after_s=round(after_s, 3),
        process_killed=killed,
        watch_error=watch.error,
    )
    workload["node_lost"] = {
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
