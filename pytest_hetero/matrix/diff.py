"""What changed between two versions of one matrix, down to the items whose claims changed.

Two views of one change: :func:`dimension_changes` lists each resource, image, model or
dataset that was added, removed or changed (with the fields that differ, e.g. an image
``digest``), and :func:`changed_items` lists the items of the new plan whose claim differs
from the old plan's item with the same id: a new item (new resource, newly un-excluded
combination) or one whose dimension definitions changed. A change of ``spec.target``
changes every item.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_hetero.matrix.expand import Plan
from pytest_hetero.matrix.model import Matrix

DIMENSION_KEYS: dict[str, str] = {"resource": "resources", "image": "images", "model": "models",
                                  "dataset": "datasets"}
"""Dimension name → its list under ``spec``."""
_IGNORED = frozenset({"description"})


@dataclass(frozen=True)
class Change:
    """One dimension value that differs: ``kind`` is ``added``, ``removed`` or ``changed``;
    ``fields`` maps each differing field to ``(old, new)`` (empty unless ``changed``)."""

    dimension: str
    name: str
    kind: str
    fields: dict[str, tuple[Any, Any]]

    def describe(self) -> str:
        """One line, e.g. ``image py311 changed: digest sha256:aa… → sha256:bb…``."""
        if self.kind != "changed":
            return f"{self.dimension} {self.name} {self.kind}"
        parts = [f"{k} {_short(old)} → {_short(new)}" for k, (old, new) in sorted(self.fields.items())]
        return f"{self.dimension} {self.name} changed: " + "; ".join(parts)


def _short(value: Any) -> str:
    text = "(absent)" if value is None else str(value)
    return text if len(text) <= 40 else text[:37] + "…"


def _definitions(matrix: Matrix, dim: str) -> dict[str, dict[str, Any]]:
    entries = matrix.source.get("spec", {}).get(DIMENSION_KEYS[dim], [])
    return {e["name"]: {k: v for k, v in e.items() if k not in _IGNORED} for e in entries}


def dimension_changes(old: Matrix, new: Matrix) -> list[Change]:
    """Every added/removed/changed dimension value of ``new`` relative to ``old``, plus a
    pseudo-dimension ``target`` when ``spec.target`` differs. Sorted by dimension, then name."""
    changes: list[Change] = []
    if old.target != new.target:
        fields = {k: (old.target.get(k), new.target.get(k))
                  for k in sorted(set(old.target) | set(new.target)) if old.target.get(k) != new.target.get(k)}
        changes.append(Change("target", "spec.target", "changed", fields))
    for dim in DIMENSION_KEYS:
        before, after = _definitions(old, dim), _definitions(new, dim)
        for name in sorted(set(before) | set(after)):
            if name not in before:
                changes.append(Change(dim, name, "added", {}))
            elif name not in after:
                changes.append(Change(dim, name, "removed", {}))
            elif before[name] != after[name]:
                a, b = before[name], after[name]
                fields = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
                changes.append(Change(dim, name, "changed", fields))
    return changes


def changed_items(old: Matrix, old_plan: Plan, new: Matrix, new_plan: Plan) -> dict[str, str]:
    """Item id (``PlannedItem.id``) → why it is affected, for every item of ``new_plan`` that
    is new or whose dimension definitions differ from ``old``. Dependencies are not added here
    (the selection adds them). Ids of unchanged items are absent."""
    changes = dimension_changes(old, new)
    if any(c.dimension == "target" for c in changes):
        return {item.id: "target changed" for item in new_plan.items}
    touched = {(c.dimension, c.name): c for c in changes}
    old_ids = {item.id for item in old_plan.items}
    out: dict[str, str] = {}
    for item in new_plan.items:
        hits = [touched[(dim, name)] for dim, name in item.keys.items() if (dim, name) in touched]
        if hits:
            out[item.id] = "; ".join(c.describe() for c in hits)
        elif item.id not in old_ids:
            out[item.id] = "new in this matrix version (was excluded or absent)"
    return out
