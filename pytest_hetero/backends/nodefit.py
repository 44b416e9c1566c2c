"""Why a node of a pool takes no workload of a resource: the one place that decides it.

Node coverage (:mod:`pytest_hetero.layers.nodes`: which nodes are schedulable), the maintenance probe
(:mod:`pytest_hetero.backends.kubernetes.governance`: which nodes a workload must not reach) and ``concurrency: free``
(:mod:`pytest_hetero.backends.kubernetes.spread`: which nodes' capacity counts) all read a node's facts
(:class:`~pytest_hetero.backends.protocol.NodeFacts`, as a pool listing records them) through :func:`blockers`, so
the three say the same thing in the same words about the same node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_hetero.matrix.tolerations import untolerated

if TYPE_CHECKING:
    from pytest_hetero.backends.protocol import NodeFacts
    from pytest_hetero.matrix.document import TolerationDoc


def blockers(node: NodeFacts, tolerations: Sequence[TolerationDoc]) -> list[str]:
    """Why a pod tolerating ``tolerations`` (core/v1 Toleration shapes) cannot land on ``node``, in this order:
    ``not Ready (<reason or status>)``, ``cordoned (spec.unschedulable: true)``, ``untolerated taint k=v:Effect,
    …`` (each NoSchedule/NoExecute taint no toleration tolerates, :func:`~pytest_hetero.matrix.tolerations
    .untolerated`); [] when it can. Node capacity is not judged here (the scheduler's arithmetic:
    :mod:`pytest_hetero.backends.kubernetes.capacity`)."""
    why: list[str] = []
    if node["ready"] != "True":
        why.append(f"not Ready ({node['ready_reason'] or node['ready']})")
    if node["unschedulable"]:
        why.append("cordoned (spec.unschedulable: true)")
    taints = untolerated(node["taints"], tolerations)
    if taints:
        why.append(f"untolerated taint {', '.join(taints)}")
    return why
