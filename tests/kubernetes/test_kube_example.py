"""matrices/example-k8s.matrix.yaml on the real plane: KWOK pools labelled as the example expects."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from kubekit import BASE, GFD, SESSION, schedulable
from kubernetes.client.rest import ApiException
from support import REPO, evidence_of

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster

EXAMPLE = REPO / "matrices" / "example-k8s.matrix.yaml"


@pytest.fixture
def example_pools(cluster: Cluster) -> Iterator[dict[str, str]]:
    """One CPU and one 8-GPU H100 KWOK node labelled ``hetero-example.pool``; deleted afterwards."""
    names = {"cpu": f"example-cpu-{cluster.suffix}", "gpu": f"example-gpu-{cluster.suffix}"}
    extra = {"cpu": ({}, {}), "gpu": ({"nvidia.com/gpu": "8"}, GFD)}
    for pool, name in names.items():
        cap = {**BASE, **extra[pool][0]}
        cluster.core.create_node(
            {
                "metadata": {
                    "name": name,
                    "annotations": {"kwok.x-k8s.io/node": "fake"},
                    "labels": {"hetero-example.pool": pool, SESSION: cluster.suffix, **extra[pool][1]},
                },
                "status": {"capacity": cap, "allocatable": cap},
            }
        )
    # Ready, and the node lifecycle controller has lifted the node.kubernetes.io/not-ready taint it puts
    # on every new node (else scheduling fails now and then with an untolerated taint)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(schedulable(cluster.core.read_node(n)) for n in names.values()):
        time.sleep(0.3)
    yield names
    for name in names.values():
        try:
            cluster.core.delete_node(name)
        except ApiException:
            pass


def test_example_matrix(
    pytester: pytest.Pytester, cluster: Cluster, example_pools: dict[str, str], run_id: str
) -> None:
    shutil.copytree(REPO / "cases", pytester.path / "cases")
    (pytester.path / "matrices").mkdir()
    shutil.copy(EXAMPLE, pytester.path / "matrices" / EXAMPLE.name)
    pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--hetero-run-id",
        run_id,
        "--hetero-kube-namespace",
        cluster.namespace,
        "matrices",
    )
    got = {i["nodeid"].split("::", 1)[1]: i for i in evidence_of(pytester)["items"]}
    combo = "digits-logreg@digits-test"
    assert {k: v["status"] for k, v in got.items()} == {
        "cpu-pool::discovery": "passed",
        "cpu-pool::py311::scheduling": "passed",
        "cpu-pool::py311::startup": "passed",
        f"cpu-pool::py311::{combo}::model": "passed",
        f"cpu-pool::py311::{combo}::business": "passed",
        "gpu-h100::discovery": "passed",
        "gpu-h100::py311::scheduling": "passed",
        "gpu-h100::py311::startup": "failed",
        f"gpu-h100::py311::{combo}::model": "blocked",
        f"gpu-h100::py311::{combo}::business": "blocked",
    }
    gpu = got["gpu-h100::py311::startup"]
    assert (gpu["failure"]["category"], gpu["failure"]["owner"]) == ("device_not_visible", "infrastructure")
    assert "ran on the KWOK host (simulated node: not inside the image)" in gpu["failure"]["message"]
    placed = next(
        r["data"] for r in got["gpu-h100::py311::scheduling"]["records"] if r["kind"] == "scheduling.placed"
    )
    assert (placed["node"], placed["allocated"]["node_allocatable"]["nvidia.com/gpu"]) == (
        example_pools["gpu"],
        "8",
    )
