"""The gate's vocabulary, typed and defined once: layers, statuses and the owner categories.

Every module that names a layer, a status or an owner category uses these types, so mypy
catches a misspelt ``"infrastucture"`` or a status nobody renders. JSON carries the plain
strings (``Literal`` values are ``str``), so evidence stays readable by any tool.

Owner *categories* are the four kinds of team the gate knows; a matrix names the actual team
for each category in ``spec.owners`` (``business: risk-business``), and those names are what
evidence, reports and the signed predicate show.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

Layer = Literal["discovery", "scheduling", "startup", "model", "business"]
"""One of the five conclusions, in dependency order in :data:`LAYERS`."""
LAYERS: Final[tuple[Layer, ...]] = get_args(Layer)
"""The five layers in dependency order; each layer's items depend on the one before."""

Status = Literal["passed", "failed", "error", "blocked", "not_applicable", "skipped", "excluded",
                 "deselected", "not_run"]
"""An item's outcome: ``error`` = the harness or an infrastructure call broke; ``blocked`` = a
dependency failed; ``not_applicable`` = the backend cannot prove this layer; ``excluded`` = a
matrix exclude rule; ``deselected`` = -k/-m/profile/shard; ``not_run`` = interrupted before it ran."""
STATUSES: Final[tuple[Status, ...]] = get_args(Status)
"""Every status, in the order reports list them."""
BLOCKING: Final[frozenset[Status]] = frozenset({"failed", "error", "blocked"})
"""Statuses of a dependency that block its dependents, and that count as failing in a baseline diff."""
FAILED: Final[frozenset[Status]] = frozenset({"failed", "error"})
"""Statuses that fail the gate by themselves (a blocked item fails it through its root cause)."""
UNTESTED: Final[frozenset[Status]] = frozenset(
    {"blocked", "not_applicable", "skipped", "excluded", "deselected", "not_run"})
"""Statuses that put an item into the untested scope."""

OwnerCategory = Literal["platform", "infrastructure", "algorithm", "business"]
"""The kind of team that owns a conclusion or a failure."""
OWNER_CATEGORIES: Final[tuple[OwnerCategory, ...]] = get_args(OwnerCategory)

DEFAULT_OWNERS: Final[dict[Layer, OwnerCategory]] = {
    "discovery": "infrastructure",
    "scheduling": "platform",
    "startup": "platform",
    "model": "algorithm",
    "business": "business",
}
"""The owner category of each layer's conclusion (the matrix's ``spec.owners`` names its team)."""
