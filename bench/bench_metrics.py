"""Benchmark: the gate's business metrics for N predictions against scikit-learn's own calls on the same arrays.

A (baseline): what a careful user would do by hand with scikit-learn on integer label arrays already in memory:
``accuracy_score``, ``balanced_accuracy_score``, ``precision_recall_fscore_support`` (macro, weighted, per class)
and ``confusion_matrix``. B: what the gate does for one business item: the truth file read and digested (CSV,
``id,label``), the outputs' ids and predictions canonicalised, joined by id, then the same scikit-learn calls on
the joined labels (:func:`pytest_hetero.matrix.gate_metrics.classification`). Target (issue 30): B ≤ 2× A; peak memory
(tracemalloc) of B within 2× the arrays' size is printed beside it.

Usage: ``python3 bench/bench_metrics.py [N]`` (default 200000; the issue's figure is N=1000000).
"""

from __future__ import annotations

import hashlib
import random
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from sklearn import metrics as m

from pytest_hetero.matrix.gate_metrics import classification
from pytest_hetero.matrix.model import Truth
from pytest_hetero.matrix.truth_table import id_text, join, label_text, read_truth


def baseline(t: np.ndarray, p: np.ndarray) -> None:
    m.accuracy_score(t, p)
    m.balanced_accuracy_score(t, p)
    for avg in ("macro", "weighted", None):
        m.precision_recall_fscore_support(t, p, average=avg, zero_division=0)
    m.confusion_matrix(t, p)


def gate(truth: Truth, ids: list[int], preds: list[int]) -> None:
    table = read_truth(truth)
    joined = join(table, [label_text(v) for v in preds], [id_text(v) or "" for v in ids])
    classification(joined.y_true, joined.y_pred)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    rng = random.Random(30)
    labels = [rng.randrange(10) for _ in range(n)]
    preds = [v if rng.random() < 0.9 else rng.randrange(10) for v in labels]
    ids = list(range(n))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "truth.csv"
        path.write_text("id,label\n" + "".join(f"{i},{v}\n" for i, v in zip(ids, labels, strict=True)))
        truth = Truth(task="classification", target="label", id="id", path=path,
                      sha256=hashlib.sha256(path.read_bytes()).hexdigest(), uri=str(path))
        t, p = np.asarray(labels), np.asarray(preds)
        a_times, b_times = [], []
        for _ in range(3):
            start = time.process_time()
            baseline(t, p)
            a_times.append(time.process_time() - start)
            start = time.process_time()
            gate(truth, ids, preds)
            b_times.append(time.process_time() - start)
        tracemalloc.start()
        gate(truth, ids, preds)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    a, b = sorted(a_times)[1], sorted(b_times)[1]
    arrays = t.nbytes + p.nbytes
    print(f"N={n}: scikit-learn by hand {a:.3f} s CPU, gate {b:.3f} s CPU: ratio {b / a:.2f}x (target <= 2x)")
    print(f"gate peak traced memory {peak / 2**20:.1f} MiB vs int64 arrays {arrays / 2**20:.1f} MiB: "
          f"{peak / arrays:.1f}x (target <= 2x)")


if __name__ == "__main__":
    main()
