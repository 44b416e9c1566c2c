"""Scheduling probes through the Kubernetes backend vs the same pods created and watched with the client.

On the real plane (tests/infra/kubeplane.sh; KWOK nodes), ``--nodes`` simulated nodes (default 200)
labelled for this run, and ``--probes`` scheduling probes (default 500): a matrix of that many
CPU resources (requests cpu 100m, memory 64Mi; node selector on the bench nodes) × one image.

Plugin: ``pytest <matrix> -k scheduling --hetero-parallel P`` in this process, timed from the start
of the run-test loop to the end of the backend's close (pods deleted and seen gone). Outside the
timing, and said so in the output: interpreter start and imports, collection (matrix load and
expansion), and the bundle written after the loop (evidence.json, reports, signature). Direct: the
same pod bodies created with ``P`` threads, one watch until every pod has ``spec.nodeName``, then
every pod deleted, with the client in this process; each response is read and its connection given
back to the pool (``_preload_content=False`` alone leaves it held, so each call would open a new TLS
connection and the baseline would be slower than the plain way).

Latency: an independent watch in this process stamps when each pod is first seen bound (the
scheduler's decision as the apiserver publishes it). Per pod: ``recorded`` = when the item wrote its
evidence (``scheduling.placed.recorded_epoch_s``; later when the item waits its turn in pytest's
sequential loop) — the target "evidence written within 1 s of the decision" is checked on it;
``observed`` = when the plugin's own watch saw the binding (printed for comparison). Prints both p95
figures, the ratio and what was run; exits 1 when the ratio exceeds 1.2 or the recorded p95 exceeds
1 s. Small runs: ``--probes 50 --nodes 20``. Keep it to 2 cores: P ≤ 16.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.watch.watch import iter_resp_lines

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_node_coverage import delete_nodes  # (the repository root is on sys.path)
from bench.loop_timer import LoopTimer  # (the repository root is on sys.path)
from pytest_hetero.backends.kubernetes.scheduling import manifest
from pytest_hetero.matrix.model import Resource

RATIO_TARGET, P95_TARGET_S = 1.2, 1.0
IMAGE = "registry.invalid/bench/idle:1"


def plane() -> Path:
    """The plane's admin kubeconfig (starts the plane when needed)."""
    spec = importlib.util.spec_from_file_location("kubeplane", ROOT / "tests" / "infra" / "kubeplane.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return Path(mod.ensure_plane())


class Bound:
    """Independent watch: pod name → wall time it was first seen with ``spec.nodeName``."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.core, self.namespace = client.CoreV1Api(api), namespace
        self.at: dict[str, float] = {}
        self.gone: set[str] = set()
        self.stop = threading.Event()
        self.cond = threading.Condition()
        first: Any = self.core.list_namespaced_pod(namespace, limit=1)  # the API's answer (every field optional)
        rv = first.metadata.resource_version
        self.thread = threading.Thread(target=self._run, args=(rv,), daemon=True)
        self.thread.start()

    def _run(self, rv: str) -> None:
        while not self.stop.is_set():
            resp = self.core.list_namespaced_pod(
                self.namespace,
                watch=True,
                resource_version=rv,
                timeout_seconds=30,
                allow_watch_bookmarks=True,
                _preload_content=False,
            )
            for line in iter_resp_lines(resp):  # type: ignore[no-untyped-call]
                ev = json.loads(line)
                obj = ev["object"]
                rv = obj["metadata"].get("resourceVersion", rv)
                name = obj["metadata"].get("name")
                if name and ev["type"] == "DELETED":
                    with self.cond:
                        self.gone.add(name)
                        self.cond.notify_all()
                elif name and name not in self.at and (obj.get("spec") or {}).get("nodeName"):
                    with self.cond:
                        self.at[name] = time.time()
                        self.cond.notify_all()
                if self.stop.is_set():
                    return

    def wait_gone(self, names: set[str], timeout_s: float) -> None:
        """Block until every name was seen deleted (the plugin's close waits for that too)."""
        with self.cond:
            if not self.cond.wait_for(lambda: names <= self.gone, timeout_s):
                raise RuntimeError(f"{len(names - self.gone)} pods not gone after {timeout_s} s")

    def wait_for(self, names: set[str], timeout_s: float) -> None:
        """Block until every name is bound; RuntimeError after ``timeout_s`` seconds."""
        with self.cond:
            if not self.cond.wait_for(lambda: names <= set(self.at), timeout_s):
                raise RuntimeError(f"{len(names - set(self.at))} pods not bound after {timeout_s} s")


def make_nodes(core: client.CoreV1Api, tag: str, count: int) -> list[str]:
    """``count`` KWOK nodes labelled ``hetero-bench=<tag>`` (64 CPUs, 110 pods each); waits until Ready."""
    names = [f"bench-{tag}-{i:03d}" for i in range(count)]
    cap = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda n: core.create_node(
                    {  # type: ignore[arg-type]  # a manifest dict, sent as it is
                        "metadata": {
                            "name": n,
                            "annotations": {"kwok.x-k8s.io/node": "fake"},
                            "labels": {"hetero-bench": tag},
                        },
                        "status": {"capacity": cap, "allocatable": cap},
                    }
                ),
                names,
            )
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        listed: list[Any] = core.list_node(label_selector=f"hetero-bench={tag}").items  # every field optional
        ready = sum(
            any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
            for n in listed
        )
        if ready == count:
            return names
        time.sleep(1)
    raise RuntimeError("bench nodes not Ready within 120 s")


def matrix_doc(tag: str, namespace: str, probes: int, kubeconfig: Path) -> dict[str, Any]:
    """A matrix of ``probes`` CPU resources × one image on the bench nodes of the plane ``kubeconfig``."""
    digits = ROOT / "cases" / "digits"
    return {
        "apiVersion": "pytest-hetero/v1",
        "kind": "ValidationMatrix",
        "metadata": {"name": f"bench-{tag}"},
        "spec": {
            "target": {"backend": "kubernetes", "namespace": namespace, "kubeconfig": str(kubeconfig)},
            "layers": {"scheduling": {"timeout": "120s"}},
            "resources": [
                {
                    "name": f"r{i:04d}",
                    "type": "cpu",
                    "requests": {"cpu": "100m", "memory": "64Mi"},
                    "node_selector": {"hetero-bench": tag},
                }
                for i in range(probes)
            ],
            "images": [{"name": "idle", "reference": IMAGE, "for": ["cpu"]}],
            "models": [
                {
                    "name": "digits-logreg",
                    "version": "1.0.0",
                    "uri": str(digits / "model" / "digits-logreg-1.0.0.onnx"),
                    "sha256": "d2230a9096140b09d443879ca3b0d7cb0021917896a8f462f79806de1109b523",
                    "code": str(digits),
                    "entrypoint": ["{python}", "{code}/infer.py"],
                }
            ],
            "datasets": [
                {
                    "name": "digits-test",
                    "version": "1.0.0",
                    "uri": str(digits / "data" / "digits-test-1.0.0.csv"),
                    "sha256": "3678e2fa8f107ffa5d8518cc07a46b9e4ce67e89d65b2f88e4c391638d965bfb",
                }
            ],
        },
    }


def plugin_run(tmp: Path, doc: dict[str, Any], parallel: int) -> tuple[float, list[dict[str, Any]]]:
    """Run the scheduling items; return (seconds, scheduling.placed records)."""
    path = tmp / "bench.matrix.yaml"
    path.write_text(json.dumps(doc))
    # the matrix sits in a temporary folder and names the repository's digits case: allow it, as a user would
    os.environ["HETERO_ALLOW_PATHS"] = str(ROOT / "cases")
    timer = LoopTimer()
    code = pytest.main(
        [
            str(path),
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "scheduling",
            "--hetero-parallel",
            str(parallel),
            "--hetero-report-dir",
            str(tmp / "reports"),
            "--rootdir",
            str(tmp),
            "-W",
            "ignore::pytest.PytestAssertRewriteWarning",
            "--no-header",
            "--tb=line",
        ],
        plugins=[timer],
    )
    if code != 0:
        raise SystemExit(f"plugin run failed (exit {code})")
    evidence = json.loads(next((tmp / "reports").glob("*/evidence.json")).read_text())
    placed = [r["data"] for i in evidence["items"] for r in i["records"] if r["kind"] == "scheduling.placed"]
    return timer.seconds, placed


def direct_run(
    api: client.ApiClient, tag: str, namespace: str, probes: int, parallel: int, bound: Bound
) -> float:
    """Create the same pods with ``parallel`` threads, wait (watch) until all are bound, delete them."""
    core = client.CoreV1Api(api)
    labels = {"hetero-bench-direct": tag}
    bodies = [
        manifest(
            "pod",
            f"direct-{tag}-{i:04d}",
            namespace,
            labels,
            Resource(
                name=f"r{i}",
                type="cpu",
                vendor="",
                requests={"cpu": "100m", "memory": "64Mi"},
                node_selector={"hetero-bench": tag},
            ),
            IMAGE,
        )
        for i in range(probes)
    ]
    start = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(lambda b: consumed(core.create_namespaced_pod(namespace, b, _preload_content=False)), bodies))
        bound.wait_for({b["metadata"]["name"] for b in bodies}, 300)
        list(
            pool.map(
                lambda b: consumed(core.delete_namespaced_pod(
                    b["metadata"]["name"], namespace, grace_period_seconds=0, _preload_content=False
                )),
                bodies,
            )
        )
        bound.wait_gone({b["metadata"]["name"] for b in bodies}, 300)
    return time.perf_counter() - start


def consumed(resp: Any) -> int:
    """Read a raw (``_preload_content=False``) response and give its connection back to the pool;
    return its size in bytes (the plugin reads every answer too)."""
    size = len(resp.data)
    resp.release_conn()
    return size


def p95(values: list[float]) -> float:
    """95th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 0 when both targets hold."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=500, help="scheduling probes (default 500)")
    parser.add_argument("--nodes", type=int, default=200, help="simulated nodes (default 200)")
    parser.add_argument(
        "--parallel", type=int, default=16, help="--hetero-parallel and direct threads (default 16)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="measured rounds of each, alternating which goes first (default 2); medians compared",
    )
    args = parser.parse_args(argv)
    kubeconfig = plane()
    api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    api.configuration.connection_pool_maxsize = 64
    core = client.CoreV1Api(api)
    tag = uuid.uuid4().hex[:6]
    nodes: list[str] = []
    plugin_s: list[float] = []
    direct_s: list[float] = []
    observed: list[float] = []
    recorded: list[float] = []
    namespaces: list[str] = []
    try:
        t0 = time.perf_counter()
        nodes = make_nodes(core, tag, args.nodes)
        print(f"{len(nodes)} KWOK nodes Ready in {time.perf_counter() - t0:.1f} s", flush=True)
        for round_no in range(args.rounds):
            namespace = f"hetero-bench-{tag}-{round_no}"
            namespaces.append(namespace)
            core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]  # a manifest dict, sent as it is
            bound = Bound(api, namespace)
            for which in ("direct", "plugin") if round_no % 2 == 0 else ("plugin", "direct"):
                if which == "direct":
                    direct_s.append(direct_run(api, tag, namespace, args.probes, args.parallel, bound))
                    print(
                        f"round {round_no + 1} direct: {args.probes} pods created, watched until bound, deleted "
                        f"in {direct_s[-1]:.2f} s",
                        flush=True,
                    )
                    continue
                with tempfile.TemporaryDirectory(prefix="hetero-bench-k8s-") as tmp:
                    seconds, placed = plugin_run(
                        Path(tmp), matrix_doc(tag, namespace, args.probes, kubeconfig), args.parallel
                    )
                plugin_s.append(seconds)
                print(
                    f"round {round_no + 1} plugin: {len(placed)} scheduling items in {seconds:.2f} s",
                    flush=True,
                )
                time.sleep(0.5)  # the independent watch catches up on the last bindings
                observed += [
                    p["observed_epoch_s"] - bound.at[p["pod"]] for p in placed if p["pod"] in bound.at
                ]
                recorded += [
                    p["recorded_epoch_s"] - bound.at[p["pod"]] for p in placed if p["pod"] in bound.at
                ]
            bound.stop.set()
    finally:
        for namespace in namespaces:
            core.delete_namespace(namespace)
        delete_nodes(core, nodes)
    ratio = statistics.median(plugin_s) / statistics.median(direct_s)
    print(f"ran: {args.probes} probes, {args.nodes} nodes, parallel {args.parallel}, {args.rounds} rounds")
    print(f"median plugin {statistics.median(plugin_s):.2f} s, direct {statistics.median(direct_s):.2f} s")
    print(f"ratio plugin/direct = {ratio:.2f} (target <= {RATIO_TARGET})")
    print(f"spread: plugin {min(plugin_s):.2f}-{max(plugin_s):.2f} s, direct {min(direct_s):.2f}-{max(direct_s):.2f} s")
    print(
        f"decision -> evidence recorded (item's turn): p95 {p95(recorded):.3f} s, "
        f"median {statistics.median(recorded):.3f} s (target p95 <= {P95_TARGET_S} s; {len(recorded)} pods)"
    )
    print(
        f"decision -> plugin watch observed: p95 {p95(observed):.3f} s, median {statistics.median(observed):.3f} s"
    )
    print("outside the timing: interpreter start and imports, collection, the bundle written after the loop")
    return 0 if ratio <= RATIO_TARGET and p95(recorded) <= P95_TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
