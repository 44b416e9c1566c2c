"""The dossier's pictures of run-time evidence: memory and utilisation over each model run, and the queue
wait of each pool.

Only numbers the gate recorded are drawn: the ``series`` of a ``model.usage`` / ``serving.usage`` record
(:meth:`pytest_hetero.probes.usage.Sampler.result`: ``t_s`` seconds since sampling began, ``memory_used_mib``,
``utilisation_pct``; a sample no reading could fill is None and leaves a gap, never a zero) and the waits of
the queue table (submitted → started, from ``scheduling.submitted`` and the startup item's pod statuses).
A series with fewer than two read points is not drawn (a line needs two), and the table beside it still
says what was read. The shapes are plain data: the template draws them as inline SVG (text the PDF keeps
selectable), so every value passes through the template's escaping.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pytest_hetero.reporting.dossier_facts import number
from pytest_hetero.reporting.dossier_text import Text

if TYPE_CHECKING:
    from pytest_hetero.evidence.queue_times import PoolQueue, SpanStats
    from pytest_hetero.evidence.records import UsageData

WIDTH, HEIGHT = 320, 120
"""The drawing area of one chart, in SVG user units (CSS pixels at 100 %)."""
LEFT, RIGHT, TOP, BOTTOM = 66, 8, 10, 22
"""Margins of the plotted area inside a chart: the y labels sit left of it, the x labels below it."""
CHARTS = 12
"""At most this many usage charts are drawn; the rest are counted (their numbers stay in evidence.json)."""


class Frame(TypedDict):
    """The plotted area's corners, in SVG user units."""

    x0: int
    x1: int
    y0: int
    y1: int


class Line(TypedDict):
    """A scaled polyline: ``segments`` (SVG points strings, one per unbroken run), the number of read
    points, the x and y the area spans, the drawing's size and its plotted area."""

    segments: list[str]
    points: int
    x_max: float
    y_max: float
    width: int
    height: int
    frame: Frame


class Chart(Line):
    """A usage chart: its line, what it shows (``memory`` or ``util``), the caption and the axis labels."""

    kind: str
    caption: str
    y_top: str
    y_bottom: str
    x_end: str


class UsageCharts(TypedDict):
    """At most :data:`CHARTS` charts; ``more`` counts the rest."""

    charts: list[Chart]
    more: int


class Bar(TypedDict):
    """One bar of a pool's queue chart."""

    item: str
    label: str
    y: int
    width: float


class QueueChart(TypedDict):
    """A pool's queue and placement spans as bars."""

    pool: str
    summary: str
    bars: list[Bar]
    height: int
    width: int
    left: int


def usage_charts(t: Text, records: Iterable[tuple[str, UsageData]]) -> UsageCharts:
    """``{"charts": [chart], "more": n}`` for ``records``: ``(item id, usage data)`` of the model runs in the
    order the dossier lists them. Per sampled device of an available record, one chart of memory used (MiB)
    and one of utilisation (%) over the run. A chart: ``{"kind": "memory"|"util", "caption", "segments": [SVG
    points string], "points": n, "y_max", "x_max", "y_top", "y_bottom", "x_end", "width", "height",
    "frame": {"x0", "x1", "y0", "y1"}}``."""
    charts: list[Chart] = []
    for item, data in records:
        if not data["available"]:
            continue
        for dev in data["devices"]:
            series = dev["series"]
            times = series["t_s"]
            where = {"item": item, "device": str(dev["name"] or dev["id"]),
                     "source": str(data["source"]), "interval": number(data["interval_s"])}
            shown: tuple[tuple[str, list[float | None], float | None], ...] = (
                ("memory", series["memory_used_mib"], None), ("util", series["utilisation_pct"], 100.0))
            for what, values, top in shown:
                line = _line(times, values, top)
                if line is not None:
                    charts.append({**line, "kind": what, "caption": t(f"chart.{what}", **where),
                                   "y_top": t(f"chart.{what}_unit", value=number(line["y_max"], 0)),
                                   "y_bottom": t(f"chart.{what}_unit", value="0"),
                                   "x_end": t("chart.seconds", value=number(line["x_max"], 1))})
    return {"charts": charts[:CHARTS], "more": max(0, len(charts) - CHARTS)}


def _line(times: Sequence[Any], values: Sequence[Any], top: float | None) -> Line | None:
    """Scaled polyline segments of ``values`` over ``times`` (a None value or time breaks the line), y from 0
    to at least ``top`` (utilisation: 100 %, higher when a multi-core CPU % went above it), else 10 % above the
    highest value; None when fewer than two finite points."""
    pairs = [(_finite(x), _finite(y)) for x, y in zip(times, values, strict=False)]
    read = [(x, y) for x, y in pairs if x is not None and y is not None]
    if len(read) < 2:
        return None
    x_max = max(x for x, _ in read) or 1.0
    highest = max(y for _, y in read)
    y_max = max(top, highest) if top is not None else (highest * 1.1 or 1.0)
    w, h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    segments: list[str] = []
    current: list[str] = []
    for x, y in pairs:
        if x is None or y is None:
            if len(current) > 1:
                segments.append(" ".join(current))
            current = []
            continue
        px = LEFT + w * max(0.0, x) / x_max
        py = TOP + h * (1.0 - min(max(y, 0.0), y_max) / y_max)
        current.append(f"{px:.1f},{py:.1f}")
    if len(current) > 1:
        segments.append(" ".join(current))
    return {"segments": segments, "points": len(read), "x_max": x_max, "y_max": y_max,
            "width": WIDTH, "height": HEIGHT, "frame": {"x0": LEFT, "x1": WIDTH - RIGHT, "y0": TOP,
                                                        "y1": HEIGHT - BOTTOM}}


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    out = float(value)
    return out if math.isfinite(out) else None


_DRAWN: tuple[Literal["wait_s"], Literal["start_s"]] = ("wait_s", "start_s")
"""The spans a pool's queue chart draws (the run time is not a queue's)."""


def queue_charts(t: Text, pools: dict[str, PoolQueue]) -> list[QueueChart]:
    """Per pool, its queue and placement spans as bars, from the usage ledger's ``queue.pools``
    (:func:`pytest_hetero.evidence.queue_times.queue_times`, the one place the percentiles are computed, which has
    written every :class:`~pytest_hetero.evidence.queue_times.PoolQueue` field but the spans since the section was
    added): wait (placed − submitted) and start (started − placed), each p50 / p95 / max, scaled to the pool's
    longest. Returns ``[{"pool", "summary", "bars": [{"item", "label", "y", "width"}], "height", "width", "left"}]``,
    pools in name order; a pool with neither span measured is left out (the table says why)."""
    out: list[QueueChart] = []
    for pool in sorted(pools):
        entry = pools[pool]
        measured = {span: entry.get(span) for span in _DRAWN}  # a span no workload had is absent
        shown = [(span, stat, float(stats[stat])) for span, stats in measured.items() if stats is not None
                 for stat in ("p50", "p95", "max") if _finite(stats[stat]) is not None]
        if not shown:
            continue
        longest = max(v for _, _, v in shown) or 1.0
        bar_w = WIDTH - 150 - 60  # room for the label after the longest bar
        unknown = sum(v for k, v in entry["unknown"].items() if k in ("wait_s", "start_s"))
        out.append({"pool": pool, "summary": t("chart.queue_summary", pool=pool, count=entry["workloads"],
                                                 wait=_span(t, measured["wait_s"]), start=_span(t, measured["start_s"]),
                                                 unknown=unknown),
                    "bars": [{"item": t(f"chart.{span}", stat=stat), "label": t("chart.seconds", value=number(v, 2)),
                              "y": 4 + 16 * k, "width": round(max(1.0, bar_w * v / longest), 1)}
                             for k, (span, stat, v) in enumerate(shown)],
                    "height": 8 + 16 * len(shown), "width": WIDTH, "left": 150})
    return out


def _span(t: Text, stats: SpanStats | None) -> str:
    if stats is None:
        return t("ops.not_recorded")
    return t("chart.span", count=stats["count"], p50=number(stats["p50"], 2), p95=number(stats["p95"], 2),
             max=number(stats["max"], 2))
