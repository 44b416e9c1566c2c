"""The dossier's run-time pictures from series as the samplers record them: gaps stay gaps, a CPU % above
100 widens the scale instead of being clipped, a line needs two read points, and a pool's queue percentiles
are nearest-rank over every wait (the browser tests print them: tests/test_dossier_browser.py)."""

from __future__ import annotations

from typing import Any

from pytest_hetero.reporting.dossier_charts import BARS, HEIGHT, LEFT, TOP, queue_charts, usage_charts
from pytest_hetero.reporting.dossier_text import Text


def charts_of(series: dict[str, list[Any]], available: bool = True) -> list[dict[str, Any]]:
    """The charts of one model run whose sampler (NVML's shape) recorded one device with ``series``."""
    usage = {"source": "nvml", "scope": "GPU 0", "interval_s": 1.0, "available": available, "samples": 4,
             "unavailable": None if available else "nvidia-smi not found in the image",
             "devices": [{"id": "0", "name": "NVIDIA H200", "series": series}]}
    return list(usage_charts(Text("en"), [("gpu::img::m@d::model", usage)])["charts"])


def test_a_gap_splits_the_line_and_no_value_is_drawn_as_zero() -> None:
    [memory, util] = charts_of({"t_s": [0.0, 1.0, 2.0, 3.0, 4.0], "memory_used_mib": [100, 200, None, 300, 400],
                                "utilisation_pct": [None, 50, 60, None, 70]})
    assert (memory["kind"], memory["points"], len(memory["segments"])) == ("memory", 4, 2)
    assert [len(s.split()) for s in memory["segments"]] == [2, 2]
    assert round(memory["y_max"], 6) == 440.0 and memory["y_top"] == "440 MiB"
    # util: 3 read points, one lone point after the gap cannot be a line, so one segment of 2 is drawn
    assert (util["points"], [len(s.split()) for s in util["segments"]]) == (3, [2])
    assert util["caption"] == "Utilisation over the run: gpu::img::m@d::model, NVIDIA H200 (nvml, every 1 s)"
    first = memory["segments"][0].split()[0]
    assert first == f"{LEFT:.1f},{TOP + (HEIGHT - TOP - 22) * (1 - 100 / 440):.1f}"


def test_cpu_percent_above_100_widens_the_scale() -> None:
    [util] = charts_of({"t_s": [0, 1], "memory_used_mib": [None, None], "utilisation_pct": [150.0, 190.0]})
    assert (util["y_max"], util["y_top"]) == (190.0, "190 %")
    assert min(float(p.split(",")[1]) for p in util["segments"][0].split()) == TOP  # the top of the frame


def test_fewer_than_two_points_or_an_unavailable_sampler_draw_nothing() -> None:
    assert charts_of({"t_s": [0.0], "memory_used_mib": [5.0], "utilisation_pct": [1.0]}) == []
    assert charts_of({"t_s": [0, 1], "memory_used_mib": [5, 6], "utilisation_pct": [1, 2]}, available=False) == []
    assert charts_of({"t_s": [0, 1], "memory_used_mib": [float("nan"), float("inf")],
                      "utilisation_pct": ["x", True]}) == []


def test_queue_percentiles_are_nearest_rank_over_every_wait_of_the_pool() -> None:
    waits = [("gpu", f"item-{k}", float(k)) for k in range(1, 31)] + [("cpu", "c", -0.4)]
    [cpu, gpu] = queue_charts(Text("en"), waits)
    assert cpu["summary"] == "Pool cpu: 1 workload(s), wait p50 0 s, p95 0 s, max 0 s"
    assert gpu["summary"] == "Pool gpu: 30 workload(s), wait p50 15 s, p95 29 s, max 30 s"
    assert (len(gpu["bars"]), gpu["more"]) == (BARS, 30 - BARS)
    assert [b["item"] for b in gpu["bars"][:2]] == ["item-30", "item-29"]  # the longest first
