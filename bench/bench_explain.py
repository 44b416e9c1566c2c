"""Benchmark: ``hetero explain`` on a 50,000-line mixed log against ``grep -c .`` of the same file.

The log is built from the real field outputs in ``../shared/fixtures/real/`` (kernel logs, klog lines,
events tables, nvidia-smi/npu-smi/dcgmi tables, kubectl describe, container logs, YAML objects),
concatenated in a fixed shuffled order separated by blank lines until it reaches ``--lines`` lines, so
every block kind the splitter knows is present many times.

Measured:

* grep: wall time of ``grep -c . FILE`` (best of ``--repeat``), the floor that cannot be beaten;
* explain: wall time of :func:`pytest_hetero.explain.explain_bytes` on the file's bytes (best of
  ``--repeat``, read included), then one more run under tracemalloc for the peak Python heap.

Prints lines/s of both, the ratio explain/grep (aim: within 20x), the peak memory, and the number of
blocks and findings. Informational: the exit status is 0 unless the file cannot be built or read.

Usage: ``python bench/bench_explain.py [--lines N] [--repeat R] [--keep FILE]``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from pytest_hetero.explain import explain_bytes

REAL = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real"


def build_log(lines: int, seed: int = 16) -> str:
    """Return a mixed log of about ``lines`` lines assembled from the real fixtures (fixed order)."""
    sources = [p for p in sorted(REAL.rglob("*")) if p.is_file() and p.suffix != ".md"]
    if not sources:
        raise SystemExit(f"no fixtures under {REAL}")
    texts = [p.read_text(encoding="utf-8", errors="replace").rstrip("\n") for p in sources]
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < lines:
        order = list(range(len(texts)))
        rng.shuffle(order)
        for i in order:
            out.extend(texts[i].split("\n"))
            out.append("")
            if len(out) >= lines:
                break
    return "\n".join(out[:lines]) + "\n"


def _best(repeat: int, run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    """Build the log, time grep and explain, print the ratio and peak memory; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", metavar="FILE", help="also write the generated log to FILE")
    args = parser.parse_args(argv)
    text = build_log(args.lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mixed.log"
        path.write_text(text, encoding="utf-8")
        if args.keep:
            shutil.copyfile(path, args.keep)
        grep = shutil.which("grep")
        grep_s = _best(args.repeat, lambda: subprocess.run([grep or "grep", "-c", ".", str(path)], check=False,
                                                           capture_output=True)) if grep else float("nan")
        explain_s = _best(args.repeat, lambda: explain_bytes(path.read_bytes()))
        tracemalloc.start()
        report = explain_bytes(path.read_bytes())
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    n = args.lines
    size_mib = len(text.encode()) / 1048576
    print(f"input: {n} lines, {size_mib:.1f} MiB, {len(report.blocks)} blocks, {len(report.findings)} findings")
    print(f"grep -c .: {grep_s * 1000:.1f} ms ({n / grep_s:,.0f} lines/s)")
    print(f"explain:   {explain_s * 1000:.1f} ms ({n / explain_s:,.0f} lines/s)")
    print(f"ratio explain/grep: {explain_s / grep_s:.1f}x (aim: within 20x)")
    print(f"peak Python heap during explain: {peak / 1048576:.1f} MiB ({peak / max(1, len(text)):.1f}x the input)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
