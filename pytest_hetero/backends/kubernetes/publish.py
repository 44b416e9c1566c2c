"""Write a publish plan (:mod:`pytest_hetero.status.publish`) onto Nodes, and read what expiry needs.

Verbs (the RBAC of ``deploy/publish-rbac.yaml``, nothing more): ``get``/``list`` nodes, ``patch``
nodes (labels, annotations, taints: a JSON merge patch of ``metadata`` and, for the taint, a patch of
``spec.taints`` carrying the node's ``resourceVersion``, so a concurrent change is refused, not lost),
``patch`` nodes/status (a strategic merge patch of ``status.conditions``: conditions merge by ``type``,
so the kubelet's own conditions are left as they are). Decides nothing: which node gets what is the plan's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pytest_hetero.backends.kubernetes.client import api_outcome, connect
from pytest_hetero.backends.labels import utc_stamp
from pytest_hetero.backends.protocol import ActionFailed

if TYPE_CHECKING:
    from pytest_hetero.status.publish import NodeChange, NodeSeen

TAINT_EFFECT = "NoSchedule"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


def _core(kubeconfig: str | None, context: str | None) -> client.CoreV1Api:
    target: dict[str, Any] = {"kubeconfig": kubeconfig} if kubeconfig else {}
    api, _, _ = connect(target, context)
    return client.CoreV1Api(api)


def read_nodes(kubeconfig: str | None, context: str | None, names: list[str] | None = None) -> list[NodeSeen]:
    """``[{"name", "labels", "annotations", "taints": [{key, value, effect}], "conditions": [{type, status,
    reason, message}], "created", "uid"}]`` of ``names`` (every node when None; ``created``:
    ``metadata.creationTimestamp``, ISO 8601, and ``uid``: ``metadata.uid``, when the apiserver gave them). Raises
    ActionFailed (e.g. ``forbidden_rbac``)."""
    core = _core(kubeconfig, context)
    nodes: list[Any]
    try:
        nodes = [core.read_node(n) for n in names] if names is not None else list(core.list_node().items)
    except ApiException as exc:
        raise api_outcome(exc, "read nodes") from None
    seen: list[NodeSeen] = []
    for n in nodes:
        node: NodeSeen = {
            "name": n.metadata.name, "labels": dict(n.metadata.labels or {}),
            "annotations": dict(n.metadata.annotations or {}),
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in n.spec.taints or []],
            "conditions": [{"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
                           for c in n.status.conditions or []]}
        if n.metadata.creation_timestamp is not None:
            node["created"] = n.metadata.creation_timestamp.isoformat()
        if n.metadata.uid:
            node["uid"] = str(n.metadata.uid)
        seen.append(node)
    return seen


class Published(TypedDict):
    """What :func:`apply_plan` did to one node: its name (``node``), the ``labels`` patched (None: removed), its
    ``conditions`` set (``type=status``) and what became of the managed ``taint`` (``added``, ``removed``,
    ``unchanged``; None: none managed); ``gone`` (True; absent otherwise) when the node no longer exists (deleted
    since the run): nothing was written on it (its labels and conditions then empty)."""

    node: str
    labels: dict[str, str | None]
    conditions: list[str]
    taint: str | None
    gone: NotRequired[bool]


def apply_plan(plan: list[NodeChange], taint: str | None, kubeconfig: str | None = None,
               context: str | None = None) -> list[Published]:
    """Apply ``plan`` entries in order; return one record per node ``{"node", "labels", "conditions",
    "taint": "added" | "removed" | "unchanged" | None}`` (:class:`Published`). A node that no longer exists (404:
    deleted since the run, e.g. by an autoscaler) carries no status to write or withdraw: it is skipped, ``gone``,
    and the others are published. Raises ActionFailed naming the node and the verb on the first other refusal (what was
    applied before it stays, and is named in the message)."""
    core = _core(kubeconfig, context)
    done: list[Published] = []
    for entry in plan:
        name = entry["node"]
        try:
            if entry["labels"] or entry["annotations"]:
                core.patch_node(name, {"metadata": {"labels": entry["labels"], "annotations": entry["annotations"]}},
                                _content_type=MERGE)
            now = utc_stamp()
            conditions = [{**c, "lastHeartbeatTime": now, "lastTransitionTime": now} for c in entry["conditions"]]
            if conditions:
                core.patch_node_status(name, {"status": {"conditions": conditions}}, _content_type=STRATEGIC)
            changed = _set_taint(core, name, taint, entry["taint"]) if taint and entry["taint"] else None
        except ApiException as exc:
            if exc.status == 404:  # the node is gone (core/v1 is always served): nothing to write on it
                done.append({"node": name, "labels": {}, "conditions": [], "taint": None, "gone": True})
                continue
            fault = api_outcome(exc, f"publish to node {name}")
            applied = ", ".join(d["node"] for d in done) or "none"
            raise ActionFailed(f"{fault.message} (nodes already published: {applied})", fault.category) from None
        done.append({"node": name, "labels": entry["labels"], "conditions": [c["type"] + "=" + c["status"]
                                                                              for c in entry["conditions"]],
                     "taint": changed})
    return done


def _set_taint(core: client.CoreV1Api, name: str, key: str, action: str) -> str:
    """Add or remove taint ``key:NoSchedule`` on node ``name``: ``added``, ``removed`` or ``unchanged``."""
    node: Any = core.read_node(name)
    taints = [{k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect),
                                 ("timeAdded", t.time_added.strftime("%Y-%m-%dT%H:%M:%SZ") if t.time_added else None))
               if v is not None} for t in node.spec.taints or []]
    has = any(t["key"] == key and t["effect"] == TAINT_EFFECT for t in taints)
    if (action == "add") == has:
        return "unchanged"
    if action == "add":
        taints.append({"key": key, "effect": TAINT_EFFECT})
    else:
        taints = [t for t in taints if not (t["key"] == key and t["effect"] == TAINT_EFFECT)]
    body = {"metadata": {"resourceVersion": node.metadata.resource_version}, "spec": {"taints": taints}}
    core.patch_node(name, body, _content_type=MERGE)
    return "added" if action == "add" else "removed"
