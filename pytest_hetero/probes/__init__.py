"""Device probes: what NVIDIA GPUs, Huawei Ascend NPUs and CPUs really report.

Every probe returns an :class:`~pytest_hetero.probes.model.Inventory` (plain-data, frozen);
parsers of captured tool output live beside the live readers so evidence can be re-read
later. :func:`probe_host` is the single entry the discovery/startup layers call.
"""

from __future__ import annotations

from pytest_hetero.errors import SettingsError
from pytest_hetero.probes.model import Device, Inventory, Partition

__all__ = ["VENDORS", "Device", "Inventory", "Partition", "probe_host"]

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
