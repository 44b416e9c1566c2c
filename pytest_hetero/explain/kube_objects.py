"""Kubernetes objects pasted as YAML/JSON (``kubectl get -o yaml|json``), parsed once, at the edge, into frozen
shapes holding the fields the explain readers use: :class:`KubeObject` (any object's top level, shared with the
pending readers: :mod:`pytest_hetero.pending.objects`), then by kind
:class:`NodeObject`, :class:`WorkloadObject` (Kueue), :class:`PodGroupObject`, :class:`VcJobObject` and
:class:`QueueObject` (Volcano), and :class:`KubeEvent` (a ``core/v1`` or ``events.k8s.io/v1`` Event).

The pasted text is untrusted: a field that is absent, null or of another type than the API's takes the default
each shape documents; values recorded as finding quantities keep their scalar as written (any other value as its
text). The field names and meanings are the Kubernetes API's (core/v1 Node, Event), Kueue's
(kueue.x-k8s.io/v1beta1 Workload) and Volcano's (scheduling.volcano.sh PodGroup/Queue, batch.volcano.sh Job); each
part read is declared once as a Struct of the fields as written (the ``*Fields`` classes) and read by
:func:`~pytest_hetero.pending.objects.as_written`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import msgspec

from pytest_hetero.declared import as_written, resolve
from pytest_hetero.explain.model import Value
from pytest_hetero.pending.events import EventRow
from pytest_hetero.pending.model import Condition
from pytest_hetero.pending.objects import EventObject, KubeObject, PhaseFields, PodGroupSpecFields

__all__ = ["KubeEvent", "KubeObject", "NodeObject", "PodGroupObject", "PodSetAssignment", "QueueObject",
           "VcJobObject", "WorkloadObject", "conditions", "scalar"]


def scalar(value: object) -> Value:
    """``value`` when it is a JSON scalar (text, number, bool, null), else its text (a pasted list or mapping
    where the API has a scalar)."""
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def _texts(block: object) -> dict[str, str]:
    """A mapping's entries as text (``{}`` when ``block`` is not a mapping): labels, optional resource blocks."""
    return {str(k): str(v) for k, v in block.items()} if isinstance(block, Mapping) else {}


def _resources(value: object) -> dict[str, str]:
    """A resource list (``capacity``, ``allocatable``, a pod set's ``flavors``…) as text: ``{}`` when absent or
    empty. Raises AttributeError, as the readers always did, for a value that is not a mapping (the explain core
    reports such a block as unread)."""
    if not value:
        return {}
    if not isinstance(value, Mapping):
        raise AttributeError(f"'{type(value).__name__}' object has no attribute 'items'")
    return {str(k): str(v) for k, v in value.items()}


def _objects(value: object) -> list[Mapping[str, object]]:
    """The mapping entries of a list field (``conditions``, ``addresses``, ``taints``…): none when absent or empty
    (any other entry skipped). Raises TypeError, as the readers always did, for a value that cannot be iterated
    (the explain core reports such a block as unread)."""
    if not value:
        return []
    if not isinstance(value, Iterable):
        raise TypeError(f"'{type(value).__name__}' object is not iterable")
    return [entry for entry in value if isinstance(entry, Mapping)]


def conditions(value: object) -> tuple[Condition, ...]:
    """The mapping entries of a ``conditions`` list (none when absent, null or empty), in order, each parsed by the
    pending readers' :meth:`Condition.parse <pytest_hetero.pending.model.Condition.parse>` (its fields as text,
    None when absent or null); raises as :func:`_objects` does (other entries skipped)."""
    return tuple(Condition.parse(c) for c in _objects(value))


class NodeStatusFields(msgspec.Struct, frozen=True, kw_only=True):
    """A Node's ``status`` (or a node status pasted alone) as written: ``addresses``, ``capacity``,
    ``allocatable``; None when absent."""

    addresses: object = None
    capacity: object = None
    allocatable: object = None


class NodeAddressFields(msgspec.Struct, frozen=True, kw_only=True):
    """A ``status.addresses[]`` entry as written: ``type`` (``Hostname``, ``InternalIP``…) and ``address``."""

    type: object = None
    address: object = None


class TaintsFields(msgspec.Struct, frozen=True, kw_only=True):
    """A Node's ``spec`` as far as it is read: ``taints`` as written."""

    taints: object = None


class TaintFields(msgspec.Struct, frozen=True, kw_only=True):
    """A ``spec.taints[]`` entry as written: ``key``, ``value``, ``effect``; None when absent."""

    key: object = None
    value: object = None
    effect: object = None

    def text(self) -> str:
        """``key[=value]:effect`` (``=value`` left out when empty)."""
        return f"{self.key}{'=' + str(self.value) if self.value else ''}:{self.effect}"


@dataclass(frozen=True)
class NodeObject:
    """A core/v1 Node (or a kind-less node status): ``name`` (metadata.name, else the ``Hostname`` address; None when
    neither), ``addresses`` (type -> address), ``capacity`` / ``allocatable`` (resource -> quantity as text),
    ``labels``, ``taints`` (``key[=value]:effect``), ``conditions`` and the values of its HAMi
    ``hami.io/node-*-register`` annotations (``hami_registers``), in order."""

    name: str | None
    addresses: dict[str, str]
    capacity: dict[str, str]
    allocatable: dict[str, str]
    labels: dict[str, str]
    taints: tuple[str, ...]
    conditions: tuple[Condition, ...]
    hami_registers: tuple[str, ...]

    @classmethod
    def parse(cls, obj: KubeObject) -> NodeObject:
        """Read the node fields of ``obj``. Raises AttributeError/TypeError as the readers always did when
        ``capacity``/``allocatable`` is not a mapping or ``addresses`` not iterable."""
        status, found = (obj.status, obj.status_conditions) if obj.status is not None else (obj.whole,
                                                                                           obj.own_conditions)
        fields = as_written(status, NodeStatusFields)
        addresses = {str(a.type): str(a.address)
                     for a in (as_written(entry, NodeAddressFields) for entry in _objects(fields.addresses))}
        taints = tuple(as_written(t, TaintFields).text() for t in _objects(as_written(obj.spec, TaintsFields).taints))
        ann = obj.meta.annotations
        registers = tuple(str(value) for key, value in (ann.items() if isinstance(ann, Mapping) else ())
                          if str(key).startswith("hami.io/node-") and str(key).endswith("-register"))
        return cls(name=obj.name or addresses.get("Hostname") or None, addresses=addresses,
                   capacity=_resources(fields.capacity), allocatable=_resources(fields.allocatable),
                   labels=_texts(obj.meta.labels), taints=taints, conditions=conditions(found),
                   hami_registers=registers)


class WorkloadStatusFields(msgspec.Struct, frozen=True, kw_only=True):
    """A Kueue Workload's ``status`` as far as it is read: ``admission`` as written."""

    admission: object = None


class AdmissionFields(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A Workload's ``status.admission`` as written: ``clusterQueue`` and ``podSetAssignments``."""

    cluster_queue: object = None
    pod_set_assignments: object = None


class PodSetAssignmentFields(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A ``podSetAssignments[]`` entry as written: ``flavors`` and ``resourceUsage``."""

    flavors: object = None
    resource_usage: object = None


class PodSetAssignment(NamedTuple):
    """A Kueue ``status.admission.podSetAssignments[]`` entry: ``flavors`` (resource -> ResourceFlavor) and
    ``usage`` (``resourceUsage``: resource -> quantity), as text."""

    flavors: dict[str, str]
    usage: dict[str, str]


@dataclass(frozen=True)
class WorkloadObject:
    """A Kueue Workload: ``conditions`` by type (the last of a type wins), the admitting ClusterQueue
    (``status.admission.clusterQueue``; None when not admitted) and the pod sets' flavor assignments."""

    conditions: dict[str | None, Condition]
    cluster_queue: Value
    assignments: tuple[PodSetAssignment, ...]

    @classmethod
    def parse(cls, obj: KubeObject) -> WorkloadObject:
        """Read the workload fields of ``obj``. Raises AttributeError as the reader always did when a pod set's
        ``flavors``/``resourceUsage`` is not a mapping."""
        found = as_written(obj.status_or_empty(), WorkloadStatusFields).admission
        admission = as_written(found if isinstance(found, Mapping) else {}, AdmissionFields)
        assignments = tuple(PodSetAssignment(_resources(ps.flavors), _resources(ps.resource_usage))
                            for ps in (as_written(entry, PodSetAssignmentFields)
                                       for entry in _objects(admission.pod_set_assignments)))
        return cls({c.type: c for c in conditions(obj.status_conditions)}, scalar(admission.cluster_queue),
                   assignments)


class VcJobSpecFields(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A Volcano Job's ``spec`` as written: ``minAvailable``, ``queue``; None when absent."""

    min_available: object = None
    queue: object = None


class VcJobStatusFields(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A Volcano Job's ``status`` as written: ``state`` (``{phase}``), ``minAvailable``, the ``pending`` and
    ``running`` counters; None when absent."""

    state: object = None
    min_available: object = None
    pending: object = None
    running: object = None


class QueueSpecFields(msgspec.Struct, frozen=True, kw_only=True):
    """A Volcano Queue's ``spec`` as written: ``weight``, ``reclaimable`` and the resource blocks ``capability``,
    ``guarantee``, ``deserved``; None when absent."""

    weight: object = None
    reclaimable: object = None
    capability: object = None
    guarantee: object = None
    deserved: object = None


class QueueStatusFields(msgspec.Struct, frozen=True, kw_only=True):
    """A Volcano Queue's ``status`` as written: ``state`` and the resource blocks ``allocated``, ``reservation``;
    None when absent (its counters are read by presence: :data:`_QUEUE_COUNTERS`)."""

    state: object = None
    allocated: object = None
    reservation: object = None


@dataclass(frozen=True)
class PodGroupObject:
    """A Volcano PodGroup: ``queue`` (spec.queue as text, "" when absent), ``phase`` (status.phase as text, ""
    when absent), ``min_member`` (spec.minMember as written) and ``min_resources`` (spec.minResources, as text)."""

    queue: str
    phase: str
    min_member: Value
    min_resources: dict[str, str]

    @classmethod
    def parse(cls, obj: KubeObject) -> PodGroupObject:
        """Read the PodGroup fields of ``obj``."""
        spec, status = as_written(obj.spec, PodGroupSpecFields), as_written(obj.status_or_empty(), PhaseFields)
        return cls(str(spec.queue), str(status.phase), scalar(spec.min_member), _texts(spec.min_resources))


@dataclass(frozen=True)
class VcJobObject:
    """A Volcano Job (batch.volcano.sh): ``phase`` (status.state.phase as text, "" when absent), ``min_available``
    (status's, else spec's), the ``pending`` and ``running`` counters and ``queue`` (spec.queue), as written."""

    phase: str
    min_available: Value
    pending: Value
    running: Value
    queue: Value

    @classmethod
    def parse(cls, obj: KubeObject) -> VcJobObject:
        """Read the Job fields of ``obj``."""
        spec, status = as_written(obj.spec, VcJobSpecFields), as_written(obj.status_or_empty(), VcJobStatusFields)
        state = as_written(status.state if isinstance(status.state, Mapping) else {}, PhaseFields)
        return cls(str(state.phase), scalar(status.min_available or spec.min_available), scalar(status.pending),
                   scalar(status.running), scalar(spec.queue))


_QUEUE_COUNTERS = ("pending", "running", "inqueue", "completed", "unknown")


@dataclass(frozen=True)
class QueueObject:
    """A Volcano Queue: spec ``weight`` and ``reclaimable`` and status ``state`` as written; the resource blocks
    present as mappings (spec capability/guarantee/deserved, then status allocated/reservation: name -> resource
    -> quantity as text, in that order) and the status counters present (pending, running, inqueue, completed,
    unknown), as written."""

    weight: Value
    reclaimable: Value
    state: Value
    blocks: dict[str, dict[str, str]]
    counters: dict[str, Value]

    @classmethod
    def parse(cls, obj: KubeObject) -> QueueObject:
        """Read the Queue fields of ``obj``."""
        status = obj.status_or_empty()
        spec, fields = as_written(obj.spec, QueueSpecFields), as_written(status, QueueStatusFields)
        blocks = {part: _texts(block) for part, block in (
            ("capability", spec.capability), ("guarantee", spec.guarantee), ("deserved", spec.deserved),
            ("allocated", fields.allocated), ("reservation", fields.reservation)) if isinstance(block, Mapping)}
        return cls(scalar(spec.weight), scalar(spec.reclaimable), scalar(fields.state), blocks,
                   {c: scalar(status[c]) for c in _QUEUE_COUNTERS if c in status})


@dataclass(frozen=True)
class KubeEvent:
    """An Event (core/v1 or events.k8s.io/v1) as an :class:`EventRow` (type, default Warning; reason; message or
    note; an integer count; the reporting component; ``kind/name`` and namespace of the involved/regarding object)
    and its first/last timestamps as written (absent or empty ones left out)."""

    row: EventRow
    timestamps: tuple[str, ...]

    @classmethod
    def parse(cls, item: Mapping[str, object]) -> KubeEvent:
        """Read the event fields of ``item`` (:class:`EventObject`). Never raises."""
        event = EventObject.parse(item)
        row = EventRow(event.type, event.reason, event.message, count=event.count,
                       source=str(event.component or event.reporting_component or ""), object=event.involved,
                       namespace=event.namespace)
        return cls(row, event.timestamps)


resolve(__name__)
