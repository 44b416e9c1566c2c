"""Kubernetes API objects as the backend reads them, parsed once from the JSON the apiserver serves.

Each parser takes one object as ``json.loads`` of a GET, LIST item or watch event gives it (field names
of the Kubernetes API reference, ``core/v1`` Pod and Node) and returns a frozen dataclass holding only
the fields the backend reads. A field the apiserver always serves (``Required`` in :mod:`.manifests`: a
Pod's ``metadata.name``, ``spec`` and ``status``, a listed Node's ``metadata``, ``spec`` and ``status``, a
condition's ``type`` and ``status``…) is read as it is; an optional one, when absent, is filled with its API
default (empty map or list, None for an absent time or string, False, 0). The rest of the package reads
attributes of these, never the JSON. Times stay RFC 3339 strings as served (``metav1.Time``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pytest_hetero.backends.kubernetes.manifests import (
    ConditionJSON,
    ContainerState,
    ContainerStatusJSON,
    EventJSON,
    ListedNode,
    ObjectMeta,
    PortJSON,
    ServedEndpointSlice,
    ServedPod,
    StatusDetails,
    StatusJSON,
    TerminatedState,
)
from pytest_hetero.backends.kubernetes.manifests import Container as ContainerJSON
from pytest_hetero.backends.protocol import NodeCondition, Taint


@dataclass(frozen=True)
class Condition:
    """One ``status.conditions[]`` entry of a Pod or Node: ``type`` (``Ready``, ``PodScheduled``…),
    ``status`` (``True``/``False``/``Unknown``), ``reason``, ``message``, ``last_transition``
    (``lastTransitionTime``); None where the entry has no such field."""

    type: str | None
    status: str | None
    reason: str | None
    message: str | None
    last_transition: str | None

    def fields(self) -> NodeCondition:
        """``{"type", "status", "reason", "message", "lastTransitionTime"}`` (API names, None when absent)."""
        return {"type": self.type, "status": self.status, "reason": self.reason, "message": self.message,
                "lastTransitionTime": self.last_transition}


def parse_condition(raw: ConditionJSON) -> Condition:
    """One ``status.conditions[]`` entry (JSON) as a :class:`Condition`."""
    return Condition(type=raw["type"], status=raw["status"], reason=raw.get("reason"),
                     message=raw.get("message"), last_transition=raw.get("lastTransitionTime"))


def parse_conditions(raw: list[ConditionJSON] | None) -> tuple[Condition, ...]:
    """``status.conditions`` (a JSON list, or None) as :class:`Condition`s, in order."""
    return tuple(parse_condition(c) for c in raw or [])


def find(conditions: tuple[Condition, ...], kind: str, status: str | None = None) -> Condition | None:
    """The first condition of type ``kind`` (and, when given, of ``status``), else None."""
    return next((c for c in conditions if c.type == kind and (status is None or c.status == status)), None)


@dataclass(frozen=True)
class Metadata:
    """An object's ``metadata`` as served: ``name``, ``namespace`` (None when absent: a cluster-scoped object),
    ``labels``, ``annotations``, ``resource_version`` (``resourceVersion``), creationTimestamp (``created``),
    deletionTimestamp (``deleting_since``), ``finalizers``, the ownerReferences' ``(kind, name)``s (``owners``)
    and their ``uid``s (``owner_uids``); None, empty where absent."""

    name: str
    namespace: str | None
    labels: dict[str, str]
    annotations: dict[str, str]
    resource_version: str | None
    created: str | None
    deleting_since: str | None
    finalizers: list[str]
    owners: tuple[tuple[str, str], ...]
    owner_uids: tuple[str, ...]


def parse_metadata(raw: ObjectMeta) -> Metadata:
    """:class:`Metadata` from an object's ``metadata`` JSON (the one parser of it: Pods, Nodes, :func:`parse_meta`)."""
    owners = raw.get("ownerReferences") or []
    return Metadata(name=raw["name"], namespace=raw.get("namespace"), labels=dict(raw.get("labels") or {}),
                    annotations=dict(raw.get("annotations") or {}), resource_version=raw.get("resourceVersion"),
                    created=raw.get("creationTimestamp"), deleting_since=raw.get("deletionTimestamp"),
                    finalizers=list(raw.get("finalizers") or []),
                    owners=tuple((o["kind"], o["name"]) for o in owners), owner_uids=tuple(o["uid"] for o in owners))


@dataclass(frozen=True)
class Node:
    """A ``core/v1`` Node: ``metadata`` name, resourceVersion, labels, annotations; ``spec`` taints (as
    served: ``{"key", "value"?, "effect", "timeAdded"?}``) and unschedulable (cordoned); ``status``
    conditions, capacity and allocatable (resource name → quantity string)."""

    name: str
    resource_version: str | None
    labels: dict[str, str]
    annotations: dict[str, str]
    taints: list[Taint]
    unschedulable: bool
    conditions: tuple[Condition, ...]
    capacity: dict[str, str]
    allocatable: dict[str, str]

    @property
    def simulated(self) -> bool:
        """True for a node KWOK simulates (annotation ``kwok.x-k8s.io/node: fake``)."""
        return self.annotations.get("kwok.x-k8s.io/node") == "fake"


def parse_node(raw: ListedNode) -> Node:
    """A Node from its JSON as a LIST or GET answers it (see :class:`Node`)."""
    meta, spec, status = parse_metadata(raw["metadata"]), raw["spec"], raw["status"]
    return Node(name=meta.name, resource_version=meta.resource_version, labels=meta.labels,
                annotations=meta.annotations,
                taints=list(spec.get("taints") or []), unschedulable=bool(spec.get("unschedulable")),
                conditions=parse_conditions(status.get("conditions")),
                capacity=dict(status.get("capacity") or {}), allocatable=dict(status.get("allocatable") or {}))


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


def _container(raw: ContainerJSON) -> Container:
    resources = raw["resources"]
    return Container(name=raw["name"], image=raw["image"], requests=dict(resources.get("requests") or {}),
                     limits=dict(resources.get("limits") or {}),
                     env={e["name"]: e.get("value") for e in raw.get("env") or []},
                     restart_policy=raw.get("restartPolicy"))


@dataclass(frozen=True)
class Ended:
    """A container's ``terminated`` state: ``reason`` (``OOMKilled``, ``Error``, ``Completed``…), ``exit_code``
    (``exitCode``), ``message``, ``started_at``/``finished_at`` (``startedAt``/``finishedAt``); None where absent."""

    reason: str | None
    exit_code: int | None
    message: str | None
    started_at: str | None
    finished_at: str | None


def _ended(raw: TerminatedState | None) -> Ended | None:
    if not raw:
        return None
    return Ended(reason=raw.get("reason"), exit_code=raw["exitCode"], message=raw.get("message"),
                 started_at=raw.get("startedAt"), finished_at=raw.get("finishedAt"))


@dataclass(frozen=True)
class Waiting:
    """A container's ``waiting`` state: ``reason`` (``ErrImagePull``, ``CrashLoopBackOff``…) and ``message``."""

    reason: str | None
    message: str | None


@dataclass(frozen=True)
class ContainerStatus:
    """One ``status.containerStatuses[]`` entry: ``name``, ``image``, ``image_id`` (``imageID``),
    ``restart_count`` (``restartCount``, 0 when absent); its ``state``: ``running`` (the key is present),
    ``running_since`` (``running.startedAt``), ``terminated`` (the key is present), ``ended`` (its
    terminated state, None when absent or empty), ``waiting`` (None when absent or empty); ``last_ended``:
    ``lastState.terminated`` (None when absent or empty)."""

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


def _container_status(raw: ContainerStatusJSON) -> ContainerStatus:
    state: ContainerState = raw["state"]
    waiting = state.get("waiting")
    return ContainerStatus(name=raw["name"], image=raw["image"], image_id=raw["imageID"],
                           restart_count=int(raw["restartCount"]), running="running" in state,
                           running_since=(state.get("running") or {}).get("startedAt"),
                           terminated="terminated" in state, ended=_ended(state.get("terminated")),
                           waiting=Waiting(reason=waiting.get("reason"), message=waiting.get("message"))
                           if waiting else None,
                           last_ended=_ended(raw["lastState"].get("terminated")))


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


def unseen_pod(name: str) -> ServedPod:
    """A pod known by ``name`` only (the run saw none of its workload's): empty ``spec`` and ``status``."""
    return {"metadata": {"name": name}, "spec": {"containers": []}, "status": {}}


def parse_pod(raw: ServedPod) -> Pod:
    """A Pod from its JSON (see :class:`Pod`)."""
    meta, spec, status = parse_metadata(raw["metadata"]), raw["spec"], raw["status"]
    conditions = status.get("conditions")
    statuses = status.get("containerStatuses")
    return Pod(name=meta.name, namespace=meta.namespace, labels=meta.labels, annotations=meta.annotations,
               created=meta.created, deleting_since=meta.deleting_since, owners=meta.owners,
               node_name=str(spec.get("nodeName") or ""), hostname=spec.get("hostname"),
               subdomain=spec.get("subdomain"), restart_policy=spec.get("restartPolicy", "Always"),
               containers=tuple(_container(c) for c in spec["containers"]),
               init_containers=tuple(_container(c) for c in spec.get("initContainers") or []),
               overhead=dict(spec.get("overhead") or {}), phase=status.get("phase"), ip=status.get("podIP"),
               reason=status.get("reason"),
               message=status.get("message"), conditions=parse_conditions(conditions),
               container_statuses=tuple(_container_status(s) for s in statuses or []),
               served_conditions=conditions, served_container_statuses=statuses,
               deleted=bool(raw.get("deleted")))


@dataclass(frozen=True)
class SlicePort:
    """A ``ports[]`` entry of a Service or EndpointSlice: ``protocol`` (``TCP`` when absent) and ``port``."""

    protocol: str | None
    port: int | None


def parse_ports(raw: list[PortJSON] | None) -> list[SlicePort]:
    """``ports`` of a Service spec or an EndpointSlice (JSON list, or None) as :class:`SlicePort`s."""
    return [SlicePort(protocol=p.get("protocol", "TCP"), port=p.get("port")) for p in raw or []]


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


def parse_slice(raw: ServedEndpointSlice) -> EndpointSlice:
    """An EndpointSlice from its JSON."""
    return EndpointSlice(ports=parse_ports(raw["ports"]), endpoints=[
        Endpoint(ready=e["conditions"].get("ready"), hostname=e.get("hostname"),
                 pod=(e.get("targetRef") or {}).get("name"), addresses=list(e["addresses"]))
        for e in raw["endpoints"] or []])


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
    """:class:`Meta` from an object's ``metadata`` JSON; KeyError without ``name`` or ``namespace``."""
    meta = parse_metadata(raw)
    return Meta(name=meta.name, namespace=str(raw["namespace"]), labels=meta.labels, annotations=meta.annotations,
                created=meta.created, deleting_since=meta.deleting_since, finalizers=meta.finalizers)


@dataclass(frozen=True)
class Event:
    """A ``core/v1`` Event: ``type`` (``Normal``/``Warning``), ``reason``, ``message``, ``count`` and the
    reporting ``source.host`` (``source_host``: the kubelet's node); None where absent."""

    type: str | None
    reason: str | None
    message: str | None
    count: int | None
    source_host: str | None

    def brief(self) -> dict[str, object]:
        """``{"type", "reason", "message", "count"}`` (API names, None when absent)."""
        return {"type": self.type, "reason": self.reason, "message": self.message, "count": self.count}


def parse_event(raw: EventJSON) -> Event:
    """An Event from its JSON."""
    return Event(type=raw.get("type"), reason=raw.get("reason"), message=raw.get("message"), count=raw.get("count"),
                 source_host=raw["source"].get("host"))


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
