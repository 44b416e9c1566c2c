"""Kubernetes-backend tests against the real plane (tests/infra/kubeplane.sh): fake pools, namespaces, kubelet.

The session fixture :func:`cluster` ensures the plane, creates this session's nodes (see
:mod:`kubekit`; unique suffix, deleted at the end), a validation namespace with a KWOK
ClusterExec (exec runs on this host) and the simulated kubelet of the ``outcome`` node. Without
Go (and no cached binaries) the tests skip, except under ``CI=true`` where that is a failure.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubekit import IN_CI, POOL, SESSION, FakeKubelet, node_specs, schedulable
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

_spec = importlib.util.spec_from_file_location(
    "hetero_kubeplane", Path(__file__).parents[1] / "infra" / "kubeplane.py"
)
kubeplane = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(kubeplane)  # type: ignore[union-attr]


@dataclass
class Cluster:
    """This session's view of the plane: admin ``api``, ``kubeconfig`` path, node name ``suffix``,
    ``namespace`` (ClusterExec-enabled), ``nodes`` (pool → node names)."""

    api: client.ApiClient
    kubeconfig: Path
    suffix: str
    namespace: str
    nodes: dict[str, list[str]]

    @property
    def core(self) -> client.CoreV1Api:
        """CoreV1Api (admin)."""
        return client.CoreV1Api(self.api)

    def new_namespace(self, stem: str) -> str:
        """Create a namespace ``<stem>-<suffix>-<random>`` (deleted at session end); wait for its default SA."""
        name = f"{stem}-{self.suffix}-{uuid.uuid4().hex[:4]}"
        self.core.create_namespace({"metadata": {"name": name, "labels": {SESSION: self.suffix}}})  # type: ignore[arg-type]  # a manifest dict, sent as it is
        client.CustomObjectsApi(self.api).create_cluster_custom_object(
            "kwok.x-k8s.io",
            "v1alpha1",
            "clusterexecs",
            {
                "apiVersion": "kwok.x-k8s.io/v1alpha1",
                "kind": "ClusterExec",
                "metadata": {"name": name},
                "spec": {"selector": {"matchNamespaces": [name]}, "execs": [{"local": {"workDir": "/tmp"}}]},
            },
        )
        return name


def _ready(core: client.CoreV1Api, name: str) -> bool:
    node: Any = core.read_node(name)  # the API's answer (every field optional)
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """The plane with this session's pools; everything created is deleted afterwards."""
    try:
        kubeconfig = kubeplane.ensure_plane()
    except kubeplane.PlaneUnavailable as exc:
        if IN_CI:
            pytest.fail(f"CI=true but the Kubernetes plane is unavailable: {exc}")
        pytest.skip(f"Kubernetes plane unavailable: {exc}")
    # the backend under test (in pytester runs) reads KUBECONFIG: point it at the test plane, never
    # at whatever cluster the developer's environment names, and restore it afterwards
    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(kubeconfig)
    api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    core = client.CoreV1Api(api)
    suffix = uuid.uuid4().hex[:5]
    specs = node_specs(suffix)
    nodes: dict[str, list[str]] = {}
    kubelet = None
    made = Cluster(api, kubeconfig, suffix, "", nodes)
    try:
        for body in specs:
            core.create_node(body)  # type: ignore[arg-type]  # a manifest dict, sent as it is
            core.patch_node_status(body["metadata"]["name"], {"status": body["status"]})
            nodes.setdefault(body["metadata"]["labels"][POOL], []).append(body["metadata"]["name"])
        kubelet = FakeKubelet(api, nodes["outcome"][0])
        made.namespace = made.new_namespace("hetero-k8s")
        _wait_until_settled(core, nodes)
        yield made
    finally:
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous
        if kubelet is not None:
            kubelet.close()
        _delete_session_objects(api, suffix, specs)


def _wait_until_settled(core: client.CoreV1Api, nodes: dict[str, list[str]]) -> None:
    """Wait (at most 60 s) until every pool's nodes are schedulable and the notready pool's node is not Ready."""
    deadline = time.monotonic() + 60
    pending = [n for pool, names in nodes.items() if pool != "notready" for n in names]
    while pending and time.monotonic() < deadline:
        pending = [n for n in pending if not schedulable(core.read_node(n))]
        time.sleep(0.3)
    assert not pending, f"nodes not Ready (or still tainted node.kubernetes.io/*) after 60 s: {pending}"
    while _ready(core, nodes["notready"][0]) and time.monotonic() < deadline:
        time.sleep(0.3)


def _delete_session_objects(api: client.ApiClient, suffix: str, specs: list[dict[str, Any]]) -> None:
    """Delete this session's namespaces (and their KWOK ClusterExecs), RBAC objects and nodes."""
    core = client.CoreV1Api(api)
    namespaces: list[Any] = core.list_namespace(label_selector=f"{SESSION}={suffix}").items
    for ns in namespaces:
        core.delete_namespace(ns.metadata.name)
        try:
            client.CustomObjectsApi(api).delete_cluster_custom_object(
                "kwok.x-k8s.io", "v1alpha1", "clusterexecs", ns.metadata.name
            )
        except ApiException:
            pass
    rbac = client.RbacAuthorizationV1Api(api)
    bindings: list[Any] = rbac.list_cluster_role_binding(label_selector=f"{SESSION}={suffix}").items
    for binding in bindings:
        rbac.delete_cluster_role_binding(binding.metadata.name)
    roles: list[Any] = rbac.list_cluster_role(label_selector=f"{SESSION}={suffix}").items
    for role in roles:
        rbac.delete_cluster_role(role.metadata.name)
    for body in specs:
        try:
            core.delete_node(body["metadata"]["name"])
        except ApiException:
            pass


@pytest.fixture
def run_id(cluster: Cluster) -> Iterator[str]:
    """A fresh run id; afterwards nothing labelled with it may remain (asserted: cleanup is under test)."""
    value = "t" + uuid.uuid4().hex[:10]
    yield value
    left: list[Any] = cluster.core.list_pod_for_all_namespaces(label_selector=f"pytest-hetero.run-id={value}").items
    alive = [p.metadata.name for p in left if p.metadata.deletion_timestamp is None]
    for p in left:
        try:
            cluster.core.delete_namespaced_pod(p.metadata.name, p.metadata.namespace, grace_period_seconds=0)
        except ApiException:
            pass
    assert not alive, f"pods of run {value} left behind: {alive}"


# --------------------------------------------------------------------------------------------------
# The real node (opt-in): a kubelet + containerd + CNI + the test device plugin on a plane of its own
# (tests/infra/realnode.sh), and a real Kueue on that plane (tests/infra/kueue.sh). The KWOK plane and
# the ``cluster`` fixture above never see it, so their scheduling messages stay as they are.

_rn_spec = importlib.util.spec_from_file_location(
    "hetero_realnode", Path(__file__).parents[1] / "infra" / "realnode.py"
)
realnode_infra = importlib.util.module_from_spec(_rn_spec)  # type: ignore[arg-type]
sys.modules["hetero_realnode"] = realnode_infra  # its dataclasses look their module up there
_rn_spec.loader.exec_module(realnode_infra)  # type: ignore[union-attr]


@dataclass
class RealNodeCluster:
    """The real node's plane as one test session sees it.

    ``api`` is an admin client of the real node's plane (not the KWOK plane's: ``KUBECONFIG`` is
    left alone, pass ``info.kubeconfig`` to whatever should talk to it); ``info`` is the
    :class:`realnode.RealNode` (node name, taint, toleration, nodeSelector, containerd socket,
    device-plugin controls); ``suffix`` tags this session's namespaces (deleted at session end).
    """

    api: client.ApiClient
    info: Any
    suffix: str
    cache: str = ""
    """The build cache the node was started from (``HETERO_CACHE``, else ``~/.cache/pytest-hetero`` as
    HOME was at session start): pytester points HOME at a temporary folder during a test, where
    realnode.sh would find no cache and rebuild the kubelet from nothing."""

    @property
    def core(self) -> client.CoreV1Api:
        """CoreV1Api (admin) of the real node's plane."""
        return client.CoreV1Api(self.api)

    def new_namespace(self, stem: str) -> str:
        """Create ``<stem>-<suffix>-<random>`` (labelled with the session; deleted at session end)."""
        name = f"{stem}-{self.suffix}-{uuid.uuid4().hex[:4]}"
        self.core.create_namespace({"metadata": {"name": name, "labels": {SESSION: self.suffix}}})  # type: ignore[arg-type]  # a manifest dict, sent as it is
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self.core.read_namespaced_service_account("default", name)
                break
            except ApiException:
                time.sleep(0.2)
        return name

    def stop_kubelet(self) -> None:
        """Stop only the kubelet (the node goes NotReady after the plane's grace period)."""
        with _cache_env(self.cache):
            realnode_infra.stop_kubelet()

    def ensure(self) -> None:
        """Start whatever of the real node is down again (e.g. the kubelet after :meth:`stop_kubelet`)."""
        with _cache_env(self.cache):
            realnode_infra.ensure_realnode()

    def pod_spec(self, containers: list[dict[str, Any]], **extra: object) -> dict[str, Any]:
        """A pod spec that lands on the real node: its toleration and nodeSelector added."""
        info = self.info
        return {
            "containers": containers,
            "tolerations": [info.toleration],
            "nodeSelector": info.node_selector,
            "terminationGracePeriodSeconds": 1,
            **extra,
        }


@contextmanager
def _cache_env(cache: str) -> Iterator[None]:
    """``HETERO_CACHE=cache`` while the block runs (restored afterwards)."""
    previous = os.environ.get("HETERO_CACHE")
    os.environ["HETERO_CACHE"] = cache
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("HETERO_CACHE", None)
        else:
            os.environ["HETERO_CACHE"] = previous


@pytest.fixture(scope="session")
def realnode_images(realnode: RealNodeCluster) -> dict[str, str]:
    """Every stand-in test image (tests/kubernetes/realimages.py) in the real node's containerd: image →
    the reference the kubelet knows. Built and imported when missing or when its recipe changed, else
    nothing is done (the recipe key is a label in containerd): a test that names one of these images
    takes this fixture, never relies on another test having imported it (``imagePullPolicy: Never``
    gives ``ErrImageNeverPull`` otherwise)."""
    import realimages

    return {name: realimages.ensure(realnode.info.containerd_socket, name) for name in realimages.RECIPES}


@pytest.fixture(scope="session")
def realnode() -> Iterator[RealNodeCluster]:
    """Opt-in: the real node (built and started on first use, left running afterwards).

    Skips when the node cannot run here (not root, no Go and nothing cached) unless ``CI=true``,
    where that fails. Namespaces this session created are deleted at the end; the test module
    asserts their pods are gone.
    """
    try:
        info = realnode_infra.ensure_realnode()
    except realnode_infra.RealNodeUnavailable as exc:
        if IN_CI:
            pytest.fail(f"CI=true but the real node is unavailable: {exc}")
        pytest.skip(f"real node unavailable: {exc}")
    api = config.new_client_from_config(config_file=str(info.kubeconfig))  # type: ignore[no-untyped-call]
    cache = os.environ.get("HETERO_CACHE") or str(Path.home() / ".cache" / "pytest-hetero")
    made = RealNodeCluster(api, info, uuid.uuid4().hex[:5], cache)
    try:
        yield made
    finally:
        core = client.CoreV1Api(api)
        mine: list[Any] = core.list_namespace(label_selector=f"{SESSION}={made.suffix}").items
        for ns in mine:
            try:
                core.delete_namespace(ns.metadata.name)
            except ApiException:
                pass


@pytest.fixture(scope="session")
def real_kueue(realnode: RealNodeCluster) -> Any:
    """Opt-in: a real Kueue (``realnode.Kueue``: version, webhook URL) on the real node's plane."""
    try:
        return realnode_infra.ensure_kueue()
    except realnode_infra.RealNodeUnavailable as exc:
        if IN_CI:
            pytest.fail(f"CI=true but Kueue is unavailable: {exc}")
        pytest.skip(f"Kueue unavailable: {exc}")
