"""Makespan of N model runs on the real node's 4 stand-in GPUs: per-run Pods (``model_runs: per-run``) vs the ideal
⌈N/M⌉ × run time, and vs the shared pod's sequential path (``model_runs: shared``) doing the same runs.

On the real node (tests/infra/realnode.sh: kubelet, containerd, the test device plugin with M = 4
``nvidia.com/gpu``), one GPU resource (1 GPU per workload) × the stand-in CUDA image; N stand-in models that
each sleep ``--run-s`` seconds and write their outputs (the run time is set, the device is handed by the
device plugin, everything else — Pods, scheduler, kubelet, exec, outputs read back — is real). Both sides run
the same matrix through the plugin in this process; only ``--hetero-model-runs`` differs.

Makespan: from the start of the first model item's check to the end of the last model item's (pytest's own
order; the per-run side launches the runs ahead at the first and each item joins its own); discovery,
scheduling and startup are before it, the backend's close after it. Interleaved rounds, medians and spread;
ratios: per-run / ideal, shared / ideal, and shared / per-run (the speed-up of the same work).
KWOK nodes are not used: a KWOK pod cannot exec in an image, and its "run" would be the simulator's stage,
not the model's completion.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.realnode_handle import realnode  # (the repository root is on sys.path)
from pytest_hetero.pytest_plugin.item import LayerItem

IMAGE = "pytest-hetero/accel-standin:2"
GPU = "nvidia.com/gpu"
MODEL = '''import argparse, json, time
p = argparse.ArgumentParser()
for a in ("--data", "--out", "--sleep"):
    p.add_argument(a, required=True)
a = p.parse_args()
time.sleep(float(a.sleep))
json.dump({"ids": [0], "predictions": [0]}, open(a.out, "w"))
'''


class ModelPhase:
    """pytest plugin: wall seconds from the first model item's check to the end of the last one's."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.last = 0.0
        self.count = 0

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        """Time model items' checks."""
        model = isinstance(item, LayerItem) and item.planned.layer == "model"
        if model and self.first is None:
            self.first = time.perf_counter()
        yield
        if model:
            self.last = time.perf_counter()
            self.count += 1

    @property
    def seconds(self) -> float:
        """The model phase's makespan (seconds)."""
        return self.last - (self.first or self.last)


def ensure_image(info: Any) -> None:
    """The stand-in image in the node's containerd (tests/kubernetes/realimages.py, loaded by path)."""
    spec = importlib.util.spec_from_file_location("realimages", ROOT / "tests" / "kubernetes" / "realimages.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    mod.ensure(info.containerd_socket, IMAGE)


def matrix_doc(info: Any, namespace: str, folder: Path, runs: int, run_s: float, width: int) -> dict[str, Any]:
    """``runs`` stand-in models on one dataset, one GPU resource on the real node, ``concurrency`` ``width``."""
    (folder / "code").mkdir(exist_ok=True)
    (folder / "code" / "model.py").write_text(MODEL)
    (folder / "w.json").write_text("{}\n")
    (folder / "data.csv").write_text("index,x\n0,0.1\n")
    sha = {n: hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in ("w.json", "data.csv")}
    return {
        "apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": "bench-spread"},
        "spec": {
            "target": {"backend": "kubernetes", "kubeconfig": str(info.kubeconfig), "namespace": namespace,
                       "pull_policy": "never"},
            "layers": {"scheduling": {"timeout": "60s"}, "startup": {"timeout": "90s"}, "model": {"timeout": "5m"}},
            "resources": [{"name": "gpu", "type": "gpu", "vendor": "nvidia", "requests": {GPU: "1"},
                           "node_selector": info.node_selector, "tolerations": [info.toleration],
                           "concurrency": width}],
            "images": [{"name": "acc", "reference": IMAGE, "for": ["gpu"]}],
            "models": [{"name": f"m{i}", "version": "1", "uri": str(folder / "w.json"), "sha256": sha["w.json"],
                        "code": str(folder / "code"),
                        "entrypoint": ["{python}", "{code}/model.py", "--data", "{dataset}", "--out", "{outputs}",
                                       "--sleep", str(run_s)]} for i in range(runs)],
            "datasets": [{"name": "d", "version": "1", "uri": str(folder / "data.csv"), "sha256": sha["data.csv"]}],
        },
    }


def once(info: Any, namespace: str, runs: int, run_s: float, width: int, mode: str) -> float:
    """One plugin run with ``--hetero-model-runs mode``; the model phase's makespan (seconds)."""
    with tempfile.TemporaryDirectory(prefix="hetero-bench-spread-") as tmp:
        folder = Path(tmp)
        path = folder / "bench.matrix.yaml"
        path.write_text(json.dumps(matrix_doc(info, namespace, folder, runs, run_s, width)))
        timer = ModelPhase()
        code = pytest.main([str(path), "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-k", "not business",
                            "--hetero-model-runs", mode, "--hetero-report-dir", str(folder / "reports"),
                            "--rootdir", tmp, "--no-header", "--tb=line"], plugins=[timer])
        if code != 0 or timer.count != runs:
            raise RunFailed(f"{mode} run failed (exit {code}, {timer.count} of {runs} model items)")
        if mode == "per-run":
            BREAKDOWN.append(breakdown(next((folder / "reports").iterdir()) / "evidence.json", run_s))
        return timer.seconds


BREAKDOWN: list[dict[str, float]] = []
"""Per per-run round: where a run's time went beyond its own ``run_s`` (medians over its runs) and the most
runs seen at once (overlapping Pod lifetimes)."""


def breakdown(evidence: Path, run_s: float) -> dict[str, float]:
    """From the per-run bundle's ``model.run`` records (``spread``): median seconds from the Pod's create to its
    container running, from running to the model's exec, the exec beyond ``run_s``, from the exec's end to the
    delete; the most Pods alive at once."""
    runs = [r["data"]["spread"] for i in json.loads(evidence.read_text())["items"] for r in i["records"]
            if r["kind"] == "model.run" and "spread" in r["data"]]
    edges = sorted([(s["created_at"], 1) for s in runs] + [(s["deleted_at"], -1) for s in runs])
    alive = most = 0
    for _, step in edges:
        alive += step
        most = max(most, alive)
    med = statistics.median
    return {"to_running": med(s["running_at"] - s["created_at"] for s in runs),
            "to_exec": med(s["run_started_at"] - s["running_at"] for s in runs),
            "exec_over": med(s["run_ended_at"] - s["run_started_at"] - run_s for s in runs),
            "to_delete": med(s["deleted_at"] - s["run_ended_at"] for s in runs), "most_at_once": float(most)}


class RunFailed(RuntimeError):
    """A measured run did not pass every model item (its figure is not kept; the round's side is run again)."""


def measured(info: Any, namespace: str, runs: int, run_s: float, width: int, mode: str) -> float:
    """:func:`once`, run again once when it failed (printed: on a loaded machine the shared pod's exec stream has
    been lost mid-run, ``exec_stream_lost``); a second failure ends the benchmark."""
    try:
        return once(info, namespace, runs, run_s, width, mode)
    except RunFailed as exc:
        print(f"{exc}: run again (the failed run's figure is not kept)", flush=True)
        return once(info, namespace, runs, run_s, width, mode)


def spread(values: list[float]) -> str:
    """``median (min-max)`` in seconds."""
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def main(argv: list[str] | None = None) -> int:
    """Interleaved rounds; print medians, spread and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8, help="model runs N (default 8)")
    parser.add_argument("--run-s", type=float, default=4.0, help="seconds each model run takes (default 4)")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds of each side (default 3)")
    args = parser.parse_args(argv)
    os.environ["HETERO_ALLOW_PATHS"] = os.pathsep.join(
        p for p in (os.environ.get("HETERO_ALLOW_PATHS", ""), tempfile.gettempdir()) if p)
    info = realnode()
    ensure_image(info)
    devices = int(info.gpus)
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(info.kubeconfig)))  # type: ignore[no-untyped-call]
    namespace = f"hetero-bench-spread-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]  # a manifest dict, sent as it is
    per_run: list[float] = []
    shared: list[float] = []
    try:
        once(info, namespace, 2, 0.5, devices, "per-run")  # warm: imports, connection pools
        BREAKDOWN.clear()
        for round_no in range(args.rounds):
            order = ("per-run", "shared") if round_no % 2 == 0 else ("shared", "per-run")
            for mode in order:
                took = measured(info, namespace, args.runs, args.run_s, devices, mode)
                (per_run if mode == "per-run" else shared).append(took)
            print(f"round {round_no + 1}: per-run {per_run[-1]:.2f} s, shared {shared[-1]:.2f} s", flush=True)
    finally:
        core.delete_namespace(namespace)
    ideal = math.ceil(args.runs / devices) * args.run_s
    print(f"ran: {args.rounds} interleaved rounds on node {info.node}, N = {args.runs} model runs of {args.run_s:g} s, "
          f"M = {devices} GPUs (1 per run), concurrency {devices}, image {IMAGE}")
    print(f"ideal ceil(N/M) x run time = {ideal:.2f} s; sequential floor N x run time = {args.runs * args.run_s:.2f} s")
    print(f"makespan per-run {spread(per_run)}, shared {spread(shared)}")
    print(f"ratio per-run / ideal = {statistics.median(per_run) / ideal:.2f} "
          f"({min(per_run) / ideal:.2f}-{max(per_run) / ideal:.2f})")
    print(f"ratio shared / ideal = {statistics.median(shared) / ideal:.2f}")
    print(f"ratio shared / per-run = {statistics.median(shared) / statistics.median(per_run):.2f} (speed-up)")
    parts = {k: statistics.median(b[k] for b in BREAKDOWN) for k in BREAKDOWN[0]}
    print(f"per-run overhead per run (medians): create->running {parts['to_running']:.2f} s, running->model exec "
          f"{parts['to_exec']:.2f} s (devices, inputs copied in), exec beyond the run {parts['exec_over']:.2f} s "
          f"(wrapper, exit status, evidence), exec end->delete {parts['to_delete']:.2f} s; most Pods at once "
          f"{max(b['most_at_once'] for b in BREAKDOWN):.0f}")
    print("makespan: first model item's check start to the last one's end; discovery, startup and close outside it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
