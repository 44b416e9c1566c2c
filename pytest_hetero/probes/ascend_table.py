"""Reader for the ``npu-smi info`` table (Ascend 310/310P/910/910B, npu-smi 20.x … 25.x).

Source format (Huawei Ascend driver docs, "npu-smi info"): version line, a two-line header,
then for every chip an NPU row (``id name | health | power temp [hugepages]``) followed by its
chip row (``chip [device] | bus-id | aicore memory [hbm]``); multi-chip cards either repeat the
NPU row per chip or print it once before several chip rows. Process table optional.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import msgspec

from pytest_hetero.declared import resolve
from pytest_hetero.errors import ParseError
from pytest_hetero.probes import _values as v
from pytest_hetero.probes.ascend_errors import match_dcmi
from pytest_hetero.probes.model import Device, DeviceProcess, Health, Inventory, Partition

HEALTH: dict[str, Health] = {"ok": "ok", "warning": "warning", "alarm": "critical", "critical": "critical"}
"""npu-smi health words → normalised health (Warning = minor alarm, Alarm = major, Critical)."""

_VERSION = re.compile(r"npu-smi\s+(?P<smi>\S+)\s+Version:\s*(?P<ver>\S+)")
_BUS = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
_ERRORS: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = (
    (
        re.compile(r"dcmi mod(?:ule|el) initiali[sz]ed? failed[^\n]*"),
        "npu-smi could not reach the Ascend driver",
        (),
    ),
    (re.compile(r"npu-smi: (?:command )?not found[^\n]*"), "npu-smi not installed", ()),
    (
        re.compile(r"Card number is 0[^\n]*|No NPU device[^\n]*", re.IGNORECASE),
        "no Ascend devices found",
        ("card number is 0", "no npu device"),
    ),
)
"""(pattern, meaning, words): ``words`` are the lower-case literals a case-insensitive pattern needs."""
_SLASH = re.compile(r"\s*/\s*")
_WORDS = re.compile(r"[A-Za-z_ ]+")
_TEMPLATE = re.compile(r"(.+?)(vir\d+\S*)")
_TOP = ["Power(W)", "Temp(C)", "Hugepages-Usage(page)"]
_BOTTOM = ["AICore(%)", "Memory-Usage(MB)", "HBM-Usage(MB)"]


class _NpuCells(msgspec.Struct, frozen=True, kw_only=True,
                rename={"power": "Power(W)", "temp": "Temp(C)", "hugepages": "Hugepages-Usage(page)"}):
    """An NPU row's values under the header's columns, as printed (None: no such column in this layout, or no value
    under it; ``hugepages`` is ``used / total``)."""

    power: str | None = None
    temp: str | None = None
    hugepages: str | None = None


class _ChipCells(msgspec.Struct, frozen=True, kw_only=True,
                 rename={"aicore": "AICore(%)", "memory": "Memory-Usage(MB)", "hbm": "HBM-Usage(MB)"}):
    """A chip row's values under the header's columns, as printed (None: no such column in this layout, or no
    value under it; ``memory`` and ``hbm`` are ``used / total``)."""

    aicore: str | None = None
    memory: str | None = None
    hbm: str | None = None


@dataclass
class _Npu:
    npu_id: int
    name: str | None
    health_raw: str
    values: _NpuCells
    chips: list[tuple[list[str], str, _ChipCells]] = field(default_factory=list)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _columns(cell: str) -> list[str]:
    return cell.split()


def _values(cell: str, names: list[str], where: str, warnings: list[str]) -> dict[str, str]:
    tokens = _SLASH.sub("/", cell).split()
    if len(tokens) != len(names) and tokens:
        warnings.append(f"{where}: {len(tokens)} value(s) under {len(names)} column(s) {names}")
    return dict(zip(names, tokens, strict=False))  # a count mismatch is warned above, then cut to the shorter


def _pair(text: str | None) -> tuple[int | None, int | None]:
    used, _, total = (text or "").partition("/")
    return v.integer(used), v.integer(total)


def _device(npu: _Npu, chip: tuple[list[str], str, _ChipCells] | None, id_name: str | None) -> Device:
    ids, bus, bottom = chip or ([], "", _ChipCells())
    chip_id = v.integer(ids[0]) if ids else None
    second = v.integer(ids[1]) if len(ids) > 1 else None
    device_id = second if id_name == "device" else None
    phy_id = second if id_name == "phy-id" else None
    hp_used, hp_total = _pair(npu.values.hugepages)
    ddr_used, ddr_total = _pair(bottom.memory)
    hbm_used, hbm_total = _pair(bottom.hbm)
    use_hbm = bool(hbm_total)
    health = HEALTH.get(npu.health_raw.lower(), "unknown")
    errors = () if health == "ok" else (f"npu-smi health reads {npu.health_raw or 'nothing'}",)
    index: int | None
    if device_id is not None:
        index = device_id
    elif phy_id is not None:
        index = phy_id
    else:
        index = npu.npu_id if len(npu.chips) <= 1 else None
    template = _TEMPLATE.fullmatch(npu.name or "")
    slices: tuple[Partition, ...] = ()
    if template:  # inside a vNPU container npu-smi names the chip "<model><template>", e.g. 310Pvir04
        used, total = (hbm_used, hbm_total) if use_hbm else (ddr_used, ddr_total)
        slices = (
            Partition(kind="vnpu", profile=template.group(2), memory_total_mib=total, memory_used_mib=used),
        )
    return Device(
        vendor="ascend",
        index=index,
        partitions=slices,
        name=npu.name,
        bus_id=v.text_or_none(bus),
        memory_total_mib=hbm_total if use_hbm else ddr_total,
        memory_used_mib=hbm_used if use_hbm else ddr_used,
        health=health,
        health_raw=npu.health_raw or None,
        temperature_c=v.number(npu.values.temp),
        power_w=v.number(npu.values.power),
        utilisation_pct=v.number(bottom.aicore),
        errors=errors,
        extra={
            "npu_id": npu.npu_id,
            "chip_id": chip_id,
            "device_id": device_id,
            "phy_id": phy_id,
            "memory_used_mb": ddr_used,
            "memory_total_mb": ddr_total,
            "hbm_used_mb": hbm_used,
            "hbm_total_mb": hbm_total,
            "hugepages_used": hp_used,
            "hugepages_total": hp_total,
            "vnpu_template": template.group(2) if template else None,
        },
    )


def _problems(text: str) -> list[str]:
    # a case-insensitive scan costs ~15 ns a character; in ASCII text (all real npu-smi output)
    # lower() matches exactly as IGNORECASE does, so a substring test tells when to skip it
    low = text.lower() if text.isascii() else None
    found: list[str] = []
    for pattern, meaning, words in _ERRORS:
        if words and low is not None and not any(word in low for word in words):
            continue
        for m in pattern.finditer(text):
            line = text[text.rfind("\n", 0, m.start()) + 1 : (text.find("\n", m.end()) + 1 or len(text) + 1) - 1]
            code = match_dcmi(line) if "dcmi" in meaning or "Ascend driver" in meaning else None
            if code is not None:
                found.append(f"DCMI {code.value} {code.name}: {code.meaning}: {line.strip()}")
            else:
                found.append(f"{meaning}: {m.group(0).strip()}")
    return found


@dataclass
class _Columns:
    """The table's layout as its two-line header prints it: value columns of the NPU row (``top``) and
    of the chip row (``bottom``), the name of the chip row's second id (``device``/``phy-id``), and the
    index of the first line after the header."""

    top: list[str]
    bottom: list[str]
    id_name: str | None
    start: int


def _header_columns(lines: list[str], header: int | None) -> _Columns:
    """Column names from the header at line ``header``; the classic layout's when there is none."""
    if header is None:
        return _Columns(_TOP, _BOTTOM, None, 0)
    head_a = _cells(lines[header])
    head_b = _cells(lines[header + 1]) if header + 1 < len(lines) else []
    first = _columns(head_b[0]) if head_b else []
    return _Columns(
        top=_columns(head_a[2]) if len(head_a) > 2 else _TOP,
        bottom=_columns(head_b[2]) if len(head_b) > 2 else _BOTTOM,
        id_name=first[1].lower() if len(first) > 1 else None,
        start=header + 2,
    )


@dataclass
class _TableScan:
    """The row-by-row read of the table body: NPUs with their chip rows, processes by ``(npu, chip)``,
    whether the process table has begun, warnings in the order they arise."""

    columns: _Columns
    warnings: list[str]
    npus: list[_Npu] = field(default_factory=list)
    procs: dict[tuple[int, int], list[DeviceProcess]] = field(default_factory=dict)
    in_procs: bool = False

    def row(self, number: int, stripped: str) -> None:
        """One ``|``-bordered line (1-based ``number``); borders and blank rows are skipped."""
        if not stripped.startswith("|") or not stripped.strip("|=-+ "):
            return
        cells = _cells(stripped)
        if "Process id" in stripped or "Process ID" in stripped:
            self.in_procs = True
        elif len(cells) < 3:
            return
        elif self.in_procs:
            self._process_row(cells)
        else:
            self._device_row(number, stripped, cells)

    def _process_row(self, cells: list[str]) -> None:
        """``npu [chip] | pid | name | memory``: a table without a Chip column puts the process on chip 0."""
        ids = cells[0].split()
        if ids and all(i.isdecimal() for i in ids[:2]):
            chip = int(ids[1]) if len(ids) > 1 else 0
            self.procs.setdefault((int(ids[0]), chip), []).append(
                DeviceProcess(
                    pid=v.integer(cells[1]),
                    name=v.text_or_none(cells[2]),
                    used_memory_mib=v.integer(cells[3]) if len(cells) > 3 else None,
                    chip=chip,
                )
            )

    def _device_row(self, number: int, stripped: str, cells: list[str]) -> None:
        """A chip row (bus id in the second cell, or the row right after an NPU row that has no chip yet)
        or an NPU row (``id name | health | values``)."""
        ids = cells[0].split()
        npus, where = self.npus, f"line {number}"
        if _BUS.match(cells[1]) or (npus and not npus[-1].chips and not _WORDS.fullmatch(cells[1])):
            if not npus:
                self.warnings.append(f"{where}: chip row before any NPU row ignored")
                return
            bottom = msgspec.convert(_values(cells[2], self.columns.bottom, where, self.warnings), _ChipCells)
            npus[-1].chips.append((ids, cells[1], bottom))
        elif ids and ids[0].isdecimal():
            top = msgspec.convert(_values(cells[2], self.columns.top, where, self.warnings), _NpuCells)
            npus.append(_Npu(int(ids[0]), " ".join(ids[1:]) or None, cells[1], top))
        else:
            self.warnings.append(f"{where}: unrecognised row '{stripped[:60]}'")

    def devices(self) -> list[Device]:
        """One Device per chip (an NPU without a chip row gives one, with a warning), processes attached."""
        out: list[Device] = []
        for npu in self.npus:
            if not npu.chips:
                self.warnings.append(f"NPU {npu.npu_id} has no chip row (output truncated?)")
                out.append(_device(npu, None, self.columns.id_name))
            for chip_row in npu.chips:
                dev = _device(npu, chip_row, self.columns.id_name)
                key = (npu.npu_id, dev.extra["chip_id"] if dev.extra["chip_id"] is not None else -1)
                out.append(Device(**{**dev.__dict__, "processes": tuple(self.procs.get(key, []))}))
        return out


def parse_npu_smi_info(text: str) -> Inventory:
    """Parse ``npu-smi info`` output into an :class:`Inventory` (source ``npu-smi``), one Device per chip.

    Device ``index`` is the logical ``Device`` (or ``Phy-ID``) column, else the NPU id for
    single-chip NPUs; memory is HBM when the HBM column reports a total, else Memory-Usage (MB,
    as printed, = MiB); ``utilisation_pct`` is AICore %. Health: OK → ok, Warning → warning,
    Alarm/Critical → critical, anything else → unknown. Raises :class:`ParseError` when the
    text has no npu-smi version line, no npu-smi header and no npu-smi error message.
    """
    warnings: list[str] = []
    problems = _problems(text)
    if not text.strip():
        return Inventory(
            vendor="ascend", source="npu-smi", raw=text, warnings=("input is empty: npu-smi printed nothing",)
        )
    version = _VERSION.search(text)
    lines = text.splitlines()
    header = next(
        (i for i, ln in enumerate(lines) if "Health" in ln and "NPU" in ln and ln.lstrip().startswith("|")),
        None,
    )
    if version is None and header is None and not problems:
        raise ParseError(
            "not `npu-smi info` output: no 'npu-smi <version>  Version: <driver>' line "
            "and no 'NPU | Health | Power(W)' header",
            hint="expected the output of `npu-smi info`",
        )
    scan = _TableScan(_header_columns(lines, header), warnings)
    start = scan.columns.start
    for number, line in enumerate(lines[start:], start=start + 1):
        scan.row(number, line.strip())
    devices = scan.devices()
    if version and not scan.npus and not problems:
        warnings.append("no NPU rows found after the header (output truncated?)")
    return Inventory(
        vendor="ascend",
        source="npu-smi",
        tool_version=version.group("smi") if version else None,
        driver_version=version.group("ver") if version else None,
        devices=tuple(devices),
        global_errors=tuple(problems),
        warnings=tuple(warnings),
        raw=text,
        extra={
            "npu_count": len({n.npu_id for n in scan.npus}),
            "chip_count": sum(max(1, len(n.chips)) for n in scan.npus),
        },
    )


resolve(__name__)
