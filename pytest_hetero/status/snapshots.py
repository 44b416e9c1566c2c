"""A cluster snapshot (:mod:`pytest_hetero.backends.kubernetes.snapshot`, schema
``pytest-hetero/cluster-snapshot/v1``) as drift and the audit read it back: parsed once, here, from the JSON a run
took or a baseline bundle recorded (untrusted: any section may be absent, a lister's marker
``{"served": false}`` / ``{"forbidden": "…"}``, or of another type).

The values drift compares (labels, specs, taints) stay as written (``object``): drift reports them, never reads
into them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from pytest_hetero.declared import resolve


def _map(value: object) -> Mapping[str, object]:
    """``value`` when it is a JSON object (text keys), else an empty one (absent, null or another type)."""
    return value if isinstance(value, dict) else {}


class _NodeGiven(msgspec.Struct, frozen=True, kw_only=True):
    """A ``nodes`` entry's fields as written (any JSON value; ``labels`` UNSET when absent, the others None)."""

    labels: object = msgspec.UNSET
    conditions: object = None
    allocatable: object = None
    taints: object = None
    unschedulable: object = None


class _KueueGiven(msgspec.Struct, frozen=True, kw_only=True):
    """The ``kueue`` section's listings as written (None when absent)."""

    resourceflavors: object = None
    clusterqueues: object = None
    localqueues: object = None


class _VolcanoGiven(msgspec.Struct, frozen=True, kw_only=True):
    """The ``volcano`` section's listing as written (None when absent)."""

    queues: object = None


class _SnapshotGiven(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot's sections as written: ``nodes`` by name, each compared section any JSON value, the schedulers'
    listings under ``kueue`` and ``volcano`` (each None when absent or null)."""

    nodes: dict[str, object] | None = None
    daemonsets: object = None
    runtimeclasses: object = None
    priorityclasses: object = None
    resourcequotas: object = None
    limitranges: object = None
    kueue: _KueueGiven | None = None
    volcano: _VolcanoGiven | None = None


@dataclass(frozen=True)
class SnapshotNode:
    """A ``nodes`` entry: ``labels`` (None when the entry has none: not a node entry pool membership reads),
    ``conditions`` and ``allocatable`` (empty when absent), ``taints`` and ``unschedulable`` as written (None when
    absent), whether the entry is ``present`` (a truthy value) and the entry as written (``whole``: two entries
    are unchanged when equal)."""

    labels: Mapping[str, object] | None
    conditions: Mapping[str, object]
    allocatable: Mapping[str, object]
    taints: object
    unschedulable: object
    present: bool
    whole: object

    @classmethod
    def parse(cls, raw: object) -> SnapshotNode:
        """The entry ``raw`` (any value; a non-object has no fields)."""
        entry = msgspec.convert(raw, _NodeGiven) if isinstance(raw, dict) else _NodeGiven()
        return cls(labels=None if entry.labels is msgspec.UNSET else _map(entry.labels),
                   conditions=_map(entry.conditions), allocatable=_map(entry.allocatable),
                   taints=entry.taints, unschedulable=entry.unschedulable, present=bool(raw), whole=raw)


@dataclass(frozen=True)
class ClusterSnapshot:
    """A snapshot: its ``nodes`` by name, each compared section as written by the kind drift names its changes by
    (``daemonset`` … ``limitrange``, ``kueue.resourceflavors`` … ``volcano.queues``; None when absent) and the
    ClusterQueue each LocalQueue (``namespace/name``) feeds, where its spec names one."""

    nodes: dict[str, SnapshotNode]
    sections: dict[str, object]
    cluster_queues: dict[str, str]

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> ClusterSnapshot:
        """The snapshot ``raw`` (a snapshot's JSON). Raises ``msgspec.ValidationError`` naming the field when
        ``nodes`` or a scheduler's key (``kueue``, ``volcano``) is set to something other than an object (a
        snapshot's writer never does)."""
        given = msgspec.convert(raw, _SnapshotGiven)
        kueue, volcano = given.kueue or _KueueGiven(), given.volcano or _VolcanoGiven()
        sections: dict[str, object] = {
            "daemonset": given.daemonsets, "runtimeclass": given.runtimeclasses,
            "priorityclass": given.priorityclasses, "resourcequota": given.resourcequotas,
            "limitrange": given.limitranges, "kueue.resourceflavors": kueue.resourceflavors,
            "kueue.clusterqueues": kueue.clusterqueues, "kueue.localqueues": kueue.localqueues,
            "volcano.queues": volcano.queues}
        return cls(nodes={name: SnapshotNode.parse(node) for name, node in (given.nodes or {}).items()},
                   sections=sections,
                   cluster_queues={ref: str(spec["clusterQueue"]) for ref, spec in _map(kueue.localqueues).items()
                                   if isinstance(spec, dict) and spec.get("clusterQueue")})


resolve(__name__)
