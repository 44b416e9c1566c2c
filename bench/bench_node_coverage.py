"""Node coverage ``every`` on a pool of KWOK nodes: the coverage item's time against the same work on one node.

On the project's KWOK plane (``eval "$(bash tests/infra/kubeplane.sh env)"`` first: ``KUBECONFIG`` names the
admin kubeconfig; the plane is never started or changed here), ``--nodes`` KWOK CPU nodes (default 4) labelled
for this run and a namespace with a KWOK ClusterExec (execs run on this host, as on the test plane). Each run is
the gate in a subprocess (``python -m pytest``) on the digits case with one CPU resource of that pool,
``coverage: every``, the business item deselected (``-k "not business"``).

Same work, plain way: the ordinary startup item plus the model item of the same run (one pod, its device
payload by one exec, then the digits model run by exec in it) is the baseline; the node-coverage item does
that on each node of the pool (one pinned pod per node, placed by the scheduler, its payload and a smoke run of
the same model × dataset by exec). The ratio per run is coverage item ``duration_s`` / (startup item +
model item ``duration_s``); the ideal with every node checked at once is about 1 (the pods are created
together; on KWOK every exec runs on this one host, so concurrent payloads and model runs share its CPUs).
Each ``--node-parallel`` value is run ``--rounds`` times, interleaved, alternating which goes first; medians
with the spread (min–max) are printed. Keep it to 2 cores: nodes ≤ 16.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support import matrix_text  # noqa: E402 - tests/ put on the path just above

NOT_READY_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
"""Taints the node lifecycle controller keeps on a node until it has seen it Ready: a pod does not land there yet."""


def make_nodes(core: client.CoreV1Api, tag: str, count: int) -> list[str]:
    """``count`` KWOK CPU nodes labelled ``hetero-bench=<tag>`` (32 CPUs each); waits until each is Ready and the
    node lifecycle controller has lifted its not-ready taint (60 s): a node still tainted takes no run, and the
    gate's ``concurrency: free`` counted 36 of 60 new nodes."""
    names = [f"benchcov-{tag}-{i}" for i in range(count)]
    cap = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    for n in names:
        core.create_node({"metadata": {"name": n, "annotations": {"kwok.x-k8s.io/node": "fake"},
                                       "labels": {"hetero-bench": tag, "kubernetes.io/hostname": n}},
                          "status": {"capacity": cap, "allocatable": cap}})  # type: ignore[arg-type]  # a manifest dict
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready = sum(any(c.type == "Ready" and c.status == "True"
                        for c in (n.status.conditions if n.status else None) or [])
                    and not any(t.key in NOT_READY_TAINTS for t in (n.spec.taints if n.spec else None) or [])
                    for n in core.list_node(label_selector=f"hetero-bench={tag}").items)
        if ready == count:
            return names
        time.sleep(0.5)
    raise RuntimeError("bench nodes not Ready within 60 s")


def make_namespace(api: client.ApiClient, name: str) -> None:
    """Namespace ``name`` with a KWOK ClusterExec (exec runs locally, in /tmp) and its default service account."""
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name}})  # type: ignore[arg-type]  # a manifest dict
    client.CustomObjectsApi(api).create_cluster_custom_object("kwok.x-k8s.io", "v1alpha1", "clusterexecs", {
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterExec", "metadata": {"name": name},
        "spec": {"selector": {"matchNamespaces": [name]}, "execs": [{"local": {"workDir": "/tmp"}}]}})
    deadline = time.monotonic() + 30
    while not core.list_namespaced_service_account(name, field_selector="metadata.name=default").items:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no default service account in {name} after 30 s")
        time.sleep(0.2)


def delete_nodes(core: client.CoreV1Api, nodes: list[str]) -> None:
    """Delete the bench's KWOK ``nodes`` (one already gone is fine)."""
    for name in nodes:
        try:
            core.delete_node(name)
        except client.ApiException:
            pass


@contextmanager
def kwok_pool(parser: argparse.ArgumentParser, stem: str, count: int) -> Iterator[tuple[str, str, str]]:
    """The KWOK pool of a bench run on ``$KUBECONFIG``'s plane (``parser.error`` when it is not set): a namespace
    ``<stem>-<tag>`` with a ClusterExec (:func:`make_namespace`) and ``count`` nodes labelled ``hetero-bench=<tag>``
    (:func:`make_nodes`); yields ``(kubeconfig, tag, namespace)`` and deletes all of it afterwards."""
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        parser.error('KUBECONFIG is not set: eval "$(bash tests/infra/kubeplane.sh env)" first')
    api = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    core = client.CoreV1Api(api)
    tag = uuid.uuid4().hex[:6]
    namespace = f"{stem}-{tag}"
    nodes: list[str] = []
    try:
        make_namespace(api, namespace)
        nodes = make_nodes(core, tag, count)
        yield kubeconfig, tag, namespace
    finally:
        client.CustomObjectsApi(api).delete_cluster_custom_object("kwok.x-k8s.io", "v1alpha1", "clusterexecs",
                                                                  namespace)
        core.delete_namespace(namespace)
        delete_nodes(core, nodes)


def gate_run(tmp: Path, tag: str, namespace: str, kubeconfig: str, node_parallel: int) -> dict[str, float]:
    """One gate run; ``{"startup": s, "model": s, "coverage": s}`` (the items' ``duration_s``). Raises
    RuntimeError when one of them did not pass."""
    resource = {"name": "cpu", "type": "cpu", "requests": {"cpu": "1", "memory": "256Mi"},
                "node_selector": {"hetero-bench": tag}, "coverage": "every"}
    doc = json.loads(matrix_text(resources=[resource], backend="kubernetes", name="benchcov",
                                 images=[{"name": "py", "reference": "python:3.11", "for": ["cpu"]}],
                                 layers={"discovery": {"timeout": "20s"}, "scheduling": {"timeout": "20s"},
                                         "startup": {"timeout": "60s"}, "model": {"timeout": "2m"}}))
    doc["spec"]["target"] = {"backend": "kubernetes", "namespace": namespace, "kubeconfig": kubeconfig}
    (tmp / "cov.matrix.yaml").write_text(json.dumps(doc))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "HETERO_ALLOW_PATHS": str(ROOT / "cases")}  # the digits case, outside the temporary folder
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "not business",
                           "--hetero-node-parallel", str(node_parallel), "cov.matrix.yaml"],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=600, check=False)
    [bundle] = sorted((tmp / "reports").iterdir())
    ev = json.loads((bundle / "evidence.json").read_text())
    items = {i["nodeid"].split("::", 1)[1]: i for i in ev["items"]}
    got = {}
    for key, nodeid in (("startup", "cpu::py::startup"), ("model", "cpu::py::digits-logreg@digits-test::model"),
                        ("coverage", "cpu::py::nodes::startup")):
        item = items.get(nodeid)
        if item is None or item["status"] != "passed":
            raise RuntimeError(f"{nodeid}: {item and item['status']} {item and item['failure']}\n{done.stdout[-2000:]}")
        got[key] = float(item["duration_s"])
    return got


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print medians and spread per ``--node-parallel`` value."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4, help="KWOK nodes in the pool (default 4)")
    parser.add_argument("--node-parallel", type=int, nargs="+", default=[1, 8],
                        help="--hetero-node-parallel values compared (default 1 8)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each value, interleaved (default 3)")
    args = parser.parse_args(argv)
    results: dict[int, list[dict[str, float]]] = {p: [] for p in args.node_parallel}
    with kwok_pool(parser, "hetero-benchcov", args.nodes) as (kubeconfig, tag, namespace):
        for round_no in range(args.rounds):
            order = args.node_parallel if round_no % 2 == 0 else list(reversed(args.node_parallel))
            for p in order:
                with tempfile.TemporaryDirectory(prefix="hetero-benchcov-") as tmp:
                    got = gate_run(Path(tmp), tag, namespace, kubeconfig, p)
                got["plain"] = got["startup"] + got["model"]
                results[p].append(got)
                print(f"round {round_no + 1} node-parallel {p}: startup + model item {got['plain']:.2f} s, coverage "
                      f"item {got['coverage']:.2f} s ({got['coverage'] / got['plain']:.2f}x)", flush=True)
    print(f"ran: {args.nodes} KWOK nodes, coverage every, {args.rounds} rounds per value, interleaved")
    for p, runs in results.items():
        ratios = [r["coverage"] / r["plain"] for r in runs]
        cov = [r["coverage"] for r in runs]
        plain = [r["plain"] for r in runs]
        print(f"node-parallel {p}: coverage item / (startup + model item) median {statistics.median(ratios):.2f}x "
              f"({min(ratios):.2f}-{max(ratios):.2f}); coverage item median {statistics.median(cov):.2f} s "
              f"({min(cov):.2f}-{max(cov):.2f}), startup + model item median {statistics.median(plain):.2f} s "
              f"({min(plain):.2f}-{max(plain):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
