"""JUnit XML (``junit.xml``) valid against both published schemas its consumers use (``shared/schemas``):
the Jenkins xUnit plugin's ``junit-10.xsd`` and the Jenkins JUnit format ``jenkins-junit.xsd``.

One ``<testsuite>`` per layer (name ``hetero.<layer>``, suite properties: run id, verdict,
matrices) and one ``<testcase>`` per item (reported or untested). A testcase's identity is the one
pytest's own ``--junitxml`` gives the same item (CI history tools key on it): ``classname`` is the
node id without its last part, joined with ``.``, the file path's ``/`` as ``.``; ``name`` is the
last part (the layer), e.g. ``matrices.example-cpu.matrix.yaml.cpu-host.py-current`` /
``startup``. ``time`` is seconds with three decimals.
failed → ``<failure type=category message=…>``, error → ``<error>``, every untested status
(blocked, not_applicable, excluded, skipped, deselected, not_run) → ``<skipped>status: reason</skipped>``
(text, not a ``message`` attribute, which jenkins-junit.xsd does not allow).

Neither schema has per-testcase ``<properties>`` or a ``status`` attribute valid in both, so each
testcase's properties (layer, dimension keys, owner (the failure's owner when it failed:
:func:`~pytest_hetero.reporting.view.owner_shown`), layer_owner, status, evidence path, blocked_by; for a business item
``rule.<name>`` = ``threshold; observed value [unit]; computed|measured|self-reported; verdict``) are written
to its ``<system-out>`` as ``[[PROPERTY|name=value]]`` lines, the convention Jenkins/Testmo-style
readers understand (each on one line, brackets percent-encoded:
:func:`pytest_hetero.reporting.view.junit_property`).
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape, quoteattr

from junitparser import JUnitXml, TestSuite

from pytest_hetero import LAYERS
from pytest_hetero.evidence.document import failure_of, item_of
from pytest_hetero.evidence.model import UNTESTED_STATUSES
from pytest_hetero.reporting.docview import run_view
from pytest_hetero.reporting.view import entries, junit_properties, owner_shown, printable, rule_results, verification

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import Entry, EvidenceDocument
    from pytest_hetero.evidence.views import SignoffView
    from pytest_hetero.reporting.itemtexts import ItemTexts


def _properties(entry: Entry) -> list[tuple[str, str]]:
    item = item_of(entry)
    props: list[tuple[str, str]] = [("layer", entry["layer"])]
    props += [(dim, str(value)) for dim, value in sorted(entry["keys"].items())]
    props += [("owner", owner_shown(entry)), ("layer_owner", item["owner"] if item else ""),
              ("status", entry["status"]),
              ("evidence", f"evidence.json#{entry['nodeid']}")]
    if blocked_by := entry["blocked_by"]:
        props.append(("blocked_by", blocked_by))
    props += [("artifact", a["path"]) for a in (item["artifacts"] if item else [])]
    for r in rule_results(entry):  # rule.<name>: threshold; observed [unit]; provenance; verdict
        observed = f"{r['observed']}{' ' + r['unit'] if r['unit'] else ''}"
        sample = f"sample {r['run']}: " if r["run"] else ""
        props.append((f"rule.{r['name']}", f"{sample}{r['threshold']}; observed {observed}; "
                      f"{(r['provenance'] or 'unknown').replace('_', '-')}; {r['verdict']}"))
    return props


def junit_identity(nodeid: str) -> tuple[str, str]:
    """(classname, name) of ``nodeid`` as pytest's ``--junitxml`` writes them (``_pytest.junitxml``'s
    address mangling): the parts after the file are the classname's tail and the name, the file path's
    ``/`` become ``.`` and a trailing ``.py`` is dropped; a ``[params]`` suffix stays on the name."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def case_xml(entry: Entry) -> str:
    """One ``<testcase>`` element as text, children in schema order, from ``entry`` alone (an item or an
    untested-only entry): the same text whether rendered at the finish or as the item is journaled
    (:mod:`pytest_hetero.reporting.itemtexts`)."""
    status = entry["status"]
    failure = failure_of(entry)
    classname, name = junit_identity(printable(entry["nodeid"]))
    head = (f"<testcase classname={quoteattr(classname)} name={quoteattr(name)}"
            f" time=\"{_seconds(entry):.3f}\">")
    result = ""
    if status in ("failed", "error"):
        message = printable(str((failure["message"] if failure else "") or entry["reason"] or ""))[:2000]
        kind = "failure" if status == "failed" else "error"
        category = printable(failure["category"] if failure else status)
        result = f"<{kind} message={quoteattr(message)} type={quoteattr(category)} />"
    elif status in UNTESTED_STATUSES:
        result = f"<skipped>{escape(printable(f'{status}: ' + str(entry['reason'] or ''))[:2000])}</skipped>"
    props = junit_properties(_properties(entry))
    return f"{head}{result}<system-out>{escape(props)}</system-out></testcase>"


_TALLIED = {"failed": "failures", "error": "errors", **{s: "skipped" for s in UNTESTED_STATUSES}}
"""Status → the suite statistic its testcase counts in (beside ``tests``)."""


def _seconds(entry: Entry) -> float:
    """An item's wall seconds; 0 for an untested-only entry."""
    item = item_of(entry)
    return float((item["duration_s"] if item else 0.0) or 0.0)


def _open_tag(element: Any) -> str:
    """Junitparser's serialisation of an element without children, as an opening tag."""
    text = bytes(element.tostring()).decode("utf-8")
    if not text.endswith("/>"):
        raise ValueError(f"expected an empty element, got {text[:80]!r}")
    return text[:-2].rstrip() + ">"


def render_junit(evidence: EvidenceDocument, signoff: SignoffView | None = None,
                 texts: ItemTexts | None = None) -> bytes:
    """Return the JUnit XML document as UTF-8 bytes (with XML declaration): :func:`junit_text` joined."""
    return "".join(junit_text(evidence, signoff, texts)).encode("utf-8")


def junit_text(evidence: EvidenceDocument, signoff: SignoffView | None = None,
               texts: ItemTexts | None = None) -> Iterator[str]:
    """The JUnit XML document (with XML declaration) as consecutive pieces of text, a testcase at a time (a
    writer need not join them). With the sign-off view ``signoff``, each suite's properties say whether the
    bundle was verified and by which key (``verification``, ``verified_by``; see
    :func:`pytest_hetero.reporting.view.verification`). An item's testcase rendered as the item was journaled is
    taken from ``texts`` (the same text :func:`case_xml` gives).

    Two passes over :func:`~pytest_hetero.reporting.view.entries`: the first counts each layer's suite (tests,
    failures, errors, skipped, time) and notes where each testcase's text comes from (its place in ``texts``, or
    the entry's position, rendered in the second pass); no testcase's text is held, nor its entry (on an
    assembled document the items are read back from disk).

    junitparser builds and serialises the document (``<testsuites>``, each ``<testsuite>`` with
    its statistics and ``<properties>``); the testcases are written as text by :func:`case_xml`
    (escaped with ``xml.sax.saxutils``), because junitparser's per-element objects and
    ElementTree's pure-Python serialiser cost more than the whole bundle budget at 50,000 items.
    """
    state, by = verification(signoff) if signoff is not None else (None, None)
    # per layer, each testcase in order: >= 0 its record in texts, < 0 -1 - the entry's position
    cases: dict[str, array[int]] = {layer: array("q") for layer in LAYERS}
    counts: dict[str, dict[str, int]] = {}
    times: dict[str, float] = {}
    listed = entries(evidence)
    for position, entry in enumerate(listed):
        layer: str = entry["layer"]
        tally = counts.setdefault(layer, {"tests": 0, "failures": 0, "errors": 0, "skipped": 0})
        tally["tests"] += 1
        if entry["status"] in _TALLIED:
            tally[_TALLIED[entry["status"]]] += 1
        times[layer] = times.get(layer, 0.0) + _seconds(entry)
        kept = texts.kept(entry) if texts is not None else None
        cases.setdefault(layer, array("q")).append(-1 - position if kept is None else kept)
    run = run_view(evidence["run"])
    run_id = "" if run.id is None else run.id
    root: Any = JUnitXml(f"pytest-hetero {run_id}")
    root.tests = sum(c["tests"] for c in counts.values())
    root.failures = sum(c["failures"] for c in counts.values())
    root.errors = sum(c["errors"] for c in counts.values())
    root.time = round(sum(times.values()), 3)
    yield '<?xml version="1.0" encoding="UTF-8"?>\n'
    yield _open_tag(root)
    for layer, refs in cases.items():
        suite: Any = TestSuite(printable(f"hetero.{layer}"))
        tally = counts.get(layer, {"tests": 0, "failures": 0, "errors": 0, "skipped": 0})
        suite.tests, suite.failures = tally["tests"], tally["failures"]
        suite.errors, suite.skipped = tally["errors"], tally["skipped"]
        suite.time = round(times.get(layer, 0.0), 3)
        suite.add_property("run_id", printable(str(run_id)))
        suite.add_property("verdict", evidence["summary"]["verdict"])
        if state is not None:
            suite.add_property("verification", state)
            suite.add_property("verified_by", by or "")
        suite.add_property("matrices", printable(",".join(m["name"] for m in evidence["matrices"])))
        text = bytes(suite.tostring()).decode("utf-8")
        if not text.endswith("</testsuite>"):
            raise ValueError(f"unexpected junitparser output {text[-80:]!r}")
        yield text[: -len("</testsuite>")]
        for ref in refs:
            yield case_xml(listed[-1 - ref]) if ref < 0 or texts is None else texts.junit_at(ref)
        yield "</testsuite>"
    yield "</testsuites>"
