"""The in-container payload: its script, the reading of its output, and what is missing.

``payload.sh`` (beside this module) runs inside the workload container with nothing but a POSIX
shell and prints one JSON object between :data:`BEGIN` and :data:`END` marker lines: device
nodes, visibility env vars, driver libraries, raw ``nvidia-smi -q -x`` / ``npu-smi info``, and,
when the image has python3, ONNX Runtime providers, torch CUDA and torch_npu. :func:`assess`
turns that into findings, each naming the failure category it is (:data:`FAILURE`); the owner is
the failure table's (:mod:`pytest_hetero.judge.failures`), never decided here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from typing import Any, Literal, TypeVar

import msgspec

from pytest_hetero.declared import resolve
from pytest_hetero.errors import ParseError
from pytest_hetero.probes.model import Inventory, _plain
from pytest_hetero.probes.payload_rules import gpu_findings, npu_findings

BEGIN = "---HETERO-PAYLOAD-BEGIN---"
"""Marker line printed before the payload JSON."""
END = "---HETERO-PAYLOAD-END---"
"""Marker line printed after the payload JSON."""
SCHEMA = "hetero-payload/1"
"""Value of the ``schema`` key this reader understands."""
FAILURE = {"device-node": "device_missing", "visibility": "device_not_visible", "driver-library": "driver_missing",
           "runtime": "runtime_broken", "framework": "framework_without_accelerator", "payload": "payload_failed"}
"""Payload finding category → the startup failure category it is (a row of the failure table)."""
FrameworkName = Literal["onnxruntime", "torch", "torch_npu"]
"""A framework entry of payload.sh's python report."""
FRAMEWORKS: tuple[FrameworkName, ...] = ("onnxruntime", "torch", "torch_npu")
"""Every framework payload.sh reports (each read by :class:`PythonFacts`, reported or not)."""
ToolName = Literal["nvidia-smi", "npu-smi"]
"""A vendor tool payload.sh runs."""
TOOLS: tuple[ToolName, ...] = ("nvidia-smi", "npu-smi")
"""Every vendor tool payload.sh runs (each read by :attr:`PayloadReport.tool_runs`, present or not)."""


def payload_script() -> str:
    """Return the text of ``payload.sh`` (POSIX sh), ready for ``sh -c`` or ``docker exec sh -s``."""
    return resources.files("pytest_hetero.probes").joinpath("payload.sh").read_text(encoding="utf-8")


def _text(value: object) -> str | None:
    """A JSON value payload.sh writes as a string, as text (None stays None; another type as its ``str``)."""
    return None if value is None else str(value)


ShapeT = TypeVar("ShapeT", bound=msgspec.Struct)
"""A declared shape of a payload document (:func:`_read`)."""


def _read(value: Mapping[str, object], shape: type[ShapeT], what: str) -> tuple[ShapeT, str | None]:
    """The payload document ``value`` (as the container wrote it) as ``shape``, and why it is not one (None: it
    is): a field of another type makes the whole document unreadable, read as every field unset, and the message
    names the field (``$.torch.version``). Never raises."""
    try:
        return msgspec.convert(value, shape), None
    except msgspec.ValidationError as exc:
        return shape(), f"payload {what} is unreadable: {exc}"


@dataclass(frozen=True)
class InterpreterFacts:
    """payload.sh's ``python`` entry, read once by :meth:`PayloadReport.interpreter`: whether the image has an
    interpreter (``present``) and why not (``error``; None: not reported)."""

    present: bool
    error: str | None


class FrameworkFacts(msgspec.Struct, frozen=True, kw_only=True):
    """One framework entry of payload.sh's python report (``torch``, ``onnxruntime``, ``torch_npu``), read
    once by :meth:`PayloadReport.framework`: ``available`` (importable), ``version``, ``error`` (why not),
    ``providers`` (ONNX Runtime's execution providers; None: not reported), ``cuda_build`` (torch's
    ``torch.version.cuda``), ``cuda_available``/``npu_available`` (True/False as reported; None: not
    reported). Other keys the entry holds (``device_count``) are not read."""

    available: bool = False
    version: str | None = None
    error: str | None = None
    providers: list[str] | None = None
    cuda_build: str | None = None
    cuda_available: bool | None = None
    npu_available: bool | None = None


class _FrameworkReport(msgspec.Struct, frozen=True, kw_only=True):
    """The ``report`` payload.sh's python probe prints: an entry per framework (null or absent: not reported;
    ``version`` and ``executable``, the interpreter's, are not read)."""

    onnxruntime: FrameworkFacts | None = None
    torch: FrameworkFacts | None = None
    torch_npu: FrameworkFacts | None = None


class _PythonDocument(msgspec.Struct, frozen=True, kw_only=True):
    """payload.sh's ``python`` document: ``{"present", "path", "rc", "report", "error"}`` (``path`` and ``rc``
    are not read; ``report`` is read as :class:`_FrameworkReport`, apart, so that a framework entry of another
    shape leaves the interpreter's facts read)."""

    present: bool = False
    error: str | None = None
    report: dict[str, object] | None = None


@dataclass(frozen=True)
class PythonFacts:
    """payload.sh's ``python`` document, read once (:attr:`PayloadReport.python_facts`): the
    :class:`InterpreterFacts` and the :class:`FrameworkFacts` of every name in :data:`FRAMEWORKS` (an entry the
    report lacks, or a report that is not an object: every field unset), and the ``problems`` met (a document
    or report of another shape, read as every field unset; each message names the field)."""

    interpreter: InterpreterFacts
    frameworks: dict[FrameworkName, FrameworkFacts]
    problems: tuple[str, ...] = ()

    @classmethod
    def parse(cls, python: Mapping[str, object]) -> PythonFacts:
        """The facts of the ``python`` document (absent entries: not present)."""
        doc, problem = _read(python, _PythonDocument, "python document")
        report, report_problem = _read(doc.report or {}, _FrameworkReport, "python report")
        unset = FrameworkFacts()
        return cls(interpreter=InterpreterFacts(present=doc.present, error=doc.error),
                   frameworks={"onnxruntime": report.onnxruntime or unset, "torch": report.torch or unset,
                               "torch_npu": report.torch_npu or unset},
                   problems=tuple(p for p in (problem, report_problem) if p is not None))


class ToolRun(msgspec.Struct, frozen=True, kw_only=True):
    """payload.sh's run of a vendor tool (``nvidia-smi``/``npu-smi``), read once by :meth:`PayloadReport.tool`:
    ``present`` in the image, its exit code ``rc`` (None: not run), ``output`` and ``error`` text."""

    present: bool = False
    rc: int | None = None
    output: str | None = None
    error: str | None = None

    def text(self) -> str:
        """``error`` then ``output`` (each empty when absent), one newline between them."""
        return f"{self.error or ''}\n{self.output or ''}"


class _ToolRuns(msgspec.Struct, frozen=True, kw_only=True, rename={"nvidia_smi": "nvidia-smi", "npu_smi": "npu-smi"}):
    """payload.sh's ``tools`` document: the run of each vendor tool of :data:`TOOLS` (null or absent: not
    present)."""

    nvidia_smi: ToolRun | None = None
    npu_smi: ToolRun | None = None


class _Library(msgspec.Struct, frozen=True, kw_only=True):
    """A ``libraries`` entry: ``{"name", "path"}`` of a driver library found (``path`` not read)."""

    name: str = ""


@dataclass(frozen=True)
class PayloadReport:
    """The payload's JSON as typed fields (shapes follow ``payload.sh``).

    ``tools`` maps ``nvidia-smi``/``npu-smi`` to ``{"present", "rc", "output", "error"}``;
    ``python`` is ``{"present", "path", "rc", "report", "error"}`` where ``report`` holds
    ``version``, ``onnxruntime``, ``torch``, ``torch_npu`` dicts; ``libraries`` the ``{"name", "path"}``
    objects of the driver libraries found (values as written: any JSON type); ``warnings`` are reading notes. The
    ``tools``, ``python`` and ``libraries`` documents are kept as the container wrote them (evidence holds
    them); each is parsed once, on first use, into its declared shape (:attr:`tool_runs`, :attr:`python_facts`,
    :attr:`library_names`; one of another shape reads as every field unset and is named in :attr:`problems`),
    and read through :meth:`tool`, :meth:`interpreter`, :meth:`framework` and :meth:`has_library`.
    """

    device_nodes: tuple[str, ...] = ()
    env: dict[str, str | None] = field(default_factory=dict)
    libraries: tuple[Mapping[str, object], ...] = ()
    tools: Mapping[str, object] = field(default_factory=dict)
    python: Mapping[str, object] = field(default_factory=dict)
    hostname: str | None = None
    arch: str | None = None
    warnings: tuple[str, ...] = ()
    raw: str = ""

    @cached_property
    def python_facts(self) -> PythonFacts:
        """The ``python`` document, parsed once (:meth:`PythonFacts.parse`)."""
        return PythonFacts.parse(self.python)

    @cached_property
    def _tool_document(self) -> tuple[_ToolRuns, str | None]:
        """The ``tools`` document, parsed once, and why it could not be (:func:`_read`)."""
        return _read(self.tools, _ToolRuns, "tools document")

    @cached_property
    def tool_runs(self) -> dict[ToolName, ToolRun]:
        """The run of every tool of :data:`TOOLS`, parsed once (no such entry: not present)."""
        runs = self._tool_document[0]
        return {"nvidia-smi": runs.nvidia_smi or ToolRun(), "npu-smi": runs.npu_smi or ToolRun()}

    @cached_property
    def _library_document(self) -> tuple[list[_Library], str | None]:
        """The ``libraries`` entries, parsed once, and why they could not be (:func:`_read`)."""
        try:
            return msgspec.convert(list(self.libraries), list[_Library]), None
        except msgspec.ValidationError as exc:
            return [], f"payload libraries are unreadable: {exc}"

    @cached_property
    def library_names(self) -> tuple[str, ...]:
        """The file name of every library found ("" for an entry without one), read once."""
        return tuple(lib.name for lib in self._library_document[0])

    @cached_property
    def problems(self) -> tuple[str, ...]:
        """Why a document of the report could not be read (a field of another type than payload.sh writes, the
        message naming it): each is a ``payload`` finding of :func:`assess`."""
        found = (self._tool_document[1], self._library_document[1])
        return self.python_facts.problems + tuple(p for p in found if p is not None)

    def interpreter(self) -> InterpreterFacts:
        """Whether the image has a python3/python and why not (absent or non-object entries: not present)."""
        return self.python_facts.interpreter

    def framework(self, name: FrameworkName) -> FrameworkFacts:
        """The python report entry ``name`` (``torch``, ``onnxruntime``…); every field unset when the entry
        is absent or not an object."""
        return self.python_facts.frameworks[name]

    def tool(self, name: ToolName) -> ToolRun:
        """The payload's run of vendor tool ``name``; not present when the report has no such entry."""
        return self.tool_runs[name]

    def has_library(self, prefix: str) -> bool:
        """Return True when a library whose file name starts with ``prefix`` was found."""
        return any(name.startswith(prefix) for name in self.library_names)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as a JSON-ready dict."""
        return dict(_plain(self))


@dataclass(frozen=True)
class Finding:
    """One missing piece in a container.

    ``category``: device-node, visibility, driver-library, runtime, framework, payload; ``failure``:
    the failure category it is (:data:`FAILURE`; its owner is the failure table's); a sentence; the
    evidence it rests on.
    """

    category: str
    message: str
    evidence: str = ""

    @property
    def failure(self) -> str:
        """The failure category of this finding (:data:`FAILURE`)."""
        return FAILURE[self.category]

    def to_dict(self) -> dict[str, str]:
        """Return the finding as a JSON-ready dict (``category``, ``failure``, ``message``, ``evidence``)."""
        return {"category": self.category, "failure": self.failure, "message": self.message,
                "evidence": self.evidence}


def parse_payload_output(stdout: str) -> PayloadReport:
    """Read the payload JSON between the marker lines of ``stdout`` (other lines are ignored).

    A missing END marker or unreadable JSON gives a report with ``warnings`` and the fields it
    could not read left empty; a field of another JSON type than payload.sh writes is read as its
    text (``env`` values, ``hostname``, ``arch``) or left empty. Raises :class:`ParseError` when
    there is no BEGIN marker (the payload did not run) and names what the output started with.
    """
    # the marker alone on its line, so a shell trace ("+ echo ---HETERO-...") is not taken for it
    line = re.search(rf"^{re.escape(BEGIN)}[ \t\r]*$", stdout, re.MULTILINE)
    start = line.start() if line else stdout.find(BEGIN)
    if start < 0:
        head = stdout.strip()[:120] or "<empty>"
        raise ParseError(
            f"payload output has no {BEGIN} marker line; it starts with: {head!r}",
            hint="the container did not run payload.sh (no /bin/sh in the image, or it exited early)",
        )
    body = stdout[start + len(BEGIN) :]
    warnings: list[str] = []
    end_line = re.search(rf"^{re.escape(END)}[ \t\r]*$", body, re.MULTILINE)
    end = end_line.start() if end_line else body.find(END)
    if end < 0:
        warnings.append(f"no {END} marker: payload output truncated")
    else:
        body = body[:end]
    try:
        data = json.loads(body.strip())
    except ValueError as exc:
        return PayloadReport(warnings=(*warnings, f"payload JSON unreadable: {exc}"), raw=stdout)
    if not isinstance(data, dict):
        return PayloadReport(warnings=(*warnings, "payload JSON is not an object"), raw=stdout)
    schema = data.get("schema")
    if schema != SCHEMA:
        warnings.append(f"payload schema {schema!r}, expected {SCHEMA!r}")

    def dict_of(key: str) -> dict[str, object]:
        value = data.get(key)
        return value if isinstance(value, dict) else {}

    def list_of(key: str) -> list[object]:
        value = data.get(key)
        return value if isinstance(value, list) else []

    # each field as the type PayloadReport declares (another JSON type as its text), so no reader downstream
    # meets an int where payload.sh writes a string
    return PayloadReport(
        device_nodes=tuple(str(x) for x in list_of("device_nodes")),
        env={str(name): _text(value) for name, value in dict_of("env").items()},
        libraries=tuple(x for x in list_of("libraries") if isinstance(x, dict)),
        tools=dict_of("tools"),
        python=dict_of("python"),
        hostname=_text(data.get("hostname")),
        arch=_text(data.get("arch")),
        warnings=tuple(warnings),
        raw=stdout,
    )


def tool_inventory(report: PayloadReport, vendor: str) -> Inventory | None:
    """Parse the vendor tool output the payload captured in the container.

    ``vendor`` is ``nvidia`` (``nvidia-smi -q -x``) or ``ascend`` (``npu-smi info``). Returns
    None when the tool is absent from the image; output that is not the tool's gives an
    Inventory whose ``global_errors`` quotes the reader's complaint (never raises).
    """
    from pytest_hetero.probes.ascend_table import parse_npu_smi_info
    from pytest_hetero.probes.nvidia import parse_nvidia_smi

    name: ToolName = "npu-smi" if vendor == "ascend" else "nvidia-smi"
    parse = parse_npu_smi_info if vendor == "ascend" else parse_nvidia_smi
    run = report.tool(name)
    if not run.present:
        return None
    text = run.text().strip("\n")
    try:
        return parse(text)
    except ParseError as exc:
        return Inventory(
            vendor="ascend" if vendor == "ascend" else "nvidia",
            source=name,
            raw=text,
            global_errors=(f"{name} output in the container is unreadable: {exc.message}",),
        )


def resource_kind(resource_type: str) -> str:
    """Map a resource name to ``gpu``/``npu``/``cpu``.

    ``nvidia.com/gpu`` → gpu, ``huawei.com/Ascend910`` → npu, anything else → cpu.
    """
    low = resource_type.lower()
    if "gpu" in low or "nvidia" in low or "cuda" in low:
        return "gpu"
    if "npu" in low or "ascend" in low or "huawei" in low:
        return "npu"
    return "cpu"


def assess(report: PayloadReport, resource_type: str) -> list[Finding]:
    """Say which piece is missing for a container that asked for ``resource_type``.

    ``resource_type`` is ``gpu``/``npu``/``cpu`` or a Kubernetes resource name. Returns
    findings in dependency order (device node → driver library → runtime/tool → framework);
    an empty list means every piece the payload can see is in place.
    """
    findings = [
        Finding("payload", w, "payload output")
        for w in report.warnings
        if "unreadable" in w or "truncated" in w or "not an object" in w
    ] + [Finding("payload", problem, "payload output") for problem in report.problems]
    kind = resource_kind(resource_type)
    rules = gpu_findings(report) if kind == "gpu" else npu_findings(report) if kind == "npu" else []
    return findings + [Finding(*rule) for rule in rules]


resolve(__name__)
