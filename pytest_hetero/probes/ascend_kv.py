"""Readers for ``npu-smi info -t <type> -i <id>`` key/value output and the ``-t topo`` matrix.

Source format (Huawei "npu-smi command reference", ``info -t common|usages|memory|board|health|
power|temp|…``): ``Key(unit) : value`` lines, indented or not, in groups separated by blank lines — NPU
level keys (``NPU ID``, ``Chip Count``), then one group per chip starting or ending with ``Chip ID``,
and on some boards an ``mcu`` group (``Chip Name : mcu``) whose ``Temperature(C)`` must not overwrite
the chip's. Full-width colons (``：``) from localized builds are accepted. ``-t topo``: a header row
``NPU0 NPU1 … CPU Affinity``, one row per NPU with the link type to each other NPU (``X`` self, ``HCCS``,
``PIX``, ``PXB``, ``PHB``, ``SYS``, ``NA``) and the CPU list, then a legend.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import msgspec

from pytest_hetero.declared import resolve

_KV = re.compile(r"^\s*(?P<key>[^:：]+?)\s*[:：]\s*(?P<value>.*?)\s*$")


class ChipKeys(msgspec.Struct, frozen=True, kw_only=True, rename={
        "chip_id": "Chip ID", "hbm_capacity": "HBM Capacity(MB)", "hbm_rate": "HBM Usage Rate(%)",
        "aicore_rate": "Aicore Usage Rate(%)"}):
    """The keys of a group the readers judge on, as printed (None: the group does not print it): ``Chip ID``,
    ``HBM Capacity(MB)``, ``HBM Usage Rate(%)`` and ``Aicore Usage Rate(%)`` (``-t usages``/``-t memory``)."""

    chip_id: str | None = None
    hbm_capacity: str | None = None
    hbm_rate: str | None = None
    aicore_rate: str | None = None


@dataclass
class NpuGroup:
    """One group of keys: ``scope`` (``npu``, ``chip``, ``mcu``), ``values`` as printed, 0-based ``lines``."""

    scope: str
    values: dict[str, str]
    lines: list[int] = field(default_factory=list)

    def chip_keys(self) -> ChipKeys:
        """The group's :class:`ChipKeys`, read from ``values`` (call it once the group is read)."""
        return msgspec.convert(self.values, ChipKeys)


@dataclass
class NpuKv:
    """``npu-smi info -t <type>``: ``query`` type (``common``/``usages``/… or None), ``npu_id``, groups."""

    query: str | None
    npu_id: int | None
    groups: list[NpuGroup]

    def chips(self) -> list[NpuGroup]:
        """The chip groups (those with a ``Chip ID``), in order."""
        return [g for g in self.groups if g.scope == "chip"]


def _scope(group: NpuGroup, key: str, value: str) -> None:
    """Let ``key`` decide the group's scope: ``Chip Name : mcu`` makes it the MCU's; ``Chip ID`` makes
    it a chip's (an NPU-level group that ends with ``Chip ID``, as ``-t usages`` prints, is chip 0),
    except in the MCU group."""
    if key == "Chip Name" and value.lower() == "mcu":
        group.scope = "mcu"
    if key != "Chip ID":
        return
    if group.scope == "npu" and len(group.values) > 2 and "NPU ID" in group.values:
        group.scope = "chip"
    elif group.scope != "mcu":
        group.scope = "chip"


@dataclass
class _KvScan:
    """The line-by-line read of ``npu-smi info -t``: the ``query`` and ``npu_id`` from the command line
    or the keys, the finished ``groups`` and the ``current`` one."""

    query: str | None = None
    npu_id: int | None = None
    groups: list[NpuGroup] = field(default_factory=list)
    current: NpuGroup = field(default_factory=lambda: NpuGroup("npu", {}))

    def close(self) -> None:
        """Finish the current group (kept when it has keys)."""
        if self.current.values:
            self.groups.append(self.current)

    def blank(self) -> None:
        """A blank line ends a group; the next one is a chip's unless nothing was kept yet."""
        self.close()
        self.current = NpuGroup("chip" if self.groups else "npu", {})

    def key(self, key: str, value: str, index: int) -> None:
        """A ``Key : value`` line; a key seen again in the group starts the next chip's group."""
        _scope(self.current, key, value)
        if key == "NPU ID" and value.isdecimal():
            self.npu_id = int(value)
        if key in self.current.values:
            self.groups.append(self.current)
            self.current = NpuGroup("chip", {})
        self.current.values[key] = value
        self.current.lines.append(index)


def parse_npu_kv(lines: list[str]) -> NpuKv:
    """Parse one ``npu-smi info -t`` output (its command line may come first). Never raises."""
    scan = _KvScan()
    for index, line in enumerate(lines):
        command = re.search(r"npu-smi info\s+-t\s+(\S+)(?:\s+-i\s+(\d+))?", line)
        if command:
            scan.query = command.group(1)
            if command.group(2):
                scan.npu_id = int(command.group(2))
        elif not line.strip():
            scan.blank()
        else:
            m = _KV.match(line)
            if m:
                scan.key(m.group("key").strip(), m.group("value").strip(), index)
    scan.close()
    return NpuKv(scan.query, scan.npu_id, scan.groups)


def _number(text: str | None) -> float | None:
    """A number ``npu-smi`` printed; None when not printed or not a number (``NA``, ``-``, "")."""
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class NpuUsage:
    """What ``npu-smi info -t usages -i N`` or ``-t memory -i N`` prints of its first chip, read once
    (:func:`parse_npu_usage`): ``hbm_capacity_mb`` (``HBM Capacity(MB)``), ``hbm_rate_pct`` (``HBM Usage
    Rate(%)``) and ``aicore_rate_pct`` (``Aicore Usage Rate(%)``); None where the output has no number for it."""

    hbm_capacity_mb: float | None = None
    hbm_rate_pct: float | None = None
    aicore_rate_pct: float | None = None


def parse_npu_usage(text: str) -> NpuUsage:
    """The :class:`NpuUsage` of one ``npu-smi info -t usages|memory -i N`` output (:func:`parse_npu_kv`; no chip
    group: every field None). Never raises."""
    chips = parse_npu_kv(text.splitlines()).chips()
    keys = chips[0].chip_keys() if chips else ChipKeys()
    return NpuUsage(hbm_capacity_mb=_number(keys.hbm_capacity), hbm_rate_pct=_number(keys.hbm_rate),
                    aicore_rate_pct=_number(keys.aicore_rate))


@dataclass
class NpuTopology:
    """``npu-smi info -t topo``: ``names`` (NPU0…), ``links`` (``(a, b) -> type``), ``affinity`` (NPU -> CPUs)."""

    names: list[str]
    links: dict[tuple[str, str], str]
    affinity: dict[str, str]
    lines: list[int]

    def counts(self) -> Counter[str]:
        """Link type -> number of ordered NPU pairs using it (self excluded), in the order first met."""
        return Counter(kind for (a, b), kind in self.links.items() if a != b)


def parse_npu_topo(lines: list[str]) -> NpuTopology:
    """Parse the ``-t topo`` matrix: rows are read by token (the header does not line up with the body
    as printed). Never raises."""
    names: list[str] = []
    links: dict[tuple[str, str], str] = {}
    affinity: dict[str, str] = {}
    used: list[int] = []
    for index, line in enumerate(lines):
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0] == "NPU0" and all(t.startswith("NPU") or t in ("CPU", "Affinity") for t in tokens):
            names = [t for t in tokens if re.fullmatch(r"NPU\d+", t)]
            used.append(index)
            continue
        if names and re.fullmatch(r"NPU\d+", tokens[0]) and len(tokens) >= len(names) + 1:
            for name, kind in zip(names, tokens[1 : 1 + len(names)], strict=True):
                links[(tokens[0], name)] = kind
            if len(tokens) > len(names) + 1:
                affinity[tokens[0]] = tokens[len(names) + 1]
            used.append(index)
    return NpuTopology(names, links, affinity, used)


resolve(__name__)
