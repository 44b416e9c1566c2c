"""Reader for kernel logs as operators paste them: ``dmesg`` (plain, ``-T``, ``--time-format iso``,
``--decode``), ``journalctl -k`` / ``/var/log/kern.log`` / ``/var/log/messages`` (syslog prefix, often
followed by the kernel uptime stamp) and ``kernel:``-prefixed greps.

What is read (NVIDIA open and proprietary kernel modules, R450 … R6xx wording):

* ``NVRM: Xid (PCI:0000:9b:00): 119, pid=…, name=…, <message>`` (also the pre-R450 ``Xid (0000:01:00): 13,
  <hex words>``), newer drivers' ``… caused by previous Xid N`` tail, GSP ``Expected function N (NAME)``;
* ``NVRM: GPU at PCI:0000:9b:00: GPU-<uuid>`` and ``NVRM: GPU Board Serial Number: …`` (PCI → UUID map);
* ``GPU has fallen off the bus`` (with or without an Xid 79), ``RmInitAdapter failed`` /
  ``rm_init_adapter failed``, ``The GPU likely needs to be reset`` / ``needs to be reset``,
  ``nvAssertOkFailedNoLog: Assertion failed: … [NV_ERR_…] (0x…)``, ``API mismatch: the client has the
  version X, but this kernel module has the version Y``, ``loading NVIDIA UNIX … Kernel Module  <ver>``;
* NVSwitch ``SXid (PCI:…): N``; ``nvidia-peermem … ERROR detected invalid context`` (noise, not a GPU
  fault); the kernel OOM killer; ``Hardware name:`` and the kernel release from a ``Tainted:`` line.

Timestamps are kept as printed; when a syslog wall-clock prefix and a dmesg uptime stamp are both on a
line, the wall-clock one is the timestamp and the uptime is kept in ``uptime``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_hetero.probes.line_prefix import kernel_time

_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.\d)?)\):\s*(?P<xid>\d+),\s*"
    r"(?:pid=(?P<pid>'[^']*'|[^,\s]*),\s*)?(?:name=(?P<name>[^,]*),\s*)?(?P<msg>.*)$"
)
_SXID = re.compile(r"SXid \((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)\):\s*(?P<sxid>\d+),\s*(?P<msg>.*)$")
_GPU_AT = re.compile(
    r"NVRM: GPU at (?:PCI:)?(?P<bus>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}):\s*(?P<uuid>GPU-[0-9a-fA-F-]+)"
)
_SERIAL = re.compile(r"NVRM: GPU Board Serial Number:\s*(?P<serial>\S+)")
_BUS_IN = re.compile(r"(?:PCI:|GPU )?(?P<bus>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.\d)?")
_OFF_BUS = re.compile(r"GPU has fallen off the bus|fallen off the bus and is not responding", re.IGNORECASE)
_THE_GPU = re.compile(r"NVRM: The NVIDIA GPU (?P<bus>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.\d)?)")
_PCI_ID = re.compile(r"\(PCI ID: (?P<id>[0-9a-fA-F]{4}:[0-9a-fA-F]{4})\)")
_PROBE = re.compile(r"nvidia(?:-nvswitch)?: probe of (?P<bus>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.\d)?) "
                    r"failed with error (?P<err>-?\d+)|NVRM: The NVIDIA probe routine failed for (?P<n>\d+) device")
_FIRMWARE = re.compile(r"Direct firmware load for (?P<file>nvidia/\S+) failed with error (?P<err>-?\d+)")
_INIT = re.compile(
    r"RmInitAdapter failed!?\s*(?P<code>\([^)]*\))?|rm_init_adapter failed(?:, device minor number (?P<minor>\d+))?"
)
_RESET = re.compile(r"(?:likely )?needs? to be reset|reset required", re.IGNORECASE)
_ASSERT = re.compile(r"Assertion failed: (?P<what>.*?) \[(?P<err>NV_ERR_\w+)\] \((?P<hex>0x[0-9a-fA-F]+)\)")
_API = re.compile(r"API mismatch: the client has the version (?P<client>\d+(?:\.\d+)+), "
                  r"but\s+this kernel module has the version (?P<module>\d+(?:\.\d+)+)")
_LOADING = re.compile(r"NVRM: loading NVIDIA UNIX \S+ Kernel Module\s+(?P<version>[\d.]+)")
_PEERMEM = re.compile(r"nvidia-peermem .*ERROR detected invalid context")
_OOM = re.compile(r"Out of memory: Kill(?:ed)? process (?P<pid>\d+) \((?P<name>[^)]*)\)")
_CAUSE = re.compile(r"caused by previous Xid (?P<cause>\d+)")
_FUNCTION = re.compile(r"Expected function (?P<n>\d+) \((?P<name>\w+)\)")
_GSP_GPU = re.compile(r"\b(GPU\d+) GSP\b")
_CHANNEL = re.compile(r"\bCh(?:annel)? (?P<ch>[0-9a-fA-F]{8})\b")
_HARDWARE = re.compile(r"Hardware name: (?P<hw>[^/,\n]+?)(?:/|,|$)")
_KERNEL_RELEASE = re.compile(r"Tainted:.*?\s(?P<release>\d+\.\d+\.\d+-\S+)")


@dataclass
class KernelFields:
    """What a recognised kernel line says beside its kind, each as printed (None: the line does not say it).

    Xid: ``xid`` (number), ``message``, ``pid`` and ``process`` when known, the ``cause`` (``caused by previous
    Xid N``), GSP ``gpu_label`` (``GPU3``), ``channel``, GSP ``function`` (``N (name)``); SXid: ``sxid`` and
    ``message``; fallen off the bus: ``message`` and the ``pci_id`` (``10de:2330``) of the lines above; probe failure:
    the ``error`` of the per-device line, ``devices_failed`` and the ``summary_index`` (line) of the summary;
    firmware: ``file`` and ``error``; RmInitAdapter: ``message``, ``code``, ``minor``; assertion: ``assertion``,
    ``error`` (``NV_ERR_*``), ``status`` (hex) and ``message``; API mismatch: ``client`` and ``module`` versions;
    reset required: ``message``; OOM kill: ``pid`` and ``process``."""

    xid: str | None = None
    message: str | None = None
    pid: str | None = None
    process: str | None = None
    cause: str | None = None
    gpu_label: str | None = None
    channel: str | None = None
    function: str | None = None
    sxid: str | None = None
    pci_id: str | None = None
    error: str | None = None
    devices_failed: str | None = None
    summary_index: str | None = None
    file: str | None = None
    code: str | None = None
    minor: str | None = None
    assertion: str | None = None
    status: str | None = None
    client: str | None = None
    module: str | None = None


@dataclass
class KernelRecord:
    """One recognised kernel line: ``what`` (``xid``, ``sxid``, ``fallen_off_bus``, ``init_failed``,
    ``reset_required``, ``assertion``, ``api_mismatch``, ``peermem``, ``oom_kill``), its 0-based
    ``index`` in the block, time as printed (``timestamp``; ``uptime`` when a wall clock was also
    printed), PCI ``bus`` (``0000:9b:00``), the parsed ``fields``."""

    what: str
    index: int
    timestamp: str | None
    bus: str | None = None
    uptime: str | None = None
    fields: KernelFields = field(default_factory=KernelFields)


@dataclass
class KernelLog:
    """What a kernel log block says: ``records`` in order plus context: ``uuids`` (bus → GPU UUID),
    ``serials`` (bus → board serial), ``driver_version``, ``hardware``, ``kernel_release``,
    ``lines`` (number of lines read)."""

    records: list[KernelRecord]
    uuids: dict[str, str]
    serials: dict[str, str]
    driver_version: str | None
    hardware: str | None
    kernel_release: str | None
    lines: int


def line_time(line: str) -> tuple[str | None, str | None, int]:
    """Return ``(timestamp, uptime, end of prefix)`` for one kernel line; the timestamp is the wall
    clock when one was printed, else the uptime stamp, else None (the one kernel-head parser:
    :func:`pytest_hetero.probes.line_prefix.kernel_time`)."""
    return kernel_time(line)


def _bus(text: str) -> str | None:
    m = _BUS_IN.search(text)
    return m.group("bus").lower() if m else None


def _nvrm_text(line: str) -> str:
    """The line from ``NVRM`` on (the whole line when it has none), stripped."""
    return line[max(0, line.find("NVRM")) :].strip()


def _nvrm_bus(line: str) -> str | None:
    """The PCI bus printed after ``NVRM:`` (anywhere on the line when there is no ``NVRM:``)."""
    return _bus(line.split("NVRM:", 1)[-1])


@dataclass
class _KernelScan:
    """What :func:`read_kernel_log` has gathered so far (the fields of :class:`KernelLog`) plus
    ``last_bus``, the GPU the latest Xid or ``GPU at`` line named (a serial number or a bare reset
    message belongs to it)."""

    lines: list[str]
    records: list[KernelRecord] = field(default_factory=list)
    uuids: dict[str, str] = field(default_factory=dict)
    serials: dict[str, str] = field(default_factory=dict)
    driver: str | None = None
    hardware: str | None = None
    release: str | None = None
    last_bus: str | None = None

    def add(self, what: str, index: int, bus: str | None = None, fields: KernelFields | None = None) -> None:
        """Record line ``index`` as ``what`` with its time as printed."""
        stamp, uptime, _ = line_time(self.lines[index])
        self.records.append(KernelRecord(what, index, stamp, bus, uptime if stamp != uptime else None,
                                         fields or KernelFields()))


def _xid_fields(xid: re.Match[str], line: str) -> KernelFields:
    """Fields of an Xid line: number, message, pid and process when known, ``caused by previous Xid``,
    GSP GPU label, channel, GSP ``Expected function``."""
    pid = (xid.group("pid") or "").strip("'\" ")
    name = (xid.group("name") or "").strip().strip("<>'\"")
    cause, label, channel = (m.group(1) if m else None for m in (p.search(line) for p in (_CAUSE, _GSP_GPU, _CHANNEL)))
    fn = _FUNCTION.search(line)
    return KernelFields(xid=xid.group("xid"), message=xid.group("msg").strip(),
                        pid=pid if pid and pid != "<unknown>" else None,
                        process=name if name and name != "unknown" else None, cause=cause, gpu_label=label,
                        channel=channel, function=f"{fn.group('n')} ({fn.group('name')})" if fn else None)


def _xid(scan: _KernelScan, index: int, line: str) -> bool:
    xid = _XID.search(line)
    if not xid:
        return False
    bus = xid.group("bus").lower()[:12]
    scan.add("xid", index, bus, _xid_fields(xid, line))
    scan.last_bus = bus
    return True


def _gpu_at(scan: _KernelScan, index: int, line: str) -> bool:
    m = _GPU_AT.search(line)
    if not m:
        return False
    scan.last_bus = m.group("bus").lower()
    scan.uuids[scan.last_bus] = m.group("uuid")
    return True


def _serial(scan: _KernelScan, index: int, line: str) -> bool:
    m = _SERIAL.search(line)
    if not m:
        return False
    if scan.last_bus:
        scan.serials[scan.last_bus] = m.group("serial")
    return True


def _sxid(scan: _KernelScan, index: int, line: str) -> bool:
    m = _SXID.search(line)
    if not m:
        return False
    scan.add("sxid", index, m.group("bus").lower(), KernelFields(sxid=m.group("sxid"), message=m.group("msg").strip()))
    return True


def _off_bus(scan: _KernelScan, index: int, line: str) -> bool:
    """``GPU has fallen off the bus`` on one line, or the older three-line notice ``NVRM: The NVIDIA GPU <bus>``
    / ``NVRM: (PCI ID: 10de:2330) installed in this system has`` / ``NVRM: fallen off the bus and is not
    responding to commands.`` (each line with its own prefix): the bus and PCI ID come from the lines above."""
    if not _OFF_BUS.search(line):
        return False
    bus = _nvrm_bus(line)
    fields = KernelFields(message=line[line.find("NVRM") :].strip())
    if bus is None:
        for back in range(index - 1, max(-1, index - 3), -1):
            pci = _PCI_ID.search(scan.lines[back])
            if pci:
                fields.pci_id = pci.group("id").lower()
            gpu = _THE_GPU.search(scan.lines[back])
            if gpu:
                bus = gpu.group("bus").lower()[:10]
                break
    scan.add("fallen_off_bus", index, bus, fields)
    return True


def _probe(scan: _KernelScan, index: int, line: str) -> bool:
    """``nvidia: probe of <bus> failed with error -1`` and ``NVRM: The NVIDIA probe routine failed for N
    device(s)`` (the driver did not bind a GPU; the summary line joins the per-device one)."""
    m = _PROBE.search(line)
    if not m:
        return False
    if m.group("n"):
        last = next((r for r in reversed(scan.records) if r.what == "probe_failed"), None)
        if last is not None:
            last.fields.devices_failed = m.group("n")
            if last.fields.summary_index is None:
                last.fields.summary_index = str(index)
            return True
        scan.add("probe_failed", index, None, KernelFields(devices_failed=m.group("n")))
        return True
    scan.add("probe_failed", index, m.group("bus").lower()[:10], KernelFields(error=m.group("err")))
    return True


def _firmware(scan: _KernelScan, index: int, line: str) -> bool:
    """``Direct firmware load for nvidia/<ver>/gsp_*.bin failed with error -2`` (file not installed)."""
    m = _FIRMWARE.search(line)
    if not m:
        return False
    scan.add("firmware_load_failed", index, _bus(line[: m.start()]),
             KernelFields(file=m.group("file"), error=m.group("err")))
    return True


def _init_failed(scan: _KernelScan, index: int, line: str) -> bool:
    m = _INIT.search(line)
    if not m:
        return False
    fields = KernelFields(message=_nvrm_text(line), code=m.group("code") or None, minor=m.group("minor") or None)
    scan.add("init_failed", index, _nvrm_bus(line), fields)
    return True


def _assertion(scan: _KernelScan, index: int, line: str) -> bool:
    m = _ASSERT.search(line)
    if not m:
        return False
    scan.add("assertion", index, _nvrm_bus(line), KernelFields(assertion=m.group("what"), error=m.group("err"),
                                                                status=m.group("hex"), message=_nvrm_text(line)))
    return True


def _api_mismatch(scan: _KernelScan, index: int, line: str) -> bool:
    """``API mismatch`` on one line, or wrapped onto the next one (its prefix and ``NVRM:`` dropped)."""
    m = _API.search(line)
    if m is None and "API mismatch" in line and index + 1 < len(scan.lines):
        following = scan.lines[index + 1]
        m = _API.search(line + " " + following[line_time(following)[2] :].replace("NVRM:", ""))
    if not m:
        return False
    scan.add("api_mismatch", index, None, KernelFields(client=m.group("client"), module=m.group("module")))
    return True


def _loading(scan: _KernelScan, index: int, line: str) -> bool:
    m = _LOADING.search(line)
    if not m:
        return False
    scan.driver = m.group("version")
    return True


def _reset(scan: _KernelScan, index: int, line: str) -> bool:
    if not (_RESET.search(line) and "NVRM" in line):
        return False
    scan.add("reset_required", index, _nvrm_bus(line) or scan.last_bus,
             KernelFields(message=line[line.find("NVRM") :].strip()))
    return True


def _peermem(scan: _KernelScan, index: int, line: str) -> bool:
    if not _PEERMEM.search(line):
        return False
    scan.add("peermem", index)
    return True


def _oom(scan: _KernelScan, index: int, line: str) -> bool:
    m = _OOM.search(line)
    if not m:
        return False
    scan.add("oom_kill", index, None, KernelFields(pid=m.group("pid"), process=m.group("name")))
    return True


def _hardware(scan: _KernelScan, index: int, line: str) -> bool:
    """The first ``Hardware name:``; a later one is not consumed (it may still carry a release)."""
    m = _HARDWARE.search(line)
    if not (m and scan.hardware is None):
        return False
    scan.hardware = m.group("hw").strip()
    return True


def _release(scan: _KernelScan, index: int, line: str) -> bool:
    """The first kernel release printed on a ``Tainted:`` line."""
    m = _KERNEL_RELEASE.search(line)
    if m and scan.release is None:
        scan.release = m.group("release")
    return m is not None


_KERNEL_LINES: tuple[Callable[[_KernelScan, int, str], bool], ...] = (
    _xid, _gpu_at, _serial, _sxid, _off_bus, _probe, _firmware, _init_failed, _assertion, _api_mismatch, _loading,
    _reset, _peermem, _oom, _hardware, _release,
)
"""Line readers in priority order; each returns True when the line was its kind (the next line follows)."""


def read_kernel_log(lines: list[str]) -> KernelLog:
    """Read kernel log ``lines`` (one entry per line, 0-based index = position). Never raises."""
    scan = _KernelScan(lines)
    for index, line in enumerate(lines):
        if "NVRM" not in line and "nvidia" not in line and "GPU" not in line and "Hardware" not in line and (
            "firmware" not in line) and (
            "Tainted" not in line and "Out of memory" not in line
        ):
            continue
        for read in _KERNEL_LINES:
            if read(scan, index, line):
                break
    return KernelLog(scan.records, scan.uuids, scan.serials, scan.driver, scan.hardware, scan.release, len(lines))
