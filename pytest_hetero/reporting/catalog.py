"""The resource catalogue (``hetero catalog``): per pool what signed bundles say it is validated for.

Input: the dicts of :func:`pytest_hetero.bundle.vsa.load_status` (one per bundle). When several bundles
hold the same pool (matrix/pool), the one verified last is current and the others are counted as
superseded. Output: :func:`catalog_rows` (JSON-ready) and :func:`catalog_text` (Markdown).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pytest_hetero.status.compute import expired, parse_time


def catalog_rows(statuses: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """One row per pool: ``{"pool": "matrix/pool", "type", "vendor", "nodes", "requests", "labels" (node
    selector), "queue", "task_types": {task: level}, "expires_at", "expired", "owners", "untested":
    [{"nodeid", "status", "reason"}], "bundle": sha256, "verification", "superseded": n}``, sorted by pool."""
    best: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    superseded: dict[str, int] = {}
    for status in statuses:
        for pool in status["validation"].get("pools") or []:
            name = f"{pool['matrix']}/{pool['pool']}"
            if name in best:
                superseded[name] = superseded.get(name, 0) + 1
                if parse_time(best[name][1]["verified_at"]) >= parse_time(pool["verified_at"]):
                    continue
            best[name] = (status, pool)
    rows = []
    for name, (status, pool) in sorted(best.items()):
        rows.append({
            "pool": name, "type": pool["type"], "vendor": pool["vendor"], "nodes": list(pool["nodes"]),
            "requests": pool["requests"], "labels": pool["node_selector"], "queue": pool["queue"],
            "task_types": {t: e["level"] for t, e in sorted(pool["task_types"].items())},
            "expires_at": pool["expires_at"], "expired": expired(pool, now), "owners": pool["owners"],
            "untested": [{k: e.get(k) for k in ("nodeid", "status", "reason")}
                         for e in status["untested"].get(pool["pool"], [])],
            "bundle": status["digest"], "verification": status["verification"],
            "superseded": superseded.get(name, 0)})
    return rows


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        value = ", ".join(f"{k}={v}" for k, v in value.items())
    elif isinstance(value, list):
        value = ", ".join(str(v) for v in value)
    return (str(value) if value not in (None, "") else "-").replace("|", "\\|")


def catalog_text(rows: list[dict[str, Any]]) -> str:
    """The catalogue as a Markdown table, then per pool what is untested (at most 5 entries each)."""
    lines = ["| pool | type | nodes | requestable | labels | queue | validated (task type: level) | expires | "
             "owners | untested | bundle |", "|" + "---|" * 11]
    for r in rows:
        levels = ", ".join(f"{t}: {lv}" for t, lv in r["task_types"].items())
        expiry = r["expires_at"] + (" (EXPIRED)" if r["expired"] else "")
        owners = ", ".join(f"{k}: {v}" for k, v in r["owners"].items())
        lines.append("| " + " | ".join(_cell(v) for v in (
            r["pool"], f"{r['type']}/{r['vendor']}", r["nodes"] or "this host", r["requests"], r["labels"],
            r["queue"], levels, expiry, owners, len(r["untested"]),
            f"sha256:{r['bundle'][:16]}… ({r['verification']})")) + " |")
    for r in rows:
        if r["untested"]:
            lines.append(f"\nuntested in {r['pool']}:")
            lines += [f"- {e['nodeid']}: {e['status']} ({e['reason']})" for e in r["untested"][:5]]
            if len(r["untested"]) > 5:
                lines.append(f"- … and {len(r['untested']) - 5} more")
    return "\n".join(lines)
