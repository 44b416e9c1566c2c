"""Benchmark: ``hetero explain`` on a 50,000-line mixed log against the same patterns scanned with ``re``.

The log is built from the real field outputs in ``../shared/fixtures/real/`` (kernel logs, klog lines,
events tables, nvidia-smi/npu-smi/dcgmi tables, kubectl describe, container logs, YAML objects),
concatenated in a fixed shuffled order separated by blank lines until it reaches ``--lines`` lines, so
every block kind the splitter knows is present many times.

Two comparisons, each in ``--repeat`` interleaved rounds (the order of the contenders alternates from one
round to the next, so a burst of load from other processes on a shared machine hits both alike):

* **reading**: wall time of :func:`pytest_hetero.explain.explain_bytes` on the file's bytes, in this
  process (read included, imports and regex compilation already done), against the fair baseline: the same
  file read and split into lines in this process, every compiled pattern of the reader modules searched on
  every line with Python's ``re`` (the plain way of doing the readers' matching, no dispatch). ``grep -c .
  FILE`` (a subprocess, its start included) is printed for reference only. One more explain run under
  tracemalloc gives the peak Python heap.
* **command**: ``python -m pytest_hetero.cli explain --from FILE`` (the ``hetero explain`` command, JSON
  to /dev/null) against ``grep -c . FILE``, both as subprocesses, wall time and peak resident memory
  (one more run of each under GNU ``time -f %M``). To say where the command's time goes, each round also times
  ``python -c pass`` (interpreter start with ``site``) and ``python -m pytest_hetero.cli explain --help``
  (start plus every import the command does, without reading anything).

Figures are medians with the [min-max] spread over the rounds; ratios are the median of the per-round
ratios with their spread. Lines/s is ``--lines`` divided by the median time. Informational: the exit
status is 0 unless the file cannot be built or read (aim: reading within 5x of the ``re`` baseline).

Usage: ``python bench/bench_explain.py [--lines N] [--repeat R] [--command-repeat C] [--keep FILE]``.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pytest_hetero.explain import explain_bytes

REAL = ROOT.parent / "shared" / "fixtures" / "real"
"""The real field outputs the log is assembled from."""


def build_log(lines: int, seed: int = 16) -> str:
    """Return a mixed log of exactly ``lines`` lines (``\\n``-terminated) assembled from the real fixtures
    in a fixed order; raises SystemExit when there are no fixtures."""
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


def _timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def _spawn(argv: Sequence[str], env: dict[str, str] | None = None) -> float:
    """Run ``argv`` with stdout/stderr to /dev/null; return its wall seconds (start to reaped)."""
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    return time.perf_counter() - start


def peak_rss(argv: Sequence[str], env: dict[str, str] | None = None) -> int | None:
    """Peak resident memory of ``argv`` in bytes, measured by GNU ``/usr/bin/time -f %M``; None when that
    tool is missing or prints no number.

    Not ``wait4``'s ``ru_maxrss``: Linux carries the parent's high-water mark across fork/vfork and exec, so
    a child of this (large) Python process would report this process's size, not its own.
    """
    timer = shutil.which("time", path="/usr/bin:/bin")
    if timer is None:
        return None
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as out:
        subprocess.run([timer, "-f", "%M", "-o", out.name, *argv], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=env, check=False)
        text = out.read().strip().splitlines()
    return int(text[-1]) * 1024 if text and text[-1].isdecimal() else None


def _fmt_ms(values: Sequence[float]) -> str:
    return f"{statistics.median(values) * 1000:8.1f} ms [{min(values) * 1000:.1f}-{max(values) * 1000:.1f}]"


def _fmt_ratio(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.1f}x [{min(values):.1f}-{max(values):.1f}]"


def _rate(lines: int, values: Sequence[float]) -> str:
    return f"{lines / statistics.median(values):>12,.0f} lines/s"


_READER_MODULES = (
    "pytest_hetero.explain.blocks", "pytest_hetero.explain.claim_nvidia", "pytest_hetero.explain.read_text",
    "pytest_hetero.explain.read_framework", "pytest_hetero.explain.read_nvidia", "pytest_hetero.explain.read_nvtools",
    "pytest_hetero.explain.read_platform", "pytest_hetero.explain.read_kube", "pytest_hetero.explain.read_ascend",
    "pytest_hetero.explain.context", "pytest_hetero.probes.line_prefix", "pytest_hetero.probes.kernel_log",
)
"""The modules whose compiled patterns the readers use (block claimers, line recognisers, kernel log, prefixes)."""


def reader_patterns() -> list[re.Pattern[str]]:
    """Every module-level compiled ``re.Pattern`` of :data:`_READER_MODULES` (deduplicated by pattern text)."""
    import importlib

    seen: dict[str, re.Pattern[str]] = {}
    for name in _READER_MODULES:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
                seen.setdefault(value.pattern, value)
    return list(seen.values())


def re_scan(path: Path, patterns: Sequence[re.Pattern[str]]) -> int:
    """The plain way of doing the readers' matching: read and decode the file, split it into lines and try every
    reader pattern (``search``) on every line; returns the number of hits."""
    hits = 0
    for line in path.read_bytes().decode("utf-8", errors="replace").splitlines():
        for pattern in patterns:
            if pattern.search(line):
                hits += 1
    return hits


def bench_reading(path: Path, lines: int, repeat: int) -> dict[str, list[float]]:
    """Interleaved rounds of the ``re`` baseline (:func:`re_scan`, in process), ``grep -c .`` (subprocess, for
    reference) and in-process ``explain_bytes``; returns the per-round seconds under ``re``, ``grep`` and
    ``explain`` and the explain CPU seconds under ``explain_cpu``."""
    grep = shutil.which("grep") or "grep"
    patterns = reader_patterns()
    out: dict[str, list[float]] = {"re": [], "grep": [], "explain": [], "explain_cpu": []}
    explain_bytes(path.read_bytes())  # warm: regex caches, lazy imports
    re_scan(path, patterns)
    for r in range(repeat):
        for who in (("re", "grep", "explain") if r % 2 == 0 else ("explain", "grep", "re")):
            if who == "re":
                out["re"].append(_timed(lambda: re_scan(path, patterns)))
            elif who == "grep":
                out["grep"].append(_spawn([grep, "-c", ".", str(path)]))
            else:
                cpu = time.process_time()
                out["explain"].append(_timed(lambda: explain_bytes(path.read_bytes())))
                out["explain_cpu"].append(time.process_time() - cpu)
    return out


def bench_command(path: Path, repeat: int) -> dict[str, list[float]]:
    """Interleaved rounds of four subprocesses: ``grep -c . FILE``, ``python -c pass``, ``python -m
    pytest_hetero.cli explain --help`` and ``python -m pytest_hetero.cli explain --from FILE``; returns
    seconds per round under ``grep``, ``python``, ``imports``, ``command``, and under the same names with
    ``_rss`` appended one :func:`peak_rss` in bytes (an empty list when it cannot be measured)."""
    grep = shutil.which("grep") or "grep"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    runs: dict[str, list[str]] = {
        "grep": [grep, "-c", ".", str(path)],
        "python": [sys.executable, "-c", "pass"],
        "imports": [sys.executable, "-m", "pytest_hetero.cli", "explain", "--help"],
        "command": [sys.executable, "-m", "pytest_hetero.cli", "explain", "--from", str(path)],
    }
    out: dict[str, list[float]] = {}
    _spawn(runs["command"], env)  # warm: .pyc files written, page cache filled
    names = list(runs)
    for r in range(repeat):
        for name in names if r % 2 == 0 else names[::-1]:
            out.setdefault(name, []).append(_spawn(runs[name], env))
    for name in names:
        rss = peak_rss(runs[name], env)
        out[name + "_rss"] = [] if rss is None else [float(rss)]
    return out


def main(argv: list[str] | None = None) -> int:
    """Build the log, run both comparisons, print times, lines/s, ratios and peak memory; returns 0."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=7, help="interleaved rounds of the reading comparison")
    parser.add_argument("--command-repeat", type=int, default=5, help="interleaved rounds of the command comparison")
    parser.add_argument("--keep", metavar="FILE", help="also write the generated log to FILE")
    args = parser.parse_args(argv)
    text = build_log(args.lines)
    n = args.lines
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mixed.log"
        path.write_text(text, encoding="utf-8")
        if args.keep:
            shutil.copyfile(path, args.keep)
        reading = bench_reading(path, n, args.repeat)
        tracemalloc.start()
        report = explain_bytes(path.read_bytes())
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        command = bench_command(path, args.command_repeat) if args.command_repeat > 0 else {}
    size = len(text.encode())
    print(f"input: {n} lines, {size / 1048576:.1f} MiB, {len(report.blocks)} blocks, {len(report.findings)} findings")
    print(f"reading, {args.repeat} interleaved rounds, median [min-max]:")
    print(f"  grep -c . FILE   {_fmt_ms(reading['grep'])} {_rate(n, reading['grep'])}  (process start included)")
    print(f"  explain_bytes    {_fmt_ms(reading['explain'])} {_rate(n, reading['explain'])}  "
          f"(CPU {statistics.median(reading['explain_cpu']) * 1000:.1f} ms)")
    print(f"  re baseline      {_fmt_ms(reading['re'])} {_rate(n, reading['re'])}  "
          f"({len(reader_patterns())} reader patterns searched on every line)")
    ratios = [e / b for e, b in zip(reading["explain"], reading["re"], strict=True)]
    print(f"  ratio explain/re: {_fmt_ratio(ratios)} (aim: within 5x)")
    ratios = [e / g for e, g in zip(reading["explain"], reading["grep"], strict=True)]
    print(f"  ratio explain/grep: {_fmt_ratio(ratios)} (reference only: grep matches no reader pattern)")
    print(f"  peak Python heap during explain: {peak / 1048576:.1f} MiB ({peak / max(1, size):.1f}x the input)")
    if command:
        rounds = len(command["grep"])
        print(f"command, {rounds} interleaved rounds, median [min-max]; peak RSS of one run:")
        labels = {"grep": "grep -c . FILE", "python": "python -c pass", "imports": "hetero explain --help",
                  "command": "hetero explain --from FILE"}
        for name, label in labels.items():
            rss = command[name + "_rss"]
            mib = f"{rss[0] / 1048576:6.1f} MiB" if rss else "   n/a"
            print(f"  {label:32s} {_fmt_ms(command[name])}  {mib}")
        ratios = [c / g for c, g in zip(command["command"], command["grep"], strict=True)]
        start = statistics.median(command["python"])
        imports = statistics.median(command["imports"]) - start
        rest = statistics.median(command["command"]) - statistics.median(command["imports"])
        print(f"  ratio command/grep: {_fmt_ratio(ratios)}; of the command's median, interpreter start "
              f"{start * 1000:.0f} ms, imports {imports * 1000:.0f} ms, reading and printing JSON {rest * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
