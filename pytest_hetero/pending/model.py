"""The normalised pending reason: one vocabulary for every source that can refuse a workload.

A :class:`Reason` says which component refused (``source``), why, in a closed vocabulary
(``code``), the broad ``category`` of that code, and -- when the reader knows it -- the failure
category behind it (``cause``: the cause of an image pull failure, the termination behind a crash
loop, a device error behind a failing probe). Whatever the source printed is kept in ``message`` so
nothing is lost when a message does not fit the vocabulary; such fragments get ``code="unknown"``.

Readers report codes and facts, never an owner: :attr:`Reason.owner` is looked up in the failure table
(:mod:`pytest_hetero.judge.failures`, ``cause`` first, else ``code``), the one place owners are decided.

Sources: ``scheduler`` (kube-scheduler and scheduler extenders' FailedScheduling), ``admission``
(ResourceQuota, LimitRange, PodSecurity, admission webhooks), ``kueue``, ``volcano``, ``hami``,
``kubelet`` (container startup, kubelet admission), ``apiserver`` (authorization / RBAC).

Code vocabulary and category (every code, and every ``cause``, is a row of the failure table):

==============================  ==============  ====================================================
code                            category        meaning
==============================  ==============  ====================================================
insufficient_resource           capacity        nodes lack free capacity of ``resource``
resource_not_advertised         capacity        no node advertises ``resource`` at all
too_many_pods                   capacity        nodes are at their pod limit
no_nodes                        capacity        the cluster has no schedulable node at all
unschedulable_unexplained       capacity        no node fits and the scheduler printed no reason (<= 1.4)
node_selector_mismatch          placement       nodeSelector / node affinity matches no node
node_affinity_mismatch          placement       required node affinity (not a plain selector) fails
node_name_mismatch              placement       ``spec.nodeName`` names another node
pod_affinity                    placement       pod (anti-)affinity rules cannot be met
topology_spread                 placement       topology spread constraints cannot be met
port_conflict                   placement       requested hostPort is taken on the nodes
untolerated_taint               placement       nodes carry ``taint`` the pod does not tolerate
node_not_ready                  node-health     nodes NotReady / unreachable
node_unschedulable              node-health     nodes cordoned (spec.unschedulable)
node_pressure                   node-health     memory / disk / PID pressure on nodes
volume_binding                  storage         PVC unbound, volume zone/affinity conflict, limits
scheduling_gated                queue           pod still carries scheduling gates
device_claim_unallocatable      device          DRA ResourceClaims cannot be allocated
preemption_no_victims           preemption      preemption found nothing to evict
preemption_not_helpful          preemption      evicting pods would not make room
quota_exceeded                  quota           ResourceQuota (or HAMi quota) exhausted
quota_requires_limits           quota           a ResourceQuota demands requests/limits not set
limitrange_violation            quota           requests/limits outside the namespace LimitRange
forbidden_rbac                  policy          the subject may not do the verb (RBAC)
podsecurity_violation           policy          the pod spec violates Pod Security admission
webhook_denied                  policy          a validating/mutating webhook denied the request
webhook_unavailable             policy          a webhook could not be called
queue_quota_insufficient        queue           queue quota (Kueue flavor, Volcano queue) used up
queue_request_exceeds_max       queue           request exceeds what the queue can ever hold
queue_resource_not_covered      queue           the queue has no flavor for ``resource``
queue_flavor_mismatch           queue           flavor labels/taints conflict with the pod
queue_inactive                  queue           ClusterQueue / LocalQueue / Volcano queue inactive
queue_not_found                 queue           the named LocalQueue / ClusterQueue does not exist
queue_namespace_mismatch        queue           namespace not selected by the ClusterQueue
admission_check_failed          queue           a Kueue AdmissionCheck rejected / asked to retry
queue_topology_unfit            queue           the queue's topology domains cannot hold the workload
queue_admission_blocked         queue           admission held until earlier workloads are ready
workload_evicted                queue           the admitted workload was evicted / preempted
gang_unschedulable              gang            not all gang members (minAvailable) fit at once
device_memory_insufficient      device          no card has enough free device memory (HAMi)
device_cores_insufficient       device          no card has enough free compute share (HAMi)
device_count_insufficient       device          too few free cards / slices on the node (HAMi)
device_type_mismatch            device          card type / UUID / filter rule excludes all cards
device_numa_unfit               device          cards cannot be placed within one NUMA node
device_unfit                    device          HAMi found the node unfit (details in FilteringFailed)
device_allocation_failed        device          kubelet / device plugin failed to allocate devices
image_pull_failed               image           image could not be pulled (``cause``: why)
container_config_error          runtime         missing Secret / ConfigMap / config for a container
container_start_error           runtime         the runtime could not start the container (``cause``)
device_runtime_error            runtime         NVIDIA/Ascend container runtime or hook failed
crash_loop                      workload        container keeps exiting (``cause``: the last termination's)
oom_killed                      workload        container killed for exceeding its memory limit
container_exit_nonzero          workload        container exited with a non-zero code
probe_failed                    workload        a startup/liveness/readiness probe failed (``cause``)
device_node_unregistered        device          HAMi has no registered devices for the node
queue_status_update_failed      queue           the queue controller cannot write queue status
unknown                         unknown         not understood; ``message`` keeps the text
==============================  ==============  ====================================================

"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypedDict, get_args

import msgspec

from pytest_hetero.declared import as_written
from pytest_hetero.judge.failures import OwnerRole, entry

SOURCES: frozenset[str] = frozenset(
    {"scheduler", "admission", "kueue", "volcano", "hami", "kubelet", "apiserver"}
)
OWNERS: frozenset[str] = frozenset(get_args(OwnerRole))
"""The owners a reason can have: the failure table's roles (:data:`pytest_hetero.judge.failures.OwnerRole`;
``image`` is the owner of the images on the target, ``platform`` unless the matrix says otherwise)."""

#: code -> category; the closed vocabulary documented in the module docstring. Owners are the failure table's.
CODES: Mapping[str, str] = {
    "insufficient_resource": "capacity",
    "resource_not_advertised": "capacity",
    "too_many_pods": "capacity",
    "unschedulable_unexplained": "capacity",
    "no_nodes": "capacity",
    "node_selector_mismatch": "placement",
    "node_affinity_mismatch": "placement",
    "node_name_mismatch": "placement",
    "pod_affinity": "placement",
    "topology_spread": "placement",
    "port_conflict": "placement",
    "untolerated_taint": "placement",
    "node_not_ready": "node-health",
    "node_unschedulable": "node-health",
    "node_pressure": "node-health",
    "volume_binding": "storage",
    "scheduling_gated": "queue",
    "device_claim_unallocatable": "device",
    "preemption_no_victims": "preemption",
    "preemption_not_helpful": "preemption",
    "quota_exceeded": "quota",
    "quota_requires_limits": "quota",
    "limitrange_violation": "quota",
    "forbidden_rbac": "policy",
    "podsecurity_violation": "policy",
    "webhook_denied": "policy",
    "webhook_unavailable": "policy",
    "queue_quota_insufficient": "queue",
    "queue_request_exceeds_max": "queue",
    "queue_resource_not_covered": "queue",
    "queue_flavor_mismatch": "queue",
    "queue_inactive": "queue",
    "queue_not_found": "queue",
    "queue_namespace_mismatch": "queue",
    "admission_check_failed": "queue",
    "queue_topology_unfit": "queue",
    "queue_admission_blocked": "queue",
    "workload_evicted": "queue",
    "gang_unschedulable": "gang",
    "device_memory_insufficient": "device",
    "device_cores_insufficient": "device",
    "device_count_insufficient": "device",
    "device_type_mismatch": "device",
    "device_numa_unfit": "device",
    "device_unfit": "device",
    "device_allocation_failed": "device",
    "image_pull_failed": "image",
    "container_config_error": "runtime",
    "container_start_error": "runtime",
    "device_runtime_error": "runtime",
    "crash_loop": "workload",
    "oom_killed": "workload",
    "container_exit_nonzero": "workload",
    "probe_failed": "workload",
    "device_node_unregistered": "device",
    "queue_status_update_failed": "queue",
    "unknown": "unknown",
}


class ReasonRef(TypedDict):
    """What every reason an engine hands a layer carries (a governance attempt's ``reasons``): the ``source`` that
    refused, the ``code`` and the source's ``message``; a normalised :class:`Reason` (:class:`ReasonDict`) carries
    the rest of its fields too."""

    source: str
    code: str
    message: str


class ReasonDict(ReasonRef):
    """A :class:`Reason` as plain JSON (:meth:`Reason.to_dict`; every key written): what engines hand the layers
    (``Placement.decisive``, a job's ``reasons``) and what evidence records."""

    category: str
    owner: OwnerRole
    cause: str | None
    resource: str | None
    nodes: int | None
    total_nodes: int | None
    node_names: list[str]
    quantities: dict[str, str]
    flavor: str | None
    taint: str | None
    preemption: bool
    detail: dict[str, str]


@dataclass(frozen=True)
class Reason:
    """One normalised reason why a workload is not scheduled, admitted or started.

    ``nodes`` is the number of nodes that gave this reason as the source counted them (None when
    the source does not count nodes); ``total_nodes`` the N of "0/N nodes". ``quantities`` holds
    ``requested`` / ``used`` / ``limited`` / ``more_needed`` / ``maximum`` ... exactly as written by
    the source (strings, no unit conversion). ``taint`` is ``key=value:effect`` with the parts the
    source stated. ``detail`` holds source-specific facts (RBAC verb/subject, container, queue...).
    ``preemption`` is True for the scheduler's preemption verdict, which is not a filter reason.
    ``cause`` is the failure category behind the code when the reader knows it (a pull failure's
    ``registry_unreachable``/``image_not_found``/``pull_denied``, the termination behind a crash loop, a
    device error behind a failing probe); :attr:`owner` is the failure table's owner of it.
    """

    source: str
    code: str
    category: str
    message: str
    resource: str | None = None
    nodes: int | None = None
    total_nodes: int | None = None
    node_names: tuple[str, ...] = ()
    quantities: Mapping[str, str] = field(default_factory=dict)
    flavor: str | None = None
    taint: str | None = None
    preemption: bool = False
    detail: Mapping[str, str] = field(default_factory=dict)
    cause: str | None = None

    @property
    def owner(self) -> OwnerRole:
        """Who acts on this reason: the failure table's owner of ``cause`` (else ``code``); ``image`` is
        the target's image owner. Looked up, never chosen by a reader."""
        return owner_role(self.cause or self.code)

    def to_dict(self) -> ReasonDict:
        """Return a JSON-ready dict: every field, ``node_names`` as a list, mappings as dicts, and
        ``owner`` (the failure table's, :attr:`owner`)."""
        return {
            "source": self.source,
            "code": self.code,
            "category": self.category,
            "owner": self.owner,
            "cause": self.cause,
            "resource": self.resource,
            "nodes": self.nodes,
            "total_nodes": self.total_nodes,
            "node_names": list(self.node_names),
            "quantities": dict(self.quantities),
            "flavor": self.flavor,
            "taint": self.taint,
            "preemption": self.preemption,
            "detail": dict(self.detail),
            "message": self.message,
        }


def owner_role(code: str) -> OwnerRole:
    """The failure table's owner of a reason ``code`` or cause. Raises ``ValueError`` for one the table
    lacks (every code of :data:`CODES` and every cause a reader reports has a row; a test keeps it so)."""
    row = entry(code)
    if row is None:
        raise ValueError(f"reason code {code!r} has no row in pytest_hetero.judge.failures.TABLE")
    return row.owner


def make_reason(source: str, code: str, message: str, *, cause: str | None = None, **fields: Any) -> Reason:
    """Build a :class:`Reason` with ``category`` looked up in :data:`CODES`; ``cause`` (a failure-table
    category) when the reader knows what is behind ``code``.

    Raises ``ValueError`` for a source or code outside the closed sets, or a cause the failure table
    lacks (a programming error in a parser, never caused by input text).
    """
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}")
    if code not in CODES:
        raise ValueError(f"code {code!r} is not in the vocabulary")
    if cause is not None:
        owner_role(cause)
    return Reason(source=source, code=code, category=CODES[code], message=message, cause=cause, **fields)


def as_list(value: Any, what: str) -> list[object]:
    """``value`` if it is a list, ``[]`` for None; raises :class:`ParseError` naming ``what`` otherwise. Its
    entries are ``object``: a reader narrows each one it uses."""
    from pytest_hetero.errors import Location, ParseError

    if value is None:
        return []
    if not isinstance(value, list):
        raise ParseError(f"{what} is a {type(value).__name__}, expected a list", Location(field=what))
    return value


def as_map(value: Any, what: str) -> Mapping[str, object]:
    """``value`` if it is a mapping, ``{}`` for None; raises :class:`ParseError` naming ``what`` otherwise. Its
    values are ``object``: a reader narrows each field it uses."""
    from pytest_hetero.errors import Location, ParseError

    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ParseError(f"{what} is a {type(value).__name__}, expected a mapping", Location(field=what))
    return value


def as_text(value: object) -> str | None:
    """A scalar of a pasted object as text (None when absent or null)."""
    return None if value is None else str(value)


class _ConditionFields(msgspec.Struct, frozen=True, kw_only=True):
    """A ``status.conditions[]`` entry as pasted (core/v1 ``PodCondition``, Kueue's and Volcano's
    ``metav1.Condition``-like entries): the four fields :class:`Condition` reads, each as written (None when
    absent or null)."""

    type: object = None
    status: object = None
    reason: object = None
    message: object = None


class Condition(NamedTuple):
    """A ``status.conditions[]`` entry of a Kubernetes object (Pod, Kueue Workload, Volcano PodGroup): ``type``,
    ``status``, ``reason`` and ``message``, each as text (None when absent or null)."""

    type: str | None
    status: str | None
    reason: str | None
    message: str | None

    @classmethod
    def parse(cls, raw: Mapping[str, object]) -> Condition:
        """The fields of the condition mapping ``raw`` (:func:`~pytest_hetero.declared.as_written`: never raises)."""
        found = as_written(raw, _ConditionFields)
        return cls(as_text(found.type), as_text(found.status), as_text(found.reason), as_text(found.message))


def mappings_of(value: Any, what: str) -> list[Mapping[str, object]]:
    """The mapping entries of the list ``value`` (other entries skipped; ``[]`` for None); raises
    :class:`ParseError` naming ``what`` when ``value`` is not a list (:func:`as_list`)."""
    return [entry for entry in as_list(value, what) if isinstance(entry, Mapping)]


def conditions_of(value: Any, what: str) -> list[Condition]:
    """The mapping entries of the conditions list ``value`` (other entries skipped; ``[]`` for None), parsed;
    raises :class:`ParseError` naming ``what`` when ``value`` is not a list (:func:`as_list`)."""
    return [Condition.parse(c) for c in mappings_of(value, what)]
