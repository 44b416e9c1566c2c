"""Pieces shared by the NVIDIA readers: tool error messages and the GPU health verdict.

The messages come from ``nvidia-smi`` (any driver since 450) printed instead of, or before,
its normal output; the health rules follow NVIDIA's GPU memory error-management guidance:
pending page retirement, pending row remapping, a row-remapping failure and volatile
uncorrectable ECC errors each make a GPU unfit for work (``critical``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_hetero.probes.model import Health, worst

GLOBAL_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver[^\n]*"),
        "no NVIDIA driver reachable",
    ),
    (re.compile(r"NVIDIA-SMI couldn't find libnvidia-ml\.so[^\n]*"), "no NVIDIA driver library"),
    (re.compile(r"Failed to initialize NVML: [^\n]*"), "NVML initialisation failed"),
    (re.compile(r"No devices were found[^\n]*"), "no NVIDIA devices found"),
    (re.compile(r"nvidia-smi: (?:command )?not found[^\n]*"), "nvidia-smi not installed"),
)
"""(pattern, meaning) pairs of host-level failures printed by nvidia-smi or the shell."""

LOST_GPU = re.compile(
    r"Unable to determine the device handle for (?:GPU|gpu)\s*(?P<bus>[0-9A-Fa-f:.]+)?\s*:\s*(?P<why>[^\n]*)"
)
"""nvidia-smi's line for a GPU it can see on PCI but not open (fallen off the bus, GSP hang)."""


def global_errors(text: str) -> list[str]:
    """Return ``"<meaning>: <tool line>"`` for every host-level failure message in ``text``."""
    found: list[str] = []
    for pattern, meaning in GLOBAL_ERRORS:
        for match in pattern.finditer(text):
            found.append(f"{meaning}: {match.group(0).strip()}")
    return found


def lost_gpus(text: str) -> list[tuple[str | None, str]]:
    """Return ``(bus_id or None, reason)`` for each "Unable to determine the device handle" line."""
    return [(m.group("bus"), m.group("why").strip() or "Unknown Error") for m in LOST_GPU.finditer(text)]


UNREADABLE_FIELDS_CRITICAL = 3
"""A GPU with this many fields reading ERR!/Unknown Error is treated as lost (critical): one
unreadable fan is a warning, but temperature, power and ECC all failing is a GPU off the bus."""


@dataclass
class HealthInputs:
    """Memory-error and field-read facts of one GPU, gathered by any reader (counts or None)."""

    ecc_volatile_uncorrectable: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    field_errors: tuple[str, ...] = ()
    reset_required: bool | None = None


def verdict(inputs: HealthInputs) -> tuple[Health, str, tuple[str, ...]]:
    """Return ``(health, health_raw, reasons)`` for one GPU.

    ``critical`` for retired pages pending, row remapping pending or failed, volatile
    uncorrectable ECC > 0, a required reset, or at least :data:`UNREADABLE_FIELDS_CRITICAL`
    unreadable fields; ``warning`` when fewer field reads failed (``ERR!``, ``[Unknown Error]``);
    ``ok`` otherwise. ``health_raw`` summarises the vendor
    facts that were read, e.g. ``"ecc_volatile_uncorrectable=2"``.
    """
    reasons: list[str] = []
    levels: list[Health] = ["ok"]
    if inputs.ecc_volatile_uncorrectable:
        reasons.append(f"volatile uncorrectable ECC errors: {inputs.ecc_volatile_uncorrectable}")
        levels.append("critical")
    if inputs.retired_pages_pending:
        reasons.append("retired pages pending (reset or reboot needed)")
        levels.append("critical")
    if inputs.remapped_rows_pending:
        reasons.append("row remapping pending (reset needed)")
        levels.append("critical")
    if inputs.remapped_rows_failure:
        reasons.append("row remapping failure (GPU needs service)")
        levels.append("critical")
    if inputs.reset_required:
        reasons.append("GPU reset required")
        levels.append("critical")
    for err in inputs.field_errors:
        reasons.append(err)
        levels.append("warning")
    if len(inputs.field_errors) >= UNREADABLE_FIELDS_CRITICAL:
        reasons.append(f"{len(inputs.field_errors)} fields unreadable: the GPU is probably lost or hung")
        levels.append("critical")
    raw = [
        f"ecc_volatile_uncorrectable={inputs.ecc_volatile_uncorrectable}",
        f"retired_pages_pending={inputs.retired_pages_pending}",
        f"remapped_rows_pending={inputs.remapped_rows_pending}",
        f"remapped_rows_failure={inputs.remapped_rows_failure}",
    ]
    return worst(*levels), ", ".join(raw), tuple(reasons)
