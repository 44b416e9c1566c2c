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


def _any_yes(*texts: str | None) -> bool | None:
    read = [v.yes(t) for t in texts if v.yes(t) is not None]
    return any(read) if read else None


def _device(el: ET.Element, position: int, warnings: list[str]) -> Device:
    g = _Gpu(el, warnings)
    power = "gpu_power_readings" if el.find("gpu_power_readings") is not None else "power_readings"
    remap = el.find("remapped_rows")
    remapped = remap is not None and len(remap) > 0  # an empty <remapped_rows/> reports nothing
    inputs = HealthInputs(
        ecc_volatile_uncorrectable=_sum_uncorrectable(_find(el, "ecc_errors/volatile")),
        retired_pages_pending=_any_yes(
            g.get("retired_pages/pending_retirement"), g.get("retired_pages/pending_blacklist")
        ),
        remapped_rows_pending=v.yes(g.get("remapped_rows/remapped_row_pending")) if remapped else None,
        remapped_rows_failure=v.yes(g.get("remapped_rows/remapped_row_failure")) if remapped else None,
        reset_required=v.yes(g.get("gpu_reset_status/reset_required")),
    )
    extra = {
        "architecture": v.text_or_none(g.get("product_architecture")),
        "brand": v.text_or_none(g.get("product_brand")),
        "minor_number": v.integer(g.get("minor_number")),
        "persistence_mode": v.text_or_none(g.get("persistence_mode")),
        "performance_state": v.text_or_none(g.get("performance_state")),
        "compute_mode": v.text_or_none(g.get("compute_mode")),
        "mig_mode_current": v.text_or_none(g.get("mig_mode/current_mig")),
        "mig_mode_pending": v.text_or_none(g.get("mig_mode/pending_mig")),
        "ecc_mode": v.text_or_none(g.get("ecc_mode/current_ecc")),
        "ecc_volatile_uncorrectable": inputs.ecc_volatile_uncorrectable,
        "ecc_aggregate_uncorrectable": _sum_uncorrectable(_find(el, "ecc_errors/aggregate")),
        "retired_pages_sbe": v.integer(g.get("retired_pages/multiple_single_bit_retirement/retired_count")),
        "retired_pages_dbe": v.integer(g.get("retired_pages/double_bit_retirement/retired_count")),
        "remapped_rows_uncorrectable": v.integer(g.get("remapped_rows/remapped_row_unc")),
        "fan_speed_pct": v.number(g.get("fan_speed")),
        "memory_reserved_mib": v.mib(g.get("fb_memory_usage/reserved")),
        "memory_free_mib": v.mib(g.get("fb_memory_usage/free")),
        "memory_util_pct": v.number(g.get("utilization/memory_util")),
        "vbios_version": v.text_or_none(g.get("vbios_version")),
    }
    name = v.text_or_none(g.get("product_name"))
    uuid = v.text_or_none(g.get("uuid"))
    serial = v.text_or_none(g.get("serial"))
    bus = el.get("id") or v.text_or_none(g.get("pci/pci_bus_id"))
    total, used = v.mib(g.get("fb_memory_usage/total")), v.mib(g.get("fb_memory_usage/used"))
    temp = v.number(g.get("temperature/gpu_temp"))
    draw = v.number(
        _first(g, f"{power}/power_draw", f"{power}/instant_power_draw", f"{power}/average_power_draw")
    )
    limit = v.number(
        _first(g, f"{power}/current_power_limit", f"{power}/power_limit", f"{power}/enforced_power_limit")
    )
    util = v.number(g.get("utilization/gpu_util"))
    inputs.field_errors = tuple(g.errors)
    health, raw, reasons = verdict(inputs)
    return Device(
        vendor="nvidia",
        index=position,
        name=name,
        uuid=uuid,
        serial=serial,
        bus_id=bus,
        memory_total_mib=total,
        memory_used_mib=used,
        health=health,
        health_raw=raw,
        temperature_c=temp,
        power_w=draw,
        power_limit_w=limit,
        utilisation_pct=util,
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
