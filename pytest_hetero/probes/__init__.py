"""Device probes: what NVIDIA GPUs, Huawei Ascend NPUs and CPUs really report.

Every probe returns an :class:`~pytest_hetero.probes.model.Inventory` (plain-data, frozen);
parsers of captured tool output live beside the live readers so evidence can be re-read
later. :func:`probe_host` is the single entry the discovery/startup layers call.
"""

from __future__ import annotations

from pytest_hetero.errors import ParseError, SettingsError
from pytest_hetero.probes.model import Device, Inventory, Partition

__all__ = ["VENDORS", "Device", "Inventory", "Partition", "parse_captured", "probe_host"]

VENDORS: dict[str, str] = {
    "nvidia": "nvidia",
    "gpu": "nvidia",
    "ascend": "ascend",
    "npu": "ascend",
    "huawei": "ascend",
    "cpu": "cpu",
}
"""Accepted vendor names (and aliases) → probe."""


def probe_host(vendor: str, root: str = "/") -> Inventory:
    """Probe this host (or container) for ``vendor`` from its live source and return the Inventory.

    ``nvidia``: NVML, else ``nvidia-smi -q -x``; ``ascend``: ``npu-smi info`` plus device nodes
    and CANN version under ``root``; ``cpu``: ``/proc`` and ``/sys`` under ``root``. A missing
    driver or tool is reported in ``global_errors``, never raised. Raises
    :class:`~pytest_hetero.errors.SettingsError` for an unknown ``vendor``.
    """
    kind = VENDORS.get(vendor.strip().lower())
    if kind == "nvidia":
        from pytest_hetero.probes.nvidia import probe_nvidia

        return probe_nvidia(root)
    if kind == "ascend":
        from pytest_hetero.probes.ascend import probe_ascend

        return probe_ascend(root)
    if kind == "cpu":
        from pytest_hetero.probes.cpu import probe_cpu

        return probe_cpu(root)
    raise SettingsError(f"unknown probe vendor {vendor!r}", hint="use one of: nvidia, ascend, cpu")


def parse_captured(vendor: str, text: str) -> Inventory:
    """Parse captured ``text`` for ``vendor`` (format detected); raises ParseError if unreadable.

    The text first goes through the line normaliser ``hetero explain`` uses
    (:func:`pytest_hetero.probes.line_prefix.normalise`: forwarded host, syslog/journalctl, kmsg and RFC 3339
    prefixes off), so ``probe --from`` and ``explain`` read the same lines."""
    from pytest_hetero.probes.line_prefix import normalise

    text = "\n".join(normalise(text.replace("\r\n", "\n").split("\n"))[0])
    if vendor == "nvidia":
        from pytest_hetero.probes.nvidia import detect_format, parse_nvidia_smi

        if detect_format(text) == "unknown":
            raise ParseError(
                "not a known NVIDIA format: expected nvidia-smi -q -x XML, plain nvidia-smi, "
                "a kernel log with 'NVRM: Xid' lines or a device-plugin log"
            )
        return parse_nvidia_smi(text)
    if vendor == "ascend":
        from pytest_hetero.probes.ascend import NpuBoardVersions, parse_npu_board, parse_npu_smi_info

        if "Total number of vnpu" in text or "NPU resource static info" in text:
            from pytest_hetero.probes.ascend import parse_npu_vnpu

            vnpu = parse_npu_vnpu(text)
            chip = Device(
                vendor="ascend",
                index=None,
                partitions=vnpu.partitions,
                extra={"vnpu_resources": vnpu.resources, "vnpu_declared": vnpu.declared_count},
            )
            return Inventory(
                vendor="ascend", source="npu-smi-vnpu", devices=(chip,), warnings=vnpu.warnings, raw=text
            )
        if "|" not in text and "NPU ID" in text:
            board = parse_npu_board(text)
            versions = NpuBoardVersions.of(board)
            return Inventory(
                vendor="ascend",
                source="npu-smi-board",
                firmware_version=versions.firmware_version,
                driver_version=versions.software_version,
                raw=text,
                extra={"board": board},
            )
        return parse_npu_smi_info(text)
    raise ParseError(
        f"--from is not supported for {vendor}", hint="use --root DIR to read /proc and /sys under DIR"
    )
