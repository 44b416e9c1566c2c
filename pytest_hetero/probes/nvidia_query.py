"""Reader for the text form of ``nvidia-smi -q`` (``-q -i N``, ``-q -d MEMORY,PERFORMANCE,...``).

Source format (``nvidia-smi`` man page, "-q, --query"; drivers 450 … 6xx): a ``==============NVSMI
LOG==============`` banner, top-level ``Key : Value`` lines (Timestamp, Driver Version, CUDA Version,
Attached GPUs; vGPU host drivers add a ``vGPU Driver Capability`` section), then one ``GPU
<bus id>`` section per GPU whose fields nest by 4-space indentation. Section names changed over
driver branches and are all read: ``Clocks Throttle Reasons`` (≤ 525) / ``Clocks Event Reasons``
(≥ 530), ``Ecc Mode`` / ``ECC Mode``, ``Power Readings`` with ``Power Limit`` (≤ 525) / ``GPU Power
Readings`` with ``Current Power Limit`` (≥ 530), ``Power Draw`` / ``Average Power Draw`` /
``Instant Power Draw`` (≥ 550). ``-d`` filters print only some sections; missing ones read as None.
``Attached GPUs`` is what the driver reports and may exceed the GPU sections printed (``-i``).
"""

from __future__ import annotations

import re
from typing import Union

from pytest_hetero.probes import _values as v
from pytest_hetero.probes.model import Device, DeviceProcess, Inventory
from pytest_hetero.probes.nvidia_common import HealthInputs, verdict

Tree = dict[str, Union[str, "Tree"]]
"""A parsed section: field name -> printed value, or -> nested section."""

_GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_KV = re.compile(r"^(?P<key>.*?\S)\s+:(?:\s(?P<value>.*))?$")


def _tree(lines: list[str]) -> tuple[Tree, list[tuple[str, Tree]]]:
    """Return (header fields, [(bus id, gpu section)]) from the lines after the banner."""
    header: Tree = {}
    gpus: list[tuple[str, Tree]] = []
    stack: list[tuple[int, Tree]] = [(-1, header)]
    for line in lines:
        if not line.strip() or "NVSMI LOG" in line:
            continue
        indent = len(line) - len(line.lstrip(" \t"))
        body = line.strip()
        gpu = _GPU.match(body) if indent == 0 else None
        if gpu:
            section: Tree = {}
            gpus.append((gpu.group(1), section))
            stack = [(-1, header), (0, section)]
            continue
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        kv = _KV.match(body)
        if kv:
            key = kv.group("key")
            if key not in parent:
                parent[key] = (kv.group("value") or "").strip()
            continue
        child: Tree = {}
        name = body.rstrip(":").strip()
        if name in parent and isinstance(parent[name], dict):
            name = f"{name} #{sum(1 for k in parent if k.startswith(name))}"
        parent[name] = child
        stack.append((indent, child))
    return header, gpus


def _get(tree: Tree, *path: str) -> str | None:
    """Value at ``path``; each step may list alternatives separated by ``|`` (old|new section names)."""
    node: str | Tree = tree
    for step in path:
        if not isinstance(node, dict):
            return None
        found: str | Tree | None = None
        for name in step.split("|"):
            if name in node:
                found = node[name]
                break
        if found is None:
            return None
        node = found
    return node if isinstance(node, str) else None


def _section(tree: Tree, *names: str) -> Tree:
    for name in names:
        found = tree.get(name)
        if isinstance(found, dict):
            return found
    return {}


def ecc_counters(tree: Tree) -> dict[str, int | str | None]:
    """Every ECC counter of one GPU's ``ECC Errors`` section as ``ecc_<scope>_<counter>`` (snake case):
    R510+ ``SRAM Correctable``/``DRAM Uncorrectable``…, older ``Single Bit``/``Double Bit`` sub-sections by their
    ``Total`` (``ecc_volatile_single_bit_total``); ``N/A`` kept as None; plus the remap histogram's
    ``remap_histogram_<level>`` bank counts (``remap_histogram_max_banks`` for Max, whose text is kept apart)."""
    out: dict[str, int | str | None] = {}
    ecc = _section(tree, "ECC Errors")
    for scope in ("Volatile", "Aggregate"):
        for key, value in _section(ecc, scope).items():
            name = f"ecc_{scope.lower()}_" + re.sub(r"\W+", "_", key.strip()).strip("_").lower()
            if isinstance(value, str):
                out[name] = v.integer(value)
            elif isinstance(value, dict) and "Total" in value:
                out[name + "_total"] = v.integer(str(value["Total"]))
    histogram = _section(_section(tree, "Remapped Rows"), "Bank Remap Availability Histogram")
    for level, value in histogram.items():
        if isinstance(value, str):
            out[f"remap_histogram_{level.lower()}" + ("_banks" if level == "Max" else "")] = v.integer(value)
    return out


def _uncorrectable(tree: Tree) -> int | None:
    volatile = _section(_section(tree, "ECC Errors"), "Volatile")
    if not volatile:
        return None
    total: int | None = None
    for key, value in volatile.items():
        if isinstance(value, str) and ("Uncorrectable" in key or key.startswith("Double Bit")):
            number = v.integer(value)
            if number is not None:
                total = (total or 0) + number
        elif isinstance(value, dict) and key.startswith("Double Bit"):
            number = v.integer(str(value.get("Total", "")))
            if number is not None:
                total = (total or 0) + number
    return total


def _active(tree: Tree, *names: str) -> list[str]:
    section = _section(tree, *names)
    out: list[str] = []
    for key, value in section.items():
        if isinstance(value, str) and value.strip() == "Active":
            out.append(key)
        elif isinstance(value, dict):
            out.extend(k for k, sub in value.items() if isinstance(sub, str) and sub.strip() == "Active")
    return out


def _device(position: int, bus: str, gpu: Tree) -> Device:
    errors: list[str] = []
    uncorrectable = _uncorrectable(gpu)
    pending = v.yes(_get(gpu, "Remapped Rows", "Pending"))
    failure = v.yes(_get(gpu, "Remapped Rows", "Remapping Failure Occurred"))
    retired_pending = v.yes(_get(gpu, "Retired Pages", "Pending Page Blacklist|Pending Page Retirement"))
    reset = v.yes(_get(gpu, "GPU Reset Status", "Reset Required"))
    for key, value in gpu.items():
        if isinstance(value, str) and v.field_error(value):
            errors.append(f"{key} reads {value.strip()}")
    health, raw, reasons = verdict(
        HealthInputs(
            ecc_volatile_uncorrectable=uncorrectable,
            retired_pages_pending=retired_pending,
            remapped_rows_pending=pending,
            remapped_rows_failure=failure,
            field_errors=tuple(errors),
            reset_required=reset,
        )
    )
    power = _section(gpu, "GPU Power Readings", "Power Readings")
    draw = _get(power, "Power Draw|Average Power Draw|Instant Power Draw")
    limit = _get(power, "Current Power Limit|Power Limit|Enforced Power Limit")
    counters = _section(gpu, "Clocks Event Reasons Counters", "Clocks Throttle Reasons Counters")
    processes: list[DeviceProcess] = []
    procs = gpu.get("Processes")
    if isinstance(procs, dict):
        for key, value in procs.items():
            if isinstance(value, dict) or key.startswith("Process ID"):
                entry = value if isinstance(value, dict) else {}
                processes.append(
                    DeviceProcess(
                        pid=v.integer(_get(entry, "Process ID") or (value if isinstance(value, str) else None)),
                        type=_get(entry, "Type"),
                        name=_get(entry, "Name"),
                        used_memory_mib=v.mib(_get(entry, "Used GPU Memory")),
                    )
                )
    index = v.integer(_get(gpu, "Minor Number"))
    return Device(
        vendor="nvidia",
        index=index if index is not None else position,
        name=v.text_or_none(_get(gpu, "Product Name")),
        uuid=v.text_or_none(_get(gpu, "GPU UUID")),
        serial=v.text_or_none(_get(gpu, "Serial Number")),
        bus_id=bus,
        memory_total_mib=v.mib(_get(gpu, "FB Memory Usage", "Total")),
        memory_used_mib=v.mib(_get(gpu, "FB Memory Usage", "Used")),
        health=health,
        health_raw=raw,
        temperature_c=v.number(_get(gpu, "Temperature", "GPU Current Temp")),
        power_w=v.number(draw),
        power_limit_w=v.number(limit),
        utilisation_pct=v.number(_get(gpu, "Utilization", "Gpu")),
        processes=tuple(processes),
        errors=reasons,
        extra={
            "brand": v.text_or_none(_get(gpu, "Product Brand")),
            "architecture": v.text_or_none(_get(gpu, "Product Architecture")),
            "display_mode": v.text_or_none(_get(gpu, "Display Mode")),
            "persistence_mode": v.text_or_none(_get(gpu, "Persistence Mode")),
            "mig_mode_current": v.text_or_none(_get(gpu, "MIG Mode", "Current")),
            "mig_mode_pending": v.text_or_none(_get(gpu, "MIG Mode", "Pending")),
            "module_id": v.integer(_get(gpu, "Module ID")),
            "gsp_firmware": v.text_or_none(_get(gpu, "GSP Firmware Version")),
            "virtualization_mode": v.text_or_none(
                _get(gpu, "GPU Virtualization Mode", "Virtualization Mode")),
            "pcie_generation": v.integer(_get(gpu, "PCI", "GPU Link Info", "PCIe Generation", "Current")),
            "pcie_width": v.text_or_none(_get(gpu, "PCI", "GPU Link Info", "Link Width", "Current")),
            "performance_state": v.text_or_none(_get(gpu, "Performance State")),
            "memory_reserved_mib": v.mib(_get(gpu, "FB Memory Usage", "Reserved")),
            "memory_free_mib": v.mib(_get(gpu, "FB Memory Usage", "Free")),
            "bar1_total_mib": v.mib(_get(gpu, "BAR1 Memory Usage", "Total")),
            "ecc_mode_current": v.text_or_none(_get(gpu, "ECC Mode|Ecc Mode", "Current")),
            "ecc_volatile_uncorrectable": uncorrectable,
            "retired_pages_pending": retired_pending,
            "remapped_rows_correctable": v.integer(_get(gpu, "Remapped Rows", "Correctable Error")),
            "remapped_rows_uncorrectable": v.integer(_get(gpu, "Remapped Rows", "Uncorrectable Error")),
            "remapped_rows_pending": pending,
            "remapped_rows_failure": failure,
            "remap_histogram_max": v.text_or_none(
                _get(gpu, "Remapped Rows", "Bank Remap Availability Histogram", "Max")),
            **ecc_counters(gpu),
            "reset_required": reset,
            "drain_and_reset_recommended": v.yes(_get(gpu, "GPU Reset Status", "Drain and Reset Recommended")),
            "memory_temperature_c": v.number(_get(gpu, "Temperature", "Memory Current Temp")),
            "fabric_state": v.text_or_none(_get(gpu, "Fabric", "State")),
            "fabric_status": v.text_or_none(_get(gpu, "Fabric", "Status")),
            "clock_event_reasons_active": _active(gpu, "Clocks Event Reasons", "Clocks Throttle Reasons"),
            "clock_event_counters_us": {k: v.integer(val) for k, val in counters.items() if isinstance(val, str)},
            "clocks_section": "Clocks Throttle Reasons" if "Clocks Throttle Reasons" in gpu else (
                "Clocks Event Reasons" if "Clocks Event Reasons" in gpu else None),
            "processes_printed": procs if isinstance(procs, str) else None,
        },
    )


def parse_nvidia_smi_query(text: str) -> Inventory:
    """Parse ``nvidia-smi -q`` text into an :class:`Inventory` (source ``nvidia-smi-query``).

    One Device per ``GPU <bus id>`` section (``index`` is the Minor Number when printed, else the
    section's position); ``attached_count`` is ``Attached GPUs`` as printed. ``extra`` keeps header
    facts (``vgpu_driver_capability``). Health uses :func:`~pytest_hetero.probes.nvidia_common.verdict`
    (pending row remap, remap failure, retired pages pending, volatile uncorrectable ECC, reset
    required are critical). Never raises: text without the banner gives an Inventory with no devices
    and a warning.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "NVSMI LOG" in line), None)
    warnings: list[str] = []
    if start is None:
        warnings.append("no '==NVSMI LOG==' banner: not nvidia-smi -q output")
        start = -1
    header, gpus = _tree(lines[start + 1 :])
    devices = tuple(_device(i, bus, gpu) for i, (bus, gpu) in enumerate(gpus))
    attached = v.integer(_get(header, "Attached GPUs"))
    if attached is not None and attached != len(devices):
        warnings.append(f"Attached GPUs reads {attached} but {len(devices)} GPU section(s) printed")
    cuda = _get(header, "CUDA Version")
    capability = _section(header, "vGPU Driver Capability")
    return Inventory(
        vendor="nvidia",
        source="nvidia-smi-query",
        timestamp=v.text_or_none(_get(header, "Timestamp")),
        driver_version=v.text_or_none(_get(header, "Driver Version")),
        cuda_version=None if cuda is None or cuda.strip().lower() == "not found" else v.text_or_none(cuda),
        attached_count=attached,
        devices=devices,
        warnings=tuple(warnings),
        raw=text,
        extra={
            "cuda_version_printed": cuda,
            "vgpu_driver_capability": {k: val for k, val in capability.items() if isinstance(val, str)},
        },
    )
