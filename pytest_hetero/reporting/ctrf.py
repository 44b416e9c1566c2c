"""CTRF JSON (Common Test Report Format, spec 1.0.0) for dashboards: ``ctrf.json``.

``{"reportFormat": "CTRF", "specVersion": "1.0.0", "results": {"tool", "summary", "tests",
"environment", "extra"}}``. CTRF statuses are passed, failed, skipped, pending, other:
error → failed (``rawStatus`` keeps ours), untested statuses → skipped, not_run → pending.
``name`` is the node id (the key of the item in evidence.json), ``suite`` ``hetero.<layer>``,
``tags`` the layer and ``dimension=value`` pairs; ``extra`` has owner and blocked_by.
Durations are milliseconds; the summary's ``start``/``stop`` are Unix epoch milliseconds (per-test
start/stop are left out: evidence.json has each item's ISO times).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pytest_hetero.reporting.view import entries

_CTRF_STATUS = {"passed": "passed", "failed": "failed", "error": "failed", "not_run": "pending",
                "blocked": "skipped", "not_applicable": "skipped", "skipped": "skipped", "excluded": "skipped",
                "deselected": "skipped"}


def _epoch_ms(stamp: str | None) -> int:
    if not stamp:
        return 0
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)


def render_ctrf(evidence: dict[str, Any]) -> dict[str, Any]:
    """Return the CTRF document as a JSON-ready dict whose key order is deterministic (every dict
    is built in a fixed order), so it can be serialised without ``sort_keys``."""
    run = evidence["run"]
    tests = []
    summary = {"tests": 0, "passed": 0, "failed": 0, "pending": 0, "skipped": 0, "other": 0}
    for entry in entries(evidence):
        status = _CTRF_STATUS.get(entry["status"], "other")
        summary["tests"] += 1
        summary[status] += 1
        failure = entry.get("failure") or {}
        test: dict[str, Any] = {
            "name": entry["nodeid"], "status": status, "rawStatus": entry["status"],
            "duration": round(float(entry.get("duration_s") or 0) * 1000),
            "suite": f"hetero.{entry['layer']}",
            "tags": [entry["layer"], *[f"{k}={v}" for k, v in sorted(entry.get("keys", {}).items())]],
            "extra": {"owner": entry.get("owner"), "blocked_by": entry.get("blocked_by")},
        }
        if failure:
            test["message"] = failure.get("message", "")
            test["extra"]["category"] = failure.get("category")
        elif entry.get("reason"):
            test["message"] = entry["reason"]
        if entry.get("artifacts"):
            test["attachments"] = [{"name": a["name"], "contentType": a.get("media_type", "text/plain"),
                                    "path": a["path"]} for a in entry["artifacts"]]
        tests.append(test)
    summary["start"] = _epoch_ms(run.get("started_at"))
    summary["stop"] = _epoch_ms(run.get("finished_at")) or summary["start"]
    return {"reportFormat": "CTRF", "specVersion": "1.0.0",
            "results": {"tool": {"name": "pytest-hetero", "version": run.get("tool_version")},
                        "summary": summary, "tests": tests,
                        "environment": {"appName": ",".join(m["name"] for m in evidence["matrices"]),
                                        "buildName": run.get("id"),
                                        # canonical key order, so a re-render from evidence.json is identical
                                        "extra": {"target": json.loads(json.dumps(evidence["target"],
                                                                                  sort_keys=True))}},
                        "extra": {"verdict": evidence["summary"]["verdict"], "run_id": run.get("id")}}}
