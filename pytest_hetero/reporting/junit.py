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

from typing import Any

from junitparser import Attr, Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

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


def _clean(text: str) -> str:
    return "".join(ch for ch in text if ch in "\t\n\r" or ord(ch) >= 0x20)


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
    for entry in entries(evidence):
        case = _Case(entry["nodeid"], f"hetero.{entry['layer']}", float(entry.get("duration_s") or 0.0))
        case.status = entry["status"]
        failure = entry.get("failure") or {}
        message = _clean(str(failure.get("message") or entry.get("reason") or ""))
        if entry["status"] == "failed":
            case.result = [Failure(message[:2000], str(failure.get("category", "failed")))]
        elif entry["status"] == "error":
            case.result = [Error(message[:2000], str(failure.get("category", "error")))]
        elif entry["status"] in UNTESTED_STATUSES:
            case.result = [Skipped(_clean(f"{entry['status']}: {entry.get('reason') or ''}")[:2000])]
        case.system_out = "\n".join(_clean(f"[[PROPERTY|{k}={v}]]") for k, v in _properties(entry))
        suites.setdefault(entry["layer"], TestSuite(f"hetero.{entry['layer']}")).add_testcase(case)
    totals = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
    for suite in suites.values():
        suite.update_statistics()
        root.add_testsuite(suite)
        for key in totals:
            totals[key] += getattr(suite, key) or 0
    root.tests, root.failures, root.errors = totals["tests"], totals["failures"], totals["errors"]
    root.time = round(totals["time"], 3)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + root.tostring()
