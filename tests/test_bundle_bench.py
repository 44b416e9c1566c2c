"""The bundle benchmark runs end to end on a small realistic run and prints every figure and ratio."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_bundle.py"


def test_bench_reports_medians_spreads_and_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_bundle", BENCH)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    code = bench.main(["--items", "90", "--models", "2", "--datasets", "2", "--rounds", "2"])
    out = capsys.readouterr().out
    assert re.search(r"^items: 94 \(2 resources; 40 model items, 120 artifacts\); bundle: ", out, re.MULTILINE)
    assert re.search(r"^in process  A json\.dumps of the evidence +cpu +\d+\.\d\d s \(\d+\.\d\d–\d+\.\d\d\)", out,
                     re.MULTILINE)
    assert re.search(r"^ratio bundle_in_process: \d+\.\d\dx json\.dumps \(median of rounds \d+\.\d\dx; reported\)$",
                     out, re.MULTILINE)
    during = re.search(r"^during the run \(not in B\): the items' JUnit and CTRF texts, cpu (\d+\.\d\d) s \((\d+) us per "
                       r"item\)$", out, re.MULTILINE)
    assert during and 0 < int(during.group(2)) < 5000  # each of the 94 items rendered once, in microseconds
    ratio = re.search(r"^ratio bundle_finish_over_floor: (\d+\.\d\d)x \(target <= 2x\) (ok|MISSED)$", out,
                      re.MULTILINE)
    assert ratio and code == (0 if ratio.group(2) == "ok" else 1)
    assert re.search(r"^ratio bundle_command: \d+\.\d\dx wall, \d+\.\d\dx peak RSS \(reported\)$", out, re.MULTILINE)
