"""``hetero publish`` onto the real node (kubelet + containerd + the test device plugin), and a workload of
the validated task type scheduled there through the published label, started by the real kubelet with
its stand-in GPU.

The real node is shared by every test session of this machine: its taint is its own
(``registerWithTaints``, tolerated by every test pod) and is never touched here, so the taint part of
publishing is proven on a KWOK node (tests/kubernetes/test_kube_publish.py). What this test writes on the
node (a label, two annotations and a condition under a domain unique to it) is removed afterwards.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
import realimages
from realkit import GPU, STANDIN, VENDOR_LABELS, controls, real_matrix
from support import evidence_of
from test_kube_publish import hetero, wait_for

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import RealNodeCluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


@pytest.fixture
def ns(realnode: RealNodeCluster) -> Iterator[str]:
    realnode.core.patch_node(realnode.info.node, {"metadata": {"labels": VENDOR_LABELS}})
    realimages.ensure(realnode.info.containerd_socket, STANDIN)
    name = realnode.new_namespace("publish")
    yield name
    realnode.core.delete_namespace(name)


def test_published_status_lets_a_validated_task_type_run_on_the_real_node(
        pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str) -> None:
    info = realnode.info
    domain = f"r{uuid.uuid4().hex[:5]}.hetero.test"
    key = f"validation.{domain}/batch-inference"
    doc = json.loads(real_matrix(info, ns, [{"name": "gpu", "type": "gpu", "vendor": "nvidia", "requests": {GPU: "1"},
                                             "expect": {"devices": info.gpus}}],
                                 images=[{"name": "acc", "reference": STANDIN, "for": ["gpu"]}], framework=False))
    doc["spec"]["validation"] = {"domain": domain, "valid_for": "1d"}
    pytester.makefile(".matrix.yaml", k=json.dumps(doc))
    assert hetero("keygen", str(pytester.path / "key")).returncode == 0
    with controls(info, exclusive=False):
        pytester.runpytest("-p", "no:cacheprovider", "-k", "discovery or scheduling or startup",
                           "--hetero-sign-key", str(pytester.path / "key"))
    evidence = evidence_of(pytester)
    [pool] = evidence["validation"]["pools"]
    assert (pool["nodes"], pool["task_types"]["batch-inference"]["level"]) == ([info.node], "startup")
    bundle = sorted((pytester.path / "reports").iterdir())[0]
    try:
        done = hetero("publish", str(bundle), "--to", "kubernetes", "--key", str(pytester.path / "key.pub"),
                      "--kubeconfig", str(info.kubeconfig), "--require-level", "startup")
        assert done.returncode == 0, done.stderr
        node: Any = realnode.core.read_node(info.node)  # the API's answer: the client's models make every field optional
        assert node.metadata.labels[key] == "startup"
        condition = next(c for c in node.status.conditions if c.type == key)
        assert (condition.status, condition.reason) == ("True", "Validated")
        time.sleep(1)  # the kubelet's next status update must keep the condition (it merges by type)
        again: Any = realnode.core.read_node(info.node)
        assert next(c for c in again.status.conditions if c.type == key).status == "True"
        pod = f"validated-{uuid.uuid4().hex[:6]}"
        realnode.core.create_namespaced_pod(ns, {"metadata": {"name": pod}, "spec": realnode.pod_spec(  # type: ignore[arg-type]  # a manifest dict, sent as it is
            [{"name": "c", "image": STANDIN, "imagePullPolicy": "Never",
              "command": ["sh", "-c", "ls /dev | grep -E '^nvidia[0-9]+$'"],
              "resources": {"limits": {GPU: "1"}}}],
            nodeSelector={**info.node_selector, key: "startup"}, restartPolicy="Never")})
        def read_pod() -> Any:  # the API's answer: the client's models make every field optional
            return realnode.core.read_namespaced_pod(pod, ns)

        phase = wait_for(lambda: (p := read_pod().status.phase) in ("Succeeded", "Failed") and p, 120,
                         "the validated workload to finish")
        placed = read_pod().spec.node_name
        log = realnode.core.read_namespaced_pod_log(pod, ns)
        assert (phase, placed, len(log.split())) == ("Succeeded", info.node, 1), log
        assert re.fullmatch(r"nvidia\d+", log.split()[0])  # the one device it was handed (any free one)
    finally:
        realnode.core.patch_node(info.node, {"metadata": {
            "labels": {key: None}, "annotations": {key + ".expires-at": None, key + ".bundle": None,
                                                key + ".verified-at": None}}},
            _content_type="application/merge-patch+json")
        realnode.core.patch_node_status(info.node, {"status": {"conditions": [{"type": key, "$patch": "delete"}]}},
                                        _content_type="application/strategic-merge-patch+json")
    left: Any = realnode.core.read_node(info.node)
    assert key not in (left.metadata.labels or {}) and all(c.type != key for c in left.status.conditions)
