"""The dossier's run-time pictures from series as the samplers record them: gaps stay gaps, a CPU % above
100 widens the scale instead of being clipped, a line needs two read points, and a pool's queue percentiles
are nearest-rank over every wait (the browser tests print them: tests/test_dossier_browser.py)."""

from __future__ import annotations

import json

from pytest_hetero.evidence.queue_times import queue_times
from pytest_hetero.evidence.records import UsageData, UsageSeries
from pytest_hetero.evidence.usage import Facts, Workload, WorkloadFacts
from pytest_hetero.reporting.dossier_charts import HEIGHT, LEFT, TOP, Chart, queue_charts, usage_charts
from pytest_hetero.reporting.dossier_text import Text


def charts_of(series: UsageSeries, available: bool = True) -> list[Chart]:
    """The charts of one model run whose sampler (NVML's shape) recorded one device with ``series``."""
    usage: UsageData = {"source": "nvml", "scope": "GPU 0", "interval_s": 1.0, "available": available, "samples": 4,
                        "started_at": None, "finished_at": None, "errors": [],
                        "unavailable": None if available else "nvidia-smi not found in the image",
                        "devices": [{"id": "0", "name": "NVIDIA H200", "series": series,  # the charts read the series
                                     "memory_total_mib": None, "memory_high_water_mib": None,
                                     "utilisation_mean_pct": None, "utilisation_max_pct": None}]}
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
    # a bundle's JSON is not checked value by value: what is not a finite number is not drawn
    assert charts_of(json.loads('{"t_s": [0, 1], "memory_used_mib": [NaN, Infinity], "utilisation_pct": ["x", true]}')) \
        == []


def test_the_queue_picture_draws_the_ledgers_percentiles_per_pool() -> None:
    """The bars and the summary are the usage ledger's figures (queue_times: the one place percentiles are
    computed), per pool: 30 GPU workloads waiting 1..30 s and starting in 2 s; one CPU workload placed within the
    second of its submission (0, the lower bound) that never started (its start span unknown, never 0)."""
    def workload(nodeid: str, submitted: float, placed: float, started: float | None = None) -> Workload:
        return Workload(Facts.of(WorkloadFacts(submitted=submitted, placed=placed, started=started)), nodeid, 0,
                        nodeid)

    workloads = {f"g{k}": workload(f"m.yaml::gpu::img::scheduling#{k}", submitted=1000.0, placed=1000.0 + k,
                                   started=1002.0 + k) for k in range(1, 31)}
    workloads["c"] = workload("m.yaml::cpu::img::scheduling", submitted=1000.4, placed=1000.0)
    pools = queue_times(workloads)["pools"]
    [cpu, gpu] = queue_charts(Text("en"), pools)
    assert cpu["summary"] == ("Pool cpu: 1 workload(s); wait 1 measured, p50 0 s, p95 0 s, max 0 s; start not "
                              "recorded; 1 span(s) without a recorded time")
    assert gpu["summary"] == ("Pool gpu: 30 workload(s); wait 30 measured, p50 15 s, p95 29 s, max 30 s; start 30 "
                              "measured, p50 2 s, p95 2 s, max 2 s; 0 span(s) without a recorded time")
    assert [(b["item"], b["label"]) for b in gpu["bars"]] == [
        ("wait p50", "15 s"), ("wait p95", "29 s"), ("wait max", "30 s"),
        ("start p50", "2 s"), ("start p95", "2 s"), ("start max", "2 s")]
    assert gpu["bars"][2]["width"] == 110.0 and gpu["bars"][0]["width"] == 55.0  # scaled to the longest
    assert queue_charts(Text("en"), {"npu": {"workloads": 2, "simulated": 0, "unknown": {"wait_s": 2}}}) == []
