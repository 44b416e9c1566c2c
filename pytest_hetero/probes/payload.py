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
from typing import Any, Literal

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
"""Every vendor tool payload.sh runs (each read by :meth:`ToolRun.parse`, present or not)."""


def payload_script() -> str:
    """Return the text of ``payload.sh`` (POSIX sh), ready for ``sh -c`` or ``docker exec sh -s``."""
    return resources.files("pytest_hetero.probes").joinpath("payload.sh").read_text(encoding="utf-8")


def _text(value: object) -> str | None:
    """A JSON value payload.sh writes as a string, as text (None stays None; another type as its ``str``)."""
    return None if value is None else str(value)


@dataclass(frozen=True)
class InterpreterFacts:
    """payload.sh's ``python`` entry, read once by :meth:`PayloadReport.interpreter`: whether the image has an
    interpreter (``present``) and why not (``error``, as text; None: not reported)."""

    present: bool
    error: str | None


@dataclass(frozen=True)
class FrameworkFacts:
    """One framework entry of payload.sh's python report (``torch``, ``onnxruntime``, ``torch_npu``), read
    once by :meth:`PayloadReport.framework`: ``available`` (importable), ``version``, ``error`` (why not),
    ``providers`` (ONNX Runtime's execution providers; None: not reported), ``cuda_build`` (torch's
    ``torch.version.cuda``), ``cuda_available``/``npu_available`` (True/False as reported; None: not a
    boolean or not reported)."""

    available: bool = False
    version: str | None = None
    error: str | None = None
    providers: list[str] | None = None
    cuda_build: str | None = None
    cuda_available: bool | None = None
    npu_available: bool | None = None

    @classmethod
    def parse(cls, value: object) -> FrameworkFacts:
        """The facts of one framework entry ``value`` (not an object: every field unset)."""
        entry: Mapping[str, object] = value if isinstance(value, dict) else {}
        providers = entry.get("providers")
        cuda, npu = entry.get("cuda_available"), entry.get("npu_available")
        return cls(available=bool(entry.get("available")), version=_text(entry.get("version")),
                   error=_text(entry.get("error")),
                   providers=[str(p) for p in providers] if isinstance(providers, list) else None,
                   cuda_build=_text(entry.get("cuda_build")),
                   cuda_available=cuda if isinstance(cuda, bool) else None,
                   npu_available=npu if isinstance(npu, bool) else None)


@dataclass(frozen=True)
class PythonFacts:
    """payload.sh's ``python`` document, read once (:attr:`PayloadReport.python_facts`): the
    :class:`InterpreterFacts` and the :class:`FrameworkFacts` of every name in :data:`FRAMEWORKS` (an entry the
    report lacks, or a report that is not an object: every field unset)."""

    interpreter: InterpreterFacts
    frameworks: dict[FrameworkName, FrameworkFacts]

    @classmethod
    def parse(cls, python: Mapping[str, object]) -> PythonFacts:
        """The facts of the ``python`` document (absent or non-object entries: not present)."""
        error, report = python.get("error"), python.get("report")
        entries: Mapping[str, object] = report if isinstance(report, dict) else {}
        return cls(interpreter=InterpreterFacts(present=bool(python.get("present")), error=_text(error)),
                   frameworks={name: FrameworkFacts.parse(entries.get(name)) for name in FRAMEWORKS})


@dataclass(frozen=True)
class ToolRun:
    """payload.sh's run of a vendor tool (``nvidia-smi``/``npu-smi``), read once by :meth:`PayloadReport.tool`:
    ``present`` in the image, its exit code ``rc`` (None: not run), ``output`` and ``error`` text."""

    present: bool = False
    rc: int | None = None
    output: str | None = None
    error: str | None = None

    def text(self) -> str:
        """``error`` then ``output`` (each empty when absent), one newline between them."""
        return f"{self.error or ''}\n{self.output or ''}"

    @classmethod
    def parse(cls, value: object) -> ToolRun:
        """The run of one ``tools`` entry ``value`` (not an object: not present)."""
        run: Mapping[str, object] = value if isinstance(value, dict) else {}
        rc = run.get("rc")
        return cls(present=bool(run.get("present")), rc=rc if isinstance(rc, int) else None,
                   output=_text(run.get("output")), error=_text(run.get("error")))


@dataclass(frozen=True)
class PayloadReport:
    """The payload's JSON as typed fields (shapes follow ``payload.sh``).

    ``tools`` maps ``nvidia-smi``/``npu-smi`` to ``{"present", "rc", "output", "error"}``;
    ``python`` is ``{"present", "path", "rc", "report", "error"}`` where ``report`` holds
    ``version``, ``onnxruntime``, ``torch``, ``torch_npu`` dicts; ``libraries`` the ``{"name", "path"}``
    objects of the driver libraries found (values as written: any JSON type); ``warnings`` are reading notes. The
    ``tools``, ``python`` and ``libraries`` documents are kept as the container wrote them (evidence holds
    them); each is parsed once, on first use (:attr:`tool_runs`, :attr:`python_facts`, :attr:`library_names`),
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
    def tool_runs(self) -> dict[ToolName, ToolRun]:
        """The run of every tool of :data:`TOOLS`, parsed once (no such entry: not present)."""
        return {name: ToolRun.parse(self.tools.get(name)) for name in TOOLS}

    @cached_property
    def library_names(self) -> tuple[str, ...]:
        """The file name of every library found ("" for an entry without one), read once."""
        return tuple(str(lib.get("name", "")) for lib in self.libraries)

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
    ]
    kind = resource_kind(resource_type)
    rules = gpu_findings(report) if kind == "gpu" else npu_findings(report) if kind == "npu" else []
    return findings + [Finding(*rule) for rule in rules]
