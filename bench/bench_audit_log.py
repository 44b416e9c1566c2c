"""Benchmark: ``--hetero-audit-log``'s bounded reader against a plain read of the same audit log.

Builds an audit log of N events (default 100,000, about 100 MB) from the real events of
``tests/data/audit/kubeplane-v1.34.4.jsonl`` (kube-apiserver v1.34.4, Metadata level), their
``stageTimestamp`` spread over 10 hours and one hour of them inside the window, then measures,
interleaved (``--repeat`` rounds, each runs both in turn, in this process):

* **A, the plain way**: ``for line in open(path): json.loads(line)``, keep the write verbs of the window
  (``stageTimestamp`` compared as a string, code < 400): no bounds, no checks;
* **B, the gate**: :func:`~pytest_hetero.status.audit.read_audit_log` (bounded lines, binary and shape checks,
  RFC 3339 parsing, sha256 of the bytes read, the change entries) and
  :func:`~pytest_hetero.status.audit.classify` of the window over a matrix of five pools
  (matrices/example-k8s.matrix.yaml).

Prints medians with the spread (min–max) of wall time and the ratio of the medians; target B ≤ 3× A
(exit 1 when missed). Measured on the shared 2-core machine (100,000 events, 92 MB, 5 rounds): A 1315 ms
median (1158–1545), B 2497 ms (2218–2874), 1.90×. Usage: ``python bench/bench_audit_log.py [--events N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.status.audit import classify, read_audit_log

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "tests" / "data" / "audit" / "kubeplane-v1.34.4.jsonl"
START = datetime(2026, 12, 2, 0, 0, tzinfo=UTC)
MATRIX = REPO / "matrices" / "example-k8s.matrix.yaml"
"""Its five resources: pools by node selector, target namespace hetero-validation."""


def build(path: Path, events: int) -> None:
    samples = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    step = timedelta(hours=10) / events
    with path.open("w") as fh:
        for i in range(events):
            event = dict(samples[i % len(samples)])
            event["stageTimestamp"] = (START + step * i).isoformat().replace("+00:00", "Z")
            event["auditID"] = f"{i:08d}"
            fh.write(json.dumps(event, separators=(",", ":")) + "\n")


def plain(path: Path, since: str, until: str) -> int:
    kept = 0
    with path.open() as fh:
        for line in fh:
            event = json.loads(line)
            if (event["verb"] in ("create", "update", "patch", "delete", "deletecollection")
                    and since <= event["stageTimestamp"] < until and event["responseStatus"]["code"] < 400):
                kept += 1
    return kept


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "audit.log"
        build(path, args.events)
        matrix = load_matrix(MATRIX)
        since, until = START + timedelta(hours=4), START + timedelta(hours=5)
        snaps = [{"nodes": {"gpu-node-1": {"labels": {"hetero-example.pool": "gpu"}, "allocatable": {}}}}]
        a_times, b_times = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            a_kept = plain(path, since.isoformat().replace("+00:00", "Z"), until.isoformat().replace("+00:00", "Z"))
            a_times.append(time.perf_counter() - t)
            t = time.perf_counter()
            window, _ = read_audit_log(str(path), since, until)
            classify(window, matrix, snaps, "team-a", ["cpu-pool"])
            b_times.append(time.perf_counter() - t)
            assert window.writes == a_kept, (window.writes, a_kept)
        size = path.stat().st_size
    a, b = statistics.median(a_times), statistics.median(b_times)
    print(f"{args.events} events, {size / 1e6:.0f} MB, {a_kept} writes in the window, {args.repeat} rounds")
    for name, times, median in (("A plain json.loads per line", a_times, a),
                                ("B read_audit_log + classify", b_times, b)):
        print(f"{name}: {median * 1000:.0f} ms median ({min(times) * 1000:.0f}–{max(times) * 1000:.0f})")
    print(f"ratio B/A {b / a:.2f}× (target ≤ 3×)")
    return 0 if b / a <= 3 else 1


if __name__ == "__main__":
    sys.exit(main())
