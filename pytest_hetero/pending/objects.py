"""Kubernetes objects pasted as YAML/JSON (``kubectl get -o yaml|json``), parsed once, at the edge, for both readers
of pasted objects (the pending reasons here, :mod:`pytest_hetero.explain` there): :class:`KubeObject` (the top level
of any object) and :class:`EventObject` (a ``core/v1`` or ``events.k8s.io/v1`` Event).

The pasted text is untrusted: parsing never raises. A part of the wrong type is kept as written beside its lenient
reading (``metadata_value`` beside ``metadata``…), so that a strict reader (the pending readers refuse a
``metadata`` that is not a mapping with a :class:`~pytest_hetero.errors.ParseError` naming it) and a lenient one
(the explain readers read it as empty) read the same parse. Field names and meanings are the Kubernetes API's
(``ObjectMeta``, core/v1 ``Event``, events.k8s.io/v1 ``Event``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


def _mapping(value: object) -> Mapping[str, object]:
    """``value`` when it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class KubeObject:
    """A parsed YAML/JSON mapping read as a Kubernetes object.

    - ``kind`` and ``api`` (``apiVersion``) as text ("" when absent); ``name`` (``metadata.name`` as text; None when
      absent, null or ``metadata`` is not a mapping);
    - ``metadata`` and ``spec``: the mappings (empty when absent or not a mapping); ``metadata_value`` and
      ``spec_value``: as written (None when absent);
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
        meta, spec, status, items = obj.get("metadata"), obj.get("spec"), obj.get("status"), obj.get("items")
        metadata = _mapping(meta)
        name, message = metadata.get("name"), obj.get("message")
        found = status if isinstance(status, Mapping) else None
        return cls(kind=str(obj.get("kind", "")), api=str(obj.get("apiVersion", "")),
                   name=None if name is None else str(name), metadata=metadata, metadata_value=meta,
                   spec=_mapping(spec), spec_value=spec, status=found, status_value=status,
                   has_status="status" in obj,
                   status_conditions=None if found is None else found.get("conditions"),
                   own_conditions=obj.get("conditions"),
                   items=items if isinstance(items, list) else None,
                   message=message if isinstance(message, str) else None,
                   event_like="involvedObject" in obj or "regarding" in obj or obj.get("type") in ("Warning", "Normal"),
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
        inv = _mapping(item.get("involvedObject") or item.get("regarding"))
        source, count = item.get("source"), item.get("count")
        stamps = tuple(str(t) for t in (item.get("firstTimestamp"), item.get("lastTimestamp")) if t)
        return cls(str(item.get("type", "Warning")), str(item.get("reason", "")),
                   str(item.get("message") or item.get("note") or ""),
                   count=count if isinstance(count, int) else None, source=source,
                   component=_mapping(source).get("component"),
                   reporting_component=item.get("reportingComponent"),
                   reporting_controller=item.get("reportingController"),
                   involved=f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}" if inv else "",
                   namespace=str(inv.get("namespace", "")), timestamps=stamps)
