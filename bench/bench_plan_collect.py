"""Benchmark: ``hetero plan`` and pytest collection of a 20 × 20 × 20 × 10 matrix (80,000 combinations
before exclusions) against plain pytest collecting the same number of parametrised items from one
test function, in the same environment.

Each measurement runs in a fresh subprocess; time is wall seconds until collection finished (the
run stops there, before any bundle is written), memory is that process's peak RSS
(VmHWM of the image after exec, KiB: ``ru_maxrss`` would carry this larger parent's high-water mark
across fork and exec). Prints one JSON line per measurement and the ratios; target ≤ 1.5×
time and ≤ 2× memory, quoted as medians over the interleaved rounds with their spread.
Usage: ``python bench/bench_plan_collect.py [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SHA = "0" * 64
PROBE = r"""
import json, os, sys, time
started = time.perf_counter()
mode, target = sys.argv[1], sys.argv[2]
def report(items):
    hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(json.dumps({"mode": mode, "seconds": round(time.perf_counter() - started, 3), "items": items,
                      "peak_rss_kib": hwm}), flush=True)
    os._exit(0)
if mode == "plan":
    import io
    from pytest_hetero.cli import main
    sys.stdout, real = io.StringIO(), sys.stdout
    main(["plan", target, "--json"])
    text, sys.stdout = sys.stdout.getvalue(), real
    report(json.loads(text)["planned"])
import pytest
class Stop:
    def pytest_collection_finish(self, session):
        report(len(session.items))
pytest.main([target, "--collect-only", "-p", "no:cacheprovider", "-p", "no:terminal"], plugins=[Stop()])
"""


def matrix_doc(resources: int = 20, images: int = 20, models: int = 20, datasets: int = 10) -> dict[str, Any]:
    """The benchmark matrix; one exclude rule (image 0 on resource 0) so exclusions are exercised."""
    return {"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": "bench"},
            "spec": {"target": {"backend": "local"},
                     "resources": [{"name": f"r{i}", "type": "cpu", "requests": {"cpu": 1}} for i in range(resources)],
                     "images": [{"name": f"i{i}", "reference": "python:current"} for i in range(images)],
                     "models": [{"name": f"m{i}", "version": "1", "uri": f"m{i}.onnx", "sha256": SHA,
                                 "entrypoint": ["{python}", "run.py"]} for i in range(models)],
                     "datasets": [{"name": f"d{i}", "version": "1", "uri": f"d{i}.csv", "sha256": SHA}
                                  for i in range(datasets)],
                     "exclude": [{"resource": "r0", "image": "i0", "reason": "benchmark exclusion"}]}}


def measure(mode: str, target: Path, cwd: Path) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter; return its JSON line as a dict."""
    out = subprocess.run([sys.executable, "-c", PROBE, mode, str(target)], cwd=cwd, capture_output=True,
                         text=True, check=False, timeout=1800)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"{mode} produced no result:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return dict(json.loads(lines[-1]))


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The rounds of one mode as medians with their spread: ``seconds`` and ``peak_rss_kib`` are the medians
    (wall seconds, KiB), ``seconds_range`` and ``peak_rss_range`` the (min, max) over the rounds; ``items`` as
    counted (every round collects the same number, checked by the caller)."""
    secs = [float(r["seconds"]) for r in runs]
    rss = [int(r["peak_rss_kib"]) for r in runs]
    return {"mode": runs[0]["mode"], "items": runs[0]["items"], "rounds": len(runs),
            "seconds": statistics.median(secs), "seconds_range": (min(secs), max(secs)),
            "peak_rss_kib": statistics.median(rss), "peak_rss_range": (min(rss), max(rss))}


def main() -> int:
    """Build the files in a temporary folder, measure each mode, print results and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        matrix = root / "bench.matrix.yaml"
        matrix.write_text(json.dumps(matrix_doc()), encoding="utf-8")
        from pytest_hetero.matrix.expand import expand
        from pytest_hetero.matrix.load import load_matrix

        n = len(expand(load_matrix(matrix)).items)
        plain = root / "test_plain.py"
        plain.write_text(f"import pytest\n\n@pytest.mark.parametrize('i', range({n}))\n"
                         "def test_item(i):\n    pass\n", encoding="utf-8")
        runs: dict[str, list[dict[str, Any]]] = {"plan": [], "collect": [], "plain": []}
        for _ in range(args.repeat):  # interleaved, so a busy machine slows every mode alike
            for mode, target in (("plain", plain), ("collect", matrix), ("plan", matrix)):
                runs[mode].append(measure(mode, target, root))
        results = {mode: median_of(r) for mode, r in runs.items()}
        assert results["collect"]["items"] == results["plain"]["items"] == results["plan"]["items"] == n
    for r in results.values():
        print(json.dumps(r))
    base = results["plain"]
    for mode in ("plan", "collect"):
        r = results[mode]
        lo, hi = r["seconds_range"]
        blo, bhi = base["seconds_range"]
        print(f"{mode:8} {r['items']} items, medians of {r['rounds']} rounds: time "
              f"{r['seconds'] / base['seconds']:.2f}× ({r['seconds']:.2f} s, {lo:.2f}-{hi:.2f}, vs "
              f"{base['seconds']:.2f} s, {blo:.2f}-{bhi:.2f}), peak memory "
              f"{r['peak_rss_kib'] / base['peak_rss_kib']:.2f}× ({r['peak_rss_kib'] / 1024:.0f} MiB vs "
              f"{base['peak_rss_kib'] / 1024:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
