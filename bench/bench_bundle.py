"""Benchmark: evidence bundle for a synthetic run of N items (default 50,000) against json.dump alone.

Measured in one process: each step's time is the best of ``--repeat`` untraced runs (CPU time of
this process for the ratios, wall time shown too), then one more run under tracemalloc gives its
memory:

* baseline: ``json.dump`` of the same item list to a file (the cost of writing the items at all);
* bundle: assemble evidence.json from the journal (``recorder.assemble``), copy inputs, render
  report.html, summary.md, junit.xml and ctrf.json, write manifest.json, the in-toto statement
  and its Ed25519-signed DSSE envelope;
* verify: ``verify_bundle`` (envelope, signature, statement, subjects, every manifest digest).

Memory is the tracemalloc peak of the Python heap during the step, *including* the items the
process already holds (both sides hold them), so the ratio says how much more memory the step
needs at its worst moment. Targets: bundle ≤ 5× baseline time and memory, verify ≤ 2×.

Usage: ``python bench/bench_bundle.py [--items N] [--keep DIR]``; prints one line per ratio and
exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_hetero.bundle.finish import finish_bundle
from pytest_hetero.bundle.signing import generate_keypair, load_public_key
from pytest_hetero.bundle.signoff import matrix_owners, run_signoff
from pytest_hetero.bundle.verify import verify_bundle
from pytest_hetero.evidence.inputs import RunInputs
from pytest_hetero.evidence.recorder import assemble, write_evidence
from pytest_hetero.reporting.writers import write_renderings

LAYERS = ("discovery", "scheduling", "startup", "model", "business")
OWNERS = {"discovery": "infrastructure", "scheduling": "platform", "startup": "platform", "model": "algorithm",
          "business": "business"}
TARGETS = {"bundle_time": 5.0, "bundle_memory": 5.0, "verify_time": 2.0, "verify_memory": 2.0}


def synthetic_items(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """``n`` item evidence dicts over 20 resources × 5 images × models@datasets; 3% failed, 7% blocked."""
    rng = random.Random(seed)
    items: list[dict[str, Any]] = []
    prefix = "matrices/bench.matrix.yaml"

    def add(parts: list[str], layer: str, keys: dict[str, str]) -> None:
        roll = rng.random()
        status = "failed" if roll < 0.03 else "blocked" if roll < 0.10 else "passed"
        nodeid = f"{prefix}::{'::'.join(parts)}::{layer}"
        item = {"nodeid": nodeid, "matrix": prefix, "layer": layer, "keys": keys, "owner": OWNERS[layer],
                "status": status, "started_at": "2026-11-29T10:00:00.000000Z",
                "finished_at": "2026-11-29T10:00:00.250000Z", "duration_s": 0.25,
                "records": [{"kind": f"{layer}.observed", "at": "2026-11-29T10:00:00.100000Z",
                             "data": {"device": "gpu-0", "memory_mib": 81559, "driver": "550.54.15",
                                      "note": "x" * rng.randint(20, 200)}},
                            {"kind": f"{layer}.verdict", "at": "2026-11-29T10:00:00.200000Z",
                             "data": {"text": "ok\n" * rng.randint(1, 10)}}],
                "failure": None, "blocked_by": None, "reason": None, "artifacts": []}
        if status == "failed":
            item["failure"] = {"layer": layer, "category": "threshold", "message": "accuracy 0.91 < 0.95",
                               "owner": OWNERS[layer]}
        elif status == "blocked":
            item["blocked_by"] = f"{prefix}::{parts[0]}::discovery"
            item["reason"] = f"blocked by {item['blocked_by']}: driver missing"
        items.append(item)

    r = 0
    while len(items) < n:
        res = f"res-{r:02d}"
        add([res], "discovery", {"resource": res})
        add([res], "scheduling", {"resource": res})
        for i in range(5):
            img = f"img-{i}"
            add([res, img], "startup", {"resource": res, "image": img})
            for m in range(25):
                for d in range(20):
                    keys = {"resource": res, "image": img, "model": f"m{m}", "dataset": f"d{d}"}
                    add([res, img, f"m{m}@d{d}"], "model", keys)
                    add([res, img, f"m{m}@d{d}"], "business", keys)
        r += 1
    return items[:n]


def write_journal(bundle: Path, items: list[dict[str, Any]]) -> None:
    """The journal a run would have written (without the per-line fsync, which is run-time cost)."""
    with open(bundle / "journal.jsonl", "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "run", "id": "bench", "tool": "pytest-hetero", "tool_version": "0.1.0",
                             "started_at": "2026-11-29T10:00:00.000000Z", "host": "bench"}) + "\n")
        fh.writelines(json.dumps({"type": "item", "evidence": item}, sort_keys=True) + "\n" for item in items)
        fh.write(json.dumps({"type": "end", "at": "2026-11-29T10:10:00.000000Z", "exit_status": 1,
                             "interrupted": False}) + "\n")


def measure(step: Callable[[], Any], repeat: int) -> tuple[float, float, int]:
    """(best CPU seconds, best wall seconds, tracemalloc peak bytes) of ``step``.

    Times are the best of ``repeat`` untraced runs, as ``timeit`` does; the ratios use CPU time
    of this process (every step is single-threaded), which other processes on a shared machine
    disturb far less than wall time. One more run under tracemalloc gives the memory peak."""
    cpu = wall = float("inf")
    for _ in range(repeat):
        gc.collect()
        start, start_cpu = time.perf_counter(), time.process_time()
        step()
        cpu = min(cpu, time.process_time() - start_cpu)
        wall = min(wall, time.perf_counter() - start)
    gc.collect()
    tracemalloc.start()
    step()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return cpu, wall, peak


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print times, peaks and ratios; exit 1 if a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per step (best is kept)")
    parser.add_argument("--keep", help="copy the last bundle here")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="hetero-bench-"))
    try:
        items = synthetic_items(args.items)
        generate_keypair(work / "run.key", work / "run.pub")
        public = load_public_key(work / "run.pub")
        journal_dir = work / "journal"
        journal_dir.mkdir()
        write_journal(journal_dir, items)
        # the items live in this process on both sides: tracemalloc must see them as resident
        tracemalloc.start()
        held = [json.loads(json.dumps(i)) for i in items]
        resident = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        del held

        def baseline() -> None:
            with open(work / "baseline.json", "w", encoding="utf-8") as fh:
                json.dump(items, fh)

        bundle = work / "bundle"

        def fresh() -> None:
            shutil.rmtree(bundle, ignore_errors=True)
            bundle.mkdir()
            shutil.copyfile(journal_dir / "journal.jsonl", bundle / "journal.jsonl")
            (bundle / "artifacts").mkdir()
            for n in range(200):
                (bundle / "artifacts" / f"stdout-{n}.txt").write_text("log line\n" * 100)

        def assemble_step() -> None:
            evidence.clear()
            evidence.update(assemble(bundle))
            write_evidence(bundle, evidence)

        def bundle_step() -> None:
            inputs = RunInputs()
            kept = inputs.keep(evidence, bundle)
            owners = matrix_owners(evidence, inputs)
            write_renderings(evidence, bundle, run_signoff(owners, work / "run.key"))
            finish_bundle(evidence, bundle, work / "run.key", owners, kept)

        def verify() -> None:
            result = verify_bundle(bundle, [public])
            assert result.ok, result.problems[:3]

        evidence: dict[str, Any] = {}
        fresh()  # the run's journal and captured artifacts: written by the run, not by the bundle
        base_t, base_w, base_m = measure(baseline, args.repeat)
        asm_t, asm_w, asm_m = measure(assemble_step, args.repeat)
        bund_t, bund_w, bund_m = measure(bundle_step, args.repeat)
        ver_t, ver_w, ver_m = measure(verify, args.repeat)
        full_t, full_w, full_m = asm_t + bund_t, asm_w + bund_w, max(asm_m, bund_m)
        base_m, full_m, asm_m, bund_m, ver_m = (m + resident for m in (base_m, full_m, asm_m, bund_m, ver_m))
        ratios = {"bundle_time": full_t / base_t, "bundle_memory": full_m / base_m,
                  "verify_time": ver_t / base_t, "verify_memory": ver_m / base_m}
        size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
        print(f"items: {args.items}; bundle: {size / 1e6:.1f} MB in {sum(1 for _ in bundle.rglob('*'))} entries; "
              f"items resident: {resident / 1e6:.1f} MB")
        rows = [("baseline json.dump", base_t, base_w, base_m), ("  assemble evidence.json", asm_t, asm_w, asm_m),
                ("  renderings+manifest+sign", bund_t, bund_w, bund_m), ("full bundle", full_t, full_w, full_m),
                ("verify", ver_t, ver_w, ver_m)]
        for label, cpu, wall, peak in rows:
            print(f"{label:<28} cpu {cpu:6.2f} s ({cpu / base_t:5.2f}x)  wall {wall:6.2f} s  "
                  f"peak {peak / 1e6:7.1f} MB ({peak / base_m:4.2f}x)")
        missed = []
        for name, ratio in ratios.items():
            ok = ratio <= TARGETS[name]
            missed += [] if ok else [name]
            print(f"ratio {name}: {ratio:.2f}x (target <= {TARGETS[name]:.0f}x) {'ok' if ok else 'MISSED'}")
        if args.keep:
            shutil.copytree(bundle, args.keep, dirs_exist_ok=True)
        return 1 if missed else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
