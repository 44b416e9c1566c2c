"""Kueue Workload status: why a workload has no quota reserved / is not admitted / was evicted.

Formats (Kueue v0.4-v0.19; ``kueue.x-k8s.io/v1beta1`` and ``v1beta2`` Workloads have the same
status fields): ``status.conditions[]`` of type ``QuotaReserved``, ``Admitted``, ``Evicted``,
``Preempted``, ``PodsReady``, ``BlockedOnPreemptionGates`` (a trimmed capture may lack
``type``/``status``), and ``status.resourceRequests[].resources``.

Condition reasons: before v0.19 (and in v0.19 without its ``UnadmittedWorkloadsObservability``
gate) a Workload without quota says ``Pending`` / ``Inadmissible``; with the gate its
``QuotaReserved=False`` reason is granular (Kueue's ``WorkloadQuotaReservedReason*`` constants,
KEP-10852): :data:`GRANULAR` maps each to a code. Kueue picks the most severe reason of all
flavors it tried, so the reason of the granular code is put first (it decides); a message that
matches no wording below still gets the granular code, never ``unknown``. ``PendingEvaluation``,
``PendingDelayedTopologyRequests`` and ``NoReservation`` (``Admitted=False`` mirroring a missing
reservation) are progress, not refusals. Messages read:

* ``couldn't assign flavors to pod set <ps>: <reason>, <reason>`` where a reason is
  ``insufficient unused quota [in cohort ]for <r> in flavor <f>, <q> more needed``,
  ``insufficient quota for <r> in flavor <f>, request > maximum capacity (<a> > <b>)``,
  ``insufficient quota for <r> in flavor <f>, previously considered podsets requests (<a>) + current
  podset request (<b>) > maximum capacity (<c>)``, ``insufficient quota for <r> in flavor <f> in
  ClusterQueue``, ``borrowing limit for <r> in flavor <f> exceeded``, ``resource <r> unavailable in
  ClusterQueue``, ``flavor <f> doesn't match node affinity``, ``untolerated taint <t> in flavor <f>``;
* ``ClusterQueue <cq> is inactive``, ``ClusterQueue <cq> doesn't exist`` / ``not found``, ``LocalQueue
  <lq> doesn't exist``, ``Workload namespace doesn't match ClusterQueue selector``, ``The workload has
  failed admission checks``, ``resources didn't satisfy LimitRange constraints: ...``, eviction messages
  (``Preempted to accommodate ...``, ``Exceeded the PodsReady timeout ...``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import msgspec

from pytest_hetero.declared import as_written
from pytest_hetero.errors import ParseError
from pytest_hetero.pending.model import (
    Condition,
    Reason,
    as_list,
    as_map,
    as_text,
    conditions_of,
    make_reason,
)
from pytest_hetero.pending.objects import KubeObject

_R = r"(?P<res>[\w./-]+)"
_F = r"(?P<flavor>[\w.-]+)"
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), code)
    for p, code in (
        (
            rf"insufficient unused quota (?P<cohort>in cohort )?for {_R} in flavor {_F}, (?P<more>\S+) more needed",
            "queue_quota_insufficient",
        ),
        (
            (
                rf"insufficient quota for {_R} in flavor {_F}, "
                rf"previously considered podsets requests \((?P<prev>[^)]*)\)"
                rf" \+ current podset request \((?P<req>[^)]*)\) > maximum capacity \((?P<max>[^)]*)\)"
            ),
            "queue_request_exceeds_max",
        ),
        (
            (
                rf"insufficient quota for {_R} in flavor {_F}, "
                rf"request > maximum capacity \((?P<req>\S+) > (?P<max>[^)]+)\)"
            ),
            "queue_request_exceeds_max",
        ),
        (rf"insufficient quota for {_R} in flavor {_F} in ClusterQueue", "queue_request_exceeds_max"),
        (rf"borrowing limit for {_R} in flavor {_F} exceeded", "queue_quota_insufficient"),
        (rf"resource {_R} unavailable in ClusterQueue", "queue_resource_not_covered"),
        (rf"flavor {_F} doesn't match (?:with )?node affinity", "queue_flavor_mismatch"),
        (rf"untolerated taint \{{?(?P<taint>[^}}]*?)\}}? in flavor {_F}", "queue_flavor_mismatch"),
        (r"(?P<kind>ClusterQueue|LocalQueue) (?P<queue>[\w.-]+) is (?:inactive|stopped)", "queue_inactive"),
        (
            r"(?P<kind>ClusterQueue|LocalQueue) (?P<queue>[\w.-]+) (?:doesn't|does not) exist",
            "queue_not_found",
        ),
        (r"(?P<kind>ClusterQueue|LocalQueue) (?P<queue>[\w.-]+) not found", "queue_not_found"),
        (r"ClusterQueue not found", "queue_not_found"),
        (r"The workload has failed admission checks", "admission_check_failed"),
        (r"resources didn't satisfy LimitRange constraints[^\n]*", "limitrange_violation"),
        (r"Workload didn't fit in the remaining quota", "queue_quota_insufficient"),
        (r"namespace doesn't match ClusterQueue selector", "queue_namespace_mismatch"),
        (r"The ClusterQueue is stopped", "queue_inactive"),
        (r"Preempted to accommodate a (?:higher priority )?workload[^\n]*", "workload_evicted"),
        (r"Exceeded the PodsReady timeout[^\n]*", "workload_evicted"),
        (r"Workload no longer fits after processing another workload", "queue_quota_insufficient"),
    )
)
_ANY = re.compile(
    r"quota|flavor|ClusterQueue|LocalQueue|admission checks|LimitRange|Preempted|PodsReady|no longer fits",
    re.IGNORECASE,
)
"""A literal that every pattern of ``_PATTERNS`` contains (matched as they are, ignoring case): text without
one of them cannot match any, so the 22 scans are skipped."""
_POD_SET = re.compile(r"couldn't assign flavors to pod set (?P<ps>[\w.-]+)")


def parse_kueue_message(
    message: str, *, requests: Mapping[str, str] | None = None, detail: Mapping[str, str] | None = None
) -> list[Reason]:
    """Reasons from one Kueue condition message, in order of appearance; ``[]`` if none matched.

    ``requests``: ``{resource: quantity}`` from ``status.resourceRequests``; when a reason names one
    of those resources its ``quantities`` gain ``requested``. Quantities are as written:
    ``more_needed``, ``requested``, ``maximum``, ``previously_requested``.
    """
    text = re.sub(r"\s+", " ", message).strip()
    if not _ANY.search(text):
        return []
    hits: list[tuple[int, Reason]] = []
    taken: list[tuple[int, int]] = []
    for pattern, code in _PATTERNS:
        for m in pattern.finditer(text):
            if any(a <= m.start() < b for a, b in taken):
                continue
            taken.append(m.span())
            hits.append((m.start(), _reason(text, m, code, requests or {}, detail or {})))
    hits.sort(key=lambda pair: pair[0])
    return [r for _, r in hits]


class _Groups(NamedTuple):
    """The named groups of a :data:`_PATTERNS` match, each None when its pattern has no such group or the group
    took no part: the resource and flavor, ``cohort`` (borrowing in the cohort), the quantities more needed,
    previously requested, requested and the maximum, the untolerated ``taint``, and the queue's ``kind``
    (ClusterQueue or LocalQueue, always with ``queue``). Every group a pattern names is a field (a pattern with
    another group fails every test that reaches it)."""

    res: str | None = None
    flavor: str | None = None
    cohort: str | None = None
    more: str | None = None
    prev: str | None = None
    req: str | None = None
    max: str | None = None
    taint: str | None = None
    kind: str | None = None
    queue: str | None = None


def _reason(
    text: str, m: re.Match[str], code: str, requests: Mapping[str, str], base: Mapping[str, str]
) -> Reason:
    g = _Groups(**m.groupdict())
    quantities: dict[str, str] = {}
    if g.more is not None:
        quantities["more_needed"] = g.more
    if g.prev is not None:
        quantities["previously_requested"] = g.prev
    if g.req is not None:
        quantities["requested"] = g.req
    elif g.res is not None and g.res in requests:
        quantities["requested"] = requests[g.res]
    if g.max is not None:
        quantities["maximum"] = g.max
    detail = dict(base)
    sets = [p for p in _POD_SET.finditer(text) if p.start() < m.start()]
    if sets:
        detail["pod_set"] = sets[-1].group("ps")
    if g.cohort is not None:
        detail["cohort"] = "true"
    if g.queue is not None and g.kind is not None:
        detail[g.kind.lower()] = g.queue
    if m.group(0).startswith("borrowing limit"):
        detail["borrowing_limit"] = "exceeded"
    taint = (g.taint or "").strip() or None
    return make_reason(
        "kueue",
        code,
        m.group(0),
        resource=g.res,
        flavor=g.flavor,
        quantities=quantities,
        taint=taint,
        detail=detail,
    )


class _WorkloadStatus(msgspec.Struct, frozen=True, kw_only=True):
    """A pasted Kueue Workload's ``status`` (``kueue.x-k8s.io`` ``WorkloadStatus``) as far as :func:`_requests` reads
    it: ``resourceRequests`` as written (one ``PodSetRequest`` per pod set; None when absent)."""

    resourceRequests: object = None  # noqa: N815 - Kueue's field name


class _PodSetRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One ``status.resourceRequests[]`` entry (``PodSetRequest``): its ``resources`` (resource -> quantity) as
    written."""

    resources: object = None


class _WorkloadSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A pasted Workload's ``spec`` as far as :meth:`WorkloadFacts.parse` reads it: the LocalQueue it names."""

    queueName: object = None  # noqa: N815 - Kueue's field name


def _requests(status: Mapping[str, object]) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in as_list(as_written(status, _WorkloadStatus).resourceRequests, "status.resourceRequests"):
        if isinstance(entry, Mapping) and entry:
            resources = as_written(entry, _PodSetRequest).resources
            for name, value in as_map(resources, "status.resourceRequests[].resources").items():
                out.setdefault(str(name), str(value))
    return out


GRANULAR: dict[str, str] = {
    "WaitingForQuota": "queue_quota_insufficient",
    "WaitingForPreemptedWorkloads": "queue_quota_insufficient",
    "PreemptionGated": "queue_quota_insufficient",
    "ExceedsMaxQuota": "queue_request_exceeds_max",
    "NoMatchingFlavor": "queue_flavor_mismatch",
    "TopologyPlacementFailed": "queue_topology_unfit",
    "Misconfigured": "queue_not_found",
    "Suspended": "queue_inactive",
    "WaitingForPodsReady": "queue_admission_blocked",
    "UnsatisfiedAdmissionChecks": "admission_check_failed",
}
"""Kueue's granular condition reasons (v0.19 ``apis/kueue/v1beta2/workload_types.go``) → code."""
PROGRESS_REASONS = frozenset({"PendingEvaluation", "PendingDelayedTopologyRequests", "NoReservation"})
"""Reasons that say Kueue has not decided yet (or repeat another condition), not why it refused."""

_BLOCKING_TYPES = {"QuotaReserved", "Admitted", "BlockedOnPreemptionGates"}
_EVICTION_TYPES = {"Evicted", "Preempted", "Requeued"}


@dataclass(frozen=True)
class WorkloadFacts:
    """What the pending reader uses of a Kueue Workload (or its ``status`` alone): its ``conditions``, the
    ``requests`` of its pod sets (``status.resourceRequests[].resources``, resource -> quantity, the first pod
    set's first), its ``name`` (metadata.name) and ``local_queue`` (spec.queueName), "" when absent."""

    conditions: list[Condition]
    requests: dict[str, str]
    name: str
    local_queue: str

    @classmethod
    def parse(cls, obj: Mapping[str, object]) -> WorkloadFacts:
        """The facts of ``obj``. Raises :class:`ParseError` when ``status``, ``status.conditions``,
        ``status.resourceRequests``, ``metadata`` or ``spec`` has the wrong shape (the first of them that has)."""
        parsed = KubeObject.parse(obj)
        found = parsed.status_or_self()
        if not isinstance(found, Mapping):
            raise ParseError("Workload status is not a mapping", hint="pass the Workload object or its status")
        conditions = conditions_of(parsed.conditions_or_own(), "status.conditions")
        requests = _requests(found)
        as_map(parsed.metadata_value, "metadata")  # refused when not a mapping (its name is parsed.name)
        spec = as_written(as_map(parsed.spec_value, "spec"), _WorkloadSpec)
        return cls(conditions, requests, parsed.name or "", as_text(spec.queueName) or "")


def parse_workload(obj: Mapping[str, object]) -> list[Reason]:
    """Reasons from a Kueue Workload object (dict from YAML/JSON) or its ``status`` alone.

    Reads conditions ``QuotaReserved``/``Admitted`` with status ``False``, ``Evicted``/``Preempted``
    with status ``True``, and conditions lacking ``type`` (trimmed captures). ``PodsReady=False`` is
    startup progress, not a refusal, and is skipped (its timeout shows up as ``Evicted``). A readable message that
    matches no known wording becomes ``unknown``. Raises :class:`ParseError` when ``status`` or
    ``status.conditions`` has the wrong shape.
    """
    workload = WorkloadFacts.parse(obj)
    reasons: list[Reason] = []
    for cond in workload.conditions:
        ctype, cstatus, reason = cond.type or "", cond.status or "", cond.reason or ""
        blocking = (ctype in _BLOCKING_TYPES and cstatus != "True") or (
            ctype in _EVICTION_TYPES and cstatus != "False"
        )
        if ctype == "BlockedOnPreemptionGates":
            blocking = cstatus == "True"
        if ctype and not blocking:
            continue
        detail = {
            k: v
            for k, v in {
                "workload": workload.name,
                "local_queue": workload.local_queue,
                "condition_type": ctype,
                "condition_reason": reason,
            }.items()
            if v
        }
        message = cond.message or ""
        found = _granular(parse_kueue_message(message, requests=workload.requests, detail=detail), reason, message,
                          detail)
        if found is None:
            continue
        if not found and ctype in _EVICTION_TYPES:
            found = [make_reason("kueue", "workload_evicted", message or ctype, detail=detail)]
        if not found and message.strip():
            found = [make_reason("kueue", "unknown", message.strip(), detail=detail)]
        reasons += [r for r in found if r not in reasons]
    return reasons


def _granular(found: list[Reason], reason: str, message: str, detail: dict[str, str]) -> list[Reason] | None:
    """``found`` (reasons of a condition's message) ordered by the condition's granular ``reason``:
    the first reason of its code first, or one reason of that code when the message matched none;
    None for a progress reason with nothing found (the condition says nothing to report)."""
    if reason in PROGRESS_REASONS and not found:
        return None
    code = GRANULAR.get(reason)
    if code is None:
        return found
    decisive = next((r for r in found if r.code == code), None)
    if decisive is None:
        return [make_reason("kueue", code, message.strip() or reason, detail=detail), *found]
    return [decisive, *(r for r in found if r is not decisive)]
