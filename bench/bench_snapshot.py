"""Benchmark: ``--hetero-snapshot`` + drift of a 500-node KWOK cluster against the list calls it needs.

Creates N KWOK nodes (default 500; GPU Feature Discovery labels, every tenth tainted, two pools) on the
test plane (``tests/infra/kubeplane.sh``; ``KUBECONFIG`` or ``/tmp/hetero-kube/admin.kubeconfig``), takes a
baseline snapshot, then changes the driver label of 50 nodes and a taint on 10, and measures, interleaved
(``--repeat`` rounds, each round runs both in turn, in this process against the same apiserver):

* **A, the plain way**: the raw list calls the snapshot makes (nodes, DaemonSets, RuntimeClasses,
  PriorityClasses, Kueue ResourceFlavors/ClusterQueues/LocalQueues, Volcano Queues, ResourceQuotas and
  LimitRanges of the namespace; v1beta2 then v1beta1 where a kind is not served), each decoded from JSON;
* **B, the gate**: :func:`~pytest_hetero.backends.kubernetes.snapshot.take_snapshot` (the same calls, reduced
  to the fields a run depends on), :func:`~pytest_hetero.status.drift.diff_snapshots` against the baseline and
  :func:`~pytest_hetero.status.drift.affected_items` over a two-pool matrix's plan.

Prints medians with the spread (min–max) of wall time, and the ratio of the medians; target B ≤ 2× A
(exit 1 when missed). The nodes are deleted afterwards (also on Ctrl-C).
Usage: ``python bench/bench_snapshot.py [--nodes N] [--repeat R]``.

Measured on the shared 2-core development machine (500 nodes, 15 rounds): see the README section
"Drift-driven reruns" for the figures of the last run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client, config

from pytest_hetero.backends.kubernetes.snapshot import Lister, take_snapshot
from pytest_hetero.matrix.expand import expand
from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.status.drift import affected_items, diff_snapshots

REPO = Path(__file__).resolve().parents[1]
TAG = "hetero-bench.snapshot"
NAMESPACE = "default"
PATHS = [["/api/v1/nodes"], ["/apis/apps/v1/daemonsets"], ["/apis/node.k8s.io/v1/runtimeclasses"],
         ["/apis/scheduling.k8s.io/v1/priorityclasses"],
         *[[f"/apis/kueue.x-k8s.io/{v}/{p}" for v in ("v1beta2", "v1beta1")]
           for p in ("resourceflavors", "clusterqueues", "localqueues")],
         ["/apis/scheduling.volcano.sh/v1beta1/queues"], [f"/api/v1/namespaces/{NAMESPACE}/resourcequotas"],
         [f"/api/v1/namespaces/{NAMESPACE}/limitranges"]]
"""The list calls of one snapshot (when no device-plugin DaemonSet exists, as on the test plane)."""


def node_body(name: str, tag: str, i: int) -> dict[str, Any]:
    labels = {TAG: tag, "bench-pool": f"p{i % 2}", "kubernetes.io/hostname": name,
              "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
              "nvidia.com/cuda.driver.major": "550", "nvidia.com/gpu.memory": "81559"}
    taints = [{"key": "dedicated", "value": "training", "effect": "NoSchedule"}] if i % 10 == 0 else []
    return {"metadata": {"name": name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": {"taints": taints}}


def create_nodes(core: client.CoreV1Api, tag: str, n: int) -> list[str]:
    names = [f"bench-{tag}-{i:04d}" for i in range(n)]
    cap = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}

    def one(i: int) -> None:
        core.create_node(node_body(names[i], tag, i))  # type: ignore[arg-type]  # a manifest dict, sent as it is
        core.patch_node_status(names[i], {"status": {"capacity": cap, "allocatable": cap}})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(n)))
    return names


def delete_nodes(core: client.CoreV1Api, tag: str) -> None:
    core.delete_collection_node(label_selector=f"{TAG}={tag}")


def matrix_file(folder: Path) -> Path:
    """A two-pool matrix (pools p0/p1 by the bench-pool label) on the digits case of matrices/example-cpu."""
    import yaml

    example = REPO / "matrices" / "example-cpu.matrix.yaml"
    doc = yaml.safe_load(example.read_text())
    spec = doc["spec"]
    for entry in spec["models"] + spec["datasets"]:
        for key in ("uri", "code", "acceptance"):
            if key in entry:
                entry[key] = str((example.parent / entry[key]).resolve())
    spec["target"] = {"backend": "kubernetes", "namespace": NAMESPACE}
    spec["resources"] = [{"name": f"p{i}", "type": "gpu", "vendor": "nvidia", "requests": {"nvidia.com/gpu": "1"},
                          "node_selector": {"bench-pool": f"p{i}"}} for i in range(2)]
    path = folder / "bench.matrix.yaml"
    path.write_text(json.dumps(doc))
    os.environ["HETERO_ALLOW_PATHS"] = str(REPO / "cases")
    return path


def plain(lister: Lister) -> int:
    return sum(len(lister.section(paths, lambda item: item)[0]) for paths in PATHS)


def gate(api: client.ApiClient, baseline: dict[str, Any], matrix: Any, plan: Any) -> int:
    snap = take_snapshot(api, [NAMESPACE])
    changes = diff_snapshots(baseline, snap)
    return len(affected_items(changes, matrix, plan, baseline, snap)) + len(changes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    kubeconfig = os.environ.get("KUBECONFIG") or "/tmp/hetero-kube/admin.kubeconfig"
    api = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    core = client.CoreV1Api(api)
    tag = uuid.uuid4().hex[:6]
    try:
        names = create_nodes(core, tag, args.nodes)
        with tempfile.TemporaryDirectory() as tmp:
            matrix = load_matrix(matrix_file(Path(tmp)))
        plan = expand(matrix)
        baseline = take_snapshot(api, [NAMESPACE])
        for name in names[:50]:
            core.patch_node(name, {"metadata": {"labels": {"nvidia.com/cuda.driver.major": "560"}}})
        for name in names[50:60]:
            core.patch_node(name, {"spec": {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}})
        lister = Lister(api)
        a_times, b_times = [], []
        for _ in range(args.repeat):
            start = time.perf_counter()
            plain(lister)
            a_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            gate(api, baseline, matrix, plan)
            b_times.append(time.perf_counter() - start)
        hits = gate(api, baseline, matrix, plan)
    finally:
        delete_nodes(core, tag)
    a, b = statistics.median(a_times), statistics.median(b_times)
    print(f"{args.nodes} bench nodes (+ the plane's own), {args.repeat} interleaved rounds; changes + affected "
          f"items found: {hits}")
    print(f"A list calls (raw JSON)       median {a * 1000:.1f} ms (min {min(a_times) * 1000:.1f}, max "
          f"{max(a_times) * 1000:.1f})")
    print(f"B snapshot + diff + mapping   median {b * 1000:.1f} ms (min {min(b_times) * 1000:.1f}, max "
          f"{max(b_times) * 1000:.1f})")
    print(f"ratio B/A {b / a:.2f}x (target 2x)")
    return 0 if b / a <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
