"""What ``hetero publish`` writes on each node, decided from a verified validation status (pure).

Per node of a pool the run exercised (``nodes``; each at its own level, ``node_status``: what ran on
that node) and per task type of the status, under ``validation.<domain>/<task-type>``
(:func:`pytest_hetero.status.compute.label_key`):

* a **label** ``<key>=<level>`` while the status holds and the level is above ``none`` (removed
  otherwise), so a workload of that task type selects validated nodes with a nodeSelector;
* a **node condition** of type ``<key>``: ``True`` (reason ``Validated``) while the status holds and the
  level is at least the required one (``hetero publish --require-level``, default ``business``), else
  ``False`` (reason ``NotValidated`` or, after ``--expire``, ``Expired``) — the shape a Node Readiness Controller
  ``NodeReadinessRule`` matches (``conditions: [{type: <key>, requiredStatus: "True"}]``);
* **annotations** ``<key>.expires-at`` (ISO), ``<key>.bundle`` (sha256 of the run statement) and
  ``<key>.verified-at`` (the run's end), so ``hetero publish --expire`` finds what expired without the bundle, and a
  node on which a later run's status stands is not given an older bundle's (:func:`keep_latest`);
* with a managed ``taint`` key: the taint (``NoSchedule``) removed when at least one task type's
  condition is ``True`` on the node, added when none is — what a NodeReadinessRule over the same
  conditions does, for clusters that do not run that controller.

A plan is ``[{"node", "labels": {key: value | None}, "annotations": {key: value | None},
"conditions": [{type, status, reason, message}], "taint": "add" | "remove" | None}]``; ``None``
removes a label/annotation. Nodes of a pool the run never exercised (``unvalidated``) are not in the
plan: they keep whatever an earlier bundle published until it expires (:func:`left_as_is` names them).
A node several pools of the bundle hold gets one label and one condition per task type, at the lowest
level its pools reached on it, expiring with the first of them; the condition's message names each pool.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict

from pytest_hetero.errors import HeteroError
from pytest_hetero.status.compute import LEVELS, expired, label_key, parse_time

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pytest_hetero.evidence.document import PoolStatus

EXPIRES = ".expires-at"
BUNDLE = ".bundle"
VERIFIED = ".verified-at"


class PublishRefused(HeteroError):
    """The status cannot be published: expired, nothing to publish (no pool with nodes), or a bad taint key."""


class ConditionPatch(TypedDict):
    """A node condition a plan sets: ``type`` (the label key), ``status`` (``True``/``False``), ``reason`` and
    ``message`` (at most 1000 characters)."""

    type: str
    status: str
    reason: str
    message: str


class NodeChange(TypedDict):
    """One node's entry of a plan (module docstring): its ``labels`` and ``annotations`` (None: removed), the
    ``conditions`` set and what becomes of the managed ``taint`` (None: no taint managed)."""

    node: str
    labels: dict[str, str | None]
    annotations: dict[str, str | None]
    conditions: list[ConditionPatch]
    taint: Literal["add", "remove"] | None


class ConditionSeen(TypedDict):
    """A node condition as the cluster holds it: ``type``, ``status`` and its ``reason`` and ``message`` (None: not
    given)."""

    type: str
    status: str
    reason: str | None
    message: str | None


class TaintSeen(TypedDict):
    """A node taint as the cluster holds it: ``key``, ``value`` (None: none) and ``effect``."""

    key: str
    value: str | None
    effect: str


class NodeSeen(TypedDict):
    """A node as the cluster holds it now (what :func:`expiry_plan` reads): its ``name``, ``labels``,
    ``annotations``, ``taints`` and ``conditions``; ``created``, its ``metadata.creationTimestamp`` (ISO 8601), and
    ``uid``, its ``metadata.uid``, when read (:func:`not_replaced`)."""

    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    taints: list[TaintSeen]
    conditions: list[ConditionSeen]
    created: NotRequired[str]
    uid: NotRequired[str]


def _condition(key: str, ok: bool, reason: str, message: str) -> ConditionPatch:
    return {"type": key, "status": "True" if ok else "False", "reason": reason, "message": message[:1000]}


def publish_plan(pools: list[PoolStatus], digest: str, now: datetime, taint: str | None = None,
                 require: str = "business") -> list[NodeChange]:
    """The node changes publishing ``pools`` (the signed ``validation.pools``) of the bundle whose run
    statement has sha256 ``digest``, as of ``now`` (aware). A task type's condition is ``True`` only when
    its level is at least ``require`` (a level of :data:`~pytest_hetero.status.compute.LEVELS` above
    ``none``); its label carries the level reached either way (none: removed). Raises PublishRefused
    when a pool's status has expired, no pool recorded a node, or ``require`` is not a level."""
    if require not in LEVELS[1:]:
        raise PublishRefused(f"unknown level {require!r}", None, f"one of {', '.join(LEVELS[1:])}")
    late = [f"{p['matrix']}/{p['pool']} (expired {p['expires_at']})" for p in pools if expired(p, now)]
    if late:
        raise PublishRefused(f"the validation status has expired: {', '.join(late)}", None,
                             "run the gate again and publish the new bundle")
    nodes: dict[str, NodeChange] = {}
    ran = max((str(p.get("verified_at")) for p in pools if p.get("verified_at")), key=parse_time, default="")
    seen: dict[tuple[str, str], list[tuple[str, str, str]]] = {}  # (node, key) → [(level, text, expires_at)]
    for pool in pools:
        own = {e["node"]: e["task_types"] for e in pool.get("node_status") or []}  # pool_status writes both
        for node in pool["nodes"]:
            nodes.setdefault(node, {"node": node, "labels": {}, "annotations": {}, "conditions": [], "taint": None})
            for task_type, status in sorted(pool["task_types"].items()):
                # the node's own level (what ran on it); a bundle written before node status: the pool's
                level = str((own.get(node, {}).get(task_type) or status)["level"]) if own else str(status["level"])
                ok = LEVELS.index(level) >= LEVELS.index(require)
                text = (f"{task_type} validated to level {level} on pool {pool['matrix']}/{pool['pool']} by bundle "
                        f"sha256:{digest[:16]}…, until {pool['expires_at']}" if ok else
                        f"{task_type} reached level {level} on pool {pool['matrix']}/{pool['pool']}, below the "
                        f"required {require}, by bundle sha256:{digest[:16]}…")
                seen.setdefault((node, label_key(pool["domain"], task_type)), []).append(
                    (level, text, pool["expires_at"]))
    for (node, key), found in seen.items():
        # a node in several pools of the bundle: one label and one condition per task type, at the lowest level
        # any of its pools reached on it (a failure in one pool's shape is a failure of the node for that task
        # type), expiring with the first of them; the condition's message names every pool
        level = min((lv for lv, _, _ in found), key=LEVELS.index)
        ok = LEVELS.index(level) >= LEVELS.index(require)
        entry = nodes[node]
        entry["labels"][key] = level if level != "none" else None
        entry["annotations"][key + EXPIRES] = min((at for _, _, at in found), key=parse_time)
        entry["annotations"][key + BUNDLE] = digest
        if ran:
            entry["annotations"][key + VERIFIED] = ran
        entry["conditions"].append(_condition(key, ok, "Validated" if ok else "NotValidated",
                                              "; ".join(text for _, text, _ in found)))
    if not nodes:
        raise PublishRefused("nothing to publish: no pool of the bundle recorded a node (not a Kubernetes run, or "
                             "discovery found no node)", None, "publish a bundle of a kubernetes-backend run")
    plan = list(nodes.values())
    if taint:
        for entry in plan:
            entry["taint"] = "remove" if any(c["status"] == "True" for c in entry["conditions"]) else "add"
    return plan


def left_as_is(pools: list[PoolStatus], plan: list[NodeChange]) -> list[dict[str, str]]:
    """The nodes of ``pools`` (the signed ``validation.pools``) that the run did not exercise and ``plan``
    does not touch: ``[{"node", "pool", "reason"}]``. Publishing leaves them as they are (a status an earlier
    bundle published holds until its own expiry); they are unvalidated by this bundle."""
    touched = {entry["node"] for entry in plan}
    out = []
    for pool in pools:
        for entry in pool.get("unvalidated") or []:
            if entry["node"] not in touched:
                out.append({"node": str(entry["node"]), "pool": f"{pool['matrix']}/{pool['pool']}",
                            "reason": str(entry["reason"])})
    return out


def expiry_plan(nodes: list[NodeSeen], domain: str, now: datetime, taint: str | None = None
                ) -> list[NodeChange]:
    """The node changes that withdraw every status of ``domain`` whose ``<key>.expires-at`` annotation is
    at or before ``now``: label removed, condition ``False`` (reason ``Expired``), annotations removed;
    with ``taint``, the taint added back when no ``True`` condition of the domain is left on the node.
    ``nodes`` are what the cluster holds now (:class:`NodeSeen`); a node with nothing expired is left out of the
    plan."""
    prefix = f"validation.{domain}/"
    plan = []
    for node in nodes:
        annotations = node["annotations"]
        gone = [k[: -len(EXPIRES)] for k, v in annotations.items()
                if k.startswith(prefix) and k.endswith(EXPIRES) and parse_time(str(v)) <= now]
        if not gone:
            continue
        entry: NodeChange = {"node": node["name"], "labels": {k: None for k in gone},
                                 "annotations": {a: None for k in gone for a in (k + EXPIRES, k + BUNDLE, k + VERIFIED)
                                                 if not a.endswith(VERIFIED) or a in annotations},
                                 "conditions": [_condition(k, False, "Expired", f"validation status expired at "
                                                           f"{annotations[k + EXPIRES]}; run the gate again")
                                                for k in gone], "taint": None}
        if taint:
            still = [c for c in node["conditions"] if c["type"].startswith(prefix) and c["status"] == "True"
                     and c["type"] not in gone]
            entry["taint"] = "remove" if still else "add"
        plan.append(entry)
    return plan


def keep_latest(plan: list[NodeChange], nodes: list[NodeSeen]) -> tuple[list[NodeChange], list[dict[str, str]]]:
    """``plan`` less the nodes on which a status of a later run already stands: a node whose ``<key>.verified-at``
    annotation (the run end of the bundle that published it) is later than this plan's, for any key of its entry, is
    left as that later bundle wrote it (publishing an older signed bundle again must not bring back a status a later
    run withdrew). ``nodes``: what the cluster holds now (:class:`NodeSeen`; a node not among them is kept, an
    annotation that does not read as a time is ignored). Returns (plan kept, ``[{"node", "key", "published",
    "ours"}]`` of the nodes left out)."""
    held = {n["name"]: n["annotations"] for n in nodes}

    def later(entry: NodeChange) -> dict[str, str] | None:
        theirs = held.get(entry["node"], {})
        for name, ours in entry["annotations"].items():
            if name.endswith(VERIFIED) and ours is not None and _after(theirs.get(name), ours):
                return {"node": entry["node"], "key": name[: -len(VERIFIED)], "published": str(theirs[name]),
                        "ours": ours}
        return None

    return _leave_out(plan, later)


def not_replaced(plan: list[NodeChange], nodes: list[NodeSeen], started: str | None,
                 ran_on: Mapping[str, set[str]] | None = None) -> tuple[list[NodeChange], list[dict[str, str]]]:
    """``plan`` less the nodes that are not the machine the run exercised under their name: a node of that name was
    deleted and created again since (a replaced machine, an autoscaler reusing a name), so nothing of the run is
    written on it. Told by the node's ``metadata.uid``, where the run recorded one (``ran_on``: node → the uids the
    run's discovery read under that name, :func:`node_uids`): another uid now is another machine, and the one uid
    recorded the machine the run read, whatever the clocks say; else (no uid read or recorded) by its
    ``creationTimestamp`` later than the run's start (``started``: the signed run's ``started_at``, ISO 8601; the
    apiserver's clock against the gate's). ``nodes``: what the cluster holds now (:class:`NodeSeen`); a node not
    among them is kept, as is one whose uid is not read nor recorded and whose creation time is not read or not
    later, or every such node when ``started`` is None or not a time (a bundle that states no start). Returns (plan
    kept, the nodes left out: ``{"node", "uid", "run_uid"}`` when told by the uid (``run_uid``: the recorded ones,
    comma-separated), else ``{"node", "created", "run_started"}``)."""
    seen = {n["name"]: n for n in nodes}
    recorded = ran_on or {}

    def replaced(entry: NodeChange) -> dict[str, str] | None:
        node = seen.get(entry["node"])
        if node is None:
            return None
        uid, theirs = node.get("uid"), recorded.get(entry["node"])
        if uid and theirs:  # the uid tells it, whatever the clocks say (the apiserver's may be ahead of the gate's)
            if uid in theirs and len(theirs) == 1:
                return None
            return {"node": entry["node"], "uid": uid, "run_uid": ", ".join(sorted(theirs))}
        when = node.get("created")
        if when is None or started is None or not _after(when, started):
            return None
        return {"node": entry["node"], "created": when, "run_started": started}

    return _leave_out(plan, replaced)


def node_uids(pools: list[PoolStatus]) -> dict[str, set[str]]:
    """Each node → every ``uid`` the pools' ``node_status`` recorded for it (a node with none recorded is absent: a
    bundle written before uids were, or an engine that names none). More than one: discovery read two machines under
    one name, and :func:`not_replaced` takes neither for the node now."""
    out: dict[str, set[str]] = {}
    for pool in pools:
        for entry in pool.get("node_status") or []:
            if (uid := entry.get("uid")) is not None:
                out.setdefault(entry["node"], set()).add(str(uid))
    return out


def _after(text: object, than: str) -> bool:
    """Whether ``text`` is a time (ISO 8601) later than ``than``; False when either does not read as a time."""
    try:
        return text is not None and parse_time(str(text)) > parse_time(than)
    except ValueError:
        return False


def _leave_out(plan: list[NodeChange], why: Callable[[NodeChange], dict[str, str] | None]
               ) -> tuple[list[NodeChange], list[dict[str, str]]]:
    """(the entries of ``plan`` for which ``why`` gives None, what it gave for the others)."""
    kept: list[NodeChange] = []
    left: list[dict[str, str]] = []
    for entry in plan:
        reason = why(entry)
        if reason is None:
            kept.append(entry)
        else:
            left.append(reason)
    return kept, left


def parse_now(text: str | None) -> datetime:
    """``text`` (ISO 8601) or the current UTC time, aware."""
    return parse_time(text) if text else datetime.now(UTC)
