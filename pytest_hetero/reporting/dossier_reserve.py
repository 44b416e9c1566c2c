"""The dossier's account of each reserved-inference probe: the floor it was held to and the burst's timeline.

Per probe item (``reserve.*`` records of :mod:`pytest_hetero.layers.reserved`): one line of what was set up
(serving PriorityClass and value, replicas and floor, burst PriorityClass and pods), the load windows (phase,
seconds since the burst started, serving pods Ready, requests answered, p95) and the timeline of what happened
to the pods from the burst's start (preemptions, kills, deletions, readiness changes, Pending burst pods),
capped at :data:`TIMELINE_ROWS` rows. Plain data for ``templates/dossier.html.j2``; it renders nothing.
"""

from __future__ import annotations

from typing import Any

from pytest_hetero.reporting.dossier_facts import Facts, cut, number, short
from pytest_hetero.reporting.dossier_text import Text

TIMELINE_ROWS = 40
SHOWN = frozenset({"Preempted", "Killing", "Evicted", "TaintManagerEviction", "deleting", "gone", "ready", "not-ready",
                   "unschedulable", "nominated", "scheduled"})
"""What of the timeline the dossier shows (the rest stays in evidence.json)."""


def _cls(value: Any, t: Text) -> str:
    if not value:
        return t("rsv.no_class")
    return f"{value.get('name')} ({value.get('value')})"


def reserved(f: Facts, t: Text) -> list[dict[str, Any]]:
    """``[{"item", "status", "setup" (one line), "windows": [rows], "timeline": [rows], "more"}]``, one per
    reserved-inference probe item that recorded its serving Deployment."""
    out = []
    for item in f.with_kind["reserve.serving"]:
        serving, burst = f.first(item, "reserve.serving") or {}, f.first(item, "reserve.burst") or {}
        setup = t("rsv.setup", cls=_cls(serving.get("priority_class"), t), replicas=serving.get("replicas"),
                  floor=serving.get("min_ready"), burst_cls=_cls(burst.get("priority_class"), t),
                  pods=burst.get("requested"))
        windows = [{"phase": w.get("phase"), "span": f"{number(w.get('from_s'), 1)} – {number(w.get('to_s'), 1)}",
                    "ready": w.get("ready_min"), "answered": f"{w.get('ok')}/{w.get('requests')}",
                    "p95": number(w.get("p95_ms"), 1) if w.get("p95_ms") is not None else "–"}
                   for w in f.all(item, "reserve.window")]
        entries = [e for r in f.all(item, "reserve.timeline") for e in r.get("entries") or []
                   if e.get("what") in SHOWN and (e.get("at_s") or 0) >= 0]
        rows = [{"at": number(e.get("at_s"), 3) + (" ±1" if e.get("resolution_s", 0) >= 1 else ""),
                 "pod": str(e.get("pod")), "role": str(e.get("role")), "what": str(e.get("what")),
                 "detail": cut((f"→ {e['by']} " if e.get("by") else "") + str(e.get("message") or ""), 140)}
                for e in entries]
        out.append({"item": short(item["nodeid"]), "status": item["status"], "status_text": t.status(item["status"]),
                    "setup": setup, "windows": windows, "timeline": rows[:TIMELINE_ROWS],
                    "more": max(0, len(rows) - TIMELINE_ROWS)})
    return out
