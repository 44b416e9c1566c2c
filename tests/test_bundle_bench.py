"""The bundle benchmark runs end to end on a small synthetic run and reports every ratio."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_bundle.py"


def test_bench_reports_all_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_bundle", BENCH)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    items = bench.synthetic_items(300)
    assert len(items) == 300 and len({i["nodeid"] for i in items}) == 300
    code = bench.main(["--items", "300", "--repeat", "1"])
    out = capsys.readouterr().out
    names = re.findall(r"^ratio (\w+): \d+\.\d\dx \(target <= \dx\) (?:ok|MISSED)$", out, re.MULTILINE)
    assert names == ["bundle_time", "bundle_memory", "verify_time", "verify_memory"]
    assert code == (1 if "MISSED" in out else 0)
