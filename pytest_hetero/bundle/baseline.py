"""Compare two evidence bundles: status transitions, target fingerprint and metric changes, the gate.

Items are matched by matrix name and the node id below the matrix file, so a baseline run from
another folder still lines up. Transitions (``FAILING`` = failed, error, blocked; ``TESTED`` =
passed, failed, error):

- ``regression``: passed → failing; ``new_failure``: absent or untested → failing;
- ``still_failing``: failing → failing; ``fixed``: failing → passed;
- ``newly_untested``: tested → untested (or absent); ``newly_covered``: untested or absent → passed.

Gate policies (``--hetero-fail-on``): ``any-failure`` (pytest's own status), ``regression``
(fails on regression or new_failure only, so failures already failing in the baseline do not fail
the gate), ``untested-growth`` (regression, plus any newly_untested item).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal, TypedDict, final, get_args

from pytest_hetero.errors import BundleError, HeteroError
from pytest_hetero.evidence.document import item_of, model_identity, rule_results
from pytest_hetero.evidence.inputs import input_digests
from pytest_hetero.vocab import BLOCKING

if TYPE_CHECKING:
    from typing import NotRequired

    from pytest_hetero.evidence.document import Entry, EvidenceDocument, RecordDict

FAILING = BLOCKING
"""failed, error, blocked (:data:`pytest_hetero.vocab.BLOCKING`)."""
TESTED = frozenset({"passed", "failed", "error"})
POLICIES = ("any-failure", "regression", "untested-growth")
TransitionName = Literal["regression", "new_failure", "still_failing", "fixed", "newly_untested", "newly_covered"]
"""How an item's status moved from the baseline to the run (:func:`classify`)."""
TRANSITIONS: tuple[TransitionName, ...] = get_args(TransitionName)
DEFAULT_TOLERANCE = 0.05
"""Relative change (5 %) beyond which an observed metric value is reported as changed."""


def matrix_names(evidence: EvidenceDocument) -> set[str]:
    """Names of the matrices a bundle covers."""
    return {m["name"] for m in evidence["matrices"]}


def status_map(evidence: EvidenceDocument) -> dict[str, Entry]:
    """``matrix name::id below the file`` → the reported item or untested entry (reported wins)."""
    names = {m["prefix"]: m["name"] for m in evidence["matrices"]}
    out: dict[str, Entry] = {}
    both: list[Entry] = [*evidence["untested"]["items"], *evidence["items"]]
    for entry in both:
        prefix, _, rest = entry["nodeid"].partition("::")
        out[f"{names.get(prefix, prefix)}::{rest}"] = entry
    return out


class Transition(TypedDict):
    """An item whose status changed (or stayed failing): ``item`` (matrix name::id), ``old`` and ``new``
    statuses (``absent`` when the item is not in that run)."""

    item: str
    old: str
    new: str


class Transitions(TypedDict):
    """Each transition's items (:func:`diff_evidence` has written every name of :data:`TRANSITIONS` since the
    section was added, an empty list for a transition no item made)."""

    regression: list[Transition]
    new_failure: list[Transition]
    still_failing: list[Transition]
    fixed: list[Transition]
    newly_untested: list[Transition]
    newly_covered: list[Transition]


class TransitionCounts(TypedDict):
    """How many items made each transition (:func:`diff_evidence`: every name of :data:`TRANSITIONS`, always)."""

    regression: int
    new_failure: int
    still_failing: int
    fixed: int
    newly_untested: int
    newly_covered: int


class TargetChange(TypedDict):
    """A target fingerprint field that differs (``field``: its dotted path) between the baseline and the run;
    for a list field, also what was ``added`` and ``removed``."""

    backend: str
    field: str
    old: Any
    new: Any
    added: NotRequired[list[Any]]
    removed: NotRequired[list[Any]]


class InputChange(TypedDict):
    """An input that differs: ``what`` (model, dataset, matrix, code, rules), its ``name``, old and new."""

    what: str
    name: str
    old: str
    new: str


class MetricChange(TypedDict):
    """An observed rule value that moved beyond the tolerance (``relative_change`` to the baseline's)."""

    item: str
    rule: str
    old: float
    new: float
    relative_change: float
    unit: NotRequired[str]


class GateResult(TypedDict):
    """The gate policy's answer: whether it failed, and why."""

    policy: str
    failed: bool
    reasons: list[str]


class BaselineRun(TypedDict):
    """The baseline a diff compared with: its run id (None when its document names none) and matrix names."""

    run: str | None
    matrices: list[str]


@final
class BaselineDiff(TypedDict):
    """The ``baseline_diff`` section of two comparable runs (:func:`diff_evidence`): the baseline, each
    transition's items and count, the target, input and metric changes, the tolerance, the gate; and
    ``verification``, how the baseline's signature was checked (added by :func:`baseline_section` and
    ``hetero diff``; absent from :func:`diff_evidence`'s own answer)."""

    baseline: BaselineRun
    transitions: Transitions
    counts: TransitionCounts
    target_changes: list[TargetChange]
    input_changes: NotRequired[list[InputChange]]
    """Absent from the sections of bundles written before input changes were compared."""
    metric_changes: list[MetricChange]
    tolerance: float
    gate: GateResult
    verification: NotRequired[str]


@final
class BaselineError(TypedDict):
    """The ``baseline_diff`` section when the two runs cannot be compared (:func:`baseline_section`): the
    error as rendered, a failed gate, and ``verification`` ``error``."""

    error: str
    gate: GateResult
    verification: str


BaselineSection = BaselineDiff | BaselineError
"""What :func:`baseline_section` writes as ``baseline_diff`` (``"error" in section`` tells them apart)."""


def _flatten(value: Any, path: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, f"{path}.{k}" if path else str(k), out)
    else:
        out[path] = sorted(map(str, value)) if isinstance(value, list) else value


def target_changes(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[TargetChange]:
    """Fields of the target fingerprints (per backend) that differ: driver/runtime versions,
    image digests, node set (``added``/``removed``), allocatable. Returns ``[{"backend",
    "field", "old", "new"}]`` (plus ``added``/``removed`` for lists), sorted."""
    def by_backend(prints: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for fp in prints:
            _flatten(fp, "", out.setdefault(str(fp.get("backend", "?")), {}))
        return out

    a, b = by_backend(old), by_backend(new)
    changes: list[TargetChange] = []
    for backend in sorted(set(a) | set(b)):
        fa, fb = a.get(backend, {}), b.get(backend, {})
        for key in sorted(set(fa) | set(fb)):
            va, vb = fa.get(key), fb.get(key)  # a field one backend's fingerprint lacks is None
            if va != vb:
                entry: TargetChange = {"backend": backend, "field": key, "old": va, "new": vb}
                if isinstance(va, list) or isinstance(vb, list):
                    entry["added"] = sorted(set(vb or []) - set(va or []))
                    entry["removed"] = sorted(set(va or []) - set(vb or []))
                changes.append(entry)
    return changes


def _records(entry: Entry) -> list[RecordDict]:
    """An item's records; none for an untested-only entry."""
    item = item_of(entry)
    return item["records"] if item else []


def _observed(entry: Entry) -> dict[str, float]:
    out: dict[str, float] = {}
    for record in _records(entry):
        for result in rule_results(record):
            value = result["observed"]
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out[str(result["name"])] = float(value)
    return out


def _units(entry: Entry) -> dict[str, str]:
    """Rule name → unit of its observed value (``ms`` for latency), where the result names one."""
    return {str(r["name"]): str(r["unit"]) for record in _records(entry) for r in rule_results(record)
            if r.get("unit")}


def metric_changes(old: dict[str, Entry], new: dict[str, Entry], tolerance: float) -> list[MetricChange]:
    """Observed values of ``business.rules`` results (accuracy, latency…) that moved by more than
    ``tolerance`` relative to the baseline value. Returns ``[{"item", "rule", "old", "new",
    "relative_change"}]`` sorted by item then rule."""
    out: list[MetricChange] = []
    for key in sorted(k for k, e in new.items() if e["layer"] == "business" and k in old):
        if _records(old[key]) == _records(new[key]):
            continue  # same records, same observed values (a C-level comparison skips the common case)
        a, b = _observed(old[key]), _observed(new[key])
        for rule in sorted(set(a) & set(b)):
            scale = max(abs(a[rule]), 1e-12)
            rel = (b[rule] - a[rule]) / scale
            if abs(rel) > tolerance:
                change: MetricChange = {"item": key, "rule": rule, "old": a[rule], "new": b[rule],
                                        "relative_change": round(rel, 6)}
                unit = _units(new[key]).get(rule)
                if unit:
                    change["unit"] = unit
                out.append(change)
    return out


def _identities(evidence: EvidenceDocument) -> dict[tuple[str, str], tuple[str, str]]:
    """{("model"|"dataset", name): (version, sha256)} from the ``model.identity`` records of a run."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for item in evidence["items"]:
        if item["layer"] != "model":
            continue
        for record in item["records"]:
            identity = model_identity(record)
            if identity is not None:
                out[("model", str(identity["model"]))] = (str(identity["version"]), str(identity["sha256"] or ""))
                out[("dataset", str(identity["dataset"]))] = (str(identity["dataset_version"]),
                                                             str(identity["dataset_sha256"] or ""))
    return out


def input_changes(old: EvidenceDocument, new: EvidenceDocument) -> list[InputChange]:
    """What the run was given that differs from the baseline's: model and data-set versions (or, at the same
    version, their sha256) as the model items recorded them, each matrix file's sha256, and the digests of
    each model's code folder and each data set's acceptance rules (``code``/``rules``, named
    ``<matrix>/<model or data set>``: :func:`~pytest_hetero.evidence.inputs.input_digests`). Returns
    ``[{"what": "model"|"dataset"|"matrix"|"code"|"rules", "name", "old", "new"}]`` sorted; ``old``/``new``
    None when absent."""
    a, b = _identities(old), _identities(new)
    out: list[InputChange] = []
    for key in sorted(set(a) & set(b)):
        (va, sa), (vb, sb) = a[key], b[key]
        if va != vb:
            out.append({"what": key[0], "name": key[1], "old": va, "new": vb})
        elif sa != sb:
            out.append({"what": key[0], "name": key[1], "old": f"{va} (sha256 {sa[:12]}…)",
                        "new": f"{vb} (sha256 {sb[:12]}…)"})
    ma = {m["name"]: m["sha256"] for m in old["matrices"]}
    mb = {m["name"]: m["sha256"] for m in new["matrices"]}
    out += [{"what": "matrix", "name": name, "old": f"sha256 {str(ma[name])[:12]}…",
             "new": f"sha256 {str(mb[name])[:12]}…"} for name in sorted(set(ma) & set(mb)) if ma[name] != mb[name]]
    da, db = input_digests(old), input_digests(new)
    out += [{"what": key[1], "name": f"{key[0]}/{key[2]}", "old": f"sha256 {da[key][:12]}…",
             "new": f"sha256 {db[key][:12]}…"} for key in sorted(set(da) & set(db)) if da[key] != db[key]]
    return out


def classify(old: str | None, new: str | None) -> TransitionName | None:
    """The transition name from status ``old`` to ``new`` (None = absent), or None for no change."""
    if new in FAILING:
        if old == "passed":
            return "regression"
        return "still_failing" if old in FAILING else "new_failure"
    if new == "passed":
        if old in FAILING:
            return "fixed"
        return None if old == "passed" else "newly_covered"
    if old in TESTED and old != "blocked":
        return "newly_untested"
    return None


def diff_evidence(old: EvidenceDocument, new: EvidenceDocument, *, tolerance: float = DEFAULT_TOLERANCE,
                  policy: str = "regression") -> BaselineDiff:
    """The ``baseline_diff`` section (see :func:`_diff`), computed with the cyclic collector paused: the two
    documents are large and the diff makes no cycles, so collections would only walk both heaps again."""
    from pytest_hetero.evidence.model import gc_paused

    with gc_paused():
        return _diff(old, new, tolerance=tolerance, policy=policy)


def _diff(old: EvidenceDocument, new: EvidenceDocument, *, tolerance: float, policy: str) -> BaselineDiff:
    """The ``baseline_diff`` section: ``{"baseline": {run, matrices}, "transitions": {name:
    [{"item", "old", "new"}]}, "counts": {name: n}, "target_changes": [...], "input_changes": [...]
    (:func:`input_changes`), "metric_changes": [...], "tolerance", "gate": {"policy", "failed", "reasons"}}``.
    Raises BundleError when the two bundles share no matrix (a baseline of another matrix)."""
    if not matrix_names(old) & matrix_names(new):
        raise BundleError(f"baseline covers matrix {', '.join(sorted(matrix_names(old))) or 'none'}, this run "
                          f"covers {', '.join(sorted(matrix_names(new))) or 'none'}",
                          hint="compare runs of the same matrix (metadata.name)")
    a, b = status_map(old), status_map(new)
    transitions: Transitions = {"regression": [], "new_failure": [], "still_failing": [], "fixed": [],
                                "newly_untested": [], "newly_covered": []}
    old_status = {k: e["status"] for k, e in a.items()}
    for key, entry in b.items():  # unsorted walk; only the (few) transitions are sorted
        sa, sb = old_status.pop(key, None), entry["status"]
        if sa != sb or sb in FAILING:
            name = classify(sa, sb)
            if name:
                transitions[name].append({"item": key, "old": sa or "absent", "new": sb})
    for key, sa in old_status.items():
        name = classify(sa, None)
        if name:
            transitions[name].append({"item": key, "old": sa, "new": "absent"})
    for name in TRANSITIONS:
        transitions[name].sort(key=lambda e: e["item"])
    counts: TransitionCounts = {
        "regression": len(transitions["regression"]), "new_failure": len(transitions["new_failure"]),
        "still_failing": len(transitions["still_failing"]), "fixed": len(transitions["fixed"]),
        "newly_untested": len(transitions["newly_untested"]), "newly_covered": len(transitions["newly_covered"])}
    return {
        "baseline": {"run": old["run"]["id"], "matrices": sorted(matrix_names(old))},
        "transitions": transitions,
        "counts": counts,
        "target_changes": target_changes(old["target"], new["target"]),
        "input_changes": input_changes(old, new),
        "metric_changes": metric_changes(a, b, tolerance),
        "tolerance": tolerance,
        "gate": gate(counts, policy, new),
    }


def gate(counts: TransitionCounts, policy: str, new: EvidenceDocument) -> GateResult:
    """``{"policy", "failed", "reasons"}`` for ``policy`` (one of :data:`POLICIES`), from a diff's transition
    ``counts`` (every name of :data:`TRANSITIONS`) and, for ``any-failure``, the run's own totals."""
    reasons = []
    if policy == "any-failure":
        bad = new.get("summary", {}).get("totals", {})
        n = bad.get("failed", 0) + bad.get("error", 0)
        if n:
            reasons.append(f"{n} item(s) failed or errored")
    else:
        for name in ("regression", "new_failure"):
            if counts[name]:
                reasons.append(f"{counts[name]} {name.replace('_', ' ')}(s)")
        if policy == "untested-growth" and counts["newly_untested"]:
            reasons.append(f"{counts['newly_untested']} item(s) newly untested")
    return {"policy": policy, "failed": bool(reasons), "reasons": reasons}


def diff_lines(diff: BaselineDiff, limit: int = 20) -> list[str]:
    """Human-readable lines of a ``baseline_diff`` section (terminal, ``hetero diff``)."""
    g = diff["gate"]
    lines = [f"baseline {diff['baseline']['run']}: " + ", ".join(
        f"{n} {k.replace('_', ' ')}" for k, n in diff["counts"].items() if n) or "no status changes"]
    if diff.get("verification"):
        lines[0] += f" (baseline {diff['verification']})"
    for name in TRANSITIONS:
        if name == "still_failing":
            continue
        for entry in diff["transitions"][name][:limit]:
            lines.append(f"  {name:<14} {entry['item']}  ({entry['old']} → {entry['new']})")
    for i in diff.get("input_changes", [])[:limit]:
        lines.append(f"  {i['what']} {i['name']}: {i['old']} → {i['new']}")
    for c in diff["target_changes"][:limit]:
        lines.append(f"  target {c['backend']}.{c['field']}: {c['old']} → {c['new']}")
    for m in diff["metric_changes"][:limit]:
        unit = f" {m['unit']}" if m.get("unit") else ""
        lines.append(f"  metric {m['item']} {m['rule']}: {m['old']:g}{unit} → {m['new']:g}{unit} "
                     f"({m['relative_change']:+.1%})")
    verdict = "FAIL" if g["failed"] else "PASS"
    lines.append(f"gate (fail-on {g['policy']}): {verdict}" + (f": {'; '.join(g['reasons'])}" if g["reasons"] else ""))
    return lines


def baseline_section(old: EvidenceDocument, verification: str, new: EvidenceDocument,
                     policy: str) -> BaselineSection:
    """The ``baseline_diff`` section of ``new`` against the baseline ``old`` (whose verification
    :func:`~pytest_hetero.bundle.verify.load_evidence` reported as ``verification``) under gate
    ``policy``: :func:`diff_evidence` plus ``verification``; when the two cannot be compared,
    ``{"error", "gate": {"policy", "failed": True, "reasons"}, "verification": "error"}``."""
    try:
        diff = diff_evidence(old, new, policy=policy)
    except HeteroError as exc:
        return {"error": exc.render(), "gate": {"policy": policy, "failed": True, "reasons": [exc.message]},
                "verification": "error"}
    diff["verification"] = verification
    return diff
