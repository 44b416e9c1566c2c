"""The evidence document (``evidence.json``) as types: what each section holds, so mypy checks every read.

These are :class:`~typing.TypedDict` s: at run time the document stays the plain dicts and lists that
``json`` reads and writes (the bytes on disk do not change; bundles signed before still verify and render),
while the checker knows each field's type, and that statuses, layers and owner categories are the
:mod:`pytest_hetero.vocab` Literals. A field every writer has always written is required (read it with a
subscript); one a later version added, or that is written only sometimes, is ``NotRequired`` (read it with
``.get``). A record's ``data`` is typed by its kind (:mod:`pytest_hetero.evidence.records`: one TypedDict per
kind the gate writes), and :func:`check_item` holds every record of a declared kind to it
(:func:`pytest_hetero.evidence.records.check_records`); a plugin's own kinds keep an open object.

Untrusted JSON becomes an :class:`EvidenceDocument` in one place, :func:`as_document` (used by the
verifying loader, :func:`pytest_hetero.bundle.verify.load_verified`): it checks the shape of what is typed
as required and refuses the rest with the field's path, so a document edited by hand fails there with a
clear message, not later as a ``KeyError`` in a renderer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, TypeGuard, cast, final

from pytest_hetero.evidence.shapes import ShapeError, check_json
from pytest_hetero.judge.model import CauseDict, FailureDict
from pytest_hetero.vocab import LAYERS, STATUSES, Layer, OwnerCategory, Status

if TYPE_CHECKING:
    from pytest_hetero.bundle.baseline import BaselineSection
    from pytest_hetero.evidence.inputs import MatrixInputs
    from pytest_hetero.evidence.usage import UsageSection
    from pytest_hetero.hooks.builtin import ProfileRan

__all__ = [
    "ArtifactDict", "AttemptDict", "ByLayer", "CauseDict", "CleanupSection", "DocumentError", "Entry",
    "EvidenceDocument", "FailureDict",
    "IDENTITY_RECORD", "ITEM_FIELDS", "ITEM_RESULT_FIELDS", "ItemDict", "JournalSection",
    "LeftoverDict", "LineNote", "MatrixEntry", "MergeSection",
    "MergedBundle", "ModelIdentity", "NodeStatus", "NotProvenEntry", "PoolStatus", "RULES_RECORD", "RUN_FIELD_TYPES",
    "RUN_START_FIELDS", "RecordDict", "RuleBound", "RuleResult", "RuleVerdict", "RunSection", "RunStart",
    "SelectionCounts", "SlimEvidence", "SlimFields",
    "SelectionSection", "SummarySection", "TaskTypeLevel", "TornLine", "UntestedEntry", "UntestedNode",
    "UntestedSection", "UnvalidatedNode", "ValidationSection",
    "as_document", "check_item", "failure_of", "item_of", "matrix_of_item", "model_identity", "owner_of",
    "rule_results", "run_section", "run_start", "RECORD_ENVELOPE", "is_record",
]


class RecordDict(TypedDict):
    """One timestamped fact of an item: ``kind`` (``scheduling.placed``, ``usage.workload``…), ``at`` (ISO
    8601 UTC) and the kind's own ``data``."""

    kind: str
    at: str
    data: dict[str, Any]


class RuleVerdict(TypedDict):
    """What judging one acceptance rule found (:func:`pytest_hetero.matrix.acceptance.evaluate` writes every
    result with these): the ``expected`` text, the ``observed`` value (None when not evaluable), the ``verdict``
    (pass, fail or not_evaluable) and why (``detail``, empty when nothing to say); ``provenance.source`` computed,
    measured or self_reported; ``bound`` ``{op, value, tolerance, unit}`` of a numeric rule; ``failing`` the
    failing golden sample indices, each as the rules file wrote it (the outputs' key values: numbers, or text
    ids); ``problem`` and ``available`` (a rule not evaluable) the kind of problem and
    the ``metrics`` and ``fields`` the outputs offered."""

    expected: str | None
    observed: float | int | str | None
    verdict: str
    detail: str
    metric: NotRequired[str]
    unit: NotRequired[str]
    problem: NotRequired[str]
    provenance: NotRequired[dict[str, Any]]
    bound: NotRequired[RuleBound]
    failing: NotRequired[list[object]]
    available: NotRequired[dict[str, list[str]]]


class RuleResult(RuleVerdict):
    """One acceptance rule's result in a ``business.rules`` record's ``data.results``: the rule's ``name`` and
    ``kind`` and its :class:`RuleVerdict`."""

    name: str
    kind: str


class RuleBound(TypedDict):
    """A numeric rule's accepted bound (:func:`pytest_hetero.matrix.acceptance.evaluate`, a metric or latency
    rule): the comparison, the value, the tolerance (None: none) and the observed value's unit when it has one."""

    op: str
    value: float
    tolerance: float | None
    unit: NotRequired[str]


RULES_RECORD = "business.rules"
"""Record kind of a business item's acceptance rule results (``data.results``: :class:`RuleResult` s)."""
IDENTITY_RECORD = "model.identity"
"""Record kind of the model and data set a model item ran (:class:`ModelIdentity`)."""


class ModelIdentity(TypedDict):
    """What a ``model.identity`` record names (written by the model layer for a model run, by the serving
    layer for a served model: a served model has no ``sha256``), each field as the record holds it (None
    when it lacks it: a record edited by hand, or a served model's ``sha256``)."""

    model: str | None
    version: str | None
    sha256: str | None
    dataset: str | None
    dataset_version: str | None
    dataset_sha256: str | None


def rule_results(record: RecordDict) -> list[RuleResult]:
    """The rule results of a ``business.rules`` record (:func:`pytest_hetero.matrix.acceptance.evaluate`'s, as
    the business layer wrote them: :class:`pytest_hetero.evidence.records.RulesData`, its shape checked when the
    item was, :func:`check_item`); [] for a record of another kind."""
    from pytest_hetero.evidence.records import RULES, data_of  # noqa: PLC0415 - records imports this module

    data = data_of(record, RULES)
    return data["results"] if data is not None else []


def model_identity(record: RecordDict) -> ModelIdentity | None:
    """The identity a ``model.identity`` record names (:class:`pytest_hetero.evidence.records.IdentityData`, its
    shape checked when the item was); None for a record of another kind. ``sha256`` None for a served model's."""
    from pytest_hetero.evidence.records import IDENTITY, data_of  # noqa: PLC0415 - records imports this module

    data = data_of(record, IDENTITY)
    if data is None:
        return None
    return {"model": data["model"], "version": data["version"], "sha256": data.get("sha256"),
            "dataset": data["dataset"], "dataset_version": data["dataset_version"],
            "dataset_sha256": data["dataset_sha256"]}


class ArtifactDict(TypedDict):
    """A captured file: ``path`` relative to the bundle folder, ``size`` in bytes, ``sha256`` hex."""

    name: str
    path: str
    size: int
    sha256: str
    media_type: str


class SlimFields(TypedDict):
    """What an item and its reports keep of its evidence once it is journaled (gating, pytest-html columns):
    :data:`pytest_hetero.pytest_plugin.plugin.SLIM_FIELDS` of its :class:`ItemDict`
    (``blocked_by``, ``reason``, ``failure``: None where the evidence has none)."""

    nodeid: str
    matrix: str
    layer: Layer
    keys: dict[str, str]
    owner: str
    status: Status
    blocked_by: str | None
    reason: str | None
    failure: FailureDict | None


@final
class SlimEvidence(SlimFields):
    """:class:`SlimFields` exactly (final: a reader tells it from an :class:`ItemDict` by its keys)."""


class AttemptDict(SlimFields):
    """An earlier attempt of an item a rerun plugin ran again (:func:`pytest_hetero.pytest_plugin.item.keep_attempt`):
    the evidence the item held when the next attempt began, its artifact paths moved under ``attempt-N/`` (the
    whole item's, or once journaled its slim fields, which are these), and its ``attempt`` number (from 1).
    :func:`check_item` holds each attempt to these fields."""

    attempt: int
    artifacts: NotRequired[list[object]]
    """An attempt kept whole: its artifacts (files moved under ``attempt-N/``), each as the item listed it."""


@final
class ItemDict(TypedDict):
    """One item's evidence (:meth:`pytest_hetero.evidence.model.ItemEvidence.to_dict`): the journal
    refuses an item line without the first eight fields (``recorder.EVIDENCE_FIELDS``)."""

    nodeid: str
    matrix: str
    layer: Layer
    keys: dict[str, str]
    owner: str
    status: Status
    records: list[RecordDict]
    artifacts: list[ArtifactDict]
    started_at: str
    finished_at: str
    duration_s: float
    failure: FailureDict | None
    blocked_by: str | None
    reason: str | None
    attempt: NotRequired[int]
    """This attempt's number, when a rerun plugin ran the item again (only then)."""
    attempts: NotRequired[list[AttemptDict]]
    """Earlier attempts of an item a rerun plugin ran again (only then)."""


@final
class UntestedEntry(TypedDict):
    """One item of the untested scope (:func:`pytest_hetero.evidence.untested.untested_scope`)."""

    nodeid: str
    layer: Layer
    keys: dict[str, str]
    status: Status
    reason: str
    blocked_by: str | None


Entry = ItemDict | UntestedEntry
"""An item that reached a report, or an untested-only entry (renderings list both, each once). Both are
``@final``: ``"records" in entry`` (see :func:`item_of`) narrows an entry to its :class:`ItemDict`."""


def item_of(entry: Entry) -> ItemDict | None:
    """``entry`` when it is an item that reached a report (it has ``records``), else None (an untested-only
    entry: no owner, records, failure, artifacts or times)."""
    return entry if "records" in entry else None


def failure_of(entry: Entry) -> FailureDict | None:
    """The failure of an item (None when it has none, or for an untested-only entry)."""
    return entry["failure"] if "records" in entry else None


def owner_of(entry: Entry) -> str:
    """The owner (team) of an item's layer conclusion; '' for an untested-only entry."""
    return entry["owner"] if "records" in entry else ""


def matrix_of_item(entry: Entry) -> str:
    """The matrix nodeid prefix an item names; '' for an untested-only entry."""
    return entry["matrix"] if "records" in entry else ""


class NotProvenEntry(TypedDict):
    """A part of an item that ran but could not be proven (a ``scope.not_proven`` record)."""

    nodeid: str
    layer: str
    part: str
    reason: str


class UnvalidatedNode(TypedDict):
    """A node of a pool that no workload of the run exercised (a :class:`PoolStatus`' ``unvalidated``: every
    entry :func:`pytest_hetero.status.compute.pool_status` has written has the three fields): its name, status
    ``unvalidated`` and why."""

    node: str
    status: str
    reason: str


class UntestedNode(UnvalidatedNode):
    """An unvalidated node in the untested scope (``untested.nodes``, added by the built-in amend hook): the
    pool's entry with the pool's ``matrix`` and ``pool`` names."""

    matrix: str
    pool: str


class UntestedSection(TypedDict):
    """Everything the run did not prove; ``never_covered``: matrix name → dimension → values. ``items``,
    ``never_covered`` and ``not_proven`` :func:`pytest_hetero.evidence.untested.untested_scope` has always written
    (``not_proven`` since the first day); :func:`as_document` gives a hand-made document without one ``{}`` or
    ``[]``. ``nodes`` the built-in amend hook adds (a bundle written before it lacks it)."""

    items: list[UntestedEntry]
    never_covered: dict[str, dict[str, list[str]]]
    not_proven: list[NotProvenEntry]
    does_not_prove: NotRequired[dict[str, str]]
    nodes: NotRequired[list[UntestedNode]]


class SelectionCounts(TypedDict):
    """How many planned items were not selected, and the first reasons why."""

    deselected: int
    by: list[str]


class ByLayer(TypedDict):
    """A summary's status counts (status -> n, the statuses seen) of each layer, every one of
    :data:`~pytest_hetero.vocab.LAYERS` (:func:`pytest_hetero.evidence.untested.summarise` has written all five, a
    layer without items as ``{}``, since the first version; :func:`as_document` refuses a summary lacking one)."""

    discovery: dict[str, int]
    scheduling: dict[str, int]
    startup: dict[str, int]
    model: dict[str, int]
    business: dict[str, int]


class SummarySection(TypedDict):
    """Per-layer and total status counts and the judge's verdict
    (:func:`pytest_hetero.evidence.untested.summarise`)."""

    by_layer: ByLayer
    totals: dict[str, int]
    verdict: str
    verdict_reason: NotRequired[str]
    selection: NotRequired[SelectionCounts]
    flaky: NotRequired[list[str]]
    clean: NotRequired[bool]
    leftovers: NotRequired[int]


class RunStart(TypedDict, total=False):
    """The journal's run line as the controller writes it at its start (every field, with the git commit:
    :func:`pytest_hetero.pytest_plugin.plugin._recorder`; a merged run's, :func:`run_start` of its first shard's
    ``run`` section, adds ``merged_from``). Not checked when the journal is read: a hand-made or edited
    journal's may lack any, which the ``run`` section then holds as None (:func:`run_section`)."""

    id: str | None
    tool: str | None
    tool_version: str | None
    git_commit: str | None
    host: str | None
    python: str | None
    pytest: str | None
    rootdir: str | None
    invocation: list[str] | None
    profile: str | None
    backend_override: str | None
    started_at: str | None
    merged_from: list[str | None]
    """The run ids of the shards a merged run (``hetero merge``) was assembled from (only then)."""


RUN_START_FIELDS = ("id", "tool", "tool_version", "git_commit", "host", "python", "pytest", "rootdir", "invocation",
                    "profile", "backend_override", "started_at")
"""The run line's fields every ``run`` section has (None where the run line lacked one)."""


class RunSection(TypedDict):
    """The run: who ran what, where, when (the journal's run line, :class:`RunStart`, plus its end line).
    Every document has had every field but ``finished_at_recovered`` since the first version (that one since
    recovery was added: a document without it recovered nothing, ``False``) and ``merged_from``;
    :func:`run_section` (assembly) and :func:`as_document` (loading) give one that a run line or a
    hand-made document lacks its default: None, ``stopped`` ``""``."""

    id: str | None
    tool: str | None
    tool_version: str | None
    git_commit: str | None
    host: str | None
    python: str | None
    pytest: str | None
    rootdir: str | None
    invocation: list[str] | None
    profile: str | None
    backend_override: str | None
    started_at: str | None
    finished_at: str | None
    """The end line's time; a run without one (killed): the latest time its journal states, or None."""
    finished_at_recovered: bool
    """``finished_at`` was recovered from the journal (the run wrote no end line)."""
    exit_status: int | None
    """pytest's exit status (None: the run wrote no end line)."""
    interrupted: bool | None
    """The run ended early (no end line, or interrupted); None only in a hand-made document without it."""
    stopped: str
    """pytest's reason for stopping early ('' when it did not)."""
    merged_from: NotRequired[list[str | None]]
    """The run ids of the shards a merged run (``hetero merge``) was assembled from (only then)."""


def run_section(start: RunStart | None, *, finished_at: str | None, finished_at_recovered: bool,
                exit_status: int | None, interrupted: bool, stopped: str) -> RunSection:
    """The ``run`` section of a run whose journal's run line is ``start`` (None: the journal has none) and
    whose end is the rest: the run line's fields but its own (``type``, ``seq``, ``journal``), each of
    :data:`RUN_START_FIELDS` it lacks None."""
    section: dict[str, object] = dict.fromkeys(RUN_START_FIELDS)
    section.update((k, v) for k, v in (start or {}).items() if k not in ("type", "seq", "journal"))
    section.update(finished_at=finished_at, finished_at_recovered=finished_at_recovered, exit_status=exit_status,
                   interrupted=interrupted, stopped=stopped)
    return cast(RunSection, section)  # the run line is the gate's own; its fields' types are as it wrote them


def run_start(run: RunSection) -> RunStart:
    """The fields of ``run`` (a ``run`` section) its journal's run line had (:data:`RUN_START_FIELDS`): what a
    merged run's run line starts from."""
    return {"id": run["id"], "tool": run["tool"], "tool_version": run["tool_version"], "git_commit": run["git_commit"],
            "host": run["host"], "python": run["python"], "pytest": run["pytest"], "rootdir": run["rootdir"],
            "invocation": run["invocation"], "profile": run["profile"], "backend_override": run["backend_override"],
            "started_at": run["started_at"]}


class MatrixEntry(TypedDict):
    """A matrix file the run planned: its path, nodeid prefix, name and sha256 when the run read it."""

    prefix: str
    name: str
    sha256: str
    path: NotRequired[str]


class LeftoverDict(TypedDict, total=False):
    """Something an engine created that was still there after the run
    (:class:`pytest_hetero.backends.protocol.Leftover`, with its ``backend``)."""

    backend: str
    kind: str
    name: str
    namespace: str | None
    reason: str
    detail: dict[str, Any]
    remove: str


class CleanupSection(TypedDict):
    """Whether every engine removed what it created, and what it left."""

    clean: bool
    leftovers: list[LeftoverDict]


class TornLine(TypedDict):
    """The journal's last line when a killed run cut it off (:func:`pytest_hetero.evidence.journal.torn_tail`):
    its file ``line`` number, its length in ``bytes``, the ``nodeid`` it named (None when cut before it) and the
    artifact ``paths`` it named."""

    line: int
    bytes: int
    nodeid: str | None
    paths: list[str]


class LineNote(TypedDict):
    """A journal line set aside: its file ``line`` number (1-based) and ``why``."""

    line: int
    why: str


class JournalSection(TypedDict):
    """What reading the journal kept and set aside (:meth:`pytest_hetero.evidence.journal.JournalRead.section`,
    which has written every field but ``torn`` since the section was added; a bundle written before it has no
    ``journal`` section, and :func:`as_document` refuses one that lacks a field)."""

    lines: int
    sha256: str
    authenticated: bool
    unauthenticated_reason: str | None
    key: str | None
    keyid: str | None
    lost: list[LineNote]
    rejected: list[LineNote]
    missing_seq: list[int]
    torn: NotRequired[TornLine]
    """The line a killed run cut off (only then)."""


class TaskTypeLevel(TypedDict):
    """One task type's validation level on a pool, and each layer's summary word."""

    level: str
    layers: dict[str, str]
    models: NotRequired[list[str]]


class NodeStatus(TypedDict):
    """One node of a pool the run exercised, and each task type's validation level on it; ``uid``, the node's
    ``metadata.uid`` as discovery read it (absent where discovery did not list the node, its snapshots disagreed, or
    the engine names no uid): ``hetero publish`` writes nothing on a node of that name with another uid."""

    node: str
    task_types: dict[str, TaskTypeLevel]
    uid: NotRequired[str]


class PoolStatus(TypedDict):
    """One pool × its task types' validation level and expiry
    (:func:`pytest_hetero.status.compute.pool_status`: every pool it has written has the required fields; the
    node-level ones came with node coverage, so a bundle written before it lacks them)."""

    matrix: str
    pool: str
    type: str
    vendor: str
    requests: dict[str, str]
    node_selector: dict[str, str]
    queue: str | None
    nodes: list[str]
    domain: str
    verified_at: str
    valid_for_s: float
    expires_at: str
    owners: dict[str, str]
    task_types: dict[str, TaskTypeLevel]
    untested: int
    coverage: NotRequired[str]
    node_status: NotRequired[list[NodeStatus]]
    unvalidated: NotRequired[list[UnvalidatedNode]]
    model_runs_on: NotRequired[list[str]]


class SelectionSection(TypedDict):
    """What a run was asked to select (the built-in amend hook, when a profile, affected-only or shard option
    was given; a merged run's is its first shard's, ``shard`` None): the profile, the affected names and
    bundles, the shard (``k/n``), deselections by reason, and each matrix's profile as it ran.
    ``affected_from_cluster`` and ``profiles`` are absent from the sections of older bundles."""

    profile: str | None
    affected: list[str]
    affected_from: str | None
    shard: str | None
    deselected: dict[str, int]
    affected_from_cluster: NotRequired[str | None]
    profiles: NotRequired[dict[str, ProfileRan]]


class MergedBundle(TypedDict):
    """One shard a merged run was assembled from: its path, run id, how its signature verified, its shard."""

    path: str
    run: str | None
    verification: str
    shard: str | None


class MergeSection(TypedDict):
    """The bundles ``hetero merge`` assembled the run from (:func:`pytest_hetero.bundle.merge.merge_bundles`)."""

    bundles: list[MergedBundle]


class ValidationSection(TypedDict):
    """The validation status of the run's pools."""

    pools: list[PoolStatus]


class EvidenceDocument(TypedDict):
    """``evidence.json``: see docs/evidence.md. ``items`` and ``untested`` are what every document has
    (the loader refuses one without them); ``run``, ``matrices``, ``target``, ``errors`` and ``warnings`` every
    document the gate wrote has had since the first version (:func:`pytest_hetero.evidence.recorder.assemble`
    writes them all; the loader gives a hand-made document without one its default, ``[]``, or a ``run`` of
    Nones). The other sections were added over time, or by hooks (``validation``, ``selection``,
    ``baseline_diff``…), or say what was measured only when it was (``cleanup``, ``usage``, ``journal``), so a
    reader of an older bundle meets their absence, which means "not measured", never "none"."""

    items: Sequence[ItemDict]
    """Every reported item, by nodeid: a list when loaded from evidence.json, an
    :class:`~pytest_hetero.evidence.spool.ItemSpool` (read from disk item by item, read-only) when assembled from
    the journal."""
    untested: UntestedSection
    run: RunSection
    matrices: list[MatrixEntry]
    target: list[dict[str, Any]]
    errors: list[dict[str, str]]
    warnings: list[str]
    schema: NotRequired[str]
    summary: NotRequired[SummarySection]
    cleanup: NotRequired[CleanupSection]
    usage: NotRequired[UsageSection]
    journal: NotRequired[JournalSection]
    inputs: NotRequired[dict[str, MatrixInputs]]
    inputs_not_kept: NotRequired[list[Any]]
    validation: NotRequired[ValidationSection]
    selection: NotRequired[SelectionSection]
    baseline_diff: NotRequired[BaselineSection]
    cluster: NotRequired[dict[str, Any]]
    merge: NotRequired[MergeSection]


class DocumentError(ValueError):
    """A JSON value is not an evidence document: ``path`` names the field (``items[3].status``), ``message``
    what is wrong with it."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


ITEM_FIELDS: tuple[tuple[str, type], ...] = (
    ("nodeid", str), ("matrix", str), ("layer", str), ("keys", dict), ("owner", str), ("status", str),
    ("records", list), ("artifacts", list))
"""An item's eight journaled fields with their JSON types: the one table both this loader (:func:`check_item`) and
the journal's line check (:func:`pytest_hetero.evidence.recorder.entry_problem`) check an item against."""
ITEM_RESULT_FIELDS: dict[str, tuple[type, ...]] = {
    "started_at": (str,), "finished_at": (str,), "duration_s": (float, int), "failure": (dict, type(None)),
    "blocked_by": (str, type(None)), "reason": (str, type(None))}
"""An item's result fields with their JSON types (a bool is no number): every item has written them since the first
version (``asdict`` of the item result, then :meth:`~pytest_hetero.evidence.model.ItemEvidence.to_dict`), so a bundle
of any version has them. The one table for both checks, with one stated variation: :func:`check_item` checks
``failure``'s type after the records, with its own message (``is not a failure {…}``). ``duration_s`` is also
finite (:func:`check_item` refuses a NaN or ±Infinity, which JSON cannot hold and the journal would write as null)."""
_UNTESTED_TYPES: tuple[tuple[str, type], ...] = (("nodeid", str), ("layer", str), ("status", str), ("keys", dict))
_SECTIONS: tuple[tuple[str, type], ...] = (
    ("run", dict), ("summary", dict), ("cleanup", dict), ("journal", dict), ("matrices", list), ("target", list),
    ("validation", dict), ("usage", dict), ("errors", list), ("warnings", list))
_LISTS = ("matrices", "target", "errors", "warnings")
"""The sections a document without one (hand-made: the gate has always written them) reads as ``[]``."""
RUN_FIELD_TYPES: tuple[tuple[str, tuple[type, ...]], ...] = (
    *((name, (str, type(None))) for name in RUN_START_FIELDS if name != "invocation"),
    ("invocation", (list, type(None))), ("finished_at", (str, type(None))), ("finished_at_recovered", (bool,)),
    ("exit_status", (int, type(None))), ("interrupted", (bool, type(None))), ("stopped", (str,)))
"""Each ``run`` field's JSON types (:class:`RunSection`)."""
_RUN_DEFAULTS: dict[str, object] = {**dict.fromkeys(RUN_START_FIELDS), "finished_at": None,
                                    "finished_at_recovered": False, "exit_status": None, "interrupted": None,
                                    "stopped": ""}
"""What :func:`as_document` gives a ``run`` field a document lacks (:class:`RunSection` says why)."""


_KINDS: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}


def _kind(value: object) -> str:
    """How a message names the JSON type of ``value``."""
    return _KINDS.get(type(value)) or f"a JSON {type(value).__name__}"


def _named(typ: type) -> str:
    return _KINDS[typ]


def _one_of(types: tuple[type, ...]) -> str:
    """``a string``, ``a number``, ``an object or null``: what a message says a field should be."""
    names = ["a number" if t in (float, int) else "null" if t is type(None) else "a boolean" if t is bool
             else _KINDS[t] for t in types]
    return " or ".join(dict.fromkeys(names))


def as_document(value: object) -> EvidenceDocument:
    """``value`` (parsed, untrusted JSON) as an :class:`EvidenceDocument`, after checking what the type
    says every document has: the top-level sections' JSON types (``run``, ``matrices``, ``target``, ``errors``,
    ``warnings`` absent or null given their defaults, in place: ``[]``, and each ``run`` field a document lacks
    :data:`_RUN_DEFAULTS`' value; each ``run`` field's JSON type), each item's eight journaled fields
    (their types; ``layer`` and ``status`` one of :mod:`pytest_hetero.vocab`'s) and its six result fields
    (``started_at``/``finished_at`` strings, ``duration_s`` a number, ``failure`` an object or null,
    ``blocked_by``/``reason`` a string or null), ``untested.items``'
    ``nodeid``/``layer``/``status``. One pass over the items; nothing is copied, and nothing but those defaults
    added (a document the gate wrote since its first version has them all).

    Raises :class:`DocumentError` naming the first field that is wrong (``items[12].status: 'pased' is not
    a status``).
    """
    if not isinstance(value, dict):
        raise DocumentError("", f"the document is {_kind(value)}, not an object")
    _check_sections(value)
    _fill_defaults(value)
    if value.get("journal") is not None:
        _check_journal(value["journal"])
    for n, item in enumerate(value["items"]):
        check_item(item, f"items[{n}]")
    for n, entry in enumerate(value["matrices"]):
        if type(entry) is not dict or not all(type(entry.get(k)) is str for k in ("prefix", "name", "sha256")):
            raise DocumentError(f"matrices[{n}]", "is not a matrix entry {prefix, name, sha256: strings}")
    _check_shapes(value)
    _fill_untested(value["untested"])
    untested = value["untested"].get("items")
    if not isinstance(untested, list):
        raise DocumentError("untested.items", "missing" if untested is None else f"is {_kind(untested)}, not a list")
    for n, entry in enumerate(untested):
        _check(entry, _UNTESTED_TYPES, f"untested.items[{n}]")
        entry.setdefault("blocked_by", None)  # the readers subscript it; absent has always been read as none
        if type(entry.get("reason")) is not str or not isinstance(entry["blocked_by"], (str, type(None))):
            raise DocumentError(f"untested.items[{n}]", "is not an untested entry {reason: string, blocked_by: "
                                                        "string or null}")
    return cast(EvidenceDocument, value)


def _check_shapes(value: dict[str, Any]) -> None:
    """The sections the readers (render, diff, trend, catalog) subscript, held to their types when present:
    ``summary`` (:class:`SummarySection`), each ``target`` entry an object, ``inputs`` (by matrix, a
    :class:`~pytest_hetero.evidence.inputs.MatrixInputs`: diff and trend read each kept file's path and digest) and
    ``usage`` (:class:`~pytest_hetero.evidence.usage.UsageSection`, every field of which the ledger has written
    since its first version, ``queue`` since issue 33) and ``cleanup`` (:class:`CleanupSection`: the signed
    predicate names each leftover's fields).
    Raises :class:`DocumentError` naming the field (``summary.totals: missing``)."""
    from pytest_hetero.evidence.inputs import MatrixInputs  # noqa: PLC0415 - inputs imports records, which imports this
    from pytest_hetero.evidence.usage import UsageSection  # noqa: PLC0415 - usage imports this module

    shapes: tuple[tuple[str, object], ...] = (("summary", SummarySection), ("target", list[dict[str, Any]]),
                                              ("inputs", dict[str, MatrixInputs]), ("usage", UsageSection),
                                              ("cleanup", CleanupSection))
    for name, shape in shapes:
        if value.get(name) is not None:
            try:
                check_json(value[name], shape)
            except ShapeError as error:
                raise DocumentError(f"{name}{error.path}", error.message) from None


def _check_sections(value: dict[str, Any]) -> None:
    """``items`` and ``untested`` are there; every section present has its JSON type."""
    required: tuple[tuple[str, type], ...] = (("items", list), ("untested", dict))
    for name, typ in required:
        if name not in value:
            raise DocumentError(name, "missing")
        if not isinstance(value[name], typ):
            raise DocumentError(name, f"is {_kind(value[name])}, not {_named(typ)}")
    for name, typ in _SECTIONS:
        if name in value and value[name] is not None and not isinstance(value[name], typ):
            raise DocumentError(name, f"is {_kind(value[name])}, not {_named(typ)}")


def _fill_defaults(value: dict[str, Any]) -> None:
    """Give ``value`` (its sections' types checked) each always-written section and ``run`` field it lacks,
    its default (:data:`_LISTS`, :data:`_RUN_DEFAULTS`), and check each ``run`` field's type."""
    for name in _LISTS:
        if value.get(name) is None:
            value[name] = []
    if value.get("run") is None:
        value["run"] = {}
    run = value["run"]
    for name, default in _RUN_DEFAULTS.items():
        run.setdefault(name, default)
    for name, types in RUN_FIELD_TYPES:
        if type(run[name]) not in types:
            raise DocumentError(f"run.{name}", f"is {_kind(run[name])}, not {_one_of(types)}")


_JOURNAL_TYPES: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("lines", (int,)), ("sha256", (str,)), ("authenticated", (bool,)), ("lost", (list,)), ("rejected", (list,)),
    ("missing_seq", (list,)))
"""The ``journal`` section's fields its readers count or list, with their JSON types (:class:`JournalSection`)."""


def _check_journal(journal: dict[str, Any]) -> None:
    """Refuse a ``journal`` section without one of :data:`_JOURNAL_TYPES`' fields, or with one of another type."""
    for name, types in _JOURNAL_TYPES:
        if name not in journal:
            raise DocumentError(f"journal.{name}", "missing")
        if type(journal[name]) not in types:
            raise DocumentError(f"journal.{name}", f"is {_kind(journal[name])}, not {_one_of(types)}")


def _fill_untested(scope: dict[str, Any]) -> None:
    """Give the untested scope ``scope`` a ``never_covered`` (``{}``) and ``not_proven`` (``[]``) it lacks (or
    holds as null); refuse one of another JSON type."""
    for name, typ in (("never_covered", dict), ("not_proven", list)):
        if scope.get(name) is None:
            scope[name] = typ()
        elif not isinstance(scope[name], typ):
            raise DocumentError(f"untested.{name}", f"is {_kind(scope[name])}, not {_named(typ)}")


def check_item(item: object, where: str) -> None:
    """Check one item as :func:`as_document` does (its journaled fields, the vocabulary of its layer and status,
    its result fields (``started_at`` … ``reason``: ``items[3].reason: missing``), its records'
    ``kind``/``at``/``data``, its failure's four strings); ``where`` prefixes the field path.
    The pytest plugin checks each item's evidence with it once the ``pytest_hetero_evidence`` hooks ran.
    Raises :class:`DocumentError` naming the first field that is wrong."""
    _check(item, ITEM_FIELDS, where)
    assert isinstance(item, dict)  # _check refused anything else
    for name, types in ITEM_RESULT_FIELDS.items():
        if name not in item:
            raise DocumentError(f"{where}.{name}", "missing")
        if name != "failure" and type(item[name]) not in types:  # failure: checked below, with its own message
            raise DocumentError(f"{where}.{name}", f"is {_kind(item[name])}, not {_one_of(types)}")
    if not math.isfinite(item["duration_s"]):  # a hook's NaN (the bundle loader refuses a NaN token itself)
        raise DocumentError(f"{where}.duration_s", f"is {item['duration_s']!r}, not a finite number of seconds")
    for r, record in enumerate(item["records"]):
        if not is_record(record):
            raise DocumentError(f"{where}.records[{r}]", f"is not a record {RECORD_ENVELOPE}")
    from pytest_hetero.evidence.records import check_records  # noqa: PLC0415 - records imports this module

    check_records(item["records"], where)
    if "attempts" in item:  # a rerun plugin's earlier attempts (only then)
        try:
            check_json(item["attempts"], list[AttemptDict])
        except ShapeError as error:
            raise DocumentError(f"{where}.attempts{error.path}", error.message) from None
    failure = item["failure"]
    if failure is not None and (type(failure) is not dict or not all(
            type(failure.get(k)) is str for k in ("layer", "category", "message", "owner"))):
        raise DocumentError(f"{where}.failure", "is not a failure {layer, category, message, owner: strings}")


RECORD_ENVELOPE = "{kind: string, at: string, data: object}"
"""A record's envelope as the messages name it (its ``data``'s shape is its kind's:
:func:`pytest_hetero.evidence.records.check_records`)."""


def is_record(value: object) -> TypeGuard[RecordDict]:
    """Whether ``value`` (parsed JSON) is a record's envelope, :data:`RECORD_ENVELOPE`: the one rule for
    :func:`check_item` and the journal's line check (:func:`pytest_hetero.evidence.recorder.entry_problem`)."""
    return (type(value) is dict and type(value.get("kind")) is str and type(value.get("at")) is str
            and type(value.get("data")) is dict)


def _check(entry: object, fields: tuple[tuple[str, type], ...], where: str) -> None:
    if type(entry) is not dict:
        raise DocumentError(where, f"is {_kind(entry)}, not an object")
    for name, typ in fields:
        if name not in entry:
            raise DocumentError(f"{where}.{name}", "missing")
        if type(entry[name]) is not typ:
            raise DocumentError(f"{where}.{name}", f"is {_kind(entry[name])}, not {_named(typ)}")
    if entry["status"] not in STATUSES:
        raise DocumentError(f"{where}.status", f"{entry['status']!r} is not a status ({', '.join(STATUSES)})")
    if entry["layer"] not in LAYERS:
        raise DocumentError(f"{where}.layer", f"{entry['layer']!r} is not a layer ({', '.join(LAYERS)})")


def owner_category(failure: FailureDict | None) -> OwnerCategory | None:
    """The failure table's owner category of ``failure`` (None for none, or a failure written before the
    table existed)."""
    return failure.get("owner_category") if failure else None
