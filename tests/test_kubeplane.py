"""Smoke test of the real local Kubernetes plane (tests/infra/kubeplane.sh).

Real etcd/apiserver/scheduler/controller-manager, KWOK fake nodes: a pod
requesting ``nvidia.com/gpu`` is scheduled onto a fake 8-GPU node and reaches
Running; a GPU ResourceQuota makes the apiserver refuse a second pod with 403.
"""

from __future__ import annotations

import importlib.util
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

_spec = importlib.util.spec_from_file_location(
    "hetero_kubeplane", Path(__file__).parent / "infra" / "kubeplane.py")
assert _spec is not None and _spec.loader is not None
kubeplane = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kubeplane)

GPU = "nvidia.com/gpu"


@pytest.fixture(scope="session")
def kube_api() -> client.ApiClient:
    """ApiClient (admin) for a running plane; skips without Go unless CI=true."""
    try:
        kubeconfig = kubeplane.ensure_plane()
    except kubeplane.PlaneUnavailable as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the Kubernetes plane is unavailable: {exc}")
        pytest.skip(str(exc))
    api: client.ApiClient = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    return api


def _wait(predicate: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.5) -> Any:
    """Poll ``predicate()`` until it returns a truthy value; return it.

    Raises AssertionError naming ``what`` after ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


def gpu_node(name: str, gpus: int = 8) -> client.V1Node:
    """A KWOK-managed fake node with ``gpus`` nvidia.com/gpu and GFD-like labels."""
    key, value = kubeplane.KWOK_NODE_ANNOTATION
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(gpus)}
    return client.V1Node(
        metadata=client.V1ObjectMeta(
            name=name,
            annotations={key: value},
            labels={
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.count": str(gpus),
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.memory": "81559",
                "nvidia.com/cuda.driver.major": "550",
                "nvidia.com/gpu.family": "hopper",
            },
        ),
        status=client.V1NodeStatus(capacity=capacity, allocatable=capacity),
    )


def gpu_pod(name: str, gpus: int = 1, node: str | None = None) -> client.V1Pod:
    """A pod requesting ``gpus`` nvidia.com/gpu (limit == request), GPU nodes only; pinned by the
    hostname label to ``node`` when given (the plane is shared with other tests' GPU nodes)."""
    selector = {"nvidia.com/gpu.present": "true", **({"kubernetes.io/hostname": node} if node else {})}
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(
            node_selector=selector,
            containers=[client.V1Container(
                name="payload",
                image="registry.invalid/hetero/payload:0",  # never pulled on KWOK
                resources=client.V1ResourceRequirements(limits={GPU: str(gpus)}),
            )],
        ),
    )


@pytest.fixture
def core(kube_api: client.ApiClient) -> client.CoreV1Api:
    """CoreV1Api bound to the plane."""
    return client.CoreV1Api(kube_api)


@pytest.fixture
def gpu_node_name(core: client.CoreV1Api) -> Iterator[str]:
    """Create a ready fake 8-GPU node for one test; delete it afterwards."""
    name = f"kwok-gpu-{uuid.uuid4().hex[:6]}"
    core.create_node(gpu_node(name))

    def ready() -> bool:
        node: Any = core.read_node(name)  # the API's answer: the client's models make every field optional
        return any(c.type == "Ready" and c.status == "True"
                   for c in (node.status.conditions or []))

    try:
        _wait(ready, 60, f"node {name} Ready")
        yield name
    finally:
        core.delete_node(name)


@pytest.fixture
def namespace(core: client.CoreV1Api) -> Iterator[str]:
    """A fresh namespace (deleted afterwards) whose default SA exists."""
    name = f"hetero-smoke-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))

    def has_sa() -> client.V1ServiceAccount | None:
        try:
            return core.read_namespaced_service_account("default", name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    try:
        _wait(has_sa, 60, f"default ServiceAccount in {name}")
        yield name
    finally:
        core.delete_namespace(name)


def test_gpu_pod_scheduled_and_running(core: client.CoreV1Api, gpu_node_name: str, namespace: str) -> None:
    core.create_namespaced_pod(namespace, gpu_pod("gpu-1", node=gpu_node_name))

    def running() -> Any:
        pod: Any = core.read_namespaced_pod("gpu-1", namespace)  # the API's answer: the client's models make every field optional
        return pod if pod.status.phase == "Running" else None

    pod = _wait(running, 60, "pod gpu-1 Running")
    assert pod.spec.node_name == gpu_node_name
    node: Any = core.read_node(gpu_node_name)
    assert node.status.allocatable[GPU] == "8"


def test_gpu_quota_refuses_second_pod(core: client.CoreV1Api, gpu_node_name: str, namespace: str) -> None:
    quota = client.V1ResourceQuota(
        metadata=client.V1ObjectMeta(name="gpu-quota"),
        spec=client.V1ResourceQuotaSpec(hard={f"requests.{GPU}": "1"}),
    )
    core.create_namespaced_resource_quota(namespace, quota)
    # Quota admission refuses everything until the controller fills status.hard.
    def hard() -> Any:
        quota: Any = core.read_namespaced_resource_quota("gpu-quota", namespace)  # the API's answer: the client's models make every field optional
        return quota.status.hard

    _wait(hard,
          60, "ResourceQuota status")

    core.create_namespaced_pod(namespace, gpu_pod("gpu-first", node=gpu_node_name))
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(namespace, gpu_pod("gpu-second", node=gpu_node_name))
    assert refused.value.status == 403
    assert "exceeded quota" in str(refused.value.body)


# --- KWOK debugging server: exec / logs through the real apiserver ----------

KWOK_GROUP, KWOK_VERSION = "kwok.x-k8s.io", "v1alpha1"


def _running_pod(core: client.CoreV1Api, namespace: str, name: str, node: str) -> Any:
    """Create a 1-GPU pod on ``node`` and wait (<= 60 s) until it is Running; the pod as the API answers it."""
    core.create_namespaced_pod(namespace, gpu_pod(name, node=node))

    def pod() -> Any:
        return core.read_namespaced_pod(name, namespace)

    return _wait(lambda: (p := pod()).status.phase == "Running" and p, 60, f"pod {name} Running")


def _exec(core: client.CoreV1Api, namespace: str, pod: str, command: list[str]) -> tuple[str, str, dict[str, Any]]:
    """Exec ``command`` in ``pod`` via the apiserver (websocket).

    Returns (stdout, stderr, status) where status is the decoded error-channel
    object (``{"status": "Success"}`` on exit 0).
    """
    import json

    from kubernetes.stream import stream

    ws = stream(core.connect_get_namespaced_pod_exec, pod, namespace, command=command,
                stdout=True, stderr=True, stdin=False, tty=False, _preload_content=False)
    try:
        ws.run_forever(timeout=30)
        return ws.read_stdout(), ws.read_stderr(), json.loads(ws.read_channel(3) or "{}")
    finally:
        ws.close()


def test_exec_runs_local_command_via_exec_resource(kube_api: client.ApiClient, core: client.CoreV1Api,
                                                   gpu_node_name: str, namespace: str, tmp_path: Path) -> None:
    _running_pod(core, namespace, "payload", gpu_node_name)
    crd = client.CustomObjectsApi(kube_api)
    crd.create_namespaced_custom_object(KWOK_GROUP, KWOK_VERSION, namespace, "execs", {
        "apiVersion": f"{KWOK_GROUP}/{KWOK_VERSION}", "kind": "Exec",
        "metadata": {"name": "payload"},  # same name as the pod
        "spec": {"execs": [{"local": {
            "workDir": str(tmp_path), "envs": [{"name": "HETERO_ROLE", "value": "payload"}]}}]},
    })

    def exec_ok() -> tuple[str, str, dict[str, Any]] | None:  # kwok sees the new Exec through a watch: retry briefly
        out, err, status = _exec(core, namespace, "payload",
                                 ["sh", "-c", "echo $HETERO_ROLE; pwd; echo oops >&2"])
        return (out, err, status) if status.get("status") == "Success" else None

    out, err, _ = _wait(exec_ok, 20, "exec through kwok", interval_s=1)
    assert out.split() == ["payload", str(tmp_path)]
    assert err == "oops\n"
    # Non-zero exit: KWOK reports a 500 InternalError whose message ends in
    # "exit status N" (no NonZeroExitCode/ExitCode cause like a real kubelet).
    _, _, status = _exec(core, namespace, "payload", ["sh", "-c", "exit 3"])
    assert status.get("status") == "Failure"
    assert status["message"].endswith("exit status 3")


def test_logs_served_from_local_file_via_logs_resource(kube_api: client.ApiClient, core: client.CoreV1Api,
                                                       gpu_node_name: str, namespace: str, tmp_path: Path) -> None:
    _running_pod(core, namespace, "payload", gpu_node_name)
    log_file = tmp_path / "payload.log"
    # KWOK parses CRI log lines: "<RFC3339Nano> <stream> <F|P> <text>".
    log_file.write_text("2026-01-01T00:00:00.000000000Z stdout F hello from payload\n"
                        "2026-01-01T00:00:01.000000000Z stderr F a warning\n")
    client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        KWOK_GROUP, KWOK_VERSION, namespace, "logs", {
            "apiVersion": f"{KWOK_GROUP}/{KWOK_VERSION}", "kind": "Logs",
            "metadata": {"name": "payload"},
            "spec": {"logs": [{"logsFile": str(log_file)}]},
        })

    def logs() -> str | None:
        try:
            return core.read_namespaced_pod_log("payload", namespace)
        except ApiException:
            return None

    assert _wait(logs, 20, "pod logs through kwok", interval_s=1) == \
        "hello from payload\na warning\n"


def test_node_not_ready_stage(core: client.CoreV1Api, gpu_node_name: str) -> None:
    label = "node-not-ready.stage.kwok.x-k8s.io"

    def ready_status() -> Any:
        node: Any = core.read_node(gpu_node_name)  # the API's answer: the client's models make every field optional
        return next(c for c in node.status.conditions if c.type == "Ready")

    core.patch_node(gpu_node_name, {
        "metadata": {"labels": {label: "true"},
                     "annotations": {f"{label}/reason": "XidError",
                                     f"{label}/message": "GPU has fallen off the bus"}}})
    cond = _wait(lambda: (c := ready_status()).status == "False" and c, 30, "Ready=False")
    assert cond.reason == "XidError"
    core.patch_node(gpu_node_name, {"metadata": {"labels": {label: None}}})
    _wait(lambda: ready_status().status == "True", 30, "Ready=True again")
