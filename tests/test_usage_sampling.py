"""Run-time usage sampling (probes/usage.py): cgroup on this host for real, npu-smi through its captured output,
NVML through a stand-in module (no NVIDIA driver here), honest "not available", and the model layer's record."""

from __future__ import annotations

import queue
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, evidence_of, matrix_text

from pytest_hetero.probes import usage
from pytest_hetero.probes.usage import MAX_POINTS, Sampler, Source, cgroup_source, npu_smi_source, sampling

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

USAGES = FIXTURES / "npu-smi-info-t-usages-and-t-memory-npu1-32gb-hbm.txt"


def test_cpu_sampling_reads_this_processes_cgroup_while_work_runs() -> None:
    with sampling("cpu", interval_s=0.05) as sampler:
        deadline, cap = time.monotonic() + 0.5, time.monotonic() + 30
        total = 0
        # 0.5 s of work, and on while fewer than 4 samples were taken (start's and the periodic ones; stop takes
        # the fifth): on a loaded machine (this loop holding the GIL) the thread may wake later than each interval
        while time.monotonic() < deadline or (len(sampler.readings) < 4 and time.monotonic() < cap):
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
    read = [m for m in series["memory_used_mib"] if m is not None]
    assert len(read) == len(series["memory_used_mib"])  # every sample read the memory
    assert dev["memory_high_water_mib"] == max(read) > 10
    assert "the harness included" in result["scope"]


def _fake_cgroup(root: Path, usage_usec: list[int]) -> None:
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text("0::/work.slice/run\n")
    group = root / "sys/fs/cgroup/work.slice/run"
    group.mkdir(parents=True)
    (root / "sys/fs/cgroup/cgroup.controllers").write_text("cpu memory\n")
    (group / "memory.current").write_text(str(512 * 2**20) + "\n")
    (group / "memory.stat").write_text(f"anon {400 * 2**20}\nfile {112 * 2**20}\ninactive_file 0\n")
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
    assert result["unavailable"] is not None
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


def test_nvml_reads_only_a_runs_slot_devices_when_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """A per-run model run on GPU 1 (its device slot): only GPU 1 is read, and the scope says so; a slot index
    NVML does not list is not available (never another GPU read in its place)."""
    monkeypatch.setitem(sys.modules, "fake_pynvml", _stand_in_nvml([0, 600, 700]))
    with sampling("gpu", interval_s=10, source=usage.nvml_source("fake_pynvml", indices=[1])) as sampler:
        pass
    result = sampler.result()
    assert [(d["id"], d["series"]["memory_used_mib"]) for d in result["devices"]] == [("1", [600.0, 700.0])]
    assert result["scope"].startswith("only GPU(s) 1 of this host, the run's device slot")
    absent = Sampler(usage.nvml_source("fake_pynvml", indices=[0, 2])).result()
    assert (absent["available"], absent["unavailable"]) == (
        False, "NVML lists 2 GPU(s): no GPU of index 2 (the run's device slot)")
    assert usage.slot_source("cpu", ["0"]) is None
    uuid = usage.slot_source("gpu", ["GPU-8c2f"])  # the gate's own CUDA_VISIBLE_DEVICES may name a GPU by UUID
    assert uuid is not None and (uuid.read, uuid.unavailable) == (None, "the run's device slot names 'GPU-8c2f', not "
                                                                       "a device index: its devices cannot be read "
                                                                       "apart from the host's others")


def test_nvml_absent_here_is_not_available() -> None:
    result = Sampler(usage.nvml_source()).result()
    assert result["available"] is False and result["devices"] == []
    assert result["unavailable"] is not None and result["unavailable"].startswith(("NVML: ", "pynvml not importable"))


def test_long_runs_are_bucketed_keeping_the_high_water_mark() -> None:
    values = iter(range(1000))
    source = Source("test", "test", {"d": {"name": "d", "memory_total_mib": None}},
                    lambda: {"d": (float(next(values)), 50.0)})
    sampler = Sampler(source, interval_s=3600)
    sampler.start()
    for _ in range(998):
        sampler._sample()
    sampler.stop()
    result = sampler.result()
    series = result["devices"][0]["series"]
    assert result["samples"] == 1000 and len(series["t_s"]) <= MAX_POINTS
    read = [m for m in series["memory_used_mib"] if m is not None]
    assert len(read) == len(series["memory_used_mib"]) and max(read) == 999.0 == \
        result["devices"][0]["memory_high_water_mib"]


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


def test_cgroup_memory_is_the_working_set_without_inactive_page_cache(tmp_path: Path) -> None:
    _fake_cgroup(tmp_path, [1_000_000])
    group = tmp_path / "sys/fs/cgroup/work.slice/run"
    # 512 MiB charged, 400 MiB of it inactive file pages (page cache the kernel can drop): 112 MiB working set
    (group / "memory.stat").write_text(f"anon {100 * 2**20}\nfile {412 * 2**20}\nactive_file {12 * 2**20}\n"
                                       f"inactive_file {400 * 2**20}\n")
    source = cgroup_source(str(tmp_path))
    assert source.read is not None and source.read() == {"cgroup": (112.0, None)}
    assert source.scope.startswith("memory working set (usage − inactive_file) of cgroup ")
    # no memory.stat: usage cannot be told from page cache, so the memory is not read (None, never raw usage)
    (group / "memory.stat").unlink()
    assert source.read()["cgroup"][0] is None


def test_cgroup_v1_working_set_uses_total_inactive_file(tmp_path: Path) -> None:
    usage_file = tmp_path / "memory.usage_in_bytes"
    usage_file.write_text(f"{300 * 2**20}\n")
    (tmp_path / "memory.stat").write_text(f"cache {250 * 2**20}\ninactive_file {10 * 2**20}\n"
                                          f"total_inactive_file {200 * 2**20}\n")
    assert usage.working_set(usage_file) == 100 * 2**20


def test_rusage_run_time_names_its_source_and_never_zero() -> None:
    got = usage.rusage_run_time(58.25, 1.5, None)
    assert got == {
        "memory_peak_mib": {"value": 58.25, "unit": "MiB", "measured_by": "gate",
                            "source": "wait4 rusage ru_maxrss of the model run's process tree (peak RSS of its "
                                      "largest process)"},
        "cpu_s": {"value": 1.5, "unit": "s", "measured_by": "gate",
                  "source": "wait4 rusage ru_utime + ru_stime of the model run's process tree (the run and every "
                            "descendant it reaped)"}}
    unmeasured = usage.rusage_run_time(None, 0.25, "at most 30.0 MiB: the run's rusage starts from …")
    assert unmeasured["memory_peak_mib"]["value"] is None
    assert unmeasured["memory_peak_mib"]["unavailable"] == "at most 30.0 MiB: the run's rusage starts from …"


def test_local_model_run_records_its_own_peak_and_cpu_not_the_cgroups(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", t=matrix_text())
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=4, skipped=1)
    model = next(i for i in evidence_of(pytester)["items"] if i["layer"] == "model")
    run = next(r["data"] for r in model["records"] if r["kind"] == "model.run")
    values = next(r["data"] for r in model["records"] if r["kind"] == "model.run_time")["values"]
    assert values["memory_peak_mib"]["value"] == run["peak_rss_mib"] and 20 < run["peak_rss_mib"] < 1000
    assert values["memory_peak_mib"]["source"].startswith("wait4 rusage ru_maxrss of the model run's process tree")
    assert values["cpu_s"]["value"] > 0 and values["cpu_s"]["measured_by"] == "gate"
    # the cgroup series beside it is the gate's whole cgroup, and says so: working set, harness included
    sampled = next(r["data"] for r in model["records"] if r["kind"] == "model.usage")
    assert sampled["scope"].startswith("memory working set (usage − inactive_file) of cgroup ")
    assert "the harness included" in sampled["scope"]


def test_local_run_time_rules_on_peak_memory_pass_and_fail(pytester: pytest.Pytester) -> None:
    rules = pytester.path / "rules.yaml"
    rules.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                     "  - {name: memory-roomy, metric: memory_peak_mib, op: '<=', value: 4096}\n"
                     "  - {name: memory-tight, metric: memory_peak_mib, op: '<=', value: 1}\n")
    pytester.makefile(".matrix.yaml", t=matrix_text(acceptance=rules))
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=3, failed=1, skipped=1)
    items = {i["layer"]: i for i in evidence_of(pytester)["items"]}
    peak = next(r["data"] for r in items["model"]["records"] if r["kind"] == "model.run")["peak_rss_mib"]
    results = next(r["data"] for r in items["business"]["records"] if r["kind"] == "business.rules")["results"]
    by = {r["name"]: r for r in results}
    assert [(r["name"], r["verdict"]) for r in results] == [("memory-roomy", "pass"), ("memory-tight", "fail")]
    for name in ("memory-roomy", "memory-tight"):
        assert by[name]["observed"] == peak and by[name]["unit"] == "MiB"
        assert by[name]["provenance"] == {"source": "measured", "unit": "MiB",
                                          "by": "the gate: wait4 rusage ru_maxrss of the model run's process tree "
                                                "(peak RSS of its largest process)"}
    business = items["business"]
    assert (business["status"], business["failure"]["category"], business["failure"]["owner"]) == (
        "failed", "acceptance_failed", "business")
    assert f"memory-tight: expected memory_peak_mib <= 1.0 MiB, observed {peak} MiB" in business["failure"]["message"]


def test_docker_stats_working_set_on_cgroup_v1_and_v2_keys() -> None:
    from pytest_hetero.backends.docker.api import StatsDocument
    from pytest_hetero.backends.docker.usage import cpu_ns, working_set_bytes

    # ContainerStatsResponse shapes (Docker Engine API): cgroup v1 memory_stats.stats has total_inactive_file
    v1 = {"memory_stats": {"usage": 300 * 2**20, "stats": {"cache": 250 * 2**20, "inactive_file": 5 * 2**20,
                                                           "total_inactive_file": 200 * 2**20}},
          "cpu_stats": {"cpu_usage": {"total_usage": 2_500_000_000}, "online_cpus": 2}}
    v2 = {"memory_stats": {"usage": 96 * 2**20, "stats": {"file": 40 * 2**20, "inactive_file": 32 * 2**20}}}
    one, two = StatsDocument.parse(v1), StatsDocument.parse(v2)
    assert working_set_bytes(one) == 100 * 2**20 and working_set_bytes(two) == 64 * 2**20
    # a stopped container: not read, never 0
    assert working_set_bytes(StatsDocument.parse({"memory_stats": {}})) is None
    assert cpu_ns(one) == (2.5e9, 2) and cpu_ns(two) == (None, None)


def _stream(docs: queue.Queue[Any]) -> Any:
    """A stand-in for the engine's stats stream: yields what the test puts, raises an exception put."""
    closed: list[bool] = []

    def open_stream(cid: str) -> Any:
        assert cid == "c1"

        def gen() -> Any:
            while True:
                doc = docs.get(timeout=5)
                if isinstance(doc, Exception):
                    raise doc
                yield doc
        return gen(), lambda: closed.append(True)
    return open_stream, closed


def _doc(mib: int, cpu_ns: int) -> dict[str, Any]:
    return {"memory_stats": {"usage": mib * 2**20, "stats": {"total_inactive_file": 0}},
            "cpu_stats": {"cpu_usage": {"total_usage": cpu_ns}, "online_cpus": 1}}


def _settle(stats: Any, docs: queue.Queue[Any], count: int) -> None:
    """Wait until the stream's thread has taken every document put so far (``count`` readings or errors in
    all): the test flips ``during`` only then, so which documents fell during the run is the test's, not the
    thread's timing (30 s: a loaded machine may leave the thread unscheduled a while, never this long)."""
    deadline = time.monotonic() + 30
    while docs.qsize() or len(stats.sampler.readings) + len(stats.sampler.errors) < count:
        assert time.monotonic() < deadline, f"the stats thread took {len(stats.sampler.readings)} of {count} documents"
        time.sleep(0.01)


def test_docker_stats_stream_attributes_only_samples_during_the_run() -> None:
    from pytest_hetero.backends.docker.usage import StatsSampling

    docs: queue.Queue[Any] = queue.Queue()
    open_stream, closed = _stream(docs)
    stats = StatsSampling(open_stream, "c1", "box")
    stats.start()
    docs.put(_doc(2, 1_000_000_000))  # the idle container, before the exec
    _settle(stats, docs, 1)
    stats.during = True
    docs.put(_doc(180, 1_500_000_000))
    docs.put(_doc(150, 2_250_000_000))
    _settle(stats, docs, 3)
    stats.during = False
    docs.put(_doc(3, 2_300_000_000))  # after the exec: the idle container again
    _settle(stats, docs, 4)
    stats.stop()
    docs.put(_doc(999, 9_000_000_000))  # after stop: not this run's
    deadline = time.monotonic() + 30  # the thread's next document closes the stream: soon, later when loaded
    while not closed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert closed == [True]  # the thread closed the stream at its next document
    result = stats.result()
    assert (result["source"], result["samples"], result["available"]) == ("docker-stats", 4, True)
    assert result["devices"][0]["series"]["memory_used_mib"] == [2.0, 180.0, 150.0, 3.0]
    values = stats.run_time(2.5)
    assert values["memory_peak_mib"]["value"] == 180.0 and values["cpu_s"]["value"] == 0.75
    assert values["memory_peak_mib"]["source"].endswith("highest of the 2 sample(s) of container box taken during "
                                                        "the run")


def test_docker_stats_sample_that_fails_says_why_and_is_never_zero() -> None:
    from pytest_hetero.backends.docker.usage import StatsSampling

    docs: queue.Queue[Any] = queue.Queue()
    open_stream, closed = _stream(docs)
    stats = StatsSampling(open_stream, "c1", "box")
    stats.start()
    stats.during = True
    docs.put(_doc(10, 1_000_000_000))
    docs.put(ConnectionError("engine gone"))
    _settle(stats, docs, 2)
    stats.stop()
    result = stats.result()
    assert result["samples"] == 1 and result["errors"] == ["ConnectionError: engine gone"]
    assert result["devices"][0]["series"]["memory_used_mib"] == [10.0]
    values = stats.run_time(0.5)
    assert values["memory_peak_mib"]["value"] == 10.0
    assert values["cpu_s"] == {"value": None, "unit": "s", "measured_by": "gate",
                               "source": values["cpu_s"]["source"], "unavailable": "ConnectionError: engine gone"}


def test_docker_stats_document_of_another_shape_loses_its_sample_not_the_stream() -> None:
    from pytest_hetero.backends.docker.usage import StatsSampling

    docs: queue.Queue[Any] = queue.Queue()
    open_stream, _ = _stream(docs)
    stats = StatsSampling(open_stream, "c1", "box")
    stats.start()
    stats.during = True
    docs.put({"memory_stats": {"usage": "a lot"}})  # (until msgspec: read as no usage, silently)
    docs.put(_doc(10, 1_000_000_000))
    _settle(stats, docs, 2)
    stats.stop()
    result = stats.result()
    assert result["samples"] == 1 and result["devices"][0]["series"]["memory_used_mib"] == [10.0]
    assert len(result["errors"]) == 1 and "`$.memory_stats.usage`" in result["errors"][0]


def test_docker_stats_a_run_shorter_than_a_tick_has_no_peak_and_says_why() -> None:
    from pytest_hetero.backends.docker.usage import StatsSampling

    docs: queue.Queue[Any] = queue.Queue()
    open_stream, _ = _stream(docs)
    stats = StatsSampling(open_stream, "c1", "box")
    stats.start()
    stats.during = True  # the exec: over before the engine's first document
    stats.during = False
    stats.stop()
    result, values = stats.result(), stats.run_time(0.62)
    assert (result["available"], result["samples"]) == (False, 0)
    assert result["unavailable"] == "the engine sent no stats document before the run ended (one per 1 s tick)"
    assert values["memory_peak_mib"]["value"] is None
    assert values["memory_peak_mib"]["unavailable"] == (
        "no stats sample fell during the 0.62 s run (the engine sends one per 1 s tick)")
    assert values["cpu_s"]["unavailable"] == "fewer than 2 stats samples during the 0.62 s run (the engine sends " \
                                             "one per 1 s tick)"
    docs.put(_doc(1, 1))  # lets the stand-in stream end
