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
* Kubernetes 1.2-1.9 predicate messages, before the ``0/N`` form: ``No nodes are available that match all of
  the following predicates:: Insufficient cpu (9), MatchNodeSelector (18).`` (1.5-1.6; 1.7-1.8 say ``all of the
  predicates:``), 1.4's ``fit failure summary on nodes : PodToleratesNodeTaints (2)`` and 1.2-1.3's ``pod (x)
  failed to fit in any node fit failure on node (n1): PodExceedsFreeCPU``, 1.0-1.1's ``Failed for reason
  MatchNodeSelector and possibly others`` (the first predicate only). ``failed to fit in any node`` with no
  predicate after it (1.2-1.4 printed the per-node lines only in the scheduler's log) and 1.0's ``failed to
  find a fit for pod`` are ``unschedulable_unexplained``. Each predicate name is read as the
  wording the same predicate prints from 1.9 on (``MatchNodeSelector`` -> ``node(s) didn't match node
  selector``), so it gets the same code as the modern message; the count in parentheses is its node count.
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
from dataclasses import replace
from typing import TypedDict

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
    (r"persistentvolume|\bvolume|free storage|\bpvc|no available disk", "volume_binding"),
    (r"no preemption victims found", "preemption_no_victims"),
    (r"preemption is not helpful", "preemption_not_helpful"),
    (
        r"node affinity/selector|didn't (?:match|satisfy) node ?selector|node selector does not match|"
        r"didn't have the requested labels",
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


#: Predicate names of the Kubernetes 1.2-1.9 scheduler (``pkg/scheduler/algorithm/predicates``) -> the wording the
#: same predicate prints from 1.9 on (``predicates/error.go``), so both forms are classified by one table.
PREDICATE_WORDING: dict[str, str] = {
    "MatchNodeSelector": "node(s) didn't match node selector",
    "PodToleratesNodeTaints": "node(s) had taints that the pod didn't tolerate",
    "PodToleratesNodeNoExecuteTaints": "node(s) had taints that the pod didn't tolerate",
    "NoDiskConflict": "node(s) had no available disk",
    "NoVolumeZoneConflict": "node(s) had no available volume zone",
    "MaxEBSVolumeCount": "node(s) exceed max volume count",
    "MaxGCEPDVolumeCount": "node(s) exceed max volume count",
    "MaxAzureDiskVolumeCount": "node(s) exceed max volume count",
    "MaxCinderVolumeCount": "node(s) exceed max volume count",
    "MaxCSIVolumeCountPred": "node(s) exceed max volume count",
    "NoVolumeNodeConflict": "node(s) had volume node affinity conflict",
    "VolumeNodeAffinityConflict": "node(s) had volume node affinity conflict",
    "VolumeBindingNoMatch": "node(s) didn't find available persistent volumes to bind",
    "MatchInterPodAffinity": "node(s) didn't match pod affinity/anti-affinity",
    "CheckServiceAffinity": "node(s) didn't match service affinity",
    "CheckNodeLabelPresence": "node(s) didn't have the requested labels",
    "NodeLabelPresence": "node(s) didn't have the requested labels",
    "PodFitsHostPorts": "node(s) didn't have free ports for the requested pod ports",
    "PodFitsPorts": "node(s) didn't have free ports for the requested pod ports",
    "HostName": "node(s) didn't match the requested hostname",
    "PodFitsHost": "node(s) didn't match the requested hostname",
    "CheckNodeMemoryPressure": "node(s) had memory pressure",
    "NodeUnderMemoryPressure": "node(s) had memory pressure",
    "CheckNodeDiskPressure": "node(s) had disk pressure",
    "NodeUnderDiskPressure": "node(s) had disk pressure",
    "CheckNodePIDPressure": "node(s) had pid pressure",
    "NodeNotReady": "node(s) were not ready",
    "NodeOutOfDisk": "node(s) were out of disk space",
    "NodeNetworkUnavailable": "node(s) had network unavailable",
    "NodeUnknownCondition": "node(s) had unknown conditions",
    "NodeUnschedulable": "node(s) were unschedulable",
    "PodExceedsFreeCPU": "Insufficient cpu",
    "PodExceedsFreeMemory": "Insufficient memory",
    "PodExceedsMaxPodNumber": "Too many pods",
    "Insufficient pods": "Too many pods",
}
_PREDICATES = re.compile(
    r"no nodes are available that match all of the (?:following )?predicates:+\s*(?P<body>.*)$|"
    r"fit failure summary on nodes\s*:\s*(?P<summary>.*)$|"
    r"failed for reason (?P<one>[A-Z]\w+)(?: and possibly others)?",
    re.IGNORECASE,
)
_PREDICATE_ITEM = re.compile(r"(?P<name>[^,()]*?[^,()\s])\s*\((?P<n>\d+)\)")
_NO_FIT = re.compile(r"failed to fit in any node|failed to find a fit for pod", re.IGNORECASE)
_FIT_FAILURE = re.compile(r"fit failure on node \((?P<node>[^)]*)\)\s*:\s*(?P<why>.*?)(?=\s*fit failure on node \(|$)",
                          re.IGNORECASE)


def _predicate(name: str, *, nodes: int | None, source: str, advertised: Collection[str] | None,
               node_names: tuple[str, ...] = ()) -> Reason:
    """One old predicate name (or ``Insufficient <r>``) classified as its 1.9+ wording, its own text kept."""
    name = name.strip().rstrip(".").strip()
    wording = PREDICATE_WORDING.get(name, name)
    reason = classify_fragment(wording, nodes=nodes, source=source, advertised=advertised)
    message = f"{name} ({nodes})" if nodes is not None else name
    detail = {**reason.detail, "predicate": name}
    return replace(reason, message=message, node_names=node_names, detail=detail)


def parse_predicate_message(
    text: str, *, source: str = "scheduler", advertised: Collection[str] | None = None
) -> list[Reason] | None:
    """Reasons of a Kubernetes 1.2-1.9 predicate message (module docstring); None when ``text`` is not one.

    ``No nodes are available that match all of the following predicates:: A (n), B (m).`` gives one reason
    per predicate with ``nodes`` n (no total: the old scheduler did not print it); ``fit failure on node
    (x): A`` lines give one reason per predicate with the nodes that named it. Never raises.
    """
    text = _squash(text)
    m = _PREDICATES.search(text)
    if m:
        if m.group("one"):  # 1.0-1.1: "Failed for reason MatchNodeSelector and possibly others"
            return [_predicate(m.group("one"), nodes=None, source=source, advertised=advertised)]
        body = (m.group("body") if m.group("body") is not None else m.group("summary") or "").strip().rstrip(".")
        items = list(_PREDICATE_ITEM.finditer(body))
        if not items:
            return [_predicate(p, nodes=None, source=source, advertised=advertised)
                    for p in body.split(",") if p.strip()] or [make_reason(source, "unknown", text)]
        return [_predicate(i.group("name"), nodes=int(i.group("n")), source=source, advertised=advertised)
                for i in items]
    fits = list(_FIT_FAILURE.finditer(text))
    if not fits:
        if _NO_FIT.search(text):  # the verdict without its predicates
            return [make_reason(source, "unschedulable_unexplained", text)]
        return None
    per: dict[str, list[str]] = {}
    for fit in fits:
        for why in fit.group("why").strip().rstrip(".").split(","):
            if why.strip():
                per.setdefault(why.strip(), []).append(fit.group("node"))
    return [_predicate(name, nodes=len(nodes), node_names=tuple(nodes), source=source, advertised=advertised)
            for name, nodes in per.items()]


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _taint(inner: str) -> str:
    """``{key: value}`` as printed by the scheduler -> ``key=value`` (``key`` when the value is empty)."""
    key, _, value = inner.partition(":")
    key, value = key.strip(), value.strip()
    return f"{key}={value}" if value else key


class FragmentCounts(TypedDict):
    """What every :class:`Reason` of one fragment carries: the ``nodes`` it was said of and the ``total_nodes``
    (None: not said) and whether the scheduler tried ``preemption``."""

    nodes: int | None
    total_nodes: int | None
    preemption: bool


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
    common: FragmentCounts = {"nodes": nodes, "total_nodes": total, "preemption": preemption}
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
    old = parse_predicate_message(text, source=source, advertised=advertised)
    if old is not None:
        return old
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
