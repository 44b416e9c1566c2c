"""Benchmark: the usage ledger's fold at assembly against summing the same records the plain way.

The run (not timed): N items shaped like a local run's model items (each with the records a model item
carries: identity, usage, run, outputs, and one ``usage.workload`` record with distinct times), plus one
Kubernetes-like pod record per 5 items reported by two items each (the scheduling and startup items'
view of one workload), so merging by workload id is exercised.

Measured in interleaved rounds (A then B, B then A, …; median and spread min–max of each, ratio of the
medians, CPU time of this process): A — the plain way: one loop over every record of every item that
sums ``quantity(request) × (ended − started)`` per namespace for the ``usage.workload`` records (no
merging, no checks: the least any fold must do); B — :func:`pytest_hetero.evidence.usage.ledger` (merge
by workload id, every table, waste, incomplete records). Target: B ≤ 3× A. Peak memory is not measured
here (bench_run_memory is the run's; the ledger keeps one dict per workload, not per record).

Usage: ``python bench/bench_usage_ledger.py [--items N] [--rounds R]``; exits 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from pytest_hetero.evidence.usage import RECORD, ledger
from pytest_hetero.matrix.quantity import quantity


def _items(n: int) -> list[dict[str, Any]]:
    base = 1_790_000_000.0
    out = []
    for i in range(n):
        t = base + i
        records: list[dict[str, Any]] = [{"kind": k, "at": "2026-12-01T10:00:00.000000Z", "data": {"x": i}}
                   for k in ("model.identity", "model.usage", "model.run", "model.outputs")]
        records.append({"kind": RECORD, "at": f"2026-12-01T10:00:{i % 60:02d}.{i:06d}Z", "data": {
            "workload": f"process/{i:012x}", "object": "process", "namespace": "local", "tenant": None,
            "requests": {"cpu": "500m", "memory": "256Mi"}, "submitted": t, "started": t, "ended": t + 1.5,
            "released": t + 1.5, "attempts": 1, "outcome": "completed" if i % 50 else "failed",
            "model": f"m{i % 25}@1.0.{i % 3}", "task_type": "batch-inference" if i % 2 else "evaluation",
            "held_s": 1.5, "idle_s": None, "open": False}})
        if i % 5 == 0:  # a pod seen by two items
            records.append({"kind": RECORD, "at": "2026-12-01T10:00:01Z", "data": {
                "workload": f"pod/ns/p{i // 10}", "object": "pod", "namespace": "ns", "requests": {"cpu": "1"},
                "placed": t, "started": t + 0.7, "attempts": 1, "outcome": "running"}})
        out.append({"nodeid": f"m.matrix.yaml::r::i::m{i}@d::model", "records": records})
    return out


def plain(items: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """A: sum request × (ended − started) per namespace over every usage record, nothing else."""
    out: dict[str, dict[str, float]] = {}
    for item in items:
        for rec in item["records"]:
            if rec["kind"] != RECORD:
                continue
            d = rec["data"]
            seconds = (d.get("ended") or 0.0) - (d.get("started") or 0.0)
            per = out.setdefault(d["namespace"], {})
            for res, q in d["requests"].items():
                per[res] = per.get(res, 0.0) + quantity(q) * seconds
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    items = _items(args.items)
    sides: dict[str, Callable[[], object]] = {"A plain sum": lambda: plain(items),
                                              "B ledger": lambda: ledger(items, "2026-12-01T11:00:00Z")}
    times: dict[str, list[float]] = {k: [] for k in sides}
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for name in order:
            begin = time.process_time()
            sides[name]()
            times[name].append(time.process_time() - begin)
    for name, got in times.items():
        print(f"{name}: median {statistics.median(got) * 1000:.1f} ms (min {min(got) * 1000:.1f}, "
              f"max {max(got) * 1000:.1f}) over {args.rounds} rounds, {args.items} items")
    ratio = statistics.median(times["B ledger"]) / statistics.median(times["A plain sum"])
    print(f"ratio B/A: {ratio:.2f}x (target <= 3x)")
    return 0 if ratio <= 3 else 1


if __name__ == "__main__":
    sys.exit(main())
