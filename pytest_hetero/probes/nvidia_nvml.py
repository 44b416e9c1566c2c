"""NVML reader through ``nvidia-ml-py`` (``import pynvml``), the library nvidia-smi itself uses.

Each NVML query is asked separately: ``NVML_ERROR_NOT_SUPPORTED`` reads as ``None`` (not
reported), any other NVML error becomes a device error (the field read failed), and a GPU
whose handle cannot be opened (fallen off the bus, ``NVML_ERROR_GPU_IS_LOST``) becomes a
``critical`` device with only its index.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any

from pytest_hetero.probes.model import Device, Inventory, Partition
from pytest_hetero.probes.nvidia_common import HealthInputs, verdict

_MIB = 1024 * 1024


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class _Reader:
    """Calls NVML functions, turning NOT_SUPPORTED into None and other errors into notes."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.errors: list[str] = []

    def __call__(self, name: str, *args: Any) -> Any:
        fn: Callable[..., Any] | None = getattr(self.nvml, name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except self.nvml.NVMLError as exc:
            if getattr(exc, "value", None) == getattr(self.nvml, "NVML_ERROR_NOT_SUPPORTED", -1):
                return None
            self.errors.append(f"{name}: {exc}")
            return None


def _partitions(nvml: Any, read: _Reader, handle: Any) -> tuple[Partition, ...]:
    count = read("nvmlDeviceGetMaxMigDeviceCount", handle) or 0
    found: list[Partition] = []
    for j in range(count):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, j)
        except nvml.NVMLError:
            continue
        name = _text(read("nvmlDeviceGetName", mig)) or ""
        profile = re.search(r"MIG (\S+)$", name)
        mem = read("nvmlDeviceGetMemoryInfo", mig)
        found.append(
            Partition(
                kind="mig",
                index=j,
                profile=profile.group(1) if profile else None,
                gpu_instance_id=read("nvmlDeviceGetGpuInstanceId", mig),
                compute_instance_id=read("nvmlDeviceGetComputeInstanceId", mig),
                uuid=_text(read("nvmlDeviceGetUUID", mig)),
                memory_total_mib=mem.total // _MIB if mem else None,
                memory_used_mib=mem.used // _MIB if mem else None,
            )
        )
    return tuple(found)


def _device(nvml: Any, index: int) -> Device:
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
    except nvml.NVMLError as exc:
        return Device(
            vendor="nvidia",
            index=index,
            health="critical",
            health_raw=str(exc),
            errors=(f"Unable to determine the device handle: {exc}",),
        )
    read = _Reader(nvml)
    pci = read("nvmlDeviceGetPciInfo", handle)
    mem = read("nvmlDeviceGetMemoryInfo", handle)
    util = read("nvmlDeviceGetUtilizationRates", handle)
    power = read("nvmlDeviceGetPowerUsage", handle)
    limit = read("nvmlDeviceGetEnforcedPowerLimit", handle)
    remap = read("nvmlDeviceGetRemappedRows", handle)
    mig_mode = read("nvmlDeviceGetMigMode", handle)
    ecc = read(
        "nvmlDeviceGetTotalEccErrors",
        handle,
        getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
        getattr(nvml, "NVML_VOLATILE_ECC", 0),
    )
    pending = read("nvmlDeviceGetRetiredPagesPendingStatus", handle)
    temp = read("nvmlDeviceGetTemperature", handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
    inputs = HealthInputs(
        ecc_volatile_uncorrectable=ecc,
        retired_pages_pending=None if pending is None else bool(pending),
        remapped_rows_pending=bool(remap[2]) if remap else None,
        remapped_rows_failure=bool(remap[3]) if remap else None,
        field_errors=tuple(read.errors),
    )
    health, raw, reasons = verdict(inputs)
    return Device(
        vendor="nvidia",
        index=index,
        name=_text(read("nvmlDeviceGetName", handle)),
        uuid=_text(read("nvmlDeviceGetUUID", handle)),
        serial=_text(read("nvmlDeviceGetSerial", handle)),
        bus_id=_text(getattr(pci, "busId", None)) if pci else None,
        memory_total_mib=mem.total // _MIB if mem else None,
        memory_used_mib=mem.used // _MIB if mem else None,
        health=health,
        health_raw=raw,
        temperature_c=None if temp is None else float(temp),
        power_w=None if power is None else power / 1000.0,
        power_limit_w=None if limit is None else limit / 1000.0,
        utilisation_pct=None if util is None else float(util.gpu),
        partitions=_partitions(nvml, read, handle) if mig_mode and mig_mode[0] else (),
        errors=reasons,
        extra={
            "mig_mode_current": None if not mig_mode else ("Enabled" if mig_mode[0] else "Disabled"),
            "ecc_volatile_uncorrectable": ecc,
            "memory_util_pct": None if util is None else float(util.memory),
        },
    )


def _no_devices(count: int | None, errors: list[str]) -> str:
    if count is None:
        failed = next((e for e in errors if e.startswith("nvmlDeviceGetCount")), "nvmlDeviceGetCount failed")
        return f"NVML could not count the GPUs ({failed})"
    return "no NVIDIA devices found (NVML count 0)"


def collect_nvml(module: str = "pynvml") -> tuple[Inventory | None, str | None]:
    """Read all GPUs through NVML; returns ``(inventory, None)`` or ``(None, why not)``.

    ``why not`` is e.g. ``"pynvml not importable"`` or NVML's own text for ``nvmlInit``
    failing (``"Driver Not Loaded"``, ``"NVML Shared Library Not Found"``). Memory in MiB,
    power in W (NVML reports mW), temperature in °C.
    """
    try:
        nvml = importlib.import_module(module)
    except ImportError as exc:
        return None, f"{module} not importable ({exc})"
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError, or OSError from a broken libnvidia-ml
        return None, f"nvmlInit failed: {exc}"
    try:
        read = _Reader(nvml)
        count = read("nvmlDeviceGetCount")
        cuda = read("nvmlSystemGetCudaDriverVersion")
        devices = tuple(_device(nvml, i) for i in range(count or 0))
        return Inventory(
            vendor="nvidia",
            source="nvml",
            driver_version=_text(read("nvmlSystemGetDriverVersion")),
            cuda_version=f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else None,
            tool_version=_text(read("nvmlSystemGetNVMLVersion")),
            attached_count=count,
            devices=devices,
            global_errors=() if count else (_no_devices(count, read.errors),),
            warnings=tuple(read.errors),
        ), None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001, S110 - a failed shutdown does not change what was read
            pass
