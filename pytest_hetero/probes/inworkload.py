"""The gate's in-workload wrapper of a model run, engine-neutral: the shell command that starts it
(:func:`wrapped`, its text :mod:`pytest_hetero.probes.podwrap` run by the image's ``{python}``), the dump of its
files (:func:`dump_script`, :func:`parse_dump`) and what they become (:func:`read_back`: ``model.usage`` and
``model.run_time``; :func:`add_devices`: the device series). The Kubernetes engine runs it in the workload pod
(:mod:`pytest_hetero.backends.kubernetes.runtime`), the Docker engine beside a model's exec to sample devices
(:mod:`pytest_hetero.backends.docker.devices`); neither engine imports the other.

The wrapper (run by the image's ``{python}`` as ``python -I -S -c``) forks the model run, reaps it with ``wait4``
and samples the container's own cgroup meanwhile (``/sys/fs/cgroup`` is the container's cgroup inside it). It
writes ``.rusage`` and ``.samples`` in the run dir; an engine dumps them (:func:`dump_script`) and
:func:`read_back` turns them into what the local and Docker engines record:

- ``model.run_time`` (:func:`~pytest_hetero.probes.usage.rusage_run_time`, as the local engine): the
  ``ru_maxrss`` of the model run's process tree (:func:`~pytest_hetero.probes.usage.peak_rss`: unknown when
  not above the wrapper's own peak at the fork) and ``ru_utime + ru_stime``;
- ``model.usage``: the container cgroup's memory working set (usage − inactive file pages:
  :func:`~pytest_hetero.probes.usage.working_set_of`; v2 ``memory.current``, v1 ``memory.usage_in_bytes``)
  and CPU % of the cores the pod may use (from ``cpu.stat`` ``usage_usec`` or ``cpuacct.usage``) every
  :data:`SAMPLE_INTERVAL_S`.

An image without the interpreter runs the model unwrapped: both then say why (never 0).
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec

from pytest_hetero.declared import resolve
from pytest_hetero.probes.usage import (
    RUN_TIME_UNITS,
    DeviceFacts,
    Measured,
    Sampler,
    Source,
    UsageRecord,
    cpu_seconds_of,
    inside,
    measured,
    peak_rss,
    rusage_run_time,
    unavailable,
    working_set_of,
)

SAMPLE_INTERVAL_S: float = 1.0
"""Seconds between two samples of the container's cgroup during a model run (the Docker engine's stats tick)."""
WRAPPER = (Path(__file__).with_name("podwrap.py")).read_text(encoding="utf-8")
"""The text of :mod:`.podwrap`, run in the workload."""
HeadT = TypeVar("HeadT", bound=msgspec.Struct)
"""A header shape (:func:`_header`)."""
SOURCE = "pod-cgroup"
NO_WRAPPER = ".nowrap"
"""File the run's shell writes in the run dir when the image has no interpreter for the wrapper."""
FORKER = "the gate's wrapper in the pod, a python interpreter"
DEVICE_TOOLS = {"gpu": "nvidia-smi", "npu": "npu-smi"}
"""Resource type → the tool the wrapper samples the container's devices with."""


def wrapped(python: str, run_dir: str, argv: list[str], interval_s: float | None = None, devices: str = "-") -> str:
    """A shell command that runs ``argv`` under the wrapper with ``python`` (a command name or path; samples
    every ``interval_s`` seconds, :data:`SAMPLE_INTERVAL_S` by default; ``devices``: the device tool to
    sample with, ``nvidia-smi``, or ``-`` for none), or
    ``argv`` alone (writing why in ``run_dir/.nowrap``) when the image has no such interpreter. Meant to be
    started in the background (``&``) so ``$!`` is the wrapper's pid."""
    py, rd = shlex.quote(python), shlex.quote(run_dir)
    interval_s = SAMPLE_INTERVAL_S if interval_s is None else interval_s
    return (f"( if command -v {py} >/dev/null 2>&1; then exec {py} -I -S -c {shlex.quote(WRAPPER)} {rd} "
            f"{interval_s:g} {shlex.quote(devices)} {shlex.join(argv)}; fi; "
            f"echo {shlex.quote(python)} > {rd}/{NO_WRAPPER}; "
            f"exec {shlex.join(argv)} )")


def dump_script(run_dir: str) -> str:
    """A shell script printing the run dir's evidence files, each after a ``=== <name>`` line (an absent one
    empty); exit 3 when the run dir is not there. :func:`parse_dump` reads its output."""
    return (f"cd {shlex.quote(run_dir)} 2>/dev/null || exit 3; for f in .rusage {NO_WRAPPER} .samples .devices; do "
            "echo \"=== $f\"; cat \"$f\" 2>/dev/null; echo; done; exit 0")


def parse_dump(stdout: str) -> dict[str, str]:
    """File name → text of :func:`dump_script`'s output (what comes before its first section is left out)."""
    files: dict[str, str] = {}
    name = ""
    for line in stdout.splitlines():
        if line.startswith("=== "):
            name = line[4:]
            files[name] = ""
        elif name:
            files[name] += line + "\n"
    return files


class RunDirFiles(msgspec.Struct, frozen=True, kw_only=True,
                  rename={"rusage": ".rusage", "no_wrapper": NO_WRAPPER, "samples": ".samples", "devices": ".devices"}):
    """The run dir's evidence files the gate reads back (:func:`dump_script`), as text ("" for a file that is
    absent): the wrapper's ``rusage`` JSON (file ``.rusage``), ``no_wrapper`` (the interpreter the image lacked,
    :data:`NO_WRAPPER`), its ``samples`` (``.samples``) and the device sampler's ``devices`` (``.devices``)."""

    rusage: str = ""
    no_wrapper: str = ""
    samples: str = ""
    devices: str = ""

    @classmethod
    def of(cls, files: Mapping[str, str]) -> RunDirFiles:
        """The files of ``files`` (name → text, as :func:`parse_dump` reads them; other names are ignored)."""
        return msgspec.convert(files, cls)


def read_back(files: dict[str, str], why: str | None, run_s: float, pod: str
              ) -> tuple[UsageRecord, dict[str, Measured]]:
    """:func:`evidence` from the run dir's files (name → text; an absent file: "", :class:`RunDirFiles`), or
    unavailable because of ``why``."""
    found = RunDirFiles.of(files)
    nowrap = found.no_wrapper.strip()
    if why is None and nowrap:
        why = f"the image has no {nowrap} to run the gate's in-pod wrapper (rusage and cgroup samples)"
    if why is not None:
        return unavailable(why), inside({name: measured(name, None, f"in-pod wrapper ({SOURCE})", why)
                                         for name in RUN_TIME_UNITS})
    usage = _series(found.samples, pod)
    if found.devices.strip():
        add_devices(usage, found.devices)
    return usage, inside(_rusage(found.rusage, run_s))


def _rusage(text: str, run_s: float) -> dict[str, Measured]:
    """The ``model.run_time`` values of the wrapper's ``.rusage`` JSON text."""
    try:
        got = json.loads(text)
        peak, note = peak_rss(int(got["maxrss_kib"]), int(got["inherited_kib"]), FORKER)
        cpu: float | None = float(got["utime"]) + float(got["stime"])
    except (ValueError, KeyError, TypeError):
        why = (f"the wrapper wrote no rusage: the run did not end by itself within its {run_s:.1f} s "
               "(killed at its timeout, or its node was lost)" if not text.strip() else
               f"the wrapper's rusage is not readable: {text.strip()[:200]}")
        values = rusage_run_time(None, None, why)
        values["cpu_s"]["unavailable"] = why
        return values
    values = rusage_run_time(peak, cpu, note)
    for v in values.values():
        v["source"] = f"{v['source']}, taken inside the pod by the gate's wrapper"
    return values


def _iso(epoch_s: Any) -> str:
    """RFC 3339 UTC text of ``epoch_s`` (seconds), "" when it is not a number or not a time (NaN, infinite, out
    of the platform's range: a header the workload may have written)."""
    if not isinstance(epoch_s, (int, float)):
        return ""
    try:
        at = datetime.fromtimestamp(epoch_s, UTC)
    except (OverflowError, OSError, ValueError):
        return ""
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


WrittenNumber = Annotated[int, msgspec.Meta(ge=-(2**53), le=2**53)] | float
"""A count or time the workload writes as a JSON number: an integer kept as written (so it prints as written), no
larger than a float holds exactly (a larger one would overflow where it is divided or taken as a float)."""


class _SamplesHead(msgspec.Struct, frozen=True, kw_only=True):
    """The ``.samples`` header as :mod:`.podwrap` writes it (every field optional; null: not known)."""

    memory: str | None = None
    cpu: str | None = None
    cores: WrittenNumber | None = None
    interval: float | None = None
    at: WrittenNumber | None = None
    t: float | None = None


def _header(line: str | None, shape: type[HeadT], what: str) -> tuple[HeadT, str | None]:
    """``line`` (a header the workload wrote, JSON) as ``shape``, and why it is not one (None: it is): not JSON or
    not an object, or a field of another type (the message names it, ``$.field``); an unreadable header reads as
    every field unknown (``shape()``), never raises."""
    try:
        raw = json.loads(line) if line else {}
    except ValueError:
        raw = {}
    if not isinstance(raw, dict):
        return shape(), None
    try:
        return msgspec.convert(raw, shape), None
    except msgspec.ValidationError as exc:
        return shape(), f"the wrapper's {what} header is unreadable: {exc}"


@dataclass(frozen=True)
class SamplesHeader:
    """The first line of the wrapper's ``.samples`` (a JSON object, :mod:`.podwrap`): the cgroup ``memory`` and
    ``cpu`` files it read (None: none readable), the ``cores`` the container may run on, the sampling
    ``interval`` (s), the epoch ``at`` and monotonic ``t`` it began at; ``problem``: why the header was not read
    (a field of another JSON type, named; its fields are then all unknown). A field absent or null reads None
    (``cores``: 1, ``t``: 0)."""

    memory: str | None
    cpu: str | None
    cores: float
    interval: float | None
    at: float | None
    t: float
    problem: str | None = None

    @classmethod
    def parse(cls, line: str | None) -> SamplesHeader:
        """The header of ``line`` (None or not a JSON object: every field unknown)."""
        head, problem = _header(line, _SamplesHead, ".samples")
        return cls(memory=head.memory or None, cpu=head.cpu or None, cores=head.cores or 1, interval=head.interval,
                   at=head.at, t=head.t or 0.0, problem=problem)


@dataclass(frozen=True)
class CgroupSample:
    """One sample line of the wrapper's ``.samples`` (:mod:`.podwrap`): ``[monotonic s, memory usage text,
    inactive file lines of memory.stat, CPU text]``, or those with the ``error`` text of a failed read after them.
    ``at`` (s), ``used`` (bytes; None: no usage text), ``stat`` and ``cpu`` ("" when empty)."""

    at: float
    used: float | None
    stat: str
    cpu: str
    error: str | None

    @classmethod
    def parse(cls, line: str) -> CgroupSample | None:
        """The sample of ``line``; None for a line that is not one (not JSON, not a list of at least four, a
        time or usage that is not a number, a text that is not text): the reader skips it, never raises."""
        try:
            got = json.loads(line)
        except ValueError:
            return None
        if not isinstance(got, list) or len(got) < 4:
            return None
        at, used, stat, cpu, *error = got
        seconds = _float(at)
        if seconds is None:
            return None
        if error:
            return cls(seconds, None, "", "", str(error[0]))
        bytes_used = _float(used) if used else None
        if (used and bytes_used is None) or not _text_or_empty(stat, cpu):
            return None
        return cls(seconds, bytes_used, stat or "", cpu or "", None)


def _series(text: str, pod: str) -> UsageRecord:
    """The ``model.usage`` record of the wrapper's ``.samples`` text (see :mod:`.podwrap`)."""
    lines = text.splitlines()
    head = SamplesHeader.parse(lines[0] if lines else None)
    memory, cpu, cores = head.memory, head.cpu, head.cores
    missing = [what for what, path in (("memory", memory), ("CPU", cpu)) if not path]
    scope = (f"the cgroup of pod {pod}'s workload container, read inside it ({memory or 'no memory file'}, "
             f"{cpu or 'no CPU file'}): every process in the container (the model run, the gate's wrapper "
             f"and the container's idle main process); memory working set = usage − inactive_file; CPU % of "
             f"the {cores} core(s) the container may run on")
    source = Source(SOURCE, scope, {"container": {"name": f"{pod}/workload", "memory_total_mib": None}},
                    read=(lambda: {}) if lines else None,
                    unavailable=None if lines else "the wrapper wrote no samples (the run never started under it)")
    sampler = Sampler(source, float(head.interval or SAMPLE_INTERVAL_S))
    sampler.started_at = _iso(head.at)
    if head.problem is not None:
        sampler.errors.append(head.problem)
    fmt = "usage_usec" if str(cpu).endswith("cpu.stat") else "ns"
    prev: tuple[float, float] | None = None
    t0 = head.t
    for line in lines[1:]:
        sample = CgroupSample.parse(line)
        if sample is None:
            continue
        at = sample.at
        if sample.error is not None:
            sampler.errors.append(sample.error)
            continue
        since = _since(at, t0)
        if since is None:
            continue
        ws = working_set_of(sample.used, sample.stat) if sample.used is not None else None
        cpu_s = cpu_seconds_of(sample.cpu, fmt) if sample.cpu else None
        util = None
        if cpu_s is not None:
            if prev is not None and at > prev[0]:
                util = round(max(0.0, cpu_s - prev[1]) / (at - prev[0]) / cores * 100.0, 1)
            prev = (at, cpu_s)
        sampler.times.append(since)
        sampler.readings.append({"container": (None if ws is None else round(ws / 2**20, 1), util)})
    began = head.at
    sampler.finished_at = _iso(began + sampler.times[-1] if sampler.times and isinstance(began, float) else None)
    out = sampler.result()
    if missing and out["available"]:
        out["errors"] = [*out["errors"], f"no readable cgroup {' or '.join(missing)} file in the container"]
    return out


DEVICE_FIELDS = ("index", "uuid", "name", "memory.used", "memory.total", "utilization.gpu")
"""The ``--query-gpu`` fields the wrapper asks ``nvidia-smi`` for (:mod:`.podwrap`), in order: MiB and %."""


class _DevicesHead(msgspec.Struct, frozen=True, kw_only=True):
    """The ``.devices`` header as :mod:`.podwrap` writes it (every field optional; ``memory`` absent: not asked,
    null: none)."""

    tool: str | None = None
    path: str | None = None
    visible: str | None = None
    interval: float | None = None
    at: WrittenNumber | None = None
    t: float | None = None
    memory: dict[str, object] | None | msgspec.UnsetType = msgspec.UNSET


@dataclass(frozen=True)
class DevicesHeader:
    """The first line of the wrapper's ``.devices`` (a JSON object, :mod:`.podwrap`): the ``tool``
    (``nvidia-smi``, ``npu-smi``), its ``path`` in the container (None: not on PATH), the ``visible`` devices
    variable (``NVIDIA_VISIBLE_DEVICES``/``ASCEND_VISIBLE_DEVICES``), the sampling ``interval`` (s), the epoch
    ``at`` and monotonic ``t`` it began at, and (``npu-smi``) ``memory``: per NPU id the ``[exit code, stdout,
    stderr]`` of its ``info -t memory`` (None: not asked); ``problem``: why the header was not read (a field of
    another JSON type, named; its fields are then all unknown). A field absent or null reads None."""

    tool: str
    path: str | None
    visible: str
    interval: float | None
    at: float | None
    t: float
    memory: dict[str, object] | None
    problem: str | None = None

    @classmethod
    def parse(cls, line: str) -> DevicesHeader:
        """The header of ``line`` (not a JSON object: every field unknown, the tool ``nvidia-smi``)."""
        head, problem = _header(line, _DevicesHead, ".devices")
        memory = None if head.memory is msgspec.UNSET else head.memory or {}
        return cls(tool=head.tool or "nvidia-smi", path=head.path or None, visible=head.visible or "",
                   interval=head.interval, at=head.at, t=head.t or 0.0, memory=memory, problem=problem)


@dataclass(frozen=True)
class ToolAnswer:
    """One ``nvidia-smi`` sample line of the wrapper's ``.devices`` (:mod:`.podwrap`): ``[monotonic s, exit code,
    stdout, stderr tail]``. ``at`` (s) and ``out`` are None when not a number / not text (needed only to read an
    answer that exited 0); ``err`` as text."""

    at: float | None
    rc: object
    out: str | None
    err: str

    @classmethod
    def parse(cls, line: str) -> ToolAnswer | None:
        """The answer of ``line``; None for a line that is not a JSON list of four (the reader skips it)."""
        try:
            got = json.loads(line)
        except ValueError:
            return None
        if not isinstance(got, list) or len(got) != 4:
            return None
        at, rc, out, err = got
        return cls(_float(at), rc, out if isinstance(out, str) else None, str(err))


def add_devices(usage: UsageRecord, text: str) -> None:
    """Add the devices the wrapper's ``.devices`` text sampled (``nvidia-smi --query-gpu … --format=csv,
    noheader,nounits``: one line per device, :data:`DEVICE_FIELDS`) to ``usage`` (a ``model.usage`` record):
    each device's series in ``devices`` with ``source`` ``nvidia-smi``, only the devices allocated to the
    container (the UUIDs of ``NVIDIA_VISIBLE_DEVICES`` when it lists them), and ``device_sampling``: the
    tool's source, interval, sample count, errors, or why nothing could be sampled (never 0)."""
    lines = text.strip().splitlines()
    head = DevicesHeader.parse(lines[0])
    tool = head.tool
    if tool == "npu-smi":
        add_npu_devices(usage, head, lines[1:])
        return
    visible = head.visible
    allocated = {v.strip() for v in visible.split(",") if v.strip().startswith("GPU-")}
    names: dict[str, DeviceFacts] = {}
    sampler = Sampler(Source(tool, ""), float(head.interval or usage["interval_s"] or SAMPLE_INTERVAL_S))
    t0 = head.t
    for line in lines[1:]:
        answer = ToolAnswer.parse(line)
        if answer is None:
            continue
        if answer.rc != 0:
            if len(sampler.errors) < 5:
                sampler.errors.append(f"{tool} exited {answer.rc}: {answer.err.strip()[-200:]}")
            continue
        since = None if answer.at is None else _since(answer.at, t0)
        if since is None or answer.out is None:
            continue
        reading: dict[str, tuple[float | None, float | None]] = {}
        for row in answer.out.strip().splitlines():
            cells = [c.strip() for c in row.split(",")]
            if len(cells) != len(DEVICE_FIELDS):
                if len(sampler.errors) < 5:
                    sampler.errors.append(f"{tool} answered a line of {len(cells)} fields, not "
                                          f"{len(DEVICE_FIELDS)}: {row[:120]!r}")
                continue
            uuid = cells[1]
            if allocated and uuid not in allocated:
                continue
            names[uuid] = {"name": cells[2], "memory_total_mib": _number(cells[4]), "source": tool}
            reading[uuid] = (_number(cells[3]), _number(cells[5]))
        _append(sampler, since, reading)
    scope = (f"{tool} --query-gpu inside the container, every {sampler.interval_s:g} s: the devices allocated to it "
             f"(NVIDIA_VISIBLE_DEVICES={visible or 'unset'})")
    why = ((head.problem or f"{tool} is not on PATH in the container") if not head.path else
           None if sampler.readings else "no sample could be read: " + ("; ".join(sampler.errors) or "no answer"))
    sampler.source = Source(tool, scope, names, read=(lambda: {}) if why is None else None, unavailable=why)
    sampler.started_at = _iso(head.at)
    _merge(usage, sampler.result())


def _append(sampler: Sampler, t_s: float, reading: dict[str, tuple[float | None, float | None]]) -> None:
    """Add ``reading`` at ``t_s`` to ``sampler``: merged into the last sample when it has that time (the lines of
    one ``nvidia-smi -lms`` block come one by one), nothing when empty."""
    if reading and sampler.times and sampler.times[-1] == t_s:
        sampler.readings[-1].update(reading)
    elif reading:
        sampler.times.append(t_s)
        sampler.readings.append(reading)


def add_npu_devices(usage: UsageRecord, head: DevicesHeader, lines: list[str]) -> None:
    """:func:`add_devices` for the wrapper's ``npu-smi`` samples (``head``: the ``.devices`` header, ``lines``:
    its sample lines, see :mod:`.podwrap`): per NPU of ``ASCEND_VISIBLE_DEVICES``, HBM used MiB = ``HBM Usage
    Rate(%)`` × ``HBM Capacity(MB)`` / 100 and utilisation = ``Aicore Usage Rate(%)`` of ``npu-smi info -t
    usages -i N`` (key/value output, :func:`~pytest_hetero.probes.ascend_kv.parse_npu_usage`), the capacity from
    ``info -t memory -i N`` (read once), else from ``-t usages``."""
    from pytest_hetero.probes.ascend_kv import parse_npu_usage

    tool, visible = "npu-smi", head.visible
    errors: list[str] = []
    capacity: dict[str, float | None] = {}
    for npu, got in (head.memory or {}).items():
        if isinstance(got, list) and len(got) == 3 and got[0] == 0:
            capacity[npu] = parse_npu_usage(str(got[1])).hbm_capacity_mb
        elif isinstance(got, list) and len(got) == 3 and len(errors) < 5:
            errors.append(f"npu-smi info -t memory -i {npu} exited {got[0]}: {str(got[2]).strip()[-200:]}")
    names: dict[str, DeviceFacts] = {}
    sampler = Sampler(Source(tool, ""), float(head.interval or usage["interval_s"] or SAMPLE_INTERVAL_S))
    t0 = head.t
    for line in lines:
        try:
            at, per = json.loads(line)
            at = float(at)
        except (ValueError, TypeError):
            continue
        if per and not isinstance(per, dict):  # not the {npu id: answer} podwrap writes: skipped as unreadable
            continue
        reading: dict[str, tuple[float | None, float | None]] = {}
        for npu, got in (per or {}).items():
            rc, out, err = got if isinstance(got, list) and len(got) == 3 else (None, "", "unreadable")
            if rc != 0:
                if len(errors) < 5:
                    errors.append(f"npu-smi info -t usages -i {npu} exited {rc}: {str(err).strip()[-200:]}")
                continue
            kv = parse_npu_usage(str(out))
            total = capacity.get(npu) or kv.hbm_capacity_mb
            rate = kv.hbm_rate_pct
            names[f"npu{npu}"] = {"name": f"NPU {npu}", "memory_total_mib": total, "source": tool}
            reading[f"npu{npu}"] = (None if rate is None or total is None else round(rate * total / 100.0, 1),
                                    kv.aicore_rate_pct)
        since = _since(at, t0)
        if reading and since is not None:
            sampler.times.append(since)
            sampler.readings.append(reading)
    sampler.errors = errors
    scope = (f"npu-smi info -t usages -i N inside the container, every {sampler.interval_s:g} s: the NPUs allocated "
             f"to it (ASCEND_VISIBLE_DEVICES={visible or 'unset'}); HBM used = HBM Usage Rate × HBM Capacity")
    why = ((head.problem or "npu-smi is not on PATH in the container") if not head.path else
           "ASCEND_VISIBLE_DEVICES names no NPU in the container" if head.memory is not None and not head.memory else
           None if sampler.readings else "no sample could be read: " + ("; ".join(errors) or "no answer"))
    sampler.source = Source(tool, scope, names, read=(lambda: {}) if why is None else None, unavailable=why)
    sampler.started_at = _iso(head.at)
    _merge(usage, sampler.result())


def _merge(usage: UsageRecord, got: UsageRecord) -> None:
    """Add the devices a device tool sampled (``got``) to ``usage``, and how it sampled them (``device_sampling``)."""
    usage["devices"] = [*usage["devices"], *got["devices"]]
    usage["device_sampling"] = {"source": got["source"], "scope": got["scope"], "interval_s": got["interval_s"],
                                "available": got["available"], "unavailable": got["unavailable"],
                                "samples": got["samples"], "errors": got["errors"]}


def _since(at: float, t0: float) -> float | None:
    """Seconds from the header's monotonic ``t0`` to a sample's ``at`` (ms resolution); None when that is no finite
    number (the workload writes both: ``1e308`` after ``-1e308``, or a JSON ``Infinity``): the sample is then skipped
    as an unreadable one, since the journal would write such a time as null, which ``t_s`` (numbers) does not
    hold."""
    since = round(at - t0, 3)
    return since if math.isfinite(since) else None


def _float(value: object) -> float | None:
    """``float(value)`` of a number or numeric text as JSON holds it (the wrapper writes numbers); None for
    anything else."""
    if not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _text_or_empty(*values: object) -> bool:
    """True when every value is text or empty (falsy: "", null, 0), as a sample's text fields are."""
    return all(isinstance(value, str) or not value for value in values)


def _number(text: str) -> float | None:
    """A number of an ``nvidia-smi`` CSV cell; None for ``[N/A]``, ``[Not Supported]`` and the like."""
    try:
        return float(text)
    except ValueError:
        return None


resolve(__name__)
