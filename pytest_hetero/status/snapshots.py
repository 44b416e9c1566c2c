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

SECTIONS = (("daemonsets", "daemonset"), ("runtimeclasses", "runtimeclass"), ("priorityclasses", "priorityclass"),
            ("resourcequotas", "resourcequota"), ("limitranges", "limitrange"))
"""Top-level sections compared spec by spec: (section, the kind drift names its changes by)."""
GROUPED = (("kueue", "resourceflavors"), ("kueue", "clusterqueues"), ("kueue", "localqueues"), ("volcano", "queues"))
"""Sections nested under a scheduler's key: (group, plural); drift names their changes ``group.plural``."""


def _map(value: object) -> Mapping[str, object]:
    """``value`` when it is a JSON object (text keys), else an empty one (absent, null or another type)."""
    return value if isinstance(value, dict) else {}


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
        entry = _map(raw)
        return cls(labels=_map(entry.get("labels")) if "labels" in entry else None,
                   conditions=_map(entry.get("conditions")), allocatable=_map(entry.get("allocatable")),
                   taints=entry.get("taints"), unschedulable=entry.get("unschedulable"), present=bool(raw),
                   whole=raw)


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
        """The snapshot ``raw`` (a snapshot's JSON). Raises AttributeError when ``nodes`` or a scheduler's key
        (``kueue``, ``volcano``) is set to something other than an object (a snapshot's writer never does)."""
        sections: dict[str, object] = {kind: raw.get(section) for section, kind in SECTIONS}
        sections.update({f"{group}.{plural}": (raw.get(group) or {}).get(plural) for group, plural in GROUPED})
        queues = _map(sections["kueue.localqueues"])
        return cls(nodes={str(name): SnapshotNode.parse(node) for name, node in (raw.get("nodes") or {}).items()},
                   sections=sections,
                   cluster_queues={ref: str(spec["clusterQueue"]) for ref, spec in queues.items()
                                   if isinstance(spec, dict) and spec.get("clusterQueue")})
