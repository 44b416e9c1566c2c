"""Kubernetes API objects as the backend reads them, parsed once from the JSON the apiserver serves.

Each parser takes one object as ``json.loads`` of a GET, LIST item or watch event gives it (field names
of the Kubernetes API reference, ``core/v1`` Pod and Node) and returns a frozen dataclass holding only
the fields the backend reads. A field the apiserver always serves (``Required`` in :mod:`.manifests`: a
Pod's ``metadata.name``, ``spec`` and ``status``, a listed Node's ``metadata``, ``spec`` and ``status``, a
condition's ``type`` and ``status``…) is required; an optional one, when absent, is filled with its API
default (empty map or list, None for an absent time or string, False, 0). The rest of the package reads
attributes of these, never the JSON. Times stay RFC 3339 strings as served (``metav1.Time``).

The served shapes are declared once as :mod:`msgspec` Structs (the ``_*JSON`` classes, and the domain objects
that are one: :class:`Condition`, :class:`Metadata`, :class:`Ended`, :class:`Waiting`, :class:`SlicePort`,
:class:`Event`) and each object is converted in one ``msgspec.convert`` call (C, no second JSON pass: this is
the watch loop's path). An object that does not fit (a required field absent, a field of another type) raises
``msgspec.ValidationError`` (a ``ValueError``) whose message names the field's ``$.path``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import msgspec

from pytest_hetero.backends.kubernetes.manifests import (
    ConditionJSON,
    ContainerStatusJSON,
    EventJSON,
    ListedNode,
    ObjectMeta,
    PortJSON,
    ServedEndpointSlice,
    ServedPod,
    StatusDetails,
    StatusJSON,
)
from pytest_hetero.backends.protocol import NodeCondition, Taint
from pytest_hetero.declared import resolve


class Condition(msgspec.Struct, frozen=True, kw_only=True, rename={"last_transition": "lastTransitionTime"}):
    """One ``status.conditions[]`` entry of a Pod or Node: ``type`` (``Ready``, ``PodScheduled``…),
    ``status`` (``True``/``False``/``Unknown``), ``reason``, ``message``, ``last_transition``
    (``lastTransitionTime``); None where the entry has no such field."""

    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition: str | None = None

    def fields(self) -> NodeCondition:
        """``{"type", "status", "reason", "message", "lastTransitionTime"}`` (API names, None when absent)."""
        return {"type": self.type, "status": self.status, "reason": self.reason, "message": self.message,
                "lastTransitionTime": self.last_transition}


def parse_condition(raw: ConditionJSON) -> Condition:
    """One ``status.conditions[]`` entry (JSON) as a :class:`Condition`."""
    return msgspec.convert(raw, Condition)


def parse_conditions(raw: list[ConditionJSON] | None) -> tuple[Condition, ...]:
    """``status.conditions`` (a JSON list, or None) as :class:`Condition`s, in order."""
    return msgspec.convert(raw or (), tuple[Condition, ...])


def find(conditions: tuple[Condition, ...], kind: str, status: str | None = None) -> Condition | None:
    """The first condition of type ``kind`` (and, when given, of ``status``), else None."""
    return next((c for c in conditions if c.type == kind and (status is None or c.status == status)), None)


class OwnerReference(msgspec.Struct, frozen=True, kw_only=True):
    """An ``ownerReferences[]`` entry: the owner's ``kind``, ``name`` and ``uid`` (the API requires all three)."""

    kind: str
    name: str
    uid: str


class Metadata(msgspec.Struct, frozen=True, kw_only=True,
               rename={"resource_version": "resourceVersion", "created": "creationTimestamp",
                       "deleting_since": "deletionTimestamp", "owner_references": "ownerReferences"}):
    """An object's ``metadata`` as served: ``name``, ``namespace`` (None when absent: a cluster-scoped object),
    ``uid``, ``labels``, ``annotations``, ``resource_version`` (``resourceVersion``), creationTimestamp (``created``),
    deletionTimestamp (``deleting_since``), ``finalizers`` and ``owner_references`` (``ownerReferences``, whose
    ``(kind, name)``s are :attr:`owners` and ``uid``s :attr:`owner_uids`); None, empty where absent."""

    name: str
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    resource_version: str | None = None
    created: str | None = None
    deleting_since: str | None = None
    finalizers: list[str] = []
    owner_references: tuple[OwnerReference, ...] = ()

    @property
    def owners(self) -> tuple[tuple[str, str], ...]:
        """The ``(kind, name)`` of each owner reference, in order."""
        return tuple((o.kind, o.name) for o in self.owner_references)

    @property
    def owner_uids(self) -> tuple[str, ...]:
        """The ``uid`` of each owner reference, in order."""
        return tuple(o.uid for o in self.owner_references)


def parse_metadata(raw: ObjectMeta) -> Metadata:
    """:class:`Metadata` from an object's ``metadata`` JSON (the one parser of it: Pods, Nodes, :func:`parse_meta`)."""
    return msgspec.convert(raw, Metadata)


@dataclass(frozen=True)
class Node:
    """A ``core/v1`` Node: ``metadata`` name, resourceVersion, labels, annotations, uid (None where not served: the
    one identity a node deleted and created again under its name does not keep); ``spec`` taints (as served:
    ``{"key", "value"?, "effect", "timeAdded"?}``) and unschedulable (cordoned); ``status`` conditions, capacity and
    allocatable (resource name → quantity string)."""

    name: str
    resource_version: str | None
    labels: dict[str, str]
    annotations: dict[str, str]
    taints: list[Taint]
    unschedulable: bool
    conditions: tuple[Condition, ...]
    capacity: dict[str, str]
    allocatable: dict[str, str]
    uid: str | None = None

    @property
    def simulated(self) -> bool:
        """True for a node KWOK simulates (annotation ``kwok.x-k8s.io/node: fake``)."""
        return self.annotations.get("kwok.x-k8s.io/node") == "fake"


class _NodeSpecJSON(msgspec.Struct, frozen=True, kw_only=True):
    """A served Node's ``spec``, as far as it is converted: ``unschedulable`` (its ``taints`` are kept as served)."""

    unschedulable: bool = False


class _NodeStatusJSON(msgspec.Struct, frozen=True, kw_only=True):
    """A served Node's ``status``, as far as it is read: ``conditions``, ``capacity``, ``allocatable``."""

    conditions: tuple[Condition, ...] = ()
    capacity: dict[str, str] = {}
    allocatable: dict[str, str] = {}


class _NodeJSON(msgspec.Struct, frozen=True, kw_only=True):
    """A Node as a LIST or GET serves it (``metadata``, ``spec`` and ``status`` always served)."""

    metadata: Metadata
    spec: _NodeSpecJSON
    status: _NodeStatusJSON


def parse_node(raw: ListedNode) -> Node:
    """A Node from its JSON as a LIST or GET answers it (see :class:`Node`)."""
    node = msgspec.convert(raw, _NodeJSON)
    meta, spec, status = node.metadata, node.spec, node.status
    # The taints stay the dicts as served (evidence keeps them); Taint's postponed Required[...] is not resolvable
    # at run time (protocol imports it for type checking only), so msgspec cannot convert into it.
    return Node(name=meta.name, resource_version=meta.resource_version, labels=meta.labels,
                annotations=meta.annotations, taints=list(raw["spec"].get("taints") or []),
                unschedulable=spec.unschedulable,
                conditions=status.conditions, capacity=status.capacity, allocatable=status.allocatable, uid=meta.uid)


@dataclass(frozen=True)
class Container:
    """One ``spec.containers[]`` / ``spec.initContainers[]`` entry: ``name``, ``image`` (None when absent),
    ``requests`` and ``limits`` (``resources.requests``/``limits``: resource name → quantity string),
    ``env`` (name → literal ``value``, None for one set ``valueFrom``), ``restart_policy`` (an init
    container's ``restartPolicy``: ``Always`` makes it a sidecar; None otherwise)."""

    name: str | None
    image: str | None
    requests: dict[str, str]
    limits: dict[str, str]
    env: dict[str, str | None]
    restart_policy: str | None


NO_CONTAINER = Container(name=None, image=None, requests={}, limits={}, env={}, restart_policy=None)
"""A pod spec without containers reads as having this one."""


class _ResourcesJSON(msgspec.Struct, frozen=True, kw_only=True):
    """A container's ``resources``: ``requests`` and ``limits`` (resource name → quantity string)."""

    requests: dict[str, str] = {}
    limits: dict[str, str] = {}


class _EnvVarJSON(msgspec.Struct, frozen=True, kw_only=True):
    """An ``env[]`` entry: ``name`` and its literal ``value`` (None for one set ``valueFrom``)."""

    name: str
    value: str | None = None


class _ContainerJSON(msgspec.Struct, frozen=True, kw_only=True, rename={"restart_policy": "restartPolicy"}):
    """A served container: ``name``, ``image`` and ``resources`` (always served), ``env``, ``restartPolicy``."""

    name: str
    image: str
    resources: _ResourcesJSON
    env: tuple[_EnvVarJSON, ...] = ()
    restart_policy: str | None = None


def _container(raw: _ContainerJSON) -> Container:
    return Container(name=raw.name, image=raw.image, requests=raw.resources.requests, limits=raw.resources.limits,
                     env={e.name: e.value for e in raw.env}, restart_policy=raw.restart_policy)


class Ended(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A container's ``terminated`` state: ``reason`` (``OOMKilled``, ``Error``, ``Completed``…), ``exit_code``
    (``exitCode``, always served), ``message``, ``started_at``/``finished_at`` (``startedAt``/``finishedAt``); None
    where absent."""

    exit_code: int
    reason: str | None = None
    message: str | None = None
    started_at: str | None = None
    finished_at: str | None = None


class Waiting(msgspec.Struct, frozen=True, kw_only=True):
    """A container's ``waiting`` state: ``reason`` (``ErrImagePull``, ``CrashLoopBackOff``…) and ``message``."""

    reason: str | None = None
    message: str | None = None


_NOT_WAITING = Waiting()
"""A ``waiting: {}`` state, which reads as none."""


@dataclass(frozen=True)
class ContainerStatus:
    """One ``status.containerStatuses[]`` entry: ``name``, ``image``, ``image_id`` (``imageID``),
    ``restart_count`` (``restartCount``, 0 when absent); its ``state``: ``running`` (the key is present),
    ``running_since`` (``running.startedAt``), ``terminated`` (the key is present), ``ended`` (its
    terminated state, None when absent), ``waiting`` (None when absent or empty); ``last_ended``:
    ``lastState.terminated`` (None when absent)."""

    name: str | None
    image: str | None
    image_id: str | None
    restart_count: int
    running: bool
    running_since: str | None
    terminated: bool
    ended: Ended | None
    waiting: Waiting | None
    last_ended: Ended | None


NO_STATUS = ContainerStatus(name=None, image=None, image_id=None, restart_count=0, running=False,
                            running_since=None, terminated=False, ended=None, waiting=None, last_ended=None)
"""The status of a container the kubelet has not reported yet."""


class _RunningJSON(msgspec.Struct, frozen=True, kw_only=True, rename={"started_at": "startedAt"}):
    """A container's ``running`` state: ``startedAt``."""

    started_at: str | None = None


class _StateJSON(msgspec.Struct, frozen=True, kw_only=True):
    """A container's ``state``/``lastState``: at most one of ``waiting``, ``running``, ``terminated`` (``{}``
    when none)."""

    waiting: Waiting | None = None
    running: _RunningJSON | None = None
    terminated: Ended | None = None


class _ContainerStatusJSON(msgspec.Struct, frozen=True, kw_only=True,
                           rename={"image_id": "imageID", "restart_count": "restartCount", "last_state": "lastState"}):
    """A served ``containerStatuses[]`` entry (every field read is always served)."""

    name: str
    image: str
    image_id: str
    restart_count: int
    state: _StateJSON
    last_state: _StateJSON


def _container_status(raw: _ContainerStatusJSON) -> ContainerStatus:
    state, waiting = raw.state, raw.state.waiting
    return ContainerStatus(name=raw.name, image=raw.image, image_id=raw.image_id, restart_count=raw.restart_count,
                           running=state.running is not None,
                           running_since=None if state.running is None else state.running.started_at,
                           terminated=state.terminated is not None, ended=state.terminated,
                           waiting=None if waiting == _NOT_WAITING else waiting,
                           last_ended=raw.last_state.terminated)


@dataclass(frozen=True)
class Pod:
    """A ``core/v1`` Pod: ``metadata`` name, namespace (None when absent), labels, annotations,
    creationTimestamp and deletionTimestamp (``created``/``deleting_since``), ownerReferences'
    ``(kind, name)``s; ``spec`` nodeName ("" when unbound), hostname and subdomain (None when absent),
    restartPolicy (``Always`` when absent), containers, initContainers, overhead; ``status`` phase, podIP
    (``ip``), reason and message (None when absent), conditions, containerStatuses (parsed, and as served:
    ``served_conditions``, ``served_container_statuses``, None when absent, which evidence keeps);
    ``deleted``: the run's pod watch saw it deleted (its own ``deleted`` mark, :mod:`.watch`)."""

    name: str
    namespace: str | None
    labels: dict[str, str]
    annotations: dict[str, str]
    created: str | None
    deleting_since: str | None
    owners: tuple[tuple[str, str], ...]
    node_name: str
    hostname: str | None
    subdomain: str | None
    restart_policy: str | None
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...]
    overhead: dict[str, str]
    phase: str | None
    ip: str | None
    reason: str | None
    message: str | None
    conditions: tuple[Condition, ...]
    container_statuses: tuple[ContainerStatus, ...]
    served_conditions: list[ConditionJSON] | None
    served_container_statuses: list[ContainerStatusJSON] | None
    deleted: bool


class _PodSpecJSON(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A served Pod's ``spec``, as far as it is read (``containers`` always served)."""

    containers: tuple[_ContainerJSON, ...]
    init_containers: tuple[_ContainerJSON, ...] = ()
    node_name: str = ""
    hostname: str | None = None
    subdomain: str | None = None
    restart_policy: str | None = "Always"
    overhead: dict[str, str] = {}


class _PodStatusJSON(msgspec.Struct, frozen=True, kw_only=True,
                     rename={"ip": "podIP", "container_statuses": "containerStatuses"}):
    """A served Pod's ``status``, as far as it is read."""

    phase: str | None = None
    ip: str | None = None
    reason: str | None = None
    message: str | None = None
    conditions: tuple[Condition, ...] = ()
    container_statuses: tuple[_ContainerStatusJSON, ...] = ()


class _PodJSON(msgspec.Struct, frozen=True, kw_only=True):
    """A Pod as served (``metadata``, ``spec`` and ``status`` always), with the watch's ``deleted`` mark."""

    metadata: Metadata
    spec: _PodSpecJSON
    status: _PodStatusJSON
    deleted: bool = False


def unseen_pod(name: str) -> ServedPod:
    """A pod known by ``name`` only (the run saw none of its workload's): empty ``spec`` and ``status``."""
    return {"metadata": {"name": name}, "spec": {"containers": []}, "status": {}}


def parse_pod(raw: ServedPod) -> Pod:
    """A Pod from its JSON (see :class:`Pod`)."""
    pod = msgspec.convert(raw, _PodJSON)
    meta, spec, status = pod.metadata, pod.spec, pod.status
    served = raw["status"]  # evidence keeps these two lists as served, every key included
    return Pod(name=meta.name, namespace=meta.namespace, labels=meta.labels, annotations=meta.annotations,
               created=meta.created, deleting_since=meta.deleting_since, owners=meta.owners,
               node_name=spec.node_name, hostname=spec.hostname, subdomain=spec.subdomain,
               restart_policy=spec.restart_policy, containers=tuple(_container(c) for c in spec.containers),
               init_containers=tuple(_container(c) for c in spec.init_containers), overhead=spec.overhead,
               phase=status.phase, ip=status.ip, reason=status.reason, message=status.message,
               conditions=status.conditions,
               container_statuses=tuple(_container_status(s) for s in status.container_statuses),
               served_conditions=served.get("conditions"),
               served_container_statuses=served.get("containerStatuses"), deleted=pod.deleted)


class SlicePort(msgspec.Struct, frozen=True, kw_only=True):
    """A ``ports[]`` entry of a Service or EndpointSlice: ``protocol`` (``TCP`` when absent) and ``port`` (None when
    absent: a slice's every port)."""

    protocol: str | None = "TCP"
    port: int | None = None


def parse_ports(raw: list[PortJSON] | None) -> list[SlicePort]:
    """``ports`` of a Service spec or an EndpointSlice (JSON list, or None) as :class:`SlicePort`s."""
    return msgspec.convert(raw or [], list[SlicePort])


@dataclass(frozen=True)
class Endpoint:
    """An ``endpoints[]`` entry of an EndpointSlice: ``ready`` (``conditions.ready``: None when unknown, which
    counts as ready), ``hostname`` (None when absent), the ``pod`` of its ``targetRef`` (None when absent)
    and its ``addresses``."""

    ready: bool | None
    hostname: str | None
    pod: str | None
    addresses: list[str]


@dataclass(frozen=True)
class EndpointSlice:
    """A ``discovery.k8s.io/v1`` EndpointSlice: its ``ports`` and ``endpoints``."""

    ports: list[SlicePort]
    endpoints: list[Endpoint]


class _EndpointConditionsJSON(msgspec.Struct, frozen=True, kw_only=True):
    """An endpoint's ``conditions``: ``ready`` (None when unknown)."""

    ready: bool | None = None


class _TargetRefJSON(msgspec.Struct, frozen=True, kw_only=True):
    """An endpoint's ``targetRef``: the ``name`` of the pod behind it."""

    name: str | None = None


class _EndpointJSON(msgspec.Struct, frozen=True, kw_only=True, rename={"target_ref": "targetRef"}):
    """A served ``endpoints[]`` entry (``addresses`` and ``conditions`` always served)."""

    addresses: list[str]
    conditions: _EndpointConditionsJSON
    hostname: str | None = None
    target_ref: _TargetRefJSON | None = None


class _SliceJSON(msgspec.Struct, frozen=True, kw_only=True):
    """A served EndpointSlice: ``ports`` and ``endpoints`` (always served, null when the slice has none)."""

    ports: list[SlicePort] | None
    endpoints: list[_EndpointJSON] | None


def parse_slice(raw: ServedEndpointSlice) -> EndpointSlice:
    """An EndpointSlice from its JSON."""
    found = msgspec.convert(raw, _SliceJSON)
    return EndpointSlice(ports=found.ports or [], endpoints=[
        Endpoint(ready=e.conditions.ready, hostname=e.hostname, pod=None if e.target_ref is None else e.target_ref.name,
                 addresses=e.addresses)
        for e in found.endpoints or []])


@dataclass(frozen=True)
class Meta:
    """The ``metadata`` of a namespaced object: ``name``, ``namespace``, ``labels``, ``annotations``,
    creationTimestamp (``created``), deletionTimestamp (``deleting_since``), ``finalizers``."""

    name: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    created: str | None
    deleting_since: str | None
    finalizers: list[str]


def parse_meta(raw: ObjectMeta) -> Meta:
    """:class:`Meta` from an object's ``metadata`` JSON; ``msgspec.ValidationError`` without ``name``, KeyError
    without ``namespace``."""
    meta = parse_metadata(raw)
    return Meta(name=meta.name, namespace=str(raw["namespace"]), labels=meta.labels, annotations=meta.annotations,
                created=meta.created, deleting_since=meta.deleting_since, finalizers=meta.finalizers)


class EventSource(msgspec.Struct, frozen=True, kw_only=True):
    """An Event's ``source`` (always served, ``{}`` for one recorded through ``events.k8s.io/v1``): the reporting
    ``host`` (the kubelet's node; None when absent)."""

    host: str | None = None


class Event(msgspec.Struct, frozen=True, kw_only=True):
    """A ``core/v1`` Event: ``type`` (``Normal``/``Warning``), ``reason``, ``message``, ``count`` and the
    reporting ``source`` (always served; its host is :attr:`source_host`); None where absent."""

    source: EventSource
    type: str | None = None
    reason: str | None = None
    message: str | None = None
    count: int | None = None

    @property
    def source_host(self) -> str | None:
        """The reporting ``source.host`` (the kubelet's node), None when absent."""
        return self.source.host

    def brief(self) -> dict[str, object]:
        """``{"type", "reason", "message", "count"}`` (API names, None when absent)."""
        return {"type": self.type, "reason": self.reason, "message": self.message, "count": self.count}


def parse_event(raw: EventJSON) -> Event:
    """An Event from its JSON."""
    return msgspec.convert(raw, Event)


@dataclass(frozen=True)
class Status:
    """A ``metav1.Status``: ``status`` (``Success``/``Failure``), ``message``, the ``kind`` of its ``details``
    and the ``(reason, message)`` of each of its ``details.causes``; None where absent."""

    status: str | None
    message: str | None
    kind: str | None
    causes: tuple[tuple[str | None, str | None], ...]


def parse_status(text: str | bytes | None) -> Status | None:
    """A :class:`Status` from its JSON text (an ApiException's ``body``, an exec error channel's message); None
    when the text is empty, not JSON, or not a JSON object (the caller then falls back on what it has). The body
    is whatever answered the call, not always the apiserver (a gateway in front of it answers a ``google.rpc.Status``
    whose ``details`` is a list): ``details`` that is not an object reads as none, ``causes`` that is not a list
    as none, and a cause that is not an object is left out. Never raises."""
    try:
        found = json.loads(text or "{}")
    except ValueError:
        return None
    raw: StatusJSON = found
    if not isinstance(found, dict):
        return None
    given = raw.get("details")
    details: StatusDetails = given if isinstance(given, dict) else {}
    listed = details.get("causes")
    causes = [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else []
    return Status(status=raw.get("status"), message=raw.get("message"), kind=details.get("kind"),
                  causes=tuple((c.get("reason"), c.get("message")) for c in causes))


resolve(__name__)
