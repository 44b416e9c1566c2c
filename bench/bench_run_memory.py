"""Benchmark: peak memory of a whole local run as its item count grows (issue 20 item 3).

A matrix of 1 resource × 1 image × M models × 1 dataset on the local backend: every model prints
``--kib`` KiB of output (kept in evidence, head and tail, as a real model's logs are) and writes an
outputs file, so each model item's evidence is tens of KB like a real one. The whole command
``python -m pytest MATRIX`` runs at two sizes; its peak RSS (VmHWM of the pytest process, written at
exit) and wall time are measured, interleaved with the same run by another checkout of the gate
(``--baseline-path``, e.g. the main branch) when given. Two peaks: while items ran (VmHWM when
session finish starts) and over the whole run. The slope, KB of peak RSS per item between the two
sizes, is what must stay flat while items run: the evidence of a finished item is in the journal, so
the run should not hold it too.

The baseline of the slope is plain parametrised pytest (``--no-plain`` leaves it out): one test per
model running the same program with ``subprocess.run`` (output captured and checked, the outputs file
read back), measured the same way in the same interleaved rounds; ``ratio run_memory_slope_vs_plain`` is
the gate's KB per item while items ran over plain pytest's, per model item (the gate has two items per
model, plain pytest one).

The finish no longer holds the evidence document's items: assembly keeps them in a spool file on disk
(:mod:`pytest_hetero.evidence.spool`) and every writer reads them back one at a time, so the whole run's
slope is what items leave while they run plus the finish's per-item residue (untested entries, the renderings'
per-item lines: junit.xml's and ctrf.json's text).

Usage: ``python bench/bench_run_memory.py [--sizes 100 400] [--kib 16] [--rounds 2]
[--baseline-path /work/main] [--no-plain]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DIGITS = REPO / "cases" / "digits"
PEAK_PLUGIN = '''
import atexit
import pytest


def _peak(name):
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            with open(name, "w") as fh:
                fh.write(line.split()[1])


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    _peak("run_peak.txt")  # every item ran and was journaled; the bundle is not assembled yet


atexit.register(_peak, "peak.txt")
'''


def write_matrix(folder: Path, models: int, kib: int) -> Path:
    """A matrix of ``models`` quick models that print ``kib`` KiB and write an outputs file."""
    import hashlib

    model = DIGITS / "model" / "digits-logreg-1.0.0.onnx"
    data = DIGITS / "data" / "digits-test-1.0.0.csv"
    code = model_code(kib)
    spec = {"target": {"backend": "local"}, "layers": {"model": {"timeout": "2m"}},
            "resources": [{"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}],
            "images": [{"name": "py", "reference": "python:current"}],
            "models": [{"name": f"m{n}", "version": "1", "uri": str(model),
                        "sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
                        "entrypoint": ["{python}", "-c", code, "{outputs}"]} for n in range(models)],
            "datasets": [{"name": "d", "version": "1", "uri": str(data), "acceptance": "acceptance.yaml",
                          "sha256": hashlib.sha256(data.read_bytes()).hexdigest()}]}
    # every business item passes, as in a healthy run (without rules each one failed: no_rules)
    (folder / "acceptance.yaml").write_text(json.dumps({
        "apiVersion": "pytest-hetero/v1", "kind": "AcceptanceRules",
        "rules": [{"name": "accuracy-floor", "metric": "accuracy", "op": ">=", "value": 0.9}]}))
    path = folder / "mem.matrix.yaml"
    path.write_text(json.dumps({"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix",
                                "metadata": {"name": "mem"}, "spec": spec}))
    return path


PLAIN = '''
import json, os, subprocess, sys, tempfile
import pytest


@pytest.mark.parametrize("n", range({models}))
def test_model(n):
    with tempfile.TemporaryDirectory(prefix="bench-plain-") as tmp:
        out = os.path.join(tmp, "outputs.json")
        done = subprocess.run([sys.executable, "-c", {code!r}, out], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        assert json.loads(open(out).read())["metrics"]["accuracy"] > 0.9
'''
"""Plain parametrised pytest running the model program of :func:`write_matrix` once per model."""


def model_code(kib: int) -> str:
    """The program every model runs: prints ``kib`` KiB, writes its outputs file (argv[1])."""
    return (f"import sys, json; sys.stdout.write('log line of the model run ' * {kib * 40}); "
            "open(sys.argv[1], 'w').write(json.dumps(dict(metrics=dict(accuracy=0.99))))")


def run(tree: Path | None, models: int, kib: int) -> tuple[int, float, int, int]:
    """(items, wall seconds, peak RSS bytes while items ran, peak RSS bytes of the whole run) of one run
    with the gate at ``tree``; ``tree`` None: plain parametrised pytest (:data:`PLAIN`), one item per model."""
    folder = Path(tempfile.mkdtemp(prefix="hetero-mem-"))
    try:
        (folder / "conftest.py").write_text(PEAK_PLUGIN)
        if tree is None:
            (folder / "test_plain.py").write_text(PLAIN.format(models=models, code=model_code(kib)))
            env = {**os.environ, "PYTHONPATH": ""}
            argv = ["-p", "no:hetero", "test_plain.py"]
        else:
            write_matrix(folder, models, kib)
            env = {**os.environ, "PYTHONPATH": str(tree), "HETERO_ALLOW_PATHS": str(DIGITS)}
            argv = ["mem.matrix.yaml", "--hetero-run-id", "r1"]
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *argv], cwd=folder,
                              env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if done.returncode not in (0, 1) or (tree is None and done.returncode):
            raise RuntimeError(done.stdout[-2000:])
        items = models if tree is None else 3 + 2 * models
        return (items, wall, int((folder / "run_peak.txt").read_text()) * 1024,
                int((folder / "peak.txt").read_text()) * 1024)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Measure and print peak RSS per size, the slope per item, and the ratio to the baseline checkout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[100, 400], help="model counts (items: 3 + 2×)")
    parser.add_argument("--kib", type=int, default=16, help="KiB each model prints")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline-path", type=Path, default=None, help="another checkout to compare with")
    parser.add_argument("--no-plain", action="store_true", help="leave out plain parametrised pytest")
    args = parser.parse_args(argv)
    trees: dict[str, Path | None] = {"this": REPO, **({"baseline": args.baseline_path} if args.baseline_path else {}),
                                     **({} if args.no_plain else {"plain": None})}
    peaks: dict[tuple[str, int], list[int]] = {}
    run_peaks: dict[tuple[str, int], list[int]] = {}
    walls: dict[tuple[str, int], list[float]] = {}
    items_of: dict[tuple[str, int], int] = {}
    for n in range(args.rounds):
        order = list(trees.items()) if n % 2 == 0 else list(reversed(trees.items()))
        for size in args.sizes:
            for name, tree in order:
                items, wall, running, peak = run(tree, size, args.kib)
                items_of[(name, size)] = items
                peaks.setdefault((name, size), []).append(peak)
                run_peaks.setdefault((name, size), []).append(running)
                walls.setdefault((name, size), []).append(wall)
    small, large = args.sizes
    slopes: dict[tuple[str, str], float] = {}
    for name in trees:
        for size in args.sizes:
            p, r, w = peaks[(name, size)], run_peaks[(name, size)], walls[(name, size)]
            print(f"{name:<8} {items_of[(name, size)]:>6} items: peak RSS while items ran "
                  f"{statistics.median(r) / 1e6:7.1f} MB "
                  f"({min(r) / 1e6:.1f}–{max(r) / 1e6:.1f}), whole run {statistics.median(p) / 1e6:7.1f} MB "
                  f"({min(p) / 1e6:.1f}–{max(p) / 1e6:.1f}), wall {statistics.median(w):6.1f} s "
                  f"({min(w):.1f}–{max(w):.1f})")
        for phase, table in (("running", run_peaks), ("whole", peaks)):
            grow = statistics.median(table[(name, large)]) - statistics.median(table[(name, small)])
            slopes[(name, phase)] = grow / (items_of[(name, large)] - items_of[(name, small)])
        print(f"{name:<8} slope: {slopes[(name, 'running')] / 1e3:.2f} KB per item while items ran, "
              f"{slopes[(name, 'whole')] / 1e3:.2f} KB per item over the whole run")
    if "plain" in trees:
        # per model: the gate runs two items per model (model, business), plain pytest one
        gate = slopes[("this", "running")] * 2
        plain = slopes[("plain", "running")]
        print(f"ratio run_memory_slope_vs_plain: gate {gate / 1e3:.2f} KB per model while items ran, plain pytest "
              f"{plain / 1e3:.2f} KB per test" + (f": {gate / plain:.2f}x" if plain > 0 else ""))
    if "baseline" in trees:
        for phase in ("running", "whole"):
            this, base = slopes[("this", phase)], slopes[("baseline", phase)]
            print(f"ratio run_memory_slope_{phase}: {this / base:.2f}x of the baseline checkout" if base > 0
                  else f"ratio run_memory_slope_{phase}: baseline slope {base / 1e3:.2f} KB per item")
    return 0


if __name__ == "__main__":
    sys.exit(main())
