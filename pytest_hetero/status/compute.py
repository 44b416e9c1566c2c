"""The validation status of a run: per resource pool × task type, the level reached, and its expiry.

A **pool** is a matrix resource. Its ``nodes`` are the nodes a workload of the pool ran on
(``scheduling.placed`` and ``model.run`` records' ``node``), never the nodes that merely match its
selector: a claim covers exactly what ran (empty on engines that place nothing, e.g. the local host).
A **task type** is a model's ``task_type``. The **level** of (pool, task type) is the last layer of
``discovery → scheduling → startup → model → business`` up to which every layer has items for that pool
(model and business: of models of that task type) and all of them passed. ``not_applicable`` is not a
pass: a layer the engine cannot prove (no scheduler on the local host) stops the level there, so a
local CPU pool reaches ``discovery``, never ``business``. ``none`` when discovery did not pass. The
status holds ``valid_for_s`` seconds from the run's end (``expires_at``). ``untested`` counts the
pool's items that did not pass (``not_applicable`` included).

Shape of :func:`validation_status` (it is ``evidence["validation"]``, signed in the run's predicate)::

    {"pools": [{"matrix", "pool", "type", "vendor", "requests", "node_selector", "queue", "nodes",
                "domain", "verified_at", "valid_for_s", "expires_at", "owners",
                "task_types": {task_type: {"level", "layers": {layer: summary}, "models": ["name@version"]}},
                "untested": int}]}

Times are ISO 8601 UTC ``YYYY-mm-ddTHH:MM:SSZ`` (or with fractional seconds, as the evidence has them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from pytest_hetero import LAYERS

if TYPE_CHECKING:
    from pytest_hetero.matrix.model import Matrix

LEVELS: tuple[str, ...] = ("none", *LAYERS)
"""Levels from least to most proven: ``none``, then each layer name."""
OK_STATUSES = frozenset({"passed", "not_applicable"})
RESOURCE_LAYERS = frozenset({"discovery", "scheduling", "startup"})
"""Layers whose items belong to a pool whatever the model (the task type only decides model/business)."""


def parse_time(text: str) -> datetime:
    """An ISO 8601 time (``Z`` or an offset; naive means UTC) as an aware datetime. Raises ValueError."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def iso(value: datetime) -> str:
    """``value`` in UTC as ``YYYY-mm-ddTHH:MM:SSZ``."""
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def layer_summary(statuses: Iterable[str]) -> str:
    """One word for a layer's item statuses: ``absent`` (no item), ``passed``, ``not_applicable`` (all
    n/a), else the non-passing statuses sorted and joined by ``+`` (e.g. ``blocked+failed``)."""
    seen = set(statuses)
    if not seen:
        return "absent"
    if seen <= OK_STATUSES:
        return "passed" if "passed" in seen else "not_applicable"
    return "+".join(sorted(seen - OK_STATUSES))


def level_of(layers: Mapping[str, str]) -> str:
    """The level reached by ``{layer: summary}`` (see the module docstring)."""
    level = "none"
    for layer in LAYERS:
        if layers.get(layer) != "passed":  # not_applicable proves nothing: the level stops below it
            break
        level = layer
    return level


RAN_ON: tuple[str, ...] = ("scheduling.placed", "model.run")
"""Record kinds whose ``node`` names the node a workload of the pool ran on."""


def _pool_nodes(items: list[dict[str, Any]]) -> list[str]:
    """Names of the nodes a workload of the pool ran on (``node`` of its :data:`RAN_ON` records), in
    order; the nodes matching the pool's selector that ran nothing are not among them."""
    names: list[str] = []
    for item in items:
        for record in item.get("records") or []:
            if record.get("kind") in RAN_ON:
                name = (record.get("data") or {}).get("node")
                if isinstance(name, str) and name and name not in names:
                    names.append(name)
    return names


def pool_status(matrix: Matrix, items: list[dict[str, Any]], finished_at: str) -> list[dict[str, Any]]:
    """The status entries of every resource of ``matrix``, from ``items`` (the evidence items of that
    matrix, as dicts). ``finished_at`` (ISO) is when the status starts to hold."""
    types: dict[str, list[str]] = {}
    for model in matrix.models:
        types.setdefault(model.task_type, []).append(model.name)
    verified = parse_time(finished_at)
    by_resource: dict[Any, list[dict[str, Any]]] = {}
    for item in items:  # one pass over the items, not one per resource × task type × layer
        by_resource.setdefault(item["keys"].get("resource"), []).append(item)
    out = []
    for resource in matrix.resources:
        mine = by_resource.get(resource.name, [])
        # (layer, model; None on the resource layers, which every task type shares) → statuses seen
        seen: dict[tuple[str, Any], set[str]] = {}
        for item in mine:
            name = None if item["layer"] in RESOURCE_LAYERS else item["keys"].get("model")
            seen.setdefault((item["layer"], name), set()).add(item["status"])
        task_types = {}
        for task_type, models in types.items():
            layers: dict[str, str] = {layer: layer_summary(
                seen.get((layer, None), set()) if layer in RESOURCE_LAYERS
                else set().union(*(seen.get((layer, m), set()) for m in models))) for layer in LAYERS}
            task_types[task_type] = {"level": level_of(layers), "layers": layers,
                                     "models": [f"{m.name}@{m.version}" for m in matrix.models if m.name in models]}
        out.append({
            "matrix": matrix.name, "pool": resource.name, "type": resource.type, "vendor": resource.vendor,
            "requests": dict(resource.requests), "node_selector": dict(resource.node_selector),
            "queue": resource.queue, "nodes": _pool_nodes(mine), "domain": matrix.validation_domain,
            "verified_at": iso(verified), "valid_for_s": matrix.valid_for_s,
            "expires_at": iso(verified + timedelta(seconds=matrix.valid_for_s)), "owners": dict(matrix.owners),
            "task_types": task_types, "untested": sum(1 for i in mine if i["status"] != "passed")})
    return out


def validation_status(matrices: list[tuple[Matrix, str]], items: list[dict[str, Any]],
                      finished_at: str) -> dict[str, Any]:
    """``{"pools": [...]}`` for ``matrices`` [(Matrix, its evidence prefix)] over the evidence ``items``."""
    pools: list[dict[str, Any]] = []
    for matrix, prefix in matrices:
        pools += pool_status(matrix, [i for i in items if i.get("matrix") == prefix], finished_at)
    return {"pools": pools}


def expired(pool: dict[str, Any], now: datetime) -> bool:
    """True when ``pool["expires_at"]`` is at or before ``now`` (aware datetime)."""
    return parse_time(str(pool["expires_at"])) <= now


def label_key(domain: str, task_type: str) -> str:
    """The node label and condition type of a task type's status: ``validation.<domain>/<task-type>``."""
    return f"validation.{domain}/{task_type}"


def is_status_key(key: str) -> bool:
    """True when ``key`` (a node label or condition type) has the shape of :func:`label_key`:
    ``validation.<domain>/<task type>`` with a task type of :data:`pytest_hetero.matrix.model.TASK_TYPES`
    (the ``.expires-at`` annotation and the ``/unvalidated`` taint key are not)."""
    from pytest_hetero.matrix.model import TASK_TYPES

    prefix, _, task_type = key.partition("/")
    return prefix.startswith("validation.") and len(prefix) > len("validation.") and task_type in TASK_TYPES
