"""JUnit XML (``junit.xml``) valid against the Jenkins xunit ``junit-10.xsd`` schema, via junitparser.

One ``<testsuite>`` per layer (name ``hetero.<layer>``, suite properties: run id, verdict,
matrices) and one ``<testcase>`` per item (reported or untested): ``classname`` is
``hetero.<layer>``, ``name`` the node id, ``time`` seconds, ``status`` our status.
failed → ``<failure type=category>``, error → ``<error>``, every untested status (blocked,
not_applicable, excluded, skipped, deselected, not_run) → ``<skipped message="status: reason">``.

junit-10.xsd has no per-testcase ``<properties>``, so each testcase's properties (layer,
dimension keys, owner, status, evidence path, blocked_by) are written to its ``<system-out>``
as ``[[PROPERTY|name=value]]`` lines, the convention Jenkins/Testmo-style readers understand.
"""

from __future__ import annotations

import re
from typing import Any

import junitparser.junitparser as _junitparser
from junitparser import JUnitXml, TestCase, TestSuite

from pytest_hetero import LAYERS
from pytest_hetero.evidence.model import UNTESTED_STATUSES
from pytest_hetero.reporting.view import entries

etree: Any = getattr(_junitparser, "etree")  # noqa: B009 - the ElementTree junitparser itself uses (lxml if present)


def _properties(entry: dict[str, Any]) -> list[tuple[str, str]]:
    props = [("layer", entry["layer"])]
    props += [(dim, str(value)) for dim, value in sorted(entry.get("keys", {}).items())]
    props += [("owner", str(entry.get("owner") or "")), ("status", entry["status"]),
              ("evidence", f"evidence.json#{entry['nodeid']}")]
    if entry.get("blocked_by"):
        props.append(("blocked_by", entry["blocked_by"]))
    props += [("artifact", a["path"]) for a in entry.get("artifacts", [])]
    return props


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: str) -> str:
    """Drop characters XML 1.0 cannot carry (NUL, escape codes…)."""
    return _CONTROL.sub("", text)


def render_junit(evidence: dict[str, Any]) -> bytes:
    """Return the JUnit XML document as UTF-8 bytes (with XML declaration)."""
    root: Any = JUnitXml(f"pytest-hetero {evidence['run'].get('id', '')}")
    suites: dict[str, Any] = {}
    for layer in LAYERS:
        suite = TestSuite(f"hetero.{layer}")
        suite.add_property("run_id", str(evidence["run"].get("id", "")))
        suite.add_property("verdict", evidence["summary"]["verdict"])
        suite.add_property("matrices", ",".join(m["name"] for m in evidence["matrices"]))
        suites[layer] = suite
    counts: dict[str, dict[str, int]] = {}
    times: dict[str, float] = {}
    for entry in entries(evidence):
        layer, status = entry["layer"], entry["status"]
        duration = float(entry.get("duration_s") or 0.0)
        case = etree.Element("testcase", {"name": entry["nodeid"], "classname": f"hetero.{layer}",
                                          "time": str(duration), "status": status})
        failure = entry.get("failure") or {}
        message = _clean(str(failure.get("message") or entry.get("reason") or ""))
        tally = counts.setdefault(layer, {"tests": 0, "failures": 0, "errors": 0, "skipped": 0})
        tally["tests"] += 1
        times[layer] = times.get(layer, 0.0) + duration
        # children in schema order: result, then system-out
        if status == "failed":
            etree.SubElement(case, "failure", {"message": message[:2000],
                                               "type": str(failure.get("category", "failed"))})
            tally["failures"] += 1
        elif status == "error":
            etree.SubElement(case, "error", {"message": message[:2000], "type": str(failure.get("category", "error"))})
            tally["errors"] += 1
        elif status in UNTESTED_STATUSES:
            etree.SubElement(case, "skipped", {"message": _clean(f"{status}: {entry.get('reason') or ''}")[:2000]})
            tally["skipped"] += 1
        out = etree.SubElement(case, "system-out")
        out.text = _clean("\n".join(f"[[PROPERTY|{k}={v}]]" for k, v in _properties(entry)))
        # elements built directly and wrapped (TestCase.fromelem): junitparser's per-attribute
        # descriptors, and add_testcase's recount of the whole suite, are too slow for 50,000 items
        suites.setdefault(layer, TestSuite(f"hetero.{layer}")).append(TestCase.fromelem(case))  # type: ignore[no-untyped-call]
    for layer, suite in suites.items():
        tally = counts.get(layer, {"tests": 0, "failures": 0, "errors": 0, "skipped": 0})
        suite.tests, suite.failures = tally["tests"], tally["failures"]
        suite.errors, suite.skipped = tally["errors"], tally["skipped"]
        suite.time = round(times.get(layer, 0.0), 3)
        root.append(suite)
    root.tests = sum(c["tests"] for c in counts.values())
    root.failures = sum(c["failures"] for c in counts.values())
    root.errors = sum(c["errors"] for c in counts.values())
    root.time = round(sum(times.values()), 3)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + bytes(root.tostring())
