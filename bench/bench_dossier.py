"""Benchmark: the acceptance dossier of a 20,000-item bundle against writing its evidence.json.

Baseline: ``write_evidence`` (what a run does to write evidence.json: compact JSON, temp file, rename).
Measured: ``render_dossier`` of the same evidence, written to a file (English; Chinese is the same work).
Rounds are interleaved (baseline, dossier, baseline, …) so a busy machine slows both alike; the ratio is
of the medians, with each side's spread (min–max) printed. Target: dossier ≤ 3× evidence.json.

Also printed, for the heat map: report.html's size and render time at 2,000 and 20,000 items (its
resource × image grid does not grow with model × dataset combinations).

Usage: ``python bench/bench_dossier.py [--items N] [--rounds R]``; exits 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_hetero.bundle.signoff import signoff_context
from pytest_hetero.evidence.recorder import write_evidence
from pytest_hetero.evidence.untested import DOES_NOT_PROVE, summarise
from pytest_hetero.reporting.dossier import render_dossier
from pytest_hetero.reporting.html import render_html

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import EvidenceDocument, UntestedSection
    from pytest_hetero.evidence.views import SignoffView

TARGET = 3.0
OWNERS = {"discovery": "infrastructure", "scheduling": "platform", "startup": "platform", "model": "algorithm",
          "business": "business"}


def _bench_bundle() -> Any:
    spec = importlib.util.spec_from_file_location("bench_bundle", Path(__file__).parent / "bench_bundle.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def synthetic_evidence(n: int) -> EvidenceDocument:
    """An evidence document of ``n`` items (the bundle benchmark's generator: 20 resources × 5 images ×
    model@dataset, 3 % failed, 7 % blocked) whose business items carry acceptance results."""
    items = _bench_bundle().synthetic_items(n)
    for i, item in enumerate(items):
        if item["layer"] == "business":
            ok = item["status"] == "passed"
            item["records"].append({"kind": "business.rules", "at": item["started_at"], "data": {"results": [
                {"name": "accuracy-floor", "kind": "metric", "expected": "accuracy >= 0.95",
                 "observed": 0.96 if ok else 0.91, "verdict": "pass" if ok else "fail", "detail": "",
                 "bound": {"op": ">=", "value": 0.95, "tolerance": None}},
                {"name": "latency-p95", "kind": "latency", "expected": "p95 ≤ 20 ms", "observed": 3.5 + i % 7,
                 "verdict": "pass", "detail": ""}], "run": None}})
    untested = cast("UntestedSection", {
        "items": [{k: i[k] for k in ("nodeid", "layer", "keys", "status", "reason", "blocked_by")}
                  for i in items if i["status"] == "blocked"], "never_covered": {}, "not_proven": [],
        "does_not_prove": dict(DOES_NOT_PROVE)})
    return {"schema": "pytest-hetero/evidence/v1",
            "run": {"id": "bench", "tool": "pytest-hetero", "tool_version": "0.1.0", "host": "bench",
                    "started_at": "2026-11-29T10:00:00.000000Z", "finished_at": "2026-11-29T10:10:00.000000Z",
                    "invocation": ["matrices/bench.matrix.yaml"], "profile": "nightly", "git_commit": None,
                    "python": None, "pytest": None, "rootdir": None, "backend_override": None,
                    "finished_at_recovered": False, "exit_status": None, "interrupted": False, "stopped": ""},
            "matrices": [{"name": "bench", "path": "matrices/bench.matrix.yaml", "prefix": "matrices/bench.matrix.yaml",
                          "sha256": "0" * 64}],
            "target": [{"backend": "kubernetes", "identity": "bench", "nodes": [f"node-{i}" for i in range(40)],
                        "images": {}, "versions": {"kubernetes": "v1.34.1"}}],
            "items": items, "untested": untested, "summary": summarise(items, untested), "errors": [],
            "warnings": []}


def signoff() -> SignoffView:
    """The view of a run signed with a key not checked here (each owner team pending)."""
    return signoff_context({"bench": dict(OWNERS)}, "ab" * 32, None, source="attestations")


def interleaved(steps: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[float]]:
    """Wall seconds of each step, ``rounds`` times, the steps alternating within each round."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            gc.collect()
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    return times


def heatmap_sizes(sizes: tuple[int, ...] = (2000, 20000)) -> list[str]:
    """report.html at each size: bytes and render seconds (median of 3)."""
    lines = []
    for n in sizes:
        evidence = synthetic_evidence(n)
        runs = []
        html = ""
        for _ in range(3):
            start = time.perf_counter()
            html = render_html(evidence, signoff())
            runs.append(time.perf_counter() - start)
        cells = html.count('class="gcell"')
        lines.append(f"report.html at {n} items: {len(html) / 1e6:.2f} MB, {cells} grid cells, rendered in "
                     f"{statistics.median(runs):.2f} s (median of 3)")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the ratio and the heat-map sizes; 0 when the target is met, else 1."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--heatmap-sizes", type=int, nargs="*", default=[2000, 20000])
    args = parser.parse_args(argv)
    evidence = synthetic_evidence(args.items)
    view = signoff()
    with tempfile.TemporaryDirectory(prefix="bench-dossier-") as tmp:
        folder = Path(tmp)
        out = folder / "dossier.html"
        html = render_dossier(evidence, view, "zh")  # warm the template cache, check it renders
        times = interleaved({"evidence.json": lambda: write_evidence(folder, evidence),
                             "dossier": lambda: out.write_text(render_dossier(evidence, view, "en"), encoding="utf-8")},
                            args.rounds)
        size = (folder / "evidence.json").stat().st_size
    base, dossier = statistics.median(times["evidence.json"]), statistics.median(times["dossier"])
    ratio = dossier / base
    print(f"{args.items} items: evidence.json {size / 1e6:.1f} MB written in {base:.3f} s "
          f"({min(times['evidence.json']):.3f}–{max(times['evidence.json']):.3f}); dossier {len(html) / 1e6:.2f} MB "
          f"rendered in {dossier:.3f} s ({min(times['dossier']):.3f}–{max(times['dossier']):.3f}); "
          f"{args.rounds} interleaved rounds, medians")
    print(f"ratio dossier_time: {ratio:.2f}x (target <= {TARGET:g}x) {'ok' if ratio <= TARGET else 'MISSED'}")
    for line in heatmap_sizes(tuple(args.heatmap_sizes)):
        print(line)
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
