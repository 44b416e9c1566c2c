"""Which node taints a resource's tolerations do not tolerate (Kubernetes core/v1 semantics).

A toleration ``{key, operator, value, effect}`` tolerates a taint ``{key, value, effect}`` when its
effect is empty or equal, and either ``operator: Exists`` with an empty key (everything) or the
taint's key, or (``operator: Equal``, the default) key and value equal. Only ``NoSchedule`` and
``NoExecute`` taints keep a pod off a node; ``PreferNoSchedule`` is a preference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """True when ``toleration`` (a pod toleration dict) tolerates ``taint`` (a node taint dict)."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.get("key")
    return bool(toleration.get("key") == taint.get("key")
                and str(toleration.get("value", "")) == str(taint.get("value", "")))


def taint_text(taint: Mapping[str, Any]) -> str:
    """``key=value:effect`` (``key:effect`` without a value), as ``kubectl describe node`` prints it."""
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


def untolerated(taints: Sequence[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]]) -> list[str]:
    """``key=value:effect`` of each NoSchedule/NoExecute taint that no toleration tolerates."""
    return [taint_text(t) for t in taints
            if t.get("effect") in BLOCKING_EFFECTS and not any(tolerates(x, t) for x in tolerations)]
