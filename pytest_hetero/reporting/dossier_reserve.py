"""The dossier's account of each reserved-inference probe: the floor it was held to and the burst's timeline.

Per probe item (``reserve.*`` records of :mod:`pytest_hetero.layers.reserved`): one line of what was set up
(serving PriorityClass and value, replicas and floor, burst PriorityClass and pods), the load windows (phase,
seconds since the burst started, serving pods Ready, requests answered, p95) and the timeline of what happened
to the pods from the burst's start (preemptions, kills, deletions, readiness changes, Pending burst pods),
capped at :data:`TIMELINE_ROWS` rows. Plain data for ``templates/dossier.html.j2``; it renders nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from pytest_hetero.evidence.records import RESERVE_BURST, RESERVE_SERVING, RESERVE_TIMELINE, RESERVE_WINDOW
from pytest_hetero.reporting.dossier_facts import Facts, cut, number, short
from pytest_hetero.reporting.dossier_text import Text

if TYPE_CHECKING:
    from pytest_hetero.evidence.records import ClassRef

TIMELINE_ROWS = 40
SHOWN = frozenset({"Preempted", "Killing", "Evicted", "TaintManagerEviction", "deleting", "gone", "ready", "not-ready",
                   "unschedulable", "nominated", "scheduled"})
"""What of the timeline the dossier shows (the rest stays in evidence.json)."""


class WindowRow(TypedDict):
    """One load window: its phase, span (seconds since the burst started), serving pods Ready at least, requests
    answered of sent, p95 in ms ("–" when none answered)."""

    phase: str | None
    span: str
    ready: int | None
    answered: str
    p95: str


class TimelineRow(TypedDict):
    """One thing that happened to a pod: when (seconds since the burst started, ``±1`` at a whole-second
    resolution), the pod, its role, what and the detail."""

    at: str
    pod: str
    role: str
    what: str
    detail: str


class Reserved(TypedDict):
    """One reserved-inference probe item's account."""

    item: str
    status: str
    status_text: str
    setup: str
    windows: list[WindowRow]
    timeline: list[TimelineRow]
    more: int


def _cls(value: ClassRef | None, t: Text) -> str:
    if not value:
        return t("rsv.no_class")
    return f"{value['name']} ({value['value']})"


def reserved(f: Facts, t: Text) -> list[Reserved]:
    """``[{"item", "status", "setup" (one line), "windows": [rows], "timeline": [rows], "more"}]``, one per
    reserved-inference probe item that recorded its serving Deployment."""
    out: list[Reserved] = []
    for item in f.with_kind["reserve.serving"]:
        serving, burst = f.first(item, RESERVE_SERVING), f.first(item, RESERVE_BURST)
        if serving is None:  # with_kind holds only items with such a record
            continue
        setup = t("rsv.setup", cls=_cls(serving["priority_class"], t), replicas=serving["replicas"],
                  floor=serving["min_ready"], burst_cls=_cls(burst["priority_class"], t) if burst else _cls(None, t),
                  pods=burst["requested"] if burst else None)
        windows: list[WindowRow] = [
            {"phase": w["phase"], "span": f"{number(w['from_s'], 1)} – {number(w['to_s'], 1)}",
             "ready": w["ready_min"], "answered": f"{w['ok']}/{w['requests']}",
             "p95": number(w["p95_ms"], 1) if w["p95_ms"] is not None else "–"}
            for w in f.all(item, RESERVE_WINDOW)]
        entries = [e for r in f.all(item, RESERVE_TIMELINE) for e in r["entries"]
                   if e["what"] in SHOWN and (e["at_s"] or 0) >= 0]
        rows: list[TimelineRow] = [{"at": number(e["at_s"], 3) + (" ±1" if e.get("resolution_s", 0) >= 1 else ""),
                 "pod": str(e["pod"]), "role": str(e["role"]), "what": str(e["what"]),
                 "detail": cut((f"→ {e['by']} " if e.get("by") else "") + str(e["message"] or ""), 140)}
                for e in entries]
        out.append({"item": short(item["nodeid"]), "status": item["status"], "status_text": t.status(item["status"]),
                    "setup": setup, "windows": windows, "timeline": rows[:TIMELINE_ROWS],
                    "more": max(0, len(rows) - TIMELINE_ROWS)})
    return out
