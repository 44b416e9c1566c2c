"""The real-node test infrastructure itself (tests/infra/realnode.sh, kueue.sh, deviceplugin/).

Everything here is produced by real components: a kubelet v1.34.4 with a containerd of its own, CNI
bridge networking, the test device plugin through the kubelet's device-plugin API, and Kueue's
controller manager. Each failure class is asserted by the reason the kubelet / Kueue wrote; the
texts they wrote are collected and, when ``HETERO_REALNODE_TRANSCRIPT`` names a file, saved there as
JSON (for the record of what real components say; nothing reads it back).

Runs on the opt-in ``realnode`` / ``real_kueue`` fixtures (conftest.py); the KWOK plane other tests
use is untouched. Every object created is deleted and checked gone.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import stream
from kubernetes.stream.ws_client import ERROR_CHANNEL

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import RealNodeCluster

SHELL = "pytest-hetero/shell-only:1"  # busybox; imported from the Docker engine (docker-engine.sh)
PYTHON = "pytest-hetero/py311-onnx:1"  # python3 + numpy + onnxruntime
ABSENT = "127.0.0.1:1/hetero/absent:1"  # no registry listens there: the pull fails at once
REPLAY = Path(__file__).parents[1] / "data" / "replay"
GPU = "nvidia.com/gpu"
NPU = "huawei.com/Ascend910"
KUEUE = ("kueue.x-k8s.io", "v1beta2")

TRANSCRIPT: dict[str, Any] = {}


@pytest.fixture(scope="module", autouse=True)
def _save_transcript() -> Iterator[None]:
    yield
    path = os.environ.get("HETERO_REALNODE_TRANSCRIPT")
    if path and TRANSCRIPT:
        Path(path).write_text(json.dumps(TRANSCRIPT, indent=2, sort_keys=True) + "\n")


@pytest.fixture(scope="module")
def ns(realnode: RealNodeCluster) -> Iterator[str]:
    """This module's namespace; at the end no pod of it may be left on the node."""
    name = realnode.new_namespace("realnode")
    yield name
    core = realnode.core
    pods: list[Any] = core.list_namespaced_pod(name).items
    for pod in pods:
        core.delete_namespaced_pod(pod.metadata.name, name, grace_period_seconds=1)
    wait_for(lambda: not core.list_namespaced_pod(name).items, 60, "pods of the module deleted")
    core.delete_namespace(name)


# ------------------------------------------------------------------------------------ helpers --
def wait_for(pred: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.5) -> Any:
    """Poll ``pred`` until it returns something truthy; return it, or fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(every_s)


def events(core: client.CoreV1Api, namespace: str, name: str) -> list[dict[str, Any]]:
    """Events about object ``name`` (oldest first): type, reason, source component, message, count."""
    items: list[Any] = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    items.sort(key=lambda e: e.first_timestamp or e.event_time or e.metadata.creation_timestamp)
    return [
        {"type": e.type, "reason": e.reason, "from": (e.source.component if e.source else None)
         or e.reporting_component, "message": e.message, "count": e.count}
        for e in items
    ]


def make_pod(realnode: RealNodeCluster, namespace: str, containers: list[dict[str, Any]],
             restart: str = "Never", **extra: Any) -> str:
    name = f"p-{uuid.uuid4().hex[:8]}"
    realnode.core.create_namespaced_pod(namespace, {  # type: ignore[arg-type]  # a manifest dict, sent as it is
        "metadata": {"name": name},
        "spec": realnode.pod_spec(containers, restartPolicy=restart, **extra),
    })
    return name


def delete_pod(realnode: RealNodeCluster, namespace: str, name: str) -> None:
    try:
        realnode.core.delete_namespaced_pod(name, namespace, grace_period_seconds=1)
    except ApiException as exc:
        if exc.status != 404:
            raise

    def gone() -> bool:
        try:
            realnode.core.read_namespaced_pod(name, namespace)
            return False
        except ApiException as exc:
            return bool(exc.status == 404)

    wait_for(gone, 60, f"pod {name} deleted by the kubelet")


def read_pod(realnode: RealNodeCluster, namespace: str, name: str) -> Any:
    """The pod as the API answers it (the client's models make every field optional; the tests read those
    the kubelet fills)."""
    return realnode.core.read_namespaced_pod(name, namespace)


def read_node(realnode: RealNodeCluster) -> Any:
    """The real node as the API answers it (every field optional in the client's models, as with :func:`read_pod`)."""
    return realnode.core.read_node(realnode.info.node)


def container_state(realnode: RealNodeCluster, namespace: str, name: str) -> Any:
    statuses = read_pod(realnode, namespace, name).status.container_statuses or []
    return statuses[0] if statuses else None


def exec_in(realnode: RealNodeCluster, namespace: str, pod: str, cmd: list[str]) -> tuple[int, str, str]:
    """Run ``cmd`` in the pod through the apiserver → kubelet exec path; (exit code, stdout, stderr).

    The exit code comes from the kubelet's v1 Status on the error channel (``NonZeroExitCode`` cause
    ``ExitCode``); an exec the runtime could not start at all gives -1 and the Status message is
    appended to stderr.
    """
    ws = stream(realnode.core.connect_get_namespaced_pod_exec, pod, namespace, command=cmd,
                stdout=True, stderr=True, stdin=False, tty=False, _preload_content=False)
    out, err, status_text = [], [], []
    while ws.is_open():
        ws.update(timeout=5)
        if ws.peek_stdout():
            out.append(ws.read_stdout())
        if ws.peek_stderr():
            err.append(ws.read_stderr())
        if ws.peek_channel(ERROR_CHANNEL):
            status_text.append(ws.read_channel(ERROR_CHANNEL))
    ws.close()
    status = json.loads("".join(status_text) or "{}")
    if status.get("status") == "Success":
        return 0, "".join(out), "".join(err)
    causes = {c.get("reason"): c.get("message") for c in status.get("details", {}).get("causes", [])}
    if status.get("reason") == "NonZeroExitCode" and "ExitCode" in causes:
        return int(causes["ExitCode"]), "".join(out), "".join(err)
    return -1, "".join(out), "".join(err) + status.get("message", "")


def running(realnode: RealNodeCluster, namespace: str, name: str, timeout_s: float = 90) -> None:
    def ok() -> bool:
        pod = read_pod(realnode, namespace, name)
        return bool(pod.status.phase == "Running" and all(c.ready for c in pod.status.container_statuses or []))

    wait_for(ok, timeout_s, f"pod {name} Running")


def allocatable(realnode: RealNodeCluster, resource: str) -> tuple[str, str]:
    node = read_node(realnode)
    return node.status.capacity.get(resource, "0"), node.status.allocatable.get(resource, "0")


def sleeper(resources: dict[str, Any] | None = None, image: str = SHELL) -> dict[str, Any]:
    return {"name": "c", "image": image, "command": ["sleep", "3600"], "resources": resources or {}}


# -------------------------------------------------------------------------------------- node ---
def test_node_is_ready_tainted_and_real(realnode: RealNodeCluster) -> None:
    node = read_node(realnode)
    ready = next(c for c in node.status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("True", "KubeletReady")
    assert [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.spec.taints] == \
        [realnode.info.taint]
    info = node.status.node_info
    assert info.kubelet_version == "v1.34.4"
    assert info.container_runtime_version == "containerd://1.6.20"
    address = next(a.address for a in node.status.addresses if a.type == "InternalIP")
    assert not ipaddress.ip_address(address).is_loopback
    assert "kwok.x-k8s.io/node" not in (node.metadata.annotations or {})
    TRANSCRIPT["node"] = {"ready": {"reason": ready.reason, "message": ready.message},
                          "nodeInfo": {"kubeletVersion": info.kubelet_version,
                                       "containerRuntimeVersion": info.container_runtime_version,
                                       "osImage": info.os_image, "kernelVersion": info.kernel_version},
                          "internalIP": address}


def test_an_untolerating_pod_is_kept_off_by_the_taint(realnode: RealNodeCluster, ns: str) -> None:
    name = f"p-{uuid.uuid4().hex[:8]}"
    realnode.core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": {  # type: ignore[arg-type]  # a manifest dict
        "containers": [sleeper()], "nodeSelector": realnode.info.node_selector,
        "terminationGracePeriodSeconds": 1}})
    try:
        msg = wait_for(lambda: next((e["message"] for e in events(realnode.core, ns, name)
                                     if e["reason"] == "FailedScheduling"), None), 30, "FailedScheduling")
        # kube-scheduler v1.34 no longer names the taint (older ones said "untolerated taint {k: v}")
        assert msg.startswith("0/1 nodes are available: 1 node(s) had untolerated taint(s).")
        TRANSCRIPT["untolerated_taint"] = msg
    finally:
        delete_pod(realnode, ns, name)


def test_pod_runs_with_cni_and_logs_exec_go_through_the_apiserver(realnode: RealNodeCluster, ns: str) -> None:
    name = make_pod(realnode, ns, [{"name": "c", "image": SHELL,
                                    "command": ["sh", "-c", "echo hello from the real node; sleep 3600"]}])
    try:
        running(realnode, ns, name)
        pod = read_pod(realnode, ns, name)
        assert not pod.spec.host_network
        assert ipaddress.ip_address(pod.status.pod_ip) in ipaddress.ip_network("10.89.0.0/24")
        status = pod.status.container_statuses[0]
        assert status.image_id.startswith("sha256:") or "@sha256:" in status.image_id
        assert status.container_id.startswith("containerd://")
        assert realnode.core.read_namespaced_pod_log(name, ns) == "hello from the real node\n"
        assert exec_in(realnode, ns, name, ["sh", "-c", "echo $((6*7)); echo oops >&2"]) == (0, "42\n", "oops\n")
        assert exec_in(realnode, ns, name, ["sh", "-c", "exit 7"])[0] == 7
        assert exec_in(realnode, ns, name, ["cat", "/proc/1/cgroup"])[1].count("/kubepods/") >= 1
        TRANSCRIPT["pod_running"] = {"podIP": pod.status.pod_ip, "imageID": status.image_id,
                                     "events": events(realnode.core, ns, name)}
    finally:
        delete_pod(realnode, ns, name)


# --------------------------------------------------------------------------- failure classes ---
def test_crash_loop_back_off(realnode: RealNodeCluster, ns: str) -> None:
    name = make_pod(realnode, ns, [{"name": "c", "image": SHELL, "command": ["sh", "-c", "echo boom; exit 3"]}],
                    restart="Always")
    try:
        st = wait_for(lambda: (s := container_state(realnode, ns, name)) and s.state.waiting
                      and s.state.waiting.reason == "CrashLoopBackOff" and s, 90, "CrashLoopBackOff")
        assert st.last_state.terminated.exit_code == 3
        assert st.last_state.terminated.reason == "Error"
        assert st.restart_count >= 1
        # the kubelet may answer "unable to retrieve container logs for <id>" while it replaces the instance
        assert wait_for(lambda: realnode.core.read_namespaced_pod_log(name, ns, previous=True) == "boom\n", 30,
                        "the previous instance's log")
        evs = events(realnode.core, ns, name)
        backoff = next(e for e in evs if e["reason"] == "BackOff")
        assert backoff["type"] == "Warning" and backoff["from"] == "kubelet"
        TRANSCRIPT["crash_loop"] = {"waiting": {"reason": st.state.waiting.reason, "message": st.state.waiting.message},
                                    "lastState.terminated": {"reason": st.last_state.terminated.reason,
                                                             "exitCode": st.last_state.terminated.exit_code},
                                    "events": evs}
    finally:
        delete_pod(realnode, ns, name)


def test_oom_killed_by_the_memory_limit(realnode: RealNodeCluster, ns: str) -> None:
    name = make_pod(realnode, ns, [{
        "name": "c", "image": PYTHON,
        "command": ["python3", "-c", "b = bytearray(200 * 1024 * 1024); print(len(b))"],
        "resources": {"limits": {"memory": "20Mi"}},
    }])
    try:
        wait_for(lambda: read_pod(realnode, ns, name).status.phase == "Failed", 90, "phase Failed")
        st = container_state(realnode, ns, name)
        assert (st.state.terminated.reason, st.state.terminated.exit_code) == ("OOMKilled", 137)
        TRANSCRIPT["oom_killed"] = {"terminated": {"reason": st.state.terminated.reason,
                                                   "exitCode": st.state.terminated.exit_code,
                                                   "message": st.state.terminated.message},
                                    "events": events(realnode.core, ns, name)}
    finally:
        delete_pod(realnode, ns, name)


def test_image_pull_back_off_for_an_absent_image(realnode: RealNodeCluster, ns: str) -> None:
    name = make_pod(realnode, ns, [{"name": "c", "image": ABSENT}])
    try:
        first = wait_for(lambda: (s := container_state(realnode, ns, name)) and s.state.waiting
                         and s.state.waiting.reason == "ErrImagePull" and s.state.waiting, 60, "ErrImagePull")
        later = wait_for(lambda: (s := container_state(realnode, ns, name)) and s.state.waiting
                         and s.state.waiting.reason == "ImagePullBackOff" and s.state.waiting, 60,
                         "ImagePullBackOff")
        assert ABSENT in first.message and "connection refused" in first.message
        assert later.message == f'Back-off pulling image "{ABSENT}": ErrImagePull: {first.message}' \
            or later.message.startswith(f'Back-off pulling image "{ABSENT}"')
        evs = events(realnode.core, ns, name)
        assert any(e["reason"] == "Failed" and e["type"] == "Warning" and ABSENT in e["message"] for e in evs)
        TRANSCRIPT["image_pull"] = {"ErrImagePull": first.message, "ImagePullBackOff": later.message, "events": evs}
    finally:
        delete_pod(realnode, ns, name)


def test_create_container_error(realnode: RealNodeCluster, ns: str) -> None:
    """A Localhost seccomp profile that does not exist: containerd cannot build the container spec."""
    name = make_pod(realnode, ns, [{
        "name": "c", "image": SHELL, "command": ["true"],
        "securityContext": {"seccompProfile": {"type": "Localhost",
                                               "localhostProfile": "hetero/absent-profile.json"}},
    }])
    try:
        st = wait_for(lambda: (s := container_state(realnode, ns, name)) and s.state.waiting
                      and s.state.waiting.reason == "CreateContainerError" and s.state.waiting, 60,
                      "CreateContainerError")
        assert "absent-profile.json" in st.message
        evs = events(realnode.core, ns, name)
        assert any(e["reason"] == "Failed" and "absent-profile.json" in e["message"] for e in evs)
        TRANSCRIPT["create_container_error"] = {"waiting": {"reason": st.reason, "message": st.message},
                                                "events": evs}
    finally:
        delete_pod(realnode, ns, name)


# --------------------------------------------------------------------------------- devices ---
def test_allocatable_comes_from_the_device_plugin(realnode: RealNodeCluster) -> None:
    assert allocatable(realnode, GPU) == (str(realnode.info.gpus), str(realnode.info.gpus))
    assert allocatable(realnode, NPU) == (str(realnode.info.npus), str(realnode.info.npus))


def test_a_one_gpu_pod_sees_exactly_its_device_env_and_nvidia_smi(realnode: RealNodeCluster, ns: str) -> None:
    name = make_pod(realnode, ns, [sleeper({"limits": {GPU: "1"}})])
    try:
        running(realnode, ns, name)
        rc, listing, _ = exec_in(realnode, ns, name, ["sh", "-c", "ls /dev | grep nvidia"])
        # the kubelet hands out any free device (its device manager picks from an unordered set): exactly one
        devices = [d for d in listing.split() if d[len("nvidia"):].isdigit()]
        assert rc == 0 and len(devices) == 1 and sorted(set(listing.split()) - set(devices)) == [
            "nvidia-uvm", "nvidiactl"], listing
        i = int(devices[0][len("nvidia"):])
        assert 0 <= i < realnode.info.gpus
        # the stand-in nodes carry NVIDIA's char major 195 (0xc3) and the device's index as minor; no driver answers
        assert exec_in(realnode, ns, name, ["stat", "-c", "%F %t %T %a", f"/dev/nvidia{i}"])[1] == \
            f"character special file c3 {i:x} 666\n"
        rc, _, err = exec_in(realnode, ns, name, ["cat", f"/dev/nvidia{i}"])
        assert (rc, err) == (1, f"cat: can't open '/dev/nvidia{i}': No such device or address\n")
        env = exec_in(realnode, ns, name, ["sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES"])[1]
        assert env == f"GPU-00000000-0000-4000-8000-{i:012x}\n"  # the same device's ID, as its plugin names it
        rc, smi, _ = exec_in(realnode, ns, name, ["nvidia-smi"])
        capture = (REPLAY / "nvidia-smi-table-h100-8gpu.txt").read_text()
        assert rc == 0 and smi.splitlines()[:8] == capture.splitlines()[:8]
        rows = re.findall(r"^\|\s+(\d+)\s+NVIDIA H100 80GB HBM3", smi, re.MULTILINE)
        assert len(rows) == 1, smi  # one GPU row: the one device the pod was handed
        assert smi.endswith(capture[capture.index("\n\n"):])  # the Processes table, verbatim
        assert exec_in(realnode, ns, name, ["nvidia-smi", "-q"])[0] == 2
    finally:
        delete_pod(realnode, ns, name)


def test_a_two_npu_pod_sees_its_davinci_devices_and_npu_smi(realnode: RealNodeCluster, ns: str) -> None:
    name = make_pod(realnode, ns, [sleeper({"limits": {NPU: "2"}})])
    try:
        running(realnode, ns, name)
        listing = exec_in(realnode, ns, name, ["sh", "-c", "ls /dev | grep -E 'davinci|devmm|hisi'"])[1].split()
        # any two free devices (the kubelet picks from an unordered set; a terminating pod may still hold some)
        ids = sorted(int(d[len("davinci"):]) for d in listing if d[len("davinci"):].isdigit())
        assert len(ids) == 2 and all(0 <= i < realnode.info.npus for i in ids), listing
        assert sorted(set(listing) - {f"davinci{i}" for i in ids}) == ["davinci_manager", "devmm_svm", "hisi_hdc"]
        visible = exec_in(realnode, ns, name, ["sh", "-c", "echo $ASCEND_VISIBLE_DEVICES"])[1]
        assert sorted(int(v) for v in visible.strip().split(",")) == ids  # the same devices, as the plugin names them
        smi = exec_in(realnode, ns, name, ["npu-smi"])[1]
        assert smi.count("910B3") == 2 and len(set(re.findall(r"0000:[0-9A-F]{2}:00\.0", smi))) == 2, smi
        assert exec_in(realnode, ns, name, ["ls", "/usr/local/Ascend/driver/bin"])[1] == "npu-smi\n"
    finally:
        delete_pod(realnode, ns, name)


def test_over_allocation_control_hands_more_devices_than_asked(realnode: RealNodeCluster, ns: str) -> None:
    control = realnode.info.control(GPU, "extra-devices")
    control.write_text("1\n")
    try:
        name = make_pod(realnode, ns, [sleeper({"limits": {GPU: "1"}})])
        try:
            running(realnode, ns, name)
            assert exec_in(realnode, ns, name, ["sh", "-c", "ls /dev | grep -c 'nvidia[0-9]'"])[1] == "2\n"
            assert exec_in(realnode, ns, name, ["sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES"])[1].count("GPU-") == 2
        finally:
            delete_pod(realnode, ns, name)
    finally:
        control.unlink()


def test_an_unhealthy_device_lowers_allocatable(realnode: RealNodeCluster) -> None:
    n = realnode.info.gpus
    control = realnode.info.control(GPU, "unhealthy")
    control.write_text(f"{n - 1}\n")
    try:
        wait_for(lambda: allocatable(realnode, GPU) == (str(n), str(n - 1)), 30,
                 f"allocatable {GPU} {n - 1} (capacity {n})")
    finally:
        control.unlink()
    wait_for(lambda: allocatable(realnode, GPU) == (str(n), str(n)), 30, f"allocatable {GPU} back to {n}")


def test_an_allocate_error_is_unexpected_admission_error(realnode: RealNodeCluster, ns: str) -> None:
    control = realnode.info.control(GPU, "allocate-error")
    control.write_text("device GPU-00000000-0000-4000-8000-000000000000 is lost (Xid 79)\n")
    try:
        name = make_pod(realnode, ns, [sleeper({"limits": {GPU: "1"}})])
        try:
            pod = wait_for(lambda: (p := read_pod(realnode, ns, name)).status.phase == "Failed"
                           and p, 60, "the pod to fail admission")
            assert pod.status.reason == "UnexpectedAdmissionError"
            assert "Xid 79" in pod.status.message
            TRANSCRIPT["unexpected_admission_error"] = {"reason": pod.status.reason, "message": pod.status.message,
                                                        "events": events(realnode.core, ns, name)}
        finally:
            delete_pod(realnode, ns, name)
    finally:
        control.unlink()


def test_a_missing_driver_folder_leaves_the_tool_unusable(realnode: RealNodeCluster, ns: str) -> None:
    """The driver mounts name absent host paths: containerd creates them empty and the pod starts,
    but ``nvidia-smi`` is an empty directory (as on a node whose driver root is not populated)."""
    control = realnode.info.control(GPU, "missing-driver")
    control.touch()
    try:
        name = make_pod(realnode, ns, [sleeper({"limits": {GPU: "1"}})])
        try:
            running(realnode, ns, name)
            rc, out, err = exec_in(realnode, ns, name, ["nvidia-smi"])
            assert (rc, out) == (-1, "") and "OCI runtime exec failed" in err
            assert exec_in(realnode, ns, name, ["ls", "-A", "/usr/local/nvidia"])[1] == "bin\n"
            TRANSCRIPT["missing_driver"] = {"exitCode": rc, "stderr": err}
        finally:
            delete_pod(realnode, ns, name)
    finally:
        control.unlink()


# ---------------------------------------------------------------------------------- Kueue ------
def _workload_of(realnode: RealNodeCluster, ns: str, job_uid: str, version: str = "v1beta2") -> Any:
    items = cast("dict[str, Any]", client.CustomObjectsApi(realnode.api).list_namespaced_custom_object(
        "kueue.x-k8s.io", version, ns, "workloads", label_selector=f"kueue.x-k8s.io/job-uid={job_uid}"))["items"]
    return items[0] if items else None


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def _present(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The ``kind`` condition of ``obj``, which must be there."""
    cond = _condition(obj, kind)
    assert cond is not None, f"no {kind} condition in {obj.get('status')}"
    return cond


def _job(name: str, queue: str, limits: dict[str, str], command: str = "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES",
         node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "train", "image": SHELL, "command": ["sh", "-c", command],
                        "resources": {"limits": limits}}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
            "spec": {"backoffLimit": 0, "template": {"spec": spec}}}


class Queues:
    """This module's Kueue objects (v1beta2): one ResourceFlavor for the real node (its nodeLabels
    and toleration), a ClusterQueue with 2 GPUs and 2 NPUs of nominal quota, a LocalQueue ``lq``."""

    def __init__(self, realnode: RealNodeCluster, kueue: Any) -> None:
        self.realnode, self.kueue = realnode, kueue
        self.ns = realnode.new_namespace("kueue")
        suffix = uuid.uuid4().hex[:5]
        self.rf, self.cq, self.lq = f"real-{suffix}", f"cq-{suffix}", "lq"
        self.custom = client.CustomObjectsApi(realnode.api)
        self.batch = client.BatchV1Api(realnode.api)

    def create(self) -> None:
        group, version = KUEUE
        api = f"{group}/{version}"
        self.custom.create_cluster_custom_object(group, version, "resourceflavors", {
            "apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": self.rf},
            "spec": {"nodeLabels": self.realnode.info.node_selector,
                     "tolerations": [self.realnode.info.toleration]}})
        self.custom.create_cluster_custom_object(group, version, "clusterqueues", {
            "apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": self.cq},
            "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.ns}},
                     "resourceGroups": [{"coveredResources": [GPU, NPU], "flavors": [
                         {"name": self.rf, "resources": [{"name": GPU, "nominalQuota": 2},
                                                         {"name": NPU, "nominalQuota": 2}]}]}]}})
        self.custom.create_namespaced_custom_object(group, version, self.ns, "localqueues", {
            "apiVersion": api, "kind": "LocalQueue", "metadata": {"name": self.lq},
            "spec": {"clusterQueue": self.cq}})
        wait_for(lambda: (_condition(cast("dict[str, Any]", self.custom.get_cluster_custom_object(
                     group, version, "clusterqueues", self.cq)), "Active") or {})
                 .get("status") == "True", 30, "ClusterQueue Active")

    def submit(self, name: str, limits: dict[str, str], **kw: Any) -> Any:
        return self.batch.create_namespaced_job(self.ns, _job(name, self.lq, limits, **kw))  # type: ignore[arg-type]  # a manifest dict

    def workload(self, job: Any, version: str = "v1beta2") -> Any:
        return _workload_of(self.realnode, self.ns, job.metadata.uid, version)

    def quota_reserved(self, job: Any, status: str) -> Any:
        """Wait until the job's Workload has QuotaReserved=``status``; return the Workload."""
        return wait_for(lambda: (w := self.workload(job)) and (_condition(w, "QuotaReserved") or {})
                        .get("status") == status and w, 60, f"{job.metadata.name}: QuotaReserved={status}")

    def delete(self) -> None:
        group, version = KUEUE
        core = self.realnode.core
        jobs: list[Any] = self.batch.list_namespaced_job(self.ns).items
        for job in jobs:
            self.batch.delete_namespaced_job(job.metadata.name, self.ns, propagation_policy="Foreground",
                                             grace_period_seconds=1)
        wait_for(lambda: not self.batch.list_namespaced_job(self.ns).items
                 and not core.list_namespaced_pod(self.ns).items, 60, "jobs and pods deleted")
        try:
            self.custom.delete_namespaced_custom_object(group, version, self.ns, "localqueues", self.lq)
        except ApiException as exc:
            if exc.status != 404:
                raise
        for plural, name in (("clusterqueues", self.cq), ("resourceflavors", self.rf)):
            try:
                self.custom.delete_cluster_custom_object(group, version, plural, name)
            except ApiException as exc:
                if exc.status != 404:
                    raise

        def gone(plural: str, name: str) -> bool:
            try:
                self.custom.get_cluster_custom_object(group, version, plural, name)
                return False
            except ApiException as exc:
                return bool(exc.status == 404)

        wait_for(lambda: gone("clusterqueues", self.cq) and gone("resourceflavors", self.rf), 60,
                 "ClusterQueue and ResourceFlavor deleted (finalizers cleared)")
        core.delete_namespace(self.ns)


def read_job(queues: Queues, name: str) -> Any:
    """The Job as the API answers it (every field optional in the client's models)."""
    return queues.batch.read_namespaced_job(name, queues.ns)


@pytest.fixture(scope="module")
def queues(realnode: RealNodeCluster, real_kueue: Any) -> Iterator[Queues]:
    made = Queues(realnode, real_kueue)
    try:
        made.create()
        yield made
    finally:
        made.delete()


def _granular(queues: Queues, reason: str) -> str:
    """The QuotaReserved reason this Kueue writes: granular with UnadmittedWorkloadsObservability."""
    return reason if queues.kueue.feature_gates.get("UnadmittedWorkloadsObservability") else "Pending"


def test_kueue_admits_a_job_within_quota_onto_the_real_node(realnode: RealNodeCluster, queues: Queues) -> None:
    fits = queues.submit("fits", {GPU: "1"})
    assert fits.spec.suspend is True  # Kueue's mutating webhook suspended it at creation
    wl = wait_for(lambda: (w := queues.workload(fits)) and (_condition(w, "Admitted") or {}).get("status") == "True"
                  and w, 60, "Workload admitted")
    admission = wl["status"]["admission"]
    assert admission["clusterQueue"] == queues.cq
    assert admission["podSetAssignments"][0]["flavors"] == {GPU: queues.rf}
    assert admission["podSetAssignments"][0]["resourceUsage"] == {GPU: "1"}
    assert _present(wl, "QuotaReserved")["message"] == f"Quota reserved in ClusterQueue {queues.cq}"
    done = wait_for(lambda: (j := read_job(queues, "fits")).status.succeeded and j,
                    90, "the admitted Job to succeed on the real node")
    pods: list[Any] = realnode.core.list_namespaced_pod(queues.ns, label_selector=f"job-name={done.metadata.name}").items
    assert [p.spec.node_name for p in pods] == [realnode.info.node]
    assert realnode.core.read_namespaced_pod_log(pods[0].metadata.name, queues.ns) == \
        "NVIDIA_VISIBLE_DEVICES=GPU-00000000-0000-4000-8000-000000000000\n"
    TRANSCRIPT.setdefault("kueue", {})["version"] = queues.kueue.version
    TRANSCRIPT["kueue"]["feature_gates"] = queues.kueue.feature_gates
    TRANSCRIPT["kueue"]["admitted"] = {"conditions": wl["status"]["conditions"], "admission": admission,
                                       "events": events(realnode.core, queues.ns, wl["metadata"]["name"])}


def test_kueue_holds_a_job_above_the_quota_with_its_own_message(realnode: RealNodeCluster, queues: Queues) -> None:
    big = queues.submit("too-big", {GPU: "3"})
    wl = queues.quota_reserved(big, "False")
    cond = _present(wl, "QuotaReserved")
    assert cond["reason"] == _granular(queues, "ExceedsMaxQuota")
    assert cond["message"] == (
        f"couldn't assign flavors to pod set main: insufficient quota for {GPU} in flavor {queues.rf}, "
        "previously considered podsets requests (0) + current podset request (3) > maximum capacity (2)")
    time.sleep(2)
    assert read_job(queues, "too-big").spec.suspend is True
    assert not realnode.core.list_namespaced_pod(queues.ns, label_selector="job-name=too-big").items
    # the deprecated v1beta1 is still served by v0.19 and converts to the same condition
    assert _condition(queues.workload(big, "v1beta1"), "QuotaReserved") == cond
    evs = events(realnode.core, queues.ns, wl["metadata"]["name"])
    assert any(e["reason"] == cond["reason"] and e["message"] == cond["message"] for e in evs)
    TRANSCRIPT.setdefault("kueue", {})["exceeds_max_quota"] = {
        "conditions": wl["status"]["conditions"], "events": evs,
        "job_events": events(realnode.core, queues.ns, "too-big")}


def test_kueue_keeps_a_job_waiting_while_the_quota_is_used(realnode: RealNodeCluster, queues: Queues) -> None:
    hold = queues.submit("hold", {GPU: "2"}, command="sleep 30")
    queues.quota_reserved(hold, "True")
    waiting = queues.submit("waiting", {GPU: "1"})
    wl = queues.quota_reserved(waiting, "False")
    cond = _present(wl, "QuotaReserved")
    assert cond["reason"] == _granular(queues, "WaitingForQuota")
    assert cond["message"] == (f"couldn't assign flavors to pod set main: insufficient unused quota for {GPU} "
                               f"in flavor {queues.rf}, 1 more needed")

    def reserved() -> Any:
        status = cast("dict[str, Any]", queues.custom.get_cluster_custom_object(*KUEUE, "clusterqueues", queues.cq))["status"]
        usage = {r["name"]: r["total"] for f in status.get("flavorsReservation", []) for r in f["resources"]}
        return usage.get(GPU) == "2" and status

    status = wait_for(reserved, 30, f"ClusterQueue {queues.cq} reporting 2 {GPU} reserved")
    TRANSCRIPT.setdefault("kueue", {})["waiting_for_quota"] = {
        "conditions": wl["status"]["conditions"],
        "events": events(realnode.core, queues.ns, wl["metadata"]["name"]),
        "clusterqueue_status": status}
    queues.batch.delete_namespaced_job("hold", queues.ns, propagation_policy="Foreground", grace_period_seconds=1)
    admitted = queues.quota_reserved(waiting, "True")
    assert admitted["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] == {GPU: "1"}


def test_kueue_finds_no_flavor_for_a_node_selector_it_cannot_meet(realnode: RealNodeCluster, queues: Queues) -> None:
    label = realnode.info.taint["key"]
    odd = queues.submit("elsewhere", {NPU: "1"}, node_selector={label: "elsewhere"})
    wl = queues.quota_reserved(odd, "False")
    cond = _present(wl, "QuotaReserved")
    assert cond["reason"] == _granular(queues, "NoMatchingFlavor")
    assert cond["message"] == f"couldn't assign flavors to pod set main: flavor {queues.rf} doesn't match node affinity"
    TRANSCRIPT.setdefault("kueue", {})["no_matching_flavor"] = {
        "conditions": wl["status"]["conditions"],
        "events": events(realnode.core, queues.ns, wl["metadata"]["name"])}


# ------------------------------------------------------------------------------ node NotReady ---
def test_stopping_the_kubelet_turns_the_node_not_ready(realnode: RealNodeCluster) -> None:
    """Last in the module: the kubelet stops, the node lifecycle controller marks it; then it comes back."""
    def ready_condition() -> Any:
        return next(c for c in read_node(realnode).status.conditions if c.type == "Ready")

    realnode.stop_kubelet()
    try:
        cond = wait_for(lambda: (c := ready_condition()).status != "True" and c, 90, "Ready != True")
        assert (cond.status, cond.reason) == ("Unknown", "NodeStatusUnknown")
        taints = wait_for(lambda: [t.key for t in read_node(realnode).spec.taints or []
                                   if t.key.startswith("node.kubernetes.io/")], 30, "an unreachable taint")
        assert "node.kubernetes.io/unreachable" in taints
        TRANSCRIPT["node_not_ready"] = {"ready": {"status": cond.status, "reason": cond.reason,
                                                  "message": cond.message},
                                        "taints": [{"key": t.key, "effect": t.effect} for t in
                                                   read_node(realnode).spec.taints or []]}
    finally:
        realnode.ensure()
    assert ready_condition().status == "True"
    wait_for(lambda: not [t for t in read_node(realnode).spec.taints or []
                          if t.key.startswith("node.kubernetes.io/")], 30, "the unreachable taint removed")
