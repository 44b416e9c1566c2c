"""Reader for NVIDIA Xid reports in kernel logs and k8s-device-plugin health-checker logs.

Source formats: ``NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, <message>``
lines as printed by the NVIDIA kernel driver into ``dmesg`` (plain, ``-T`` or ``--time-format
iso``), ``journalctl -k`` or ``/var/log/kern.log``; and the klog lines of NVIDIA's
k8s-device-plugin health checker (``XidCriticalError: Xid=79 on Device=GPU-…``,
``'nvidia.com/gpu' device marked unhealthy: GPU-…``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_hetero.probes.line_prefix import kernel_time, klog_stamp
from pytest_hetero.probes.model import Inventory, _plain
from pytest_hetero.probes.xid_codes import APPLICATION_XIDS

_KERNEL = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)\):\s*(?P<xid>\d+),\s*"
    r"(?:pid=(?P<pid>[^,]*),\s*(?:name=(?P<name>[^,]*),\s*)?)?(?P<msg>.*)"
)
_PLUGIN = re.compile(r"XidCriticalError: Xid=(?P<xid>\d+) on Device=(?P<dev>[^;,\s]+)(?P<msg>.*)")
_UNHEALTHY = re.compile(
    r"(?:marked unhealthy:\s*|marking device\s+)(?P<dev>GPU-[0-9A-Fa-f-]+|MIG-[0-9A-Fa-f/-]+)"
)


@dataclass(frozen=True)
class XidEvent:
    """One Xid report: number, PCI bus (``0000:9b:00``) or device UUID, process, time as printed.

    ``critical`` is False only for application Xids (:data:`APPLICATION_XIDS`);
    ``marked_unhealthy`` is True when the device plugin took the device out of allocatable.
    ``line`` is the 1-based line number in the parsed text.
    """

    xid: int
    source: str
    line: int
    pci_bus: str | None = None
    uuid: str | None = None
    pid: int | None = None
    process_name: str | None = None
    timestamp: str | None = None
    message: str = ""
    critical: bool = True
    marked_unhealthy: bool = False

    def to_dict(self) -> dict[str, object]:
        """Return the event as a JSON-ready dict."""
        return dict(_plain(self))


def _timestamp(prefix: str) -> str | None:
    """The time printed in the head of an Xid line: the kernel head's wall clock, a bracketed stamp, a klog
    stamp (the heads :mod:`pytest_hetero.probes.line_prefix` parses), else the first token."""
    wall, _, _ = kernel_time(prefix)
    if wall and not re.fullmatch(r"\d+\.\d+", wall):
        return wall  # syslog/journal/dmesg -T/iso wall clock wins over the uptime stamp after it
    bracket = re.search(r"\[([^\]]+)\]", prefix)
    if bracket:
        return bracket.group(1).strip()
    klog = klog_stamp(prefix)
    if klog:
        return klog
    return prefix.strip().split(" ")[0] or None


def parse_xid_log(text: str) -> list[XidEvent]:
    """Return every Xid event found in ``text`` (kernel log or device-plugin log), in order.

    Lines that are not Xid reports are ignored, so any text gives a list (empty when there
    is none); never raises. A device-plugin "marked unhealthy" line sets ``marked_unhealthy``
    on the earlier events of the same device UUID.
    """
    events: list[XidEvent] = []
    unhealthy: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        m = _KERNEL.search(line)
        if m:
            pid = m.group("pid")
            pid = pid.strip().strip("'\"") if pid is not None else None
            xid = int(m.group("xid"))
            events.append(
                XidEvent(
                    xid=xid,
                    source="kernel",
                    line=number,
                    pci_bus=m.group("bus"),
                    pid=int(pid) if pid and pid.isdecimal() else None,
                    process_name=(m.group("name") or "").strip().strip("'\"<>") or None,
                    timestamp=_timestamp(line[: m.start()]),
                    message=m.group("msg").strip(),
                    critical=xid not in APPLICATION_XIDS,
                )
            )
            continue
        m = _PLUGIN.search(line)
        if m:
            xid = int(m.group("xid"))
            events.append(
                XidEvent(
                    xid=xid,
                    source="device-plugin",
                    line=number,
                    uuid=m.group("dev"),
                    timestamp=_timestamp(line[: m.start()]),
                    message=m.group("msg").strip(" ;."),
                    critical=xid not in APPLICATION_XIDS,
                    marked_unhealthy="marking device as unhealthy" in m.group("msg"),
                )
            )
            continue
        u = _UNHEALTHY.search(line)
        if u:
            unhealthy.add(u.group("dev"))
    return [
        XidEvent(**{**e.__dict__, "marked_unhealthy": True}) if e.uuid in unhealthy else e for e in events
    ]


def unhealthy_devices(text: str) -> list[str]:
    """Return the device UUIDs a device-plugin log says were marked unhealthy, first-seen order."""
    seen: list[str] = []
    for m in _UNHEALTHY.finditer(text):
        if m.group("dev") not in seen:
            seen.append(m.group("dev"))
    return seen


def xid_inventory(text: str) -> Inventory:
    """Turn a kernel or device-plugin log into an :class:`Inventory` without devices.

    Critical Xids become ``global_errors`` (one line per Xid number and device, with count,
    first and last time); application Xids become ``warnings``. ``extra`` holds
    ``xid_events`` (list of :class:`XidEvent` dicts), ``unhealthy_devices`` (UUIDs),
    ``nvml_events`` (the device plugin's raw NVML ``EventType``/``EventData`` pairs),
    ``reset_recommended`` (the driver printed "needs to be reset"), ``hardware`` and ``kernel``.
    """
    events = parse_xid_log(text)
    groups: dict[tuple[int, str], list[XidEvent]] = {}
    for event in events:
        groups.setdefault((event.xid, event.pci_bus or event.uuid or "?"), []).append(event)
    errors: list[str] = []
    warnings: list[str] = []
    for (xid, where), group in groups.items():
        first, last = group[0], group[-1]
        where_text = f"PCI:{where}" if first.pci_bus else where
        line = (
            f"Xid {xid} on {where_text} x{len(group)} (first {first.timestamp}, last {last.timestamp})"
            f": {first.message}"
        )
        (errors if first.critical else warnings).append(line)
    source = (
        "device-plugin-log" if events and all(e.source == "device-plugin" for e in events) else "kernel-log"
    )
    if not events and "health.go" in text:
        source = "device-plugin-log"
    bad = unhealthy_devices(text)
    errors.extend(f"device {uuid} marked unhealthy by the device plugin" for uuid in bad)
    from pytest_hetero.probes.kernel_log import read_kernel_log

    log = read_kernel_log(text.splitlines())
    xid_buses = {r.bus for r in log.records if r.what == "xid"}
    for record in log.records:
        if record.what in ("reset_required", "fallen_off_bus") and record.bus in xid_buses:
            continue  # already reported by that GPU's Xid line
        if record.what in ("fallen_off_bus", "init_failed", "reset_required", "assertion", "api_mismatch"):
            where = f" on PCI:{record.bus}" if record.bus else ""
            line = f"{record.what.replace('_', ' ')}{where} ({record.timestamp}): {record.fields.message or ''}"
            if not any((record.fields.message if record.fields.message is not None else "?") in e for e in errors):
                errors.append(line.rstrip(": "))
    return Inventory(
        vendor="nvidia",
        source=source,
        global_errors=tuple(errors),
        warnings=tuple(warnings),
        raw=text,
        extra={
            "xid_events": [e.to_dict() for e in events],
            "unhealthy_devices": bad,
            "nvml_events": [
                {"event_type": int(m.group(1)), "event_data": int(m.group(2))}
                for m in re.finditer(r"EventType:(\d+) EventData:(\d+)", text)
            ],
            "reset_recommended": "needs to be reset" in text,
            "hardware": _first(r"Hardware name: ([^/,\n]+)", text),
            "kernel": _first(r"Tainted:[^\n]*?\s(\d+\.\d+\.\d+-\S+)", text),
        },
    )


def _first(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text)
    return m.group(1).strip() if m else None
