"""Kubernetes event rows in every form operators paste them, with counts and ages kept.

Forms read (kubectl 1.18-1.34):

* ``kubectl describe`` ``Events:`` tables: ``Type  Reason  Age  From  Message`` header, ``----`` rule,
  rows ``Warning  FilteringFailed  16s (x2 over 16s)  hami-scheduler  1 nodes …`` (Age may be
  ``<unknown>``/``<invalid>``; From is one word, or ``kubelet, <node>`` before 1.20); long messages
  wrapped onto indented continuation lines;
* ``kubectl get events`` tables (``[NAMESPACE] LAST SEEN TYPE REASON OBJECT MESSAGE`` and the ``-o wide``
  columns, or the old ``COUNT`` column), cut at the header's column positions;
* header-less rows, alone or several: ``5d15h  Warning  ExceedsGPUQuota  pod/x  <message>`` (with or
  without a namespace first, ages as ``3m (x41235 over 5d15h)``);
* Kubernetes 1.2-1.9 ``kubectl describe`` rows under ``FirstSeen LastSeen Count From SubObjectPath Type Reason
  Message``, the columns tab-separated (empty ones leave runs of tabs) or re-flowed into spaces; From is
  ``{default-scheduler }`` / ``{kubelet node-1}`` (1.2-1.6) or ``kubelet, node-1``; SubObjectPath
  ``spec.containers{name}`` or empty; 1.2-1.3 have no Type column (a ``Failed…``/``BackOff``/``Unhealthy``
  reason is then a Warning). LastSeen is the row's age, FirstSeen the span its count covers;
* Event objects are read by :mod:`.describe` (``parse_event_object``).

Each row becomes an :class:`EventRow`; :func:`classify_row` turns it into reasons. Normal events are
read too: a Normal event can carry a blocking reason (Volcano writes ``queue resource quota
insufficient`` as a Normal ``Unschedulable`` event), anything else Normal is informational.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pytest_hetero.pending.describe import Columns, _source_for, classify_message
from pytest_hetero.pending.model import Reason, make_reason

_AGE = r"(?:<unknown>|<invalid>|\d+(?:\.\d+)?[smhdy][\dsmhdy]*)"
_AGE_FULL = re.compile(rf"^(?P<age>{_AGE})(?:\s+\(x(?P<count>\d+) over (?P<over>{_AGE})\))?$")
_DESCRIBE_ROW = re.compile(
    rf"^\s*(?P<type>Normal|Warning)\s+(?P<reason>[A-Za-z][\w.:-]*)\s+"
    rf"(?:(?P<age>{_AGE}(?:\s+\(x\d+ over {_AGE}\))?)\s+)?"
    r"(?P<from>[\w.@/-]+(?:, [\w.-]+)?)\s{2,}(?P<message>\S.*?)\s*$"
)
_SINGLE_ROW = re.compile(
    rf"^\s*(?P<type>Normal|Warning) (?P<reason>[A-Za-z][\w.:-]*) (?P<age>{_AGE}(?: \(x\d+ over {_AGE}\))?) "
    r"(?P<from>[\w.@/-]+(?:, [\w.-]+)?) (?P<message>\S.*?)\s*$"
)
"""A describe row whose columns are one space apart (re-flowed by a chat, a ticket or ``tr -s ' '``): the age
between reason and reporter keeps it unambiguous."""
_BARE_ROW = re.compile(
    rf"^\s*(?:(?P<ns>[a-z0-9][\w.-]*)\s+)?(?P<age>{_AGE}(?:\s+\(x\d+ over {_AGE}\))?)\s+"
    r"(?P<type>Normal|Warning)\s+(?P<reason>[A-Za-z][\w.:-]*)\s+(?P<object>[\w.-]+/[\w.:-]+)\s+(?P<message>\S.*?)\s*$"
)
_BARE_NO_OBJECT = re.compile(
    rf"^\s*(?P<age>{_AGE}(?:\s+\(x\d+ over {_AGE}\))?)\s+(?P<type>Normal|Warning)\s+(?P<reason>[A-Za-z][\w.:-]*)\s+"
    r"(?P<message>\S.*?)\s*$"
)
OLD_ROW = re.compile(
    rf"^\s*(?P<first>{_AGE})\s+(?P<last>{_AGE})\s+(?P<count>\d+)\s+(?P<from>\{{[^}}]*\}}|[\w.@/-]+(?:, [\w.-]+)?)\s+"
    r"(?:(?P<sub>[a-z][\w.]*\{[^}\s]*\}|spec\.\S+)\s+)?(?:(?P<type>Normal|Warning)\s+)?(?P<reason>[A-Z][\w.:-]*)\s+"
    r"(?P<message>\S.*?)\s*$"
)
"""A Kubernetes 1.2-1.9 describe row (module docstring)."""
OLD_HEADER = re.compile(
    r"^\s*FirstSeen\s+LastSeen\s+Count\s+From\s+(?:Sub[Oo]bjectPath\s+)?(?:Type\s+)?Reason\s+Message\s*$"
)
_OLD_WARNING = re.compile(r"^(?:Failed|Back[Oo]ff|Unhealthy|Err|Evict|Insufficient|Invalid|OutOf|Missing|NodeNotReady)")
_GET_HEADER = re.compile(r"\bLAST SEEN\b.*\bTYPE\b.*\bREASON\b.*\bMESSAGE\b")


@dataclass
class EventRow:
    """One event as printed: ``type``, ``reason``, ``age`` (as printed), ``count`` (``x2`` → 2),
    ``over`` (the span of the repeats), reporting ``source``, ``object`` (``pod/x``), ``namespace``,
    the (unwrapped) ``message`` and the 0-based ``lines`` of the paste piece it came from."""

    type: str
    reason: str
    message: str
    age: str | None = None
    count: int | None = None
    over: str | None = None
    source: str = ""
    object: str = ""
    namespace: str = ""
    lines: list[int] = field(default_factory=list)


def _age(text: str | None) -> tuple[str | None, int | None, str | None]:
    if not text:
        return None, None, None
    m = _AGE_FULL.match(text.strip())
    if not m:
        return text.strip() or None, None, None
    return m.group("age"), int(m.group("count")) if m.group("count") else None, m.group("over")


def parse_event_rows(lines: list[str]) -> list[EventRow]:
    """Return every event row in ``lines`` (any of the forms in the module docstring), in order.

    Wrapped message continuations (indented lines after a describe row) are joined with one space.
    Lines that are not event rows are skipped. Never raises.
    """
    rows: list[EventRow] = []
    columns: Columns | None = None
    last: EventRow | None = None
    for index, line in enumerate(lines):
        if not line.strip():
            last = None
            continue
        if _GET_HEADER.search(line):
            columns = Columns.of(line)
            continue
        if columns is not None:
            row = _cut(line, columns, index)
            if row is not None:
                rows.append(row)
                last = row
                continue
        m = _DESCRIBE_ROW.match(line) or _SINGLE_ROW.match(line)
        if m:
            age, count, over = _age(m.group("age"))
            last = EventRow(m.group("type"), m.group("reason"), m.group("message"), age, count, over,
                            source=m.group("from"), lines=[index])
            rows.append(last)
            continue
        m = OLD_ROW.match(line)
        if m:
            reason = m.group("reason")
            kind = m.group("type") or ("Warning" if _OLD_WARNING.match(reason) else "Normal")
            braced = m.group("from")
            source = ", ".join(braced.strip("{} ").split()) if braced.startswith("{") else braced
            last = EventRow(kind, reason, m.group("message"), m.group("last"), int(m.group("count")), m.group("first"),
                            source=source, lines=[index])
            rows.append(last)
            continue
        bare = _BARE_ROW.match(line)  # names the object (and maybe the namespace); _BARE_NO_OBJECT names neither
        m = bare or _BARE_NO_OBJECT.match(line)
        if m:
            age, count, over = _age(m.group("age"))
            last = EventRow(m.group("type"), m.group("reason"), m.group("message"), age, count, over,
                            object=bare.group("object") if bare else "", namespace=(bare.group("ns") or "") if bare
                            else "", lines=[index])
            rows.append(last)
            continue
        if last is not None and line[:1] in (" ", "\t") and not re.match(r"^\s*-{3,}", line) and not re.match(
            r"^\s*Type\s+Reason", line
        ) and not OLD_HEADER.match(line):
            last.message += " " + line.strip()
            last.lines.append(index)
    return rows


def _cut(line: str, columns: Columns, index: int) -> EventRow | None:
    def cell(name: str) -> str:
        return columns.cell(line, name)

    kind = cell("TYPE")
    if kind not in ("Normal", "Warning"):
        return None
    age, count, over = _age(cell("LAST SEEN"))
    if count is None and cell("COUNT").isdecimal():
        count = int(cell("COUNT"))
    return EventRow(kind, cell("REASON"), cell("MESSAGE"), age, count, over, source=cell("SOURCE"),
                    object=cell("OBJECT") or cell("KIND"), namespace=cell("NAMESPACE"), lines=[index])


_PROBE = re.compile(r"(?P<probe>Startup|Liveness|Readiness) probe (?:failed|errored):?\s*(?P<why>.*)", re.IGNORECASE)
_EVICTION_REASON = re.compile(r"^(?:EvictedDue\w+|Evicted|Preempted|WorkloadEvicted)$")
"""Kueue reports evictions and preemptions as *Normal* events (``EvictedDueToPodsReadyTimeout``,
``EvictedDueToAdmissionCheck``, ``Preempted``): the meaning is in the reason, not the event type."""
_BLOCKING_NORMAL = re.compile(
    r"queue resource quota insufficient|is overused|overused|tasks in gang unschedulable|"
    r"nodes are (?:un)?available|couldn't assign flavors|insufficient|exceeded quota",
    re.IGNORECASE,
)


def classify_row(row: EventRow) -> list[Reason]:
    """Reasons for one event row; ``[]`` for a Normal event that reports progress, not a refusal.

    Adds to :func:`.describe.classify_message`: probe failures (reason ``Unhealthy``), HAMi ``node
    unregistered``, ``ExceedsGPUQuota``, Volcano's ``resource in cluster is overused``, and blocking
    reasons carried by Normal events. A Warning nobody understands becomes ``unknown`` (the caller
    decides how to report it).
    """
    message, reason = row.message, row.reason
    if _EVICTION_REASON.match(reason):
        return [make_reason("kueue", "workload_evicted", message.strip() or reason,
                            detail={"event_reason": reason, "event_type": row.type})]
    if row.type == "Normal" and not _BLOCKING_NORMAL.search(message):
        return []
    if re.search(r"can possibly be assigned to \S+,? once minAvailable is satisfied", message):
        return []  # Volcano: this gang member fits; it waits for the rest of its gang (reported on the PodGroup)
    detail = {"event_reason": reason}
    probe = _PROBE.search(message)
    if reason == "Unhealthy" or probe:
        why = probe.group("why") if probe else message
        from pytest_hetero.probes.nvidia_common import global_errors

        device = bool(global_errors(why)) or "nvidia-smi" in why.lower() or "npu-smi" in why.lower()
        return [make_reason("kubelet", "probe_failed", message.strip(),
                            cause="device_unhealthy" if device else None,
                            detail={**detail, "probe": (probe.group("probe") if probe else "").lower()})]
    if reason == "ExceedsGPUQuota" or re.search(r"exceeds? (?:the )?GPU quota", message, re.IGNORECASE):
        return [make_reason("admission", "quota_exceeded", message.strip(), resource="nvidia.com/gpu",
                            detail=detail)]
    if re.search(r"node unregistered|unregistered node|no registered devices", message, re.IGNORECASE):
        return [make_reason("hami", "device_node_unregistered", message.strip(), detail=detail)]
    overused = re.search(r"resource in cluster is overused:?\s*(?:overused\s+(?P<res>[\w./-]+))?", message)
    if overused:
        return [make_reason("volcano", "queue_quota_insufficient", message.strip(), resource=overused.group("res"),
                            detail={**detail, "overused": "cluster"})]
    found = classify_message(message, reason=reason, component=row.source)
    if found:
        return found
    if row.type == "Warning":
        return [make_reason(_source_for(row.source), "unknown", message.strip(), detail=detail)]
    return []
