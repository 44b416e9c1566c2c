"""Benchmark: ``hetero diff`` of two 50,000-item evidence bundles, against loading both JSON files.

Builds two bundles shaped like real ones (items with evidence records, business items with
``business.rules`` results, untested scope, target fingerprints); the second has 2 % of items
regressed, 1 % fixed, 1 % newly untested and shifted metrics. Times ``hetero diff OLD NEW
--allow-unsigned --json`` in-process (best of ``--repeat``), and ``json.load`` of both files.
Target: diff ≤ 2 s; prints the ratio to loading. Usage: ``python bench/bench_diff.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_hetero.cli import main as hetero

LAYERS = ("discovery", "scheduling", "startup", "model", "business")


def bundle(items: int, variant: int) -> dict[str, Any]:
    """An evidence document with ``items`` items (variant 1: transitions and metric shifts)."""
    out, untested = [], []
    for n in range(items):
        layer = LAYERS[n % 5]
        nodeid = f"m.matrix.yaml::r{n // 500}::i{n // 50 % 10}::m{n // 5 % 10}@d0::{layer}#{n}"
        status = "passed"
        if variant and n % 50 == 1:
            status = "failed"
        if n % 100 == 2:
            status = "failed" if not variant else "passed"
        entry: dict[str, Any] = {
            "nodeid": nodeid, "matrix": "m.matrix.yaml", "layer": layer, "owner": "platform",
            "keys": {"resource": f"r{n // 500}", "image": f"i{n // 50 % 10}"}, "status": status,
            "duration_s": 0.5, "started_at": "2026-11-29T00:00:00Z", "finished_at": "2026-11-29T00:00:01Z",
            "failure": None, "blocked_by": None, "reason": None, "artifacts": [],
            "records": [{"kind": "startup.runtime", "at": "2026-11-29T00:00:00Z",
                         "data": {"python": "3.11.7", "packages_sha256": "ab" * 32}}]}
        if layer == "business":
            shift = 1.2 if variant and n % 7 == 0 else 1.0
            entry["records"].append({"kind": "business.rules", "at": "2026-11-29T00:00:01Z", "data": {"results": [
                {"name": "accuracy-floor", "kind": "metric", "expected": ">= 0.95", "observed": 0.97,
                 "verdict": "pass", "detail": ""},
                {"name": "latency-p95", "kind": "latency", "expected": "<= 20", "observed": 4.0 * shift,
                 "verdict": "pass", "detail": ""}]}})
        if variant and n % 100 == 3:
            untested.append({**{k: entry[k] for k in ("nodeid", "layer", "keys")}, "status": "deselected",
                             "reason": "deselected (profile quick)", "blocked_by": None})
        else:
            out.append(entry)
    return {"schema": "pytest-hetero/evidence/v1", "run": {"id": f"run-{variant}"},
            "matrices": [{"name": "m", "prefix": "m.matrix.yaml", "path": "/x/m.matrix.yaml", "sha256": "0" * 64}],
            "target": [{"backend": "kubernetes", "identity": "prod", "nodes": [f"n{i}" for i in range(40 + variant)],
                        "versions": {"driver": f"55{variant}.1"}, "images": {}}],
            "items": out, "untested": {"items": untested, "never_covered": {}, "does_not_prove": {}},
            "summary": {"totals": {}}, "errors": [], "warnings": []}


def main() -> int:
    """Write the bundles, time loading and diffing, print seconds and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for variant in (0, 1):
            folder = Path(tmp) / f"b{variant}"
            folder.mkdir()
            (folder / "evidence.json").write_text(json.dumps(bundle(args.items, variant), indent=1), "utf-8")
            paths.append(folder)
        size = sum((p / "evidence.json").stat().st_size for p in paths)
        load, diff = [], []
        for _ in range(args.repeat):
            started = time.perf_counter()
            for p in paths:
                json.loads((p / "evidence.json").read_text("utf-8"))
            load.append(time.perf_counter() - started)
            out = io.StringIO()
            started = time.perf_counter()
            with contextlib.redirect_stdout(out):
                code = hetero(["diff", str(paths[0]), str(paths[1]), "--allow-unsigned", "--json"])
            diff.append(time.perf_counter() - started)
        result = json.loads(out.getvalue())
    print(json.dumps({"items_per_bundle": args.items, "json_bytes": size, "exit": code,
                      "counts": result["counts"], "metric_changes": len(result["metric_changes"]),
                      "target_changes": len(result["target_changes"]),
                      "load_s": round(min(load), 3), "diff_s": round(min(diff), 3)}))
    verdict = "ok" if min(diff) <= 2.0 else "OVER the 2 s target"
    print(f"hetero diff: {min(diff):.2f} s ({verdict}), {min(diff) / min(load):.2f}× loading both JSON files "
          f"({min(load):.2f} s, {size / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
