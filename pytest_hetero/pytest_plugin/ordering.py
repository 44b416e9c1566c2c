"""Dependency order whatever reorders or filters the items: plan order restored last, and ``--lf``
brings back the dependents of what it reruns.

Gating reads a dependency's outcome from the dependency item, so a layer item must run after the
item it depends on. Plugins reorder items in ``pytest_collection_modifyitems`` (pytest-randomly
shuffles them, ``--ff``/``--nf`` put failures or new files first); :class:`Ordering` is registered
after every plugin that exists at configure time and wraps that hook as the outermost
``tryfirst`` wrapper, so its code after ``yield`` runs after all of theirs. It puts the layer items
back in plan order (the order of collection, which is dependency order) in the positions layer items
occupy, so other tests keep whatever order those plugins gave them.

A business item judges the outputs of its model item's run in the same session, so ``-k``/``-m`` that
keep a business item bring its model item back (``-m "business and cpu"`` runs the CPU model items too).

``--lf`` keeps only the items that failed last time; the items those blocked were reported as
skipped, so they are not among them and would stay out, leaving a root cause fixed but its
dependents unproven. When ``--lf`` ran, every layer item that (through its dependencies) depends on a
kept item comes back, unless ``-k``/``-m`` or a profile, affected-only or shard option left it out.
Items ``--lf`` leaves out are recorded as ``deselected (--lf: …)`` in untested scope.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

from pytest_hetero.pytest_plugin.stash import DESELECTED, PLANS

if TYPE_CHECKING:
    from pytest_hetero.pytest_plugin.item import LayerItem

PLAN_INDEX = pytest.StashKey[int]()
"""On a layer item: its position in collection (plan) order, which is dependency order."""
_COUNTER = pytest.StashKey["itertools.count[int]"]()
_FILTERED = pytest.StashKey[list[pytest.Item]]()
"""The items after ``-k``/``-m`` and the other plain implementations, before ``--lf`` filters them."""
LF_REASON = "deselected (--lf: not among the previous run's failures nor their dependents; not rerun)"


def number(item: pytest.Item) -> None:
    """Give ``item`` the next plan index (called once per layer item, at collection)."""
    counter = item.config.stash.setdefault(_COUNTER, itertools.count())
    item.stash[PLAN_INDEX] = next(counter)


def _layer_items(config: pytest.Config, items: list[pytest.Item]) -> list[LayerItem]:
    if not config.stash[PLANS]:
        return []
    from pytest_hetero.pytest_plugin.item import LayerItem

    return [i for i in items if isinstance(i, LayerItem)]


def restore_plan_order(items: list[pytest.Item], layer: list[LayerItem]) -> None:
    """Put ``layer`` (the layer items among ``items``) back in plan order, in place, in the
    positions layer items hold in ``items``; other items keep their positions."""
    slots = [n for n, item in enumerate(items) if item.stash.get(PLAN_INDEX, None) is not None]
    ordered = sorted(layer, key=lambda i: i.stash[PLAN_INDEX])
    for slot, item in zip(slots, ordered, strict=True):
        items[slot] = item


def link_dependencies(layer: list[LayerItem]) -> None:
    """Link every layer item to the item it depends on (its parent in the plan), among all the
    collected ones (before any filter, so an item knows a dependency that will not run)."""
    by_id = {i.claim_id: i for i in layer}
    for item in layer:
        if item.planned.depends_on:
            prefix = item.claim_id.split("::", 1)[0]
            item.dependency = by_id.get(f"{prefix}::{'::'.join(item.planned.depends_on)}")


def dependents_of(kept: list[LayerItem], candidates: list[LayerItem]) -> list[LayerItem]:
    """The ``candidates`` that depend, directly or through other items, on an item of ``kept``
    (dependencies as :attr:`LayerItem.dependency` links them)."""
    reach = {id(i) for i in kept}
    out: list[LayerItem] = []
    for item in sorted(candidates, key=lambda i: i.stash[PLAN_INDEX]):  # a dependency always comes first
        dep = item.dependency
        if dep is not None and id(dep) in reach:
            reach.add(id(item))
            out.append(item)
    return out


class Ordering:
    """Session plugin (registered at configure time, after the other plugins): see the module docstring."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> Generator[None, None, None]:
        """After every other implementation: bring back what ``--lf`` cut from failed items'
        dependents, then restore plan order of the layer items."""
        collected = list(items)
        link_dependencies(_layer_items(config, collected))
        result = yield
        layer = _layer_items(config, items)
        filtered = config.stash.get(_FILTERED, None)
        if config.getoption("lf", False) and filtered is not None:
            self._bring_back_dependents(config, items, layer, filtered)
        self._bring_back_models(config, items, collected)
        restore_plan_order(items, _layer_items(config, items))
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Plan order once more, before anyone reads the final list (pytest-xdist sends it to the
        controller here): a conftest's ``pytest_collection_modifyitems`` wrapper, registered after this
        plugin, runs outside it."""
        restore_plan_order(session.items, _layer_items(session.config, session.items))

    @staticmethod
    def _bring_back_models(config: pytest.Config, items: list[pytest.Item], collected: list[pytest.Item]) -> None:
        """A business item judges the outputs of its model item's run in this session: when ``-k``/``-m``
        kept the business item but not its model item, the model item comes back (unless a profile,
        affected-only or shard option, which never split the two, left it out)."""
        present = {id(i) for i in items}
        wanted = {id(i.dependency) for i in _layer_items(config, items)
                  if i.planned.layer == "business" and i.dependency is not None}
        policy = _selection_deselected(config)
        back = [i for i in _layer_items(config, collected)
                if id(i) in wanted and id(i) not in present and i.claim_id not in policy]
        if not back:
            return
        items.extend(back)
        _uncount(config, back)
        for item in back:
            config.stash[DESELECTED].pop(item.claim_id, None)

    @staticmethod
    def _bring_back_dependents(config: pytest.Config, items: list[pytest.Item], layer: list[LayerItem],
                               filtered: list[pytest.Item]) -> None:
        present = {id(i) for i in items}
        policy = _selection_deselected(config)
        dropped = [i for i in _layer_items(config, filtered) if id(i) not in present and i.claim_id not in policy]
        if not dropped:
            return
        back = dependents_of(layer, dropped)
        items.extend(back)
        _uncount(config, back)
        deselected = config.stash[DESELECTED]
        returned = {i.claim_id for i in back}
        for item in dropped:
            if item.claim_id in returned:
                deselected.pop(item.claim_id, None)
            else:
                deselected[item.claim_id] = LF_REASON


def _selection_deselected(config: pytest.Config) -> dict[str, str]:
    """Claim id → reason of the items a profile, affected-only or shard option deselected."""
    from pytest_hetero.pytest_plugin.selection import SELECTION

    selection = config.stash.get(SELECTION, None)
    return selection.deselected if selection is not None else {}


def _uncount(config: pytest.Config, back: list[LayerItem]) -> None:
    """Take items brought back out of the terminal's ``deselected`` count (``--lf`` announced them
    through ``pytest_deselected`` before they came back)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    stats = getattr(reporter, "stats", None)
    if not isinstance(stats, dict) or "deselected" not in stats:
        return
    ids = {id(i) for i in back}
    stats["deselected"] = [i for i in stats["deselected"] if id(i) not in ids]
    if not stats["deselected"]:
        del stats["deselected"]


class Snapshot:
    """Keeps the items as the plain implementations left them (``-k``/``-m``, profile, shard), before
    the wrappers' code after ``yield`` (``--lf``) filters them: a ``trylast`` plain implementation
    registered before the selection plugin runs after it."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Remember the list as it stands now."""
        config.stash[_FILTERED] = list(items)
