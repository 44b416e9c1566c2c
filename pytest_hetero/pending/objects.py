"""Kubernetes objects pasted as YAML/JSON (``kubectl get -o yaml|json``), parsed once, at the edge, for both readers
of pasted objects (the pending reasons here, :mod:`pytest_hetero.explain` there): :class:`KubeObject` (the top level
of any object) and :class:`EventObject` (a ``core/v1`` or ``events.k8s.io/v1`` Event).

The pasted text is untrusted: parsing never raises. A part of the wrong type is kept as written beside its lenient
reading (``metadata_value`` beside ``metadata``…), so that a strict reader (the pending readers refuse a
``metadata`` that is not a mapping with a :class:`~pytest_hetero.errors.ParseError` naming it) and a lenient one
(the explain readers read it as empty) read the same parse. Field names and meanings are the Kubernetes API's
(``ObjectMeta``, core/v1 ``Event``, events.k8s.io/v1 ``Event``, core/v1 ``Pod`` and ``Node``).

The fields read of a pasted mapping are declared once, as :mod:`msgspec` Structs whose fields are all ``object``
with the default a reader takes for an absent key (the ``*Fields`` classes), and read by one conversion,
:func:`~pytest_hetero.declared.as_written`: no value can be refused there (a pasted value is kept as written,
null included), and each reader narrows the values it uses. The apiserver's own objects, typed and strict, are the
engine's (:mod:`pytest_hetero.backends.kubernetes.objects`): a pasted object may be partial, edited or of another
version."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

import msgspec

from pytest_hetero.declared import as_written, resolve

_Fields = TypeVar("_Fields", bound=msgspec.Struct)



def _mapping(value: object) -> Mapping[str, object]:
    """``value`` when it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


class TopFields(msgspec.Struct, frozen=True, kw_only=True, rename={"api_version": "apiVersion"}):
    """The top-level fields of any pasted object, as written: ``kind`` and ``apiVersion`` ("" when absent),
    ``metadata``, ``spec``, ``status``, ``items`` (a ``…List``'s), ``message``, ``conditions`` (a status pasted
    alone) and ``type`` (an Event's); None when absent."""

    kind: object = ""
    api_version: object = ""
    metadata: object = None
    spec: object = None
    status: object = None
    items: object = None
    message: object = None
    conditions: object = None
    type: object = None


class MetaFields(msgspec.Struct, frozen=True, kw_only=True):
    """An ``ObjectMeta`` as written: ``name``, ``labels``, ``annotations``; None when absent."""

    name: object = None
    labels: object = None
    annotations: object = None


@dataclass(frozen=True)
class KubeObject:
    """A parsed YAML/JSON mapping read as a Kubernetes object.

    - ``kind`` and ``api`` (``apiVersion``) as text ("" when absent); ``name`` (``metadata.name`` as text; None when
      absent, null or ``metadata`` is not a mapping);
    - ``metadata`` and ``spec``: the mappings (empty when absent or not a mapping); ``metadata_value`` and
      ``spec_value``: as written (None when absent); ``meta``: the fields of ``metadata`` (:class:`MetaFields`);
    - ``status``: the mapping (None when absent or not a mapping); ``status_value``: as written (None when absent)
      and ``has_status``: whether the key is there (a kind-less status pasted alone has none: the object is its
      own status);
    - ``status_conditions``: ``status.conditions`` as written (None when absent or ``status`` is not a mapping);
      ``own_conditions``: the object's own ``conditions`` as written (a status pasted alone; None when absent);
    - ``items`` (the list of a ``…List``; None when not a list); ``message`` (the top-level ``message`` when text);
      ``event_like``: it has ``involvedObject`` / ``regarding`` or a ``type`` of Warning/Normal;
    - ``whole``: the mapping itself."""

    kind: str
    api: str
    name: str | None
    metadata: Mapping[str, object]
    metadata_value: object
    meta: MetaFields
    spec: Mapping[str, object]
    spec_value: object
    status: Mapping[str, object] | None
    status_value: object
    has_status: bool
    status_conditions: object
    own_conditions: object
    items: list[object] | None
    message: str | None
    event_like: bool
    whole: Mapping[str, object]

    @classmethod
    def parse(cls, obj: Mapping[str, object]) -> KubeObject:
        """Read ``obj``'s top level (see the class). Never raises."""
        top = as_written(obj, TopFields)
        metadata = _mapping(top.metadata)
        meta = as_written(metadata, MetaFields)
        found = top.status if isinstance(top.status, Mapping) else None
        return cls(kind=str(top.kind), api=str(top.api_version), name=None if meta.name is None else str(meta.name),
                   metadata=metadata, metadata_value=top.metadata, meta=meta, spec=_mapping(top.spec),
                   spec_value=top.spec, status=found, status_value=top.status, has_status="status" in obj,
                   status_conditions=None if found is None else as_written(found, StatusConditions).conditions,
                   own_conditions=top.conditions,
                   items=top.items if isinstance(top.items, list) else None,
                   message=top.message if isinstance(top.message, str) else None,
                   event_like="involvedObject" in obj or "regarding" in obj or top.type in ("Warning", "Normal"),
                   whole=obj)

    def status_or_empty(self) -> Mapping[str, object]:
        """The status mapping, empty when the object has none."""
        return self.status if self.status is not None else {}

    def status_or_self(self) -> object:
        """``status`` as written when the object has the key (a mapping, or a value of another type a strict reader
        refuses), else the object itself (a status pasted alone)."""
        return self.status_value if self.has_status else self.whole

    def conditions_or_own(self) -> object:
        """The conditions of :meth:`status_or_self` as written: ``status.conditions`` when the object has a
        ``status`` (None when that is not a mapping), else its own ``conditions``."""
        return self.status_conditions if self.has_status else self.own_conditions


class StatusConditions(msgspec.Struct, frozen=True, kw_only=True):
    """A status's ``conditions`` as written (None when absent)."""

    conditions: object = None


class EventFields(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A pasted Event's fields as written (core/v1, or events.k8s.io/v1's ``note``, ``regarding``,
    ``reportingController``): ``type`` (Warning when absent), ``reason`` ("" when absent), the rest None."""

    type: object = "Warning"
    reason: object = ""
    message: object = None
    note: object = None
    count: object = None
    source: object = None
    involved_object: object = None
    regarding: object = None
    reporting_component: object = None
    reporting_controller: object = None
    first_timestamp: object = None
    last_timestamp: object = None


class EventSourceFields(msgspec.Struct, frozen=True, kw_only=True):
    """An Event's ``source`` as written: its ``component`` (None when absent)."""

    component: object = None


class ReferenceFields(msgspec.Struct, frozen=True, kw_only=True):
    """An ``ObjectReference`` (an Event's ``involvedObject``/``regarding``) as written: ``kind``, ``name``,
    ``namespace`` ("" when absent)."""

    kind: object = ""
    name: object = ""
    namespace: object = ""


@dataclass(frozen=True)
class EventObject:
    """An Event (core/v1, or events.k8s.io/v1 whose ``note``/``regarding``/``reportingController`` stand for
    ``message``/``involvedObject``/``source.component``): ``type`` as text (Warning when absent), ``reason`` as
    text ("" when absent), ``message`` (``message``, else ``note``, as text; "" when neither), ``count`` (when an
    integer), ``source`` as written (None when absent) with its ``component`` (None when ``source`` is not a
    mapping), ``reporting_component`` and ``reporting_controller`` as written, ``involved``: the involved (or
    regarding) object's ``kind/name`` (kind lowercased; "" when neither is a non-empty mapping) and ``namespace`` (""
    when absent), and the first/last timestamps as text (absent or empty ones left out)."""

    type: str
    reason: str
    message: str
    count: int | None
    source: object
    component: object
    reporting_component: object
    reporting_controller: object
    involved: str
    namespace: str
    timestamps: tuple[str, ...]

    @classmethod
    def parse(cls, item: Mapping[str, object]) -> EventObject:
        """Read the event fields of ``item``. Never raises."""
        event = as_written(item, EventFields)
        inv = _mapping(event.involved_object or event.regarding)
        ref = as_written(inv, ReferenceFields)
        stamps = tuple(str(t) for t in (event.first_timestamp, event.last_timestamp) if t)
        return cls(str(event.type), str(event.reason), str(event.message or event.note or ""),
                   count=event.count if isinstance(event.count, int) else None, source=event.source,
                   component=as_written(_mapping(event.source), EventSourceFields).component,
                   reporting_component=event.reporting_component,
                   reporting_controller=event.reporting_controller,
                   involved=f"{str(ref.kind).lower()}/{ref.name}" if inv else "",
                   namespace=str(ref.namespace), timestamps=stamps)


class PodSpecFields(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A pasted Pod's ``spec`` as far as the pending readers read it, as written: ``schedulingGates``,
    ``schedulerName`` ("" when absent), ``affinity``, ``nodeSelector``; None when absent."""

    scheduling_gates: object = None
    scheduler_name: object = ""
    affinity: object = None
    node_selector: object = None


class SchedulingGateFields(msgspec.Struct, frozen=True, kw_only=True):
    """A ``spec.schedulingGates[]`` entry as written: its ``name`` (None when absent)."""

    name: object = None


class AffinityFields(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A pod's ``spec.affinity`` as written: its ``nodeAffinity`` (None when absent)."""

    node_affinity: object = None


class NodeAffinityFields(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A pod's ``spec.affinity.nodeAffinity`` as written: ``requiredDuringSchedulingIgnoredDuringExecution`` (None
    when absent)."""

    required_during_scheduling_ignored_during_execution: object = None


class PodStatusFields(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A pasted Pod's ``status`` as far as the pending readers read it, as written: ``reason`` and ``message`` (""
    when absent), ``initContainerStatuses`` and ``containerStatuses`` (None when absent)."""

    reason: object = ""
    message: object = ""
    init_container_statuses: object = None
    container_statuses: object = None


class ContainerStatusFields(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A pasted ``containerStatuses[]`` entry as written: ``name`` and ``image`` ("" when absent), ``state`` and
    ``lastState`` (None when absent)."""

    name: object = ""
    image: object = ""
    state: object = None
    last_state: object = None


class PodGroupSpecFields(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A Volcano PodGroup's ``spec`` as written: ``queue`` ("" when absent), ``minMember``, ``minResources``."""

    queue: object = ""
    min_member: object = None
    min_resources: object = None


class PhaseFields(msgspec.Struct, frozen=True, kw_only=True):
    """A ``phase`` as written ("" when absent): a Volcano PodGroup's ``status``, a Volcano Job's ``status.state``
    (``hetero explain`` and the PodGroup's Pending reasons read it)."""

    phase: object = ""


resolve(__name__)
