"""kube-scheduler ``FailedScheduling`` messages (Kubernetes 1.18-1.34) and HAMi scheduler reasons.

Formats read (message text of the event / ``PodScheduled=False`` condition):

* ``0/N nodes are available: <n> <reason>, <n> <reason>.`` - the per-plugin reasons, sorted, each
  prefixed with the number of nodes that gave it. Plugin wording changed across versions, e.g.
  ``node(s) didn't match node selector`` (1.18-1.20) vs ``node(s) didn't match Pod's node
  affinity/selector`` (1.21+), ``node(s) had taint {k: v}, that the pod didn't tolerate`` (-1.24) vs
  ``node(s) had untolerated taint {k: v}`` (1.25+).
* 1.23+ append `` preemption: 0/N nodes are available: <n> No preemption victims found for incoming
  pod, <n> Preemption is not helpful for scheduling.``; 1.26+ DRA may insert ``no new claims to
  deallocate`` before it. Those preemption fragments become reasons with ``preemption=True``.
* Pre-filter rejections without a node count: ``0/3 nodes are available: persistentvolumeclaim "x"
  not found.``, ``pod has unbound immediate PersistentVolumeClaims``, ``no nodes available to
  schedule pods``.
* Volcano's ``all nodes are unavailable: 2 node(s) resource fit failed.`` / ``0/N nodes are
  unavailable: ...`` (same shape, Volcano wording).
* HAMi (scheduler extender): ``1 NodeUnfitPod`` inside FailedScheduling, and its ``FilteringFailed``
  events ``<n> nodes CardInsufficientMemory(node-a,node-b)`` / ``no available node, <n> nodes do
  not meet``.

Fragments that match no known wording become ``code="unknown"`` with their text; nothing is dropped
except the fixed DRA note ``no new claims to deallocate`` which carries no reason.

kube-scheduler prints one message for ``nodeSelector`` and required node affinity, so
``node affinity/selector`` is reported as ``node_selector_mismatch``; only wordings that name
affinity alone give ``node_affinity_mismatch`` (:mod:`.describe` refines it from a Pod spec).
Since about 1.31 the scheduler prints ``node(s) had untolerated taint(s)`` without the taint, so
``taint`` is None and a NotReady node's taint can no longer be told from any other.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from pytest_hetero.pending.model import Reason, make_reason

_HEAD = re.compile(r"^(?:(\d+)/(\d+)|all) nodes are (?:un)?available:?\s*(.*)$", re.IGNORECASE | re.DOTALL)
_HEAD_IN = re.compile(r"(?<![\w/])(?:(\d+)/(\d+)|all) nodes are (?:un)?available:?\s*(.*)$",
                      re.IGNORECASE | re.DOTALL)
"""The head after a prefix: a headerless ``kubectl get events`` row (namespace, age, type, reason,
object columns before the message)."""
_PREEMPTION = re.compile(r"(?:^|[.,]\s*)preemption:\s*", re.IGNORECASE)
_ITEM_SPLIT = re.compile(r",\s+(?=\d+\s)")
_COUNTED = re.compile(r"^(\d+)\s+(.*)$", re.DOTALL)
_TAINT = re.compile(r"taints?\s*\{([^}]*)\}", re.IGNORECASE)
_NOISE = ("no new claims to deallocate",)

# Ordered (pattern, code); first match wins. Patterns are searched in the lower-cased fragment.
_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"^insufficient\s+\S+", "insufficient_resource"),
    (r"too many pods|pod number exceeded", "too_many_pods"),
    (r"resource fit failed", "insufficient_resource"),
    (r"persistentvolume|\bvolume|free storage|\bpvc", "volume_binding"),
    (r"no preemption victims found", "preemption_no_victims"),
    (r"preemption is not helpful", "preemption_not_helpful"),
    (
        r"node affinity/selector|didn't (?:match|satisfy) node ?selector|node selector does not match",
        "node_selector_mismatch",
    ),
    (r"node affinity|nodeaffinity", "node_affinity_mismatch"),
    (r"requested node name|requested hostname", "node_name_mismatch"),
    (r"topology spread", "topology_spread"),
    (r"affinity", "pod_affinity"),
    (r"free ports", "port_conflict"),
    (r"were unschedulable", "node_unschedulable"),
    (r"(?:were|was|is) not ready|not-ready|unknown condition|network unavailable", "node_not_ready"),
    (r"(memory|disk|pid) pressure|out of disk", "node_pressure"),
    (r"claims?\b|resourceclaim|resource driver", "device_claim_unallocatable"),
    (r"no nodes available", "no_nodes"),
    (r"scheduling gates", "scheduling_gated"),
)

_TAINT_CODES = {
    "node.kubernetes.io/not-ready": "node_not_ready",
    "node.kubernetes.io/unreachable": "node_not_ready",
    "node.kubernetes.io/network-unavailable": "node_not_ready",
    "node.kubernetes.io/unschedulable": "node_unschedulable",
    "node.kubernetes.io/memory-pressure": "node_pressure",
    "node.kubernetes.io/disk-pressure": "node_pressure",
    "node.kubernetes.io/pid-pressure": "node_pressure",
}

#: HAMi filter reason names (pkg/scheduler, HAMi v2.4+) -> code.
HAMI_CODES: dict[str, str] = {
    "CardInsufficientMemory": "device_memory_insufficient",
    "CardInsufficientCore": "device_cores_insufficient",
    "CardTypeMismatch": "device_type_mismatch",
    "CardUuidMismatch": "device_type_mismatch",
    "CardNotFoundCustomFilterRule": "device_type_mismatch",
    "NumaNotFit": "device_numa_unfit",
    "NodeInsufficientDevice": "device_count_insufficient",
    "AllocatedCardsInsufficientRequest": "device_count_insufficient",
    "CardTimeSlicingExhausted": "device_count_insufficient",
    "CardComputeUnitsExhausted": "device_count_insufficient",
    "ExclusiveDeviceAllocateConflict": "device_count_insufficient",
    "ResourceQuotaNotFit": "quota_exceeded",
    "NodeUnfitPod": "device_unfit",
}
_HAMI_NAMED = re.compile(r"(\d+)\s+nodes?\s+([A-Z][A-Za-z]+)\(([^)]*)\)")
_HAMI_NONE = re.compile(r"no available node,\s*(\d+)\s+nodes? do not meet", re.IGNORECASE)
_HAMI_CARDS = re.compile(r"(\d+)/(\d+)\s+([A-Z][A-Za-z]+)")


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _taint(inner: str) -> str:
    """``{key: value}`` as printed by the scheduler -> ``key=value`` (``key`` when the value is empty)."""
    key, _, value = inner.partition(":")
    key, value = key.strip(), value.strip()
    return f"{key}={value}" if value else key


def classify_fragment(
    text: str,
    *,
    nodes: int | None = None,
    total: int | None = None,
    preemption: bool = False,
    source: str = "scheduler",
    advertised: Collection[str] | None = None,
) -> Reason:
    """Classify one reason fragment (without its node count) into a :class:`Reason`.

    ``advertised``: resource names some node advertises; an ``Insufficient <r>`` for a resource not
    in it becomes ``resource_not_advertised``. Never raises for any text: unmatched -> ``unknown``.
    """
    frag = text.strip().rstrip(".").strip()
    message = f"{nodes} {frag}" if nodes is not None else frag
    common: dict[str, Any] = {"nodes": nodes, "total_nodes": total, "preemption": preemption}
    if frag in HAMI_CODES:
        return make_reason("hami", HAMI_CODES[frag], message, **common)
    plugin = re.match(r"^\d*\s*plugin \S+ predicates failed\s*", frag, re.IGNORECASE)
    if plugin:  # Volcano wraps the kube plugin message: "plugin X predicates failed <text>"
        frag = frag[plugin.end() :] or frag
    low = frag.lower()
    taint = _TAINT.search(frag)
    if taint:
        value = _taint(taint.group(1))
        code = _TAINT_CODES.get(value.split("=")[0], "untolerated_taint")
        return make_reason(source, code, message, taint=value, **common)
    if "taint" in low and "tolerat" in low:
        return make_reason(source, "untolerated_taint", message, **common)
    for pattern, code in _PATTERNS:
        if re.search(pattern, low):
            resource = None
            if code == "insufficient_resource" and low.startswith("insufficient"):
                resource = frag.split()[1]
                if advertised is not None and resource not in advertised:
                    code = "resource_not_advertised"
            return make_reason(source, code, message, resource=resource, **common)
    return make_reason(source, "unknown", message, **common)


def _parse_counted(
    body: str, *, total: int | None, preemption: bool, source: str, advertised: Collection[str] | None
) -> list[Reason]:
    reasons: list[Reason] = []
    body = body.strip().rstrip(".").strip()
    # A ". " ends the counted list; what follows are PostFilter notes (e.g. DRA's).
    listed, _, notes = body.partition(". ")
    for item in _ITEM_SPLIT.split(listed):
        if not item.strip():
            continue
        counted = _COUNTED.match(item.strip())
        if counted:
            reasons.append(
                classify_fragment(
                    counted.group(2),
                    nodes=int(counted.group(1)),
                    total=total,
                    preemption=preemption,
                    source=source,
                    advertised=advertised,
                )
            )
        else:
            reasons.append(
                classify_fragment(
                    item, total=total, preemption=preemption, source=source, advertised=advertised
                )
            )
    for note in re.split(r"\.\s+|,\s+", notes):
        note = note.strip().rstrip(".")
        if note and note.lower() not in _NOISE:
            reasons.append(classify_fragment(note, total=total, preemption=preemption, source=source))
    return reasons


def parse_scheduler_message(
    message: str, *, source: str = "scheduler", advertised: Collection[str] | None = None
) -> list[Reason]:
    """Parse one FailedScheduling message into reasons, preemption verdicts last.

    ``message`` may be wrapped over several lines. Returns at least one reason for non-blank
    text (``unknown`` when nothing matched) and ``[]`` for blank text. ``source`` is
    ``"scheduler"`` or ``"volcano"``. Never raises on any string.
    """
    text = _squash(message)
    if not text:
        return []
    if re.search(r"tasks in gang unschedulable|queue resource quota insufficient", text, re.IGNORECASE):
        # Volcano writes its gang verdict into the pod's PodScheduled condition too.
        from pytest_hetero.pending.volcano import classify_queue_text, parse_gang_message

        volcano = parse_gang_message(text) or classify_queue_text(text)
        if volcano:
            return volcano
    parts = _PREEMPTION.split(text, maxsplit=1)
    main, pre = parts[0], (parts[1] if len(parts) > 1 else "")
    reasons = _parse_part(main, preemption=False, source=source, advertised=advertised)
    if pre:
        reasons += _parse_part(pre, preemption=True, source=source, advertised=advertised)
    return reasons or [make_reason(source, "unknown", text)]


def _parse_part(
    text: str, *, preemption: bool, source: str, advertised: Collection[str] | None
) -> list[Reason]:
    head = _HEAD.match(text) or _HEAD_IN.search(text)
    if head:
        total = int(head.group(2)) if head.group(2) else None
        found = _parse_counted(
            head.group(3), total=total, preemption=preemption, source=source, advertised=advertised
        )
        if not found and total == 0:  # "0/0 nodes are available": the cluster has no node to offer
            found = [
                make_reason(source, "no_nodes", text.strip(), nodes=0, total_nodes=0, preemption=preemption)
            ]
        return found
    hami = parse_hami_message(text)
    if hami:
        return hami
    return _parse_counted(text, total=None, preemption=preemption, source=source, advertised=advertised)


def parse_hami_message(message: str) -> list[Reason]:
    """Parse a HAMi ``FilteringFailed`` event message; ``[]`` when it is not one.

    Shapes (HAMi v2.4-v2.8 ``pkg/scheduler``): ``<n> nodes <ReasonName>(<node>,<node>)`` (one per
    reason name, several may be joined), ``no available node, <n> nodes do not meet``, and the
    per-card tally ``<k>/<m> <ReasonName>`` from scheduler logs. Unknown reason names become
    ``unknown`` with source ``hami``.
    """
    text = _squash(message)
    reasons: list[Reason] = []
    for m in _HAMI_NAMED.finditer(text):
        names = tuple(n.strip() for n in m.group(3).split(",") if n.strip())
        code = HAMI_CODES.get(m.group(2), "unknown")
        reasons.append(make_reason("hami", code, m.group(0), nodes=int(m.group(1)), node_names=names))
    if not reasons:
        for m in _HAMI_CARDS.finditer(text):
            if m.group(3) in HAMI_CODES:
                reasons.append(
                    make_reason(
                        "hami",
                        HAMI_CODES[m.group(3)],
                        m.group(0),
                        detail={"cards": f"{m.group(1)}/{m.group(2)}"},
                    )
                )
    none = _HAMI_NONE.search(text)
    if none and not reasons:
        reasons.append(make_reason("hami", "device_unfit", none.group(0), nodes=int(none.group(1))))
    return reasons
