"""Benchmark: the gate's business metrics for N predictions against scikit-learn's own calls on the same arrays.

A (baseline, the same metrics done plainly): scikit-learn on the integer label arrays already in memory, as a careful
user would call it: ``accuracy_score``, ``balanced_accuracy_score``, ``precision_recall_fscore_support`` (macro,
weighted, per class) and ``confusion_matrix``.

B (the gate, one business item after the model's outputs JSON is parsed): :func:`pytest_hetero.truth.gate.check_outputs`
(the outputs contract) and :func:`pytest_hetero.truth.gate.gate_values`: the truth file read and digested (CSV,
``id,label``; sha256 checked), the outputs' ids and predictions canonicalised, joined by id (missing, duplicate and
extra ids counted), then the same metrics with scikit-learn on the joined labels
(:func:`pytest_hetero.matrix.gate_metrics.classification`). B's parts are timed too: ``contract`` (check_outputs),
``read+join`` (truth read, digest, parse, canonicalise, join: work A does not do) and ``metrics`` (the classification
call on the joined labels, integer codes on this path: A's work).

Target (issue 30): B ≤ 2× A at N = 1,000,000, and B's peak traced memory (tracemalloc) within 2× the arrays' size
(the two int64 label arrays A works on). Every figure is a median of ``REPEATS`` interleaved runs (CPU time, so a busy
machine slows both alike), with the spread (min–max).

Usage: ``python3 bench/bench_metrics.py [N]`` (default 1000000).
"""

from __future__ import annotations

import gc
import hashlib
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from sklearn import metrics as m

from pytest_hetero.matrix.gate_metrics import classification
from pytest_hetero.matrix.model import Dataset, Truth
from pytest_hetero.matrix.truth_table import join_ids, read_truth
from pytest_hetero.truth.gate import _predictions, check_outputs, gate_values

REPEATS = 5


def baseline(t: np.ndarray, p: np.ndarray) -> None:
    m.accuracy_score(t, p)
    m.balanced_accuracy_score(t, p)
    for avg in ("macro", "weighted", None):
        m.precision_recall_fscore_support(t, p, average=avg, zero_division=0)
    m.confusion_matrix(t, p)


def gate(dataset: Dataset, outputs: dict[str, Any]) -> None:
    kinds = check_outputs(outputs, dataset)
    judged = gate_values(dataset, outputs, "0" * 64, 1.0, False, kinds)
    assert judged.joined is not None and judged.joined.complete


def cpu(fn: Callable[[], object]) -> float:
    gc.collect()
    start = time.process_time()
    fn()
    return time.process_time() - start


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} s (min {min(xs):.3f}, max {max(xs):.3f})"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    rng = random.Random(30)
    labels = [rng.randrange(10) for _ in range(n)]
    preds = [v if rng.random() < 0.9 else rng.randrange(10) for v in labels]
    ids = list(range(n))
    rng.shuffle(ids)  # the model's order is not the file's: the join does real work
    by_id = dict(zip(range(n), preds, strict=True))
    outputs = {"ids": ids, "predictions": [by_id[i] for i in ids]}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "truth.csv"
        path.write_text("id,label\n" + "".join(f"{i},{v}\n" for i, v in enumerate(labels)))
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        truth = Truth(task="classification", target="label", id="id", path=path, sha256=digest, uri=str(path))
        dataset = Dataset(name="bench", version="1", uri=str(path), path=path, sha256=digest, acceptance=None,
                          truth=truth)
        t, p = np.asarray(labels, dtype=np.int64), np.asarray(preds, dtype=np.int64)
        joined = join_ids(read_truth(truth), _predictions(outputs["predictions"], range(n), "classification"),
                          outputs["ids"])
        times: dict[str, list[float]] = {"A": [], "B": [], "contract": [], "read+join": [], "metrics": []}
        for _ in range(REPEATS):  # interleaved: A and B see the same machine
            times["A"].append(cpu(lambda: baseline(t, p)))
            times["B"].append(cpu(lambda: gate(dataset, outputs)))
            times["contract"].append(cpu(lambda: check_outputs(outputs, dataset)))
            times["read+join"].append(cpu(lambda: join_ids(
                read_truth(truth), _predictions(outputs["predictions"], range(n), "classification"), outputs["ids"])))
            times["metrics"].append(cpu(lambda: classification(joined.y_true, joined.y_pred)))
        gc.collect()
        tracemalloc.start()
        gate(dataset, outputs)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    a, b = statistics.median(times["A"]), statistics.median(times["B"])
    arrays = t.nbytes + p.nbytes
    print(f"N={n}, {REPEATS} interleaved runs, CPU seconds, median (min, max)")
    print(f"  A scikit-learn on the int64 arrays: {spread(times['A'])}")
    print(f"  B the gate's business values:       {spread(times['B'])}")
    for part in ("contract", "read+join", "metrics"):
        print(f"    of which {part:<10}               {spread(times[part])}")
    ratios = [x / y for x, y in zip(times["B"], times["A"], strict=True)]
    print(f"ratio B/A: median {b / a:.2f}x (per run {min(ratios):.2f}x-{max(ratios):.2f}x; target <= 2x)")
    print(f"B peak traced memory {peak / 2**20:.1f} MiB vs the int64 arrays {arrays / 2**20:.1f} MiB: "
          f"{peak / arrays:.1f}x (target <= 2x)")


if __name__ == "__main__":
    main()
