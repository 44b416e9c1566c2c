"""Benchmark: a full local run of N model items (100, 1,000, 10,000) against plain parametrised pytest
running the same subprocess once per item.

Gate: ``python -m pytest <matrix> -m model`` in a fresh process: 1 resource × 1 image × N/10 models
× 10 datasets on the local backend; every model item runs the entrypoint ``/bin/sh -c 'printf …
> OUTPUTS'`` confined (bubblewrap, see ``backends/sandbox/``), and the run writes its whole
bundle (journal, evidence.json, renderings, manifest, unsigned statement). Everything the command
does is timed: interpreter start, collection, items, bundle.

Baselines, each a fresh ``python -m pytest`` of one test function parametrised N times:

- ``plain``: ``subprocess.run(["/bin/sh", "-c", …])``, the same command unconfined, writing the
  same outputs file (per-item cost of pytest plus the model process itself);
- ``plain+session-sandbox``: the same command confined the way the gate confines it, through the gate's own
  runner (``backends.local.run_confined`` with one ``Sandbox`` per pytest session, so runs are forked by the
  session's bubblewrap, ``backends/sandbox/zygote.py``, exactly as the gate's are) and its outputs read with
  ``read_outputs``: the same confined subprocess the gate runs, without the gate's matrix, layers, evidence
  and bundle. **The target's baseline** (issue 32's decision);
- ``plain+sandbox``: the same, started through the bwrap command line the gate builds for a
  bubblewrap per run (``HETERO_SANDBOX_SHARED=off``: what that confinement costs, without the gate's
  evidence). Reported: it is not the confinement the gate uses when it runs as root.

``--only gate,gate-per-run`` compares the gate with itself starting a bubblewrap per run
(``HETERO_SANDBOX_SHARED=off``): what the session sandbox saves (``ratio_gate_per_run``).
``--per-run`` (or ``--only gate,gate-spread``) compares the gate with itself under ``--hetero-model-runs per-run
--hetero-concurrency free`` (issue 32: each model run a sandbox of its own pinned to a CPU of this host, as many
at once as it has CPUs): ``spread_over_gate`` is its per-item time over the shared mode's (> 1: slower).

Rounds alternate the runs (interleaved) at each size. Reported per size: wall
(median and min–max over rounds), peak RSS of the pytest process (its own VmHWM, MiB: ``wait4``'s
``ru_maxrss`` would carry this process's high-water mark across fork and exec), per-item cost (wall / N,
ms) and the ratios gate/plain+session-sandbox, gate/plain (unconfined) and gate/plain+sandbox; the same
ratios of CPU time (user + system of the command and everything it reaped, ``cpu_ratio_*``: the work
each does, which a machine shared with other builds inflates less than the wall time). Target
(issue 20.1 as issue 32 decided it): gate ≤ 1.3× plain+session-sandbox per model item at 1k and 10k, the
unconfined ratio reported beside it; prints the verdict.
Usage: ``python bench/bench_local_scale.py [--sizes 100,1000,10000] [--rounds 3,3,2]``.
``--item-phases`` runs the gate once at the first size with ``bench/item_clock.py`` loaded and prints
where an item's wall time goes (ms per item, by function).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_hetero.backends.local import run_folder  # noqa: E402
from pytest_hetero.backends.sandbox import (
    Sandbox,  # noqa: E402
    child_environment,  # noqa: E402
)

TARGET = 1.3
RUNS = ("gate", "plain+session-sandbox", "plain", "plain+sandbox", "gate-per-run", "gate-spread")
SCRIPT = "printf '{\"metrics\": {\"accuracy\": 1}}' > \"$1\""
DATA = ROOT / "cases" / "digits" / "data" / "digits-test-1.0.0.csv"
MODEL = ROOT / "cases" / "digits" / "model" / "digits-logreg-1.0.0.onnx"

PLAIN = '''
import os, subprocess, tempfile, pytest
ARGV = {argv!r}
IDS = [int(a.split("=", 1)[1]) for a in ARGV if a.startswith(("--reuid=", "--regid="))]
@pytest.mark.parametrize("i", range({n}))
def test_item(i):
    with tempfile.TemporaryDirectory(prefix="bench-plain-") as tmp:
        if IDS:  # the sandbox user writes the run folder, as in the gate
            os.chown(tmp, IDS[0], IDS[1])
        out = os.path.join(tmp, "outputs.json")
        argv = [a.replace("@OUT@", out).replace("@TMP@", tmp) for a in ARGV]
        proc = subprocess.run(argv, capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert open(out).read()
'''


SESSION_SANDBOX = '''
import pytest
from pathlib import Path
from pytest_hetero.backends.local import read_outputs, run_confined, run_folder
from pytest_hetero.backends.sandbox import Sandbox, child_environment
FOLDER = Path({folder!r})
SCRIPT = {script!r}
@pytest.fixture(scope="session")
def sandbox():
    box = Sandbox([FOLDER / "reports"])
    yield box
    box.close()
@pytest.mark.parametrize("i", range({n}))
def test_item(sandbox, i):
    with run_folder() as tmp:
        out = tmp / "outputs.json"
        env = child_environment({{}}, tmp, passed=sandbox.passed)
        launch, result = run_confined(sandbox, ["/bin/sh", "-c", SCRIPT, "sh", str(out)], cwd=FOLDER, run_dir=tmp,
                                      env=env, inputs=[FOLDER], timeout_s=60)
        assert result.exit_code == 0, result.stderr
        assert launch.confinement.mechanism == "bubblewrap"
        assert read_outputs(out)
'''
"""Plain pytest running the gate's confined subprocess: one ``Sandbox`` per session, each item through
``run_confined`` (a run forked by the session's bubblewrap when the bench runs as root), outputs read as the
gate reads them."""


def write_matrix(folder: Path, n: int) -> Path:
    """A matrix of ``n`` model items (n/10 models × 10 datasets) on one resource and image."""
    datasets = 10 if n >= 10 else 1
    model, data = folder / MODEL.name, folder / DATA.name  # inputs live under the matrix's folder (its boundary)
    shutil.copyfile(MODEL, model)
    shutil.copyfile(DATA, data)
    models = [{"name": f"m{i}", "version": "1", "uri": str(model), "code": str(folder),
               "sha256": "d2230a9096140b09d443879ca3b0d7cb0021917896a8f462f79806de1109b523",
               "entrypoint": ["/bin/sh", "-c", SCRIPT.replace("{", "{{").replace("}", "}}"), "sh", "{outputs}"]}
              for i in range(n // datasets)]
    doc = {"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": "scale"},
           "spec": {"target": {"backend": "local"}, "layers": {"model": {"timeout": "60s"}},
                    "resources": [{"name": "cpu", "type": "cpu", "requests": {"cpu": 1}}],
                    "images": [{"name": "py", "reference": "python:current"}],
                    "models": models,
                    "datasets": [{"name": f"d{i}", "version": "1", "uri": str(data),
                                  "sha256": "3678e2fa8f107ffa5d8518cc07a46b9e4ce67e89d65b2f88e4c391638d965bfb"}
                                 for i in range(datasets)]}}
    path = folder / "scale.matrix.yaml"
    path.write_text(json.dumps(doc))
    return path


def sandboxed_argv(folder: Path) -> list[str]:
    """The bwrap command line the gate builds for one item when each run gets a bubblewrap of its own
    (``HETERO_SANDBOX_SHARED=off``), with its arguments inline (``@OUT@``/``@TMP@`` stand for the run
    folder's outputs file and the folder)."""
    sandbox = Sandbox([folder / "reports"])
    sandbox.shared = False
    with run_folder() as tmp:
        env = child_environment({}, tmp, passed=sandbox.passed)
        launch = sandbox.prepare(["/bin/sh", "-c", SCRIPT, "sh", str(tmp / "outputs.json")], cwd=folder,
                                 run_dir=tmp, inputs=[folder], env=env)
    if launch.confinement.mechanism != "bubblewrap":
        raise SystemExit(f"no sandbox here: {launch.confinement.reason}")
    args = [a for a in launch.args.decode().split("\0") if a]
    bwrap = launch.argv[0]
    inner = launch.argv[launch.argv.index("--") + 1:]
    line = [bwrap, *args, "--", *inner]
    return [a.replace(str(tmp / "outputs.json"), "@OUT@").replace(str(tmp), "@TMP@") for a in line]


PEAK = ("import atexit, runpy, sys\n"
        "def _peak():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'):\n"
        "            sys.stderr.write('PEAK ' + line.split()[1] + '\\n')\n"
        "atexit.register(_peak)\n"
        "sys.argv = ['pytest', *sys.argv[1:]]\n"
        "runpy.run_module('pytest', run_name='__main__')\n")
"""``python -c PEAK ARGS…`` runs ``python -m pytest ARGS…`` and prints its own peak RSS (VmHWM, KiB) at exit."""


def timed(argv: list[str], cwd: Path, extra_env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Run ``python -m pytest ARGS`` (``argv`` is ``[python, "-m", "pytest", ARGS…]``); (wall seconds, peak RSS MiB
    of the pytest process, CPU seconds: user + system of the process and every process it reaped, the sandboxes
    and model runs included). Raises SystemExit when it fails."""
    start = time.perf_counter()
    proc = subprocess.Popen([argv[0], "-c", PEAK, *argv[3:]], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(ROOT), **(extra_env or {})})
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv[:6])} failed:\n{out.decode(errors='replace')[-3000:]}")
    peak = [line for line in out.decode(errors="replace").splitlines() if line.startswith("PEAK ")]
    return wall, int(peak[-1].split()[1]) / 1024.0, usage.ru_utime + usage.ru_stime


def one_size(n: int, rounds: int, only: tuple[str, ...] = RUNS) -> dict[str, object]:
    """Interleaved rounds of the runs ``only`` (default all three) at size ``n``."""
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in only}
    with tempfile.TemporaryDirectory(prefix="hetero-scale-") as tmp:
        folder = Path(tmp)
        folder.chmod(0o755)
        matrix = write_matrix(folder, n)
        plain = folder / "test_plain.py"
        sandboxed = folder / "test_sandboxed.py"
        plain.write_text(PLAIN.format(argv=["/bin/sh", "-c", SCRIPT, "sh", "@OUT@"], n=n))
        sandboxed.write_text(PLAIN.format(argv=sandboxed_argv(folder), n=n))
        session = folder / "test_session_sandbox.py"
        session.write_text(SESSION_SANDBOX.format(folder=str(folder), script=SCRIPT, n=n))
        common = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
        gate_argv = [*common, str(matrix), "-m", "model", "--hetero-report-dir", str(folder / "reports")]
        commands = {"gate": gate_argv, "plain": [*common, str(plain)], "plain+sandbox": [*common, str(sandboxed)],
                    "plain+session-sandbox": [*common, str(session)], "gate-per-run": gate_argv,
                    "gate-spread": [*gate_argv, "--hetero-model-runs", "per-run", "--hetero-concurrency", "free"]}
        for r in range(rounds):
            for name in only:
                argv = commands[name]
                shutil.rmtree(folder / "reports", ignore_errors=True)
                runs[name].append(timed(argv, folder, {"HETERO_SANDBOX_SHARED": "off"} if name == "gate-per-run"
                                        else None))
                wall, mib, cpu = runs[name][-1]
                print(f"  n={n} round {r + 1} {name}: {wall:.2f} s, {mib:.0f} MiB, CPU {cpu:.2f} s (load average "
                      f"{os.getloadavg()[0]:.1f})", flush=True)
    out: dict[str, object] = {"n": n}
    for name, values in runs.items():
        walls, cpus = [w for w, _, _ in values], [c for _, _, c in values]
        out[name] = {"wall_s": round(statistics.median(walls), 3), "min_s": round(min(walls), 3),
                     "max_s": round(max(walls), 3), "peak_mib": round(max(m for _, m, _ in values), 1),
                     "per_item_ms": round(statistics.median(walls) / n * 1000, 3),
                     "cpu_s": round(statistics.median(cpus), 3), "cpu_min_s": round(min(cpus), 3),
                     "cpu_max_s": round(max(cpus), 3)}
    gate = statistics.median(w for w, _, _ in runs["gate"])
    gate_cpu = statistics.median(c for _, _, c in runs["gate"])
    for name, key in (("plain+session-sandbox", "ratio_plain_session_sandbox"), ("plain", "ratio_plain"),
                      ("plain+sandbox", "ratio_plain_sandbox"), ("gate-per-run", "ratio_gate_per_run")):
        if name in runs:
            out[key] = round(gate / statistics.median(w for w, _, _ in runs[name]), 2)
            out["cpu_" + key] = round(gate_cpu / statistics.median(c for _, _, c in runs[name]), 2)
    if "gate-spread" in runs:  # the other way round: per-run model runs' cost over the shared mode's
        out["spread_over_gate"] = round(statistics.median(w for w, _, _ in runs["gate-spread"]) / gate, 2)
        out["cpu_spread_over_gate"] = round(statistics.median(c for _, _, c in runs["gate-spread"]) / gate_cpu, 2)
    out["load_average"] = round(os.getloadavg()[0], 1)
    return out


def spawn_cost(repeat: int = 40) -> None:
    """Start cost of one child (``/bin/true``) as the local backend starts it (no ``preexec_fn``: vfork),
    against the former ``preexec_fn`` start (a full fork, whose cost grows with the heap), at a small
    heap and with 1 GiB allocated; medians in ms, interleaved."""
    from pytest_hetero.signals import parent_death_signal

    def once(preexec: bool) -> float:
        start = time.perf_counter()
        kwargs: dict[str, object] = {"preexec_fn": lambda: parent_death_signal(9)} if preexec else {}
        subprocess.Popen(["/bin/true"], start_new_session=True, **kwargs).wait()  # type: ignore[call-overload]
        return time.perf_counter() - start

    ballast: list[bytearray] = []
    for heap in ("small heap", "1 GiB heap"):
        if heap != "small heap":
            ballast = [bytearray(b"x" * (1 << 20)) for _ in range(1024)]
        now: list[float] = []
        before: list[float] = []
        for _ in range(repeat):
            now.append(once(False))
            before.append(once(True))
        print(f"spawn {heap}: without preexec_fn {statistics.median(now) * 1000:.2f} ms, "
              f"with preexec_fn {statistics.median(before) * 1000:.2f} ms", flush=True)
    del ballast


def item_phases(n: int) -> int:
    """One gate run of ``n`` model items with ``bench/item_clock.py`` loaded; print its table."""
    with tempfile.TemporaryDirectory(prefix="hetero-scale-") as tmp:
        folder = Path(tmp)
        folder.chmod(0o755)
        matrix = write_matrix(folder, n)
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                               "-p", "item_clock", str(matrix), "-m", "model", "--hetero-report-dir",
                               str(folder / "reports")], cwd=folder, capture_output=True, text=True, check=False,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "bench")])})
    if proc.returncode != 0:
        raise SystemExit(f"gate failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    print(f"{n} model items, load average {os.getloadavg()[0]:.1f}; ms per item by function (nested ones overlap)")
    print("\n".join(line for line in proc.stderr.splitlines() if line.startswith("ITEM ")))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run every size; print one JSON line per size and the verdict; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--rounds", default="3,3,2", help="rounds per size (one value, or one per size)")
    parser.add_argument("--spawn", action="store_true", help="only measure the start cost of one child")
    parser.add_argument("--only", default=",".join(RUNS[:3]),
                        help="runs to make (gate always), comma-separated; gate-per-run: the gate with a bubblewrap "
                             "per run (HETERO_SANDBOX_SHARED=off), the A/B of the session sandbox")
    parser.add_argument("--item-phases", action="store_true", help="one gate run timed by function (item_clock)")
    parser.add_argument("--per-run", action="store_true",
                        help="the gate against itself with --hetero-model-runs per-run (gate,gate-spread)")
    args = parser.parse_args(argv)
    if args.spawn:
        spawn_cost()
        return 0
    if args.item_phases:
        return item_phases(int(args.sizes.split(",")[0]))
    sizes = [int(s) for s in args.sizes.split(",")]
    rounds = [int(r) for r in args.rounds.split(",")]
    rounds += [rounds[-1]] * (len(sizes) - len(rounds))
    results = []
    only = tuple(dict.fromkeys(["gate", *(x for x in args.only.split(",") if x in RUNS)]))
    if args.per_run:
        only = ("gate", "gate-spread")
    for n, r in zip(sizes, rounds, strict=True):
        results.append(one_size(n, r, only))
        print(json.dumps(results[-1]), flush=True)
    print("size   gate ms/item  plain+session-sandbox ms/item  plain ms/item  gate/plain+session-sandbox  "
          "gate/plain  gate/plain+sandbox  gate peak MiB  CPU gate/plain+session-sandbox  gate/gate-per-run  "
          "gate-spread ms/item  gate-spread/gate")
    for res in results:
        g, z, p, sp = (res.get(k) or {} for k in (*RUNS[:3], "gate-spread"))
        assert isinstance(g, dict) and isinstance(z, dict) and isinstance(p, dict) and isinstance(sp, dict)
        print(f"{res['n']:>6} {g['per_item_ms']:>12} {z.get('per_item_ms', '-'):>30} {p.get('per_item_ms', '-'):>14} "
              f"{res.get('ratio_plain_session_sandbox', '-'):>27} {res.get('ratio_plain', '-'):>11} "
              f"{res.get('ratio_plain_sandbox', '-'):>19} {g['peak_mib']:>14} "
              f"{res.get('cpu_ratio_plain_session_sandbox', '-'):>31} {res.get('ratio_gate_per_run', '-'):>18} "
              f"{sp.get('per_item_ms', '-'):>20} {res.get('spread_over_gate', '-'):>17}")
    if args.per_run:  # no target of its own: the figure is reported
        return 0
    big = [r for r in results if int(str(r["n"])) >= 1000 and "ratio_plain_session_sandbox" in r]
    ok = bool(big) and all(float(str(r["ratio_plain_session_sandbox"])) <= TARGET for r in big)
    print(f"target gate/plain+session-sandbox <= {TARGET} at 1k and 10k: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
