"""The run-wide usage ledger: what the gate's own workloads held, aggregated at assembly.

Each item that saw a workload the gate created writes a ``usage.workload`` record (written by
:mod:`pytest_hetero.layers.usage` from an engine's facts, :data:`~pytest_hetero.backends.protocol.USAGE_FACTS`);
a governance probe writes its own ``governance.ledger``. :func:`ledger` walks the items once and builds
the evidence document's ``usage`` section (see its docstring for the shape). Bad or partial records never
break assembly: a record without a time counts with what it has; one whose ``data`` does not fit its declared
shape (:class:`WorkloadFacts`, converted once) adds nothing; the section names both as incomplete.

Units: a resource-second is one base unit of a request (a core, a byte, a device) held for one second
(Kubernetes quantities per k8s.io/apimachinery ``resource.Quantity``, parsed by
:func:`pytest_hetero.matrix.quantity.quantity`).
"""

from __future__ import annotations

import functools
import heapq
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, NotRequired, TypedDict

import msgspec

from pytest_hetero.declared import resolve
from pytest_hetero.evidence.document import is_record
from pytest_hetero.evidence.queue_times import QueueSection, queue_times
from pytest_hetero.matrix.quantity import quantity_or_none

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pytest_hetero.backends.protocol import UsageFacts
    from pytest_hetero.evidence.document import ItemDict, RecordDict

RECORD = "usage.workload"
"""Record kind of one workload's usage facts in an item's evidence."""
WORST = 5
"""How many of the idlest workloads the section names."""
LISTED = 20
"""How many failed workloads and incomplete records the section names (counts are always whole)."""
GATE = "(gate)"
"""The project a workload ran as when it was submitted with the gate's own identity (no tenant)."""

COVERS = (
    "every workload the gate created whose engine reported it: Kubernetes workload pods (scheduling, startup, "
    "model runs inside them, pods of serving Deployments the run deployed), Docker containers and placement "
    "probes, local model processes; governance probe "
    "workloads under the tenant they ran as (each probe's own ledger is also summed under governance)",
    "resource-seconds = each request (base units: cores, bytes, devices) x seconds held, held from placement "
    "(else start, else submission) until the workload ended or was released, else until the run's end",
)
DOES_NOT_COVER = (
    "work the platform did for the gate outside its workloads (image pulls on nodes, controllers, apiserver)",
    "serving Deployments' pods are counted as listed when the startup item checked them (attributed to the "
    "served model): a pod a later rollout replaced counts until the run's end (an upper bound), and a Deployment "
    "the run did not deploy itself is not the gate's workload",
    "KWOK nodes: placement and start times are the simulator's, not a kubelet's (workloads marked simulated)",
    "the local engine requests nothing from a scheduler: its request-seconds are the resource's requests over "
    "the process's wall time; cpu_s is what it used (rusage)",
    "a workload released by the engine's cleanup is counted until the run's end line (after every engine "
    "closed): an upper bound",
)


Time = float | str | None
"""A workload's time as a record holds it: epoch seconds (what every engine writes), an RFC 3339 text (read by
:func:`epoch`), or None (not known)."""


class WorkloadFacts(msgspec.Struct, frozen=True, kw_only=True):
    """A ``usage.workload`` record's ``data`` as the ledger reads it (:mod:`pytest_hetero.layers.usage` writes the
    engine's :class:`~pytest_hetero.backends.protocol.UsageFacts`, the model it ran and that model's task type),
    converted once by :func:`workload_facts`: every fact optional (None, the default: not reported, or reported as
    null), each of its declared JSON type; keys it does not declare (``within``, ``name``, ``held_s``…) are not
    read. A time is :data:`Time`."""

    workload: str | None = None
    object: str | None = None
    namespace: str | None = None
    tenant: str | None = None
    requests: dict[str, str | float] | None = None
    submitted: Time = None
    placed: Time = None
    started: Time = None
    ended: Time = None
    released: Time = None
    attempts: int | None = None
    outcome: str | None = None
    simulated: bool | None = None
    cpu_s: float | None = None
    model: str | None = None
    task_type: str | None = None


class ProbeWasteFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What a governance probe's cluster turned away, as its ``governance.ledger`` record holds it
    (:class:`~pytest_hetero.backends.protocol.ProbeWaste`, which writes all three; 0 when absent)."""

    attempts: int = 0
    refused: int = 0
    waited_s: float = 0.0


class GovernanceLedgerFacts(msgspec.Struct, frozen=True, kw_only=True):
    """A ``governance.ledger`` record's ``data`` (:mod:`pytest_hetero.layers.governance`, from the probe's
    :class:`~pytest_hetero.backends.protocol.ProbeLedger`) as the ledger reads it, converted once
    (:func:`_fold_governance`): resource-seconds by namespace and the waste (None or absent: none)."""

    resource_seconds: dict[str, dict[str, float]] | None = None
    waste: ProbeWasteFacts | None = None


GOVERNANCE_RECORD = "governance.ledger"
"""Record kind of a governance probe's own ledger (:class:`GovernanceLedgerFacts`)."""


def workload_facts(data: object) -> WorkloadFacts | msgspec.ValidationError:
    """``data`` (a ``usage.workload`` record's, or an engine's :class:`~pytest_hetero.backends.protocol.UsageFacts`:
    untrusted) as :class:`WorkloadFacts`; the conversion's error when it is not an object or a fact is not of its
    declared JSON type (its message names the field: ``... - at `$.attempts```)."""
    try:
        return msgspec.convert(data, WorkloadFacts)
    except msgspec.ValidationError as error:
        return error


class FailedWaste(TypedDict):
    """Workloads that failed or were refused: how many, their resource-seconds, the items that said so."""

    workloads: int
    resource_seconds: dict[str, float]
    items: list[str]


class RetryWaste(TypedDict):
    """Reruns of items, restarts of workloads, and the resource-seconds of earlier attempts."""

    reruns: int
    restarts: int
    resource_seconds: dict[str, float]


class IdleWorkload(TypedDict):
    """One of the idlest workloads: its key, the item that reported it, seconds between placement and start."""

    workload: str
    nodeid: str
    idle_s: float


class IdleWaste(TypedDict):
    """Seconds between placement and start, summed, and the :data:`WORST` idlest workloads."""

    seconds: float
    worst: list[IdleWorkload]


class Waste(TypedDict):
    """The usage section's ``waste``."""

    failed: FailedWaste
    retries: RetryWaste
    idle: IdleWaste


class GovernanceUsage(TypedDict):
    """The governance probes' ledgers summed: probes, resource-seconds by namespace, attempts, refused, waited."""

    probes: int
    resource_seconds: dict[str, dict[str, float]]
    attempts: int
    refused: int
    waited_s: float


class IncompleteUsage(TypedDict):
    """How many workloads lacked a time or a quantity, the first :data:`LISTED`, and until when they count."""

    count: int
    workloads: list[IncompleteWorkload]
    until: str


class UsageUnits(TypedDict):
    """What the section's numbers count."""

    resource_seconds: str
    times: str


class UsageSection(TypedDict):
    """The evidence document's ``usage`` section (:func:`ledger`, its only writer: every field but ``queue``,
    which bundles written before issue 33 lack)."""

    covers: list[str]
    does_not_cover: list[str]
    units: UsageUnits
    workloads: int
    simulated: int
    resource_seconds: dict[str, dict[str, dict[str, float]]]
    cpu_s: float
    waste: Waste
    governance: GovernanceUsage
    incomplete: IncompleteUsage
    queue: NotRequired[QueueSection]


def epoch(value: Any) -> float | None:
    """``value`` as epoch seconds: a number as it is; a timezone-aware ``datetime`` (the kubernetes client's
    timestamps); an ISO 8601 / RFC 3339 string (``Z`` accepted; fractional seconds of any length, as
    Docker's nanoseconds and Kubernetes' MicroTime, cut to microseconds) parsed. None for anything else:
    absent, unparsable, or a time in year 1 (Docker's zero time for "never")."""
    if type(value) is float:  # the engines' own facts: the common case, checked first
        return value
    if value is None or isinstance(value, bool):  # None: a time not known (yet), the next most common
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, datetime):
        return value.timestamp() if value.year > 1 else None
    if isinstance(value, str) and value and not value.startswith("0001-"):
        return _rfc3339(value)
    return None


def _rfc3339(text: str) -> float | None:
    """Epoch seconds of an RFC 3339 time; None when unparsable. Python 3.10's ``fromisoformat`` reads
    neither ``Z`` nor fractions other than 3 or 6 digits, so the fraction is cut or padded to 6."""
    text = text.replace("Z", "+00:00").replace("z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        if not digits:
            return None
        text = f"{head}.{rest[:digits][:6].ljust(6, '0')}{rest[digits:]}"
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


class Times(NamedTuple):
    """A workload's times and how it ended, parsed once (:meth:`of`) for :meth:`held`, :meth:`idle` and the queue
    times (:mod:`pytest_hetero.evidence.queue_times`): epoch seconds (None: not known, or not a time :func:`epoch`
    reads) and ``outcome`` (None: not stated, or not a string). A named tuple, as :class:`Facts` and :class:`Workload`:
    assembly makes one of each per workload, and a tuple is made at a third of a frozen dataclass's cost."""

    submitted: float | None = None
    placed: float | None = None
    started: float | None = None
    ended: float | None = None
    released: float | None = None
    outcome: str | None = None

    @classmethod
    def of(cls, facts: WorkloadFacts) -> Times:
        """The times of ``facts`` (each read by :func:`epoch`: a text that is not a time is None)."""
        return cls(epoch(facts.submitted), epoch(facts.placed), epoch(facts.started), epoch(facts.ended),
                   epoch(facts.released), facts.outcome)

    def held(self, until: float | None = None) -> tuple[float | None, list[str]]:
        """Seconds the workload held its requests, and what was missing to say it exactly.

        A workload never placed (``outcome`` refused or pending, no ``placed``) held nothing: 0 s. Else from
        ``placed`` (else ``started``, else ``submitted``) to the earlier of ``ended`` and ``released``,
        else to ``until`` (epoch seconds: the run's end). Returns (seconds ≥ 0, or None when no start or no
        end is known; the missing facts' names, empty when both ends were the workload's own).
        """
        missing: list[str] = []
        if self.placed is None and self.outcome in ("refused", "pending"):
            return 0.0, missing  # never placed: it held no node's resources (a quota may still have counted it)
        begin = self.placed
        if begin is None:
            begin = self.started if self.started is not None else self.submitted
        if begin is None:
            missing.append("placed")
        ended, released = self.ended, self.released
        end = ended if released is None else released if ended is None else min(ended, released)
        if end is None:
            missing.append("released")
            end = until
        if begin is None or end is None:
            return None, missing
        return max(0.0, end - begin), missing

    def idle(self) -> float | None:
        """Seconds between placement and start (``started − placed``, ≥ 0); None when either is unknown."""
        if self.placed is None or self.started is None:
            return None
        return max(0.0, self.started - self.placed)


def _times(facts: UsageFacts) -> Times:
    """The :class:`Times` of an engine's ``facts``; none known when they do not fit :class:`WorkloadFacts` (the
    record the layer writes of them is then named incomplete by the ledger, with why)."""
    read = workload_facts(facts)
    return Times() if isinstance(read, msgspec.ValidationError) else Times.of(read)


def held(facts: UsageFacts, until: float | None = None) -> tuple[float | None, list[str]]:
    """:meth:`Times.held` of the workload of ``facts`` (an engine's
    :class:`~pytest_hetero.backends.protocol.UsageFacts`)."""
    return _times(facts).held(until)


def idle(facts: UsageFacts) -> float | None:
    """:meth:`Times.idle` of the workload of ``facts``."""
    return _times(facts).idle()


def requests_of(requests: dict[str, str | float] | None) -> tuple[dict[str, float], tuple[str, ...]]:
    """``{resource: quantity in base units}`` of ``requests`` (``{name: quantity}``; None: none stated), and the
    names whose quantity could not be read (left out: ``requests.<name>``)."""
    out: dict[str, float] = {}
    bad: list[str] = []
    for name, value in (requests or {}).items():
        amount = _quantity(value)
        if amount is None:
            bad.append(f"requests.{name}")
        else:
            out[name] = amount
    return out, tuple(bad)


@functools.lru_cache(maxsize=1024)
def _quantity(value: str | int | float) -> float | None:
    """:func:`~pytest_hetero.matrix.quantity.quantity_or_none`, remembered: a run repeats few quantities."""
    return quantity_or_none(value)


def _add(into: dict[str, dict[str, float]], key: str, amounts: dict[str, float]) -> None:
    per = into.get(key)
    if per is None:
        into[key] = dict(amounts)
        return
    _sum(per, amounts)


def _sum(into: dict[str, float], amounts: dict[str, float]) -> None:
    for res, value in amounts.items():
        into[res] = into.get(res, 0.0) + value


def _rounded(table: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    return {k: _rounded_one(per) for k, per in sorted(table.items())}


def _rounded_one(amounts: dict[str, float]) -> dict[str, float]:
    return {r: round(v, 3) for r, v in sorted(amounts.items())}


class Facts(NamedTuple):
    """A workload's usage facts as the ledger counts them, from its folded reports (:meth:`of`), each default
    decided here: its :class:`Times`; ``requests`` in base units and the request names whose quantity could not be
    read (:func:`requests_of`); ``object`` (None: not stated); the ``namespace`` (``(unknown)`` when not stated)
    and ``project`` (the tenant; :data:`GATE` when none) it ran as; ``restarts`` (its ``attempts`` but the first,
    0 when not stated); the ``model`` it ran (None: not a model's workload) and that model's ``task_type``
    (``(unknown)`` when not stated); whether it ran on ``simulated`` nodes; ``cpu_s`` (None: not measured)."""

    times: Times
    requests: dict[str, float]
    unreadable: tuple[str, ...]
    object: str | None
    namespace: str
    project: str
    restarts: int
    model: str | None
    task_type: str
    simulated: bool
    cpu_s: float | None

    @classmethod
    def of(cls, facts: WorkloadFacts) -> Facts:
        """The facts of ``facts`` (a ``usage.workload`` record's data, or several folded: :func:`_merge`)."""
        requests, unreadable = requests_of(facts.requests)
        return cls(Times.of(facts), requests, unreadable, facts.object,
                   facts.namespace or "(unknown)",
                   facts.tenant or GATE,
                   max(0, (facts.attempts or 1) - 1),
                   facts.model or None,
                   facts.task_type or "(unknown)",
                   bool(facts.simulated),
                   facts.cpu_s)


class Workload(NamedTuple):
    """One workload as the ledger counts it: its :class:`Facts` (its reports folded by :func:`_fold`, then
    parsed once), the ``nodeid`` of the item that first reported it, its ``attempt`` (≥ 1: a rerun plugin's
    earlier attempt), ``by`` the item whose report says how it ended."""

    facts: Facts
    nodeid: str
    attempt: int
    by: str


@dataclass
class _Reports:
    """One workload's reports as :func:`_fold` merges them: ``facts`` (:class:`WorkloadFacts`, every one
    optional; a later report's win), the
    ``nodeid`` of the item that first reported it, its ``attempt``, ``at`` the time of the latest report, ``by``
    the item whose report says how it ended."""

    facts: WorkloadFacts
    nodeid: str
    attempt: int
    at: str
    by: str


@dataclass
class _Governance:
    """The governance probes' own ledgers, summed (:func:`_fold_governance`)."""

    probes: int = 0
    resource_seconds: dict[str, dict[str, float]] = field(default_factory=dict)
    attempts: int = 0
    refused: int = 0
    waited_s: float = 0.0


class IncompleteWorkload(TypedDict):
    """A workload whose held time or requests could not be said exactly: what was ``missing``."""

    workload: str
    nodeid: str
    missing: list[str]


def _merge(into: _Reports, facts: WorkloadFacts, at: str) -> None:
    """Fold one report of a workload into what is known of it: a later report's facts win, an
    earlier one only fills what is still unknown (a fact that is None is unknown: it neither wins nor fills)."""
    newer = at >= into.at
    first, then = (into.facts, facts) if newer else (facts, into.facts)
    into.facts = msgspec.structs.replace(first, **{k: v for k, v in msgspec.structs.asdict(then).items()
                                                   if v is not None})
    if newer:
        into.at = at


def _records(item: ItemDict | dict[str, Any], earlier: list[Any]) -> list[tuple[RecordDict, int]]:
    """(record, attempt) of every record of ``item`` (its envelopes checked by the journal's line check or the
    loader) and of its ``earlier`` attempts (its ``attempts``: a rerun plugin's; attempt ≥ 1 numbers those, 0 is
    the final attempt), where what is not a record (:func:`~pytest_hetero.evidence.document.is_record`) is left
    out: an earlier attempt's evidence is checked by neither."""
    out = [(r, 0) for r in item["records"]]
    for n, attempt in enumerate(earlier, 1):
        if isinstance(attempt, dict):
            out += [(r, n) for r in attempt.get("records") or [] if is_record(r)]
    return out


def ledger(items: Iterable[ItemDict] | Iterable[dict[str, Any]], until: str | None) -> UsageSection:
    """The evidence document's ``usage`` section from the run's ``items`` (evidence dicts, or JSON objects with a
    ``nodeid`` and ``records``: each record's ``data`` untrusted), walked once.

    ``until``: ISO time of the run's end line (written after every engine's cleanup), the release time
    of a workload whose engine reported none; None (an interrupted run): such workloads count until
    their last reported time and are listed as incomplete.

    ``items`` each have ``records`` (a list of records: :data:`~pytest_hetero.evidence.document.RECORD_ENVELOPE`,
    as the journal's line check and the loader hold them); in an earlier attempt's, what is not a record is left
    out. A record whose ``data`` does not fit its shape (:class:`WorkloadFacts`, :class:`GovernanceLedgerFacts`)
    adds nothing and is listed under ``incomplete`` with the conversion's message, which names the field.

    Shape: ``covers``/``does_not_cover`` (sentences), ``units``, ``workloads`` (count), ``simulated``
    (how many ran on simulated nodes), ``resource_seconds`` ``{"by_namespace", "by_project",
    "by_task_type", "by_model"}`` each ``{key: {resource: request × seconds}}`` (model runs only for the
    last two; ``by_project`` keys are tenants, :data:`GATE` for the gate's own identity), ``cpu_s`` (rusage
    CPU-seconds where the engine measured them), ``waste`` ``{"failed": {"workloads", "resource_seconds",
    "items"}, "retries": {"reruns", "restarts", "resource_seconds"}, "idle": {"seconds", "worst":
    [{"workload", "nodeid", "idle_s"}]}}``, ``governance`` (the probes' ledgers summed: ``probes``,
    ``resource_seconds`` by namespace, ``attempts``, ``refused``, ``waited_s``), ``incomplete``
    (``count`` and the first :data:`LISTED` ``{"workload", "nodeid", "missing"}``), ``queue`` (wait, start and
    run seconds per pool: :func:`pytest_hetero.evidence.queue_times.queue_times`).

    The cyclic garbage collector is paused meanwhile, as assembly pauses it (the ledger makes a few objects per
    workload and no cycles: collections would only walk the items again).
    """
    from pytest_hetero.evidence.model import gc_paused

    with gc_paused():
        return _ledger(items, until)


def _ledger(items: Iterable[ItemDict] | Iterable[dict[str, Any]], until: str | None) -> UsageSection:
    end = epoch(until)
    workloads: dict[str, _Reports] = {}
    unfit: list[IncompleteWorkload] = []
    reruns = 0
    gov = _Governance()
    latest = ""  # ISO 8601 UTC strings of one format compare as times: parsed once, at the end
    for item in items:
        earlier = item.get("attempts") or []
        reruns += len(earlier)
        for rec, attempt in _records(item, earlier):
            kind = rec["kind"]
            if kind == RECORD:
                at = rec["at"]
                latest = max(latest, at)
                _fold(workloads, unfit, rec["data"], at, item["nodeid"], attempt)  # an item always has its nodeid
            elif kind == GOVERNANCE_RECORD:
                _fold_governance(gov, unfit, rec["data"], item["nodeid"])
    counted = {key: Workload(Facts.of(r.facts), r.nodeid, r.attempt, r.by) for key, r in workloads.items()}
    return _section(counted, end if end is not None else epoch(latest), end is None, reruns, gov, unfit)


def _fold(workloads: dict[str, _Reports], unfit: list[IncompleteWorkload], data: object, at: str,
          nodeid: str, attempt: int) -> None:
    """Fold one ``usage.workload`` record (``data``, recorded ``at`` by item ``nodeid``) into ``workloads``; one
    that does not fit :class:`WorkloadFacts` goes to ``unfit`` instead, with why."""
    facts = workload_facts(data)
    if isinstance(facts, msgspec.ValidationError):
        unfit.append(IncompleteWorkload(workload=f"{nodeid}#{len(workloads) + len(unfit)}", nodeid=nodeid,
                                        missing=[f"a usable record: {facts}"]))
        return
    key = facts.workload or f"{nodeid}#{len(workloads)}"
    w = workloads.get(key)
    if w is None:  # the common case: the first report of a workload is taken as it is
        workloads[key] = _Reports(facts, nodeid, attempt, at, nodeid)
        return
    if facts.outcome is not None and at >= w.at:
        w.by = nodeid  # the item whose report says how the workload ended
    _merge(w, facts, at)


def _fold_governance(gov: _Governance, unfit: list[IncompleteWorkload], data: object, nodeid: str) -> None:
    """Add one ``governance.ledger`` record's ``data`` to ``gov``; one that does not fit
    :class:`GovernanceLedgerFacts` adds nothing but its probe, and goes to ``unfit`` with why."""
    gov.probes += 1
    try:
        ledger = msgspec.convert(data, GovernanceLedgerFacts)
    except msgspec.ValidationError as error:
        unfit.append(IncompleteWorkload(workload=GOVERNANCE_RECORD, nodeid=nodeid,
                                        missing=[f"a usable record: {error}"]))
        return
    for ns, per in (ledger.resource_seconds or {}).items():
        _add(gov.resource_seconds, ns, per)
    if ledger.waste is not None:
        gov.attempts += ledger.waste.attempts
        gov.refused += ledger.waste.refused
        gov.waited_s += ledger.waste.waited_s


def _idle(idlest: list[tuple[float, str, str]], key: str, w: Workload) -> float:
    """``w``'s idle seconds (0 when unknown), kept in ``idlest`` (a heap of the :data:`WORST` idlest)."""
    gap = w.facts.times.idle()
    if gap is None:
        return 0.0
    if len(idlest) < WORST:
        heapq.heappush(idlest, (gap, key, str(w.nodeid)))
    elif gap > idlest[0][0]:
        heapq.heapreplace(idlest, (gap, key, str(w.nodeid)))
    return gap


def _section(workloads: dict[str, Workload], until: float | None, open_end: bool, reruns: int,
             gov: _Governance, unfit: list[IncompleteWorkload]) -> UsageSection:
    tables: dict[str, dict[str, dict[str, float]]] = {
        "by_namespace": {}, "by_project": {}, "by_task_type": {}, "by_model": {}}
    failed: dict[str, float] = {}
    retried: dict[str, float] = {}
    failed_items: list[str] = []
    failed_count = restarts = simulated = 0
    idle_total = 0.0
    idlest: list[tuple[float, str, str]] = []
    incomplete: list[IncompleteWorkload] = []
    incomplete_count = 0
    cpu_s = 0.0
    for key, workload in workloads.items():
        w = workload.facts
        seconds, missing = w.times.held(until)
        if not open_end:  # released by the engine's cleanup, before the run's end line: the documented bound
            missing = [m for m in missing if m != "released"]
        held_s = seconds or 0.0
        amounts = {res: q * held_s for res, q in w.requests.items()}
        missing += w.unreadable
        if missing or seconds is None:
            incomplete_count += 1
            incomplete += [IncompleteWorkload(workload=key, nodeid=workload.nodeid, missing=missing)
                           ][:LISTED - len(incomplete)]
        if w.object != "exec":
            _add(tables["by_namespace"], w.namespace, amounts)
            _add(tables["by_project"], w.project, amounts)
            restarts += w.restarts
        if w.model is not None:
            _add(tables["by_task_type"], w.task_type, amounts)
            _add(tables["by_model"], w.model, amounts)
        if w.times.outcome in ("failed", "refused"):
            failed_count += 1
            _sum(failed, amounts)
            by = str(workload.by or workload.nodeid)
            if len(failed_items) < LISTED and by not in failed_items:
                failed_items.append(by)
        if workload.attempt:
            _sum(retried, amounts)
        idle_total += _idle(idlest, key, workload)
        simulated += w.simulated
        if w.cpu_s is not None:
            cpu_s += w.cpu_s
    idlest.sort(reverse=True)
    incomplete_count += len(unfit)
    incomplete += unfit[:LISTED - len(incomplete)]
    return {
        "covers": list(COVERS),
        "does_not_cover": list(DOES_NOT_COVER),
        "units": {"resource_seconds": "request in base units (cores, bytes, devices) x seconds held",
                  "times": "seconds"},
        "workloads": len(workloads),
        "simulated": simulated,
        "resource_seconds": {name: _rounded(t) for name, t in tables.items()},
        "cpu_s": round(cpu_s, 3),
        "waste": {
            "failed": {"workloads": failed_count, "resource_seconds": _rounded_one(failed),
                       "items": failed_items},
            "retries": {"reruns": reruns, "restarts": restarts,
                        "resource_seconds": _rounded_one(retried)},
            "idle": {"seconds": round(idle_total, 3),
                     "worst": [{"workload": k, "nodeid": n, "idle_s": round(s, 3)} for s, k, n in idlest[:WORST]]},
        },
        "governance": {"probes": gov.probes, "resource_seconds": _rounded(gov.resource_seconds),
                       "attempts": gov.attempts, "refused": gov.refused, "waited_s": round(gov.waited_s, 3)},
        "incomplete": {"count": incomplete_count, "workloads": incomplete,
                       "until": "run end" if not open_end else "last reported time (interrupted run)"},
        "queue": _queue(workloads),
    }


def _queue(workloads: dict[str, Workload]) -> QueueSection:
    """Queue and placement times per pool (:mod:`pytest_hetero.evidence.queue_times`)."""
    return queue_times(workloads)


resolve(__name__)
