"""Benchmark: start-up cost of the ``hetero`` command and of the pytest plugin, as ratios.

Each measurement is a fresh process (wall seconds), run interleaved A/B/… ``--repeat`` times so a
loaded machine slows every variant alike; prints the median, the spread (min–max) and the ratio
of medians:

* ``python -c pass`` (the interpreter alone) vs ``python -m pytest_hetero.cli --version`` and
  ``--help``. Target: each ≤ 0.3 s (before this layout: 5–7 s on a loaded 2-core machine).
* ``pytest --co -q`` in an empty project (no matrix) with ``-p no:hetero -p no:hetero_serving``
  vs with the plugin (``hetero_serving`` is the former second entry point, blocked too in case an
  older install still declares it). Target: ratio ≤ 1.2.

Usage: ``python bench/bench_startup.py [--repeat 15]``; the package under test is the one
``python -c "import pytest_hetero"`` finds (set PYTHONPATH to try a working tree).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def wall(argv: list[str], cwd: Path) -> float:
    """Seconds one process running ``argv`` in ``cwd`` takes; raises when it fails."""
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 5):  # pytest: 5 = no tests collected, the point of an empty project
        raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return seconds


def measure(variants: dict[str, list[str]], cwd: Path, repeat: int) -> dict[str, list[float]]:
    """Run every variant once per round, ``repeat`` rounds (after one warm-up round)."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(repeat + 1):
        for name, argv in variants.items():
            seconds = wall(argv, cwd)
            if round_:
                times[name].append(seconds)
    return times


def line(name: str, samples: list[float], base: list[float] | None) -> str:
    """``name  median  (min–max)  ratio``."""
    median = statistics.median(samples)
    ratio = f"  ratio {median / statistics.median(base):.2f}" if base else ""
    return f"  {name:<34} median {median:6.3f} s  (spread {min(samples):.3f}–{max(samples):.3f}){ratio}"


def main() -> int:
    """Measure and print; exit 0 (the targets are read off the output)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="rounds per variant (default 15)")
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="hetero-bench-startup-") as tmp:
        empty = Path(tmp)
        (empty / "pyproject.toml").write_text("[tool.pytest.ini_options]\n", encoding="utf-8")
        cli = measure({"python -c pass": [python, "-c", "pass"],
                       "hetero --version": [python, "-m", "pytest_hetero.cli", "--version"],
                       "hetero --help": [python, "-m", "pytest_hetero.cli", "--help"]}, empty, args.repeat)
        pytest_run = [python, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"]
        plugin = measure({"pytest --co (without the plugin)": [*pytest_run, "-p", "no:hetero",
                                                                "-p", "no:hetero_serving"],
                          "pytest --co (with the plugin)": pytest_run}, empty, args.repeat)
    print(f"start-up, {args.repeat} interleaved rounds on {os.cpu_count()} CPUs "
          f"(load average {os.getloadavg()[0]:.1f}):")
    base = cli["python -c pass"]
    print(line("python -c pass", base, None))
    for name in ("hetero --version", "hetero --help"):
        print(line(name, cli[name], base) + "  (vs the interpreter alone; target ≤ 0.3 s)")
    without = plugin["pytest --co (without the plugin)"]
    print(line("pytest --co (without the plugin)", without, None))
    print(line("pytest --co (with the plugin)", plugin["pytest --co (with the plugin)"], without)
          + "  (target ≤ 1.20)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
