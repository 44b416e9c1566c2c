"""The dossier benchmark runs end to end on a small synthetic run and prints its ratio and the heat-map sizes."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_dossier.py"


def test_bench_prints_the_ratio_and_heatmap_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_dossier", BENCH)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    evidence = bench.synthetic_evidence(500)
    assert len(evidence["items"]) == 500 and evidence["summary"]["verdict"] == "fail"
    code = bench.main(["--items", "2000", "--rounds", "1", "--heatmap-sizes", "2000"])
    out = capsys.readouterr().out
    assert re.search(r"^ratio dossier_time: \d+\.\d\dx \(target <= 3x\) (ok|MISSED)$", out, re.MULTILINE)
    assert re.search(r"^report\.html at 2000 items: \d+\.\d\d MB, 2 grid cells, rendered in \d+\.\d\d s", out,
                     re.MULTILINE)
    assert code == (1 if "MISSED" in out else 0)
