"""The model items a model item's engine may start ahead (``resources[].model_runs: per-run``).

pytest runs items one after the other; an engine that spreads model runs over a pool's capacity
(:mod:`pytest_hetero.backends.spread`: Kubernetes, Docker and local) launches, at the first model item of a
matrix × resource × image, the runs of the model items after it, and each item joins its own result when it
runs. This glue tells it which items those are: the session's items (after deselection: ``-k``, profiles,
shards), in run order, grouped by matrix × resource × image; a task type's checks are left out (they are not
model runs). Under pytest-xdist a resource's items all run on one worker (:mod:`.xdist`), so the group is that
worker's. It also tells a model item whether an item of the session reads what it hands on (:func:`handoff_read`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_hetero.matrix.expand import PlannedItem
    from pytest_hetero.pytest_plugin.item import LayerItem

GROUPS = pytest.StashKey[dict[tuple[str, str, str], list["PlannedItem"]]]()
"""(matrix sha256, resource, image) → the session's model items of that group, in run order (built once)."""
READERS = pytest.StashKey[set[tuple[str, tuple[str, ...]]]]()
"""(matrix sha256, parts of the model item) of every business item of the session (built once)."""


def upcoming(item: LayerItem) -> list[PlannedItem]:
    """The model items of ``item``'s group in run order (the same list object for every item of the group);
    empty for an item that is not a model run."""
    if item.planned.layer != "model" or "check" in item.planned.keys:
        return []
    groups = item.config.stash.get(GROUPS, None)
    if groups is None:
        groups = _groups(item.session.items)
        item.config.stash[GROUPS] = groups
    return groups.get(_key(item), [])


def handoff_read(item: LayerItem) -> bool:
    """True when a business item of this session (after deselection) depends on model item ``item``: only then
    does the model item hand its outputs, wall time and run-time values on (``LayerState["read"]``)."""
    readers = item.config.stash.get(READERS, None)
    if readers is None:
        from pytest_hetero.pytest_plugin.item import LayerItem

        readers = {(i.matrix.sha256, i.planned.depends_on) for i in item.session.items
                   if isinstance(i, LayerItem) and i.planned.layer == "business" and i.planned.depends_on}
        item.config.stash[READERS] = readers
    return (item.matrix.sha256, item.planned.parts) in readers


def _key(item: LayerItem) -> tuple[str, str, str]:
    """A model item's group: its matrix, resource and image (every model item has both keys: matrix.expand)."""
    keys = item.planned.keys
    return item.matrix.sha256, keys["resource"], keys["image"]


def _groups(items: list[pytest.Item]) -> dict[tuple[str, str, str], list[PlannedItem]]:
    from pytest_hetero.pytest_plugin.item import LayerItem

    out: dict[tuple[str, str, str], list[PlannedItem]] = {}
    for item in items:
        if isinstance(item, LayerItem) and item.planned.layer == "model" and "check" not in item.planned.keys:
            out.setdefault(_key(item), []).append(item.planned)
    return out
