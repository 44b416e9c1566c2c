"""Device series of a model run and the values acceptance rules judge on them (issue 33):
``gpu_memory_peak_mib`` and ``device_utilisation_mean`` (:mod:`pytest_hetero.probes.device_values`), the
Kubernetes wrapper's ``npu-smi`` samples read back (:func:`~pytest_hetero.backends.kubernetes.runtime.
add_npu_devices`) from the real tool's key/value layout (shared/fixtures/real), and the wrapper run here with the
stand-in tools of the real node's test image on PATH (real processes; the tools' numbers are the test's)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from pytest_hetero.backends.kubernetes import runtime
from pytest_hetero.probes.device_values import device_run_time
from pytest_hetero.probes.usage import IN_WORKLOAD, UsageDevice, UsageRecord

REAL = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real"
sys.path.insert(0, str(Path(__file__).parent / "kubernetes"))
import realimages  # noqa: E402
from test_kube_podwrap import held_until, run  # noqa: E402


def _record(source: str, devices: list[UsageDevice], scope: str = "", available: bool = True) -> UsageRecord:
    """A ``usage`` record as every engine writes it (:meth:`~pytest_hetero.probes.usage.Sampler.result`'s keys)."""
    return {"source": source, "scope": scope, "interval_s": None, "started_at": None, "finished_at": None,
            "available": available, "unavailable": None, "samples": 0, "errors": [], "devices": devices}


def _device(name: str, high: float | None = None, mean: float | None = None) -> UsageDevice:
    """One device entry of a ``usage`` record: its id ``name``, memory high-water mark and utilisation mean."""
    return {"id": name, "name": None, "memory_total_mib": None, "memory_high_water_mib": high,
            "utilisation_mean_pct": mean, "utilisation_max_pct": mean,
            "series": {"t_s": [], "memory_used_mib": [], "utilisation_pct": []}}


def _real_npu_blocks() -> tuple[str, str]:
    """(``npu-smi info -t usages -i 1`` output, ``-t memory -i 1`` output) of the real capture."""
    text = (REAL / "npu-smi-info-t-usages-and-t-memory-npu1-32gb-hbm.txt").read_text()
    usages, memory = text.split("npu-smi info -t memory -i 1")
    return usages.split("npu-smi info -t usages -i 1", 1)[1], memory


def test_npu_smi_samples_of_the_real_layout_give_hbm_used_and_aicore_of_the_allocated_npu() -> None:
    usages, memory = _real_npu_blocks()
    busy = usages.replace("HBM Usage Rate(%)              : 0", "HBM Usage Rate(%)              : 25") \
                 .replace("Aicore Usage Rate(%)           : 0", "Aicore Usage Rate(%)           : 60")
    head = {"tool": "npu-smi", "path": "/usr/local/sbin/npu-smi", "visible": "1", "interval": 1.0, "t": 10.0,
            "at": 1.7e9, "memory": {"1": [0, memory, ""]}}
    lines = [json.dumps([10.0, {"1": [0, usages, ""]}]), json.dumps([11.0, {"1": [0, busy, ""]}]),
             json.dumps([12.0, {"1": [1, "", "Error: the npu id 1 is invalid."]}])]
    usage = _record("pod-cgroup", [_device("container", 80.0)])
    runtime.add_devices(usage, "\n".join([json.dumps(head), *lines]))
    container, npu = usage["devices"]
    assert (npu["id"], npu["name"], npu["source"], npu["memory_total_mib"]) == ("npu1", "NPU 1", "npu-smi", 32768.0)
    # the real capture's 0 % is a reading (an idle NPU), kept as 0; 25 % of 32768 MB HBM = 8192 MiB
    assert npu["series"] == {"t_s": [0.0, 1.0], "memory_used_mib": [0.0, 8192.0], "utilisation_pct": [0.0, 60.0]}
    sampling = usage["device_sampling"]
    assert (sampling["source"], sampling["available"], sampling["samples"]) == ("npu-smi", True, 2)
    assert sampling["errors"] == ["npu-smi info -t usages -i 1 exited 1: Error: the npu id 1 is invalid."]
    assert "ASCEND_VISIBLE_DEVICES=1" in sampling["scope"]
    values = device_run_time(usage, "npu", "kubernetes")
    assert values["gpu_memory_peak_mib"]["value"] == 8192.0  # the container's 80 MiB is not a device
    assert values["device_utilisation_mean"]["value"] == 0.3
    assert values["gpu_memory_peak_mib"]["source"].startswith("npu-smi: highest device memory used in any sample "
                                                              "of device(s) npu1 (npu-smi info -t usages")


def test_a_missing_tool_or_no_device_is_stated_never_zero() -> None:
    missing = _record("pod-cgroup", [])
    runtime.add_devices(missing, json.dumps({"tool": "npu-smi", "path": None, "visible": "0", "t": 0}))
    assert missing["device_sampling"]["unavailable"] == "npu-smi is not on PATH in the container"
    for got in device_run_time(missing, "npu", "kubernetes").values():
        assert (got["value"], got["unavailable"]) == (None, "npu-smi: npu-smi is not on PATH in the container")
    none = _record("pod-cgroup", [])
    runtime.add_devices(none, json.dumps({"tool": "npu-smi", "path": "/x/npu-smi", "visible": "", "memory": {}}))
    assert none["device_sampling"]["unavailable"] == "ASCEND_VISIBLE_DEVICES names no NPU in the container"
    cpu = device_run_time(_record("docker-stats", [_device("container")]), "cpu", "docker")
    assert cpu["device_utilisation_mean"] == {
        "value": None, "unit": "ratio", "source": "the docker engine's device sampling", "measured_by": IN_WORKLOAD,
        "in_workload": True,
        "unavailable": "a cpu resource: no accelerator device was allocated to the run"}
    assert device_run_time(None, "gpu", "local")["gpu_memory_peak_mib"]["unavailable"] == \
        "the local engine sampled no device of this gpu resource during the run"


def test_every_sample_not_available_is_none_with_why() -> None:
    usage = _record("pod-cgroup", [])
    head = {"tool": "nvidia-smi", "path": "/usr/local/bin/nvidia-smi", "visible": "GPU-a", "t": 0.0}
    na = "0, GPU-a, NVIDIA H100 80GB HBM3, [N/A], 81559, [N/A]\n"
    runtime.add_devices(usage, "\n".join([json.dumps(head), json.dumps([0.5, 0, na, ""])]))
    got = device_run_time(usage, "gpu", "kubernetes")
    assert (got["gpu_memory_peak_mib"]["value"], got["device_utilisation_mean"]["value"]) == (None, None)
    assert got["gpu_memory_peak_mib"]["unavailable"] == ("nvidia-smi read no memory figure of device(s) GPU-a in any "
                                                        "sample (each was not available)")


def test_local_nvml_series_give_the_same_values() -> None:
    usage = _record("nvml", [_device("0", 30000.0, 40.0), _device("1", 12000.5, 90.0)], scope="each GPU as a whole")
    got = device_run_time(usage, "gpu", "local")
    assert (got["gpu_memory_peak_mib"]["value"], got["device_utilisation_mean"]["value"]) == (30000.0, 0.65)
    assert got["device_utilisation_mean"]["source"] == ("nvml: mean over device(s) 0, 1 of each one's mean "
                                                        "utilisation over its samples, 0-1 (each GPU as a whole)")


@pytest.fixture
def standin_tools(tmp_path: Path) -> Path:
    """A bin folder with the real node image's stand-in ``npu-smi`` (it reads its values from
    ``/tmp/hetero-standin-npu``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "npu-smi").write_text(realimages.STANDIN_NPU_SMI)
    (bin_dir / "npu-smi").chmod(0o755)
    return bin_dir


def test_the_wrapper_samples_the_allocated_npus_with_npu_smi(tmp_path: Path, standin_tools: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in reads /tmp/hetero-standin-npu; this test owns it for its run (removed after)."""
    values_file = Path("/tmp/hetero-standin-npu")
    assert not values_file.exists(), "another run of this test holds /tmp/hetero-standin-npu"
    values_file.write_text("2 50 70\n5 90 90\n")  # NPU 5 is not allocated to the run: left out
    try:
        monkeypatch.setenv("PATH", f"{standin_tools}:{os.environ['PATH']}")
        monkeypatch.setenv("ASCEND_VISIBLE_DEVICES", "2")
        # 0.9 s, and until 3 samples were written (.devices: the header, then a line per sample)
        rc, usage, _ = run(tmp_path, [sys.executable, "-c", held_until(tmp_path / "run" / ".devices", 4, 0.9)],
                           devices="npu-smi")
    finally:
        values_file.unlink()
    assert rc == 0
    container, npu = usage["devices"]
    assert npu["id"] == "npu2" and npu["memory_total_mib"] == 32768.0
    assert set(npu["series"]["memory_used_mib"]) == {16384.0} and set(npu["series"]["utilisation_pct"]) == {70.0}
    assert usage["device_sampling"]["samples"] >= 3 and usage["device_sampling"]["interval_s"] == 0.2
    got = device_run_time(usage, "npu", "kubernetes")
    assert (got["gpu_memory_peak_mib"]["value"], got["device_utilisation_mean"]["value"]) == (16384.0, 0.7)


def test_the_wrapper_samples_gpus_with_one_looping_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``accel-standin:4``'s stand-in ``nvidia-smi`` loops with ``-lms`` as the real one does: one process for the
    run, one block of lines (one per GPU) per sample; the devices not allocated are left out."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    # the stand-in, logging each start (a second start would mean the per-sample fallback ran)
    (bin_dir / "nvidia-smi").write_text(realimages.STANDIN_SMI_LMS.replace(
        "fields=", f'echo "$*" >> {calls}\nfields=', 1))
    (bin_dir / "nvidia-smi").chmod(0o755)
    values_file = Path("/tmp/hetero-standin-smi")
    assert not values_file.exists(), "another run of this test holds /tmp/hetero-standin-smi"
    values_file.write_text("GPU-b 30000 40\n")
    try:
        monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
        monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "GPU-a,GPU-b")
        # 0.9 s, and until 3 blocks were written (.devices: the header, then a line per GPU line: 2 a block)
        rc, usage, _ = run(tmp_path, [sys.executable, "-c", held_until(tmp_path / "run" / ".devices", 7, 0.9)],
                           devices="nvidia-smi")
    finally:
        values_file.unlink()
    assert rc == 0
    assert calls.read_text().splitlines() == [
        "--query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu --format=csv,noheader,nounits -lms 200"]
    _, idle, gpu = usage["devices"]
    assert (idle["id"], gpu["id"], gpu["memory_total_mib"]) == ("GPU-a", "GPU-b", 81559.0)
    times = gpu["series"]["t_s"]
    # one sample per block: the two lines of a block (written one by one) are merged into one
    assert len(times) >= 3 and times == sorted(times) and len(set(times)) == len(times) == usage["device_sampling"][
        "samples"]
    assert set(idle["series"]["memory_used_mib"]) == {None}  # [N/A]: not read, never 0
    assert set(gpu["series"]["memory_used_mib"]) == {30000.0} and set(gpu["series"]["utilisation_pct"]) == {40.0}
    got = device_run_time(usage, "gpu", "kubernetes")
    assert (got["gpu_memory_peak_mib"]["value"], got["device_utilisation_mean"]["value"]) == (30000.0, 0.4)


def test_sample_lines_of_another_shape_are_skipped_never_a_traceback() -> None:
    # the run dir is in the workload's container: the model run can write .samples and .devices itself
    odd = ['5', '"1234"', '{"a": 1, "b": 2, "c": 3, "d": 4}', '["x", 0, "", ""]', '[null, 0, "", ""]',
           '[1.5, [1], "", ""]', '[1.5, "x", "", ""]', '[1.5, "100", 5, ""]', '[1.5, "100", "", 7]',
           '[0.5, 0, 5, ""]', '[0.5, [1]]', '[0.5, 3]']
    gpu = {"tool": "nvidia-smi", "path": "/x/nvidia-smi", "visible": "GPU-a", "t": 0.0}
    good = json.dumps([0.5, 0, "0, GPU-a, NVIDIA H100 80GB HBM3, 1024, 81559, 50\n", ""])
    usage = _record("pod-cgroup", [])
    runtime.add_devices(usage, "\n".join([json.dumps(gpu), *odd, good]))
    assert [d["series"]["memory_used_mib"] for d in usage["devices"]] == [[1024.0]]
    npu = {"tool": "npu-smi", "path": "/x/npu-smi", "visible": "0", "t": 0.0, "memory": {"0": [0, "", ""]}}
    runtime.add_devices(_record("pod-cgroup", []), "\n".join([json.dumps(npu), *odd]))
    head = {"memory": "/sys/fs/cgroup/memory.current", "cpu": "/sys/fs/cgroup/cpu.stat", "cores": 1, "t": 0.0}
    samples = "\n".join([json.dumps(head), *odd, '[1.0, "1048576", "inactive_file 0\\n", "usage_usec 0"]'])
    got, _ = runtime.read_back({".samples": samples}, None, 1.0, "p")
    assert [d["series"]["memory_used_mib"] for d in got["devices"]] == [[1.0]] and got["errors"] == []
    # a start time that is no time (out of the platform's range, infinite) is not known: never a traceback
    for at in (1e300, -1e300, float("inf")):
        far = runtime.read_back({".samples": "\n".join([json.dumps({**head, "at": at}), samples.splitlines()[-1]])},
                                None, 1.0, "p")[0]
        assert (far["started_at"], far["finished_at"]) == ("", "")
        npu_far = _record("pod-cgroup", [])
        runtime.add_devices(npu_far, json.dumps({**npu, "at": at}))
        assert npu_far["devices"] == []


def test_a_header_field_of_another_type_is_refused_naming_it_never_a_traceback() -> None:
    """The ``.samples``/``.devices`` headers are the workload's to write. A time or interval written as an integer
    too large for a float (``"t": 1000…0``) raised OverflowError out of read_back/add_devices (the engine's item
    errored with a traceback); a field of another JSON type was read as unknown, one field at a time. Now the header
    is held to its declared shape: one that does not fit is unreadable, its fields unknown, and the record says
    why, naming the field."""
    big = "1" + "0" * 400
    head = '{"memory": "/sys/fs/cgroup/memory.current", "cpu": "/sys/fs/cgroup/cpu.stat", "cores": 1, "t": T}'
    sample = '[1.0, "1048576", "inactive_file 0\\n", "usage_usec 0"]'
    got, _ = runtime.read_back({".samples": "\n".join([head.replace("T", big), sample])}, None, 1.0, "p")
    assert got["errors"][0] == "the wrapper's .samples header is unreadable: Number out of range - at `$.t`"
    as_text = head.replace('"cores": 1', '"cores": "8"').replace("T", "0")
    typed, _ = runtime.read_back({".samples": "\n".join([as_text, sample])}, None, 1.0, "p")
    assert typed["errors"][0] == ("the wrapper's .samples header is unreadable: Expected `int | float | null`, "
                                  "got `str` - at `$.cores`")
    for tool, field, value in (("nvidia-smi", "interval", big), ("npu-smi", "visible", "3"),
                               ("npu-smi", "memory", "[1]")):
        usage = _record("pod-cgroup", [])
        header = f'{{"tool": "{tool}", "path": "/x/{tool}", "{field}": {value}}}'
        runtime.add_devices(usage, "\n".join([header, json.dumps([0.5, 0, "0, GPU-a, H100, 1, 2, 3\n", ""])]))
        why = usage["device_sampling"]["unavailable"]
        assert why is not None and why.startswith("the wrapper's .devices header is unreadable: ")
        assert why.endswith(f"- at `$.{field}`") and usage["devices"] == []
