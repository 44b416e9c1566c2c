"""NVIDIA Xid numbers: what each means, who acts first, what to do.

Source: NVIDIA "Xid Errors" catalog (https://docs.nvidia.com/deploy/xid-errors/, the "Analyzing Xid
Errors with the Xid Catalog" table for Ampere and newer and the older "Xid and SXid Errors" table),
NVIDIA "Dynamic Page Retirement" and "GPU Memory Error Management" (Xid 48/63/64/92/94/95), and the
k8s-device-plugin's default list of application Xids it does not mark unhealthy (13, 31, 43, 45, 68,
109). Meanings are written here in our own words; ``action`` follows the catalog's resolution bucket
(``restart_app``, ``reset_gpu``, ``reboot``, ``contact_support``, ``check_app``).

No owner is named here: an Xid's ``failure`` is ``xid_<category>``, a row of the failure table
(:mod:`pytest_hetero.judge.failures`) that gives the owner — the algorithm team when the catalog attributes
the Xid to the application (an illegal address, a stopped channel), infrastructure for the GPU, its memory,
firmware, bus and fabric. An Xid 45 ("preemptive cleanup") takes the category of the Xid it names as its cause.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Xid:
    """One catalog entry: ``meaning`` (one line), ``category``, recommended ``action``."""

    number: int
    meaning: str
    category: str
    action: str

    @property
    def application(self) -> bool:
        """True when the catalog attributes this Xid to the application, not the GPU."""
        return self.category == "application"

    @property
    def failure(self) -> str:
        """The failure-table category of this Xid: ``xid_<category>`` (``xid_gpu_memory``)."""
        return "xid_" + self.category.replace("-", "_")


def _x(number: int, meaning: str, category: str, action: str) -> tuple[int, Xid]:
    return number, Xid(number, meaning, category, action)


XIDS: dict[int, Xid] = dict(
    (
        _x(8, "GPU stopped processing (channel idle timeout)", "gpu-engine", "restart_app"),
        _x(13, "graphics engine exception in a user kernel (illegal address, out-of-range access)",
           "application", "check_app"),
        _x(31, "GPU memory page fault: the application touched an unmapped address", "application", "check_app"),
        _x(32, "invalid or corrupted push buffer stream (PCIe or driver)", "gpu-bus",
           "contact_support"),
        _x(38, "driver firmware error", "gpu-firmware", "reset_gpu"),
        _x(43, "GPU stopped processing the application's channel (user kernel fault); GPU still usable",
           "application", "check_app"),
        _x(44, "graphics engine fault during context switch", "gpu-engine", "reset_gpu"),
        _x(45, "preemptive cleanup: the application's channels were torn down after an earlier error",
           "application", "restart_app"),
        _x(46, "GPU stopped processing", "gpu-engine", "reset_gpu"),
        _x(48, "uncorrectable double-bit ECC error (DBE) in GPU memory", "gpu-memory",
           "reset_gpu"),
        _x(54, "auxiliary power is not connected to the GPU", "gpu-power", "contact_support"),
        _x(56, "display engine error", "gpu-engine", "contact_support"),
        _x(57, "error programming video memory interface", "gpu-memory", "contact_support"),
        _x(61, "internal micro-controller breakpoint/warning (GPU firmware)", "gpu-firmware", "reset_gpu"),
        _x(62, "internal micro-controller halt (GPU firmware)", "gpu-firmware", "reset_gpu"),
        _x(63, "ECC page retirement or row remapping recorded; a GPU reset activates it", "gpu-memory", "reset_gpu"),
        _x(64, "ECC page retirement or row remapping failed to record", "gpu-memory",
           "contact_support"),
        _x(68, "video decoder (NVDEC) exception", "application", "check_app"),
        _x(69, "graphics engine class error", "gpu-engine", "reset_gpu"),
        _x(74, "NVLink error", "nvlink", "reset_gpu"),
        _x(79, "GPU has fallen off the bus", "gpu-bus", "reboot"),
        _x(92, "high single-bit ECC error rate", "gpu-memory", "contact_support"),
        _x(94, "contained ECC error: the affected application was stopped, the GPU keeps working",
           "gpu-memory", "reset_gpu"),
        _x(95, "uncontained ECC error: every application on the GPU is affected", "gpu-memory", "reset_gpu"),
        _x(109, "context switch timeout", "application", "check_app"),
        _x(110, "security fault", "gpu-firmware", "reset_gpu"),
        _x(119, "GSP RPC timeout: the GPU System Processor stopped answering the driver", "gpu-firmware", "reset_gpu"),
        _x(120, "GSP error", "gpu-firmware", "reset_gpu"),
        _x(121, "C2C link corrected error", "nvlink", "contact_support"),
        _x(122, "SPI PMU RPC read failure", "gpu-firmware", "reset_gpu"),
        _x(123, "SPI PMU RPC write failure", "gpu-firmware", "reset_gpu"),
        _x(124, "SPI PMU RPC erase failure", "gpu-firmware", "reset_gpu"),
        _x(136, "GPU recovery action or fatal error reported by firmware", "gpu-firmware",
           "reset_gpu"),
        _x(140, "unrecovered ECC error", "gpu-memory", "reset_gpu"),
        _x(143, "GPU initialization failure", "gpu-firmware", "reset_gpu"),
        _x(144, "NVLink: NETIR error", "nvlink", "reset_gpu"),
        _x(145, "NVLink: receive-link (RLW) error", "nvlink", "reset_gpu"),
        _x(146, "NVLink: transmit-link (TLW) error", "nvlink", "reset_gpu"),
        _x(147, "NVLink: TREX error", "nvlink", "reset_gpu"),
        _x(148, "NVLink: power (NVLPW) error", "nvlink", "reset_gpu"),
        _x(149, "NVLink: NETIR link error", "nvlink", "reset_gpu"),
        _x(150, "NVLink: MSE watchdog/timeout", "nvlink", "reset_gpu"),
        _x(151, "key rotation error (confidential computing)", "gpu-firmware", "reset_gpu"),
        _x(154, "GPU recovery action changed (drain, reset or reboot needed)", "gpu-recovery", "reset_gpu"),
        _x(155, "NVLink link training or degraded-link event", "nvlink", "reset_gpu"),
    )
)
"""Xid number -> entry. Numbers not listed are read as GPU faults of unknown kind (see :func:`xid_info`)."""


def xid_info(number: int) -> Xid:
    """Return the catalog entry for ``number``; an unlisted number gives a generic GPU-hardware entry."""
    known = XIDS.get(number)
    if known is not None:
        return known
    return Xid(number, f"Xid {number} (not in this table; see NVIDIA's Xid catalog)", "gpu-hardware",
               "contact_support")


APPLICATION_XIDS: frozenset[int] = frozenset(n for n, x in XIDS.items() if x.application)
"""Xids caused by the application (the device plugin ignores these by default)."""
