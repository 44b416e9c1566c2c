"""Readers for NVIDIA DCGM's ``dcgmi diag`` (table and ``-j`` JSON) and ``dcgmi discovery -l``.

Source formats (DCGM user guide, "DCGM Diagnostics" and the ``dcgmi diag`` / ``dcgmi discovery``
command references, 2.x … 4.x):

* table, DCGM 2.x/3.x: ``+-----  Integration  -------+----+`` category rows, ``| PCIe | Fail - All |``
  results (``Pass``/``Fail``/``Skip``/``Warn`` then ``- All`` or ``- GPUs: 0, 1`` / ``- GPU: 2``, one
  line per group), ``| Warning | GPU 0 … |`` and ``| Info | … |`` rows whose message is cut at a fixed
  width (46 characters in 2.x/3.x) with words split across lines, a ``Metadata`` category (``DCGM
  Version``, ``Driver Version Detected``, ``GPU Device IDs Detected``);
* table, DCGM 4.x: lower-case plugin names (``software``, ``pcie``, ``memory``, ``targeted_stress``…),
  an overall status then one ``GPU0: Pass`` line per entity, and ``Warning: GPU1`` / ``Info: GPU0`` rows;
* JSON (``-j``): 2.x/3.x ``{"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name",
  "results": [{"gpu_ids", "status", "warnings"/"info"}]}]}], "version", …}}``; 4.x ``{"DCGM Diagnostic":
  {"test_categories": …}, "metadata": {"version", "Driver Version Detected"}, "entity_groups": …}`` with
  ``entity_id`` per result and ``warnings: [{"warning", "error_id", "error_category", "error_severity"}]``;
* discovery: ``8 GPUs found.`` then ``| GPU ID | Device Information |`` rows with ``Name:``, ``PCI Bus
  ID:``, ``Device UUID:`` lines, ``N NvSwitches found.`` (and 3.x+ ``CPUs found``) with their tables.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import msgspec

from pytest_hetero.declared import as_written, resolve

_CATEGORY = re.compile(r"^\s*[+|]-{2,}\s+(?P<cat>[A-Za-z][\w ]*?)\s+-{2,}[+|]")
_RESULT = re.compile(r"^(?P<status>Pass|Fail|Skip|Warn|Not Run|Running)\b(?:\s*-\s*(?P<who>All|GPUs?:\s*[\d,\s]+))?$",
                     re.IGNORECASE)
_ENTITY = re.compile(r"^(?P<kind>GPU|CPU|Switch|NvSwitch)\s*(?P<id>\d+)\s*:\s*(?P<status>\w[\w ]*)$")
_MESSAGE_ROW = re.compile(r"^(?P<level>Warning|Info|Error)(?::\s*(?P<who>\w+\s*\d+))?$")


@dataclass
class DcgmMessage:
    """A ``Warning``/``Info`` message of a test, unwrapped; ``gpu`` when the message names one."""

    level: str
    text: str
    gpu: int | None
    lines: list[int] = field(default_factory=list)


@dataclass
class DcgmTest:
    """One test row: ``category`` (``Integration``), ``name`` (``PCIe``/``pcie``), overall ``status``
    (``Pass``/``Fail``/``Skip``/``Warn``), ``result`` as printed, per-entity statuses ``gpus``
    (``{0: "Pass"}``; ``"All"`` results give ``all_gpus``), ``messages``, 0-based ``lines``."""

    category: str
    name: str
    status: str
    result: str
    gpus: dict[int, str] = field(default_factory=dict)
    all_gpus: bool = False
    messages: list[DcgmMessage] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    error_ids: list[int] = field(default_factory=list)


class DcgmMetadata(msgspec.Struct, frozen=True, kw_only=True, rename={
        "dcgm_version": "DCGM Version", "driver_version": "Driver Version Detected",
        "gpu_device_ids": "GPU Device IDs Detected"}):
    """The ``Metadata`` rows of a ``dcgmi diag`` report the readers name (None: not printed; DCGM 3.0 tables print
    none, JSON documents only the first two)."""

    dcgm_version: str | None = None
    driver_version: str | None = None
    gpu_device_ids: str | None = None


@dataclass
class DcgmDiag:
    """A ``dcgmi diag`` result: ``metadata`` rows (version, driver, device ids), ``tests`` in order,
    ``layout`` (``table`` or ``json``), ``truncated`` when the table has no closing border, ``problems``: why a
    test entry of a JSON document was not read (not of DCGM's shape; the message names the field)."""

    metadata: dict[str, str]
    tests: list[DcgmTest]
    layout: str
    truncated: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def versions(self) -> DcgmMetadata:
        """The :class:`DcgmMetadata` of the ``metadata`` rows."""
        return msgspec.convert(self.metadata, DcgmMetadata)

    @property
    def failed(self) -> list[DcgmTest]:
        """Tests whose status is Fail (or Warn)."""
        return [t for t in self.tests if t.status.lower() in ("fail", "warn")]


def _cells(line: str) -> tuple[str, str, bool] | None:
    """Left cell (stripped), right cell's text area, closed flag.

    DCGM pads a message cell with one space before and two after a fixed-width text area (45
    characters in 2.x/3.x); the text area is returned unstripped so cut words can be joined back.
    """
    s = line.strip()
    if not s.startswith("|"):
        return None
    parts = s[1:].split("|", 1)
    if len(parts) < 2:
        return None
    left, rest = parts
    body = rest.rstrip()
    closed = body.endswith("|")
    if closed:
        raw = rest[: rest.rstrip().rfind("|")]
        right = raw[1:-2] if len(raw) >= 3 else raw.strip()
    else:
        right = rest.removeprefix(" ")
    return left.strip(), right, closed


def _gpu_of(text: str) -> int | None:
    m = re.search(r"\bGPU\s*(\d+)", text)
    return int(m.group(1)) if m else None


@dataclass
class _DiagScan:
    """The row-by-row read of a ``dcgmi diag`` table: ``metadata``, ``tests`` so far, the ``category``
    being read, the ``current`` test, the ``message`` being unwrapped with its text ``chunks``, and
    ``truncated`` (a row without its closing border was seen)."""

    metadata: dict[str, str] = field(default_factory=dict)
    tests: list[DcgmTest] = field(default_factory=list)
    category: str = ""
    current: DcgmTest | None = None
    message: DcgmMessage | None = None
    chunks: list[str] = field(default_factory=list)
    truncated: bool = False

    def flush(self) -> None:
        """Finish the message being unwrapped: join its chunks, take its GPU from the text if unnamed."""
        if self.message is not None:
            self.message.text = re.sub(r"\s+", " ", "".join(self.chunks)).strip()
            if self.message.gpu is None:
                self.message.gpu = _gpu_of(self.message.text)
        self.message, self.chunks = None, []

    def start_category(self, name: str) -> None:
        """A ``+---- Category ----+`` row."""
        self.flush()
        self.category = name
        self.current = None

    def row(self, index: int, left: str, right: str, closed: bool) -> None:
        """A ``| left | right |`` row (``right`` unstripped, see :func:`_cells`)."""
        if not closed:
            self.truncated = True
        value = right.strip()
        if left in ("Diagnostic",) and value == "Result":
            return
        if self.category.lower() == "metadata" and left:
            self.metadata[left] = value
        elif left:
            self.flush()
            self._head(index, left, right, value)
        elif self.current is not None:
            self._continuation(self.current, index, right, value)

    def _head(self, index: int, left: str, right: str, value: str) -> None:
        """A row with a left cell: a ``Warning``/``Info`` message of the current test, or a new test."""
        row = _MESSAGE_ROW.match(left)
        if row and self.current is not None:
            who = row.group("who")
            self.message = DcgmMessage(row.group("level"), "", _gpu_of(who) if who else None, [index])
            self.chunks = [right]
            self.current.messages.append(self.message)
            self.current.lines.append(index)
            return
        result = _RESULT.match(value)
        self.current = DcgmTest(self.category, left, result.group("status").title() if result else value, value,
                                lines=[index])
        self.tests.append(self.current)
        if result:
            _who(self.current, result.group("status"), result.group("who"))

    def _continuation(self, current: DcgmTest, index: int, right: str, value: str) -> None:
        """A row with an empty left cell: more of the message, a ``GPU0: Pass`` entity line (4.x) or
        another result group of the ``current`` test."""
        if self.message is not None:
            self.chunks.append(right)
            self.message.lines.append(index)
            current.lines.append(index)
            return
        entity = _ENTITY.match(value)
        result = _RESULT.match(value)
        if entity and entity.group("kind") == "GPU":
            current.gpus[int(entity.group("id"))] = entity.group("status").strip().title()
            current.lines.append(index)
        elif result:
            current.result += "; " + value
            _who(current, result.group("status"), result.group("who"))
            current.lines.append(index)


def parse_dcgm_table(lines: list[str]) -> DcgmDiag:
    """Parse a ``dcgmi diag`` table (any layout above). Never raises; unreadable rows are skipped."""
    scan = _DiagScan()
    for index, line in enumerate(lines):
        cat = _CATEGORY.match(line)
        if cat:
            scan.start_category(cat.group("cat").strip())
            continue
        cells = _cells(line)
        if cells is not None:
            scan.row(index, *cells)
    scan.flush()
    return DcgmDiag(scan.metadata, scan.tests, "table", scan.truncated)


def _who(test: DcgmTest, status: str, who: str | None) -> None:
    status = status.title()
    if who is None:
        return
    if who.lower() == "all":
        test.all_gpus = True
        return
    for number in re.findall(r"\d+", who):
        test.gpus[int(number)] = status
    if status in ("Fail", "Warn") or test.status not in ("Fail",):
        test.status = status if status == "Fail" or test.status != "Fail" else test.status


def _walk_tests(node: object, category: str, out: list[tuple[str, Mapping[str, object]]]) -> None:
    if isinstance(node, Mapping):
        if "name" in node and "results" in node:
            out.append((category, node))
            return
        cat = str(node.get("category", category)) if "category" in node else category
        for value in node.values():
            _walk_tests(value, cat, out)
    elif isinstance(node, list):
        for item in node:
            _walk_tests(item, category, out)


def _find_key(node: object, *names: str) -> str | None:
    if isinstance(node, Mapping):
        for name in names:
            if name in node and isinstance(node[name], (str, int, float)):
                return str(node[name])
        for value in node.values():
            found = _find_key(value, *names)
            if found is not None:
                return found
    elif isinstance(node, list):
        for item in node:
            found = _find_key(item, *names)
            if found is not None:
                return found
    return None


def is_dcgm_json(obj: object) -> bool:
    """True for a ``dcgmi diag -j`` document (any DCGM major version)."""
    return isinstance(obj, Mapping) and (
        "DCGM GPU Diagnostic" in obj or "DCGM Diagnostic" in obj
        or ("tests" in obj and ("version" in obj or "metadata" in obj))
    )


class _JsonWarning(msgspec.Struct, frozen=True, kw_only=True):
    """A ``warnings`` entry of a ``-j`` result: ``{"warning", "error_id"}`` (4.x adds ``error_category``,
    ``error_severity``, not read)."""

    warning: str = ""
    error_id: int | None = None


class _JsonResult(msgspec.Struct, frozen=True, kw_only=True):
    """A ``results`` entry of a ``-j`` test: its ``status``, the GPUs it is about (2.x/3.x ``gpu_ids``, ``"0,1"``,
    read first when present, even null; 4.x ``entity_id``), ``warnings`` (a list, or one) and ``info`` (the
    same)."""

    status: str = ""
    gpu_ids: str | int | list[int] | None | msgspec.UnsetType = msgspec.UNSET
    entity_id: str | int | None = None
    warnings: list[_JsonWarning | str] | _JsonWarning | str | None = None
    info: list[str] | str | None = None


class _JsonSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A 4.x test's ``test_summary``."""

    status: str | None = None


class _JsonTest(msgspec.Struct, frozen=True, kw_only=True):
    """A test of a ``-j`` document: ``{"name", "results": [...], "test_summary"}`` (``results`` null: none)."""

    name: str = ""
    results: list[_JsonResult] | None = None
    test_summary: _JsonSummary | None = None


class _WrittenTest(msgspec.Struct, frozen=True, kw_only=True):
    """A ``-j`` test entry as written (:func:`~pytest_hetero.declared.as_written`), for one not of DCGM's shape."""

    name: object = None
    results: object = None
    test_summary: object = None


class _WrittenResult(msgspec.Struct, frozen=True, kw_only=True):
    """A ``results`` entry as written, for one not of DCGM's shape: its ``status`` and GPUs."""

    status: object = None
    gpu_ids: object = None
    entity_id: object = None


def _salvaged(raw: Mapping[str, object]) -> _JsonTest:
    """The test entry ``raw``, not of DCGM's shape, as far as it can be read: its name, each result that fits, and of
    one that does not its ``status`` and GPUs (its warnings and info left out), its summary's status. A Fail stays a
    Fail whatever detail of the entry is of another type."""
    written = as_written(raw, _WrittenTest)
    results: list[_JsonResult] = []
    for item in written.results if isinstance(written.results, list) else []:
        if not isinstance(item, Mapping):
            continue
        try:
            results.append(msgspec.convert(item, _JsonResult))
        except msgspec.ValidationError:
            part = as_written(item, _WrittenResult)
            ids = part.gpu_ids if part.gpu_ids is not None else part.entity_id
            results.append(_JsonResult(status=str(part.status or ""), gpu_ids=None if ids is None else str(ids)))
    summary = as_written(written.test_summary, _WrittenResult) if isinstance(written.test_summary, Mapping) else None
    status = summary.status if summary is not None and summary.status else None
    return _JsonTest(name=str(written.name or ""), results=results,
                     test_summary=_JsonSummary(status=None if status is None else str(status)))


def parse_dcgm_json(obj: Mapping[str, object]) -> DcgmDiag:
    """Parse a ``dcgmi diag -j`` document (2.x/3.x/4.x shapes). Never raises for any mapping: a test entry (an
    object with ``name`` and ``results``) not of the shape above is named in ``problems`` (``$.results[0].status``,
    relative to the entry) and read as far as it can be (:func:`_salvaged`: its results' statuses and GPUs)."""
    found: list[tuple[str, Mapping[str, object]]] = []
    _walk_tests(obj, "", found)
    tests: list[DcgmTest] = []
    problems: list[str] = []
    for category, raw in found:
        try:
            entry = msgspec.convert(raw, _JsonTest)
        except msgspec.ValidationError as exc:
            problems.append(f"dcgmi diag -j: the {category or 'uncategorised'} test entry {raw['name']!r} is not "
                            f"of DCGM's shape: {exc}")
            entry = _salvaged(raw)
        test = DcgmTest(category, entry.name, "Pass", "")
        statuses: list[str] = []
        for result in entry.results or []:
            status = result.status.strip().title()
            statuses.append(status)
            ids = result.entity_id if result.gpu_ids is msgspec.UNSET else result.gpu_ids
            for number in re.findall(r"\d+", str(ids)) if ids is not None else []:
                test.gpus[int(number)] = status
            warnings = result.warnings
            entries = warnings if isinstance(warnings, list) else ([warnings] if warnings else [])
            for warning in entries:
                text = warning.warning if isinstance(warning, _JsonWarning) else warning
                if isinstance(warning, _JsonWarning) and warning.error_id is not None:
                    test.error_ids.append(warning.error_id)
                gpu = next(iter(re.findall(r"\d+", str(ids))), None) if ids is not None else None
                test.messages.append(DcgmMessage("Warning", text, int(gpu) if gpu is not None else _gpu_of(text)))
            info = result.info
            for line in info if isinstance(info, list) else ([info] if info else []):
                test.messages.append(DcgmMessage("Info", line, _gpu_of(line)))
        summary = entry.test_summary
        if summary is not None and summary.status:
            statuses.append(summary.status.title())
        for level in ("Fail", "Warn", "Pass", "Skip"):
            if level in statuses:
                test.status = level
                break
        test.result = ", ".join(f"GPU{g}: {s}" for g, s in sorted(test.gpus.items())) or test.status
        tests.append(test)
    metadata = {
        key: value
        for key, value in (
            ("DCGM Version", _find_key(obj, "version", "DCGM Version")),
            ("Driver Version Detected", _find_key(obj, "Driver Version Detected", "driver_version_detected",
                                                  "driver_version")),
        )
        if value is not None
    }
    return DcgmDiag(metadata, tests, "json", problems=problems)


@dataclass
class DcgmGpu:
    """One GPU of ``dcgmi discovery -l``: id, name, PCI bus id, UUID, 0-based ``lines``."""

    gpu_id: int
    name: str | None = None
    bus_id: str | None = None
    uuid: str | None = None
    lines: list[int] = field(default_factory=list)


@dataclass
class DcgmDiscovery:
    """``dcgmi discovery -l``: counts as printed (``gpus_declared``, ``nvswitches``, ``cpus``) and GPUs."""

    gpus_declared: int | None
    nvswitches: int | None
    cpus: int | None
    gpus: list[DcgmGpu]


_FOUND = re.compile(r"^\s*(\d+)\s+(GPUs?|NvSwitch\w*|CPUs?)\s+found")


def _declared(found: DcgmDiscovery, what: str, number: int) -> None:
    """Record a ``N GPUs/NvSwitches/CPUs found.`` line (``what`` lower-cased as printed) on ``found``."""
    if what.startswith("gpu"):
        found.gpus_declared = number
    elif what.startswith("nvswitch"):
        found.nvswitches = number
    else:
        found.cpus = number


def _gpu_row(gpus: list[DcgmGpu], current: DcgmGpu | None, index: int, left: str, value: str) -> DcgmGpu | None:
    """One row of the GPU table: an id in the left cell starts a GPU; ``Name:``, ``PCI Bus ID:`` and
    ``Device UUID:`` lines fill it. Returns the GPU being read."""
    if left.isdecimal():
        current = DcgmGpu(int(left), lines=[index])
        gpus.append(current)
    if current is None:
        return None
    key, sep, val = value.partition(":")
    if not sep:
        return current
    key, val = key.strip().lower(), val.strip()
    if key == "name":
        current.name = val
    elif key == "pci bus id":
        current.bus_id = val
    elif key == "device uuid":
        current.uuid = val
    if index not in current.lines:
        current.lines.append(index)
    return current


def parse_dcgm_discovery(lines: list[str]) -> DcgmDiscovery:
    """Parse ``dcgmi discovery -l`` output. Never raises."""
    found = DcgmDiscovery(None, None, None, [])
    section = ""
    current: DcgmGpu | None = None
    for index, line in enumerate(lines):
        count = _FOUND.match(line)
        if count:
            section = count.group(2).lower()
            _declared(found, section, int(count.group(1)))
            current = None
            continue
        cells = _cells(line)
        if cells is not None and section.startswith("gpu"):
            current = _gpu_row(found.gpus, current, index, cells[0], cells[1].strip())
    return found


WARNING_CODES: tuple[tuple[re.Pattern[str], str, str, str], ...] = (
    (re.compile(r"NvLink link \d+ is currently down", re.IGNORECASE), "nvlink_link_down", "nvlink_fault",
     "NVLink link down on the GPU: run a field diagnostic"),
    (re.compile(r"Persistence mode for GPU \d+ is disabled", re.IGNORECASE), "persistence_mode_disabled",
     "dcgm_diag_configuration", "persistence mode is off (nvidia-smi -pm 1)"),
    (re.compile(r"system not yet initialized", re.IGNORECASE), "fabric_manager_not_running", "nvlink_fault",
     "CUDA reports the system not initialised: NVSwitch fabric manager not running"),
    (re.compile(r"unsupported display driver / cuda driver combination", re.IGNORECASE),
     "cuda_system_driver_mismatch", "dcgm_diag_configuration", "kernel driver and user-space CUDA driver differ"),
    (re.compile(r"pending (?:page )?retire|row remap|remapp", re.IGNORECASE), "gpu_memory_remap", "gpu_hardware_fault",
     "GPU memory rows/pages pending retirement or remapping"),
    (re.compile(r"\bECC\b|uncorrectable", re.IGNORECASE), "gpu_ecc_uncorrectable", "gpu_hardware_fault",
     "GPU memory ECC errors"),
    (re.compile(r"PCIe replay|replay (?:rate|counter)", re.IGNORECASE), "pcie_replay", "gpu_hardware_fault",
     "PCIe replay errors on the GPU's link"),
    (re.compile(r"thermal|temperature|clocks? throttl", re.IGNORECASE), "gpu_thermal", "gpu_hardware_fault",
     "thermal or clock-throttling violation"),
    (re.compile(r"XID|Xid \d+", re.IGNORECASE), "gpu_xid", "gpu_health_incident", "DCGM saw an Xid during the test"),
)
"""(pattern, code, failure, meaning) for DCGM warning texts (``failure``: the failure-table category that gives
the owner); others become ``dcgm_warning``."""


def classify_warning(text: str) -> tuple[str, str | None, str]:
    """Return ``(code, failure, meaning)`` for one DCGM warning/info message (``failure``: a failure-table
    category)."""
    for pattern, code, failure, meaning in WARNING_CODES:
        if pattern.search(text):
            return code, failure, meaning
    return "dcgm_warning", "gpu_health_incident", "DCGM reported a problem during the test"


resolve(__name__)
