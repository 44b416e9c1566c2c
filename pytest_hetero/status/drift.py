"""What changed in a cluster since a baseline snapshot, and which matrix items each change can affect.

Pure logic over two snapshots of :mod:`pytest_hetero.backends.kubernetes.snapshot` and a matrix plan (it
lives beside the validation status, not in ``matrix/``: it reads cluster facts, which the matrix package
never sees).

A **change** is ``{"kind", "name", "field", "old", "new"}``: kind ``node`` (field ``labels.<key>``,
``taints``, ``conditions.<type>``, ``allocatable.<resource>``, ``unschedulable``, or ``node`` for a node
added/removed), ``daemonset``, ``runtimeclass``, ``priorityclass``, ``kueue.<plural>``, ``volcano.queues``,
``resourcequota``, ``limitrange``; old/new ``None`` when absent.

Mapping (:func:`affected_items`), each hit with the change that caused it:

* a node label used by a resource's ``node_selector`` on a node of its pool (before or after: a node
  entering or leaving it), or a node of the pool added/removed → every item of that resource;
* a driver/toolkit label (:data:`DRIVER_LABELS`: GFD/Ascend/CUDA/CANN/driver) or an allocatable change of a
  requested device on a node of the pool → its startup, model and business items;
* any other label, a taint, condition, allocatable or cordon change on a node of the pool → its discovery
  and scheduling items;
* a device-plugin/operator DaemonSet → startup, model and business items of every accelerator resource;
* a RuntimeClass → startup items of every resource; a PriorityClass → scheduling items of resources naming it;
* Kueue ResourceFlavor/ClusterQueue → scheduling of resources with a queue; LocalQueue ``ns/name`` →
  scheduling of resources whose ``queue`` is that name; Volcano Queue → scheduling of resources naming it;
* a ResourceQuota/LimitRange of a target namespace → scheduling items of every resource.

A pool's nodes are those whose labels match its ``node_selector`` (all of them), else the nodes that
advertise every requested extended resource, in the old or the new snapshot.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict

import msgspec

from pytest_hetero.declared import resolve
from pytest_hetero.status.snapshots import ClusterSnapshot, SnapshotNode

if TYPE_CHECKING:  # annotations only (postponed): no run-time dependency on typing_extensions on 3.10
    from typing import NotRequired

    from pytest_hetero.evidence.document import EvidenceDocument
    from pytest_hetero.matrix.expand import Plan
    from pytest_hetero.matrix.model import Matrix, Resource
    from pytest_hetero.pytest_plugin.audit import AuditRecord

DRIVER_LABELS = re.compile(r"^(nvidia\.com/(cuda|gpu\.(driver|product|family|compute|machine)|cudnn|mig)"
                           r"|.*(driver|cann|toolkit|firmware|npu\.chip|ascend).*|accelerator)", re.IGNORECASE)
"""Node label keys naming the driver, toolkit or device model (GFD ``nvidia.com/cuda.*``,
``nvidia.com/gpu.driver.*``…, Ascend/CANN labels, ``accelerator``)."""
LATE = ("startup", "model", "business")
EARLY = ("discovery", "scheduling")


class Change(TypedDict):
    """One change between two snapshots (module docstring): the kind of object, its name (``*``: the kind's
    listing), the field, the old and the new value (None: absent)."""

    kind: str
    name: str
    field: str
    old: Any
    new: Any


def _flat(prefix: str, old: Mapping[str, object], new: Mapping[str, object], kind: str, name: str) -> list[Change]:
    return [{"kind": kind, "name": name, "field": f"{prefix}.{k}" if prefix else k, "old": old.get(k),
             "new": new.get(k)} for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]


def _node_changes(old: dict[str, SnapshotNode], new: dict[str, SnapshotNode]) -> list[Change]:
    out: list[Change] = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a is None or b is None:
            out.append({"kind": "node", "name": name, "field": "node",
                        "old": "present" if a is not None and a.present else None,
                        "new": "present" if b is not None and b.present else None})
            continue
        if a.whole == b.whole:
            continue
        out += _flat("labels", a.labels or {}, b.labels or {}, "node", name)
        out += _flat("conditions", a.conditions, b.conditions, "node", name)
        out += _flat("allocatable", a.allocatable, b.allocatable, "node", name)
        for part, was, now in (("taints", a.taints, b.taints), ("unschedulable", a.unschedulable, b.unschedulable)):
            if was != now:
                out.append({"kind": "node", "name": name, "field": part, "old": was, "new": now})
    return out


def _marker(section: object) -> str | None:
    """``not served`` / ``forbidden`` when a snapshot section is the lister's marker, else None."""
    if isinstance(section, dict) and set(section) == {"served"}:
        return "not served"
    if isinstance(section, dict) and set(section) == {"forbidden"}:
        return "forbidden"
    return None


def _section(old: object, new: object, kind: str) -> list[Change]:
    a, b = _marker(old), _marker(new)
    if a or b:
        return [] if a == b else [{"kind": kind, "name": "*", "field": "listing", "old": a or "listed",
                                   "new": b or "listed"}]
    changes = _flat("", old if isinstance(old, dict) else {}, new if isinstance(new, dict) else {}, kind, "")
    for change in changes:
        change["name"], change["field"] = change["field"], "spec"
    return changes


def diff_snapshots(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Every change from snapshot ``old`` to ``new`` (module docstring; each parsed by
    :meth:`ClusterSnapshot.parse`), nodes first, each list sorted. A kind that became (or stopped being) not
    served / forbidden is one change, name ``*``, field ``listing``."""
    was, now = ClusterSnapshot.parse(old), ClusterSnapshot.parse(new)
    changes = _node_changes(was.nodes, now.nodes)
    for kind, section in was.sections.items():
        changes += _section(section, now.sections[kind], kind)
    return changes


def describe(change: Change) -> str:
    """One line: ``node gpu-1: labels.nvidia.com/cuda.driver.major 550 → 560``."""
    return f"{change['kind']} {change['name']}: {change['field']} {change['old']} → {change['new']}"


def _pool_nodes(resource: Resource, snapshots: list[ClusterSnapshot]) -> set[str]:
    out: set[str] = set()
    for snap in snapshots:
        for name, node in snap.nodes.items():
            if node.labels is None:
                continue
            if resource.node_selector:
                if all(node.labels.get(k) == v for k, v in resource.node_selector.items()):
                    out.add(name)
            elif all(k in node.allocatable for k in resource.device_resources):
                out.add(name)
    return out


def _node_layers(change: Change, resource: Resource) -> tuple[str, ...]:
    """The layers of ``resource`` a change on one of its nodes can affect."""
    field = str(change["field"])
    if field == "node":
        return (*EARLY, *LATE)
    if field.startswith("labels."):
        key = field[len("labels."):]
        if key in resource.node_selector:
            return (*EARLY, *LATE)
        return LATE if DRIVER_LABELS.match(key) else EARLY
    if field.startswith("allocatable.") and field[len("allocatable."):] in resource.device_resources:
        return (*EARLY, *LATE)
    return EARLY


def _resource_layers(change: Change, resource: Resource, pools: dict[str, set[str]]) -> tuple[str, ...]:
    """Layers of ``resource`` that ``change`` can affect (empty: none)."""
    kind = change["kind"]
    if kind == "node":
        return _node_layers(change, resource) if change["name"] in pools[resource.name] else ()
    if kind == "daemonset":
        return LATE if resource.device_resources else ()
    if kind == "runtimeclass":
        return ("startup",)
    if kind == "priorityclass":
        return ("scheduling",) if resource.priority_class == change["name"] else ()
    if kind in ("kueue.resourceflavors", "kueue.clusterqueues"):
        return ("scheduling",) if resource.queue else ()
    if kind in ("kueue.localqueues", "volcano.queues"):
        return ("scheduling",) if resource.queue and str(change["name"]).split("/")[-1] == resource.queue else ()
    return ("scheduling",)  # resourcequota, limitrange of a target namespace


def affected_items(changes: list[Change], matrix: Matrix, plan: Plan, old: dict[str, Any],
                   new: dict[str, Any]) -> dict[str, str]:
    """``{item id: "changed in the cluster: <first change>"}`` of the items of ``plan`` that ``changes``
    can affect (module docstring); ``old``/``new`` are the snapshots (for pool membership)."""
    snapshots = [ClusterSnapshot.parse(old), ClusterSnapshot.parse(new)]
    pools = {r.name: _pool_nodes(r, snapshots) for r in matrix.resources}
    hits: dict[str, str] = {}
    for change in changes:
        for resource in matrix.resources:
            layers = _resource_layers(change, resource, pools)
            if not layers:
                continue
            for item in plan.items:
                if item.keys["resource"] == resource.name and item.layer in layers and item.id not in hits:
                    hits[item.id] = f"changed in the cluster: {describe(change)}"
    return hits


CHANGE_KEYS = ("operator", "ticket", "reason", "intended")


class ChangeRecord(TypedDict):
    """A declared change (``--hetero-change``, :func:`parse_change`): who made it, the ticket and the reason as
    the record gives them (text, redacted; another YAML value as written; None when absent), and the resource
    names it is meant to affect."""

    operator: object
    ticket: object
    reason: object
    intended: list[str]


class _ChangeGiven(msgspec.Struct, frozen=True, kw_only=True):
    """A change record as given (a file's mapping, or the inline pairs with ``intended`` split at commas), its
    keys checked against :data:`CHANGE_KEYS` first: ``operator``, ``ticket`` and ``reason`` any YAML value (None
    when absent), ``intended`` a list of names (None when absent or null: none)."""

    operator: object = None
    ticket: object = None
    reason: object = None
    intended: list[str] | None = None


class ChangeImpact(ChangeRecord):
    """A :class:`ChangeRecord` with its observed impact (:func:`impact`; each None when not measured): the
    resources a drift affected, those of them not ``intended``, the intended ones not observed; and, with
    ``--hetero-audit-log``, the ``audit`` of the changes actually made
    (:func:`pytest_hetero.pytest_plugin.audit.audited`)."""

    observed: list[str] | None
    unintended: list[str] | None
    not_observed: list[str] | None
    audit: NotRequired[AuditRecord]


def parse_change(value: str) -> ChangeRecord:
    """A change record from ``--hetero-change``: a YAML/JSON file (``@PATH`` or an existing path) holding a
    mapping, or inline ``key=value; key=value`` text. Keys: ``operator``, ``ticket``, ``reason`` (text),
    ``intended`` (resource names the change is meant to affect: a list, or comma-separated inline).
    Returns ``{"operator", "ticket", "reason", "intended": [names]}`` (absent keys None / []), secrets
    redacted (the record is signed into the statement: a ``password=…`` in a reason must not be).
    Raises SettingsError naming an unknown key or an unreadable file (secrets in it redacted)."""
    from pytest_hetero.errors import SettingsError
    from pytest_hetero.redact import Redactor

    redactor = Redactor()
    try:
        record = _parse_change(value)
    except SettingsError as exc:
        raise SettingsError(redactor.text(exc.message), exc.location, redactor.text(exc.hint)) from None

    def clean(text: object) -> object:
        return redactor.text(text) if isinstance(text, str) else text

    return {"operator": clean(record["operator"]), "ticket": clean(record["ticket"]),
            "reason": clean(record["reason"]), "intended": record["intended"]}


def _parse_change(value: str) -> ChangeRecord:
    """:func:`parse_change` before redaction."""
    from pathlib import Path

    from pytest_hetero.errors import SettingsError

    path = Path(value[1:] if value.startswith("@") else value)
    raw: Any
    if value.startswith("@") or (len(value) < 4096 and "=" not in value and path.is_file()):
        import yaml

        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise SettingsError(f"--hetero-change {value}: cannot read the change record: {exc}") from None
        if not isinstance(raw, dict):
            raise SettingsError(f"--hetero-change {value}: the file must hold a mapping of {', '.join(CHANGE_KEYS)}")
    else:
        raw = {}
        for part in filter(None, (p.strip() for p in value.split(";"))):
            key, sep, text = part.partition("=")
            if not sep:
                raise SettingsError(f"--hetero-change: {part!r} is not key=value",
                                    hint="e.g. --hetero-change 'operator=alice; ticket=OPS-1; reason=driver 560; "
                                         "intended=gpu-h100'")
            raw[key.strip()] = text.strip()
        if "intended" in raw:  # inline: comma-separated names
            raw["intended"] = [n.strip() for n in raw["intended"].split(",") if n.strip()]
    unknown = sorted(set(raw) - set(CHANGE_KEYS))
    if unknown:
        raise SettingsError(f"--hetero-change: unknown key(s) {', '.join(unknown)}",
                            hint=f"use {', '.join(CHANGE_KEYS)}")
    try:
        given = msgspec.convert(raw, _ChangeGiven)
    except msgspec.ValidationError as exc:
        raise SettingsError(f"--hetero-change: intended must be a list of resource names ({exc})") from None
    return {"operator": given.operator, "ticket": given.ticket, "reason": given.reason,
            "intended": list(given.intended or [])}


def impact(change: ChangeRecord, observed: dict[str, list[str]] | None) -> ChangeImpact:
    """The change record with its intended vs observed impact: ``observed`` is {resource: [change lines]}
    from a drift (None: not measured, no baseline). Adds ``observed`` (resource names), ``unintended``
    (observed, not intended) and ``not_observed`` (intended, not observed)."""
    intended = change["intended"]
    seen = None if observed is None else sorted(observed)
    return {"operator": change["operator"], "ticket": change["ticket"], "reason": change["reason"],
            "intended": intended, "observed": seen,
            "unintended": None if seen is None else [r for r in seen if r not in intended],
            "not_observed": None if observed is None else [r for r in intended if r not in observed]}


def observed_by_resource(hits: dict[str, str], plan: Plan) -> dict[str, list[str]]:
    """{resource: sorted distinct reasons} of the affected item ids ``hits``."""
    by_id = plan.by_id()
    out: dict[str, set[str]] = {}
    for item_id, why in hits.items():
        out.setdefault(by_id[item_id].keys["resource"], set()).add(why)
    return {k: sorted(v) for k, v in sorted(out.items())}


def baseline_label(evidence: EvidenceDocument, verification: str) -> str:
    """How a baseline bundle is named in drift and messages: ``bundle <run id> (<how it was verified>)``."""
    return f"bundle {evidence['run']['id']} ({verification})"


def drift_since(baseline: EvidenceDocument, label: str, matrix: Matrix, plan: Plan, live: dict[str, Any],
                option: str) -> tuple[dict[str, Any], list[Change], dict[str, str]]:
    """The cluster drift of ``matrix`` since the baseline bundle's evidence ``baseline`` (named ``label``,
    :func:`baseline_label`): (the baseline's snapshot, :func:`diff_snapshots` of it against ``live``,
    :func:`affected_items`). Raises SettingsError naming ``option`` (the command-line option that asked
    for the drift) when the baseline recorded no snapshot of ``matrix``."""
    from pytest_hetero.errors import SettingsError

    old = baseline_snapshot(baseline, matrix.name)
    if old is None:
        raise SettingsError(f"{option}: {label} holds no cluster snapshot of matrix {matrix.name}",
                            hint="run the baseline with --hetero-snapshot")
    changes = diff_snapshots(old, live)
    return old, changes, affected_items(changes, matrix, plan, old, live)


class _SnapshotTaken(msgspec.Struct, frozen=True, kw_only=True):
    """An entry of an evidence document's ``cluster.snapshots`` as a baseline is read for it (written by
    :mod:`pytest_hetero.pytest_plugin.drift`: also ``taken_at`` and ``sha256``): the matrix and its snapshot."""

    matrix: str
    snapshot: dict[str, object]


class _ClusterSection(msgspec.Struct, frozen=True, kw_only=True):
    """An evidence document's ``cluster`` section as a baseline is read for it: the ``snapshots`` taken (None when
    absent or null: none)."""

    snapshots: list[_SnapshotTaken] | None = None


class _Baseline(msgspec.Struct, frozen=True, kw_only=True):
    """The part of a baseline bundle's evidence a snapshot is read from: its ``cluster`` section (None when absent
    or null: the run took no snapshot)."""

    cluster: _ClusterSection | None = None


def baseline_snapshot(evidence: EvidenceDocument, matrix_name: str) -> dict[str, Any] | None:
    """The snapshot a baseline bundle's evidence recorded for ``matrix_name`` (None: none recorded; a new mapping).
    Raises SettingsError naming the field when the evidence's ``cluster`` section is not of the shape the gate
    writes (an entry without its matrix or snapshot, a section of another type)."""
    from pytest_hetero.errors import SettingsError

    try:
        cluster = msgspec.convert(evidence, _Baseline).cluster
    except msgspec.ValidationError as exc:
        raise SettingsError(f"the baseline bundle's cluster snapshots are not the gate's: {exc}",
                            hint="give the bundle of a run with --hetero-snapshot, as the gate wrote it") from None
    taken = cluster.snapshots if cluster is not None else None
    for entry in taken or []:
        if entry.matrix == matrix_name:
            return entry.snapshot
    return None


resolve(__name__)
