"""Per-run model runs spread over a pool of KWOK nodes: the makespan against the ideal, the gate's CPU per item.

Issue 32's scale target: N model runs of S seconds on a pool of M nodes finish within 1.2× of the ideal
⌈N / width⌉ × S (the issue's figure: 2,000 runs of 10 s on 200 nodes, width 200, ideal 100 s), with the gate's
CPU ≤ 5 ms per item. On the project's KWOK plane (``eval "$(bash tests/infra/kubeplane.sh env)"`` first; the plane
is never started or changed here): ``--nodes`` KWOK CPU nodes (32 CPUs each) labelled for this run, a namespace
with a KWOK ClusterExec, and a matrix of ``--runs`` stand-in models (each sleeps ``--run-s`` seconds, then writes
its outputs) on one resource of that pool with ``model_runs: per-run`` and ``--hetero-concurrency``
(``--width``, default: ``free``, which the gate counts from the pool: at most 1,000, fewer where the open-file
limit would not hold them: ``capacity.free_cap``). ``--per-node`` sets how many runs a node takes at once (each run
asks for 32 ÷ that many CPUs): 1 is the issue's shape, where ``free`` counts one run per node and the width is the
node count. The gate runs in a subprocess (``python -m pytest -k "startup or model"``).

On KWOK a run Pod is placed by the real scheduler and its exec runs **on this host** (the KWOK ClusterExec): the
runs' sleeps overlap for real, their copies of the inputs are real folders, but nothing runs in an image. So this
measures the gate's fan-out (Pod create, watch, exec, inputs in, outputs out, delete) at width W on a 2-core
machine, not a cluster's.

Printed per round: the makespan of the model runs (the earliest run queued → the latest Pod deleted, from each
run's ``spread`` record), the ideal ⌈N / W⌉ × S with W the width the gate used, their ratio, the gate process's
CPU (user + system, children included: the per-run host processes are the KWOK exec's, not the gate's children)
per model item, its peak RSS (``ru_maxrss`` of the gate's process tree), the whole process's wall time, and the
plane's CPU meanwhile (:func:`plane_cpu`: apiserver, etcd, controller-manager, scheduler, KWOK with the exec processes
it ran for the runs; whatever else uses the plane then counts too): the host's 2 cores hold both. The stand-in model
runs under this interpreter by its path (``target.python``), or with ``--model sh`` by ``/bin/sh`` (:data:`MODELS`).
Medians with the spread over ``--rounds``. ``--py-spy FILE`` records the gate with py-spy (``--gil``: the samples
holding the GIL, raw stacks in ``FILE.<round>``; its CPU then counts py-spy's too).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from support import matrix_text  # noqa: E402 - tests/ put on the path just above

from bench.bench_node_coverage import kwok_pool  # noqa: E402 - the repository root is on the path

MODEL = '''"""Stand-in model: sleeps, then writes its outputs."""
import argparse, json, time
p = argparse.ArgumentParser()
for a in ("--data", "--out", "--sleep"):
    p.add_argument(a, required=True)
a = p.parse_args()
time.sleep(float(a.sleep))
with open(a.out, "w") as fh:
    json.dump({"ids": [0, 1], "predictions": [0, 1]}, fh)
'''
SH_MODEL = '''# Stand-in model, no interpreter: sleeps, writes its outputs ($1 dataset, $2 outputs, $3 seconds).
sleep "$3"
printf '%s' '{"ids": [0, 1], "predictions": [0, 1]}' > "$2"
'''
MODELS = ("python", "sh")
"""``--model``: the stand-in run under the interpreter (~42 ms of this host's CPU per run to start it, import
argparse and json) or by ``/bin/sh`` (~1.5 ms). On KWOK the run executes on the gate's host, so its start competes
with the gate and the plane for the host's cores, which a model run on its own node would not."""


def write_matrix(folder: Path, tag: str, namespace: str, kubeconfig: str, runs: int, run_s: float,
                 per_node: int = 32, model: str = "python", datasets: int = 1) -> Path:
    """The bench matrix in ``folder``: one CPU resource of the ``hetero-bench=<tag>`` pool asking for 32 ÷
    ``per_node`` CPUs (a node of 32 CPUs takes ``per_node`` runs at once), per-run, ``runs`` copies of the
    stand-in model (``model``: one of :data:`MODELS`) on a two-row dataset; with ``datasets`` D > 1, ⌈runs / D⌉
    models × D datasets (names of one file) instead: the matrix reader refuses a document of more than 100,000 YAML
    nodes (docs/safe-reading.md), which 10,000 models × 1 dataset would need."""
    (folder / "code").mkdir()
    (folder / "code" / "model.py").write_text(MODEL)
    (folder / "code" / "model.sh").write_text(SH_MODEL)
    (folder / "w.json").write_text("{}\n")
    (folder / "data.csv").write_text("index,x\n0,0.1\n1,0.9\n")
    sha = {n: hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in ("w.json", "data.csv")}
    resource = {"name": "cpu", "type": "cpu", "requests": {"cpu": f"{32 / per_node:g}", "memory": "64Mi"},
                "node_selector": {"hetero-bench": tag}, "model_runs": "per-run"}
    doc = json.loads(matrix_text(resources=[resource], backend="kubernetes", name="benchspread",
                                 images=[{"name": "py", "reference": "python:3.11", "for": ["cpu"]}],
                                 layers={"discovery": {"timeout": "60s"}, "scheduling": {"timeout": "60s"},
                                         "startup": {"timeout": "120s"}, "model": {"timeout": "20m"}}))
    # the exec runs on this host (KWOK's ClusterExec): its interpreter by path, as a node's image names its own (a
    # version manager's `python3` shim on PATH costs a shell and its lookups per run: ~2.5x the interpreter's start)
    doc["spec"]["target"] = {"backend": "kubernetes", "namespace": namespace, "kubeconfig": kubeconfig,
                             "python": sys.executable}
    entrypoint = ["{python}", "{code}/model.py", "--data", "{dataset}", "--out", "{outputs}", "--sleep", str(run_s)] \
        if model == "python" else ["/bin/sh", "{code}/model.sh", "{dataset}", "{outputs}", str(run_s)]
    doc["spec"]["models"] = [{"name": f"m{i}", "version": "1", "uri": "w.json", "sha256": sha["w.json"],
                              "code": "code", "entrypoint": entrypoint}
                             for i in range(1, math.ceil(runs / datasets) + 1)]
    doc["spec"]["datasets"] = [{"name": "d" if datasets == 1 else f"d{j}", "version": "1", "uri": "data.csv",
                                "sha256": sha["data.csv"]} for j in range(1, datasets + 1)]
    path = folder / "spread.matrix.yaml"
    path.write_text(json.dumps(doc, indent=1))
    return path


PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
"""The plane's processes (``<plane state>/run/<name>.pid`` beside ``$KUBECONFIG``, as tests/infra/kubeplane.sh writes
them)."""


def plane_cpu(kubeconfig: str) -> dict[str, float]:
    """CPU seconds (user + system, of the process and of its children it waited for: KWOK's exec processes) each
    plane process has used so far, by name (/proc/<pid>/stat fields 14-17); a process not found is left out."""
    tick = os.sysconf("SC_CLK_TCK")
    used: dict[str, float] = {}
    for name in PLANE:
        try:
            pid = (Path(kubeconfig).parent / "run" / f"{name}.pid").read_text().strip()
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except (OSError, ValueError):
            continue
        used[name] = sum(int(f) for f in fields[11:15]) / tick
    return used


def gate_round(folder: Path, matrix: Path, width: str, run_s: float, profile: str | None = None) -> dict[str, float]:
    """One gate process on ``matrix``: makespan, ideal, ratio, CPU per model item (ms), peak RSS (MiB), wall, width
    used; ``profile``: a py-spy raw profile of the gate written there (its CPU then counts py-spy's too). Raises
    RuntimeError when a model item did not pass for another reason than ``node_not_ready`` (a KWOK node whose
    status the overloaded simulator stopped posting: counted, ``node_not_ready``), or more than 1 in 20 did so."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    spy = ["py-spy", "record", "--gil", "-r", "100", "-f", "raw", "-o", profile, "--"] if profile else []
    argv = [*spy, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "startup or model",
            "--hetero-concurrency", width, "--hetero-report-dir", str(folder / "reports"), str(matrix)]
    begun = time.monotonic()
    proc = subprocess.Popen(argv, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - begun
    [bundle] = sorted((folder / "reports").iterdir())
    ev = json.loads((bundle / "evidence.json").read_text())
    models = [i for i in ev["items"] if i["layer"] == "model"]
    # a run whose KWOK node stopped posting its status (the simulator overloaded on this host) is counted, not fatal
    lost = [i for i in models
            if i["status"] != "passed" and (i.get("failure") or {}).get("category") == "node_not_ready"]
    bad = [(i["nodeid"], i["status"], i["failure"]) for i in models if i["status"] != "passed" and i not in lost]
    if bad or not models or len(lost) > len(models) // 20:
        raise RuntimeError(f"model items did not pass ({os.waitstatus_to_exitcode(status)}): {bad[:3]}\n"
                           f"{out.decode(errors='replace')[-3000:]}")
    runs: list[dict[str, Any]] = [r["data"]["spread"] for i in models for r in i["records"]
                                  if r["kind"] == "model.run" and "spread" in r["data"]]
    [plan] = [r["data"] for i in models for r in i["records"] if r["kind"] == "model.spread"]
    used = int(plan["concurrency"])
    makespan = max(float(s["deleted_at"]) for s in runs) - min(float(s["queued_at"]) for s in runs)
    ideal = math.ceil(len(runs) / used) * run_s
    return {"makespan_s": makespan, "ideal_s": ideal, "ratio": makespan / ideal, "width": used,
            "cpu_ms_per_item": (usage.ru_utime + usage.ru_stime) * 1000 / len(models), "wall_s": wall,
            "peak_rss_mib": usage.ru_maxrss / 1024, "node_not_ready": len(lost)}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print each round and the medians with their spread."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20, help="KWOK nodes in the pool (default 20)")
    parser.add_argument("--runs", type=int, default=100, help="model runs (default 100)")
    parser.add_argument("--run-s", type=float, default=10.0, help="seconds each run sleeps (default 10)")
    parser.add_argument("--width", default="free", help="--hetero-concurrency given to the gate (default free)")
    parser.add_argument("--rounds", type=int, default=2, help="gate runs (default 2)")
    parser.add_argument("--per-node", type=int, default=32,
                        help="runs a node takes at once (each run asks for 32 / this many CPUs; default 32: 1 CPU; "
                             "1: one run per node, free's width is then the node count, the issue's shape)")
    parser.add_argument("--model", choices=MODELS, default="python",
                        help="the stand-in model: python (default; its interpreter's start costs this host ~42 ms of "
                             "CPU per run) or sh (~1.5 ms): on KWOK the run executes on this host, beside the gate")
    parser.add_argument("--datasets", type=int, default=1,
                        help="datasets D: the runs are runs/D models x D datasets (default 1; 10,000 runs need D > 1)")
    parser.add_argument("--py-spy", metavar="FILE", help="profile the gate with py-spy (raw stacks to FILE.<round>)")
    args = parser.parse_args(argv)
    rounds: list[dict[str, float]] = []
    with kwok_pool(parser, "hetero-benchspread", args.nodes) as (kubeconfig, tag, namespace):
        for r in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="hetero-benchspread-") as tmp:
                folder = Path(tmp)
                matrix = write_matrix(folder, tag, namespace, kubeconfig, args.runs, args.run_s, args.per_node,
                                      args.model, args.datasets)
                before = plane_cpu(kubeconfig)
                got = gate_round(folder, matrix, args.width, args.run_s, args.py_spy and f"{args.py_spy}.{r + 1}")
                after = plane_cpu(kubeconfig)
            plane = {name: after[name] - before[name] for name in after if name in before}
            got["plane_cpu_s"] = sum(plane.values())
            got["plane_ms_per_run"] = got["plane_cpu_s"] * 1000 / args.runs
            rounds.append(got)
            print(f"round {r + 1}: width {got['width']:.0f}, makespan {got['makespan_s']:.1f} s against the ideal "
                  f"{got['ideal_s']:.0f} s ({got['ratio']:.2f}x), gate CPU {got['cpu_ms_per_item']:.1f} ms per "
                  f"model item, peak RSS {got['peak_rss_mib']:.0f} MiB, whole process {got['wall_s']:.1f} s, "
                  f"{got['node_not_ready']:.0f} runs ended node_not_ready; "
                  f"the plane's CPU meanwhile {got['plane_cpu_s']:.1f} s ("
                  + ", ".join(f"{name} {cpu:.1f}" for name, cpu in plane.items()) + "; other work on the plane "
                  "counts too)", flush=True)

    def med(key: str) -> str:
        values = [g[key] for g in rounds]
        return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

    print(f"{args.runs} runs of {args.run_s:g} s ({args.model} stand-in) on {args.nodes} KWOK nodes, "
          f"--hetero-concurrency {args.width}, "
          f"{args.rounds} rounds; load average {os.getloadavg()[0]:.1f}")
    print(f"makespan/ideal {med('ratio')} (target <= 1.2); gate CPU per model item {med('cpu_ms_per_item')} ms "
          f"(target <= 5); plane CPU per run {med('plane_ms_per_run')} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
