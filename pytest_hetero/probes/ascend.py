"""Huawei Ascend probe: ``npu-smi info`` tables, board details, device nodes, live run.

Source format: the box table of ``npu-smi info`` (Ascend driver 20.x … 25.x): a version line
``npu-smi <v>  Version: <driver>``, a two-line header naming the columns (``NPU Name | Health |
Power(W) Temp(C) [Hugepages-Usage(page)]`` / ``Chip [Device|Phy-ID] | Bus-Id | AICore(%)
Memory-Usage(MB) [HBM-Usage(MB)]``), then per chip an NPU row followed by its chip row(s), and
an optional process table. Column positions are read from the header, never assumed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import msgspec

from pytest_hetero.declared import resolve
from pytest_hetero.errors import ParseError
from pytest_hetero.probes import _values as v
from pytest_hetero.probes.ascend_table import parse_npu_smi_info
from pytest_hetero.probes.model import Inventory, Partition

__all__ = [
    "AscendNodes",
    "NpuBoardVersions",
    "VnpuInfo",
    "inspect_device_nodes",
    "parse_npu_board",
    "parse_npu_smi_info",
    "parse_npu_vnpu",
    "probe_ascend",
]

CONTROL_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc")
"""Device nodes every Ascend container needs besides its ``/dev/davinci<N>``."""

NPU_SMI_TIMEOUT_S = 60.0
"""Seconds ``npu-smi info`` may run before the probe gives up."""


@dataclass(frozen=True)
class AscendNodes:
    """Ascend device nodes under a root and what ``ASCEND_VISIBLE_DEVICES`` asks for.

    ``davinci`` are the ``N`` of each ``/dev/davinci<N>``; ``control`` maps each of
    :data:`CONTROL_NODES` to presence; ``visible`` is the parsed env list (``None`` when
    unset); ``missing`` names every node that should be there and is not.
    """

    davinci: tuple[int, ...]
    control: dict[str, bool]
    visible: tuple[int, ...] | None
    missing: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        """Return the report as a JSON-ready dict."""
        return {
            "davinci": list(self.davinci),
            "control": dict(self.control),
            "visible": None if self.visible is None else list(self.visible),
            "missing": list(self.missing),
        }


def parse_visible(value: str | None) -> tuple[int, ...] | None:
    """Parse ``ASCEND_VISIBLE_DEVICES``-style lists: ``"0,1"``, ``"0-3"``, ``"0-1,4"``.

    Returns None when unset; unreadable items are skipped.
    """
    if value is None:
        return None
    found: list[int] = []
    for item in value.replace(" ", "").split(","):
        lo, sep, hi = item.partition("-")
        if lo.isdecimal() and (not sep or hi.isdecimal()):
            found.extend(range(int(lo), int(hi if sep else lo) + 1))
    return tuple(found)


def inspect_device_nodes(root: str = "/", env: dict[str, str] | None = None) -> AscendNodes:
    """List ``/dev/davinci<N>`` and the control nodes under ``root``; compare with the env.

    ``env`` defaults to ``os.environ``; ``ASCEND_VISIBLE_DEVICES`` (as set by the Ascend device
    plugin or Ascend Docker Runtime) names the davinci indices the container should see.
    """
    env = dict(os.environ) if env is None else env
    dev = Path(root) / "dev"
    davinci: list[int] = []
    if dev.is_dir():
        for entry in dev.iterdir():
            suffix = entry.name[len("davinci") :]
            if entry.name.startswith("davinci") and suffix.isdecimal():
                davinci.append(int(suffix))
    control = {name: (dev / name).exists() for name in CONTROL_NODES}
    visible = parse_visible(env.get("ASCEND_VISIBLE_DEVICES"))
    missing = [f"/dev/{name}" for name, ok in control.items() if not ok]
    missing += [f"/dev/davinci{n}" for n in (visible or ()) if n not in davinci]
    return AscendNodes(tuple(sorted(davinci)), control, visible, tuple(missing))


def parse_npu_board(text: str) -> dict[str, str | None]:
    """Parse ``npu-smi info -t board -i N`` (key : value lines) into snake_case keys.

    ``"Firmware Version : 6.4.12.1.241"`` → ``{"firmware_version": "6.4.12.1.241"}``; ``NA``
    values become None; lines without a colon are ignored. Raises :class:`ParseError` when
    non-blank text has no ``key : value`` line at all.
    """
    found: dict[str, str | None] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = "_".join(key.strip().lower().replace("-", " ").split())
        if sep and key and len(key) < 60:
            found[key] = v.text_or_none(value)
    if text.strip() and not found:
        raise ParseError(
            "not `npu-smi info -t board` output: no 'key : value' line",
            hint="expected lines like 'Firmware Version : 6.4.12.1.241'",
        )
    return found


class NpuBoardVersions(msgspec.Struct, frozen=True, kw_only=True):
    """The versions of :func:`parse_npu_board`'s keys (``Firmware Version``, ``Software Version``: the driver's;
    None where not printed or ``NA``); other keys are not read."""

    firmware_version: str | None = None
    software_version: str | None = None

    @classmethod
    def of(cls, board: dict[str, str | None]) -> NpuBoardVersions:
        """The versions of a board's keys (:func:`parse_npu_board`)."""
        return msgspec.convert(board, cls)


@dataclass(frozen=True)
class VnpuInfo:
    """One chip's vNPU view, as ``npu-smi info -t info-vnpu`` prints it.

    ``resources`` maps AICORE, Memory (GB), AICPU, VPC… to ``{"free", "total"}`` (None where
    npu-smi prints NA); ``partitions`` are the vNPUs (``kind="vnpu"``, ``index`` = Vnpu ID,
    ``profile`` = template); ``declared_count`` is "Total number of vnpu".
    """

    resources: dict[str, dict[str, int | None]]
    partitions: tuple[Partition, ...]
    declared_count: int | None
    warnings: tuple[str, ...] = ()


def parse_npu_vnpu(text: str) -> VnpuInfo:
    """Parse ``npu-smi info -t info-vnpu -i N -c M`` (Ascend 310P/910B virtualisation).

    Source format: a Free/Total resource table (``AICORE Memory AICPU VPC VENC VDEC JPEGD JPEGE
    PNGD``, memory in GB), "Total number of vnpu: K", then rows ``Vnpu ID | Vgroup ID |
    Container ID | Status | Template Name``. Raises :class:`ParseError` when non-blank text has
    none of these markers.
    """
    if text.strip() and not re.search(r"Total number of vnpu|Vnpu ID|NPU resource static info|AICORE", text):
        raise ParseError("not `npu-smi info -t info-vnpu` output: no resource table and no vNPU list")
    lines = [ln.strip().strip("|").strip() for ln in text.splitlines()]
    warnings: list[str] = []
    resources: dict[str, dict[str, int | None]] = {}
    names = next((ln.split() for ln in lines if ln.startswith("AICORE")), [])
    values = next((ln.split() for ln in lines if re.match(r"^(\d+|NA)/(\d+|NA)\s", ln + " ")), [])
    for name, pair in zip(names, values, strict=False):  # a short values row leaves names unread
        free, _, total = pair.partition("/")
        resources[name] = {"free": v.integer(free), "total": v.integer(total)}
    count = re.search(r"Total number of vnpu:\s*(\d+)", text)
    partitions: list[Partition] = []
    for ln in lines:
        cells = [c.strip() for c in ln.split("|")]
        if len(cells) >= 5 and cells[0].isdecimal():
            partitions.append(
                Partition(
                    kind="vnpu",
                    index=int(cells[0]),
                    profile=v.text_or_none(cells[4]),
                    extra={
                        "vgroup_id": v.integer(cells[1]),
                        "container_id": v.text_or_none(cells[2]),
                        "status": v.text_or_none(cells[3]),
                    },
                )
            )
    declared = int(count.group(1)) if count else None
    if declared is not None and declared != len(partitions):
        warnings.append(f"Total number of vnpu: {declared} but {len(partitions)} vNPU row(s) listed")
    return VnpuInfo(resources, tuple(partitions), declared, tuple(warnings))


def _cann_version(root: str) -> str | None:
    for rel in (
        "usr/local/Ascend/ascend-toolkit/latest/version.cfg",
        "usr/local/Ascend/ascend-toolkit/latest/toolkit/version.info",
        "usr/local/Ascend/cann/version.cfg",
    ):
        path = Path(root) / rel
        try:
            for line in path.read_text(errors="replace").splitlines():
                key, sep, value = line.partition("=")
                if sep and "version" in key.lower():
                    return value.strip().strip('"[]').split(":")[-1] or None
        except OSError:
            continue
    return None


def probe_ascend(root: str = "/", env: dict[str, str] | None = None) -> Inventory:
    """Run ``npu-smi info`` (≤ :data:`NPU_SMI_TIMEOUT_S` s) and add device nodes and CANN version.

    Never raises for a missing driver or tool: ``global_errors`` says what failed. The
    ``extra["device_nodes"]`` entry is :meth:`AscendNodes.to_dict` for ``root``.
    """
    nodes = inspect_device_nodes(root, env).to_dict()
    cann = _cann_version(root)
    smi = shutil.which("npu-smi")
    if smi is None:
        return Inventory(
            vendor="ascend",
            source="none",
            cann_version=cann,
            global_errors=("npu-smi not found on PATH (no Ascend driver installed?)",),
            extra={"device_nodes": nodes},
        )
    try:
        done = subprocess.run(
            [smi, "info"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=NPU_SMI_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Inventory(
            vendor="ascend",
            source="none",
            cann_version=cann,
            extra={"device_nodes": nodes},
            global_errors=(f"npu-smi info: no answer within {NPU_SMI_TIMEOUT_S:.0f} s",),
        )
    try:
        inv = parse_npu_smi_info(done.stdout + done.stderr)
    except ParseError as exc:
        inv = Inventory(
            vendor="ascend",
            source="npu-smi",
            raw=done.stdout + done.stderr,
            global_errors=(f"npu-smi info exited {done.returncode}: {exc.message}",),
        )
    return Inventory(**{**inv.__dict__, "cann_version": cann, "extra": {**inv.extra, "device_nodes": nodes}})


resolve(__name__)
