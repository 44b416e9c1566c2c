"""Which node taints a resource's tolerations do not tolerate (Kubernetes core/v1 semantics).

A toleration ``{key, operator, value, effect}`` tolerates a taint ``{key, value, effect}`` when its
effect is empty or equal, and either ``operator: Exists`` with an empty key (everything) or the
taint's key, or (``operator: Equal``, the default) key and value equal. Only ``NoSchedule`` and
``NoExecute`` taints keep a pod off a node; ``PreferNoSchedule`` is a preference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

from pytest_hetero.matrix.document import TolerationDoc

if TYPE_CHECKING:  # annotations only (postponed)
    from typing import Required

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


class NodeTaint(TypedDict, total=False):
    """A node's ``spec.taints[]`` entry (core/v1 Taint): ``key``, ``value`` (absent: none), ``effect`` and, as the
    API serves it, ``timeAdded`` (:class:`pytest_hetero.backends.protocol.Taint` has the same shape)."""

    key: Required[str]
    value: str
    effect: Required[str]
    timeAdded: str


def tolerates(toleration: TolerationDoc, taint: NodeTaint) -> bool:
    """True when ``toleration`` (a pod toleration) tolerates ``taint`` (a node taint)."""
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint["key"]
    return bool(toleration.get("key") == taint["key"]
                and str(toleration.get("value", "")) == str(taint.get("value", "")))


def taint_text(taint: NodeTaint) -> str:
    """``key=value:effect`` (``key:effect`` without a value), as ``kubectl describe node`` prints it."""
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint['key']}{value}:{taint['effect']}"


def untolerated(taints: Sequence[NodeTaint], tolerations: Sequence[TolerationDoc]) -> list[str]:
    """``key=value:effect`` of each NoSchedule/NoExecute taint that no toleration tolerates."""
    return [taint_text(t) for t in taints
            if t["effect"] in BLOCKING_EFFECTS and not any(tolerates(x, t) for x in tolerations)]
