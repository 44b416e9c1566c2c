"""hetero trend over signed bundles: verification first, status history, first failing night, flaky items
(status changes while inputs stay the same), metric series with their bound; text, JSON and HTML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bundle_samples import PREFIX, make_bundle, sample_evidence
from test_bundle_verify import hetero

from pytest_hetero.bundle.signing import generate_keypair
from pytest_hetero.reporting.trend import MetricTrend, bound_text, sparkline, svg_series, trend

BIZ = f"{PREFIX}::cpu-host::py-current::model-0@data-0::business"
MODEL = f"{PREFIX}::cpu-host::py-current::model-0@data-0::model"
KEY_BIZ = "example-cpu::cpu-host::py-current::model-0@data-0::business"


def night(n: int, accuracy: float, business: str = "passed", version: str = "1.0.0") -> dict[str, Any]:
    ev = sample_evidence()
    ev["run"].update(id=f"night-{n}", started_at=f"2026-11-{10 + n:02d}T02:00:00.000000Z")
    items = {i["nodeid"]: i for i in ev["items"]}
    items[MODEL]["records"].append({"kind": "model.identity", "at": "t", "data": {
        "model": "model-0", "version": version, "sha256": "d2" * 32, "dataset": "data-0", "dataset_version": "1.0.0",
        "dataset_sha256": "36" * 32}})
    biz = items[BIZ]
    biz["status"] = business
    if business == "failed":
        biz["failure"] = {"layer": "business", "category": "acceptance_failed", "owner": "business",
                          "message": "accuracy-floor: expected accuracy >= 0.95, observed 0.94"}
    biz["records"] = [{"kind": "business.rules", "at": "t", "data": {"results": [
        {"name": "accuracy-floor", "kind": "metric", "expected": "accuracy >= 0.95", "observed": accuracy,
         "verdict": "pass" if accuracy >= 0.95 else "fail", "detail": "",
         "bound": {"op": ">=", "value": 0.95, "tolerance": None}},
        {"name": "golden-samples", "kind": "golden", "expected": "10 golden samples match", "observed": "10/10 match",
         "verdict": "pass", "detail": ""}], "run": None}}]
    return ev


@pytest.fixture
def nights(tmp_path: Path) -> tuple[list[Path], Path]:
    generate_keypair(tmp_path / "k", tmp_path / "k.pub")
    plan = [(0.96, "passed", "1.0.0"), (0.94, "failed", "1.0.0"), (0.97, "passed", "1.0.0"),
            (0.93, "failed", "1.1.0"), (0.92, "failed", "1.1.0")]
    bundles = [make_bundle(tmp_path / f"b{n}", night(n, *args), tmp_path / "k") for n, args in enumerate(plan)]
    return bundles[::-1], tmp_path / "k.pub"  # any order: sorted by start time


def test_trend_history_first_failing_flaky_and_metric_series(nights: tuple[list[Path], Path], tmp_path: Path) -> None:
    bundles, pub = nights
    out = tmp_path / "trend.json"
    assert hetero("trend", *map(str, bundles), "--key", str(pub), "--format", "json", "--out", str(out)) == 0
    data = json.loads(out.read_text())
    assert [n["run"] for n in data["nights"]] == [f"night-{i}" for i in range(5)]
    assert {n["verification"] for n in data["nights"]} == {"verified"}
    items = {e["item"]: e for e in data["items"]}
    biz = items[KEY_BIZ]
    assert biz["history"] == ["passed", "failed", "passed", "failed", "failed"]
    assert (biz["first_failing"], biz["failing_since"], biz["changes"]) == (1, 3, 3)
    # passed→failed→passed with the same model and tool: flaky; the change at night 3 came with model 1.1.0
    assert (biz["flaky"], biz["flaky_changes"]) == (True, 2)
    gpu = items["example-cpu::gpu-nvidia::discovery"]
    assert (gpu["history"], gpu["first_failing"], gpu["failing_since"], gpu["flaky"]) == (["failed"] * 5, 0, 0, False)
    assert items["example-cpu::cpu-host::discovery"]["changes"] == 0
    assert data["items"][0]["failing_since"] is not None  # failing now first
    (metric,) = [m for m in data["metrics"] if m["rule"] == "accuracy-floor"]
    assert metric["series"] == [0.96, 0.94, 0.97, 0.93, 0.92] and metric["bound"]["value"] == 0.95
    assert metric["verdicts"] == ["pass", "fail", "pass", "fail", "fail"]
    assert data["summary"] == {"nights": 5, "items": 11, "failing_now": 2, "flaky": 1, "metrics": 1}


def test_trend_text_and_html(nights: tuple[list[Path], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
                             ) -> None:
    bundles, pub = nights
    assert hetero("trend", *map(str, bundles), "--key", str(pub)) == 0
    text = capsys.readouterr().out
    assert text.startswith("trend over 5 night(s): 11 items, 2 failing now, 1 flaky, 1 metric series\n")
    assert f"  [.F.FF] {KEY_BIZ}  first failed night-1; failing since night-3; 2 change(s) with the same inputs" in text
    assert "accuracy-floor: last 0.92 (bound >= 0.95)" in text
    page = tmp_path / "trend.html"
    assert hetero("trend", *map(str, bundles), "--key", str(pub), "--format", "html", "--out", str(page)) == 0
    html = page.read_text()
    assert "<script" not in html and 'class="bound"' in html and "<polyline" in html
    assert f'<tr data-item="{KEY_BIZ}">' in html and "yes (2)" in html
    # the summary's item count, not the dict's ``items`` method that ``data.summary.items`` resolves to in Jinja
    assert ('<p id="summary">11 items · <strong>2 failing now</strong> · 1 flaky (status changed while inputs '
            'were unchanged) · 1 metric series</p>') in html


def test_trend_verifies_every_bundle_first(nights: tuple[list[Path], Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    bundles, pub = nights
    evidence = bundles[2] / "evidence.json"
    evidence.write_text(evidence.read_text().replace('"passed"', '"failed"', 1))
    assert hetero("trend", *map(str, bundles), "--key", str(pub)) == 2
    err = capsys.readouterr().err
    assert "bundle does not verify" in err and str(bundles[2]) in err and "evidence.json" in err
    unsigned = make_bundle(tmp_path / "unsigned", night(9, 0.99), None)
    assert hetero("trend", str(unsigned), str(bundles[0]), "--key", str(pub)) == 2
    assert "bundle is not signed" in capsys.readouterr().err
    assert hetero("trend", str(unsigned), str(bundles[0]), "--key", str(pub), "--allow-unsigned",
                  "--format", "json") == 0
    data = json.loads(capsys.readouterr().out)
    assert [n["verification"] for n in data["nights"]] == ["verified", "unsigned"]


def test_trend_helpers() -> None:
    assert sparkline([1.0, None, 3.0, 2.0]) == "▁·█▄"
    metric: MetricTrend = {"item": "m::x", "rule": "p95", "series": [18.0], "verdicts": ["pass"], "expected": "",
                           "bound": {"op": "<=", "value": 20, "tolerance": None, "unit": "ms"}}
    assert bound_text(metric) == "<= 20 ms"
    assert bound_text({**metric, "bound": None, "expected": "p95 ≤ 20 ms"}) == "p95 ≤ 20 ms"
    assert bound_text({**metric, "bound": None}) == "?"
    svg = svg_series([0.9, 0.96], {"op": ">=", "value": 0.95, "tolerance": None})
    assert svg.count("<circle") == 2 and 'y1="' in svg
    assert trend([])["summary"] == {"nights": 0, "items": 0, "failing_now": 0, "flaky": 0, "metrics": 0}
