"""Benchmark: peak memory of a whole local run as its item count grows (issue 20 item 3).

A matrix of 1 resource × 1 image × M models × 1 dataset on the local backend: every model prints
``--kib`` KiB of output (kept in evidence, head and tail, as a real model's logs are), classifies the digits
test set (360 rows) and writes the outputs contract (``ids`` and ``predictions``), so each model item's evidence
is tens of KB like a real one. The dataset declares its truth as the README's matrix does (``truth: {task:
classification, target: label, id: index}``): every business item reads it (its sha256 checked), joins it with the
outputs by id and judges the accuracy it computes, and passes (a run with a business item that does not pass is
refused: a matrix gone stale, as this one did when the gate began to insist on a truth for ``accuracy``, would
measure items that all error). The model is a nearest-centroid classifier the bench fits to that same dataset
(accuracy 0.92; what it scores is not the point, that the gate judges it is). The whole command
``python -m pytest MATRIX`` runs at two sizes; its peak RSS (VmHWM of the pytest process, written at
exit) and wall time are measured, interleaved with the same run by another checkout of the gate
(``--baseline-path``, e.g. the main branch) when given. Two peaks: while items ran (VmHWM when
session finish starts) and over the whole run. The slope, KB of peak RSS per item between the two
sizes, is what must stay flat while items run: the evidence of a finished item is in the journal, so
the run should not hold it too.

The baseline of the slope is plain parametrised pytest (``--no-plain`` leaves it out): one test per
model running the same program with ``subprocess.run`` (output captured and checked, the outputs file
read back, the dataset's labels read with their sha256 checked and the accuracy computed and checked against the
same floor), measured the same way in the same interleaved rounds; ``ratio run_memory_slope_vs_plain`` is
the gate's KB per item while items ran over plain pytest's, per model item (the gate has two items per
model, plain pytest one).

The finish no longer holds the evidence document's items: assembly keeps them in a spool file on disk
(:mod:`pytest_hetero.evidence.spool`) and every writer reads them back one at a time, so the whole run's
slope is what items leave while they run plus the finish's per-item residue (untested entries, the renderings'
per-item lines: junit.xml's and ctrf.json's text).

Usage: ``python bench/bench_run_memory.py [--sizes 100 500] [--kib 16] [--rounds 3]
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


DATA = DIGITS / "data" / "digits-test-1.0.0.csv"
FLOOR = 0.9
"""The accuracy floor of the business rule (and of the plain tests): the nearest-centroid model scores 0.92."""


def write_model(folder: Path) -> Path:
    """``centroids.json`` in ``folder``: the mean of each digit's 64 pixels over :data:`DATA` (label → 64 floats),
    the model file :func:`model_code` reads."""
    import csv

    sums: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    with DATA.open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            total = sums.setdefault(row["label"], [0.0] * 64)
            counts[row["label"]] = counts.get(row["label"], 0) + 1
            for i in range(64):
                total[i] += float(row[f"p{i}"])
    path = folder / "centroids.json"
    path.write_text(json.dumps({label: [round(x / counts[label], 4) for x in total] for label, total in sums.items()}))
    return path


def write_matrix(folder: Path, models: int, kib: int) -> Path:
    """A matrix of ``models`` quick models that print ``kib`` KiB and classify :data:`DATA`, whose truth is its
    ``label`` column (joined by ``index``); every business item judges the accuracy the gate computes."""
    import hashlib

    model = write_model(folder)
    code = model_code(kib)
    spec = {"target": {"backend": "local"}, "layers": {"model": {"timeout": "2m"}},
            "resources": [{"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}],
            "images": [{"name": "py", "reference": "python:current"}],
            "models": [{"name": f"m{n}", "version": "1", "uri": model.name,
                        "sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
                        "entrypoint": ["{python}", "-c", code, "{model}", "{dataset}", "{outputs}"]}
                       for n in range(models)],
            "datasets": [{"name": "d", "version": "1", "uri": str(DATA), "acceptance": "acceptance.yaml",
                          "sha256": hashlib.sha256(DATA.read_bytes()).hexdigest(),
                          "truth": {"task": "classification", "target": "label", "id": "index"}}]}
    # every business item passes, as in a healthy run (without rules each one failed: no_rules; without the
    # dataset's truth each one errored: no_truth)
    (folder / "acceptance.yaml").write_text(json.dumps({
        "apiVersion": "pytest-hetero/v1", "kind": "AcceptanceRules",
        "rules": [{"name": "accuracy-floor", "metric": "accuracy", "op": ">=", "value": FLOOR}]}))
    path = folder / "mem.matrix.yaml"
    path.write_text(json.dumps({"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix",
                                "metadata": {"name": "mem"}, "spec": spec}))
    return path


PLAIN = '''
import csv, hashlib, json, os, subprocess, sys, tempfile
import pytest


@pytest.mark.parametrize("n", range({models}))
def test_model(n):
    with tempfile.TemporaryDirectory(prefix="bench-plain-") as tmp:
        out = os.path.join(tmp, "outputs.json")
        done = subprocess.run([sys.executable, "-c", {code!r}, {model!r}, {data!r}, out], capture_output=True,
                              text=True, check=False)
        assert done.returncode == 0, done.stderr
        outputs = json.loads(open(out).read())
        with open({data!r}, "rb") as fh:
            raw = fh.read()
        assert hashlib.sha256(raw).hexdigest() == {sha!r}
        truth = {{int(row["index"]): int(row["label"]) for row in csv.DictReader(raw.decode().splitlines())}}
        assert sorted(outputs["ids"]) == sorted(truth)
        right = sum(truth[i] == p for i, p in zip(outputs["ids"], outputs["predictions"]))
        assert right / len(truth) >= {floor!r}
'''
"""Plain parametrised pytest running the model program of :func:`write_matrix` once per model and judging its
accuracy against the dataset's labels (sha256 checked) as the business item does."""


def model_code(kib: int) -> str:
    """The program every model runs: prints ``kib`` KiB, classifies the rows of the dataset (argv[2], columns
    ``index`` and ``p0``..``p63`` read by name) by the nearest centroid of the model file (argv[1]) and writes the
    outputs contract, ``ids`` and ``predictions`` (argv[3]). No brace in it: the gate expands ``{...}`` in an
    entrypoint's arguments."""
    return (f"import csv, json, sys\nsys.stdout.write('log line of the model run ' * {kib * 40})\n"
            "cent = json.load(open(sys.argv[1]))\nids, preds = [], []\n"
            "for row in csv.DictReader(open(sys.argv[2])):\n"
            "    v = [float(row['p%d' % i]) for i in range(64)]\n"
            "    preds.append(int(min(cent, key=lambda c: sum((a - b) ** 2 for a, b in zip(v, cent[c])))))\n"
            "    ids.append(int(row['index']))\n"
            "json.dump(dict(ids=ids, predictions=preds), open(sys.argv[3], 'w'))\n")


def run(tree: Path | None, models: int, kib: int) -> tuple[int, float, int, int]:
    """(items, wall seconds, peak RSS bytes while items ran, peak RSS bytes of the whole run) of one run
    with the gate at ``tree``; ``tree`` None: plain parametrised pytest (:data:`PLAIN`), one item per model."""
    folder = Path(tempfile.mkdtemp(prefix="hetero-mem-"))
    try:
        (folder / "conftest.py").write_text(PEAK_PLUGIN)
        if tree is None:
            import hashlib

            model = write_model(folder)
            (folder / "test_plain.py").write_text(PLAIN.format(
                models=models, code=model_code(kib), model=str(model), data=str(DATA),
                sha=hashlib.sha256(DATA.read_bytes()).hexdigest(), floor=FLOOR))
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
        if done.returncode:  # every item passes on both sides (the gate's scheduling item is not applicable)
            raise RuntimeError(done.stdout[-2000:])
        items = models if tree is None else 3 + 2 * models
        return (items, wall, int((folder / "run_peak.txt").read_text()) * 1024,
                int((folder / "peak.txt").read_text()) * 1024)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Measure and print peak RSS per size, the slope per item, and the ratio to the baseline checkout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[100, 500], help="model counts (items: 3 + 2×)")
    parser.add_argument("--kib", type=int, default=16, help="KiB each model prints")
    parser.add_argument("--rounds", type=int, default=3)
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
                print(f"round {n + 1} {name} {items} items: peak RSS while items ran {running / 1e6:.1f} MB, whole run "
                      f"{peak / 1e6:.1f} MB, wall {wall:.1f} s", file=sys.stderr, flush=True)
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
