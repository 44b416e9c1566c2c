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

from junitparser import Attr, Error, Failure, JUnitXml, Skipped, SystemOut, TestCase, TestSuite

from pytest_hetero import LAYERS
from pytest_hetero.evidence.model import UNTESTED_STATUSES
from pytest_hetero.reporting.view import entries


class _Case(TestCase):
    status = Attr()


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
    root = JUnitXml(f"pytest-hetero {evidence['run'].get('id', '')}")
    suites = {}
    for layer in LAYERS:
        suite = TestSuite(f"hetero.{layer}")
        suite.add_property("run_id", str(evidence["run"].get("id", "")))
        suite.add_property("verdict", evidence["summary"]["verdict"])
        suite.add_property("matrices", ",".join(m["name"] for m in evidence["matrices"]))
        suites[layer] = suite
    stats = {layer: {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0} for layer in suites}
    for entry in entries(evidence):
        case = _Case(entry["nodeid"], f"hetero.{entry['layer']}", float(entry.get("duration_s") or 0.0))
        case.status = entry["status"]
        failure = entry.get("failure") or {}
        message = _clean(str(failure.get("message") or entry.get("reason") or ""))
        counts = stats.setdefault(entry["layer"], {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0})
        counts["tests"] += 1
        counts["time"] += float(entry.get("duration_s") or 0.0)
        if entry["status"] == "failed":
            case.append(Failure(message[:2000], str(failure.get("category", "failed"))))
            counts["failures"] += 1
        elif entry["status"] == "error":
            case.append(Error(message[:2000], str(failure.get("category", "error"))))
            counts["errors"] += 1
        elif entry["status"] in UNTESTED_STATUSES:
            case.append(Skipped(_clean(f"{entry['status']}: {entry.get('reason') or ''}")[:2000]))
            counts["skipped"] += 1
        # append in schema order (result, then system-out); the property setters search children first
        case.append(SystemOut(_clean("\n".join(f"[[PROPERTY|{k}={v}]]" for k, v in _properties(entry)))))
        # append, not add_testcase: junitparser recounts the whole suite on every add (quadratic)
        suites.setdefault(entry["layer"], TestSuite(f"hetero.{entry['layer']}")).append(case)
    for layer, suite in suites.items():
        counts = stats[layer]
        suite.tests, suite.failures, suite.errors, suite.skipped = (counts["tests"], counts["failures"],
                                                                    counts["errors"], counts["skipped"])
        suite.time = round(counts["time"], 3)
        root.append(suite)
    root.tests = sum(c["tests"] for c in stats.values())
    root.failures = sum(c["failures"] for c in stats.values())
    root.errors = sum(c["errors"] for c in stats.values())
    root.time = round(sum(c["time"] for c in stats.values()), 3)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + root.tostring()
