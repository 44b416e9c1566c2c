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
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape, quoteattr

from junitparser import JUnitXml, TestSuite

from pytest_hetero import LAYERS
from pytest_hetero.evidence.document import failure_of, item_of
from pytest_hetero.evidence.model import UNTESTED_STATUSES
from pytest_hetero.reporting.view import entries, junit_properties, owner_shown, printable, rule_results, verification

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import Entry, EvidenceDocument
    from pytest_hetero.evidence.views import SignoffView


def _properties(entry: Entry) -> list[tuple[str, str]]:
    item = item_of(entry)
    props: list[tuple[str, str]] = [("layer", entry["layer"])]
    props += [(dim, str(value)) for dim, value in sorted(entry["keys"].items())]
    props += [("owner", owner_shown(entry)), ("layer_owner", item["owner"] if item else ""),
              ("status", entry["status"]),
              ("evidence", f"evidence.json#{entry['nodeid']}")]
    if blocked_by := entry.get("blocked_by"):
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


def _case_xml(entry: Entry, tally: dict[str, int]) -> str:
    """One ``<testcase>`` element as text, children in schema order; counts it into ``tally``."""
    status = entry["status"]
    failure = failure_of(entry)
    classname, name = junit_identity(printable(entry["nodeid"]))
    head = (f"<testcase classname={quoteattr(classname)} name={quoteattr(name)}"
            f" time=\"{_seconds(entry):.3f}\">")
    result = ""
    if status in ("failed", "error"):
        message = printable(str((failure["message"] if failure else "") or entry.get("reason") or ""))[:2000]
        kind = "failure" if status == "failed" else "error"
        category = printable(failure["category"] if failure else status)
        result = f"<{kind} message={quoteattr(message)} type={quoteattr(category)} />"
        tally["failures" if status == "failed" else "errors"] += 1
    elif status in UNTESTED_STATUSES:
        result = f"<skipped>{escape(printable(f'{status}: ' + str(entry.get('reason') or ''))[:2000])}</skipped>"
        tally["skipped"] += 1
    props = junit_properties(_properties(entry))
    return f"{head}{result}<system-out>{escape(props)}</system-out></testcase>"


def _seconds(entry: Entry) -> float:
    """An item's wall seconds; 0 for an untested-only entry."""
    item = item_of(entry)
    return float((item.get("duration_s") if item else 0.0) or 0.0)


def _open_tag(element: Any) -> str:
    """Junitparser's serialisation of an element without children, as an opening tag."""
    text = bytes(element.tostring()).decode("utf-8")
    if not text.endswith("/>"):
        raise ValueError(f"expected an empty element, got {text[:80]!r}")
    return text[:-2].rstrip() + ">"


def render_junit(evidence: EvidenceDocument, signoff: SignoffView | None = None) -> bytes:
    """Return the JUnit XML document as UTF-8 bytes (with XML declaration): :func:`junit_text` joined."""
    return "".join(junit_text(evidence, signoff)).encode("utf-8")


def junit_text(evidence: EvidenceDocument, signoff: SignoffView | None = None) -> list[str]:
    """The JUnit XML document as consecutive pieces of text (a writer need not join them: the whole text and
    its bytes were twice the file on top of the pieces). With the sign-off view
    ``signoff``, each suite's properties say whether the bundle was verified and by which key
    (``verification``, ``verified_by``; see :func:`pytest_hetero.reporting.view.verification`).

    junitparser builds and serialises the document (``<testsuites>``, each ``<testsuite>`` with
    its statistics and ``<properties>``); the testcases are written as text by :func:`_case_xml`
    (escaped with ``xml.sax.saxutils``), because junitparser's per-element objects and
    ElementTree's pure-Python serialiser cost more than the whole bundle budget at 50,000 items.
    """
    state, by = verification(signoff) if signoff is not None else (None, None)
    cases: dict[str, list[str]] = {layer: [] for layer in LAYERS}
    counts: dict[str, dict[str, int]] = {}
    times: dict[str, float] = {}
    for entry in entries(evidence):
        layer: str = entry["layer"]
        tally = counts.setdefault(layer, {"tests": 0, "failures": 0, "errors": 0, "skipped": 0})
        tally["tests"] += 1
        times[layer] = times.get(layer, 0.0) + _seconds(entry)
        cases.setdefault(layer, []).append(_case_xml(entry, tally))
    root: Any = JUnitXml(f"pytest-hetero {evidence['run'].get('id', '')}")
    root.tests = sum(c["tests"] for c in counts.values())
    root.failures = sum(c["failures"] for c in counts.values())
    root.errors = sum(c["errors"] for c in counts.values())
    root.time = round(sum(times.values()), 3)
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n', _open_tag(root)]
    for layer, texts in cases.items():
        suite: Any = TestSuite(printable(f"hetero.{layer}"))
        tally = counts.get(layer, {"tests": 0, "failures": 0, "errors": 0, "skipped": 0})
        suite.tests, suite.failures = tally["tests"], tally["failures"]
        suite.errors, suite.skipped = tally["errors"], tally["skipped"]
        suite.time = round(times.get(layer, 0.0), 3)
        suite.add_property("run_id", printable(str(evidence["run"].get("id", ""))))
        suite.add_property("verdict", evidence["summary"]["verdict"])
        if state is not None:
            suite.add_property("verification", state)
            suite.add_property("verified_by", by or "")
        suite.add_property("matrices", printable(",".join(m["name"] for m in evidence["matrices"])))
        text = bytes(suite.tostring()).decode("utf-8")
        if not text.endswith("</testsuite>"):
            raise ValueError(f"unexpected junitparser output {text[-80:]!r}")
        out += [text[: -len("</testsuite>")], *texts, "</testsuite>"]
    out.append("</testsuites>")
    return out
