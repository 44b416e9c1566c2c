"""Overhead of the whole gate command on the Docker backend against the plain container sequence, on the real engine.

Gate: ``python -m pytest matrices/example-docker.matrix.yaml -k "startup or model or business"`` as
a fresh process, timed whole: interpreter start, plugin and engine client import, collection, the
items (one container per resource × image, device payload, model exec, outputs copied out),
container removal, and the whole bundle (journal, evidence.json, renderings, manifest, statement).

Plain: ``python bench/bench_docker_overhead.py --plain-once`` as a fresh process, timed whole:
interpreter start, docker SDK import, then the same sequence with the SDK: inspect the image,
create + start the container with the same limits and read-only mounts, exec the same device
payload, exec the same model command, copy ``outputs.json`` out, remove the container, and write
the outputs to a file. It leaves out what only the gate does: the matrix (YAML, schema, plan),
the per-layer verdicts and the evidence bundle; that is the overhead measured.

Rounds alternate gate and plain (interleaved) after one warm-up of each. Prints each round, the
medians with their spread (min–max) and ``ratio gate/plain = X.XX (target <= 1.15)``; exits 1 above
the target. Needs a Docker engine with ``pytest-hetero/py311-onnx:1`` (tests/infra/docker-engine.sh images).

``--breakdown`` splits the fixed cost instead (interleaved rounds, medians and spread), with
``bench/phase_clock.py`` loaded in every gate process to time its phases (interpreter and pytest import,
plugins loaded, configure, collection, each item, the bundle, the terminal summary, unconfigure,
interpreter exit). Variants: the two commands as above in the environment as given (``as given``);
both with Python's bytecode cache allowed, in a private ``PYTHONPYCACHEPREFIX`` warmed by the first
round (``bytecode``: what an installation whose ``.pyc`` files can be written sees; with
``PYTHONDONTWRITEBYTECODE=1`` every gate command compiles the plugin's modules and re-runs pytest's
assertion rewriting over every installed pytest plugin); and the gate with only its own plugin
(``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 -p hetero``, bytecode cached: the plugins the test extra
installs beside it, hypothesis, anyio, xdist, randomly, rerunfailures, pytest-html, left out).
``--local`` does the same breakdown for a local one-row matrix (startup, model and business on
``python:current``; no plain baseline: the phases only).

``--per-run N`` measures what one more model run costs (issue 32's Docker target: per model run ≤ 1.1× the plain
SDK doing the same run, pytest's fixed start reported separately): the gate on a matrix of N copies of the example's
model (``-k "startup or model"``) and on one, whole processes; the plain SDK process doing the same runs (one
container, the payload, then per run: the model exec and ``outputs.json`` copied out) for N and for 1. Per run =
(T(N) − T(1)) ÷ (N − 1) for each; fixed = T(1) − per run. ``--mode per-run`` gives the gate
``--hetero-model-runs per-run --hetero-concurrency 1`` (a container of its own per run, one at a time) and the
plain process a container created, started, exec'd, copied from and removed per run. Interleaved rounds, medians
with their spread.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import docker
import docker.types
import docker.utils

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_hetero.backends.docker import client as docker_run  # noqa: E402
from pytest_hetero.backends.labels import RUN_ID
from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.probes.payload import payload_script

MATRIX = ROOT / "matrices" / "example-docker.matrix.yaml"
TARGET = 1.15


def gate_once(report_dir: Path) -> float:
    """One whole gate command (startup, model and business items); returns wall seconds (raises on failure)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", str(MATRIX), "-q", "-p", "no:cacheprovider",
                           "-k", "startup or model or business", "--hetero-report-dir", str(report_dir)],
                          cwd=ROOT, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"gate run failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}")
    return seconds


def plain_once(out: Path) -> float:
    """One whole plain process (this script with ``--plain-once``); returns wall seconds."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--plain-once", str(out)], capture_output=True, text=True,
                          check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"plain run failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds


def direct_once(api: docker.APIClient, out: Path) -> float:
    """The same container run/exec sequence with the docker SDK only (:func:`direct_runs` of one run), outputs
    written to ``out``; returns seconds."""
    start = time.perf_counter()
    direct_runs(api, out, 1, False)
    return time.perf_counter() - start


def copies_matrix(folder: Path, n: int, per_run: bool) -> Path:
    """The example matrix with ``n`` copies of its model (``m1``…, the same files), written in ``folder`` beside a
    copy of the digits case; ``per_run``: its resource says ``model_runs: per-run``, ``concurrency: 1``."""
    if not (folder / "digits").exists():
        shutil.copytree(ROOT / "cases" / "digits", folder / "digits")
    text = MATRIX.read_text().replace("../cases/digits", "digits")
    head, _, rest = text.partition("  models:\n")
    model, _, tail = rest.partition("  datasets:\n")
    body = "".join(model.replace("name: digits-logreg", f"name: m{i}") for i in range(1, n + 1))
    text = head + "  models:\n" + body + "  datasets:\n" + tail
    if per_run:
        text = text.replace("      expect:\n        min_cpus: 1\n",
                            "      model_runs: per-run\n      concurrency: 1\n      expect:\n        min_cpus: 1\n")
    path = folder / f"copies-{n}-{'per-run' if per_run else 'shared'}.matrix.yaml"
    path.write_text(text)
    return path


def direct_runs(api: docker.APIClient, out: Path, n: int, per_run: bool) -> None:
    """The plain SDK doing ``n`` model runs: one container (created, started, device payload exec'd) then per run
    the model exec and ``outputs.json`` copied out; ``per_run``: a container per run (created, started, the model
    exec'd, copied from, removed). Raises SystemExit when a run fails."""
    matrix = load_matrix(MATRIX)
    image, model, data = matrix.images[0], matrix.models[0], matrix.datasets[0]
    code = model.code or MATRIX.parent
    mounts = [docker.types.Mount(m["target"], m["source"], type="bind", read_only=True)
              for m in docker_run.input_mounts([(model.name, model.path, code)], [(data.name, data.path)])]
    memory = 512 * 2**20
    paths = docker_run.container_paths(model.name, model.path, code, data.name, data.path)
    argv = ["python3", f"{paths['code']}/infer.py", "--model", paths["model"], "--data", paths["dataset"],
            "--out", "/tmp/outputs.json", "--provider", "CPUExecutionProvider"]
    api.inspect_image(image.reference)  # type: ignore[no-untyped-call]  # (untyped in types-docker)

    def container() -> str:
        host = api.create_host_config(nano_cpus=2 * 10**9, mem_limit=memory, memswap_limit=memory,
                                      network_mode="none", mounts=mounts)
        cid = str(api.create_container(image.reference, command=docker_run.KEEP_ALIVE, host_config=host,
                                       labels={RUN_ID: "bench-direct"})["Id"])
        api.start(cid)
        return cid

    def one(cid: str, i: int) -> None:
        ex = api.exec_create(cid, argv, workdir=paths["code"])
        api.exec_start(ex["Id"], demux=True)
        if api.exec_inspect(ex["Id"])["ExitCode"] != 0:
            raise SystemExit(f"direct model run {i} failed")
        stream, _ = api.get_archive(cid, "/tmp/outputs.json")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.next()
            fh = tar.extractfile(member) if member is not None else None
            assert fh is not None
            out.write_bytes(fh.read())

    if per_run:
        for i in range(n):
            cid = container()
            try:
                one(cid, i)
            finally:
                api.remove_container(cid, force=True, v=True)
        return
    cid = container()
    try:
        api.exec_start(api.exec_create(cid, ["/bin/sh", "-c", payload_script()])["Id"])
        for i in range(n):
            one(cid, i)
    finally:
        api.remove_container(cid, force=True, v=True)


def per_run_report(n: int, rounds: int, per_run: bool) -> int:
    """The ``--per-run N`` report (module docstring); exit 0 when the per-run ratio is within 1.1."""
    with tempfile.TemporaryDirectory(prefix="hetero-perrun-") as tmp:
        folder = Path(tmp)
        folder.chmod(0o755)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        mode = ["--mode", "per-run"] if per_run else []
        cmds = {f"gate {k}": [sys.executable, "-m", "pytest", str(copies_matrix(folder, k, per_run)), "-q",
                              "-p", "no:cacheprovider", "-k", "startup or model",
                              "--hetero-report-dir", str(folder / "reports")] for k in (1, n)}
        cmds.update({f"plain {k}": [sys.executable, __file__, "--plain-runs", str(k), *mode,
                                    str(folder / "outputs.json")] for k in (1, n)})
        walls: dict[str, list[float]] = {name: [] for name in cmds}
        cpus: dict[str, list[float]] = {name: [] for name in cmds}
        for r in range(rounds + 1):  # round 0 warms the engine and the bytecode; not counted
            for name, argv in cmds.items():
                code, output, wall, cpu = run_measured(argv, env, ROOT)
                if code != 0:
                    raise SystemExit(f"{name} failed (exit {code}):\n{output[-3000:]}")
                if r:
                    walls[name].append(wall)
                    cpus[name].append(cpu)
            if r:
                print(f"round {r}: " + "  ".join(f"{k} {v[-1]:.2f} s" for k, v in walls.items()), flush=True)
    med = {k: statistics.median(v) for k, v in walls.items()}
    per = {who: (med[f"{who} {n}"] - med[f"{who} 1"]) / (n - 1) for who in ("gate", "plain")}
    each = {who: [(b - a) / (n - 1) for a, b in zip(walls[f"{who} 1"], walls[f"{who} {n}"], strict=True)]
            for who in ("gate", "plain")}
    print(f"docker, cpu-2c x py311-onnx, {'a container per run' if per_run else 'one container'}; {n} runs against "
          f"1, {rounds} interleaved rounds; load average {os.getloadavg()[0]:.1f}")
    for name in cmds:
        print(f"{name:<10} {spread(walls[name])}, CPU {spread(cpus[name])}")
    for who in ("gate", "plain"):
        print(f"{who}: per run {per[who]:.3f} s (rounds {min(each[who]):.3f}-{max(each[who]):.3f}), fixed "
              f"{med[f'{who} 1'] - per[who]:.3f} s")
    ratio = per["gate"] / per["plain"]
    print(f"ratio per model run gate/plain = {ratio:.2f} (target <= 1.1); fixed start gate/plain = "
          f"{(med['gate 1'] - per['gate']) / (med['plain 1'] - per['plain']):.2f} (reported, no target)")
    return 0 if ratio <= 1.1 else 1


def spread(values: list[float]) -> str:
    """``median s (min–max)``."""
    return f"{statistics.median(values):.3f} s ({min(values):.3f}–{max(values):.3f})"


PHASES = (("interpreter + pytest import", None, "loaded"), ("installed plugins loaded", "loaded", "configure"),
          ("configure", "configure", "collection_start"), ("collection", "collection_start", "collection_end"),
          ("items", "loop_start", "loop_end"), ("session finish (bundle)", "finish_start", "summary_start"),
          ("terminal summary", "summary_start", "finish_end"), ("unconfigure", "unconfigure_start", "unconfigure_end"),
          ("interpreter exit", "exit", None))
"""(label, from mark, to mark) of :mod:`phase_clock`; None: the parent's clock (spawn, reaped)."""


def run_measured(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, float, float]:
    """Run ``argv``: (exit code, its output, wall seconds, CPU seconds: user + system of the process and of
    what it reaped; the engine's own work is in neither command's figure)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    if proc.stdout:
        proc.stdout.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, out.decode(errors="replace"), time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def phased_once(argv: list[str], env: dict[str, str], cwd: Path, out: Path) -> tuple[float, dict[str, float]]:
    """One gate process with ``phase_clock`` loaded: (wall seconds, {phase: seconds}, items by layer name
    too). Raises SystemExit on failure (exit 1, a failed item, is accepted: the local one-row matrix has a
    business item with no rules)."""
    env = {**env, "HETERO_PHASES_OUT": str(out),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "bench")])}
    start = time.time()
    code, output, _, cpu = run_measured([*argv, "-p", "phase_clock"], env, cwd)
    end = time.time()
    if code not in (0, 1) or not out.exists():
        raise SystemExit(f"gate run failed (exit {code}):\n{output[-4000:]}")
    data = json.loads(out.read_text())
    out.unlink()
    marks = {**data["marks"]}
    phases = {label: (marks[b] if b else end) - (marks[a] if a else start) for label, a, b in PHASES
              if (a is None or a in marks) and (b is None or b in marks)}
    for nodeid, s, e in data["items"]:
        key = "  item " + nodeid.rsplit("::", 1)[-1]
        phases[key] = phases.get(key, 0.0) + (e - s)
    phases["CPU of the process"] = cpu
    return end - start, phases


def breakdown(rounds: int, local: bool) -> int:
    """The ``--breakdown`` / ``--local`` report: interleaved variants, each phase's median and spread."""
    with tempfile.TemporaryDirectory(prefix="hetero-breakdown-") as tmp:
        folder = Path(tmp)
        folder.chmod(0o755)
        given = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", "HETERO_PHASES_OUT")}
        cached = {k: v for k, v in given.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
        alone = {**cached, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        if local:
            matrix, cwd, selection = local_matrix(folder), folder, []
        else:
            matrix, cwd, selection = MATRIX, ROOT, ["-k", "startup or model or business"]
        gate = [sys.executable, "-m", "pytest", str(matrix), "-q", "-p", "no:cacheprovider", *selection,
                "--hetero-report-dir", str(folder / "reports")]
        variants: dict[str, tuple[list[str], dict[str, str]]] = {
            "gate, as given": (gate, given), "gate, bytecode": (gate, cached),
            "gate alone, bytecode": ([*gate, "-p", "hetero"], alone)}
        walls: dict[str, list[float]] = {name: [] for name in variants}
        phases: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
        plain: dict[str, list[tuple[float, float]]] = {"plain, as given": [], "plain, bytecode": []}
        plain_env = {"plain, as given": given, "plain, bytecode": cached}
        for r in range(rounds + 1):  # round 0 warms the bytecode cache and the engine; not counted
            for name, (argv, env) in variants.items():
                wall, seen = phased_once(argv, env, cwd, folder / "phases.json")
                if r:
                    walls[name].append(wall)
                    phases[name].append(seen)
            if not local:
                for name, env in plain_env.items():
                    measured = plain_timed(env, folder / "outputs.json")
                    if r:
                        plain[name].append(measured)
            if r:
                print(f"round {r}: " + "  ".join([*(f"{n} {w[-1]:.2f} s" for n, w in walls.items()),
                                                  *(f"{n} {w[-1][0]:.2f} s" for n, w in plain.items() if w)]),
                      flush=True)
    report(rounds, local, walls, phases, plain)
    return 0


def report(rounds: int, local: bool, walls: dict[str, list[float]], phases: dict[str, list[dict[str, float]]],
           plain: dict[str, list[tuple[float, float]]]) -> None:
    """Print the breakdown table: one column per gate variant, one row per phase, then the ratios."""
    print(f"{'local one-row matrix' if local else 'docker: cpu-2c x py311-onnx, startup + model + business'}; "
          f"{rounds} interleaved rounds, medians (min-max), seconds; load average {os.getloadavg()[0]:.1f}")
    names = list(walls)
    labels = list(dict.fromkeys(k for name in names for seen in phases[name] for k in seen))
    print(f"{'phase':<32}" + "".join(f"{n:>28}" for n in names))
    for label in labels:
        cells = []
        for name in names:
            values = [seen.get(label, 0.0) for seen in phases[name]]
            cells.append(f"{statistics.median(values):.3f} ({min(values):.2f}-{max(values):.2f})")
        print(f"{label:<32}" + "".join(f"{c:>28}" for c in cells))
    print(f"{'whole process':<32}" + "".join(f"{spread(walls[n]):>28}" for n in names))
    if not local:
        for name, pairs in plain.items():
            print(f"{name:<32}{spread([w for w, _ in pairs])}, CPU {spread([c for _, c in pairs])}")
        med = {**{n: statistics.median(v) for n, v in walls.items()},
               **{n: statistics.median(w for w, _ in v) for n, v in plain.items()}}
        cpu = {**{n: statistics.median(seen["CPU of the process"] for seen in phases[n]) for n in walls},
               **{n: statistics.median(c for _, c in v) for n, v in plain.items()}}
        print(f"ratio of CPU, as given = {cpu['gate, as given'] / cpu['plain, as given']:.2f}; bytecode = "
              f"{cpu['gate, bytecode'] / cpu['plain, bytecode']:.2f}; gate alone, bytecode = "
              f"{cpu['gate alone, bytecode'] / cpu['plain, bytecode']:.2f}")
        print(f"ratio gate/plain, as given = {med['gate, as given'] / med['plain, as given']:.2f}; bytecode = "
              f"{med['gate, bytecode'] / med['plain, bytecode']:.2f}; gate alone, bytecode = "
              f"{med['gate alone, bytecode'] / med['plain, bytecode']:.2f} (target <= {TARGET})")


def plain_timed(env: dict[str, str], out: Path) -> tuple[float, float]:
    """:func:`plain_once` in the environment ``env``: (wall seconds, CPU seconds)."""
    code, output, wall, cpu = run_measured([sys.executable, __file__, "--plain-once", str(out)],
                                           {**env, "PYTHONPATH": str(ROOT)}, ROOT)
    if code != 0:
        raise SystemExit(f"plain run failed (exit {code}):\n{output[-3000:]}")
    return wall, cpu


def local_matrix(folder: Path) -> Path:
    """A one-row local matrix (cpu × python:current × the digits model and data set, copied under
    ``folder``), its model run confined as every local run is."""
    digits = ROOT / "cases" / "digits"
    shutil.copytree(digits, folder / "digits")
    text = MATRIX.read_text().replace("../cases/digits", "digits").replace(
        "backend: docker          # engine from DOCKER_HOST, else the local socket", "backend: local").replace(
        "reference: pytest-hetero/py311-onnx:1", "reference: python:current")
    text = "\n".join(line for line in text.splitlines() if "pull_policy" not in line and "image_owner" not in line)
    path = folder / "one-row.matrix.yaml"
    path.write_text(text + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 0 when the median ratio is within :data:`TARGET`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds of each (default 5)")
    parser.add_argument("--plain-once", metavar="OUT", help=argparse.SUPPRESS)
    parser.add_argument("--breakdown", action="store_true", help="split the fixed cost by phase and environment")
    parser.add_argument("--local", action="store_true", help="the breakdown for a local one-row matrix")
    parser.add_argument("--per-run", type=int, metavar="N", help="what one more model run costs, N runs against 1")
    parser.add_argument("--mode", choices=("shared", "per-run"), default="shared",
                        help="with --per-run: the runs in one container (shared) or a container each (per-run)")
    parser.add_argument("--plain-runs", type=int, metavar="N", help=argparse.SUPPRESS)
    parser.add_argument("out", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.plain_runs:
        api = docker.APIClient(timeout=120, **docker.utils.kwargs_from_env())
        direct_runs(api, Path(args.out), args.plain_runs, args.mode == "per-run")
        return 0
    if args.per_run:
        if args.per_run < 2:
            parser.error("--per-run needs N >= 2")
        return per_run_report(args.per_run, args.rounds, args.mode == "per-run")
    if args.breakdown or args.local:
        return breakdown(args.rounds, args.local)
    if args.plain_once:
        api = docker.APIClient(timeout=120, **docker.utils.kwargs_from_env())
        direct_once(api, Path(args.plain_once))
        return 0
    gate_s: list[float] = []
    plain_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="hetero-bench-") as tmp:
        gate_once(Path(tmp) / "reports")
        plain_once(Path(tmp) / "outputs.json")
        for i in range(args.rounds):
            gate_s.append(gate_once(Path(tmp) / "reports"))
            plain_s.append(plain_once(Path(tmp) / "outputs.json"))
            print(f"round {i + 1}: gate {gate_s[-1]:.3f} s  plain {plain_s[-1]:.3f} s", flush=True)
    ratio = statistics.median(gate_s) / statistics.median(plain_s)
    print("resource x image: cpu-2c x py311-onnx (startup + model + business), whole processes")
    print(f"gate  {spread(gate_s)}")
    print(f"plain {spread(plain_s)}")
    print(f"ratio gate/plain = {ratio:.2f} (target <= {TARGET})")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
