"""Nodes as operators paste them: ``kubectl describe node`` text (whole or excerpts), node objects,
label dumps, HAMi device registration annotations.

``kubectl describe node`` (kubectl 1.15-1.34): top-level ``Key:  value`` fields (``Name``, ``Roles``,
``CreationTimestamp``, ``Unschedulable``), multi-line fields whose continuation lines are indented to
the value column (``Labels``, ``Annotations``, ``Taints``), sections (``Addresses:``, ``Capacity:``,
``Allocatable:``, ``Lease:``, ``System Info:``, ``Conditions:`` table, ``Allocated resources:`` table with
``Resource  Requests  Limits``, ``Events:``), and elisions (``....``) from trimmed captures.

HAMi registers devices in the ``hami.io/node-nvidia-register`` (and ``-ascend-…``) annotation: JSON
(HAMi ≥ 2.4: ``[{"id","count","devmem","devcore","type","mode","health"}]``) or the older text form
``<uuid>,<count>,<devmem MiB>,<devcore>,<type>,<numa>,<health>:`` per device; ``hami.io/node-handshake``
reads ``Requesting_<time>`` (scheduler asked), ``Reported_<time>`` (plugin answered) or ``Deleted_<time>``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import NamedTuple

import msgspec

from pytest_hetero.declared import as_written

_TOP = re.compile(r"^(?P<key>[A-Z][\w -]{0,40}):(?:\s+(?P<value>.*?))?\s*$")


class NodeCondition(NamedTuple):
    """A row of a described node's ``Conditions:`` table: its ``Type`` and ``Status`` cells ("" without such a
    column), its ``Reason`` and ``Message`` cells (None without such a column) and its 0-based ``line``."""

    type: str
    status: str
    reason: str | None
    message: str | None
    line: int


@dataclass
class NodeText:
    """A parsed ``kubectl describe node`` (any excerpt): the top-level fields the readers use (``Name``, ``Roles``,
    ``CreationTimestamp``, ``Unschedulable``: the last non-empty value printed, None when not printed), the
    ``Lease:`` section's ``RenewTime`` and the ``Addresses:`` section's ``InternalIP`` (the last value printed, ""
    when printed empty, None when not printed), multi-line lists, sections; every entry keeps its 0-based line
    indexes in ``where`` (``"Taints"`` -> [12, 13])."""

    name: str | None = None
    roles: str | None = None
    created: str | None = None
    unschedulable: str | None = None
    lease_renew: str | None = None
    internal_ip: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: list[str] = field(default_factory=list)
    capacity: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, str] = field(default_factory=dict)
    allocated: dict[str, tuple[str, str]] = field(default_factory=dict)
    conditions: list[NodeCondition] = field(default_factory=list)
    event_lines: list[int] = field(default_factory=list)
    where: dict[str, list[int]] = field(default_factory=dict)

    def lines_of(self, *entries: str) -> list[int]:
        """The 0-based line indexes of ``entries`` (``"Name"``, ``"Lease.RenewTime"``…), entry by entry; an
        entry the text does not have adds none."""
        return [index for entry in entries for index in self.where.get(entry, ())]


_KEY_VALUE_SECTIONS = ("Capacity", "Allocatable", "Addresses", "Lease")
"""Sections of ``key: value`` lines (Capacity and Allocatable fill the :class:`NodeText` map of their name; the
``InternalIP`` of Addresses and the ``RenewTime`` of Lease fill its attribute)."""


@dataclass
class _NodeScan:
    """The line-by-line read of ``kubectl describe node``: the ``section`` being read (the latest
    top-level key), the multi-line field whose continuation lines follow (``multi``), the column
    starts of the ``Conditions:`` table."""

    node: NodeText
    section: str = ""
    multi: str = ""
    cond_cols: list[tuple[str, int]] = field(default_factory=list)

    def top(self, key: str, value: str, index: int) -> None:
        """A top-level ``Key: value`` line: a multi-line field's first line, ``Events:``, or a field."""
        node = self.node
        self.section, self.multi = key, ""
        node.where.setdefault(key, []).append(index)
        if key in ("Labels", "Annotations", "Taints"):
            self.multi = key
            _multi(node, key, value, index)
        elif key == "Events":
            node.event_lines.append(index)
        elif value:
            self._field(key, value)

    def _field(self, key: str, value: str) -> None:
        """A top-level field with a value: the ones :class:`NodeText` keeps (any other is skipped)."""
        node = self.node
        if key == "Name":
            node.name = value
        elif key == "Roles":
            node.roles = value
        elif key == "CreationTimestamp":
            node.created = value
        elif key == "Unschedulable":
            node.unschedulable = value

    def body(self, line: str, index: int) -> None:
        """An indented line: an event row, a multi-line field's continuation, or a section's line."""
        if self.section == "Events":
            self.node.event_lines.append(index)
        elif self.multi and line.startswith((" ", "\t")):
            _multi(self.node, self.multi, line.strip(), index)
        elif self.section in _KEY_VALUE_SECTIONS:
            self._key_value(line.strip(), index)
        elif self.section == "Allocated resources":
            self._allocated(line.strip(), index)
        elif self.section == "Conditions":
            self._condition(line, index)

    def _key_value(self, body: str, index: int) -> None:
        key, sep, value = body.partition(":")
        if sep:
            node, name = self.node, key.strip()
            if self.section == "Capacity":
                node.capacity[name] = value.strip()
            elif self.section == "Allocatable":
                node.allocatable[name] = value.strip()
            elif (self.section, name) == ("Addresses", "InternalIP"):
                node.internal_ip = value.strip()
            elif (self.section, name) == ("Lease", "RenewTime"):
                node.lease_renew = value.strip()
            self.node.where.setdefault(f"{self.section}.{name}", []).append(index)

    def _allocated(self, body: str, index: int) -> None:
        """A row of the ``Resource  Requests  Limits`` table: requests and limits with their ``(N%)``."""
        cells = body.split()
        if len(cells) >= 3 and not body.startswith(("Resource", "--------", "(Total")):
            self.node.allocated[cells[0]] = (" ".join(cells[1:3]) if "(" in cells[2] else cells[1],
                                             " ".join(cells[3:5]) if len(cells) > 4 else cells[-1])
            self.node.where.setdefault(f"Allocated.{cells[0]}", []).append(index)

    def _condition(self, line: str, index: int) -> None:
        """The ``Conditions:`` table: its header gives the column starts; a row is cut at them."""
        body = line.strip()
        if body.startswith("Type"):
            self.cond_cols = [(m.group(0), m.start()) for m in re.finditer(r"\S+", line)]
            return
        if body.startswith("----") or not self.cond_cols:
            return
        cols = self.cond_cols
        row = {name: line[start : cols[i + 1][1] if i + 1 < len(cols) else None].strip()
               for i, (name, start) in enumerate(cols)}
        self.node.conditions.append(NodeCondition(row.get("Type", ""), row.get("Status", ""), row.get("Reason"),
                                                  row.get("Message"), index))


def parse_describe_node(lines: list[str]) -> NodeText:
    """Parse ``kubectl describe node`` lines. Never raises; unknown lines are skipped."""
    scan = _NodeScan(NodeText())
    for index, line in enumerate(lines):
        if not line.strip() or line.strip().startswith(("....", "…")):
            continue
        top = _TOP.match(line)
        if top and not line.startswith((" ", "\t")):
            scan.top(top.group("key"), (top.group("value") or "").strip(), index)
        else:
            scan.body(line, index)
    return scan.node


def _multi(node: NodeText, key: str, value: str, index: int) -> None:
    if not value or value == "<none>":
        return
    node.where.setdefault(key, []).append(index)
    if key == "Taints":
        node.taints.append(value)
    elif key == "Labels":
        k, _, val = value.partition("=")
        node.labels[k] = val
    else:
        k, _, val = value.partition(":")
        node.annotations[k.strip()] = val.strip()


@dataclass
class HamiDevice:
    """One device HAMi registered: ``id``, split ``count``, ``devmem`` (MiB), ``devcore`` (%), ``type``,
    ``mode``, ``numa``, ``health``."""

    id: str
    count: int | None
    devmem: int | None
    devcore: int | None
    type: str
    health: bool | None
    mode: str | None = None
    numa: int | None = None


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def parse_hami_register(value: str | list[object]) -> list[HamiDevice]:
    """Parse a ``hami.io/node-*-register`` annotation (JSON list or the older ``a,b,c…:`` text). Never raises."""
    data: object = value
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                data = json.loads(text)
            except ValueError:
                data = None
        else:
            devices = []
            for entry in filter(None, (e.strip() for e in text.split(":"))):
                parts = entry.split(",")
                if len(parts) >= 5:
                    devices.append(HamiDevice(parts[0], _int(parts[1]), _int(parts[2]), _int(parts[3]), parts[4],
                                              parts[-1].strip().lower() == "true" if len(parts) >= 7 else None,
                                              numa=_int(parts[5]) if len(parts) >= 7 else None))
            return devices
    out = []
    for item in data if isinstance(data, list) else []:
        if isinstance(item, dict):
            out.append(_json_device(item))
    return out


class _HamiEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One device of HAMi's JSON registration (HAMi >= 2.4, ``pkg/util`` ``DeviceInfo``'s JSON fields as far as the
    reader uses them), each value as written: absent or null reads as None (``id`` and ``type`` as ""). A value of
    another type than HAMi writes is not refused here: :func:`_json_device` narrows each one."""

    id: object = ""
    count: object = None
    devmem: object = None
    devcore: object = None
    type: object = ""
    mode: object = None
    health: object = None
    numa: object = None


def _json_device(item: dict[object, object]) -> HamiDevice:
    """The device of one JSON (or YAML) registration entry (:func:`~pytest_hetero.declared.as_written`: never
    raises). Counts read as integers (None when not one), ``health`` only a boolean, ``mode`` as text when it is a
    non-empty value or ""."""
    entry = as_written(item, _HamiEntry)
    mode = entry.mode
    return HamiDevice(str(entry.id), _int(entry.count), _int(entry.devmem), _int(entry.devcore), str(entry.type),
                      entry.health if isinstance(entry.health, bool) else None,
                      mode=str(mode) if mode or mode == "" else None, numa=_int(entry.numa))


def is_hami_register(value: object) -> bool:
    """True for a JSON list of HAMi device registrations."""
    return isinstance(value, list) and bool(value) and all(
        isinstance(x, dict) and "devmem" in x and ("count" in x or "devcore" in x) for x in value
    )


def handshake(value: str) -> tuple[str, str]:
    """``Requesting_2024.03.13 14:41:43`` -> (``Requesting``, ``2024.03.13 14:41:43``)."""
    state, _, when = value.partition("_")
    return state, when
