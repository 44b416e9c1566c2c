"""Queue controllers behind a workload: which of their APIs the apiserver serves, their objects, an admission.

Versions come from API discovery (``GET /apis``, once per session), never from a failed read:
Kueue Workloads are read as ``kueue.x-k8s.io/v1beta2`` where the cluster serves it (Kueue v0.15+;
v1beta1 is deprecated there and no longer served from v0.20), ``v1beta1`` only where that is all it
serves; Volcano PodGroups as ``scheduling.volcano.sh/v1beta1``. A group the cluster does not serve
means the controller is not installed, which the scheduling item says in those words; a read that
fails is kept as an error of the item's evidence, not swallowed.

An admitted Kueue Workload is recorded (:func:`kueue_admission`): its ClusterQueue, the flavor of
each resource, the quota it uses, when it was created, reserved quota and was admitted (Kubernetes
condition times: 1 s resolution) and the ClusterQueue's reservation and usage then.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, overload

import msgspec
from kubernetes import client

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes.manifests import (
    ConditionJSON,
    FlavorUsage,
    ObjectList,
    QueueObject,
    ServedClusterQueue,
    ServedLocalQueue,
    ServedPodGroup,
    ServedWorkload,
)
from pytest_hetero.backends.kubernetes.objects import Condition, find, parse_conditions, parse_metadata
from pytest_hetero.declared import resolve
from pytest_hetero.evidence.usage import epoch

if TYPE_CHECKING:
    from pytest_hetero.backends.protocol import ClusterQueueSeen, KueueAdmission, PodSetFields

KUEUE = ("kueue.x-k8s.io", ("v1beta2", "v1beta1"))
"""Kueue's API group and the Workload versions this backend reads, preferred first."""
VOLCANO = ("scheduling.volcano.sh", ("v1beta1",))
"""Volcano's scheduling API group and the PodGroup versions this backend reads."""
JOB_UID = "kueue.x-k8s.io/job-uid"
"""Label Kueue puts on the Workload of a batch/v1 Job: the Job's uid."""


@dataclass
class Served:
    """What ``GET /apis`` answered: group → versions served (``groups``), or why it could not be read
    (``error``: discovery refused or failed; nothing is then assumed about any group)."""

    groups: dict[str, list[str]] = field(default_factory=dict)
    error: str | None = None

    def version(self, api: tuple[str, tuple[str, ...]]) -> str | None:
        """The first of ``api``'s versions the cluster serves (``api`` = (group, versions preferred
        first)); None when it serves none of them."""
        group, versions = api
        return next((v for v in versions if v in self.groups.get(group, [])), None)

    def describe(self, api: tuple[str, tuple[str, ...]]) -> str:
        """``kueue.x-k8s.io/v1beta2`` (what is read), or why nothing is: not served / not discoverable."""
        group, versions = api
        if self.error:
            return f"{group} unknown: API discovery failed ({self.error})"
        chosen = self.version(api)
        if chosen:
            return f"{group}/{chosen}"
        served = self.groups.get(group)
        if served:
            return f"{group} served only in versions {', '.join(served)} (this backend reads {', '.join(versions)})"
        return f"the apiserver serves no {group} API (API discovery): the controller is not installed"


def discover(api: client.ApiClient) -> Served:
    """The API groups and versions the apiserver serves (one ``GET /apis``). Never raises: a refused or
    failed discovery is returned as ``Served(error=...)``."""
    try:
        found = client.ApisApi(api).get_api_versions(_request_timeout=kc.API_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - kept as Served.error and reported by the caller
        return Served(error=kc.api_outcome(exc, "discover the served API groups (GET /apis)").message)
    return Served(groups={g.name: [v.version for v in g.versions or []] for g in found.groups or []})


@overload
def read_objects(api: client.ApiClient, served: Served, which: tuple[str, tuple[str, ...]],
                 plural: Literal["workloads"], namespace: str, label_selector: str | None = None
                 ) -> tuple[list[ServedWorkload], str | None]: ...
@overload
def read_objects(api: client.ApiClient, served: Served, which: tuple[str, tuple[str, ...]],
                 plural: Literal["podgroups"], namespace: str, label_selector: str | None = None
                 ) -> tuple[list[ServedPodGroup], str | None]: ...
@overload
def read_objects(api: client.ApiClient, served: Served, which: tuple[str, tuple[str, ...]],
                 plural: Literal["localqueues"], namespace: str, label_selector: str | None = None
                 ) -> tuple[list[ServedLocalQueue], str | None]: ...
def read_objects(api: client.ApiClient, served: Served, which: tuple[str, tuple[str, ...]], plural: str,
                 namespace: str, label_selector: str | None = None
                 ) -> tuple[list[ServedWorkload], str | None] | tuple[list[ServedPodGroup], str | None] \
        | tuple[list[ServedLocalQueue], str | None]:
    """``(objects, error)``: the namespace's ``plural`` of ``which`` matching ``label_selector``, in the
    version discovery chose; ``([], None)`` when the group is not served,
    ``([], error text)`` when the read failed."""
    version = served.version(which)
    if version is None:
        return [], None
    try:
        found: Any = client.CustomObjectsApi(api).list_namespaced_custom_object(
            which[0], version, namespace, plural, label_selector=label_selector, _request_timeout=kc.API_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - returned: the caller records it
        return [], kc.api_outcome(exc, f"list {plural}.{which[0]}/{version} in {namespace}").message
    listed: ObjectList[Any] = found
    return list(listed["items"]), None


def owned_by(objects: list[ServedPodGroup], uid: str) -> list[ServedPodGroup]:
    """The objects with an ownerReference to ``uid``."""
    return [o for o in objects if uid in parse_metadata(o["metadata"]).owner_uids]


class PodSetAssignment(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One ``status.admission.podSetAssignments[]`` entry of a Workload: ``name`` (required by Kueue's API),
    ``count``, ``flavors`` (resource → flavor) and ``resource_usage`` (``resourceUsage``: resource → quantity);
    None where absent."""

    name: str
    count: int | None = None
    flavors: dict[str, str] | None = None
    resource_usage: dict[str, str] | None = None

    def fields(self) -> PodSetFields:
        """``{"name", "count", "flavors", "resourceUsage"}`` (API names, None when absent)."""
        return {"name": self.name, "count": self.count, "flavors": self.flavors, "resourceUsage": self.resource_usage}


class _PriorityClassRef(msgspec.Struct, frozen=True, kw_only=True):
    """A v1beta2 Workload's ``spec.priorityClassRef``: ``group``, ``kind`` (``PriorityClass`` or
    ``WorkloadPriorityClass``), ``name`` (None where absent)."""

    group: str | None = None
    kind: str | None = None
    name: str | None = None


class _WorkloadSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A Workload's ``spec`` as far as the gate reads it: ``queueName``, ``priority``, the priority class (v1beta2
    ``priorityClassRef``; v1beta1 ``priorityClassName``/``priorityClassSource``); None where absent."""

    queue_name: str | None = None
    priority: int | None = None
    priority_class_ref: _PriorityClassRef | None = None
    priority_class_name: str | None = None
    priority_class_source: str | None = None


class _Admission(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A Workload's ``status.admission``: ``clusterQueue`` and ``podSetAssignments`` (both required by Kueue's
    API; the list null reads as empty)."""

    cluster_queue: str
    pod_set_assignments: tuple[PodSetAssignment, ...] | None


class _WorkloadStatus(msgspec.Struct, frozen=True, kw_only=True):
    """A Workload's ``status``: ``conditions`` (``metav1.Condition``, every field of which is kept) and
    ``admission`` (None where absent)."""

    conditions: list[ConditionJSON] | None = None
    admission: _Admission | None = None


class _WorkloadMeta(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A Workload's ``metadata`` as far as the gate reads it: ``name`` and ``creationTimestamp`` (None where
    absent)."""

    name: str | None = None
    creation_timestamp: str | None = None


class _ServedWorkload(msgspec.Struct, frozen=True, kw_only=True):
    """A Kueue Workload as served (``metadata`` always; null or ``{}`` reads as no name)."""

    metadata: _WorkloadMeta | None
    spec: _WorkloadSpec | None = None
    status: _WorkloadStatus | None = None


@dataclass(frozen=True)
class Workload:
    """A Kueue Workload (``kueue.x-k8s.io`` v1beta2 or v1beta1): ``metadata`` name and creationTimestamp
    (``created``); ``spec`` queueName, priority, priorityClassRef's ``(name, kind)`` (v1beta2; None when
    absent or empty), priorityClassName and priorityClassSource (v1beta1); ``status`` conditions (parsed, and
    ``served_conditions``: the JSON list as served, which evidence keeps) and the admission's clusterQueue and
    podSetAssignments. None where absent."""

    name: str | None
    created: str | None
    queue_name: str | None
    priority: int | None
    priority_ref: tuple[str | None, str | None] | None
    priority_class_name: str | None
    priority_class_source: str | None
    conditions: tuple[Condition, ...]
    served_conditions: list[ConditionJSON] | None
    cluster_queue: str | None
    pod_sets: tuple[PodSetAssignment, ...]

    def holds(self, kind: str, status: str = "True") -> bool:
        """True when the condition ``kind`` (``Admitted``, ``QuotaReserved``, ``Evicted``…) has ``status``."""
        return find(self.conditions, kind, status) is not None


def parse_workload(raw: ServedWorkload) -> Workload:
    """A Workload from its JSON (see :class:`Workload`), read once into its declared shape. ValueError
    (``msgspec.ValidationError``, naming the field's ``$.path``) without ``metadata``, or with a field not shaped
    as Kueue's API serves it (an admission without ``clusterQueue``, a pod set without ``name``, a condition
    without ``type`` or ``status``…)."""
    served = msgspec.convert(raw, _ServedWorkload)
    meta, spec = served.metadata or _WorkloadMeta(), served.spec or _WorkloadSpec()
    status = served.status or _WorkloadStatus()
    ref = spec.priority_class_ref
    admission = status.admission
    return Workload(name=meta.name, created=meta.creation_timestamp, queue_name=spec.queue_name,
                    priority=spec.priority,
                    priority_ref=(ref.name, ref.kind) if ref is not None and ref != _PriorityClassRef() else None,
                    priority_class_name=spec.priority_class_name, priority_class_source=spec.priority_class_source,
                    conditions=parse_conditions(status.conditions), served_conditions=status.conditions,
                    cluster_queue=admission.cluster_queue if admission else None,
                    pod_sets=(admission.pod_set_assignments or ()) if admission else ())


def kueue_admission(api: client.ApiClient, version: str, workload: ServedWorkload,
                    submitted_epoch_s: float | None) -> KueueAdmission:
    """What an admitted Workload records: ``api_version``, ``workload``, ``local_queue``,
    ``cluster_queue``, ``flavors`` (resource → flavor), ``resource_usage`` (resource → quantity) and
    ``pod_sets`` as ``status.admission.podSetAssignments`` says; ``created_at``/``quota_reserved_at``/
    ``admitted_at`` (RFC 3339) and ``wait_s`` (Workload creation → Admitted, seconds, 1 s resolution;
    ``wait_since_submit_s`` from the backend's submission, epoch seconds ``submitted_epoch_s``);
    ``cluster_queue_status``: the ClusterQueue's ``flavorsReservation``, ``flavorsUsage``,
    ``admittedWorkloads``, ``pendingWorkloads`` (``error`` instead when it cannot be read)."""
    seen = parse_workload(workload)
    sets = seen.pod_sets
    flavors = {k: v for s in sets for k, v in (s.flavors or {}).items()}
    usage = {k: v for s in sets for k, v in (s.resource_usage or {}).items()}
    created = seen.created
    reserved, admitted = find(seen.conditions, "QuotaReserved"), find(seen.conditions, "Admitted")
    admitted_at = admitted.last_transition if admitted else None
    c, a = epoch(created), epoch(admitted_at)
    queue_status: ClusterQueueSeen
    try:
        found: Any = client.CustomObjectsApi(api).get_cluster_custom_object(
            KUEUE[0], version, "clusterqueues", str(seen.cluster_queue), _request_timeout=kc.API_TIMEOUT_S)
        cq: ServedClusterQueue = found
        queue_status = cluster_queue_seen(parse_queue(cq))
    except Exception as exc:  # noqa: BLE001 - the admission stands; the queue's usage is noted as unreadable
        queue_status = {"error": kc.api_outcome(exc, "read the ClusterQueue").message}
    return {
        "api_version": f"{KUEUE[0]}/{version}", "workload": seen.name,
        "local_queue": seen.queue_name,
        "cluster_queue": seen.cluster_queue, "flavors": flavors, "resource_usage": usage,
        "pod_sets": [s.fields() for s in sets],
        "created_at": created, "quota_reserved_at": reserved.last_transition if reserved else None,
        "quota_reserved_message": reserved.message if reserved else None, "admitted_at": admitted_at,
        "wait_s": None if c is None or a is None else a - c,
        "wait_since_submit_s": None if a is None or submitted_epoch_s is None else round(a - submitted_epoch_s, 3),
        "cluster_queue_status": queue_status,
    }


class Queue(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A Kueue ClusterQueue's or LocalQueue's ``status`` as served (None where the API left a field out, or the
    whole status): ``flavors_usage`` (``flavorsUsage``), ``flavor_usage`` (``flavorUsage``: a LocalQueue's of
    Kueue before v0.9), ``flavors_reservation`` (``flavorsReservation``), ``admitted_workloads``,
    ``reserving_workloads`` and ``pending_workloads`` (``admittedWorkloads``…)."""

    flavors_usage: list[FlavorUsage] | None = None
    flavor_usage: list[FlavorUsage] | None = None
    flavors_reservation: list[FlavorUsage] | None = None
    admitted_workloads: int | None = None
    reserving_workloads: int | None = None
    pending_workloads: int | None = None


class _ServedQueue(msgspec.Struct, frozen=True, kw_only=True):
    """A ClusterQueue or LocalQueue as served, as far as its ``status`` (None where absent)."""

    status: Queue | None = None


def parse_queue(raw: ServedClusterQueue | ServedLocalQueue) -> Queue:
    """A ClusterQueue's or LocalQueue's :class:`Queue` from its JSON (the one parser of a queue's ``status``), read
    once into its declared shape. ValueError (``msgspec.ValidationError``, naming the field's ``$.path``) for a
    status not shaped as Kueue's API serves it."""
    return msgspec.convert(raw, _ServedQueue).status or Queue()


class _LocalQueueSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A LocalQueue's ``spec``: the ``clusterQueue`` it points at (None where absent)."""

    cluster_queue: str | None = None


class _Name(msgspec.Struct, frozen=True, kw_only=True):
    """An object's ``metadata`` as far as its ``name`` (always set by the apiserver)."""

    name: str


class LocalQueue(msgspec.Struct, frozen=True, kw_only=True):
    """A Kueue LocalQueue as far as where it leads: ``metadata.name`` and ``spec.clusterQueue``
    (:attr:`cluster_queue`; None where absent)."""

    metadata: _Name
    spec: _LocalQueueSpec | None = None

    @property
    def name(self) -> str:
        """The LocalQueue's name."""
        return self.metadata.name

    @property
    def cluster_queue(self) -> str | None:
        """The ClusterQueue it points at (None where the spec names none)."""
        return self.spec.cluster_queue if self.spec else None


def parse_local_queue(raw: ServedLocalQueue) -> LocalQueue:
    """A LocalQueue from its JSON, read once into its declared shape. ValueError (``msgspec.ValidationError``,
    naming the field's ``$.path``) without ``metadata.name``, or with a field not shaped as Kueue's API serves it."""
    return msgspec.convert(raw, LocalQueue)


class _QueueObjectStatus(msgspec.Struct, frozen=True, kw_only=True):
    """A Workload's or PodGroup's ``status`` as far as its ``conditions``, kept as served (a PodGroup's carry
    Volcano's ``transitionID`` too; never read field by field here; None where absent)."""

    conditions: list[dict[str, object]] | None = None


class QueueObjectSeen(msgspec.Struct, frozen=True, kw_only=True):
    """A queue object (Kueue Workload, Volcano PodGroup) as ``scheduling.pending`` keeps it: its ``kind``,
    ``metadata.name`` and ``status.conditions`` as served (:attr:`conditions`; None where absent)."""

    kind: str
    metadata: _Name
    status: _QueueObjectStatus | None = None

    @property
    def conditions(self) -> list[dict[str, object]] | None:
        """``status.conditions`` as served (None where the object has no status or no conditions)."""
        return self.status.conditions if self.status else None


def parse_queue_object(raw: QueueObject) -> QueueObjectSeen:
    """A Workload or PodGroup as ``scheduling.pending`` keeps it, read once into its declared shape. ValueError
    (``msgspec.ValidationError``, naming the field's ``$.path``) without ``kind`` or ``metadata.name`` (the API
    serves both on every object), or with conditions that are no list of objects."""
    return msgspec.convert(raw, QueueObjectSeen)


def cluster_queue_seen(queue: Queue) -> ClusterQueueSeen:
    """A ClusterQueue's ``status`` counters as an admission keeps them (None where the API left one out)."""
    return {"flavorsReservation": queue.flavors_reservation, "flavorsUsage": queue.flavors_usage,
            "admittedWorkloads": queue.admitted_workloads, "pendingWorkloads": queue.pending_workloads,
            "reservingWorkloads": queue.reserving_workloads}


resolve(__name__)
