"""Run-time usage sampling (probes/usage.py): cgroup on this host for real, npu-smi through its captured output,
NVML through a stand-in module (no NVIDIA driver here), honest "not available", and the model layer's record."""

from __future__ import annotations

import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, evidence_of, matrix_text

from pytest_hetero.probes import usage
from pytest_hetero.probes.usage import MAX_POINTS, Sampler, Source, cgroup_source, npu_smi_source, sampling

USAGES = FIXTURES / "npu-smi-info-t-usages-and-t-memory-npu1-32gb-hbm.txt"


def test_cpu_sampling_reads_this_processes_cgroup_while_work_runs() -> None:
    with sampling("cpu", interval_s=0.05) as sampler:
        deadline = time.monotonic() + 0.5
        total = 0
        while time.monotonic() < deadline:
            total += sum(range(1000))
    result = sampler.result()
    assert result["source"] == "cgroup" and result["available"] is True and result["unavailable"] is None
    assert result["samples"] >= 5 and result["interval_s"] == 0.05
    (dev,) = result["devices"]
    series = dev["series"]
    assert len(series["t_s"]) == result["samples"] == len(series["memory_used_mib"])
    assert series["t_s"] == sorted(series["t_s"]) and series["t_s"][0] == 0.0
    # the first sample has no CPU-time delta yet: not read, never 0
    assert series["utilisation_pct"][0] is None
    later = [u for u in series["utilisation_pct"][1:] if u is not None]
    assert later and max(later) > 10  # this loop kept a core busy
    assert dev["memory_high_water_mib"] == max(series["memory_used_mib"]) > 10
    assert "the harness included" in result["scope"]


def _fake_cgroup(root: Path, usage_usec: list[int]) -> None:
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text("0::/work.slice/run\n")
    group = root / "sys/fs/cgroup/work.slice/run"
    group.mkdir(parents=True)
    (root / "sys/fs/cgroup/cgroup.controllers").write_text("cpu memory\n")
    (group / "memory.current").write_text(str(512 * 2**20) + "\n")
    (group / "memory.max").write_text(str(2048 * 2**20) + "\n")
    (group / "cpu.max").write_text("200000 100000\n")
    (group / "cpu.stat").write_text(f"usage_usec {usage_usec[0]}\nuser_usec 1\nsystem_usec 1\n")


def test_cgroup_v2_files_give_memory_and_cpu_share_of_the_quota(tmp_path: Path) -> None:
    _fake_cgroup(tmp_path, [1_000_000])
    source = cgroup_source(str(tmp_path))
    assert source.unavailable is None and source.devices["cgroup"]["cores"] == 2.0
    assert source.devices["cgroup"]["memory_total_mib"] == 2048
    assert source.read is not None
    first = source.read()
    assert first == {"cgroup": (512.0, None)}
    time.sleep(0.2)
    # 0.2 s of CPU time over ~0.2 s of wall time on a 2-core quota is about 50 %
    (tmp_path / "sys/fs/cgroup/work.slice/run/cpu.stat").write_text("usage_usec 1200000\n")
    mem, util = source.read()["cgroup"]
    assert mem == 512.0 and util is not None and 30 < util <= 51


def test_no_cgroup_accounting_is_not_available_never_zero(tmp_path: Path) -> None:
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text("0::/x\n")
    with sampling("cpu", source=cgroup_source(str(tmp_path))) as sampler:
        pass
    result = sampler.result()
    assert result["available"] is False and result["devices"] == [] and result["samples"] == 0
    assert result["unavailable"].startswith("no readable cgroup memory or CPU accounting file under")


def _npu_runner(calls: list[list[str]]) -> Any:
    usages, memory = USAGES.read_text().split("\n\nnpu-smi info -t memory -i 1\n")

    def run(argv: list[str]) -> str:
        calls.append(argv)
        if argv[:4] == ["npu-smi", "info", "-t", "usages"]:
            return usages.replace("HBM Usage Rate(%)              : 0", "HBM Usage Rate(%)              : 25")
        if argv[:4] == ["npu-smi", "info", "-t", "memory"]:
            return memory
        raise OSError(f"unexpected {argv}")
    return run


def test_npu_smi_usage_from_the_captured_output() -> None:
    calls: list[list[str]] = []
    source = npu_smi_source([1], runner=_npu_runner(calls))
    assert source.unavailable is None and source.devices == {"1": {"name": "NPU 1", "memory_total_mib": 32768.0}}
    assert source.read is not None
    # HBM 25 % of 32768 MB; Aicore Usage Rate 0 % is a real reading, kept as 0.0
    assert source.read() == {"1": (8192.0, 0.0)}
    assert ["npu-smi", "info", "-t", "memory", "-i", "1"] in calls
    assert ["npu-smi", "info", "-t", "usages", "-i", "1"] in calls


def test_npu_smi_failing_mid_run_loses_the_value_not_the_run() -> None:
    calls: list[list[str]] = []
    good = _npu_runner(calls)
    state = {"n": 0}

    def flaky(argv: list[str]) -> str:
        if argv[3] == "usages":
            state["n"] += 1
            if state["n"] == 2:
                raise OSError("npu-smi: device busy")
        return str(good(argv))

    with sampling("npu", interval_s=0.02, source=npu_smi_source([1], runner=flaky)) as sampler:
        time.sleep(0.1)
    series = sampler.result()["devices"][0]["series"]
    assert series["memory_used_mib"][1] is None and series["utilisation_pct"][1] is None
    assert series["memory_used_mib"][0] == 8192.0


def test_npu_smi_absent_is_not_available() -> None:
    with sampling("npu") as sampler:
        pass
    result = sampler.result()
    assert result["available"] is False
    assert result["unavailable"] == "npu-smi not found on PATH (no Ascend driver installed?)"


class _NVMLError(Exception):
    pass


def _stand_in_nvml(used: list[int]) -> types.ModuleType:
    """A stand-in for pynvml with two GPUs (no NVIDIA driver on this machine): GPU 1 does not report utilisation."""
    module = types.ModuleType("fake_pynvml")
    module.NVMLError = _NVMLError  # type: ignore[attr-defined]
    module.nvmlInit = lambda: None  # type: ignore[attr-defined]
    module.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    module.nvmlDeviceGetCount = lambda: 2  # type: ignore[attr-defined]
    module.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    module.nvmlDeviceGetName = lambda h: b"NVIDIA H200"  # type: ignore[attr-defined]
    mem = types.SimpleNamespace

    def memory(h: int) -> Any:
        return mem(total=143771 * 2**20, used=used.pop(0) * 2**20 if used else 1000 * 2**20)

    def rates(h: int) -> Any:
        if h == 1:
            raise _NVMLError("Not Supported")
        return mem(gpu=87)

    module.nvmlDeviceGetMemoryInfo = memory  # type: ignore[attr-defined]
    module.nvmlDeviceGetUtilizationRates = rates  # type: ignore[attr-defined]
    return module


def test_nvml_shape_with_a_stand_in_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fake_pynvml", _stand_in_nvml([0, 0, 500, 600, 40000, 700]))
    with sampling("gpu", interval_s=10, source=usage.nvml_source("fake_pynvml")) as sampler:
        pass
    result = sampler.result()
    assert result["source"] == "nvml" and result["available"] and result["samples"] == 2
    gpu0, gpu1 = result["devices"]
    assert gpu0["name"] == "NVIDIA H200" and gpu0["memory_total_mib"] == 143771.0
    assert gpu0["series"]["memory_used_mib"] == [500.0, 40000.0] and gpu0["memory_high_water_mib"] == 40000.0
    assert gpu0["utilisation_mean_pct"] == 87.0
    assert gpu1["series"] == {"t_s": gpu0["series"]["t_s"], "memory_used_mib": [600.0, 700.0], "utilisation_pct": [None, None]}
    assert gpu1["utilisation_mean_pct"] is None and gpu1["memory_high_water_mib"] == 700.0


def test_nvml_absent_here_is_not_available() -> None:
    result = Sampler(usage.nvml_source()).result()
    assert result["available"] is False and result["devices"] == []
    assert result["unavailable"].startswith(("NVML: ", "pynvml not importable"))


def test_long_runs_are_bucketed_keeping_the_high_water_mark() -> None:
    values = iter(range(1000))
    source = Source("test", "test", {"d": {"name": "d"}}, lambda: {"d": (float(next(values)), 50.0)})
    sampler = Sampler(source, interval_s=3600)
    sampler.start()
    for _ in range(998):
        sampler._sample()
    sampler.stop()
    result = sampler.result()
    series = result["devices"][0]["series"]
    assert result["samples"] == 1000 and len(series["t_s"]) <= MAX_POINTS
    assert max(series["memory_used_mib"]) == 999.0 == result["devices"][0]["memory_high_water_mib"]


def test_an_unknown_resource_type_is_not_available() -> None:
    with sampling("tpu") as sampler:
        pass
    assert sampler.result()["unavailable"] == "no sampler for resource type 'tpu'"


def test_model_run_records_its_usage(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", t=matrix_text())
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=4, skipped=1)
    model = next(i for i in evidence_of(pytester)["items"] if i["layer"] == "model")
    kinds = [r["kind"] for r in model["records"]]
    assert kinds.index("model.usage") < kinds.index("model.run")
    data = next(r["data"] for r in model["records"] if r["kind"] == "model.usage")
    assert data["source"] == "cgroup" and data["available"] is True and data["samples"] >= 2
    assert data["devices"][0]["memory_high_water_mib"] > 10
