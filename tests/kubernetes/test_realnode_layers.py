"""The plugin's layers on the real node: startup and model in the container, real failure classes.

Every verdict here comes from real components: the kubelet v1.34.4 and its containerd start (or
refuse) the image, the test device plugin hands the devices through the device-plugin API, exec and
logs go apiserver → kubelet. The device payload runs inside the image and is judged by
``layers/startup.py``; each failure class is asserted by the category and owner the layers give it
and by the kubelet's own words kept in evidence.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker
import pytest
import realimages
from realkit import (
    ABSENT,
    COMBO,
    GPU,
    NPU,
    STANDIN,
    VENDOR_LABELS,
    controls,
    data,
    failure,
    real_matrix,
    run,
)
from support import evidence_of

from pytest_hetero.backends.docker.errors import classify, explanation
from pytest_hetero.evidence.usage import epoch

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import RealNodeCluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


@pytest.fixture(scope="module")
def ns(realnode: RealNodeCluster) -> Iterator[str]:
    """This module's namespace on the real node's plane; the node labelled as GFD / the Ascend plugin
    would; the stand-in images imported into its containerd."""
    realnode.core.patch_node(realnode.info.node, {"metadata": {"labels": VENDOR_LABELS}})
    for name in realimages.RECIPES:
        realimages.ensure(realnode.info.containerd_socket, name)
    name = realnode.new_namespace("layers")
    yield name
    realnode.core.delete_namespace(name)


@pytest.fixture
def run_id(realnode: RealNodeCluster, ns: str) -> Iterator[str]:
    """A fresh run id; afterwards no pod of it may be left (cleanup is under test)."""
    value = "r" + uuid.uuid4().hex[:10]
    yield value
    left: list[Any] = realnode.core.list_namespaced_pod(ns, label_selector=f"pytest-hetero.run-id={value}").items
    alive = [p.metadata.name for p in left if p.metadata.deletion_timestamp is None]
    assert not alive, f"pods of run {value} left behind: {alive}"


def gpu(**extra: Any) -> dict[str, Any]:
    return {"name": "gpu", "type": "gpu", "vendor": "nvidia", "requests": {GPU: "1"},
            "expect": {"devices": 4, "product": "H100"}, **extra}


def npu(**extra: Any) -> dict[str, Any]:
    return {"name": "npu", "type": "npu", "vendor": "huawei", "requests": {NPU: "2"}, **extra}


STANDIN_IMAGE = [{"name": "acc", "reference": STANDIN, "for": ["gpu", "npu"]}]


def test_device_payload_runs_in_the_image_and_sees_its_allocated_devices(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    with controls(realnode.info, exclusive=False):
        got = run(pytester, real_matrix(realnode.info, ns, [gpu(), npu()], images=STANDIN_IMAGE, framework=False), run_id,
                  "-k", "discovery or scheduling or startup")
    assert {k: v["status"] for k, v in got.items()} == {
        "gpu::discovery": "passed", "gpu::acc::scheduling": "passed", "gpu::acc::startup": "passed",
        "npu::discovery": "passed", "npu::acc::scheduling": "passed", "npu::acc::startup": "passed"}
    snap = data(got["gpu::discovery"], "discovery.snapshot")
    [node] = snap["nodes"]
    assert (node["name"], node["simulated"], node["capacity"], snap["simulated_nodes"]) == (
        realnode.info.node, False, {GPU: str(realnode.info.gpus)}, [])
    startup = got["gpu::acc::startup"]
    pod = data(startup, "startup.pod")
    assert pod["node"] == realnode.info.node and pod["digest"].startswith("sha256:")
    assert pod["container_statuses"][0]["containerID"].startswith("containerd://")
    init = data(startup, "startup.device_init")
    assert (init["simulated"], init["ran_on"], init["exit_code"], init["findings"]) == (
        False, f"pod {pod['pod']}", 0, [])
    assert [r["kind"] for r in startup["records"]].count("startup.simulation") == 0
    # which of the node's GPUs the kubelet hands out depends on what other pods on the shared node hold
    # (the plugin prefers the lowest free index): the device node and the UUID must name the same one
    devices = data(startup, "startup.devices")
    [index] = [int(n.removeprefix("/dev/nvidia")) for n in devices["device_nodes"]]
    assert (devices["allocated"], devices["visible"], devices["device_nodes"], devices["verdict"]) == (
        1, 1, [f"/dev/nvidia{index}"], "ok")
    assert devices["visibility_value"] == f"GPU-00000000-0000-4000-8000-{index:012x}"
    # nvidia-smi inside the image is the device plugin's replay: only the allocated GPU's block
    inventory = data(startup, "startup.inventory")
    assert (inventory["source"], inventory["devices_seen"], inventory["differences"]) == ("nvidia-smi-table", 1, [])
    smi = init["report"]["tools"]["nvidia-smi"]
    assert (smi["rc"], smi["args"], smi["first_attempt"]["rc"]) == (0, "", 2)
    ascend = data(got["npu::acc::startup"], "startup.devices")
    npus = sorted(int(n.removeprefix("/dev/davinci")) for n in ascend["device_nodes"])
    assert (len(npus), ascend["device_nodes"], ascend["visibility_value"], ascend["verdict"]) == (
        2, [f"/dev/davinci{i}" for i in npus], ",".join(map(str, npus)), "ok")
    assert data(got["npu::acc::startup"], "startup.inventory")["devices_seen"] == 2
    assert any(a["name"] == "container.log" for a in startup["artifacts"])


def test_more_devices_visible_than_allocated_fails_startup(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    """The plugin hands one GPU more than the pod asked for (``extra-devices``): an isolation breach."""
    with controls(realnode.info, exclusive=True):
        control = realnode.info.control(GPU, "extra-devices")
        control.write_text("1\n")
        try:
            got = run(pytester, real_matrix(realnode.info, ns, [gpu()], images=STANDIN_IMAGE, framework=False), run_id,
                      "-k", "scheduling or startup")
        finally:
            control.unlink()
    item = got["gpu::acc::startup"]
    assert failure(item) == ("failed", "devices_over_allocated", "infrastructure")
    devices = data(item, "startup.devices")
    assert (devices["allocated"], devices["visible"], len(devices["device_nodes"])) == (1, 2, 2)
    # which two: any the kubelet handed out (it picks from an unordered set), one asked for and one more
    assert all(re.fullmatch(r"/dev/nvidia\d+", d) for d in devices["device_nodes"]), devices["device_nodes"]
    assert "the container sees 2 nvidia.com/gpu" in item["failure"]["message"]
    assert "but 1 was allocated" in item["failure"]["message"]


def test_a_container_the_plugin_hands_no_device_is_device_missing(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    """Resources that forget the device request: the kubelet never calls the plugin. The CUDA-style
    image still says NVIDIA_VISIBLE_DEVICES=all; no device node is there."""
    resources = [gpu(name="gpu-nolimit", requests={"cpu": "100m"}, expect={}),
                 npu(name="npu-nolimit", requests={"cpu": "100m"})]
    with controls(realnode.info, exclusive=False):
        got = run(pytester, real_matrix(realnode.info, ns, resources, images=STANDIN_IMAGE, framework=False), run_id,
                  "-k", "scheduling or startup")
    for name in ("gpu-nolimit", "npu-nolimit"):
        item = got[f"{name}::acc::startup"]
        assert failure(item) == ("failed", "device_missing", "infrastructure"), item["failure"]
        assert data(item, "startup.devices")["visible"] == 0
    assert "NVIDIA_VISIBLE_DEVICES='all' but no /dev/nvidia<N> device node" in \
        got["gpu-nolimit::acc::startup"]["failure"]["message"]
    assert "no /dev/davinci<N> device node in the container" in got["npu-nolimit::acc::startup"]["failure"]["message"]


def test_cpu_row_runs_model_and_business_inside_the_image(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    cpu = {"name": "cpu", "type": "cpu", "requests": {"cpu": "100m", "memory": "256Mi"},
           "limits": {"memory": "1Gi"}, "expect": {"min_cpus": 1}}
    got = run(pytester, real_matrix(realnode.info, ns, [cpu]), run_id)
    assert {k: v["status"] for k, v in got.items()} == {
        "cpu::discovery": "passed", "cpu::py::scheduling": "passed", "cpu::py::startup": "passed",
        f"cpu::py::{COMBO}::model": "passed", f"cpu::py::{COMBO}::business": "passed"}
    model = data(got[f"cpu::py::{COMBO}::model"], "model.run")
    assert (model["simulated"], model["exit_code"]) == (False, 0)
    assert model["ran_on"].startswith("pod hetero-cpu-py-") and model["node"] == realnode.info.node
    init = data(got["cpu::py::startup"], "startup.device_init")
    assert "CPUExecutionProvider" in init["report"]["python"]["report"]["onnxruntime"]["providers"]
    # usage ledger: idle between the scheduler's PodScheduled and the real kubelet's container startedAt
    held = data(got["cpu::py::startup"], "usage.workload")
    placed = data(got["cpu::py::scheduling"], "scheduling.placed")["decided_at"]
    [status] = [c for c in data(got["cpu::py::startup"], "startup.pod")["container_statuses"]
                if c["name"] == "workload"]
    assert (held["placed"], held["started"]) == (epoch(placed), epoch(status["state"]["running"]["startedAt"]))
    assert held["idle_s"] == round(held["started"] - held["placed"], 3) >= 0
    assert (held["namespace"], held["simulated"], held["requests"]) == (ns, False, {"cpu": "100m", "memory": "256Mi"})
    usage = evidence_of(pytester)["usage"]
    end = epoch(evidence_of(pytester)["run"]["finished_at"])
    assert end is not None and usage["simulated"] == 0
    assert usage["resource_seconds"]["by_namespace"][ns]["cpu"] == pytest.approx(0.1 * (end - held["placed"]),
                                                                                 abs=0.01)
    ran = data(got[f"cpu::py::{COMBO}::model"], "usage.workload")
    assert usage["resource_seconds"]["by_model"]["digits-logreg@1.0.0"]["cpu"] == pytest.approx(
        0.1 * (ran["ended"] - ran["started"]), abs=0.001)


# ------------------------------------------------------------------------------ failure classes --
def test_startup_failure_classes_from_the_kubelet(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    images = [{"name": "absent", "reference": ABSENT}, {"name": "crash", "reference": "pytest-hetero/crashing-shell:1"},
              {"name": "ghost", "reference": "pytest-hetero/ghost-user:1"}]
    cpu = {"name": "cpu", "type": "cpu", "requests": {"cpu": "100m"}}
    got = run(pytester, real_matrix(realnode.info, ns, [cpu], images=images, target={"pull_policy": "if-not-present"}),
              run_id, "-k", "startup")
    absent = got["cpu::absent::startup"]
    # the kubelet's words name the cause (nothing listens on the registry's port): the network's, with the
    # category the real Docker engine's words for the same pull get
    assert failure(absent) == ("failed", "registry_unreachable", "infrastructure")
    assert "ErrImagePull: failed to pull and unpack image" in absent["failure"]["message"] or \
        "ImagePullBackOff: Back-off pulling image" in absent["failure"]["message"]
    assert "dial tcp 127.0.0.1:1: connect: connection refused" in absent["failure"]["message"]
    with pytest.raises(docker.errors.APIError) as pulled, closing(docker.from_env()) as engine:
        engine.images.pull(ABSENT)
    assert explanation(pulled.value) == 'Get "http://127.0.0.1:1/v2/": dial tcp 127.0.0.1:1: connect: connection refused'
    assert classify(explanation(pulled.value), phase="start") == "registry_unreachable"
    crash = got["cpu::crash::startup"]
    # an image whose entrypoint exits at once is the image's defect (Docker: container_exited), whoever
    # ships it: the target's image owner, platform by default
    assert failure(crash) == ("failed", "crash_loop", "platform")
    assert "CrashLoopBackOff: back-off" in crash["failure"]["message"]
    assert "(last: Error, exit 3;" in crash["failure"]["message"]
    reasons = data(crash, "startup.failed")["reasons"]
    assert [(r["code"], r["detail"].get("exit_code")) for r in reasons] == [("crash_loop", None),
                                                                             ("container_exit_nonzero", "3")]
    log = next(a for a in crash["artifacts"] if a["name"] == "container.log")
    bundle = next((pytester.path / "reports").iterdir())
    assert (bundle / log["path"]).read_text() == "crashing-shell: the entrypoint exits 3 at once\n"
    ghost = got["cpu::ghost::startup"]
    assert failure(ghost) == ("failed", "container_start_error", "infrastructure")
    assert "CreateContainerError: failed to create containerd container:" in ghost["failure"]["message"]
    assert ghost["failure"]["message"].endswith("no users found (container_start_error)")  # facts; the owner is the failure's
    # usage ledger: the three pods were placed by the real scheduler and never ran: each is waste, and
    # the crash-looping one's restarts are counted
    waste = evidence_of(pytester)["usage"]["waste"]
    assert sorted(waste["failed"]["items"]) == sorted(got[k]["nodeid"] for k in (
        "cpu::absent::startup", "cpu::crash::startup", "cpu::ghost::startup"))
    looping = data(crash, "usage.workload")
    assert looping["outcome"] == "failed" and looping["attempts"] >= 2
    assert waste["retries"]["restarts"] >= looping["attempts"] - 1


def test_a_device_plugin_allocate_error_is_unexpected_admission_error(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    with controls(realnode.info, exclusive=True):
        control = realnode.info.control(GPU, "allocate-error")
        control.write_text("device GPU-00000000-0000-4000-8000-000000000000 is lost (Xid 79)\n")
        try:
            got = run(pytester, real_matrix(realnode.info, ns, [gpu()], images=STANDIN_IMAGE, framework=False), run_id,
                      "-k", "scheduling or startup")
        finally:
            control.unlink()
    assert got["gpu::acc::scheduling"]["status"] == "passed"  # the scheduler placed it; the kubelet refused
    item = got["gpu::acc::startup"]
    assert failure(item) == ("failed", "device_allocation_failed", "infrastructure")
    assert ("pod Failed, UnexpectedAdmissionError: Pod was rejected: Allocate failed due to rpc error: code = "
            "Unknown desc = device GPU-00000000-0000-4000-8000-000000000000 is lost (Xid 79), which is unexpected"
            ) in item["failure"]["message"]


def test_model_run_oom_killed_by_the_memory_limit(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    cpu = {"name": "cpu", "type": "cpu", "requests": {"cpu": "100m", "memory": "128Mi"},
           "limits": {"memory": "128Mi"}}
    text = real_matrix(realnode.info, ns, [cpu])
    text = text.replace('"{code}/infer.py"', '"-c", "b = bytearray(400 * 2**20); print(len(b))", "{code}/infer.py"')
    got = run(pytester, text, run_id, "-k", "scheduling or startup or model")
    model = got[f"cpu::py::{COMBO}::model"]
    assert failure(model) == ("failed", "oom_killed", "algorithm")
    assert data(model, "model.run")["exit_code"] == 137
    assert "container cgroup oom_kill count 1) under the container's memory limit 128Mi" in model["failure"]["message"]


def test_node_not_ready_mid_run(pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str) -> None:
    """The kubelet stops while the model runs: the node lifecycle controller marks it Unknown after the
    real node plane's 12 s grace; the watch abandons the run."""
    cpu = {"name": "cpu", "type": "cpu", "requests": {"cpu": "100m"}}
    text = real_matrix(realnode.info, ns, [cpu], layers={"model": {"timeout": "3m"}, "startup": {"timeout": "90s"}})
    text = text.replace('"{code}/infer.py"', f'"-c", "import time; time.sleep(300)  # {run_id}", "{{code}}/infer.py"')

    def model_running() -> bool:
        # the real node's containers are this host's processes: the model's own, marked with the run id
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and f"# {run_id}".encode() in (proc / "cmdline").read_bytes():
                    return True
            except OSError:
                continue
        return False

    def stop_when_running() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if model_running():  # the model runs (startup is over, whatever the machine's load)
                realnode.stop_kubelet()
                return
            time.sleep(0.5)

    stopper = threading.Thread(target=stop_when_running, daemon=True)
    stopper.start()
    try:
        got = run(pytester, text, run_id, "-k", "scheduling or startup or model")
    finally:
        stopper.join(130)
        realnode.ensure()
    model = got[f"cpu::py::{COMBO}::model"]
    assert failure(model) == ("error", "node_not_ready", "infrastructure")
    seen = data(model, "model.node_not_ready")
    assert (seen["node"], seen["condition"]["status"], seen["condition"]["reason"]) == (
        realnode.info.node, "Unknown", "NodeStatusUnknown")
    assert seen["condition"]["message"] == "Kubelet stopped posting node status."
