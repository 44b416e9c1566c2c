"""The normalised pending reason: one vocabulary for every source that can refuse a workload.

A :class:`Reason` says which component refused (``source``), why, in a closed vocabulary
(``code``), the broad ``category`` of that code, and who has to act (``owner``). Whatever the
source printed is kept in ``message`` so nothing is lost when a message does not fit the
vocabulary; such fragments get ``code="unknown"``.

Sources: ``scheduler`` (kube-scheduler and scheduler extenders' FailedScheduling), ``admission``
(ResourceQuota, LimitRange, PodSecurity, admission webhooks), ``kueue``, ``volcano``, ``hami``,
``kubelet`` (container startup, kubelet admission), ``apiserver`` (authorization / RBAC).

Code vocabulary, default category and owner (override owners with ``owners={code: owner}``):

==============================  ==============  ==============  ====================================================
code                            category        owner           meaning
==============================  ==============  ==============  ====================================================
insufficient_resource           capacity        infrastructure  nodes lack free capacity of ``resource``
resource_not_advertised         capacity        infrastructure  no node advertises ``resource`` at all
too_many_pods                   capacity        infrastructure  nodes are at their pod limit
no_nodes                        capacity        infrastructure  the cluster has no schedulable node at all
node_selector_mismatch          placement       matrix-author   nodeSelector / node affinity matches no node
node_affinity_mismatch          placement       matrix-author   required node affinity (not a plain selector) fails
node_name_mismatch              placement       matrix-author   ``spec.nodeName`` names another node
pod_affinity                    placement       matrix-author   pod (anti-)affinity rules cannot be met
topology_spread                 placement       matrix-author   topology spread constraints cannot be met
port_conflict                   placement       matrix-author   requested hostPort is taken on the nodes
untolerated_taint               placement       matrix-author   nodes carry ``taint`` the pod does not tolerate
node_not_ready                  node-health     infrastructure  nodes NotReady / unreachable
node_unschedulable              node-health     infrastructure  nodes cordoned (spec.unschedulable)
node_pressure                   node-health     infrastructure  memory / disk / PID pressure on nodes
volume_binding                  storage         platform        PVC unbound, volume zone/affinity conflict, limits
scheduling_gated                queue           platform        pod still carries scheduling gates
device_claim_unallocatable      device          infrastructure  DRA ResourceClaims cannot be allocated
preemption_no_victims           preemption      platform        preemption found nothing to evict
preemption_not_helpful          preemption      platform        evicting pods would not make room
quota_exceeded                  quota           platform        ResourceQuota (or HAMi quota) exhausted
quota_requires_limits           quota           matrix-author   a ResourceQuota demands requests/limits not set
limitrange_violation            quota           matrix-author   requests/limits outside the namespace LimitRange
forbidden_rbac                  policy          platform        the subject may not do the verb (RBAC)
podsecurity_violation           policy          matrix-author   the pod spec violates Pod Security admission
webhook_denied                  policy          platform        a validating/mutating webhook denied the request
webhook_unavailable             policy          platform        a webhook could not be called
queue_quota_insufficient        queue           platform        queue quota (Kueue flavor, Volcano queue) used up
queue_request_exceeds_max       queue           platform        request exceeds what the queue can ever hold
queue_resource_not_covered      queue           platform        the queue has no flavor for ``resource``
queue_flavor_mismatch           queue           matrix-author   flavor labels/taints conflict with the pod
queue_inactive                  queue           platform        ClusterQueue / LocalQueue / Volcano queue inactive
queue_not_found                 queue           platform        the named LocalQueue / ClusterQueue does not exist
queue_namespace_mismatch        queue           platform        namespace not selected by the ClusterQueue
admission_check_failed          queue           platform        a Kueue AdmissionCheck rejected / asked to retry
queue_topology_unfit            queue           platform        the queue's topology domains cannot hold the workload
queue_admission_blocked         queue           platform        admission held until earlier workloads are ready
workload_evicted                queue           platform        the admitted workload was evicted / preempted
gang_unschedulable              gang            infrastructure  not all gang members (minAvailable) fit at once
device_memory_insufficient      device          infrastructure  no card has enough free device memory (HAMi)
device_cores_insufficient       device          infrastructure  no card has enough free compute share (HAMi)
device_count_insufficient       device          infrastructure  too few free cards / slices on the node (HAMi)
device_type_mismatch            device          matrix-author   card type / UUID / filter rule excludes all cards
device_numa_unfit               device          infrastructure  cards cannot be placed within one NUMA node
device_unfit                    device          infrastructure  HAMi found the node unfit (details in FilteringFailed)
device_allocation_failed        device          infrastructure  kubelet / device plugin failed to allocate devices
image_pull_failed               image           matrix-author   image could not be pulled (owner by cause)
container_config_error          runtime         platform        missing Secret / ConfigMap / config for a container
container_start_error           runtime         infrastructure  the runtime could not start the container
device_runtime_error            runtime         infrastructure  NVIDIA/Ascend container runtime or hook failed
crash_loop                      workload        algorithm       container keeps exiting (owner of the last cause)
oom_killed                      workload        algorithm       container killed for exceeding its memory limit
container_exit_nonzero          workload        algorithm       container exited with a non-zero code
probe_failed                    workload        algorithm       a startup/liveness/readiness probe failed
device_node_unregistered        device          platform        HAMi has no registered devices for the node
queue_status_update_failed      queue           platform        the queue controller cannot write queue status
unknown                         unknown         platform        not understood; ``message`` keeps the text
==============================  ==============  ==============  ====================================================

Owner rules behind the table: an exhausted quota is the platform's; no node with the resource,
too little device capacity, and NotReady nodes are infrastructure; a selector or affinity for a label
no node has is the matrix author's; an RBAC denial is the platform's. Some parsers refine the owner
from the cause (an image that does not exist vs. a registry that cannot be reached).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

SOURCES: frozenset[str] = frozenset(
    {"scheduler", "admission", "kueue", "volcano", "hami", "kubelet", "apiserver"}
)
OWNERS: frozenset[str] = frozenset({"platform", "infrastructure", "algorithm", "business", "matrix-author"})

#: code -> (category, default owner); the closed vocabulary documented in the module docstring.
CODES: Mapping[str, tuple[str, str]] = {
    "insufficient_resource": ("capacity", "infrastructure"),
    "resource_not_advertised": ("capacity", "infrastructure"),
    "too_many_pods": ("capacity", "infrastructure"),
    "no_nodes": ("capacity", "infrastructure"),
    "node_selector_mismatch": ("placement", "matrix-author"),
    "node_affinity_mismatch": ("placement", "matrix-author"),
    "node_name_mismatch": ("placement", "matrix-author"),
    "pod_affinity": ("placement", "matrix-author"),
    "topology_spread": ("placement", "matrix-author"),
    "port_conflict": ("placement", "matrix-author"),
    "untolerated_taint": ("placement", "matrix-author"),
    "node_not_ready": ("node-health", "infrastructure"),
    "node_unschedulable": ("node-health", "infrastructure"),
    "node_pressure": ("node-health", "infrastructure"),
    "volume_binding": ("storage", "platform"),
    "scheduling_gated": ("queue", "platform"),
    "device_claim_unallocatable": ("device", "infrastructure"),
    "preemption_no_victims": ("preemption", "platform"),
    "preemption_not_helpful": ("preemption", "platform"),
    "quota_exceeded": ("quota", "platform"),
    "quota_requires_limits": ("quota", "matrix-author"),
    "limitrange_violation": ("quota", "matrix-author"),
    "forbidden_rbac": ("policy", "platform"),
    "podsecurity_violation": ("policy", "matrix-author"),
    "webhook_denied": ("policy", "platform"),
    "webhook_unavailable": ("policy", "platform"),
    "queue_quota_insufficient": ("queue", "platform"),
    "queue_request_exceeds_max": ("queue", "platform"),
    "queue_resource_not_covered": ("queue", "platform"),
    "queue_flavor_mismatch": ("queue", "matrix-author"),
    "queue_inactive": ("queue", "platform"),
    "queue_not_found": ("queue", "platform"),
    "queue_namespace_mismatch": ("queue", "platform"),
    "admission_check_failed": ("queue", "platform"),
    "queue_topology_unfit": ("queue", "platform"),
    "queue_admission_blocked": ("queue", "platform"),
    "workload_evicted": ("queue", "platform"),
    "gang_unschedulable": ("gang", "infrastructure"),
    "device_memory_insufficient": ("device", "infrastructure"),
    "device_cores_insufficient": ("device", "infrastructure"),
    "device_count_insufficient": ("device", "infrastructure"),
    "device_type_mismatch": ("device", "matrix-author"),
    "device_numa_unfit": ("device", "infrastructure"),
    "device_unfit": ("device", "infrastructure"),
    "device_allocation_failed": ("device", "infrastructure"),
    "image_pull_failed": ("image", "matrix-author"),
    "container_config_error": ("runtime", "platform"),
    "container_start_error": ("runtime", "infrastructure"),
    "device_runtime_error": ("runtime", "infrastructure"),
    "crash_loop": ("workload", "algorithm"),
    "oom_killed": ("workload", "algorithm"),
    "container_exit_nonzero": ("workload", "algorithm"),
    "probe_failed": ("workload", "algorithm"),
    "device_node_unregistered": ("device", "platform"),
    "queue_status_update_failed": ("queue", "platform"),
    "unknown": ("unknown", "platform"),
}


@dataclass(frozen=True)
class Reason:
    """One normalised reason why a workload is not scheduled, admitted or started.

    ``nodes`` is the number of nodes that gave this reason as the source counted them (None when
    the source does not count nodes); ``total_nodes`` the N of "0/N nodes". ``quantities`` holds
    ``requested`` / ``used`` / ``limited`` / ``more_needed`` / ``maximum`` ... exactly as written by
    the source (strings, no unit conversion). ``taint`` is ``key=value:effect`` with the parts the
    source stated. ``detail`` holds source-specific facts (RBAC verb/subject, container, queue...).
    ``preemption`` is True for the scheduler's preemption verdict, which is not a filter reason.
    """

    source: str
    code: str
    category: str
    owner: str
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

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict: every field, ``node_names`` as a list, mappings as dicts."""
        return {
            "source": self.source,
            "code": self.code,
            "category": self.category,
            "owner": self.owner,
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


def make_reason(source: str, code: str, message: str, *, owner: str | None = None, **fields: Any) -> Reason:
    """Build a :class:`Reason` with ``category`` and default ``owner`` looked up in :data:`CODES`.

    Raises ``ValueError`` for a source, code or owner outside the closed sets (a programming
    error in a parser, never caused by input text).
    """
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}")
    if code not in CODES:
        raise ValueError(f"code {code!r} is not in the vocabulary")
    category, default_owner = CODES[code]
    chosen = owner or default_owner
    if chosen not in OWNERS:
        raise ValueError(f"unknown owner {chosen!r}")
    return Reason(source=source, code=code, category=category, owner=chosen, message=message, **fields)


def apply_owners(reasons: list[Reason], owners: Mapping[str, str] | None) -> list[Reason]:
    """Return ``reasons`` with owners replaced per ``owners`` (``{code: owner}``).

    Raises ``ValueError`` when a key is not a code in :data:`CODES` or a value not one of :data:`OWNERS`.
    """
    if not owners:
        return list(reasons)
    bad = {o for o in owners.values() if o not in OWNERS}
    if bad:
        raise ValueError(f"unknown owner(s) {sorted(bad)}; expected one of {sorted(OWNERS)}")
    unknown_codes = {c for c in owners if c not in CODES}
    if unknown_codes:
        raise ValueError(
            f"unknown reason code(s) {sorted(unknown_codes)}; see pytest_hetero.pending.model.CODES"
        )
    return [replace(r, owner=owners[r.code]) if r.code in owners else r for r in reasons]


def as_list(value: Any, what: str) -> list[Any]:
    """``value`` if it is a list, ``[]`` for None; raises :class:`ParseError` naming ``what`` otherwise."""
    from pytest_hetero.errors import Location, ParseError

    if value is None:
        return []
    if not isinstance(value, list):
        raise ParseError(f"{what} is a {type(value).__name__}, expected a list", Location(field=what))
    return value


def as_map(value: Any, what: str) -> Mapping[str, Any]:
    """``value`` if it is a mapping, ``{}`` for None; raises :class:`ParseError` naming ``what`` otherwise."""
    from pytest_hetero.errors import Location, ParseError

    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ParseError(f"{what} is a {type(value).__name__}, expected a mapping", Location(field=what))
    return value


TEAMS: frozenset[str] = frozenset({"platform", "infrastructure", "algorithm", "business"})
"""The project's team names (``matrix-author`` above is a role, not a team)."""

TEAM_OWNERS: Mapping[str, str] = {
    "quota_exceeded": "business",
    "queue_quota_insufficient": "business",
    "queue_request_exceeds_max": "business",
    "webhook_denied": "algorithm",
}
"""Codes whose team differs from :data:`CODES`' default owner: quota and queue capacity are allocated
between teams (business); a policy webhook's denial asks the submitter to change the spec (algorithm)."""


def team_owner(reason: Reason) -> str | None:
    """The team that acts first on ``reason``: one of :data:`TEAMS`, or None for ``unknown``.

    ``matrix-author`` becomes ``algorithm`` (the workload's own spec or request); :data:`TEAM_OWNERS`
    overrides the default owner of quota, queue and webhook codes unless a parser refined the owner
    from the cause (e.g. an image pull that failed on the network).
    """
    if reason.code == "unknown":
        return None
    default = CODES[reason.code][1]
    if reason.code in TEAM_OWNERS and reason.owner == default:
        return TEAM_OWNERS[reason.code]
    return "algorithm" if reason.owner == "matrix-author" else reason.owner
