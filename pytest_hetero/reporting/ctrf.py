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
from array import array
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

from pytest_hetero.evidence.document import failure_of, item_of
from pytest_hetero.reporting.docview import run_view
from pytest_hetero.reporting.view import entries, owner_shown, rule_results, verification

if TYPE_CHECKING:
    from typing import NotRequired

    from pytest_hetero.evidence.document import Entry, EvidenceDocument
    from pytest_hetero.evidence.views import SignoffView
    from pytest_hetero.reporting.itemtexts import ItemTexts
    from pytest_hetero.reporting.view import RuleRow
    from pytest_hetero.vocab import Status

SPEC_VERSION = "0.1.0"
"""The CTRF specification version the official schema in ``shared/schemas`` describes."""
_CTRF_STATUS: dict[Status, str] = {"passed": "passed", "failed": "failed", "error": "failed", "not_run": "pending",
                                    "blocked": "skipped", "not_applicable": "skipped", "skipped": "skipped",
                                    "excluded": "skipped", "deselected": "skipped"}
"""Each of our statuses as the CTRF status it reads as (every status has one)."""


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
    rawStatus: Status
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


def ctrf_test(entry: Entry) -> CtrfTest:
    """One entry of :func:`pytest_hetero.reporting.view.entries` (an item or an untested-only entry) as its CTRF
    test, built from that entry alone (its nodeid, status, keys, records, failure, artifacts): the same test
    whether rendered at the finish or as the item is journaled (:mod:`pytest_hetero.reporting.itemtexts`)."""
    item = item_of(entry)
    failure = failure_of(entry)
    nodeid, layer = entry["nodeid"], entry["layer"]
    owner = owner_shown(entry)
    keys = entry["keys"]
    labels = {"layer": layer, "owner": owner}
    labels.update({str(k): str(keys[k]) for k in sorted(keys)})
    test: CtrfTest = {
        "name": nodeid, "testId": nodeid, "status": _CTRF_STATUS[entry["status"]],
        "rawStatus": entry["status"], "duration": round(float((item["duration_s"] if item else 0) or 0) * 1000),
        "suite": _suite(nodeid, layer), "filePath": nodeid.split("::", 1)[0], "tags": [layer], "labels": labels,
        "extra": {"owner": owner, "layer_owner": item["owner"] if item else None,
                  "blocked_by": entry["blocked_by"]},
    }
    if item is not None:
        rules = rule_results(entry)
        if rules:
            test["extra"]["rules"] = rules
        started, finished = item["started_at"], item["finished_at"]
        if started and finished:
            test["start"], test["stop"] = _epoch_ms(started), _epoch_ms(finished)
    if failure:
        test["message"] = str(failure["message"] or "")
        test["extra"]["category"] = failure["category"]
    elif entry["reason"]:
        test["message"] = str(entry["reason"])
    if item and item["artifacts"]:
        # media_type: every artifact the gate writes has one, but the loader does not check an artifact's fields
        # (an edited evidence.json's may lack it): text/plain then, as before
        test["attachments"] = [{"name": str(a["name"]), "contentType": str(a.get("media_type") or "text/plain"),
                                "path": str(a["path"])} for a in item["artifacts"]]
    return test


def _suite(nodeid: str, layer: str) -> list[str]:
    """A test's ``suite``: the parts of ``nodeid`` above its last (``hetero.<layer>`` when it has one part)."""
    return nodeid.split("::")[:-1] or [f"hetero.{layer}"]


def render_ctrf(evidence: EvidenceDocument, signoff: SignoffView | None = None) -> CtrfReport:
    """Return the CTRF document as a JSON-ready dict whose key order is deterministic (every dict
    is built in a fixed order), so it can be serialised without ``sort_keys``. With the sign-off view
    ``signoff``, ``results.extra`` says whether the bundle was verified and by which key
    (``verification``, ``verified_by``; see :func:`pytest_hetero.reporting.view.verification`)."""
    tests = [ctrf_test(entry) for entry in entries(evidence)]
    return _report(evidence, signoff, tests, [t["rawStatus"] for t in tests], {tuple(t["suite"]) for t in tests})


def _report(evidence: EvidenceDocument, signoff: SignoffView | None, tests: list[CtrfTest], statuses: list[Status],
            suites: set[tuple[str, ...]]) -> CtrfReport:
    """The CTRF document around ``tests``; its summary counts ``statuses`` (each test's raw status) and
    ``suites`` (the distinct suites)."""
    run = run_view(evidence["run"])
    summary = {"tests": 0, "passed": 0, "failed": 0, "pending": 0, "skipped": 0, "other": 0}
    for raw in statuses:
        summary["tests"] += 1
        summary[_CTRF_STATUS[raw]] += 1
    summary["start"] = _epoch_ms(run.started_at)
    summary["stop"] = _epoch_ms(run.finished_at) or summary["start"]
    summary["duration"] = max(0, summary["stop"] - summary["start"])
    summary["suites"] = len(suites)
    run_id: RunId = {"runId": str(run.id)} if run.id else {}
    when = run.finished_at or run.started_at
    stamp: Stamp = {"timestamp": when} if when else {}
    return {"reportFormat": "CTRF", "specVersion": SPEC_VERSION, **run_id, **stamp,
            "generatedBy": f"pytest-hetero {run.tool_version or ''}".strip(),
            "results": {"tool": {"name": "pytest-hetero", "version": str(run.tool_version or "")},
                        "summary": summary, "tests": tests,
                        "environment": {"appName": ",".join(m["name"] for m in evidence["matrices"]),
                                        "buildName": str(run.id or ""),
                                        # canonical key order, so a re-render from evidence.json is identical
                                        "extra": {"target": json.loads(json.dumps(evidence["target"],
                                                                                  sort_keys=True))}},
                        "extra": {"verdict": evidence["summary"]["verdict"], "run_id": run.id,
                                  **_verification(signoff)}}}


_TESTS_HOLE = '"tests": []'
"""The empty ``tests`` list as :func:`~pytest_hetero.reporting.view.json_text` writes it: where
:func:`ctrf_text` puts the tests' texts."""
TEXT_BATCH = 512
"""Tests rendered at the finish encoded in one call of :func:`ctrf_text` (bounded memory, few calls)."""


def ctrf_text(evidence: EvidenceDocument, signoff: SignoffView | None = None,
              texts: ItemTexts | None = None) -> Iterator[str]:
    """``json_text(render_ctrf(evidence, signoff)) + "\n"`` (ctrf.json's text) as consecutive pieces, an
    item's test taken from ``texts`` when it was rendered as the item was journaled (its text is then joined,
    not built again), every other test built here, :data:`TEXT_BATCH` per encoding.

    The pieces join to exactly that text: a test's compact text inside the document is its own compact text
    (one encoder, one set of separators), and :func:`~pytest_hetero.reporting.view.json_text` changes a string
    only where the string itself holds what :func:`~pytest_hetero.reporting.view.printable` removes, so
    applying it part by part changes the same strings as applying it to the whole."""
    from pytest_hetero.reporting.view import json_text

    statuses: list[Status] = []
    suites: set[tuple[str, ...]] = set()
    refs = array("q")  # each test in order: >= 0 its record in texts, < 0 -1 - the entry's position (built below)
    listed = entries(evidence)
    for position, entry in enumerate(listed):  # one read of the entries (an assembled document's are on disk)
        statuses.append(entry["status"])
        suites.add(tuple(_suite(entry["nodeid"], entry["layer"])))
        kept = texts.kept(entry) if texts is not None else None
        refs.append(-1 - position if kept is None else kept)
    head = json_text(_report(evidence, signoff, [], statuses, suites))
    cut = head.index(_TESTS_HOLE) + len(_TESTS_HOLE) - 1  # the summary comes first and holds no list
    yield head[:cut]
    batch: list[CtrfTest] = []
    first = True
    for ref in refs:
        if ref < 0 or texts is None:
            batch.append(ctrf_test(listed[-1 - ref]))
            if len(batch) < TEXT_BATCH:
                continue
            ready = json_text(batch)[1:-1]
            batch = []
        else:
            ready = texts.ctrf_at(ref)
            if batch:
                yield ("" if first else ", ") + json_text(batch)[1:-1]
                first = False
                batch = []
        yield ("" if first else ", ") + ready
        first = False
    if batch:
        yield ("" if first else ", ") + json_text(batch)[1:-1]
    yield head[cut:] + "\n"


def _verification(signoff: SignoffView | None) -> Verified:
    if signoff is None:
        return {}
    state, by = verification(signoff)
    return {"verification": state, "verified_by": by}
