"""Status words written once: an item's failure (status, owner, causes), its gating, and the run verdict.

Layer checks and engines end in a category and a message (:class:`~pytest_hetero.layers.base.LayerOutcome`);
:func:`item_failure` turns that into the item's status and :class:`~pytest_hetero.judge.model.Failure`
from the failure table. :func:`run_verdict` decides the run's verdict from the item statuses, the
untested scope, what the run left behind, the plan selection and the exit status that is signed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pytest_hetero.judge.failures import FailureStatus, owner_category, status_of
from pytest_hetero.judge.model import Cause, Failure
from pytest_hetero.vocab import BLOCKING, OWNER_CATEGORIES, Layer, OwnerCategory, Status

if TYPE_CHECKING:
    from pytest_hetero.bundle.baseline import GateResult
    from pytest_hetero.evidence.document import SelectionCounts
    from pytest_hetero.judge.model import FailureDict
    from pytest_hetero.matrix.model import Matrix

Verdict = Literal["pass", "fail", "not_clean", "incomplete"]
"""The run's verdict: ``pass`` only for a run that covered its whole plan and proved it."""


GateStatus = Literal["blocked", "not_run", "not_applicable"]
"""The status of an item that does not run its check (gating)."""


class DependencyOutcome(TypedDict):
    """What gating reads of a dependency's evidence: its ``nodeid``, ``layer``, ``status``, the root failure it was
    ``blocked_by``, the ``reason`` of a gated status and its ``failure`` (None where it has none). An item's
    :class:`~pytest_hetero.evidence.document.ItemDict` and the slim evidence its report keeps are both one."""

    nodeid: str
    layer: Layer
    status: Status
    blocked_by: str | None
    reason: str | None
    failure: FailureDict | None


@dataclass(frozen=True)
class Gate:
    """Why an item does not run its check: its ``status``, the ``reason`` its evidence and pytest's skip
    give, and the root failure it is ``blocked_by`` (a nodeid; only for ``blocked``)."""

    status: GateStatus
    reason: str
    blocked_by: str | None = None


def gating(layer: Layer, dependency: str | None, outcome: DependencyOutcome | None) -> Gate | None:
    """Whether an item of ``layer`` runs, given its dependency (``dependency``: its claim id, or the
    planned ``depends_on`` joined with ``::`` when it was not collected; None for a root item) and that
    dependency's evidence in this session (``outcome``: its finished evidence dict, or what its report kept of it;
    None when it did not run here).

    None: run the check. ``not_run``: a business item whose model item did not run in this session
    (nothing of this session to judge, never an error of business); ``not_applicable``: a business item
    whose model item was not applicable; ``blocked``: the dependency failed, errored or was blocked,
    ``blocked_by`` the root failure, the reason its first line (at most 160 characters)."""
    if outcome is None and layer == "business":
        return Gate("not_run", f"not_run: it judges the outputs of {dependency}, which did not run in this "
                               "session; select the model item too")
    if outcome is None:
        return None
    status = outcome["status"]
    if status == "not_applicable" and layer == "business":
        return Gate("not_applicable", f"not applicable: it judges the outputs of {outcome['nodeid']}, which is "
                                      "not applicable")
    if status not in BLOCKING or _failed_on_some_nodes(outcome):
        return None
    root = str(outcome["blocked_by"] or outcome["nodeid"])
    failure = outcome["failure"]
    short = str(outcome["reason"] if status == "blocked"
                else failure["message"] if failure else status).split("\n")[0]
    short = short.split(": ", 1)[1] if short.startswith("blocked by ") else short
    return Gate("blocked", f"blocked by {root}: {short[:160]}", root)


def _failed_on_some_nodes(outcome: DependencyOutcome) -> bool:
    """True when ``outcome`` is a discovery item that failed on some nodes of a pool with node-level coverage only
    (its failure names those ``nodes``; the others passed, its ``discovery.nodes`` record says which): the pool's
    higher items run, on those nodes' behalf; the failed nodes keep discovery's failure in every status
    (:mod:`pytest_hetero.status.compute`)."""
    failure = outcome["failure"]
    return (outcome["layer"] == "discovery" and outcome["status"] == "failed" and failure is not None
            and bool(failure.get("nodes")))


def not_applicable(message: str) -> Gate:
    """An item whose check says its layer cannot be proven on this engine (``message``: why)."""
    return Gate("not_applicable", f"not applicable: {message}")


def image_owner(matrix: Matrix) -> OwnerCategory:
    """The owner category of image problems on ``matrix``'s target (``spec.target.image_owner``)."""
    value = str(matrix.target.get("image_owner", "platform"))
    return next((c for c in OWNER_CATEGORIES if c == value), "platform")


def item_failure(matrix: Matrix, layer: Layer, category: str, message: str, reported: FailureStatus,
                 causes: Iterable[tuple[str, str]] = (), nodes: tuple[str, ...] = ()
                 ) -> tuple[FailureStatus, Failure]:
    """The status and Failure of an item of ``layer`` in ``matrix`` that ended in ``category``
    (``reported``: the outcome the check raised, used only for a category the table does not know; the
    table's status may depend on ``layer``; ``nodes``: the nodes it holds for when not the whole claim).
    Owners come from the failure table, teams from the matrix's ``spec.owners``; each of ``causes``
    (``(category, message)``) keeps its own owner, and the item's owner is the first cause's."""
    images = image_owner(matrix)
    owned = owner_category(category, layer, image_owner=images)
    kept = tuple(Cause(c, matrix.team(o, layer), o, m)
                 for c, m in causes for o in (owner_category(c, layer, image_owner=images),))
    status = status_of(category, reported, layer)
    return status, Failure(layer, category, message, matrix.team(owned, layer), owned,
                           kept if len(kept) > 1 else (), nodes)


def run_verdict(totals: Mapping[str, int], leftovers: int, unconfined: bool, selection: SelectionCounts,
                exit_status: int | None, collect_errors: int = 0,
                change_record: Status | None = None) -> tuple[Verdict, str]:
    """The run's verdict and why.

    ``fail``: an item failed or errored, a file could not be collected (``collect_errors``), the audited
    change record failed (``change_record``: its status from :func:`change_record_status`, None without
    ``--hetero-audit-log``: a pool change the declared record does not name), or pytest's exit status (the
    one signed) is not 0 while every item
    passed (e.g. ``--fail-on-flaky`` exits 7); ``not_clean``: ``leftovers`` workloads the engines could not
    remove; ``incomplete``: nothing passed, an item did not run (``not_run``), code under test ran
    unconfined or its inputs changed (``unconfined``), the audited change record is ``error`` (its source does
    not reach back over the window), or the run did not cover its plan (``selection``:
    ``{"deselected": n, "by": [reasons]}`` from -k/-m, profiles, shards, affected-only); else ``pass``.
    """
    if totals.get("failed") or totals.get("error"):
        return "fail", f"{totals.get('failed', 0)} failed, {totals.get('error', 0)} error"
    if collect_errors:
        return "fail", f"{collect_errors} file(s) could not be collected"
    if change_record == "failed":
        return "fail", "the audited change record failed: a change to a pool that --hetero-change does not name"
    if exit_status not in (None, 0, 5) and not (leftovers and exit_status == 1):
        # exit 1 with leftovers and no failed item is the plugin's own not_clean exit status
        return "fail", (f"exit status {exit_status} although no item failed (--fail-on-flaky, a baseline gate, "
                        "or another test of the session)")
    if leftovers:
        return "not_clean", f"{leftovers} workload(s) left on the platform"
    if not totals.get("passed"):
        return "incomplete", "nothing passed"
    if totals.get("not_run"):
        return "incomplete", f"{totals['not_run']} item(s) did not run"
    if unconfined:
        return "incomplete", "code under test ran unconfined, shared an unreset workload, or its inputs changed"
    if change_record == "error":
        return "incomplete", "the audited change record's source does not cover the window since the baseline"
    if selection["deselected"]:
        by = "; ".join(selection["by"])
        return "incomplete", f"{selection['deselected']} planned item(s) not selected ({by})"
    return "pass", "every planned item ran and none failed"


def exit_status(pytest_status: int | None, gate: GateResult | None,
                change_record: Status | None = None) -> int | None:
    """The exit status the run signs and the process returns: pytest's (``pytest_status``, after every
    plugin had its say, e.g. pytest-rerunfailures' ``--fail-on-flaky`` 7), except that a baseline gate
    with a policy other than ``any-failure`` (``gate``: ``baseline_diff["gate"]``) decides 0 or 1 when
    pytest's status is 0 or 1 (tests ran), and a failed audited change record (``change_record``, see
    :func:`run_verdict`) turns 0 into 1."""
    if gate is None or pytest_status not in (0, 1) or gate["policy"] == "any-failure" and not gate["failed"]:
        status = pytest_status
    else:
        status = 1 if gate["failed"] else 0
    return 1 if status == 0 and change_record == "failed" else status


def outside_failure(matrix: Matrix, layer: Layer, when: str, outcome: str, layer_status: object,
                    text: str) -> tuple[FailureStatus, Failure]:
    """The status and Failure of an item pytest failed in phase ``when`` (``outcome``, pytest's text
    ``text``) for a reason outside the layer's verdict (``layer_status``: what the layer said, None when
    it never finished: a timeout plugin killed the run, a warning turned error): ``pytest_outcome``."""
    message = (f"pytest reported the {when} phase as {outcome} although the layer's verdict was "
               f"{layer_status if layer_status is not None else 'never reached'}: {text.strip()[-1500:]}")
    return item_failure(matrix, layer, "pytest_outcome", message, "error")


def change_findings(matrix: Matrix, findings: Iterable[Mapping[str, Any]],
                    covers_window: bool | None = True) -> tuple[Status, list[dict[str, Any]]]:
    """The status of a matrix's audited change record and its findings with theirs: each finding of
    :func:`pytest_hetero.status.audit.classify` (``category``, ``message``, ``pools``, ``change``) gets
    ``status`` (the failure table's, ``failed`` for ``undeclared_change``), ``owner`` (owner category) and
    ``team`` (the matrix's ``spec.owners`` name; a change to the pools acts on their scheduling). The record's
    status: ``failed`` when a finding failed, ``error`` when one errored or when the source does not reach
    back to the window's start (``covers_window`` False: a rotated or late-begun audit log, nothing proven
    about the time before it), else ``passed`` (no change to a pool the record leaves out was seen: what
    the source can see, see the audit module)."""
    out = []
    for finding in findings:
        category = str(finding["category"])
        owned = owner_category(category, "scheduling", image_owner=image_owner(matrix))
        out.append({**finding, "status": status_of(category, "failed", "scheduling"), "owner": owned,
                    "team": matrix.team(owned, "scheduling")})
    statuses = {f["status"] for f in out}
    return ("failed" if "failed" in statuses else
            "error" if "error" in statuses or covers_window is False else "passed"), out


def change_record_status(statuses: Iterable[Status]) -> Status:
    """The audited change record's status over its matrices' (:func:`change_findings`): ``failed`` when one
    failed, else ``error`` when one errored, else ``passed``."""
    seen = set(statuses)
    return "failed" if "failed" in seen else "error" if "error" in seen else "passed"
