"""Failures on the real engine, each with status, category, owner and the evidence text (pytester, in-process)."""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
import time
from typing import Any

import pytest
from dockerkit import (
    COMBO,
    ONNX_IMAGE,
    SHELL_IMAGE,
    docker_matrix,
    evidence,
    failure,
    items,
    leftovers,
    record,
    statuses,
)
from dockerkit import (
    CPU as CPU_R,
)

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

MATRIX = "d.matrix.yaml"
GPU = {"name": "gpu", "type": "gpu", "vendor": "nvidia", "requests": {"nvidia.com/gpu": 1}}


def run(pytester: pytest.Pytester, run_id: str, *args: str, **matrix: Any) -> dict[str, Any]:
    pytester.makefile(".matrix.yaml", d=docker_matrix(**matrix))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, *args)
    return evidence(pytester)


def blocked_above(st: dict[str, str], resource: str = "cpu") -> None:
    assert st[f"{resource}::img::{COMBO}::model"] == "blocked"
    assert st[f"{resource}::img::{COMBO}::business"] == "blocked"


def test_image_that_does_not_exist(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    ev = run(pytester, run_id, image="pytest-hetero/does-not-exist:0")
    st = statuses(ev)
    assert st["cpu::img::startup"] == "failed"
    blocked_above(st)
    assert failure(items(ev)["cpu::img::startup"]) == (
        "failed", "image_not_found", "platform",
        "image pytest-hetero/does-not-exist:0 is not in the engine (pull_policy never); no such image")
    assert leftovers(engine, run_id) == []


def test_missing_image_owned_by_algorithm_when_configured(pytester: pytest.Pytester, run_id: str) -> None:
    ev = run(pytester, run_id, "-k", "startup", image="pytest-hetero/does-not-exist:0",
             target={"image_owner": "algorithm"})
    assert failure(items(ev)["cpu::img::startup"])[:3] == ("failed", "image_not_found", "algorithm")


def test_pull_from_unreachable_registry(pytester: pytest.Pytester, run_id: str) -> None:
    ev = run(pytester, run_id, "-k", "startup", image="registry.invalid/hetero/none:1",
             target={"pull_policy": "if-not-present"})
    status, category, owner, message = failure(items(ev)["cpu::img::startup"])
    assert (status, category, owner) == ("failed", "registry_unreachable", "infrastructure")
    assert message.startswith("pulling image registry.invalid/hetero/none:1: ")
    assert "registry.invalid" in message and "no such host" in message


def test_entrypoint_that_does_not_exist(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    ev = run(pytester, run_id, entrypoint=["/opt/model/run-missing", "--model", "{model}"])
    st = statuses(ev)
    assert (st["cpu::img::startup"], st[f"cpu::img::{COMBO}::model"], st[f"cpu::img::{COMBO}::business"]) == (
        "passed", "failed", "blocked")
    model = items(ev)[f"cpu::img::{COMBO}::model"]
    assert failure(model) == ("failed", "entrypoint_missing", "algorithm",
                              f"entrypoint program /opt/model/run-missing not found in image {ONNX_IMAGE} (exit 127)")
    ran = record(model, "model.run")
    assert ran["exit_code"] == 127
    assert ran["stderr"]["text"] == "sh: 1: exec: /opt/model/run-missing: not found\n"
    assert leftovers(engine, run_id) == []


def test_memory_limit_the_model_exceeds_is_oom_killed(pytester: pytest.Pytester, run_id: str) -> None:
    small = {"name": "cpu", "type": "cpu", "requests": {"cpu": 1}, "limits": {"memory": "128Mi"}}
    ev = run(pytester, run_id, resources=[small], entrypoint=["{python}", "-c", "b = bytearray(600 * 2**20)"])
    st = statuses(ev)
    assert (st["cpu::scheduling"], st["cpu::img::startup"], st[f"cpu::img::{COMBO}::model"]) == (
        "passed", "passed", "failed")
    model = items(ev)[f"cpu::img::{COMBO}::model"]
    assert failure(model) == ("failed", "oom_killed", "algorithm",
                              ("model run OOM-killed (exit 137, cgroup oom_kill count 1) under the container "
                              "memory limit of 134217728 bytes (cpu)"))
    assert record(model, "model.run")["exit_code"] == 137
    allocation = record(items(ev)["cpu::scheduling"], "scheduling.allocation")["allocated"]
    assert (allocation["Memory"], allocation["MemorySwap"]) == (134217728, 134217728)


def test_gpu_on_a_host_without_the_nvidia_runtime(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    if "nvidia" in engine.info().get("Runtimes", {}):
        pytest.skip("this engine has the nvidia runtime")
    ev = run(pytester, run_id, resources=[GPU])
    st = statuses(ev)
    assert st["gpu::discovery"] == "failed"
    assert {st["gpu::scheduling"], st["gpu::img::startup"]} == {"blocked"}
    blocked_above(st, "gpu")
    status, category, owner, message = failure(items(ev)["gpu::discovery"])
    assert (status, category, owner) == ("failed", "runtime_missing", "infrastructure")
    runtimes = ", ".join(sorted(engine.info()["Runtimes"]))
    assert message.startswith(f"no NVIDIA runtime on the engine (runtimes: {runtimes}; no "
                              "nvidia-container-runtime-hook): GPU device requests cannot be satisfied; install the "
                              "NVIDIA Container Toolkit; nvidia discovery on this host: ")
    can = record(items(ev)["gpu::discovery"], "discovery.engine_can_satisfy")
    assert (can["ok"], [g["category"] for g in can["gaps"]]) == (False, ["runtime_missing"])


def test_gpu_request_refused_by_the_engine_at_scheduling(pytester: pytest.Pytester, run_id: str,
                                                         engine: Any) -> None:
    """Without discovery (deselected), the engine itself refuses the device request of the placement probe."""
    if "nvidia" in engine.info().get("Runtimes", {}):
        pytest.skip("this engine has the nvidia runtime")
    ev = run(pytester, run_id, "-k", "scheduling", resources=[GPU])
    sched = items(ev)["gpu::scheduling"]
    assert failure(sched) == (
        "failed", "device_driver_missing", "infrastructure",
        ('placement probe for gpu: runtime refused the container: could not select device driver "" with '
        "capabilities: [[gpu]]"))
    assert record(sched, "scheduling.translation")["engine"]["device_requests"] == [
        {"Driver": "", "Count": 1, "DeviceIDs": [], "Capabilities": [["gpu"]]}]
    assert leftovers(engine, run_id) == []


def test_gpu_request_refused_by_the_engine_at_startup(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    """Startup alone: the workload container is refused at start, and removed at session end."""
    if "nvidia" in engine.info().get("Runtimes", {}):
        pytest.skip("this engine has the nvidia runtime")
    ev = run(pytester, run_id, "-k", "startup", resources=[GPU])
    assert failure(items(ev)["gpu::img::startup"]) == (
        "failed", "device_driver_missing", "infrastructure",
        (f"starting container hetero-{run_id}-gpu-img from {ONNX_IMAGE}: could not select device driver \"\" "
        "with capabilities: [[gpu]]"))
    assert leftovers(engine, run_id) == []


def test_model_file_whose_sha256_does_not_match(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    ev = run(pytester, run_id, model_sha="0" * 64)
    st = statuses(ev)
    assert st["cpu::img::startup"] == "passed"  # the image started: the wrong file is the model item's
    model = next(k for k in st if k.endswith("::model"))
    assert st[model] == "failed" and st[model.replace("::model", "::business")] == "blocked"
    status, category, owner, message = failure(items(ev)[model])
    assert (status, category, owner) == ("failed", "digest_mismatch", "algorithm")
    assert message.startswith(f"model digits-logreg@1.0.0 sha256 mismatch: matrix declares {'0' * 64}, file ")
    assert message.endswith("digits-logreg-1.0.0.onnx has d2230a9096140b09d443879ca3b0d7cb0021917896a8f462f79806de1109b523")
    # the check runs before the model runs in the container
    assert "model.run" not in [r["kind"] for r in items(ev)[model]["records"]]


def test_container_killed_mid_run(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    killed: list[str] = []

    def killer() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            for c in engine.containers(filters={"label": f"pytest-hetero.run-id={run_id}"}):
                procs = engine.top(c["Id"])["Processes"] or []
                if any("sleep 30" in " ".join(p) for p in procs):
                    engine.kill(c["Id"])
                    killed.append(c["Names"][0].lstrip("/"))
            time.sleep(0.1)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        ev = run(pytester, run_id, entrypoint=["/bin/sh", "-c", "sleep 30"])
    finally:
        thread.join()
    assert killed == [f"hetero-{run_id}-cpu-img"]
    st = statuses(ev)
    assert (st["cpu::img::startup"], st[f"cpu::img::{COMBO}::model"], st[f"cpu::img::{COMBO}::business"]) == (
        "passed", "failed", "blocked")
    model = items(ev)[f"cpu::img::{COMBO}::model"]
    status, category, owner, message = failure(model)
    assert (status, category, owner) == ("failed", "container_killed", "infrastructure")
    assert message == (f"container hetero-{run_id}-cpu-img stopped during the model run (status exited, exit 137); "
                       f"the run ended with exit {record(model, 'model.run')['exit_code']}")
    assert record(model, "model.run")["duration_s"] < 30
    assert leftovers(engine, run_id) == []


ACCURACY_ONLY = """apiVersion: pytest-hetero/v1
kind: AcceptanceRules
metadata: {name: shell}
rules:
  - {name: accuracy-floor, metric: accuracy, op: ">=", value: 0.95, self_reported: true}
"""


def test_shell_only_image_runs_the_payload_shell_path(pytester: pytest.Pytester, run_id: str) -> None:
    rules = pytester.makefile(".yaml", rules=ACCURACY_ONLY)
    ev = run(pytester, run_id, image=SHELL_IMAGE, runtime="shell", acceptance=rules,
             entrypoint=["/bin/sh", "-c", 'echo \'{{"metrics": {{"accuracy": 1.0}}}}\' > "$0"', "{outputs}"])
    st = statuses(ev)
    assert [st[k] for k in ("cpu::discovery", "cpu::scheduling", "cpu::img::startup", f"cpu::img::{COMBO}::model",
                            f"cpu::img::{COMBO}::business")] == ["passed"] * 5
    init = record(items(ev)["cpu::img::startup"], "startup.device_init")
    assert (init["exit_code"], init["shell_only"], init["findings"], init["framework_gaps"]) == (0, True, [], [])
    assert init["report"]["python"] == {"present": False, "path": None, "rc": None, "report": None,
                                        "error": "no python3/python on PATH"}
    outputs = record(items(ev)[f"cpu::img::{COMBO}::model"], "model.outputs")
    assert outputs["bytes"] == len(b'{"metrics": {"accuracy": 1.0}}\n')


def test_shell_only_image_cannot_serve_an_onnx_model(pytester: pytest.Pytester, run_id: str) -> None:
    """An image without the interpreter the models' entrypoints run ({python}) fails startup as an image
    defect (the image owner's); it passed startup, and every model then failed entrypoint_missing (algorithm)."""
    ev = run(pytester, run_id, "-k", "startup", image=SHELL_IMAGE)
    startup = items(ev)["cpu::img::startup"]
    assert failure(startup) == ("failed", "interpreter_missing", "platform",
                                (f"image {SHELL_IMAGE} has no python3/python; the entrypoints of digits-logreg run "
                                "{python} (no python3/python on PATH)"))
    assert record(startup, "startup.device_init")["shell_only"] is True


def test_model_timeout_kills_the_run_and_keeps_the_container(pytester: pytest.Pytester, run_id: str) -> None:
    ev = run(pytester, run_id, datasets=2, entrypoint=["/bin/sh", "-c", "sleep 30"],
             layers={"model": {"timeout": "2s"}})
    it = items(ev)
    for ds in ("digits-test", "digits-test1"):
        model = it[f"cpu::img::digits-logreg@{ds}::model"]
        assert failure(model) == ("failed", "timeout", "algorithm", "model run exceeded the 2 s timeout")
        ran = record(model, "model.run")
        assert (ran["timed_out"], ran["exit_code"], ran["raw_exit_code"]) == (True, None, 137)
        assert 2 <= ran["duration_s"] < 20  # killed at its 2 s timeout: well before the sleep's 30 s, however loaded
    # the second run found the container alive: kill -9 -1 spared its PID 1
    assert record(it["cpu::img::digits-logreg@digits-test1::model"], "model.run")["container"] == \
        f"hetero-{run_id}-cpu-img"


def test_image_digest_that_does_not_match(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    text = docker_matrix()
    text = text.replace(f'"reference": "{ONNX_IMAGE}",', f'"reference": "{ONNX_IMAGE}", "digest": "sha256:{"0" * 64}",')
    pytester.makefile(".matrix.yaml", d=text)
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "startup")
    startup = items(evidence(pytester))["cpu::img::startup"]
    image_id = engine.inspect_image(ONNX_IMAGE)["Id"]
    assert failure(startup) == ("failed", "image_digest_mismatch", "platform",
                                f"image {ONNX_IMAGE} has digest {image_id}, the matrix declares sha256:{'0' * 64}")


def test_npu_on_a_host_without_ascend_devices(pytester: pytest.Pytester, run_id: str) -> None:
    npu = {"name": "npu", "type": "npu", "vendor": "huawei", "requests": {"huawei.com/Ascend910": 1}}
    ev = run(pytester, run_id, "-k", "scheduling", resources=[npu])
    sched = items(ev)["npu::scheduling"]
    assert failure(sched) == ("failed", "insufficient_devices", "infrastructure",
                              "1 Ascend devices requested, the engine host has 0 (/dev/davinci{})")
    assert record(sched, "scheduling.translation")["engine"]["environment"] == {"ASCEND_VISIBLE_DEVICES": ""}


def test_queue_and_priority_class_are_named_as_not_proven(pytester: pytest.Pytester, run_id: str) -> None:
    queued = {"name": "cpu", "type": "cpu", "requests": {"cpu": 1}, "queue": "team-a", "priority_class": "high",
              "node_selector": {"pool": "cpu"}}
    ev = run(pytester, run_id, "-k", "scheduling", resources=[queued])
    sched = items(ev)["cpu::scheduling"]
    assert sched["status"] == "passed"
    notes = [r["data"] for r in sched["records"] if r["kind"] == "scope.not_proven"]
    assert notes == [
        {"layer": "scheduling", "part": "queue/quota", "queue": "team-a", "priority_class": "high",
         "reason": "a Docker host has no queues, quotas or priority classes; admission and quota are not proven "
                   "here; the resource declares queue 'team-a' and priority_class 'high', which this backend "
                   "neither enforces nor proves"},
        {"layer": "scheduling", "part": "placement keys", "ignored": {"node_selector": {"pool": "cpu"}},
         "untranslated": {}, "reason": "one Docker host: node selectors and tolerations select nothing; "
                                       "untranslated requests are not enforced"}]


def test_under_xdist_each_worker_cleans_up_its_own(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    second = {"name": "cpu2", "type": "cpu", "requests": {"cpu": "500m", "memory": "256Mi"}}
    pytester.makefile(".matrix.yaml", d=docker_matrix(resources=[{**CPU_R}, second]))
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-n", "2")
    result.assert_outcomes(passed=10)
    st = statuses(evidence(pytester))
    assert set(st.values()) == {"passed"} and len(st) == 10
    assert leftovers(engine, run_id) == []


def test_pinned_ascend_device_missing_on_the_host(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    """``target.device_ids`` pins /dev/davinci0; the engine cannot find it when starting the placement probe."""
    npu = {"name": "npu", "type": "npu", "vendor": "huawei", "requests": {"huawei.com/Ascend910": 1}}
    ev = run(pytester, run_id, "-k", "scheduling", resources=[npu], target={"device_ids": {"npu": [0]}})
    sched = items(ev)["npu::scheduling"]
    assert failure(sched) == ("failed", "device_missing", "infrastructure",
                              ("placement probe for npu: runtime refused the container: error gathering device "
                              'information while adding custom device "/dev/davinci0": no such file or directory'))
    assert record(sched, "scheduling.translation")["engine"]["devices"] == [
        "/dev/davinci0:/dev/davinci0:rwm", "/dev/davinci_manager:/dev/davinci_manager:rwm",
        "/dev/devmm_svm:/dev/devmm_svm:rwm", "/dev/hisi_hdc:/dev/hisi_hdc:rwm"]
    assert leftovers(engine, run_id) == []


def test_image_without_a_shell_cannot_start(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    """An image with no /bin/sh: runc's OCI error at start, owned by whoever owns images."""
    empty = io.BytesIO()
    tarfile.open(fileobj=empty, mode="w").close()
    ref = f"pytest-hetero-test/no-shell:{run_id}"
    engine.import_image_from_data(empty.getvalue(), repository=ref.split(":")[0], tag=run_id,
                                  changes=[f"LABEL pytest-hetero.run-id={run_id}"])
    ev = run(pytester, run_id, "-k", "startup", image=ref)
    assert failure(items(ev)["cpu::img::startup"]) == (
        "failed", "interpreter_missing", "platform",
        (f"starting container hetero-{run_id}-cpu-img from {ref}: failed to create shim task: OCI runtime create "
        'failed: runc create failed: unable to start container process: exec: "/bin/sh": stat /bin/sh: no such '
        "file or directory: unknown"))
    assert leftovers(engine, run_id) == [engine.inspect_image(ref)["Id"]]  # only the test's own image


def test_outputs_file_too_large_is_not_read(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    """A 70 MB outputs file is refused by its size before it is copied out (a 200 MB one took 490 MB
    of the harness's memory, a larger one could take it all), failed ``outputs_too_large`` (algorithm)."""
    ev = run(pytester, run_id, entrypoint=["sh", "-c", "head -c 70000000 /dev/zero > {outputs}"])
    model = items(ev)[f"cpu::img::{COMBO}::model"]
    status, category, owner, message = failure(model)
    assert (status, category, owner) == ("failed", "outputs_too_large", "algorithm")
    assert message.startswith("entrypoint wrote a 70000000-byte outputs file (/tmp/hetero-run/")
    assert message.endswith("/outputs.json), more than the 67108864 bytes read back")
    assert statuses(ev)[f"cpu::img::{COMBO}::business"] == "blocked"
    assert leftovers(engine, run_id) == []


def test_huge_stdout_is_kept_within_the_cap_with_its_full_size_and_digest(
        pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    """40 MB on stdout and 3 bytes on stderr: the harness keeps 16 MiB of stdout (head and tail), and the
    evidence states the full size and sha256 of what the model printed."""
    size = 40_000_000
    ev = run(pytester, run_id, entrypoint=["sh", "-c", f"yes a | head -c {size}; printf err >&2; exit 3"])
    model = items(ev)[f"cpu::img::{COMBO}::model"]
    rec = record(model, "model.run")
    assert (rec["exit_code"], rec["stdout_bytes"], rec["stdout_capped"]) == (3, size, True)
    assert rec["stdout_sha256"] == hashlib.sha256(b"a\n" * (size // 2)).hexdigest()
    assert (rec["stderr_bytes"], rec["stderr_capped"], rec["stderr"]["text"]) == (3, False, "err")
    kept = (pytester.path / "reports" / run_id / rec["stdout_artifact"]).read_text()
    half = 8 * 1024 * 1024
    # the tail's first word ("a", cut from its line by the cap) is dropped with the middle (redaction-safe cut)
    assert kept == ("a\n" * (half // 2) + f"\n… [{size - 2 * half + 1} bytes not kept] …\n"
                    + "\n" + "a\n" * (half // 2 - 1))
    assert failure(model)[:3] == ("failed", "nonzero_exit", "algorithm")
    assert leftovers(engine, run_id) == []
