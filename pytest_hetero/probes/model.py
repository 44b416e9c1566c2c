"""The shape every probe returns: an :class:`Inventory` of :class:`Device` records.

All records are frozen dataclasses that turn into plain JSON data with ``to_dict()``, so they
cross process boundaries and land in evidence bundles unchanged. Units are fixed: memory in
MiB, temperature in °C, power in W, utilisation in %. ``None`` always means "the tool did not
report it" (N/A, ERR!, missing field); a reported zero stays ``0``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypedDict

if TYPE_CHECKING:  # annotations only (postponed): no run-time dependency on typing_extensions on 3.10
    from typing import NotRequired

Health = Literal["ok", "warning", "critical", "unknown"]
"""Normalised device health: ``critical`` means the device must not receive work."""

HEALTH_ORDER: dict[Health, int] = {"ok": 0, "unknown": 1, "warning": 2, "critical": 3}
"""Severity rank of each :data:`Health` value (higher is worse)."""
Vendor = Literal["nvidia", "ascend", "cpu"]
"""The vendor of a probed device (the probe that read it)."""
DEVICE_KIND: dict[Vendor, str] = {"nvidia": "GPU", "ascend": "NPU", "cpu": "CPU"}
"""Vendor → what its devices are called in a label (:attr:`Device.label`)."""


def utc_now() -> str:
    """Return the current UTC time as ISO 8601 with seconds, e.g. ``2026-11-29T10:30:00Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Partition:
    """A slice of one device: a MIG instance (``kind="mig"``) or an Ascend vNPU (``kind="vnpu"``).

    ``profile`` is the vendor profile name (``"1g.10gb"``, ``"vir04"``) when the source names it,
    else ``None`` (nvidia-smi XML and tables do not). ``index`` is the MIG device index or vNPU id;
    ``gpu_instance_id``/``compute_instance_id`` are the MIG GI/CI ids. Memory in MiB. ``extra``
    holds vendor specifics (vNPU ``vgroup_id``, ``container_id``, ``status``).
    """

    kind: str
    index: int | None = None
    profile: str | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    uuid: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    multiprocessors: int | None = None
    ecc_uncorrectable: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> PartitionDict:
        """Return the partition as a JSON-ready dict with exactly the field names above."""
        return {"kind": self.kind, "index": self.index, "profile": self.profile,
                "gpu_instance_id": self.gpu_instance_id, "compute_instance_id": self.compute_instance_id,
                "uuid": self.uuid, "memory_total_mib": self.memory_total_mib, "memory_used_mib": self.memory_used_mib,
                "multiprocessors": self.multiprocessors, "ecc_uncorrectable": self.ecc_uncorrectable,
                "extra": _plain(self.extra)}


@dataclass(frozen=True)
class DeviceProcess:
    """A process holding device memory: ``pid``, ``name``, ``type`` (C/G/C+G), memory in MiB."""

    pid: int | None
    name: str | None = None
    type: str | None = None
    used_memory_mib: int | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    chip: int | None = None

    def to_dict(self) -> ProcessDict:
        """Return the process as a JSON-ready dict."""
        return {"pid": self.pid, "name": self.name, "type": self.type, "used_memory_mib": self.used_memory_mib,
                "gpu_instance_id": self.gpu_instance_id, "compute_instance_id": self.compute_instance_id,
                "chip": self.chip}


@dataclass(frozen=True)
class Device:
    """One accelerator (GPU, NPU chip) or CPU socket as the vendor tool reports it.

    ``index`` is the tool's device index (nvidia-smi ``GPU``, npu-smi logical ``Device`` id),
    ``None`` when the tool could not enumerate it (e.g. "Unable to determine the device handle").
    ``health`` is normalised; ``health_raw`` keeps the vendor's text (``"Warning"``, ``"Yes"``),
    and ``errors`` lists every reason that lowered health, in plain words.
    """

    vendor: Vendor
    index: int | None
    name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    bus_id: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    health: Health = "unknown"
    health_raw: str | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    utilisation_pct: float | None = None
    partitions: tuple[Partition, ...] = ()
    processes: tuple[DeviceProcess, ...] = ()
    errors: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """Return a short human name: ``GPU 00000000:3B:00.0`` / ``NPU 3`` style."""
        kind = DEVICE_KIND[self.vendor]
        ident = self.bus_id or (str(self.index) if self.index is not None else "?")
        return f"{kind} {ident}"

    def to_dict(self) -> DeviceDict:
        """Return the device as a JSON-ready dict (partitions/processes as lists of dicts)."""
        return {"vendor": self.vendor, "index": self.index, "name": self.name, "uuid": self.uuid,
                "serial": self.serial, "bus_id": self.bus_id, "memory_total_mib": self.memory_total_mib,
                "memory_used_mib": self.memory_used_mib, "health": self.health, "health_raw": self.health_raw,
                "temperature_c": self.temperature_c, "power_w": self.power_w, "power_limit_w": self.power_limit_w,
                "utilisation_pct": self.utilisation_pct, "partitions": [p.to_dict() for p in self.partitions],
                "processes": [p.to_dict() for p in self.processes], "errors": list(self.errors),
                "extra": _plain(self.extra)}


@dataclass(frozen=True)
class Inventory:
    """What one probe saw on one host, plus the raw text it parsed (kept as an artifact).

    ``source`` names the reader: ``nvml``, ``nvidia-smi-xml``, ``nvidia-smi-table``, ``npu-smi``,
    ``proc``, ``kernel-log``, ``device-plugin-log`` or ``none`` (nothing could be run).
    ``attached_count`` is the count the tool itself declares (``attached_gpus``), which may
    disagree with ``len(devices)``. ``global_errors`` are host-level failures (no driver, no
    devices, critical Xid); ``warnings`` are parse warnings (unknown DTD, truncated output).
    """

    vendor: str
    source: str
    collected_at: str = field(default_factory=utc_now)
    tool_version: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    cann_version: str | None = None
    firmware_version: str | None = None
    timestamp: str | None = None
    attached_count: int | None = None
    devices: tuple[Device, ...] = ()
    global_errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    raw: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def healthy(self) -> bool:
        """True when no global error was found and no device is ``critical``."""
        return not self.global_errors and all(d.health != "critical" for d in self.devices)

    def unhealthy_devices(self) -> list[Device]:
        """Return the devices whose health is ``critical``, in device order."""
        return [d for d in self.devices if d.health == "critical"]

    def to_dict(self, *, include_raw: bool = True) -> InventoryDict:
        """Return the inventory as a JSON-ready dict; ``include_raw=False`` drops ``raw``."""
        data: InventoryDict = {
            "vendor": self.vendor, "source": self.source, "collected_at": self.collected_at,
            "tool_version": self.tool_version, "driver_version": self.driver_version,
            "cuda_version": self.cuda_version, "cann_version": self.cann_version,
            "firmware_version": self.firmware_version, "timestamp": self.timestamp,
            "attached_count": self.attached_count, "devices": [d.to_dict() for d in self.devices],
            "global_errors": list(self.global_errors), "warnings": list(self.warnings), "raw": self.raw,
            "extra": _plain(self.extra), "healthy": self.healthy}
        if not include_raw:
            del data["raw"]
        return data


class PartitionDict(TypedDict):
    """:meth:`Partition.to_dict`: the partition's fields, ``extra`` as plain JSON."""

    kind: str
    index: int | None
    profile: str | None
    gpu_instance_id: int | None
    compute_instance_id: int | None
    uuid: str | None
    memory_total_mib: int | None
    memory_used_mib: int | None
    multiprocessors: int | None
    ecc_uncorrectable: int | None
    extra: dict[str, Any]
    """Vendor specifics (vNPU ``vgroup_id``, ``container_id``, ``status``), open by design."""


class ProcessDict(TypedDict):
    """:meth:`DeviceProcess.to_dict`: the process's fields."""

    pid: int | None
    name: str | None
    type: str | None
    used_memory_mib: int | None
    gpu_instance_id: int | None
    compute_instance_id: int | None
    chip: int | None


class DeviceDict(TypedDict):
    """:meth:`Device.to_dict`: the device's fields, partitions and processes as their dicts, ``extra`` as
    plain JSON."""

    vendor: str
    index: int | None
    name: str | None
    uuid: str | None
    serial: str | None
    bus_id: str | None
    memory_total_mib: int | None
    memory_used_mib: int | None
    health: Health
    health_raw: str | None
    temperature_c: float | None
    power_w: float | None
    power_limit_w: float | None
    utilisation_pct: float | None
    partitions: list[PartitionDict]
    processes: list[ProcessDict]
    errors: list[str]
    extra: dict[str, Any]
    """Vendor specifics (each probe's own), open by design."""


class InventoryDict(TypedDict):
    """:meth:`Inventory.to_dict`: the inventory's fields (``raw`` only when asked for), devices as their dicts,
    ``extra`` as plain JSON, and ``healthy``; ``hetero probe --source`` adds the ``findings`` of the tools' text."""

    vendor: str
    source: str
    collected_at: str
    tool_version: str | None
    driver_version: str | None
    cuda_version: str | None
    cann_version: str | None
    firmware_version: str | None
    timestamp: str | None
    attached_count: int | None
    devices: list[DeviceDict]
    global_errors: list[str]
    warnings: list[str]
    raw: NotRequired[str]
    extra: dict[str, Any]
    """Probe specifics (device nodes, fallback reasons, CPU facts…), open by design."""
    healthy: bool
    findings: NotRequired[list[dict[str, object]]]


def worst(*values: Health) -> Health:
    """Return the most severe of the given health values (``"ok"`` for none)."""
    best: Health = "ok"
    for value in values:
        if HEALTH_ORDER[value] > HEALTH_ORDER[best]:
            best = value
    return best
