"""NVIDIA probe: NVML first, ``nvidia-smi -q -x`` second, any captured text by format.

Live order: NVML through ``nvidia-ml-py`` (``import pynvml``) when it imports and a driver
answers ``nvmlInit``; else ``nvidia-smi -q -x`` when it is on ``PATH``; else an Inventory
with source ``none`` whose ``global_errors`` say why. Captured text goes through
:func:`parse_nvidia_smi`, which recognises XML, the plain table and Xid logs.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from collections.abc import Callable

from pytest_hetero.probes.model import Device, Inventory
from pytest_hetero.probes.nvidia_common import global_errors, lost_gpus
from pytest_hetero.probes.nvidia_nvml import collect_nvml
from pytest_hetero.probes.nvidia_table import parse_nvidia_smi_table
from pytest_hetero.probes.nvidia_xid import parse_xid_log, xid_inventory
from pytest_hetero.probes.nvidia_xml import parse_nvidia_smi_xml

__all__ = [
    "detect_format",
    "parse_nvidia_smi",
    "parse_nvidia_smi_table",
    "parse_nvidia_smi_xml",
    "parse_xid_log",
    "probe_nvidia",
    "xid_inventory",
]

SMI_TIMEOUT_S = 60.0
"""Seconds ``nvidia-smi -q -x`` may run; a hung GSP can block it for minutes."""


def detect_format(text: str) -> str:
    """Name the NVIDIA format of ``text``.

    Returns ``empty``, ``nvidia-smi-xml``, ``nvidia-smi-table``, ``kernel-log``,
    ``device-plugin-log`` or ``unknown`` (decided from markers, never raises).
    """
    head = text.lstrip()
    if not head:
        return "empty"
    if head.startswith("<") or "<nvidia_smi_log" in text:
        return "nvidia-smi-xml"
    if "NVIDIA-SMI" in text or global_errors(text) or "Unable to determine the device handle" in text:
        return "nvidia-smi-table"
    if "NVRM: Xid" in text or "NVRM:" in text:
        return "kernel-log"  # also fallen off the bus / RmInitAdapter / reset required without an Xid
    if "XidCriticalError" in text or "marked unhealthy" in text:
        return "device-plugin-log"
    return "unknown"


def parse_nvidia_smi(text: str) -> Inventory:
    """Parse any captured NVIDIA text: ``nvidia-smi -q -x`` XML, plain ``nvidia-smi``, Xid logs.

    Blank input gives an empty Inventory with a warning. Raises
    :class:`~pytest_hetero.errors.ParseError` when the text is none of these formats.
    """
    kind = detect_format(text)
    if kind == "empty":
        return Inventory(
            vendor="nvidia",
            source="nvidia-smi-table",
            raw=text,
            warnings=("input is empty: nvidia-smi printed nothing",),
        )
    if kind == "nvidia-smi-xml":
        return _xml_with_preamble(text)
    if kind in {"kernel-log", "device-plugin-log"}:
        return xid_inventory(text)
    return parse_nvidia_smi_table(text)


def _xml_with_preamble(text: str) -> Inventory:
    """XML preceded by nvidia-smi's own error lines (stderr first, or a merged capture)."""
    start = min((i for i in (text.find("<?xml"), text.find("<nvidia_smi_log")) if i >= 0), default=0)
    preamble = text[:start]
    inv = parse_nvidia_smi_xml(text[start:])
    lost = lost_gpus(preamble)
    problems = global_errors(preamble)
    if not lost and not problems:
        return Inventory(**{**inv.__dict__, "raw": text})
    devices = list(inv.devices)
    for bus, why in lost:
        reason = f"Unable to determine the device handle: {why}"
        devices.append(
            Device(
                vendor="nvidia", index=None, bus_id=bus, health="critical", health_raw=why, errors=(reason,)
            )
        )
    return Inventory(
        **{
            **inv.__dict__,
            "devices": tuple(devices),
            "raw": text,
            "global_errors": inv.global_errors + tuple(problems),
        }
    )


def _device_nodes(root: str) -> list[str]:
    base = os.path.join(root, "dev")
    return sorted("/dev/" + os.path.basename(p) for p in glob.glob(os.path.join(base, "nvidia*")))


Runner = Callable[[list[str], float], "subprocess.CompletedProcess[str]"]


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, errors="replace")


def probe_nvidia(root: str = "/", *, use_nvml: bool = True, run: Runner = _run) -> Inventory:
    """Read the NVIDIA GPUs of this host (or container) from the live driver.

    Tries NVML (``pynvml``), then ``nvidia-smi -q -x`` (at most :data:`SMI_TIMEOUT_S` seconds).
    ``root`` is where ``/dev/nvidia*`` nodes are listed (``extra["device_nodes"]``). Never
    raises for a missing driver: the Inventory's ``global_errors`` name each failed source.
    """
    reasons: list[str] = []
    inventory: Inventory | None = None
    if use_nvml:
        inventory, reason = collect_nvml()
        if reason:
            reasons.append(f"NVML: {reason}")
    if inventory is None:
        smi = shutil.which("nvidia-smi")
        if smi is None:
            reasons.append("nvidia-smi: not found on PATH")
        else:
            try:
                done = run([smi, "-q", "-x"], SMI_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                reasons.append(f"nvidia-smi -q -x: no answer within {SMI_TIMEOUT_S:.0f} s")
            else:
                xml = done.stdout.lstrip().startswith("<")
                out = done.stderr + done.stdout if xml else done.stdout + done.stderr
                inventory = parse_nvidia_smi(out)
                if done.returncode != 0 and not inventory.global_errors:
                    reasons.append(f"nvidia-smi -q -x exited {done.returncode}: {done.stderr.strip()[:300]}")
    extra: dict[str, list[str]] = {"device_nodes": _device_nodes(root), "fallback_reasons": reasons}
    if inventory is None:
        return Inventory(
            vendor="nvidia",
            source="none",
            extra=extra,
            global_errors=(f"no NVIDIA driver reachable ({'; '.join(reasons)})",),
        )
    errors = inventory.global_errors
    if inventory.source != "nvml" and reasons and not inventory.devices:
        errors = errors + tuple(r for r in reasons if r.startswith("nvidia-smi"))
    return Inventory(**{**inventory.__dict__, "global_errors": errors, "extra": {**inventory.extra, **extra}})
