"""The pool's capacity view on the KWOK plane: what discovery records of allocatable vs what the pods bound to
each node request (Kubernetes' effective request: containers, init containers, sidecars), and the dossier's
table of it. The node is this test's own (8 GPUs of capacity, 7 allocatable: one withheld as a device
plugin withholds an unhealthy device); its pods are bound by ``spec.nodeName`` so the numbers are exact."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from kubekit import POOL, SESSION, keep_status, kube_matrix, schedulable
from kubernetes.client.exceptions import ApiException
from support import evidence_of
from test_kube_coverage import hetero

from pytest_hetero.backends.kubernetes.capacity import pod_requests
from pytest_hetero.backends.kubernetes.manifests import Container, PodSpec, ServedPod
from pytest_hetero.backends.kubernetes.objects import parse_pod

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster

# the matrix sits in pytest's temporary folder and names the repository's cases/ (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

GPU = "nvidia.com/gpu"


def pod(name: str, node: str, containers: list[dict[str, str]], init: list[dict[str, str]] | None = None,
        sidecar_at: tuple[int, ...] = (), overhead: dict[str, str] | None = None) -> ServedPod:
    """A pod bound to ``node`` whose containers and init containers (those at ``sidecar_at`` sidecars:
    ``restartPolicy: Always``) request the given quantities; extended resources get limit = request."""
    def c(k: int, x: dict[str, str], prefix: str, sidecar: bool = False) -> Container:
        made: Container = {"name": f"{prefix}{k}", "image": "pause", "resources": {"requests": x, "limits": {
            n: v for n, v in x.items() if n == GPU}}}
        if sidecar:
            made["restartPolicy"] = "Always"
        return made
    spec: PodSpec = {"nodeName": node, "containers": [c(k, dict(x), "c") for k, x in enumerate(containers)],
                     "initContainers": [c(k, dict(x), "i", k in sidecar_at)
                                        for k, x in enumerate(init or [])],
                     "tolerations": [{"operator": "Exists"}]}
    if overhead is not None:
        spec["overhead"] = overhead
    return {"metadata": {"name": name}, "spec": spec, "status": {}}


def test_the_effective_request_follows_the_schedulers_rule() -> None:
    """Containers add up; an init container counts alone unless larger; sidecars add to both; overhead adds."""
    body = pod("p", "n", [{GPU: "1", "cpu": "250m"}, {"cpu": "250m"}],
               init=[{GPU: "3"}, {GPU: "1"}, {GPU: "2"}], sidecar_at=(1,), overhead={"cpu": "100m"})
    # running: 1 GPU + sidecar 1 = 2; the second plain init container runs beside the sidecar: 2 + 1 = 3;
    # the first: 3 → max 3 GPUs. cpu: 0.5 running + 0.1 overhead.
    assert pod_requests(parse_pod(body), [GPU, "cpu", "memory"]) == {GPU: 3.0, "cpu": 0.6}
    assert pod_requests(parse_pod(pod("q", "n", [{"memory": "1Gi"}])), ["memory", GPU]) == {"memory": 2.0**30}


@pytest.fixture
def gpu_node(cluster: Cluster) -> Iterator[tuple[str, str, str]]:
    """A KWOK node of its own in a new pool (8 GPUs, 7 allocatable) and a namespace; (pool, node, namespace)."""
    tag = uuid.uuid4().hex[:5]
    node, pool = f"cap-{cluster.suffix}-{tag}", f"cap-{tag}"
    cap = {"cpu": "32", "memory": "128Gi", "pods": "110", GPU: "8"}
    cluster.core.create_node({"metadata": {  # type: ignore[arg-type]  # a manifest dict, sent as it is
        "name": node, "annotations": {"kwok.x-k8s.io/node": "fake"},
        "labels": {POOL: pool, SESSION: cluster.suffix, "kubernetes.io/hostname": node}}})
    cluster.core.patch_node_status(node, {"status": {"capacity": cap, "allocatable": {**cap, GPU: "7"},
                                                     "conditions": []}})
    ns = cluster.new_namespace("cap")
    deadline = time.monotonic() + 60
    while not schedulable(cluster.core.read_node(node)):
        assert time.monotonic() < deadline, f"node {node} not schedulable after 60 s"
        time.sleep(0.3)
    keep_status(cluster.core, node, cap, {**cap, GPU: "7"}, deadline)
    try:
        yield pool, node, ns
    finally:
        try:
            cluster.core.delete_node(node)
        except ApiException:
            pass


def test_discovery_records_allocatable_against_what_the_pods_on_each_node_request(
        pytester: pytest.Pytester, cluster: Cluster, gpu_node: tuple[str, str, str]) -> None:
    pool, node, ns = gpu_node
    for body in (pod("two", node, [{GPU: "2", "cpu": "500m"}]),
                 pod("init", node, [{GPU: "1"}], init=[{GPU: "3"}]),
                 pod("sidecar", node, [{GPU: "1"}], init=[{GPU: "1"}], sidecar_at=(0,))):
        cluster.core.create_namespaced_pod(ns, body)  # type: ignore[arg-type]  # a manifest dict, sent as it is
    doc = json.loads(kube_matrix(cluster.suffix, ns, [{"name": "gpu", "type": "gpu", "vendor": "nvidia",
                                                       "requests": {GPU: "1", "cpu": "1"}, "pool": pool}]))
    pytester.makefile(".matrix.yaml", cap=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "-k", "discovery", "--hetero-kube-context", "hetero")
    evidence = evidence_of(pytester)
    [item] = [i for i in evidence["items"] if i["layer"] == "discovery"]
    [snap] = [r["data"] for r in item["records"] if r["kind"] == "discovery.snapshot" and "nodes" in r["data"]]
    [facts] = snap["nodes"]
    # 2 + max(3, 1) + (1 + 1 sidecar) = 7 GPUs; cpu only from the first pod
    assert (facts["name"], facts["requested_by_pods"]) == (node, {GPU: 7.0, "cpu": 0.5})
    assert (facts["capacity"][GPU], facts["allocatable"][GPU]) == ("8", "7")
    assert snap["capacity_view"]["pods_counted"] == 3 and snap["capacity_view"]["unavailable"] is None

    [bundle] = sorted((pytester.path / "reports").iterdir())
    html = pytester.path / "dossier.html"
    assert hetero("render", str(bundle), "--format", "dossier", "--out", str(html)).returncode == 0
    rows = re.findall(r"<tr><td>gpu</td><td><code class=\"small\">([^<]+)</code></td><td>([^<]+)</td>"
                      r"<td class=\"num\">([^<]+)</td><td class=\"num\">([^<]+)</td><td class=\"num\">([^<]+)</td>"
                      r"<td class=\"num\">([^<]+)</td><td class=\"num\">([^<]+)</td></tr>", html.read_text())
    assert rows == [(node, GPU, "8", "7", "7", "0", "1"), (node, "cpu", "32", "32", "0.5", "31.5", "0")]
