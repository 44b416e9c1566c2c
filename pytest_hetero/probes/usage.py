"""Run-time operations sampling: device memory and utilisation while a model runs or a service is loaded.

An engine wraps the work it runs in :func:`sampling` (a context manager); the layer records what
:meth:`Sampler.result` returns (``model.usage``, ``serving.usage``). One background thread reads the
resource type's source every ``interval_s`` seconds (one thread per process serves every sampler), once
when the work starts and once when it ends:

- ``gpu`` (NVIDIA): NVML through ``nvidia-ml-py`` (``import pynvml``), per GPU: memory used
  (``nvmlDeviceGetMemoryInfo``, MiB) and utilisation (``nvmlDeviceGetUtilizationRates().gpu``, %, the
  share of the last sample period in which a kernel ran). The whole device: every process on it.
- ``npu`` (Huawei Ascend): ``npu-smi info -t usages -i N`` (``HBM Usage Rate(%)``, ``Aicore Usage
  Rate(%)``) and ``npu-smi info -t memory -i N`` (``HBM Capacity(MB)``, read once), key/value output
  read by :func:`pytest_hetero.probes.ascend_kv.parse_npu_kv`; HBM used MiB = rate × capacity / 100.
- ``cpu``: the cgroup of this process (kernel cgroup files, Documentation/admin-guide/cgroup-v2.rst
  and cgroup-v1/): memory working set (v2 ``memory.current`` − ``memory.stat`` ``inactive_file``, v1
  ``memory.usage_in_bytes`` − ``total_inactive_file``: page cache the kernel can drop is not counted, as
  cAdvisor and ``kubectl top`` count it) and CPU time (v2
  ``cpu.stat`` ``usage_usec``, v1 ``cpuacct.usage`` ns) as utilisation % of the cores the cgroup may
  use (quota, else cpuset, else the host's CPUs). Everything in that cgroup counts (the harness too).

Degrading honestly: a source that cannot be read at all gives ``available: False`` and
``unavailable`` (why), with no numbers; a value one sample could not read is ``None``, never 0.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from pytest_hetero.signals import quiet_thread


class Measured(TypedDict):
    """One run-time value as evidence (:func:`measured`, :func:`pytest_hetero.probes.device_values.value`):
    ``value`` (None: not measured, ``unavailable`` says why), its ``unit`` and ``source``, who measured it
    (``measured_by``); ``in_workload`` when the gate's sampler took it inside the model's workload
    (:func:`inside`)."""

    value: float | None
    unit: str
    source: str
    measured_by: str
    unavailable: NotRequired[str]
    in_workload: NotRequired[bool]


class DeviceFacts(TypedDict):
    """What a source knows of one device it reads (:attr:`Source.devices`): its ``name`` and
    ``memory_total_mib`` (None: not known); ``cores`` (a cgroup: the cores it may use) and ``source`` (the tool
    that read this device, where it is not the record's)."""

    name: str | None
    memory_total_mib: float | None
    cores: NotRequired[float]
    source: NotRequired[str]


class UsageSummary(TypedDict):
    """The summary of one device's samples: memory high-water mark (MiB), utilisation mean and max (%); None
    when no sample read it."""

    memory_high_water_mib: float | None
    utilisation_mean_pct: float | None
    utilisation_max_pct: float | None


class UsageSeries(TypedDict):
    """One device's samples: ``t_s`` (seconds since sampling began), ``memory_used_mib`` and ``utilisation_pct``
    (None: not read in that sample), bucketed to :data:`MAX_POINTS`."""

    t_s: list[float]
    memory_used_mib: list[float | None]
    utilisation_pct: list[float | None]


class UsageDevice(DeviceFacts, UsageSummary):
    """One device of a ``usage`` record: its ``id``, :class:`DeviceFacts`, :class:`UsageSummary` and ``series``."""

    id: str
    series: UsageSeries


class DeviceSampling(TypedDict):
    """How the devices of a ``model.usage`` record were sampled, beside its cgroup's (an in-workload device tool):
    the :class:`UsageRecord` fields that say so."""

    source: str
    scope: str
    interval_s: float | None
    available: bool
    unavailable: str | None
    samples: int
    errors: list[str]


class UsageRecord(TypedDict):
    """A ``usage`` record (:meth:`Sampler.result`, :func:`unavailable`; every key written): ``source``,
    ``scope``, ``interval_s``, ``started_at``/``finished_at`` (RFC 3339; None or "" when unknown), ``available``
    and why not (``unavailable``; None when available), ``samples``, ``errors`` and the ``devices``;
    ``device_sampling`` when an in-workload device tool added its devices."""

    source: str
    scope: str
    interval_s: float | None
    started_at: str | None
    finished_at: str | None
    available: bool
    unavailable: str | None
    samples: int
    errors: list[str]
    devices: list[UsageDevice]
    device_sampling: NotRequired[DeviceSampling]


DEFAULT_INTERVAL_S = 0.5
"""Seconds between two samples."""
MAX_POINTS = 240
"""Most points kept per series in evidence; longer runs are bucketed (memory: max, utilisation: mean)."""
NPU_SMI_TIMEOUT_S = 10.0

Reading = dict[str, tuple[float | None, float | None]]
"""One sample: device id → (memory used MiB, utilisation %); None = not readable in this sample."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Source:
    """A way to read one resource type: ``name`` (``nvml``, ``npu-smi``, ``cgroup``), ``scope`` (what
    the numbers cover, in words), ``devices`` {id: {name, memory_total_mib}}, ``read`` (one sample),
    ``close``; or ``unavailable`` (why nothing can be read) with ``read`` None."""

    name: str
    scope: str
    devices: dict[str, DeviceFacts] = field(default_factory=dict)
    read: Callable[[], Reading] | None = None
    close: Callable[[], None] = lambda: None
    unavailable: str | None = None


def nvml_source(module: str = "pynvml", indices: list[int] | None = None) -> Source:
    """NVML: every GPU NVML lists (the devices visible to this process), or only those of NVML index ``indices``
    (a model run's device slot: the indices it was given in ``CUDA_VISIBLE_DEVICES``; an index NVML does not list
    makes the source unavailable, never another GPU read in its place). Never raises."""
    try:
        nvml: Any = importlib.import_module(module)
    except ImportError as exc:
        return Source("nvml", "", unavailable=f"{module} not importable ({exc}): install nvidia-ml-py")
    try:
        nvml.nvmlInit()
        count = int(nvml.nvmlDeviceGetCount())
        missing = [i for i in indices or [] if not 0 <= i < count]
        if missing:
            nvml.nvmlShutdown()
            return Source("nvml", "", unavailable=f"NVML lists {count} GPU(s): no GPU of index {missing[0]} (the "
                                                  "run's device slot)")
        picked = list(range(count)) if indices is None else list(indices)
        handles = {i: nvml.nvmlDeviceGetHandleByIndex(i) for i in picked}
    except Exception as exc:  # noqa: BLE001 - NVMLError, or OSError from a broken libnvidia-ml
        return Source("nvml", "", unavailable=f"NVML: {exc}")
    if not handles:
        nvml.nvmlShutdown()
        return Source("nvml", "", unavailable="NVML lists no GPU")
    devices: dict[str, DeviceFacts] = {}
    for i, handle in handles.items():
        name = _nvml_value(nvml, nvml.nvmlDeviceGetName, handle)
        total = _nvml_value(nvml, lambda h: nvml.nvmlDeviceGetMemoryInfo(h).total, handle)
        devices[str(i)] = {"name": name.decode() if isinstance(name, bytes) else name,
                           "memory_total_mib": None if total is None else round(total / 2**20, 1)}

    def read() -> Reading:
        out: Reading = {}
        for i, handle in handles.items():
            used = _nvml_value(nvml, lambda h: nvml.nvmlDeviceGetMemoryInfo(h).used, handle)
            util = _nvml_value(nvml, lambda h: nvml.nvmlDeviceGetUtilizationRates(h).gpu, handle)
            out[str(i)] = (None if used is None else round(used / 2**20, 1), None if util is None else float(util))
        return out

    scope = "each GPU as a whole (every process on it), read through NVML" if indices is None else (
        f"only GPU(s) {', '.join(str(i) for i in picked)} of this host, the run's device slot (NVML index = the index "
        "given to the run in CUDA_VISIBLE_DEVICES), each as a whole (every process on it), read through NVML")
    return Source("nvml", scope, devices, read, close=lambda: _nvml_value(nvml, nvml.nvmlShutdown))


def _nvml_value(nvml: Any, call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)``, or None when NVML answers an error (not supported, GPU lost) for this field."""
    try:
        return call(*args)
    except nvml.NVMLError:
        return None


def npu_smi_source(ids: list[int] | None = None, runner: Callable[[list[str]], str] | None = None) -> Source:
    """``npu-smi info -t usages/-t memory`` for the NPUs ``ids`` (default: ``ASCEND_VISIBLE_DEVICES``, else
    the NPU ids ``npu-smi info -l`` lists). ``runner`` runs a command and returns its stdout (raises
    OSError / CalledProcessError / TimeoutExpired on failure); tests pass one. Never raises."""
    from pytest_hetero.probes.ascend import parse_visible
    from pytest_hetero.probes.ascend_kv import NpuUsage, parse_npu_usage

    if runner is None:
        if shutil.which("npu-smi") is None:
            return Source("npu-smi", "", unavailable="npu-smi not found on PATH (no Ascend driver installed?)")
        runner = _run
    try:
        if ids is None:
            visible = parse_visible(os.environ.get("ASCEND_VISIBLE_DEVICES"))
            ids = list(visible) if visible else [int(m) for m in re.findall(
                r"NPU ID\s*[:：]\s*(\d+)", runner(["npu-smi", "info", "-l"]))]
        if not ids:
            return Source("npu-smi", "", unavailable="npu-smi info -l lists no NPU")
        devices: dict[str, DeviceFacts] = {}
        for npu in ids:
            capacity = parse_npu_usage(runner(["npu-smi", "info", "-t", "memory", "-i", str(npu)])).hbm_capacity_mb
            devices[str(npu)] = {"name": f"NPU {npu}", "memory_total_mib": capacity}
    except (OSError, subprocess.SubprocessError) as exc:
        return Source("npu-smi", "", unavailable=f"npu-smi: {exc}")

    def read() -> Reading:
        out: Reading = {}
        for npu in ids or []:
            try:
                got = parse_npu_usage(runner(["npu-smi", "info", "-t", "usages", "-i", str(npu)]))
            except (OSError, subprocess.SubprocessError):
                got = NpuUsage()
            rate, capacity = got.hbm_rate_pct, _number(devices[str(npu)]["memory_total_mib"])
            used = None if rate is None or capacity is None else round(rate * capacity / 100.0, 1)
            out[str(npu)] = (used, got.aicore_rate_pct)
        return out

    return Source("npu-smi", "each NPU's HBM and AI Core as a whole (every process on it), read through npu-smi",
                  devices, read)


def _run(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=NPU_SMI_TIMEOUT_S, check=True).stdout


def _number(text: str | float | None) -> float | None:
    try:
        return float(text) if text is not None and text not in ("", "NA", "N/A", "-") else None
    except ValueError:
        return None


@functools.lru_cache(maxsize=8)
def _cgroup_layout(root: str) -> tuple[tuple[Path, str] | None, tuple[Path, str] | None, float, int | None] | str:
    """(memory file, CPU file, cores, memory limit MiB) of this process's cgroup under ``root``, or why
    there is none. Looked up once per process and root: a model run samples the same cgroup as the last
    (reading /proc/self/cgroup, every controller's limits and the files each run cost ~1 ms)."""
    from pytest_hetero.probes.cgroup import read_cgroup_limits

    base = Path(root)
    try:
        lines = (base / "proc/self/cgroup").read_text().splitlines()
    except OSError as exc:
        return f"/proc/self/cgroup unreadable: {exc.strerror}"
    paths = {}
    for line in lines:
        _, controllers, rel = line.split(":", 2) if line.count(":") >= 2 else ("", "", "")
        for name in controllers.split(",") if controllers else ["unified"]:
            paths[name] = rel
    memory, cpu = _cgroup_files(base / "sys/fs/cgroup", paths)
    if memory is None and cpu is None:
        return f"no readable cgroup memory or CPU accounting file under {base / 'sys/fs/cgroup'}"
    limits = read_cgroup_limits(root)
    return memory, cpu, limits.cpu_quota_cores or limits.cpuset_cpus or os.cpu_count() or 1, limits.memory_limit_mib


def cgroup_source(root: str = "/") -> Source:
    """The memory and CPU time of this process's cgroup (v1 or v2) under ``root`` (where the files are
    is looked up once per process and root; each sample reads them). Never raises."""
    layout = _cgroup_layout(root)
    if isinstance(layout, str):
        return Source("cgroup", "", unavailable=layout)
    memory, cpu, cores, memory_limit_mib = layout
    last: list[tuple[float, float]] = []

    def read() -> Reading:
        used = working_set(memory[0]) if memory else None
        cpu_s = _file_cpu_seconds(cpu) if cpu else None
        util = None
        now = time.monotonic()
        if cpu_s is not None:
            if last and now > last[0][0]:
                util = round(max(0.0, cpu_s - last[0][1]) / (now - last[0][0]) / cores * 100.0, 1)
            last[:] = [(now, cpu_s)]
        return {"cgroup": (None if used is None else round(used / 2**20, 1), util)}

    where = {"memory": str(memory[0].parent) if memory else None, "cpu": str(cpu[0].parent) if cpu else None}
    scope = (f"memory working set (usage − inactive_file) of cgroup {where['memory'] or '(not readable)'}, "
             f"CPU time of cgroup {where['cpu'] or '(not readable)'}: every process in them, the harness included; "
             f"CPU % of the {cores:g} core(s) this process may use")
    return Source("cgroup", scope, {"cgroup": {"name": where["memory"] or where["cpu"],
                                               "memory_total_mib": memory_limit_mib, "cores": cores}}, read)


def _cgroup_files(mount: Path, paths: dict[str, str]) -> tuple[tuple[Path, str] | None, tuple[Path, str] | None]:
    """(memory usage file, CPU usage file), each as (path, unit), of the cgroup ``paths`` names ({controller:
    path} from /proc/self/cgroup; ``unified`` for v2): v1 controllers first, then v2. The mount root stands
    in for a path the mount does not show (a container with a cgroup namespace of its own)."""
    def pick(candidates: list[tuple[str, str, str, str]]) -> tuple[Path, str] | None:
        for folder, controller, name, unit in candidates:
            base = mount / folder if folder else mount
            rel = paths.get(controller, "").strip("/")
            for where in (base / rel, base) if rel else (base,):
                if (where / name).is_file():
                    return where / name, unit
        return None

    memory = pick([("memory", "memory", "memory.usage_in_bytes", "bytes"),
                   ("", "unified", "memory.current", "bytes")])
    cpu = pick([("cpuacct", "cpuacct", "cpuacct.usage", "ns"), ("cpu,cpuacct", "cpuacct", "cpuacct.usage", "ns"),
                ("", "unified", "cpu.stat", "usage_usec")])
    return memory, cpu


def working_set(usage_file: Path) -> float | None:
    """Bytes of the cgroup's memory working set: the usage in ``usage_file`` (v2 ``memory.current``, v1
    ``memory.usage_in_bytes``) less ``inactive_file`` (v2) / ``total_inactive_file`` (v1) of the
    ``memory.stat`` beside it (never below 0). None when the usage is unreadable; when ``memory.stat`` is
    unreadable too the usage cannot be told from page cache, so None as well (never the raw usage)."""
    used = _file_number(usage_file)
    if used is None:
        return None
    try:
        stat = usage_file.with_name("memory.stat").read_text()
    except OSError:
        return None
    return working_set_of(used, stat)


WORKING_SET_KEYS = ("total_inactive_file", "inactive_file")
"""The ``memory.stat`` key subtracted from the usage: v1's hierarchical total first, then v2's."""


def working_set_of(used: float, stat_text: str) -> float | None:
    """Bytes of a cgroup's memory working set from its usage (bytes) and the text of its ``memory.stat``
    (``key value`` lines; :data:`WORKING_SET_KEYS`): usage − inactive file pages, never below 0; None when
    ``stat_text`` has no inactive file line (the usage alone would count page cache)."""
    inactive = stat_text_value(stat_text, WORKING_SET_KEYS)
    return None if inactive is None else max(0.0, used - inactive)


def stat_value(path: Path, keys: tuple[str, ...]) -> float | None:
    """The first of ``keys`` found in a ``key value`` per line file (``memory.stat``), or None."""
    try:
        return stat_text_value(path.read_text(), keys)
    except OSError:
        return None


def stat_text_value(text: str, keys: tuple[str, ...]) -> float | None:
    """The first of ``keys`` found in ``key value`` per line ``text`` (``memory.stat``), or None."""
    found = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
    for key in keys:
        if key in found:
            try:
                return float(found[key])
            except ValueError:
                return None
    return None


def _file_number(path: Path) -> float | None:
    try:
        return float(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _file_cpu_seconds(spec: tuple[Path, str]) -> float | None:
    path, fmt = spec
    try:
        return cpu_seconds_of(path.read_text(), fmt)
    except OSError:
        return None


def cpu_seconds_of(text: str, fmt: str) -> float | None:
    """CPU-seconds of a cgroup from the text of its CPU accounting file: ``fmt`` ``ns`` (v1
    ``cpuacct.usage``: one number of nanoseconds) or ``usage_usec`` (v2 ``cpu.stat``: its ``usage_usec``
    line, microseconds); None when it holds no such number."""
    try:
        if fmt == "ns":
            return float(text.split()[0]) / 1e9
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return float(value) / 1e6
    except (ValueError, IndexError):
        return None
    return None


SOURCES: dict[str, Callable[[], Source]] = {"gpu": nvml_source, "npu": npu_smi_source, "cpu": cgroup_source}
"""Resource type → the source sampled for it."""


class _Ticker:
    """The one daemon thread (per process, started on first use) that takes the periodic samples of
    every running :class:`Sampler`, each when its ``interval_s`` is due. A thread started and joined per
    run cost 1-4 ms of each model item on a loaded 2-core machine (the start waits for it to be scheduled)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[Sampler, float] = {}
        self._thread: threading.Thread | None = None

    def add(self, sampler: Sampler) -> None:
        """Sample ``sampler`` every ``interval_s`` from now until :meth:`remove`."""
        with self._cond:
            self._due[sampler] = time.monotonic() + sampler.interval_s
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="hetero-usage-sampler", daemon=True)
                self._thread.start()
            self._cond.notify()

    def remove(self, sampler: Sampler) -> None:
        """No more periodic samples of ``sampler`` (one being taken finishes first: see Sampler.stop)."""
        with self._cond:
            self._due.pop(sampler, None)

    def _loop(self) -> None:
        quiet_thread()
        while True:
            with self._cond:
                now = time.monotonic()
                ready = [s for s, due in self._due.items() if due <= now]
                for s in ready:
                    self._due[s] = now + s.interval_s
                if not ready:
                    self._cond.wait(min(self._due.values()) - now if self._due else None)
                    continue
            for s in ready:
                s._sample(periodic=True)


_TICKER = _Ticker()


class Sampler:
    """Samples ``source`` once at :meth:`start`, every ``interval_s`` seconds until :meth:`stop` (on the
    process's one sampling thread) and once at :meth:`stop`; :meth:`result` is the evidence (see
    :func:`sampling`)."""

    def __init__(self, source: Source, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.source = source
        self.interval_s = interval_s
        self.times: list[float] = []
        self.readings: list[Reading] = []
        self.errors: list[str] = []
        self.started_at = self.finished_at = ""
        self._lock = threading.Lock()
        self._stopped = False
        self._t0 = 0.0

    def _sample(self, periodic: bool = False) -> None:
        if self.source.read is None:
            return
        with self._lock:  # one sample at a time, none from the sampling thread after stop's last one
            if periodic and self._stopped:
                return
            at = time.monotonic()  # when the sample was asked for (a loaded machine may delay the read)
            try:
                reading = self.source.read()
            except Exception as exc:  # noqa: BLE001 - a reader failing mid-run loses that sample, never the run
                if len(self.errors) < 5:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                return
            self.times.append(round(at - self._t0, 3))
            self.readings.append(reading)

    def start(self) -> None:
        """Take the first sample and join the periodic sampling."""
        self.started_at, self._t0 = _now(), time.monotonic()
        self._sample()
        if self.source.read is not None:
            _TICKER.add(self)

    def stop(self) -> None:
        """Leave the periodic sampling, take the last sample, release the source."""
        _TICKER.remove(self)
        with self._lock:
            self._stopped = True
        self._sample()
        self.finished_at = _now()
        try:
            self.source.close()
        except Exception as exc:  # noqa: BLE001 - closing cannot change what was read
            self.errors.append(f"close: {exc}")

    def result(self) -> UsageRecord:
        """The ``usage`` evidence: ``{"source", "scope", "interval_s", "started_at", "finished_at",
        "available", "unavailable", "samples", "errors", "devices": [{"id", "name", "memory_total_mib",
        "memory_high_water_mib", "utilisation_mean_pct", "utilisation_max_pct", "series": {"t_s",
        "memory_used_mib", "utilisation_pct"}}]}``; memory in MiB, utilisation in %, ``t_s`` seconds since
        the start; a value no sample could read is None (never 0). Series longer than
        :data:`MAX_POINTS` are bucketed (memory: the bucket's max, utilisation: its mean)."""
        src = self.source
        available = src.read is not None and bool(self.readings)
        why = src.unavailable or (None if available else "no sample could be read: " + "; ".join(self.errors))
        devices: list[UsageDevice] = []
        for dev_id, facts in src.devices.items() if available else []:
            # a sample that could not read this device holds no entry for it: both values unknown there
            read = [r.get(dev_id, (None, None)) for r in self.readings]
            mem, util = [m for m, _ in read], [u for _, u in read]
            devices.append({"id": dev_id, **facts, **_summary(mem, util),
                            "series": _bucketed(self.times, mem, util)})
        return {"source": src.name, "scope": src.scope, "interval_s": self.interval_s,
                "started_at": self.started_at, "finished_at": self.finished_at, "available": available,
                "unavailable": why, "samples": len(self.readings), "errors": self.errors, "devices": devices}


def _summary(mem: list[float | None], util: list[float | None]) -> UsageSummary:
    m = [v for v in mem if v is not None]
    u = [v for v in util if v is not None]
    return {"memory_high_water_mib": max(m) if m else None,
            "utilisation_mean_pct": round(sum(u) / len(u), 1) if u else None,
            "utilisation_max_pct": max(u) if u else None}


def _bucketed(times: list[float], mem: list[float | None], util: list[float | None]) -> UsageSeries:
    if len(times) <= MAX_POINTS:
        return {"t_s": list(times), "memory_used_mib": mem, "utilisation_pct": util}
    size = -(-len(times) // MAX_POINTS)
    out: UsageSeries = {"t_s": [], "memory_used_mib": [], "utilisation_pct": []}
    for start in range(0, len(times), size):
        m = [v for v in mem[start:start + size] if v is not None]
        u = [v for v in util[start:start + size] if v is not None]
        out["t_s"].append(times[start])
        out["memory_used_mib"].append(max(m) if m else None)
        out["utilisation_pct"].append(round(sum(u) / len(u), 1) if u else None)
    return out


def slot_source(resource_type: str, devices: list[str]) -> Source | None:
    """The source that reads only ``devices`` (a model run's device slot: the accelerator indices it was given)
    for ``resource_type``: NVML for ``gpu`` (:func:`nvml_source`), ``npu-smi -i`` for ``npu``
    (:func:`npu_smi_source`); None for another type (a cgroup is not a device). A slot id that is not a device
    index (a UUID the gate was given in its own ``CUDA_VISIBLE_DEVICES``) gives an unavailable source, never every
    device of the host read in its place. Never raises."""
    if resource_type not in ("gpu", "npu"):
        return None
    odd = [i for i in devices if not (i.isascii() and i.isdecimal())]
    if odd:
        return Source("nvml" if resource_type == "gpu" else "npu-smi", "",
                      unavailable=f"the run's device slot names {odd[0]!r}, not a device index: its devices cannot "
                                  "be read apart from the host's others")
    indices = [int(i) for i in devices]
    if resource_type == "gpu":
        return nvml_source(indices=indices)
    if resource_type == "npu":
        return npu_smi_source(indices)
    return None


@contextlib.contextmanager
def sampling(resource_type: str, interval_s: float = DEFAULT_INTERVAL_S,
             source: Source | None = None, devices: list[str] | None = None) -> Iterator[Sampler]:
    """Sample the source of ``resource_type`` (``gpu``, ``npu``, ``cpu``; see :data:`SOURCES`) while the
    ``with`` body runs; after it, ``sampler.result()`` is the evidence. ``source`` replaces the default
    one; ``devices`` (accelerator indices: a per-run model run's device slot) reads only those devices
    (:func:`slot_source`) in place of every device of the host. An unknown type yields a sampler whose result
    says it is not available. Never raises."""
    if source is None and devices is not None:
        source = slot_source(resource_type, devices)
    if source is None:
        make = SOURCES.get(resource_type)
        source = make() if make else Source("none", "", unavailable=f"no sampler for resource type {resource_type!r}")
    sampler = Sampler(source, interval_s)
    sampler.start()
    try:
        yield sampler
    finally:
        sampler.stop()


def unavailable(why: str) -> UsageRecord:
    """A ``usage`` record for work nobody sampled (an engine without sampling): ``available`` False and
    why, in the shape of :meth:`Sampler.result`."""
    return {"source": "none", "scope": "", "interval_s": None, "started_at": None, "finished_at": None,
            "available": False, "unavailable": why, "samples": 0, "errors": [], "devices": []}


RUN_TIME_UNITS: dict[str, str] = {"memory_peak_mib": "MiB", "cpu_s": "s"}
"""The run-time values the gate measures of one model run (``model.run_time``), by name, with their unit:
``memory_peak_mib`` the run's memory high-water mark, ``cpu_s`` the CPU-seconds it used. Acceptance rules
of kind ``run_time`` name them (:mod:`pytest_hetero.matrix.acceptance`)."""


def measured(name: str, value: float | None, source: str, why: str | None = None) -> Measured:
    """One run-time value as evidence: ``{"value", "unit", "source", "measured_by": "gate"}``, plus
    ``unavailable`` (why) when ``value`` is None: a value that could not be measured is never 0.
    ``name`` is a key of :data:`RUN_TIME_UNITS` (KeyError otherwise)."""
    out: Measured = {"value": None if value is None else round(float(value), 3), "unit": RUN_TIME_UNITS[name],
                     "source": source, "measured_by": "gate"}
    if value is None:
        out["unavailable"] = why or "not measured"
    return out


IN_WORKLOAD = "gate, sampled inside the workload (its samples are writable by the code under test)"
"""``measured_by`` of a value whose samples the gate's sampler took inside the model's container or pod: a run
written to deceive can overwrite them before the gate reads them back (docs/run-time-evidence.md)."""


def inside(values: dict[str, Measured]) -> dict[str, Measured]:
    """Mark each of ``values`` (:func:`measured`'s shape) as sampled inside the workload: ``measured_by``
    :data:`IN_WORKLOAD`, ``in_workload`` True. Returns ``values``."""
    for value in values.values():
        value["measured_by"], value["in_workload"] = IN_WORKLOAD, True
    return values


def peak_rss(child_kib: int, inherited_kib: int,
             forker: str = "the session sandbox's supervisor, or the gate") -> tuple[float | None, str | None]:
    """The run's peak RSS in MiB from its ``wait4`` ``ru_maxrss`` (KiB), or None and why.

    Linux carries a process's RSS high-water mark across ``exec`` (``signal->maxrss``), so a child starts
    from the high-water mark of the process that forked it (``forker``, named in the reason) at the fork
    (``inherited_kib``, ``RUSAGE_SELF`` just before it) and ``ru_maxrss`` is max(that, the run's own peak).
    Above it, the figure is the run's; at or below it, the run's peak is unknown (only that it was no
    higher): ``(None, reason)``; the reason is None when the figure is the run's."""
    if child_kib > inherited_kib:
        return round(child_kib / 1024.0, 2), None
    return None, (f"at most {inherited_kib / 1024.0:.1f} MiB: the run's rusage starts from the peak RSS of the "
                  f"process that forked it ({forker}), and the run never exceeded it")


def rusage_run_time(peak_rss_mib: float | None, cpu_s: float | None, rss_note: str | None) -> dict[str, Measured]:
    """The run-time values of a model run from the ``wait4`` rusage of its process tree (local engine):
    ``memory_peak_mib`` (``ru_maxrss``: the peak RSS of the tree's largest process, the run itself or a
    descendant it reaped; ``rss_note`` says why it is None) and ``cpu_s`` (``ru_utime`` + ``ru_stime`` of the
    run and every descendant it reaped). Only the model's processes: not the gate, not the machine."""
    return {"memory_peak_mib": measured("memory_peak_mib", peak_rss_mib,
                                        "wait4 rusage ru_maxrss of the model run's process tree (peak RSS of its "
                                        "largest process)", rss_note),
            "cpu_s": measured("cpu_s", cpu_s, "wait4 rusage ru_utime + ru_stime of the model run's process tree "
                                              "(the run and every descendant it reaped)",
                              "the run's rusage was not returned")}
