"""Overhead of host discovery through our probes versus the parser-free baseline.

Baseline: what a harness without parsers does — call the vendor tool once and keep its output
(``nvidia-smi -q -x``, ``npu-smi info``), or read the same /proc and /sys files (CPU).
Probe: :func:`probe_nvidia` (tool path, NVML off), :func:`probe_ascend`, :func:`probe_cpu`, which
do the same call and parse it into an Inventory. Both run in this one process, interleaved,
median of ``--rounds`` runs. Where the real tool is not on PATH, a replay tool (``sh`` + ``cat``)
prints the recorded output from shared/fixtures/real (an 8-GPU XML is built from the A100
capture). A replay costs a few ms where a real ``nvidia-smi -q -x`` on 8 GPUs takes hundreds, so
the tool ratios shown here are a worst case; the CPU baseline reads exactly the files the probe reads.

Prints one line per scenario: both medians, the absolute overhead (probe - baseline) in ms, the
ratio, and the parse-only time (the probe's parser on the tool output captured once, no tool
run; ``-`` for the CPU, whose reading and parsing are one step). Then the whole-discovery ratio
(target <= 1.10). The parse-only column shows how much of the overhead is parsing: with a
replay tool of a few ms, a 176 KB XML parsed in Python alone exceeds 10% of the call.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_hetero.probes.ascend import parse_npu_smi_info, probe_ascend
from pytest_hetero.probes.cpu import probe_cpu
from pytest_hetero.probes.nvidia import parse_nvidia_smi, probe_nvidia

REAL = ROOT.parent / "shared" / "fixtures" / "real"


def eight_gpu_xml() -> str:
    """The A100 capture with its <gpu> element repeated to 8 GPUs (about the size of a real one)."""
    xml = (REAL / "nvidia-smi-q-x-a100-sxm4-80gb-mig.xml").read_text()
    start, end = xml.index("<gpu "), xml.index("</gpu>") + len("</gpu>")
    return xml[:start] + xml[start:end] * 8 + xml[end:]


def replay_tools(where: Path) -> list[str]:
    """Install replay tools for the vendor tools missing from PATH; return their names."""
    made = []
    outputs = {
        "nvidia-smi": eight_gpu_xml(),
        "npu-smi": (REAL / "npu-smi-info-910a-8npu-warning.txt").read_text(),
    }
    for name, text in outputs.items():
        if shutil.which(name):
            continue
        (where / f"{name}.out").write_text(text)
        (where / name).write_text(f"#!/bin/sh\ncat '{where}/{name}.out'\n")
        (where / name).chmod(0o755)
        made.append(name)
    os.environ["PATH"] = f"{where}{os.pathsep}{os.environ['PATH']}"
    return made


def run_tool(*cmd: str) -> str:
    """Baseline: run the tool once and keep its stdout, nothing else."""
    return subprocess.run(cmd, capture_output=True, text=True, check=False, errors="replace").stdout


def files_read_by_cpu_probe() -> list[Path]:
    """Run the CPU probe once, recording every file it reads, so the baseline reads the same."""
    seen: list[Path] = []
    original = Path.read_text

    def recording(self: Path, *args: object, **kwargs: object) -> str:
        seen.append(self)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    Path.read_text = recording  # type: ignore[method-assign]
    try:
        probe_cpu("/")
    finally:
        Path.read_text = original  # type: ignore[method-assign]
    return seen


def read_files(paths: list[Path]) -> int:
    """Baseline for the CPU: read the same files the probe reads; returns bytes read."""
    total = 0
    for path in paths:
        try:
            with open(path, "rb") as handle:
                total += len(handle.read())
        except OSError:
            pass
    return total


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes (wall clock)."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    """Run every scenario ``--rounds`` times, interleaved, and print medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        replayed = replay_tools(Path(tmp))
        cpu_files = files_read_by_cpu_probe()
        smi_xml, npu_text = run_tool("nvidia-smi", "-q", "-x"), run_tool("npu-smi", "info")
        scenarios: list[
            tuple[str, Callable[[], object], Callable[[], object], Callable[[], object] | None]
        ] = [
            (
                "nvidia-smi -q -x, 8 GPUs",
                lambda: run_tool("nvidia-smi", "-q", "-x"),
                lambda: probe_nvidia("/", use_nvml=False),
                lambda: parse_nvidia_smi(smi_xml),
            ),
            (
                "npu-smi info, 8 NPUs",
                lambda: run_tool("npu-smi", "info"),
                lambda: probe_ascend("/", {}),
                lambda: parse_npu_smi_info(npu_text),
            ),
            ("cpu /proc + /sys + cgroup", lambda: read_files(cpu_files), lambda: probe_cpu("/"), None),
        ]
        for _name, base, probe, parse in scenarios:  # warm caches and imports
            base(), probe(), parse and parse()
        base_total = probe_total = 0.0
        for name, base, probe, parse in scenarios:
            b_times, p_times, parse_times = [], [], []
            for _ in range(args.rounds):
                b_times.append(timed(base))
                p_times.append(timed(probe))
                if parse:
                    parse_times.append(timed(parse))
            b, p = statistics.median(b_times), statistics.median(p_times)
            parsed = f"{statistics.median(parse_times) * 1000:6.2f} ms" if parse_times else "     -"
            base_total, probe_total = base_total + b, probe_total + p
            print(
                f"{name:28s} baseline {b * 1000:8.2f} ms  probe {p * 1000:8.2f} ms  "
                f"overhead {(p - b) * 1000:7.2f} ms  ratio {p / b:5.2f}  parse only {parsed}"
            )
        ratio = probe_total / base_total
        note = f" (replayed: {', '.join(replayed)})" if replayed else ""
        print(
            f"whole host discovery: baseline {base_total * 1000:.2f} ms, probe {probe_total * 1000:.2f} ms, "
            f"overhead {(probe_total - base_total) * 1000:.2f} ms, ratio {ratio:.2f} (target <= 1.10){note}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
