"""Reader for ``nvidia-smi -q -x`` XML (DTD ``nvsmi_device_v10`` … ``v13`` and unknown newer).

Source format: the XML log of ``nvidia-smi -q -x`` from drivers ≥ 450; root ``<nvidia_smi_log>``
with ``timestamp``, ``driver_version``, ``cuda_version``, ``attached_gpus`` and one ``<gpu id=BUS>``
element per GPU. Power sits in ``<power_readings>`` (≤ 530) or ``<gpu_power_readings>`` (≥ 535);
ECC counters are ``single_bit``/``double_bit`` (old) or ``sram_*``/``dram_*`` (new). Truncated XML
is read up to the cut with a warning.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, fields
from typing import ClassVar

from pytest_hetero.errors import ParseError
from pytest_hetero.probes import _values as v
from pytest_hetero.probes.model import Device, DeviceProcess, Inventory, Partition
from pytest_hetero.probes.nvidia_common import HealthInputs, verdict

KNOWN_DTD_MAX = 13
"""Newest ``nvsmi_device_vN.dtd`` whose layout this reader was written against (v13: drivers
≥ 550.163 / 59x, ``average_power_draw``/``instant_power_draw`` only, split SRAM parity/SECDED counts)."""


def _find(el: ET.Element, path: str) -> ET.Element | None:
    """Return ``el.find(path)`` for a plain ``a/b/c`` path, without the ElementPath machinery.

    ``Element.find`` with a ``/`` compiles and runs a Python selector chain (microseconds a call);
    ``find``/``findall`` of a single tag run in C. Depth first in document order, as ElementPath
    does, so a later ``<a>`` still answers when the first one lacks ``b/c``.
    """
    first, sep, rest = path.partition("/")
    if not sep:
        return el.find(first)
    for child in el.findall(first):
        node = _find(child, rest)
        if node is not None:
            return node
    return None


def _text(el: ET.Element, path: str) -> str | None:
    """Return the text of ``el.find(path)`` (None when absent or empty), unstripped."""
    node = _find(el, path)
    return None if node is None else node.text


class _Gpu:
    """Field access for one ``<gpu>`` element that records field-read errors as it goes."""

    def __init__(self, el: ET.Element, warnings: list[str]) -> None:
        self.el = el
        self.errors: list[str] = []
        self.warnings = warnings

    def get(self, path: str) -> str | None:
        node = _find(self.el, path)
        if node is None or node.text is None:
            return None
        text = node.text.strip()
        low = text.lower()
        if "deprecated" in low:
            note = f"field {path} reads '{text}'"
            if note not in self.warnings:
                self.warnings.append(note)
            return None
        err = v.field_error(text)
        if err:
            self.errors.append(f"{path} reads {err}")
            return None
        return text


def _sum_uncorrectable(node: ET.Element | None) -> int | None:
    if node is None:
        return None
    double = _find(node, "double_bit/total")
    if double is not None:
        return v.integer(double.text)
    tags = {c.tag for c in node}
    # some drivers print both the SRAM total and its parity/SECDED split: count the total only
    skip = (
        {"sram_uncorrectable_parity", "sram_uncorrectable_secded"} if "sram_uncorrectable" in tags else set()
    )
    values = [v.integer(c.text) for c in node if "uncorrectable" in c.tag and c.tag not in skip]
    read = [x for x in values if x is not None]
    return sum(read) if read else None


def _partition(el: ET.Element) -> Partition:
    return Partition(
        kind="mig",
        index=v.integer(_text(el, "index")),
        gpu_instance_id=v.integer(_text(el, "gpu_instance_id")),
        compute_instance_id=v.integer(_text(el, "compute_instance_id")),
        memory_total_mib=v.mib(_text(el, "fb_memory_usage/total")),
        memory_used_mib=v.mib(_text(el, "fb_memory_usage/used")),
        multiprocessors=v.integer(_text(el, "device_attributes/shared/multiprocessor_count")),
        ecc_uncorrectable=_sum_uncorrectable(_find(el, "ecc_error_count/volatile_count")),
    )


def _process(el: ET.Element) -> DeviceProcess:
    return DeviceProcess(
        pid=v.integer(_text(el, "pid")),
        name=v.text_or_none(_text(el, "process_name")),
        type=v.text_or_none(_text(el, "type")),
        used_memory_mib=v.mib(_text(el, "used_memory")),
        gpu_instance_id=v.integer(_text(el, "gpu_instance_id")),
        compute_instance_id=v.integer(_text(el, "compute_instance_id")),
    )


def _first(gpu: _Gpu, *paths: str) -> str | None:
    for path in paths:
        value = gpu.get(path)
        if value is not None:
            return value
    return None


@dataclass(frozen=True)
class GpuTexts:
    """The texts of one ``<gpu>`` element that the reader uses, read once (None: absent, empty, deprecated or
    an error marker such as ``[N/A]``, which :class:`_Gpu` notes). Each field's path(s) in
    ``nvsmi_device_v10..v13`` are in :attr:`PATHS`; the fields are read in declaration order, so the field-read
    errors come in the order the reader always reported them; a field not to be read (``skip``) stays None."""

    pending_retirement: str | None
    pending_blacklist: str | None
    remapped_row_pending: str | None
    remapped_row_failure: str | None
    reset_required: str | None
    architecture: str | None
    brand: str | None
    minor_number: str | None
    persistence_mode: str | None
    performance_state: str | None
    compute_mode: str | None
    mig_mode_current: str | None
    mig_mode_pending: str | None
    ecc_mode: str | None
    retired_pages_sbe: str | None
    retired_pages_dbe: str | None
    remapped_rows_uncorrectable: str | None
    fan_speed: str | None
    memory_reserved: str | None
    memory_free: str | None
    memory_util: str | None
    vbios_version: str | None
    product_name: str | None
    uuid: str | None
    serial: str | None
    pci_bus_id: str | None
    memory_total: str | None
    memory_used: str | None
    gpu_temp: str | None
    power_draw: str | None
    power_limit: str | None
    gpu_util: str | None

    PATHS: ClassVar[dict[str, tuple[str, ...]]] = {
        "pending_retirement": ("retired_pages/pending_retirement",),
        "pending_blacklist": ("retired_pages/pending_blacklist",),
        "remapped_row_pending": ("remapped_rows/remapped_row_pending",),
        "remapped_row_failure": ("remapped_rows/remapped_row_failure",),
        "reset_required": ("gpu_reset_status/reset_required",),
        "architecture": ("product_architecture",),
        "brand": ("product_brand",),
        "minor_number": ("minor_number",),
        "persistence_mode": ("persistence_mode",),
        "performance_state": ("performance_state",),
        "compute_mode": ("compute_mode",),
        "mig_mode_current": ("mig_mode/current_mig",),
        "mig_mode_pending": ("mig_mode/pending_mig",),
        "ecc_mode": ("ecc_mode/current_ecc",),
        "retired_pages_sbe": ("retired_pages/multiple_single_bit_retirement/retired_count",),
        "retired_pages_dbe": ("retired_pages/double_bit_retirement/retired_count",),
        "remapped_rows_uncorrectable": ("remapped_rows/remapped_row_unc",),
        "fan_speed": ("fan_speed",),
        "memory_reserved": ("fb_memory_usage/reserved",),
        "memory_free": ("fb_memory_usage/free",),
        "memory_util": ("utilization/memory_util",),
        "vbios_version": ("vbios_version",),
        "product_name": ("product_name",),
        "uuid": ("uuid",),
        "serial": ("serial",),
        "pci_bus_id": ("pci/pci_bus_id",),
        "memory_total": ("fb_memory_usage/total",),
        "memory_used": ("fb_memory_usage/used",),
        "gpu_temp": ("temperature/gpu_temp",),
        "power_draw": ("{power}/power_draw", "{power}/instant_power_draw", "{power}/average_power_draw"),
        "power_limit": ("{power}/current_power_limit", "{power}/power_limit", "{power}/enforced_power_limit"),
        "gpu_util": ("utilization/gpu_util",),
    }
    """Field -> its path(s) under ``<gpu>``, the first that has a value wins; ``{power}``: the power block's
    tag (``power_readings`` up to driver 530, ``gpu_power_readings`` from 535)."""

    @classmethod
    def read(cls, gpu: _Gpu, power: str, skip: frozenset[str]) -> GpuTexts:
        """Read every field but those named in ``skip`` from ``gpu`` (``power``: the power block's tag)."""
        texts = {f.name: None if f.name in skip else _first(gpu, *(p.format(power=power) for p in cls.PATHS[f.name]))
                 for f in fields(cls)}
        return cls(**texts)


def _any_yes(*texts: str | None) -> bool | None:
    read = [v.yes(t) for t in texts if v.yes(t) is not None]
    return any(read) if read else None


def _device(el: ET.Element, position: int, warnings: list[str]) -> Device:
    g = _Gpu(el, warnings)
    power = "gpu_power_readings" if el.find("gpu_power_readings") is not None else "power_readings"
    remap = el.find("remapped_rows")
    remapped = remap is not None and len(remap) > 0  # an empty <remapped_rows/> reports nothing
    bus_attr = el.get("id")
    skip = frozenset(([] if remapped else ["remapped_row_pending", "remapped_row_failure"])
                     + (["pci_bus_id"] if bus_attr else []))
    t = GpuTexts.read(g, power, skip)
    inputs = HealthInputs(
        ecc_volatile_uncorrectable=_sum_uncorrectable(_find(el, "ecc_errors/volatile")),
        retired_pages_pending=_any_yes(t.pending_retirement, t.pending_blacklist),
        remapped_rows_pending=v.yes(t.remapped_row_pending) if remapped else None,
        remapped_rows_failure=v.yes(t.remapped_row_failure) if remapped else None,
        reset_required=v.yes(t.reset_required),
    )
    extra = {
        "architecture": v.text_or_none(t.architecture),
        "brand": v.text_or_none(t.brand),
        "minor_number": v.integer(t.minor_number),
        "persistence_mode": v.text_or_none(t.persistence_mode),
        "performance_state": v.text_or_none(t.performance_state),
        "compute_mode": v.text_or_none(t.compute_mode),
        "mig_mode_current": v.text_or_none(t.mig_mode_current),
        "mig_mode_pending": v.text_or_none(t.mig_mode_pending),
        "ecc_mode": v.text_or_none(t.ecc_mode),
        "ecc_volatile_uncorrectable": inputs.ecc_volatile_uncorrectable,
        "ecc_aggregate_uncorrectable": _sum_uncorrectable(_find(el, "ecc_errors/aggregate")),
        "retired_pages_sbe": v.integer(t.retired_pages_sbe),
        "retired_pages_dbe": v.integer(t.retired_pages_dbe),
        "remapped_rows_uncorrectable": v.integer(t.remapped_rows_uncorrectable),
        "fan_speed_pct": v.number(t.fan_speed),
        "memory_reserved_mib": v.mib(t.memory_reserved),
        "memory_free_mib": v.mib(t.memory_free),
        "memory_util_pct": v.number(t.memory_util),
        "vbios_version": v.text_or_none(t.vbios_version),
    }
    inputs.field_errors = tuple(g.errors)
    health, raw, reasons = verdict(inputs)
    return Device(
        vendor="nvidia",
        index=position,
        name=v.text_or_none(t.product_name),
        uuid=v.text_or_none(t.uuid),
        serial=v.text_or_none(t.serial),
        bus_id=bus_attr or v.text_or_none(t.pci_bus_id),
        memory_total_mib=v.mib(t.memory_total),
        memory_used_mib=v.mib(t.memory_used),
        health=health,
        health_raw=raw,
        temperature_c=v.number(t.gpu_temp),
        power_w=v.number(t.power_draw),
        power_limit_w=v.number(t.power_limit),
        utilisation_pct=v.number(t.gpu_util),
        partitions=tuple(_partition(p) for p in el.iterfind("mig_devices/mig_device")),
        processes=tuple(_process(p) for p in el.iterfind("processes/process_info")),
        errors=reasons,
        extra=extra,
    )


UNUSED_SUBTREES = ("supported_clocks", "clocks_event_reasons", "clocks_throttle_reasons")
"""Large subtrees no reader here uses (the supported clock table is a third of the text)."""


def _slim(text: str) -> str:
    for tag in UNUSED_SUBTREES:
        opening, closing = f"<{tag}>", f"</{tag}>"
        parts, pos = [], 0
        while (start := text.find(opening, pos)) >= 0 and (end := text.find(closing, start)) >= 0:
            parts.append(text[pos:start])
            pos = end + len(closing)
        parts.append(text[pos:])
        text = "".join(parts)
    return text


def _tree(text: str, warnings: list[str]) -> ET.Element:
    slim = _slim(text)
    try:
        return _checked(ET.fromstring(slim))
    except ET.ParseError:
        pass
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start",))
    found: list[ET.Element] = []
    errors: list[ET.ParseError] = []

    def drain() -> None:
        try:
            for event in parser.read_events():
                elem: object = event[1]  # type: ignore[misc]
                if not found and isinstance(elem, ET.Element):
                    found.append(elem)
        except ET.ParseError as exc:  # feed() queues syntax errors behind the events read so far
            errors.append(exc)

    try:
        parser.feed(text)
        drain()
        if not errors:
            parser.close()
    except ET.ParseError as exc:
        errors.append(exc)
    drain()
    root = found[0] if found else None
    if errors:
        if root is None:
            raise ParseError(
                f"not nvidia-smi -q -x XML: {errors[0]}", hint="expected the output of `nvidia-smi -q -x`"
            )
        warnings.append(f"XML truncated or malformed ({errors[0]}); read up to that point")
    return _checked(root)


def _checked(root: ET.Element | None) -> ET.Element:
    if root is None or root.tag != "nvidia_smi_log":
        tag = "none" if root is None else f"<{root.tag}>"
        raise ParseError(f"not nvidia-smi -q -x XML: root element {tag}, expected <nvidia_smi_log>")
    return root


def parse_nvidia_smi_xml(text: str) -> Inventory:
    """Parse ``nvidia-smi -q -x`` output into an :class:`Inventory` (source ``nvidia-smi-xml``).

    Returns every ``<gpu>`` found (index = position, as nvidia-smi numbers them; None when the
    listing is partial, i.e. ``attached_gpus`` disagrees, with the position in ``extra``), the declared
    ``attached_gpus`` as ``attached_count`` and parse warnings (unknown DTD, count mismatch,
    truncation). Raises :class:`ParseError` when ``text`` is not XML with an
    ``<nvidia_smi_log>`` root.
    """
    warnings: list[str] = []
    root = _tree(text, warnings)
    dtd = re.search(r"nvsmi_device_v(\d+)\.dtd", text[:500])
    if dtd and not 10 <= int(dtd.group(1)) <= KNOWN_DTD_MAX:
        warnings.append(
            f"DTD nvsmi_device_v{dtd.group(1)}.dtd is outside v10..v{KNOWN_DTD_MAX}; "
            f"read with the v{KNOWN_DTD_MAX} rules"
        )

    def top(tag: str) -> str | None:
        node = root.find(tag)
        return None if node is None else v.text_or_none(node.text)

    devices = tuple(_device(el, i, warnings) for i, el in enumerate(root.iterfind("gpu")))
    attached = v.integer(top("attached_gpus"))
    if attached is not None and attached != len(devices):
        warnings.append(f"attached_gpus={attached} but {len(devices)} <gpu> element(s) in the output")
        # a partial listing (``-i``, or GPUs left out) no longer numbers GPUs as nvidia-smi does
        devices = tuple(
            Device(**{**d.__dict__, "index": None, "extra": {**d.extra, "position": d.index}})
            for d in devices
        )
    return Inventory(
        vendor="nvidia",
        source="nvidia-smi-xml",
        timestamp=top("timestamp"),
        driver_version=top("driver_version"),
        cuda_version=top("cuda_version"),
        attached_count=attached,
        devices=devices,
        warnings=tuple(warnings),
        raw=text,
        extra={"dtd": f"nvsmi_device_v{dtd.group(1)}.dtd" if dtd else None},
    )
