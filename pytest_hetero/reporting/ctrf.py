"""CTRF JSON (Common Test Report Format, spec 0.1.0, the version of the official JSON Schema in
``shared/schemas/ctrf.schema.json``) for dashboards: ``ctrf.json``.

``{"reportFormat": "CTRF", "specVersion": "0.1.0", "runId", "timestamp", "generatedBy", "results":
{"tool", "summary", "tests", "environment", "extra"}}``. CTRF statuses are passed, failed, skipped,
pending, other: error → failed (``rawStatus`` keeps ours), untested statuses → skipped, not_run →
pending. Per test: ``name`` and ``testId`` are the node id (the key of the item in evidence.json);
``suite`` is the hierarchy above it (matrix file, resource, image, model@dataset), ``filePath`` the
matrix file, so CTRF tools group tests as pytest does; ``tags`` the layer; ``labels`` the layer,
owner (the failure's owner when it failed) and each dimension; ``extra`` has owner, layer_owner and
blocked_by, and for a business item ``rules`` (each rule's name, metric,
threshold, observed value, unit, provenance and verdict). Durations are milliseconds; the
summary's and each test's ``start``/``stop`` are Unix epoch milliseconds.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

from pytest_hetero.evidence.document import failure_of, item_of
from pytest_hetero.reporting.view import entries, json_text, owner_shown, rule_results, verification

if TYPE_CHECKING:
    from typing_extensions import NotRequired

    from pytest_hetero.evidence.document import EvidenceDocument
    from pytest_hetero.evidence.views import SignoffView
    from pytest_hetero.reporting.view import RuleRow

SPEC_VERSION = "0.1.0"
"""The CTRF specification version the official schema in ``shared/schemas`` describes."""
_CTRF_STATUS = {"passed": "passed", "failed": "failed", "error": "failed", "not_run": "pending",
                "blocked": "skipped", "not_applicable": "skipped", "skipped": "skipped", "excluded": "skipped",
                "deselected": "skipped"}


class CtrfTestExtra(TypedDict):
    """A CTRF test's ``extra``: the owner shown, the layer's owner, what blocked it, its rule results (a business
    item) and its failure category (a failed item)."""

    owner: str
    layer_owner: str | None
    blocked_by: str | None
    rules: NotRequired[list[RuleRow]]
    category: NotRequired[str]


class Attachment(TypedDict):
    """A captured file of a test: its name, media type and path in the bundle."""

    name: str
    contentType: str
    path: str


class CtrfTest(TypedDict):
    """One CTRF test (an item or an untested entry); keys in the order they are written."""

    name: str
    testId: str
    status: str
    rawStatus: str
    duration: int
    suite: list[str]
    filePath: str
    tags: list[str]
    labels: dict[str, str]
    extra: CtrfTestExtra
    start: NotRequired[int]
    stop: NotRequired[int]
    message: NotRequired[str]
    attachments: NotRequired[list[Attachment]]


class Verified(TypedDict, total=False):
    """Whether the bundle verified and by which key (only with a sign-off view)."""

    verification: str
    verified_by: str | None


class RunId(TypedDict, total=False):
    """The report's ``runId`` (when the run has an id)."""

    runId: str


class Stamp(TypedDict, total=False):
    """The report's ``timestamp`` (when the run has a time)."""

    timestamp: str


class ResultsExtra(Verified):
    """The results' ``extra``: the run's verdict and id, and :class:`Verified`."""

    verdict: str
    run_id: str | None


class EnvironmentExtra(TypedDict):
    """The environment's ``extra``: the run's target fingerprints (each engine's own shape), keys sorted."""

    target: list[object]


class CtrfEnvironment(TypedDict):
    """The report's ``environment``: the matrices' names, the run id, the targets."""

    appName: str
    buildName: str
    extra: EnvironmentExtra


class CtrfResults(TypedDict):
    """The report's ``results``."""

    tool: dict[str, str]
    summary: dict[str, int]
    tests: list[CtrfTest]
    environment: CtrfEnvironment
    extra: ResultsExtra


class CtrfReport(RunId, Stamp):
    """The CTRF document, keys in the order they are written."""

    reportFormat: str
    specVersion: str
    generatedBy: str
    results: CtrfResults


def _epoch_ms(stamp: str | None) -> int:
    if not stamp:
        return 0
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)


def render_ctrf(evidence: EvidenceDocument, signoff: SignoffView | None = None) -> CtrfReport:
    """Return the CTRF document as a JSON-ready dict whose key order is deterministic (every dict
    is built in a fixed order), so it can be serialised without ``sort_keys``. With the sign-off view
    ``signoff``, ``results.extra`` says whether the bundle was verified and by which key
    (``verification``, ``verified_by``; see :func:`pytest_hetero.reporting.view.verification`)."""
    summary = _Summary()
    tests = [summary.count(test) for test in _tests(evidence)]
    return _document(evidence, signoff, summary, tests)


def ctrf_text(evidence: EvidenceDocument, signoff: SignoffView | None = None) -> Iterator[str]:
    """``json_text(render_ctrf(evidence, signoff))`` (:func:`pytest_hetero.reporting.view.json_text`) as
    consecutive pieces, without holding the document: each test is encoded as it is built (its text, not its
    dicts, is kept until the summary that precedes the tests is known). The same characters: the encoder
    writes a list's members as they are written alone, and :func:`~pytest_hetero.reporting.view.json_text`
    cleans each test as it would the whole."""
    summary = _Summary()
    texts = [json_text(summary.count(test)) for test in _tests(evidence)]
    marker = f"hetero-ctrf-tests-{uuid.uuid4().hex}"
    head, found, tail = json_text(_document(evidence, signoff, summary, marker)).partition(json.dumps(marker))
    if not found:
        raise ValueError("the CTRF skeleton lost its tests marker")
    yield head + "["
    for n, text in enumerate(texts):
        yield (", " if n else "") + text
    yield "]" + tail


class _Summary:
    """The counts of the tests seen so far, and the suites they name."""

    def __init__(self) -> None:
        self.counts = {"tests": 0, "passed": 0, "failed": 0, "pending": 0, "skipped": 0, "other": 0}
        self.suites: set[tuple[str, ...]] = set()

    def count(self, test: CtrfTest) -> CtrfTest:
        """Count ``test``; return it."""
        self.counts["tests"] += 1
        self.counts[test["status"]] += 1
        self.suites.add(tuple(test["suite"]))
        return test


def _tests(evidence: EvidenceDocument) -> Iterator[CtrfTest]:
    """Each entry's test (:func:`pytest_hetero.reporting.view.entries`' order), built when asked for."""
    for entry in entries(evidence):
        status = _CTRF_STATUS.get(entry["status"], "other")
        item = item_of(entry)
        failure = failure_of(entry)
        parts = entry["nodeid"].split("::")
        test: CtrfTest = {
            "name": entry["nodeid"], "testId": entry["nodeid"], "status": status, "rawStatus": entry["status"],
            "duration": round(float((item.get("duration_s") if item else 0) or 0) * 1000),
            "suite": parts[:-1] or [f"hetero.{entry['layer']}"], "filePath": parts[0],
            "tags": [entry["layer"]],
            "labels": {"layer": entry["layer"], "owner": owner_shown(entry),
                       **{str(k): str(v) for k, v in sorted(entry["keys"].items())}},
            "extra": {"owner": owner_shown(entry), "layer_owner": item["owner"] if item else None,
                      "blocked_by": entry.get("blocked_by")},
        }
        rules = rule_results(entry)
        if rules:
            test["extra"]["rules"] = rules
        if item and item.get("started_at") and item.get("finished_at"):
            test["start"], test["stop"] = _epoch_ms(item.get("started_at")), _epoch_ms(item.get("finished_at"))
        if failure:
            test["message"] = str(failure["message"] or "")
            test["extra"]["category"] = failure["category"]
        elif entry.get("reason"):
            test["message"] = str(entry.get("reason"))
        if item and item["artifacts"]:
            test["attachments"] = [{"name": str(a["name"]), "contentType": str(a.get("media_type") or "text/plain"),
                                    "path": str(a["path"])} for a in item["artifacts"]]
        yield test


def _document(evidence: EvidenceDocument, signoff: SignoffView | None, counted: _Summary,
              tests: list[CtrfTest] | str) -> CtrfReport:
    """The CTRF document around ``tests`` (the tests, or a marker string :func:`ctrf_text` replaces)."""
    run = evidence["run"]
    summary = counted.counts
    summary["start"] = _epoch_ms(run.get("started_at"))
    summary["stop"] = _epoch_ms(run.get("finished_at")) or summary["start"]
    summary["duration"] = max(0, summary["stop"] - summary["start"])
    summary["suites"] = len(counted.suites)
    run_id: RunId = {"runId": str(run["id"])} if run.get("id") else {}
    when = run.get("finished_at") or run.get("started_at")
    stamp: Stamp = {"timestamp": when} if when else {}
    return {"reportFormat": "CTRF", "specVersion": SPEC_VERSION, **run_id, **stamp,
            "generatedBy": f"pytest-hetero {run.get('tool_version') or ''}".strip(),
            "results": {"tool": {"name": "pytest-hetero", "version": str(run.get("tool_version") or "")},
                        "summary": summary, "tests": tests,  # type: ignore[typeddict-item]  # the marker
                        "environment": {"appName": ",".join(m["name"] for m in evidence["matrices"]),
                                        "buildName": str(run.get("id") or ""),
                                        # canonical key order, so a re-render from evidence.json is identical
                                        "extra": {"target": json.loads(json.dumps(evidence["target"],
                                                                                  sort_keys=True))}},
                        "extra": {"verdict": evidence["summary"]["verdict"], "run_id": run.get("id"),
                                  **_verification(signoff)}}}


def _verification(signoff: SignoffView | None) -> Verified:
    if signoff is None:
        return {}
    state, by = verification(signoff)
    return {"verification": state, "verified_by": by}
