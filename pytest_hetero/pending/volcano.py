"""Volcano PodGroup conditions, PodGroup events, queue messages and Volcano FailedScheduling text.

Formats (Volcano v1.0-v1.12, ``scheduling.volcano.sh/v1beta1``):

* PodGroup ``status.conditions[]`` with ``type: Unschedulable``, ``reason: NotEnoughResources`` (or
  ``NotEnoughPods``) and a gang message ``<k>/<n> tasks in gang unschedulable: pod group is not
  ready, 2 Pending, 2 minAvailable; Pending: 1 Schedulable, 1 Unschedulable`` (older versions stop
  after ``1 minAvailable``); the same as ``kubectl describe podgroup`` text, possibly wrapped.
* Queue refusals: ``queue resource quota insufficient`` (capacity/proportion plugins, optionally
  naming resources), ``... is overused``, ``can only submit job to queue with state `Open`, queue
  `q` status is `Closed```, queue not found.
* Volcano's pod ``FailedScheduling``: ``0/3 nodes are unavailable: 3 Insufficient nvidia.com/gpu.`` /
  ``all nodes are unavailable: 2 node(s) resource fit failed.`` (parsed by :mod:`.scheduler`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pytest_hetero.declared import as_written
from pytest_hetero.errors import ParseError
from pytest_hetero.pending.model import Condition, Reason, as_map, as_text, conditions_of, make_reason
from pytest_hetero.pending.objects import KubeObject, PhaseFields, PodGroupSpecFields
from pytest_hetero.pending.scheduler import parse_scheduler_message

_GANG = re.compile(
    r"(?P<k>\d+)/(?P<n>\d+) tasks in gang unschedulable:\s*(?P<rest>(?:pod group|job) is not ready[^\n]*)",
    re.IGNORECASE,
)
_GANG_WORD = re.compile(r"gang", re.IGNORECASE)
_PAIR = re.compile(r"(\d+)\s+([A-Za-z]+)")
_QUEUE_QUOTA = re.compile(r"queue resource quota insufficient(?::?\s*(?P<res>[^\n]*))?", re.IGNORECASE)
_OVERUSED = re.compile(r"(?:queue\s+`?(?P<q>[\w.-]+)`?\s+is\s+)?overused", re.IGNORECASE)
_CLOSED = re.compile(
    r"queue\s+`?(?P<q>[\w.-]+)`?\s+(?:status is\s+`?(?:Closed|Closing)`?|is\s+(?:closed|not open))",
    re.IGNORECASE,
)
_NOT_FOUND = re.compile(
    r"(?:unable to find job queue|queue\s+\"?(?P<q>[\w.-]+)\"?\s+(?:is\s+)?not found)", re.IGNORECASE
)
_QUEUE_WORDS = re.compile(r"queue|overused", re.IGNORECASE)
_FIELDS = ("Message", "Reason", "Type", "Phase", "Status", "Queue", "Last Transition Time", "Transition ID")
_FIELD = re.compile(rf"^\s*({'|'.join(_FIELDS)}):\s*(.*)$")


def _snake(word: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", word).lower()


def parse_gang_message(message: str, *, detail: Mapping[str, str] | None = None) -> list[Reason]:
    """Parse a ``tasks in gang unschedulable`` message (may be line-wrapped); ``[]`` if absent. Volcano before
    v0.3 (volcano-sh/volcano#520, 2019) wrote ``job is not ready`` where later versions write ``pod group is not
    ready``; both are read.

    Quantities: ``unschedulable_tasks`` (k) and ``tasks`` (n) of ``k/n``, each ``<count> <State>``
    stat as its snake_case name (``pending``, ``min_available``, ``succeeded``...), and the states
    after ``Pending:`` prefixed ``pending_`` (``pending_schedulable``, ``pending_unschedulable``).
    """
    if not _GANG_WORD.search(message):  # the pattern's one word that wrapping cannot split
        return []
    text = re.sub(r"\s+", " ", message).strip()
    m = _GANG.search(text)
    if not m:
        return []
    rest = m.group("rest").rstrip(". ")
    stats, _, pending = rest.partition("; Pending:")
    quantities = {"unschedulable_tasks": m.group("k"), "tasks": m.group("n")}
    for count, state in _PAIR.findall(stats):
        quantities[_snake(state)] = count
    for count, state in _PAIR.findall(pending):
        quantities["pending_" + _snake(state)] = count
    return [
        make_reason(
            "volcano",
            "gang_unschedulable",
            m.group(0).rstrip(". "),
            quantities=quantities,
            detail=dict(detail or {}),
        )
    ]


def classify_queue_text(text: str) -> list[Reason]:
    """Volcano queue refusals found in ``text`` (quota insufficient, overused, closed, not found)."""
    out: list[Reason] = []
    if not _QUEUE_WORDS.search(text):  # each of the four patterns needs one of these words
        return out
    m = _QUEUE_QUOTA.search(text)
    if m:
        res = (m.group("res") or "").strip()
        names = re.findall(r"insufficient\s+([\w./-]+)", res)
        if names:
            out += [
                make_reason("volcano", "queue_quota_insufficient", m.group(0).strip(), resource=n)
                for n in names
            ]
        else:
            out.append(make_reason("volcano", "queue_quota_insufficient", m.group(0).strip()))
    for pattern, code in (
        (_OVERUSED, "queue_quota_insufficient"),
        (_CLOSED, "queue_inactive"),
        (_NOT_FOUND, "queue_not_found"),
    ):
        m = pattern.search(text)
        if m and not (code == "queue_quota_insufficient" and out):
            queue = m.group("q")  # each of the three names the queue, when the message does
            out.append(
                make_reason("volcano", code, m.group(0).strip(), detail={"queue": queue} if queue else {})
            )
    return out


def parse_volcano_message(message: str) -> list[Reason]:
    """Parse one Volcano message: gang, queue, or FailedScheduling (``nodes are unavailable``)."""
    if re.search(r"nodes are unavailable", message, re.IGNORECASE):
        return parse_scheduler_message(message, source="volcano")
    return parse_gang_message(message) or classify_queue_text(message)


@dataclass(frozen=True)
class PodGroupFacts:
    """What the pending reader uses of a Volcano PodGroup (or its ``status`` alone): its ``conditions``, its
    ``phase`` (status.phase), ``name`` (metadata.name) and ``queue`` (spec.queue), "" when absent."""

    conditions: list[Condition]
    phase: str
    name: str
    queue: str

    @classmethod
    def parse(cls, obj: Mapping[str, object]) -> PodGroupFacts:
        """The facts of ``obj``. Raises :class:`ParseError` when ``status``, ``status.conditions``, ``metadata``
        or ``spec`` has the wrong shape (the first of them that has)."""
        parsed = KubeObject.parse(obj)
        found = parsed.status_or_self()
        if not isinstance(found, Mapping):
            raise ParseError("PodGroup status is not a mapping", hint="pass the PodGroup object or its status")
        conditions = conditions_of(parsed.conditions_or_own(), "status.conditions")
        as_map(parsed.metadata_value, "metadata")  # refused when not a mapping (its name is parsed.name)
        phase = as_written(found, PhaseFields).phase
        spec = as_written(as_map(parsed.spec_value, "spec"), PodGroupSpecFields)
        return cls(conditions, as_text(phase) or "", parsed.name or "", as_text(spec.queue) or "")


def parse_podgroup(obj: Mapping[str, object]) -> list[Reason]:
    """Reasons from a PodGroup object (dict from YAML/JSON) or its ``status`` alone.

    Reads every condition whose ``type`` is ``Unschedulable`` or ``Uninqueueable`` (v1.9+), or is
    missing, and whose ``status`` is not ``"False"``. A condition with reason ``NotEnoughResources`` but
    no readable message still yields ``gang_unschedulable``. Raises :class:`ParseError` when
    ``status.conditions`` is not a list.
    """
    group = PodGroupFacts.parse(obj)
    base = {"phase": group.phase, "podgroup": group.name, "queue": group.queue}
    reasons: list[Reason] = []
    for cond in group.conditions:
        if cond.status == "False" or (cond.type if cond.type is not None else "Unschedulable") not in (
                "Unschedulable", "Uninqueueable"):
            continue
        detail = {k: v for k, v in {**base, "condition_reason": cond.reason or ""}.items() if v}
        reasons += _condition(cond.message or "", cond.reason or "", detail)
    return reasons


def _condition(message: str, reason: str, detail: dict[str, str]) -> list[Reason]:
    """The reasons of one PodGroup condition: its ``message``, its ``reason`` ("" when none) and the ``detail``
    every reason carries."""
    found = parse_gang_message(message, detail=detail) or classify_queue_text(message)
    if found:
        return found
    if reason == "NotInqueueable":
        text = message or "NotInqueueable"
        return [make_reason("volcano", "queue_quota_insufficient", text, detail=detail)]
    if reason in ("NotEnoughResources", "NotEnoughPods"):
        return [make_reason("volcano", "gang_unschedulable", message or reason, detail=detail)]
    if message.strip():
        return [make_reason("volcano", "unknown", message.strip(), detail=detail)]
    return []


def parse_podgroup_text(text: str) -> list[Reason]:
    """Reasons from ``kubectl describe podgroup`` condition text (``Message:`` wrapped, ``Reason:`` ...).

    Continuation lines of a field are joined; returns ``[]`` when no ``Message:`` field is present.
    """
    fields: dict[str, str] = {}
    current = ""
    for line in text.splitlines():
        m = _FIELD.match(line)
        if m:
            current = m.group(1)
            fields.setdefault(current, m.group(2).strip())
        elif current == "Message" and line.strip():
            fields["Message"] += " " + line.strip()
        else:
            current = ""
    if "Message" not in fields:
        return []
    reason = fields.get("Reason", "")
    detail = {
        k: v
        for k, v in {
            "phase": fields.get("Phase", ""),
            "condition_reason": reason,
            "condition_type": fields.get("Type", ""),
        }.items()
        if v
    }
    return _condition(fields["Message"], reason, detail)
