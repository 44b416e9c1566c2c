"""``hetero publish --to kubernetes`` on the real apiserver/scheduler of the KWOK plane.

A new fake-GPU node (KWOK) joins tainted ``<domain>/unvalidated:NoSchedule``; the gate runs on it (its
workloads tolerate that taint); the signed bundle is published as the RBAC of
``deploy/publish-rbac.yaml`` (a ServiceAccount token); a pod of the validated task type (nodeSelector
on the published label, no toleration) is then scheduled there by the real kube-scheduler; once the
status has expired, ``hetero publish --expire`` withdraws it and the node is tainted again, so a new
pod stays Pending. Which real component re-taints on expiry here: ``hetero publish --expire`` (a
CronJob in a cluster); the Node Readiness Controller is not installed on this plane.

Expiry is judged with ``--now`` (a time after the signed ``expires_at``), so nothing waits on a clock.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kubekit import GFD, POOL, SESSION, kube_matrix, schedulable
from kubernetes import utils
from kubernetes.client.exceptions import ApiException
from support import REPO, outside_paths

from pytest_hetero.status.compute import iso, parse_time

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def hetero(*argv: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``hetero`` from this tree (a real process) with KUBECONFIG set when given."""
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run([sys.executable, "-m", "pytest_hetero.cli", *argv], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120, check=False)


def wait_for(check: Any, timeout_s: float = 60.0, what: str = "") -> Any:
    """Poll ``check()`` every 0.3 s until it returns a truthy value (returned); fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.3)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


class Published:
    """What the module fixture made: the node, its domain/taint, the signed bundle, the public key."""

    def __init__(self, cluster: Cluster, node: str, domain: str, taint: str, bundle: Path, pub: Path) -> None:
        self.cluster, self.node, self.domain, self.taint, self.bundle, self.pub = (
            cluster, node, domain, taint, bundle, pub)
        self.key = f"validation.{domain}/batch-inference"

    def read(self) -> Any:
        return self.cluster.core.read_node(self.node)

    def condition(self) -> Any:
        return next((c for c in self.read().status.conditions or [] if c.type == self.key), None)

    def tainted(self) -> bool:
        return any(t.key == self.taint for t in self.read().spec.taints or [])


def publisher_kubeconfig(cluster: Cluster, tmp: Path, drop_status: bool = False) -> Path:
    """Apply deploy/publish-rbac.yaml in a fresh namespace (cluster-scoped names made unique; with
    ``drop_status`` the nodes/status rule left out) and return a kubeconfig holding the SA's token."""
    namespace = cluster.new_namespace("hetero-pub")
    tag = uuid.uuid4().hex[:5]
    for doc in yaml.safe_load_all((REPO / "deploy" / "publish-rbac.yaml").read_text()):
        doc = copy.deepcopy(doc)
        meta = doc["metadata"]
        if "namespace" in meta:
            meta["namespace"] = namespace
        else:
            meta["name"] = f"{meta['name']}-{tag}"
            meta.setdefault("labels", {})[SESSION] = cluster.suffix
        for subject in doc.get("subjects", []):
            subject["namespace"] = namespace
        if doc["kind"] == "ClusterRoleBinding":
            doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{tag}"
        if drop_status:
            doc["rules"] = [r for r in doc.get("rules", []) if "nodes/status" not in r["resources"]] or None
            if doc["rules"] is None:
                del doc["rules"]
        utils.create_from_dict(cluster.api, doc)  # type: ignore[no-untyped-call]
    answer: Any = cluster.core.create_namespaced_service_account_token(
        "pytest-hetero-publisher", namespace, {"spec": {"expirationSeconds": 3600}})  # type: ignore[arg-type]  # a manifest dict, sent as it is
    token = answer.status.token  # (the client's models make every field optional)
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    path = tmp / f"publisher-{tag}.kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": admin["clusters"],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": admin["clusters"][0]["name"], "user": "sa"}}],
        "current-context": "sa"}))
    return path


def gpu_node(cluster: Cluster, node: str, tag: str, taint: str) -> None:
    """Create KWOK node ``node`` of pool ``pub-<tag>``: 8 fake GPUs, tainted ``taint``; wait until it is Ready."""
    cap = {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "8"}
    cluster.core.create_node({  # type: ignore[arg-type]  # a manifest dict, sent as it is
        "metadata": {"name": node, "annotations": {"kwok.x-k8s.io/node": "fake"},
                     "labels": {POOL: f"pub-{tag}", SESSION: cluster.suffix, "kubernetes.io/hostname": node, **GFD}},
        "spec": {"taints": [{"key": taint, "effect": "NoSchedule"}]}})
    cluster.core.patch_node_status(node, {"status": {"capacity": cap, "allocatable": cap, "conditions": []}})
    wait_for(lambda: schedulable(cluster.core.read_node(node)), 60, f"node {node} Ready")


def signed_run(cluster: Cluster, tmp: Path, tag: str, domain: str, taint: str,
               tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The signed bundle (key ``tmp/key``) of a gate run of profile ``quick`` (discovery → scheduling → startup) on
    pool ``pub-<tag>``."""
    doc = json.loads(kube_matrix(cluster.suffix, cluster.namespace, [{
        "name": "gpu", "type": "gpu", "vendor": "nvidia", "requests": {"nvidia.com/gpu": "1"},
        "pool": f"pub-{tag}", "tolerations": [{"key": taint, "operator": "Exists", "effect": "NoSchedule"}],
        "expect": {"devices": 8}}], layers={"discovery": {"timeout": "20s"}, "scheduling": {"timeout": "30s"},
                                            "startup": {"timeout": "30s"}}, name="pub"))
    doc["spec"]["validation"] = {"valid_for": "2h", "domain": domain}
    doc["spec"]["profiles"] = {"quick": {"layers": ["discovery", "scheduling", "startup"]}}
    (tmp / "pub.matrix.yaml").write_text(json.dumps(doc))
    assert hetero("keygen", str(tmp / "key")).returncode == 0
    # module-scoped, so before any test's outside_inputs: the run is allowed the matrix's cases/ itself
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "HETERO_ALLOW_PATHS": outside_paths(tmp_path_factory),
           "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                          str(tmp / "pub.matrix.yaml"), "--hetero-profile", "quick", "--hetero-kube-context",
                          "hetero", "--hetero-report-dir", str(tmp / "reports"), "--hetero-sign-key",
                          str(tmp / "key")], capture_output=True, text=True, env=env, cwd=tmp, timeout=600,
                         check=False)
    bundles = sorted((tmp / "reports").iterdir())
    assert len(bundles) == 1, run.stdout[-3000:] + run.stderr[-3000:]
    return bundles[0]


@pytest.fixture(scope="module")
def published(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Published]:
    """A new tainted fake-GPU KWOK node, and a signed bundle of the gate run on it (discovery →
    scheduling → startup: on KWOK startup fails honestly, device_not_visible, so the level is scheduling)."""
    tag = uuid.uuid4().hex[:5]
    domain, node = f"t{tag}.hetero.test", f"pubgpu-{cluster.suffix}-{tag}"
    taint = f"validation.{domain}/unvalidated"
    try:
        gpu_node(cluster, node, tag, taint)
        tmp = tmp_path_factory.mktemp("publish")
        yield Published(cluster, node, domain, taint, signed_run(cluster, tmp, tag, domain, taint, tmp_path_factory),
                        tmp / "key.pub")
    finally:
        try:
            cluster.core.delete_node(node)
        except ApiException:
            pass


def probe_pod(p: Published, namespace: str, selector: dict[str, str]) -> str:
    """A pod of the batch-inference task type: nodeSelector ``selector``, no toleration of the taint."""
    name = f"probe-{uuid.uuid4().hex[:6]}"
    p.cluster.core.create_namespaced_pod(namespace, {  # type: ignore[arg-type]  # a manifest dict, sent as it is
        "metadata": {"name": name},
        "spec": {"nodeSelector": selector, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "python:3.11", "command": ["true"]}]}})
    return name


def read_pod(p: Published, namespace: str, name: str) -> Any:
    """The pod as the API answers it (the client's models make every field optional)."""
    return p.cluster.core.read_namespaced_pod(name, namespace)


def pod_node(p: Published, namespace: str, name: str) -> str | None:
    node: str | None = read_pod(p, namespace, name).spec.node_name
    return node


def unschedulable_message(p: Published, namespace: str, name: str) -> str:
    for c in read_pod(p, namespace, name).status.conditions or []:
        if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
            return str(c.message)
    return ""


def rerun_discovery(p: Published, reports: Path) -> dict[str, Any]:
    """The published matrix's discovery item run again (a fresh pytest process, admin kubeconfig): its evidence."""
    matrix = p.bundle.parents[1] / "pub.matrix.yaml"
    env = {**os.environ, "KUBECONFIG": str(p.cluster.kubeconfig),
           "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", str(matrix),
                          "-k", "discovery", "--hetero-kube-context", "hetero", "--hetero-report-dir", str(reports)],
                         capture_output=True, text=True, env=env, cwd=matrix.parent, timeout=300, check=False)
    (bundle,) = reports.iterdir()
    items = json.loads((bundle / "evidence.json").read_text())["items"]
    (item,) = [i for i in items if i["layer"] == "discovery"]
    assert item, run.stdout[-3000:]
    return dict(item)


def test_publish_makes_the_node_schedulable_for_the_task_type_and_expiry_taints_it_again(
        published: Published, tmp_path: Path) -> None:
    p = published
    kubeconfig = publisher_kubeconfig(p.cluster, tmp_path)
    evidence = json.loads((p.bundle / "evidence.json").read_text())
    pool = evidence["validation"]["pools"][0]
    assert (pool["nodes"], pool["task_types"]["batch-inference"]["level"]) == ([p.node], "scheduling")
    assert p.tainted() and p.condition() is None

    # default required level (business) not reached: the label says the level, the condition is False,
    # the taint stays, and a batch-inference pod selecting the label is refused by the taint
    done = hetero("publish", str(p.bundle), "--to", "kubernetes", "--key", str(p.pub), "--taint", p.taint,
                  kubeconfig=kubeconfig)
    assert done.returncode == 0, done.stderr
    assert p.read().metadata.labels[p.key] == "scheduling"
    assert (p.condition().status, p.condition().reason) == ("False", "NotValidated")
    assert p.tainted()
    namespace = p.cluster.new_namespace("hetero-pubprobe")
    first = probe_pod(p, namespace, {p.key: "scheduling", "kubernetes.io/hostname": p.node})
    message = wait_for(lambda: unschedulable_message(p, namespace, first), 30, "the probe pod refused")
    assert "had untolerated taint" in message  # the only node matching the selector is this one

    # required level scheduling: condition True, taint removed, the same pod is scheduled on the node
    done = hetero("publish", str(p.bundle), "--to", "kubernetes", "--key", str(p.pub), "--taint", p.taint,
                  "--require-level", "scheduling", kubeconfig=kubeconfig)
    assert done.returncode == 0, done.stderr
    condition = p.condition()
    assert (condition.status, condition.reason) == ("True", "Validated")
    assert pool["expires_at"] in condition.message
    assert p.read().metadata.annotations[p.key + ".expires-at"] == pool["expires_at"]
    assert not p.tainted()
    assert wait_for(lambda: pod_node(p, namespace, first), 60, "the probe pod scheduled") == p.node
    # the gate's next run on the node: the condition it published (True: validated) is not a node problem
    discovery = rerun_discovery(p, tmp_path / "again")
    assert discovery["status"] == "passed", discovery.get("failure")
    (snapshot,) = [r["data"] for r in discovery["records"] if r["kind"] == "discovery.snapshot"]
    assert snapshot["differences"] == []

    # after expiry: publishing the bundle is refused, --expire withdraws the status and re-taints
    after = iso(parse_time(pool["expires_at"]) + timedelta(seconds=1))
    refused = hetero("publish", str(p.bundle), "--to", "kubernetes", "--key", str(p.pub), "--now", after,
                     kubeconfig=kubeconfig)
    assert refused.returncode == 1 and "the validation status has expired" in refused.stderr
    early = hetero("publish", "--expire", "--to", "kubernetes", "--domain", p.domain, "--taint", p.taint,
                   kubeconfig=kubeconfig)
    assert early.returncode == 0 and json.loads(early.stdout)["plan"] == []  # nothing expired yet
    assert not p.tainted()
    done = hetero("publish", "--expire", "--to", "kubernetes", "--domain", p.domain, "--taint", p.taint,
                  "--now", after, kubeconfig=kubeconfig)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["applied"] == [{"node": p.node, "labels": {p.key: None},
                                                  "conditions": [p.key + "=False"], "taint": "added"}]
    assert (p.condition().status, p.condition().reason) == ("False", "Expired")
    assert p.key not in p.read().metadata.labels and p.key + ".expires-at" not in p.read().metadata.annotations
    assert p.tainted()
    second = probe_pod(p, namespace, {"kubernetes.io/hostname": p.node})
    message = wait_for(lambda: unschedulable_message(p, namespace, second), 30, "the new pod refused")
    assert "had untolerated taint" in message  # the only node matching the selector is this one
    assert pod_node(p, namespace, second) is None
    ready = next(c for c in p.read().status.conditions if c.type == "Ready")
    assert ready.status == "True"  # the strategic merge left the node's own conditions alone


def test_publish_refuses_unverified_bundles_and_names_a_missing_verb(published: Published, tmp_path: Path) -> None:
    p = published
    unsigned = hetero("publish", str(p.bundle), "--to", "kubernetes")
    assert unsigned.returncode == 2 and "no trusted public key" in unsigned.stderr
    other = tmp_path / "other"
    assert hetero("keygen", str(other)).returncode == 0
    wrong = hetero("publish", str(p.bundle), "--to", "kubernetes", "--key", str(other) + ".pub")
    assert wrong.returncode == 2 and "does not verify" in wrong.stderr
    kubeconfig = publisher_kubeconfig(p.cluster, tmp_path, drop_status=True)
    denied = hetero("publish", str(p.bundle), "--to", "kubernetes", "--key", str(p.pub), kubeconfig=kubeconfig)
    assert denied.returncode == 1
    assert "nodes/status" in denied.stderr or "forbidden" in denied.stderr.lower(), denied.stderr
    assert f"publish to node {p.node}" in denied.stderr and "nodes already published: none" in denied.stderr


def test_a_node_created_again_since_the_run_is_not_published(
    cluster: Cluster, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The run exercised a node; the node was then deleted and created again under the same name (a replaced
    machine). ``hetero publish`` wrote the run's level, condition and annotations on the new machine, which ran
    nothing. Now it is left out, ``replaced``: the signed status names the uid discovery read of the node, and the
    node now holding the name has another."""
    tag = uuid.uuid4().hex[:5]
    domain, node = f"t{tag}.hetero.test", f"pubnew-{cluster.suffix}-{tag}"
    taint = f"validation.{domain}/unvalidated"
    try:
        gpu_node(cluster, node, tag, taint)
        listed: Any = cluster.core
        first = str(listed.read_node(node).metadata.uid)
        bundle = signed_run(cluster, tmp_path, tag, domain, taint, tmp_path_factory)
        pools = json.loads((bundle / "evidence.json").read_text())["validation"]["pools"]
        assert [(e["node"], e.get("uid")) for p in pools for e in p["node_status"]] == [(node, first)], pools
        cluster.core.delete_node(node)
        wait_for(lambda: node not in [n.metadata.name for n in listed.list_node().items], 30, f"node {node} deleted")
        gpu_node(cluster, node, tag, taint)
        again = str(listed.read_node(node).metadata.uid)
        done = hetero("publish", str(bundle), "--to", "kubernetes", "--key", str(tmp_path / "key.pub"))
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert out["replaced"] == [{"node": node, "uid": again, "run_uid": first}] and out["applied"] == [], out
        assert f"node {node} is uid {again}, the run read uid {first}" in done.stderr
        labels = listed.read_node(node).metadata.labels or {}
        assert not [k for k in labels if k.startswith(f"validation.{domain}/")], labels
    finally:
        try:
            cluster.core.delete_node(node)
        except ApiException:
            pass
