"""Reader for the plain ``nvidia-smi`` table (the default screen, no arguments).

Source format: the box-drawn table of ``nvidia-smi`` from drivers 4xx to 6xx: a header with
``Driver Version``/``CUDA Version`` (or, since the R6xx split, ``KMD Version``/``CUDA UMD Version``),
one 2- or 3-line block per GPU (names truncated to ~20 characters with ``...``), an optional
``MIG devices`` table and an optional ``Processes`` table (with or without GI/CI columns).
"""

from __future__ import annotations

import re

from pytest_hetero.errors import ParseError
from pytest_hetero.probes import _values as v
from pytest_hetero.probes.model import Device, DeviceProcess, Inventory, Partition
from pytest_hetero.probes.nvidia_common import HealthInputs, global_errors, lost_gpus, verdict

_HEADER = re.compile(r"NVIDIA-SMI\s+(?P<smi>\S+)")
_DRIVER = re.compile(r"(?:Driver|KMD) Version:\s*(?P<v>\S+)")
_CUDA = re.compile(r"CUDA(?: UMD)? Version:\s*(?P<v>\S+)")
_STAMP = re.compile(r"^\w{3} \w{3} +\d{1,2} \d\d:\d\d:\d\d \d{4}\s*$")
_GPU_CELL = re.compile(r"^\s*(?P<idx>\d+)\s+(?P<name>.*?)(?:\s+(?P<pm>On|Off|N/A|WDDM|TCC))?\s*$")
_PWR_CELL = re.compile(
    r"^\s*(?P<fan>\S+)\s+(?P<temp>\S+)\s+(?P<perf>\S+)\s+(?P<draw>\S+)\s*/\s*(?P<cap>\S+)\s*$"
)
_BUS = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]")
GPU_ROW = re.compile(r"^\s*\|\s*\d+\s+\S.*?\|\s*[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"
                     r"\s+(?:On|Off|N/A)\s*\|")
"""The first row of a GPU in the plain table (``|   1  Tesla V100-PCIE...  On   | 00008ED0:00:00.0 Off |``): an
8-hex-digit PCI domain, which npu-smi's 4-digit ``0000:9D:00.0`` never has."""
_MIG_CELL = re.compile(r"^\s*(?P<gpu>\d+)\s+(?P<gi>\d+|N/A)\s+(?P<ci>\d+|N/A)\s+(?P<dev>\d+)\s*$")


def _cells(line: str) -> list[str]:
    return line.strip().strip("|").split("|")


def _blocks(lines: list[str]) -> tuple[list[list[list[str]]], bool]:
    """Split table rows after the ``|===`` line into blocks between ``+---`` borders."""
    blocks: list[list[list[str]]] = []
    current: list[list[str]] = []
    closed = True
    for line in lines:
        stripped = line.strip()
        if not stripped or "Processes:" in stripped or "MIG devices:" in stripped:
            break
        if stripped.startswith(("+", "|=")):
            if current:
                blocks.append(current)
            current, closed = [], True
        elif stripped.startswith("|"):
            current.append(_cells(stripped))
            closed = False
        else:
            break
    if current:
        blocks.append(current)
    return blocks, closed


def _section(lines: list[str], marker: str) -> list[str]:
    """Return the data lines of the table whose header contains ``marker`` (after its ``|===``)."""
    for i, line in enumerate(lines):
        if marker in line:
            for j in range(i, len(lines)):
                if lines[j].strip().startswith("|="):
                    return lines[j + 1 :]
            return []
    return []


def _gpu(block: list[list[str]], warnings: list[str]) -> Device | None:
    first = _GPU_CELL.match(block[0][0]) if block[0] else None
    if first is None or len(block[0]) < 2 or not _BUS.search(block[0][1]):
        return None
    idx = int(first.group("idx"))
    errors: list[str] = []

    def cell(row: int, col: int) -> str:
        try:
            return block[row][col].strip()
        except IndexError:
            return ""

    def read(label: str, text: str) -> str:
        err = v.field_error(text)
        if err:
            errors.append(f"{label} reads {err}")
        return text

    bus, _, disp = cell(0, 1).partition(" ")
    ecc_text = read("volatile uncorrectable ECC", cell(0, 2))
    pwr = _PWR_CELL.match(cell(1, 0))
    fan = read("fan", pwr.group("fan")) if pwr else None
    temp = read("temperature", pwr.group("temp")) if pwr else None
    draw = read("power draw", pwr.group("draw")) if pwr else None
    cap = read("power cap", pwr.group("cap")) if pwr else None
    used_text, _, total_text = read("memory usage", cell(1, 1)).partition("/")
    util_text, _, compute = cell(1, 2).partition(" ")
    read("GPU utilisation", util_text)
    name = first.group("name").strip() or None
    if name and v.field_error(name):
        errors.append(f"name reads {name}")
        name = None
    truncated = bool(name and name.endswith("..."))
    if truncated:
        warnings.append(f"GPU {idx} name truncated by nvidia-smi: '{name}'")
    ecc = v.integer(ecc_text) if re.fullmatch(r"\d+", ecc_text) else None
    health, raw, reasons = verdict(HealthInputs(ecc_volatile_uncorrectable=ecc, field_errors=tuple(errors)))
    return Device(
        vendor="nvidia",
        index=idx,
        name=name,
        bus_id=v.text_or_none(bus),
        memory_total_mib=v.mib(total_text),
        memory_used_mib=v.mib(used_text),
        health=health,
        health_raw=raw,
        temperature_c=v.number(temp),
        power_w=v.number(draw),
        power_limit_w=v.number(cap),
        utilisation_pct=v.number(util_text),
        errors=reasons,
        extra={
            "persistence_mode": None if first.group("pm") in ("WDDM", "TCC") else first.group("pm"),
            "driver_model": first.group("pm") if first.group("pm") in ("WDDM", "TCC") else None,
            "display_active": v.text_or_none(disp),
            "fan_speed_pct": v.number(fan),
            "performance_state": v.text_or_none(pwr.group("perf") if pwr else None),
            "compute_mode": v.text_or_none(compute),
            "mig_mode_current": v.text_or_none(cell(2, 2)),
            "ecc_column": ecc_text or None,
            "ecc_volatile_uncorrectable": ecc,
            "name_truncated": truncated,
        },
    )


def _partitions(lines: list[str]) -> dict[int, list[Partition]]:
    found: dict[int, list[Partition]] = {}
    for block in _blocks(lines)[0]:
        m = _MIG_CELL.match(block[0][0]) if block and block[0] else None
        if m is None:
            continue
        mem = block[0][1] if len(block[0]) > 1 else ""
        used, _, total = mem.partition("/")
        sm_ecc = (block[0][2] if len(block[0]) > 2 else "").split()
        found.setdefault(int(m.group("gpu")), []).append(
            Partition(
                kind="mig",
                index=int(m.group("dev")),
                gpu_instance_id=v.integer(m.group("gi")),
                compute_instance_id=v.integer(m.group("ci")),
                memory_total_mib=v.mib(total),
                memory_used_mib=v.mib(used),
                multiprocessors=v.integer(sm_ecc[0]) if sm_ecc else None,
                ecc_uncorrectable=v.integer(sm_ecc[1]) if len(sm_ecc) > 1 else None,
            )
        )
    return found


def _processes(lines: list[str], header: str) -> dict[int, list[DeviceProcess]]:
    with_gi = " GI " in header or header.rstrip().endswith("GI")
    found: dict[int, list[DeviceProcess]] = {}
    for block in _blocks(lines)[0]:
        for row in block:
            tokens = " ".join(row).split()
            if len(tokens) < 4 or not tokens[0].isdecimal():
                continue
            rest = tokens[3:] if with_gi else tokens[1:]
            gi, ci = (tokens[1], tokens[2]) if with_gi else (None, None)
            if len(rest) < 3:
                continue
            found.setdefault(int(tokens[0]), []).append(
                DeviceProcess(
                    pid=v.integer(rest[0]),
                    type=rest[1],
                    name=" ".join(rest[2:-1]) or None,
                    used_memory_mib=v.mib(rest[-1]),
                    gpu_instance_id=v.integer(gi),
                    compute_instance_id=v.integer(ci),
                )
            )
    return found


def parse_nvidia_smi_table(text: str) -> Inventory:
    """Parse plain ``nvidia-smi`` output into an :class:`Inventory` (source ``nvidia-smi-table``).

    Reads versions, every GPU block (index, name as printed, bus id, memory MiB, °C, W, %,
    volatile uncorrectable ECC), MIG devices and processes; "Unable to determine the device
    handle" lines become ``critical`` devices with ``index=None``. Raises :class:`ParseError`
    when ``text`` has neither an ``NVIDIA-SMI`` header nor a known nvidia-smi error message.
    """
    lines = text.splitlines()
    warnings: list[str] = []
    problems = global_errors(text)
    lost = lost_gpus(text)
    header = next((ln for ln in lines if _HEADER.search(ln)), None)
    fragment = next((i for i, ln in enumerate(lines) if GPU_ROW.match(ln)), None) if header is None else None
    if header is None and not problems and not lost and fragment is None:
        raise ParseError(
            "not nvidia-smi output: no 'NVIDIA-SMI <version>' header line",
            hint="expected the plain `nvidia-smi` table or `nvidia-smi -q -x` XML",
        )
    gpu_lines = _section(lines, "Disp.A")
    if fragment is not None and not gpu_lines:  # GPU rows pasted without the header (versions unknown)
        gpu_lines = lines[fragment - 1 if fragment and lines[fragment - 1].strip().startswith("+") else fragment:]
        warnings.append("GPU rows without the table header: tool, driver and CUDA versions were not printed")
    blocks, closed = _blocks(gpu_lines)
    if gpu_lines and not closed:
        warnings.append("output ends inside the GPU table (truncated)")
    mig = _partitions(_section(lines, "MIG devices"))
    proc_header = next((ln for ln in lines if "PID" in ln and "Type" in ln), "")
    procs = _processes(_section(lines, "Processes:"), proc_header)
    devices: list[Device] = []
    for block in blocks:
        dev = _gpu(block, warnings)
        if dev is None:
            warnings.append(f"unreadable GPU row: {'|'.join(block[0]).strip()[:80]}")
            continue
        devices.append(
            Device(
                **{
                    **dev.__dict__,
                    "partitions": tuple(mig.get(dev.index or 0, [])),
                    "processes": tuple(procs.get(dev.index or 0, [])),
                }
            )
        )
    for bus, why in lost:
        devices.append(
            Device(
                vendor="nvidia",
                index=None,
                bus_id=bus,
                health="critical",
                health_raw=why,
                errors=(f"Unable to determine the device handle: {why}",),
            )
        )
    header_at = next((i for i, ln in enumerate(lines) if _HEADER.search(ln)), 3)
    head = [ln.strip() for ln in lines[:header_at] if ln.strip()]
    first = next((ln for ln in head if _STAMP.match(ln)), head[0] if head else "")
    return Inventory(
        vendor="nvidia",
        source="nvidia-smi-table",
        timestamp=first if _STAMP.match(first) else None,
        tool_version=_match(_HEADER, header),
        driver_version=_match(_DRIVER, header),
        cuda_version=_match(_CUDA, header),
        devices=tuple(devices),
        global_errors=tuple(problems),
        warnings=tuple(warnings),
        raw=text,
        extra={"processes_reported": bool(_section(lines, "Processes:"))},
    )


def _match(pattern: re.Pattern[str], line: str | None) -> str | None:
    m = pattern.search(line or "")
    return v.text_or_none(m.group(m.lastgroup or 1)) if m else None
