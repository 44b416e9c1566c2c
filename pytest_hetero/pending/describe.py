"""Captured ``kubectl`` output and Pod/Event objects -> reasons (startup states via :mod:`.startup`).

Inputs (kubectl 1.18-1.34):

* ``kubectl describe pod`` text: the ``Events:`` table (``Type Reason Age From Message``), container
  blocks (``State:``/``Last State:`` with ``Reason:``, ``Message:``, ``Exit Code:``), including
  captures from wide terminals where a field label was pasted onto the end of the previous line and
  long messages wrapped onto the next line;
* ``kubectl get events`` tables (``[NAMESPACE] LAST SEEN TYPE REASON OBJECT MESSAGE``);
* Event objects and Pod objects as dicts (``status.conditions`` ``PodScheduled=False``, pod-level
  ``status.reason`` such as ``OutOfnvidia.com/gpu`` / ``UnexpectedAdmissionError``, and
  ``containerStatuses``).

Container states and kubelet rejections are classified by :mod:`.startup`; event messages by the
parser of their source (scheduler, HAMi, admission, Kueue, Volcano).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_hetero.declared import as_written
from pytest_hetero.pending.admission import parse_admission_message
from pytest_hetero.pending.kueue import parse_kueue_message
from pytest_hetero.pending.model import Reason, as_map, conditions_of, make_reason, mappings_of
from pytest_hetero.pending.objects import (
    AffinityFields,
    ContainerStatusFields,
    EventObject,
    KubeObject,
    NodeAffinityFields,
    PodSpecFields,
    PodStatusFields,
    SchedulingGateFields,
)
from pytest_hetero.pending.scheduler import parse_hami_message, parse_scheduler_message
from pytest_hetero.pending.startup import (
    PULL,
    START,
    ContainerState,
    classify_startup,
    container_reasons,
    container_state,
    kubelet_admission,
)
from pytest_hetero.pending.volcano import parse_volcano_message

_LABELS = (
    "Container ID",
    "Image ID",
    "Image",
    "Port",
    "Host Port",
    "Host Ports",
    "Ports",
    "State",
    "Last State",
    "Reason",
    "Message",
    "Exit Code",
    "Signal",
    "Started",
    "Finished",
    "Ready",
    "Restart Count",
    "Limits",
    "Requests",
    "Environment",
    "Mounts",
    "Command",
    "Args",
    "Liveness",
    "Readiness",
    "Events",
    "Conditions",
    "Volumes",
    "QoS Class",
    "Node-Selectors",
    "Tolerations",
    "Status",
    "IP",
    "IPs",
    "Node",
    "Namespace",
    "Priority",
    "Labels",
    "Annotations",
    "Controlled By",
    "Init Containers",
    "Containers",
    "Name",
    "Service Account",
    "Start Time",
)
_LABEL = "|".join(re.escape(label) for label in sorted(_LABELS, key=len, reverse=True))
_SPLIT = re.compile(rf"(?<=\S)\s{{3,}}(?=(?:{_LABEL}):(?:\s|$))")
_FIELD = re.compile(rf"^\s*({_LABEL}):\s*(.*?)\s*$")
# Age may be missing from trimmed captures; From is one word, or "kubelet, <node>" before 1.20.
_EVENT_ROW = re.compile(r"^\s*(Normal|Warning)\s+(\S+)\s+(?:(.*?)\s{2,})?(\S+(?:, \S+)?)\s{2,}(.*?)\s*$")


def _source_for(component: str) -> str:
    """Reporting component of an event -> Reason source (kubelet when it cannot be told)."""
    low = component.lower()
    for name in ("volcano", "hami", "kueue"):
        if name in low:
            return name
    return "scheduler" if "scheduler" in low else "kubelet"


_SCHEDULER_VERDICT = re.compile(
    r"nodes are (?:un)?available|fit failure (?:summary )?on node|failed for reason [A-Z]|"
    r"failed to (?:fit in any node|find a fit)",
    re.IGNORECASE,
)
"""A scheduler's verdict in any version: ``0/N nodes are available`` (1.9+), ``No nodes are available that match``
(1.5-1.8), ``fit failure (summary) on node(s)`` (1.2-1.4), ``Failed for reason X`` (1.0-1.1)."""


def classify_message(message: str, *, reason: str = "", component: str = "") -> list[Reason]:
    """Reasons from one event (``reason``, ``message``, reporting ``component``); ``[]`` if not understood."""
    low = component.lower()
    if reason == "FailedScheduling":
        return parse_scheduler_message(message, source="volcano" if "volcano" in low else "scheduler")
    if reason == "FilteringFailed":
        return parse_hami_message(message) or [make_reason("hami", "unknown", message.strip())]
    admission = kubelet_admission(reason, message)
    if admission is not None:
        return [admission]
    if (
        reason in ("BackOff", "Failed", "FailedCreatePodContainer", "FailedCreatePodSandBox")
        or reason in PULL
    ):
        if "back-off restarting" in message.lower():
            return [make_reason("kubelet", "crash_loop", message.strip())]
        state = re.search(r"Error: (\w+)", message)
        known = PULL | START | {"CreateContainerConfigError", "CrashLoopBackOff", "OOMKilled"}
        word = state.group(1) if state and state.group(1) in known else ""
        startup = classify_startup(
            word or ("ErrImagePull" if "pull" in message.lower() else "StartError"), message
        )
        return [startup] if startup else []
    if reason == "OOMKilling":
        return [make_reason("kubelet", "oom_killed", message.strip())]
    if reason == "FailedMount":
        return [make_reason("kubelet", "container_config_error", message.strip())]
    found = parse_admission_message(message) or parse_kueue_message(message) or parse_volcano_message(message)
    if not found and _SCHEDULER_VERDICT.search(message):
        found = parse_scheduler_message(message)
    return found or parse_hami_message(message)


def unwrap(text: str) -> list[str]:
    """Split lines where a wide terminal pasted a ``Label:`` onto the previous line's end."""
    out: list[str] = []
    for line in text.splitlines():
        out.extend(part for part in _SPLIT.split(line.rstrip()))
    return out


_STATE_KEYS = ("Reason", "Message", "Exit Code")
"""Fields of a ``State:``/``Last State:`` block that :func:`container_reasons` reads."""


def _pod_admission(lines: list[str]) -> list[Reason]:
    """The kubelet admission reason in the pod-level ``Reason:``/``Message:`` fields (those before the
    ``Containers:`` section), if any."""
    containers_at = next((i for i, ln in enumerate(lines) if re.match(r"^\s*(?:Init )?Containers:", ln)), len(lines))
    reason: str | None = None
    message = ""
    for line in lines[:containers_at]:
        m = re.match(r"^(Reason|Message):\s+(.*)$", line)
        if m and m.group(1) == "Reason":
            reason = m.group(2).strip()
        elif m:
            message = m.group(2).strip()
    if reason is None:
        return []
    admitted = kubelet_admission(reason, message)
    return [admitted] if admitted is not None else []


@dataclass
class _DescribeScan:
    """The line-by-line read of ``kubectl describe pod``: the current ``container`` and its ``image``,
    the ``block`` being read (``state``/``last``/none) with the ``label`` of the latest field, the two
    state maps, then the ``Events:`` rows as ``[reason, from, message, type]``. Reasons of each finished
    container are added to ``reasons`` (no duplicates)."""

    reasons: list[Reason]
    container: str | None = None
    image: str | None = None
    block: str = ""
    label: str = ""
    state: ContainerState = field(default_factory=ContainerState)
    last: ContainerState = field(default_factory=ContainerState)
    in_events: bool = False
    event: list[str] | None = None
    events: list[list[str]] = field(default_factory=list)

    def flush(self) -> None:
        """Add the current container's reasons; start its state maps afresh."""
        found = container_reasons(self.container, self.state, self.last, image=self.image)
        self.reasons.extend(r for r in found if r not in self.reasons)
        self.state, self.last = ContainerState(), ContainerState()

    def read(self, line: str) -> None:
        """Take one (unwrapped) line."""
        if re.match(r"^\s*Events:\s*", line):
            self.flush()
            self.in_events, self.block = True, ""
            return
        if self.in_events:
            self._event_line(line)
            return
        header = re.match(r"^\s{1,4}([\w.-]+):\s*$", line)
        if header and header.group(1) not in _LABELS:
            self.flush()
            self.container, self.image, self.block, self.label = header.group(1), None, "", ""
            return
        m = _FIELD.match(line)
        if m:
            self._field(m.group(1), m.group(2))
        elif self.label == "Message" and self.block and line.strip() and not line.strip().startswith("...."):
            target = self._block_state()
            target.message = (target.message or "") + " " + line.strip()

    def _block_state(self) -> ContainerState:
        """The state the current block (``state``/``last``) fills."""
        return self.state if self.block == "state" else self.last

    def _event_line(self, line: str) -> None:
        """An ``Events:`` row, or the continuation of a wrapped message."""
        row = _EVENT_ROW.match(line)
        if row:
            self.event = [row.group(2), row.group(4), row.group(5), row.group(1)]
            self.events.append(self.event)
        elif self.event is not None and line.strip() and not re.match(r"^\s*-{3,}", line):
            self.event[2] += " " + line.strip()

    def _field(self, label: str, value: str) -> None:
        """A ``Label: value`` line of a container: its image, a state block's phase and fields; any
        other label (but ``Started``/``Finished``/``Signal``) ends the state block."""
        self.label = label
        if label == "Image":
            self.image = value or None
        if label in ("State", "Last State"):
            self.block = "state" if label == "State" else "last"
            self._block_state().phase = value
        elif label in _STATE_KEYS and self.block:
            target = self._block_state()
            if label == "Reason":
                target.reason = value
            elif label == "Message":
                target.message = value
            else:
                target.exit_code = value
        elif label not in ("Started", "Finished", "Signal"):
            self.block = ""


def parse_describe(text: str) -> list[Reason]:
    """Reasons from ``kubectl describe pod`` text: the pod-level admission reason, container states
    (per container, via :func:`container_reasons`), then Warning events (an event no parser
    understands is an ``unknown`` reason of its reporting component). Never raises."""
    lines = unwrap(text)
    scan = _DescribeScan(_pod_admission(lines))
    for line in lines:
        scan.read(line)
    scan.flush()
    reasons = scan.reasons
    for reason, component, message, kind in scan.events:
        if kind == "Warning":
            found = classify_message(message, reason=reason, component=component)
            found = found or [
                make_reason(
                    _source_for(component), "unknown", message.strip(), detail={"event_reason": reason}
                )
            ]
            reasons.extend(r for r in found if r not in reasons)
    return reasons


@dataclass(frozen=True)
class Columns:
    """The columns of a ``kubectl get`` table, from its header line (``LAST SEEN   TYPE   REASON …``): each
    upper-case name (one or two words) with the character span its cells take, up to the next name's start (the
    last column: to the line's end). kubectl aligns every row to its header, so a cell keeps its inner spaces."""

    bounds: dict[str, tuple[int, int | None]]

    @classmethod
    def of(cls, header: str) -> Columns:
        """The columns of ``header``."""
        starts = [(m.start(), m.group(0)) for m in re.finditer(r"[A-Z]+(?: [A-Z]+)?", header)]
        return cls({name: (start, starts[i + 1][0] if i + 1 < len(starts) else None)
                    for i, (start, name) in enumerate(starts)})

    def cell(self, line: str, name: str) -> str:
        """The cell of column ``name`` in ``line``, stripped ("" when the header has no such column: tables differ
        by kubectl version and flags, ``-A``, ``-o wide``)."""
        start, end = self.bounds.get(name, (len(line), None))
        return line[start:end].strip()


def parse_events_table(text: str) -> list[Reason]:
    """Reasons from a ``kubectl get events`` table (plain, ``-A``, or ``-o wide``); Warning rows only.

    Cells are cut at the header's column positions (kubectl aligns every row to them), so a message
    keeps its inner spaces and the ``-o wide`` columns after MESSAGE are not taken into it.
    """
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if re.search(r"\bREASON\b.*\bMESSAGE\b", line)), None)
    if header is None:
        return []
    columns = Columns.of(lines[header])
    reasons: list[Reason] = []
    for line in lines[header + 1 :]:
        if "Warning" not in columns.cell(line, "TYPE") or not columns.cell(line, "MESSAGE"):
            continue
        reason, message = columns.cell(line, "REASON"), columns.cell(line, "MESSAGE")
        component = columns.cell(line, "SOURCE")
        found = classify_message(message, reason=reason, component=component)
        found = found or [
            make_reason(_source_for(component), "unknown", message, detail={"event_reason": reason})
        ]
        reasons.extend(r for r in found if r not in reasons)
    return reasons


def parse_event_object(obj: Mapping[str, object]) -> list[Reason]:
    """Reasons from one core/v1 or events.k8s.io/v1 Event dict. A Normal event is read as an event
    row is (:func:`pytest_hetero.pending.events.classify_row`): ``[]`` unless it carries a refusal, as
    Volcano's ``queue resource quota insufficient`` / ``resource in cluster is overused`` do."""
    event = EventObject.parse(obj)
    message, reason = event.message, event.reason
    as_map(event.source, "source")  # refused when not a mapping (its component is event.component)
    component = str(event.component or event.reporting_component or event.reporting_controller or "")
    if event.type == "Normal":
        from pytest_hetero.pending.events import EventRow, classify_row  # events imports this module

        return classify_row(EventRow(type="Normal", reason=reason, message=message, source=component))
    found = classify_message(message, reason=reason, component=component)
    unknown = make_reason(
        _source_for(component),
        "unknown",
        message.strip(),
        detail={"event_reason": reason},
    )
    return found or ([unknown] if message.strip() else [])


def parse_pod(obj: Mapping[str, object]) -> list[Reason]:
    """Reasons from a Pod dict: PodScheduled=False, kubelet rejections, container statuses."""
    parsed = KubeObject.parse(obj)
    status = as_written(as_map(parsed.status_value, "status"), PodStatusFields)
    spec = as_written(as_map(parsed.spec_value, "spec"), PodSpecFields)
    reasons: list[Reason] = []
    for cond in conditions_of(parsed.status_conditions, "status.conditions"):
        if cond.type != "PodScheduled" or cond.status == "True":
            continue
        message = cond.message or ""
        if cond.reason == "SchedulingGated":
            gates = ",".join(
                str(as_written(g, SchedulingGateFields).name)
                for g in mappings_of(spec.scheduling_gates, "spec.schedulingGates")
            )
            reasons.append(
                make_reason(
                    "scheduler",
                    "scheduling_gated",
                    message or "SchedulingGated",
                    detail={"gates": gates} if gates else {},
                )
            )
            continue
        volcano = "volcano" in str(spec.scheduler_name)
        found = parse_scheduler_message(message, source="volcano" if volcano else "scheduler")
        affinity = as_written(as_map(spec.affinity, "spec.affinity"), AffinityFields)
        node_affinity = as_written(as_map(affinity.node_affinity, "spec.affinity.nodeAffinity"), NodeAffinityFields)
        if node_affinity.required_during_scheduling_ignored_during_execution and not spec.node_selector:
            found = [
                make_reason(
                    r.source, "node_affinity_mismatch", r.message, nodes=r.nodes, total_nodes=r.total_nodes
                )
                if r.code == "node_selector_mismatch"
                else r
                for r in found
            ]
        reasons += found
    kubelet = kubelet_admission(str(status.reason), str(status.message))
    if kubelet is not None:
        reasons.append(kubelet)
    for key, listed in (("initContainerStatuses", status.init_container_statuses),
                        ("containerStatuses", status.container_statuses)):
        for entry in mappings_of(listed, f"status.{key}"):
            seen = as_written(entry, ContainerStatusFields)
            reasons += container_reasons(
                str(seen.name) or None,
                container_state(as_map(seen.state, f"status.{key}[].state")),
                container_state(as_map(seen.last_state, f"status.{key}[].lastState")),
                image=str(seen.image) or None,
            )
    return reasons
