"""The resource catalogue (``hetero catalog``): per pool what signed bundles say it is validated for.

Input: the dicts of :func:`pytest_hetero.bundle.vsa.load_status` (one per bundle). When several bundles
hold the same pool (matrix/pool), the one verified last is current and the others are counted as
superseded. Output: :func:`catalog_rows` (JSON-ready) and :func:`catalog_text` (Markdown).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict

from pytest_hetero.status.compute import expired, parse_time

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import PoolStatus
    from pytest_hetero.evidence.views import BundleStatus


class Unvalidated(TypedDict):
    """A node of a pool the run did not exercise, and why."""

    node: str | None
    reason: str | None


class UntestedRow(TypedDict):
    """An untested entry of a pool, as the catalogue lists it."""

    nodeid: str
    status: str
    reason: str


class CatalogRow(TypedDict):
    """One pool of the catalogue (see :func:`catalog_rows`)."""

    pool: str
    type: str
    vendor: str
    nodes: list[str]
    node_levels: dict[str, dict[str, str]]
    unvalidated: list[Unvalidated]
    coverage: str
    requests: dict[str, str]
    labels: dict[str, str]
    queue: str | None
    task_types: dict[str, str]
    expires_at: str
    expired: bool
    owners: dict[str, str]
    untested: list[UntestedRow]
    bundle: str
    verification: str
    superseded: int


def catalog_rows(statuses: list[BundleStatus], now: datetime) -> list[CatalogRow]:
    """One row per pool: ``{"pool": "matrix/pool", "type", "vendor", "nodes" (those the run exercised),
    "node_levels": {node: {task: level}}, "unvalidated": [{"node", "reason"}] (nodes of the pool the run did
    not exercise: this bundle validates nothing there), "coverage", "requests", "labels" (node selector),
    "queue", "task_types": {task: level} (of the pool as a whole), "expires_at", "expired", "owners",
    "untested": [{"nodeid", "status", "reason"}], "bundle": sha256, "verification", "superseded": n}``, sorted
    by pool."""
    best: dict[str, tuple[BundleStatus, PoolStatus]] = {}
    superseded: dict[str, int] = {}
    for status in statuses:
        for pool in status["validation"]["pools"]:
            name = f"{pool['matrix']}/{pool['pool']}"
            if name in best:
                superseded[name] = superseded.get(name, 0) + 1
                if parse_time(best[name][1]["verified_at"]) >= parse_time(pool["verified_at"]):
                    continue
            best[name] = (status, pool)
    rows: list[CatalogRow] = []
    for name, (status, pool) in sorted(best.items()):
        rows.append({
            "pool": name, "type": pool["type"], "vendor": pool["vendor"], "nodes": list(pool["nodes"]),
            # a node entry as the statement holds it (read with --allow-unsigned, any shape): one without its
            # levels or reason is listed without them, as before the entries were typed
            "node_levels": {str(e.get("node")): {t: v["level"] for t, v in sorted((e.get("task_types") or {}).items())}
                            for e in pool.get("node_status") or []},
            "unvalidated": [{"node": e.get("node"), "reason": e.get("reason")} for e in pool.get("unvalidated") or []],
            "coverage": pool.get("coverage", "one"),
            "requests": pool["requests"], "labels": pool["node_selector"], "queue": pool["queue"],
            "task_types": {t: e["level"] for t, e in sorted(pool["task_types"].items())},
            "expires_at": pool["expires_at"], "expired": expired(pool, now), "owners": pool["owners"],
            "untested": [{"nodeid": e["nodeid"], "status": e["status"], "reason": e["reason"]}
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


def _no_nodes(row: CatalogRow) -> str:
    """The nodes cell of a pool that exercised no node: ``none exercised`` when it has nodes (unvalidated ones) or a
    node selector (a Kubernetes pool), ``this host`` for an engine without nodes (the local host, a Docker engine)."""
    return "none exercised" if row["unvalidated"] or row["labels"] else "this host"


def catalog_text(rows: list[CatalogRow]) -> str:
    """The catalogue as a Markdown table, then per pool what is untested (at most 5 entries each)."""
    lines = ["| pool | type | nodes | requestable | labels | queue | validated (task type: level) | expires | "
             "owners | untested | bundle |", "|" + "---|" * 11]
    for r in rows:
        levels = ", ".join(f"{t}: {lv}" for t, lv in r["task_types"].items())
        expiry = r["expires_at"] + (" (EXPIRED)" if r["expired"] else "")
        owners = ", ".join(f"{k}: {v}" for k, v in r["owners"].items())
        lines.append("| " + " | ".join(_cell(v) for v in (
            r["pool"], f"{r['type']}/{r['vendor']}", r["nodes"] or _no_nodes(r), r["requests"], r["labels"],
            r["queue"], levels, expiry, owners, len(r["untested"]),
            f"sha256:{r['bundle'][:16]}… ({r['verification']})")) + " |")
    for r in rows:
        per_node = {n: lv for n, lv in r["node_levels"].items()
                    if lv != r["task_types"]}  # a node whose levels differ from the pool's
        if per_node:
            lines.append(f"\nnodes of {r['pool']} at their own level:")
            lines += [f"- {n}: " + ", ".join(f"{t}: {lv}" for t, lv in levels.items())
                      for n, levels in per_node.items()]
        if r["unvalidated"]:
            lines.append(f"\nunvalidated in {r['pool']} (not exercised by this run, coverage {r['coverage']}):")
            lines += [f"- {e['node']}: {e['reason']}" for e in r["unvalidated"][:5]]
            if len(r["unvalidated"]) > 5:
                lines.append(f"- … and {len(r['unvalidated']) - 5} more")
    for r in rows:
        if r["untested"]:
            lines.append(f"\nuntested in {r['pool']}:")
            lines += [f"- {e['nodeid']}: {e['status']} ({e['reason']})" for e in r["untested"][:5]]
            if len(r["untested"]) > 5:
                lines.append(f"- … and {len(r['untested']) - 5} more")
    return "\n".join(lines)
