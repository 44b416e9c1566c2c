"""Untested scope: everything a run did not prove, each with its reason.

Sources: items that ran with an untested status (blocked, not_applicable, skipped),
combinations the matrix omitted (excluded, incompatible image), planned items that never
reached a report (deselected, or not_run when the run was interrupted), and dimension
values that no passing item covered. Plus, per layer, what even a pass does not prove.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pytest_hetero import LAYERS
from pytest_hetero.evidence import records
from pytest_hetero.evidence.model import UNTESTED_STATUSES
from pytest_hetero.evidence.records import data_of
from pytest_hetero.matrix.expand import Plan
from pytest_hetero.matrix.model import Matrix
from pytest_hetero.vocab import Status

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import (
        ByLayer,
        Entry,
        ItemDict,
        NotProvenEntry,
        SelectionCounts,
        SummarySection,
        UntestedEntry,
        UntestedSection,
    )
    from pytest_hetero.vocab import Layer

DOES_NOT_PROVE: dict[str, str] = {
    "discovery": "A discovery pass shows the devices and advertised resources seen at that moment on the "
                 "probed nodes; it does not show that a workload can be scheduled there or that the device "
                 "works under load.",
    "scheduling": "A scheduling pass shows that one workload with these requests, queue and priority was "
                  "placed in the expected pool at that time; it does not show capacity for more workloads, "
                  "fairness between tenants, or behaviour after quota or node changes.",
    "startup": "A startup pass shows that this image started on that node with the device visible to the "
               "runtime and framework; it does not show that any particular model runs correctly.",
    "model": "A model-execution pass covers this model version on this data-set version on these nodes at "
             "this time only; other versions, inputs, batch sizes or longer runs are not covered.",
    "business": "A business-sample pass shows that these outputs met the stated acceptance rules on this "
                "sample; it does not show that the rules are sufficient, nor behaviour on other data.",
}
"""Fixed statement, per layer, of what a pass does not prove (printed in every report)."""


NOT_END_TO_END = "resource_not_proven_end_to_end"
"""Pseudo-dimension of ``never_covered``: resources on which no business item passed (no combination
proven from discovery through business)."""
NEVER_COVERED_LABELS: dict[str, str] = {
    "resource": "resources with no passing item",
    "image": "images with no passing item",
    "model": "models with no passing item",
    "dataset": "datasets with no passing item",
    NOT_END_TO_END: "resources never proven end to end (no business item passed)",
}
"""How renderings name each ``never_covered`` entry for people."""
NOT_PROVEN = "scope.not_proven"
"""Record kind a check uses for a part of its layer it could not prove although the item ran
(data: ``layer``, ``part``, ``reason``), e.g. queue/quota admission on a Docker host."""
ISOLATION_PART = "isolation of the code under test"
INPUTS_PART = "the inputs the bundle keeps are the ones the run used"
"""``not_proven`` part of an item whose code folder or acceptance file changed while the run used it."""
"""``part`` of the ``scope.not_proven`` record of a model run the engine could not confine: the code under
test could have read the signing key and altered the evidence, so the run's verdict cannot be ``pass``."""
MODELS_ISOLATION_PART = "isolation between model runs"
"""``part`` of the ``scope.not_proven`` record of a model run that shared a writable workload with other runs
not reset in between (an engine's ``isolation.shared_between_runs``): an earlier run could have changed this
run's result (a ``.pth`` file, a process left running), or, with ``model_runs: per-run``, another run (earlier or at
the same time), so the run's verdict cannot be ``pass``."""
CONTENTION_PART = "resources between model runs at once"
"""``part`` of the ``scope.not_proven`` record of a model run that went beside others sharing a limit no workload of
its own holds (an engine's ``isolation.contention``: one sandbox user's process limit, the host's memory, the disk
of the run folders): another
run could have made this one fail, so a failure's owner is not proven; a pass stands (no run can make another
pass), so it does not hold back the verdict."""


def _entry(nodeid: str, layer: Layer, keys: dict[str, str], status: Status, reason: str | None,
           blocked_by: str | None = None) -> UntestedEntry:
    return {"nodeid": nodeid, "layer": layer, "keys": keys, "status": status,
            "reason": reason or "", "blocked_by": blocked_by}


def untested_scope(plans: Iterable[tuple[Matrix, str, Plan]], items: Iterable[ItemDict],
                   deselected: dict[str, str], interrupted: bool, stopped: str = "", lost: str = "") -> UntestedSection:
    """Compute the ``untested`` section of evidence.json.

    ``plans``: (matrix, matrix nodeid prefix such as ``matrices/x.matrix.yaml``, plan);
    ``items``: ItemEvidence dicts that reached a report (read once, in order: a list or an
    :class:`~pytest_hetero.evidence.spool.ItemSpool`); ``deselected``: nodeid → reason
    known from pytest (-k/-m, profile, shard); ``interrupted``: the session was interrupted
    (Ctrl-C, SIGTERM, crash); ``stopped``: pytest's reason for stopping early (-x, --maxfail);
    ``lost``: why results may be missing from the journal (lines that could not be read), which makes
    an unreported planned item ``not_run`` for that reason rather than ``deselected``.
    Returns ``{"items": [...], "never_covered": {matrix name: {dimension: [values]}},
    "not_proven": [{nodeid, layer, part, reason}] (parts of items that ran but could not be
    proven, from ``scope.not_proven`` records), "does_not_prove": {layer: text}}``.
    """
    out: list[UntestedEntry] = []
    reported: set[str] = set()
    passed_all: list[tuple[str, dict[str, str], Layer]] = []  # (nodeid, keys, layer) of each passed item
    not_proven: list[NotProvenEntry] = []
    for item in items:  # one pass: on a lazy document (an ItemSpool) each pass reads every item from disk
        reported.add(item["nodeid"])
        if item["status"] in UNTESTED_STATUSES:
            out.append(_entry(item["nodeid"], item["layer"], item["keys"], item["status"],
                              item["reason"], item["blocked_by"]))
        elif item["status"] == "passed":
            passed_all.append((item["nodeid"], item["keys"], item["layer"]))
        not_proven += [{"nodeid": item["nodeid"], "layer": d["layer"], "part": d["part"], "reason": d["reason"]}
                       for r in item["records"] if (d := data_of(r, records.NOT_PROVEN)) is not None]
    never: dict[str, dict[str, list[str]]] = {}
    for matrix, prefix, plan in plans:
        for omitted in plan.omitted:
            out.append(_entry(f"{prefix}::{'::'.join(omitted.parts)}", omitted.layer, omitted.keys,
                              omitted.status, omitted.reason))
        for planned in plan.items:
            nodeid = f"{prefix}::{planned.id}"
            if nodeid in reported:
                continue
            if nodeid in deselected:
                out.append(_entry(nodeid, planned.layer, planned.keys, "deselected", deselected[nodeid]))
            elif lost:
                out.append(_entry(nodeid, planned.layer, planned.keys, "not_run", f"not_run ({lost})"))
            elif interrupted:
                out.append(_entry(nodeid, planned.layer, planned.keys, "not_run",
                                  "not_run (interrupted before this item finished)"))
            elif stopped:
                out.append(_entry(nodeid, planned.layer, planned.keys, "not_run",
                                  f"not_run (session stopped early: {stopped})"))
            else:
                out.append(_entry(nodeid, planned.layer, planned.keys, "deselected",
                                  "deselected (not selected in this session)"))
        passed = [(keys, layer) for nodeid, keys, layer in passed_all if nodeid.startswith(prefix + "::")]
        dims = {"resource": [r.name for r in matrix.resources], "image": [i.name for i in matrix.images],
                "model": [m.name for m in matrix.models], "dataset": [d.name for d in matrix.datasets]}
        proven = {dim: {keys.get(dim) for keys, _ in passed} for dim in dims}  # one pass, not one per value
        gaps = {dim: [v for v in values if v not in proven[dim]] for dim, values in dims.items()}
        end_to_end = {keys.get("resource") for keys, layer in passed if layer == LAYERS[-1]}
        gaps[NOT_END_TO_END] = [r for r in dims["resource"] if r not in end_to_end]
        never[matrix.name] = {k: v for k, v in gaps.items() if v}
    out.sort(key=lambda e: e["nodeid"])
    return {"items": out, "never_covered": never, "not_proven": not_proven,
            "does_not_prove": dict(DOES_NOT_PROVE)}


def summarise(items: Iterable[ItemDict], untested: UntestedSection,
              leftovers: Sequence[object] | None = None, exit_status: int | None = None,
              collect_errors: int = 0, change_record: Status | None = None) -> SummarySection:
    """Per-layer status counts over reported and untested items, totals, and the gate verdict.

    The verdict and its reason are the judge's (:func:`pytest_hetero.judge.verdict.run_verdict`): ``fail``,
    ``not_clean`` (``leftovers``: :class:`~pytest_hetero.backends.protocol.Leftover` dicts), ``incomplete``
    (nothing passed, an item did not run, code ran unconfined (:data:`ISOLATION_PART`,
    :data:`MODELS_ISOLATION_PART`) or its inputs changed (:data:`INPUTS_PART`), or planned items were not
    selected: ``selection`` says how many and why), else ``pass``. ``exit_status``: the exit status the
    run signs; ``change_record``: the audited change record's status (None without one). An item a rerun
    plugin ran again counts by its last attempt (as pytest counts it);
    ``flaky`` names those that passed only after an earlier attempt failed or errored.
    Returns ``{"by_layer": {layer: {status: n}}, "totals": {status: n}, "verdict": str, "verdict_reason": str,
    "selection": {"deselected": n, "by": [reason]}, "flaky": [nodeid], "clean": bool, "leftovers": n}``.
    """
    from pytest_hetero.judge.verdict import run_verdict

    by_layer: ByLayer = {"discovery": {}, "scheduling": {}, "startup": {}, "model": {}, "business": {}}
    seen: set[str] = set()
    both: Iterable[Entry] = itertools.chain(items, untested["items"])  # not a list: items may be read from disk
    flaky: list[str] = []
    for entry in both:
        if entry["status"] == "passed" and "records" in entry and entry.get("attempts"):
            flaky.append(entry["nodeid"])
        if entry["nodeid"] in seen:
            continue
        seen.add(entry["nodeid"])
        counts = by_layer[entry["layer"]]
        counts[entry["status"]] = counts.get(entry["status"], 0) + 1
    totals: dict[str, int] = {}
    for layer in LAYERS:
        for status, n in by_layer[layer].items():
            totals[status] = totals.get(status, 0) + n
    left = len(leftovers or [])
    unconfined = any(p["part"] in (ISOLATION_PART, MODELS_ISOLATION_PART, INPUTS_PART)
                     for p in untested["not_proven"])
    reasons = sorted({str(e["reason"] or "deselected") for e in untested["items"] if e["status"] == "deselected"})
    more = [f"{len(reasons) - 5} more"] if len(reasons) > 5 else []
    selection: SelectionCounts = {"deselected": totals.get("deselected", 0), "by": reasons[:5] + more}
    verdict, why = run_verdict(totals, left, unconfined, selection, exit_status, collect_errors, change_record)
    flaky.sort()
    return {"by_layer": by_layer, "totals": totals, "verdict": verdict, "verdict_reason": why,
            "selection": selection, "flaky": flaky, "clean": not left, "leftovers": left}
