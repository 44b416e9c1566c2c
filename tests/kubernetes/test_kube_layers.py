"""All five layers through the Kubernetes backend on the real plane (KWOK CPU pool; exec on this host)."""

from __future__ import annotations

import json

import pytest
from conftest import Cluster
from kubekit import kube_matrix
from support import evidence_of, statuses

COMBO = "digits-logreg@1.0.0::digits-test@1.0.0"


def records(item: dict, kind: str) -> list[dict]:
    """The item's evidence records of ``kind`` (their data)."""
    return [r for r in item["records"] if r["kind"] == kind]


def test_cpu_pool_passes_all_five_layers(pytester: pytest.Pytester, cluster: Cluster, run_id: str) -> None:
    pytester.makefile(".matrix.yaml", k=kube_matrix(cluster.suffix, cluster.namespace, [
        {"name": "cpu", "type": "cpu", "requests": {"cpu": "1", "memory": "256Mi"}, "pool": "cpu",
         "expect": {"min_cpus": 1}}]))
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id,
                                "--hetero-kube-context", "hetero", "--hetero-parallel", "2")
    ev = evidence_of(pytester)
    print(json.dumps(ev["items"], indent=1)[:20000])
    assert statuses(ev) == {}
