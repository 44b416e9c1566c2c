"""The validation status of a run: per resource pool × task type, the level reached, and its expiry.

A **pool** is a matrix resource. Its ``nodes`` are the nodes a workload of the pool ran on
(``scheduling.placed``, ``startup.pod``, ``model.run`` records' ``node``, and each node of a node-coverage
item's ``startup.node`` records), never the nodes that merely match its selector: a claim covers exactly
what ran (empty on engines that place nothing, e.g. the local host); and the nodes a node-scoped discovery failure
names (``discovery.nodes``), whatever ran on them, at level ``none``, so ``hetero publish`` withdraws what an
earlier bundle said of them instead of leaving it. Each of them has its own level (``node_status``, with the
``uid`` discovery read of the node where its snapshots listed exactly one): discovery as the pool's (its check reads
every node it lists; with node-level coverage, a discovery that failed on some nodes only, ``discovery.nodes``, is
failed on those and passed on the others; ``not_run`` on a node its snapshot did not list, one that joined the pool
after discovery read it, or one its snapshots listed under two uids, two machines under one name, so its level is
``none`` whatever ran there), scheduling where the pool's passed
and a workload was placed on the node, and startup, model and business from what ran **on that node**:
every claim of the layer (startup: each image; model/business: each model × dataset of the task type) must
have run there and passed (``not_run`` where it ran only on other nodes); a claim no record ties to a node
(blocked, never ran) counts on every node. A node-coverage smoke model run (``startup.node``'s ``smoke``) is
a run of its model × dataset on that node: the node's model level counts it (business is judged on the
model items' node only, so a node proven by a smoke run alone reaches ``model``). The nodes discovery
listed that nothing exercised are ``unvalidated``, each with the reason (the coverage choice, e.g.
``coverage one`` ran the workload on one node): this status says nothing of them, and ``hetero publish``
leaves them as they are.
A **task type** is a model's ``task_type``. The **level** of (pool, task type) is the last layer of
``discovery → scheduling → startup → model → business`` up to which every layer has items for that pool
(model and business: of models of that task type) and all of them passed. ``not_applicable`` is not a
pass: a layer the engine cannot prove (no scheduler on the local host) stops the level there, so a
local CPU pool reaches ``discovery``, never ``business``. ``none`` when discovery did not pass. The
status holds ``valid_for_s`` seconds from the run's end (``expires_at``). ``untested`` counts the
pool's items that did not pass (``not_applicable`` included).

Shape of :func:`validation_status` (it is ``evidence["validation"]``, signed in the run's predicate)::

    {"pools": [{"matrix", "pool", "type", "vendor", "requests", "node_selector", "queue", "nodes",
                "coverage", "node_status": [{"node", "uid"?, "task_types": {task_type: {"level", "layers"}}}],
                "unvalidated": [{"node", "status": "unvalidated", "reason"}], "model_runs_on": [node],
                "domain", "verified_at", "valid_for_s", "expires_at", "owners",
                "task_types": {task_type: {"level", "layers": {layer: summary}, "models": ["name@version"]}},
                "untested": int}]}

Times are ISO 8601 UTC ``YYYY-mm-ddTHH:MM:SSZ`` (or with fractional seconds, as the evidence has them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pytest_hetero import LAYERS
from pytest_hetero.evidence.records import COVERAGE, NODE_OUTCOME, NODE_SCOPE, PLACED, SNAPSHOT, data_of
from pytest_hetero.evidence.spool import pick, where

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import (
        ItemDict,
        NodeStatus,
        PoolStatus,
        RecordDict,
        TaskTypeLevel,
        UnvalidatedNode,
        ValidationSection,
    )
    from pytest_hetero.matrix.model import Matrix

LEVELS: tuple[str, ...] = ("none", *LAYERS)
"""Levels from least to most proven: ``none``, then each layer name."""
OK_STATUSES = frozenset({"passed", "not_applicable"})
RESOURCE_LAYERS = frozenset({"discovery", "scheduling", "startup"})
"""Layers whose items belong to a pool whatever the model (the task type only decides model/business)."""


def parse_time(text: str) -> datetime:
    """An ISO 8601 time (``Z`` or an offset; naive means UTC) as an aware datetime. Raises ValueError."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def iso(value: datetime) -> str:
    """``value`` in UTC as ``YYYY-mm-ddTHH:MM:SSZ``."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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


NODE_OF: tuple[str, ...] = ("scheduling.placed", "startup.pod", "model.run")
"""Record kinds whose ``node`` names the node an item's workload ran on (the first one found is the item's)."""
NODE_RECORD = NODE_OUTCOME.name
"""A node-coverage item's record of one node's outcome (:mod:`pytest_hetero.layers.nodes`)."""
COVERAGE_RECORD = COVERAGE.name
"""A node-coverage item's record of the nodes it chose and why the others were not exercised."""
NOT_RUN_HERE = "not_run"
"""Status word of a claim that ran on other nodes of the pool but not on this one."""


def _claim(item: ItemDict) -> tuple[Any, ...]:
    """What an item proves, whatever node it ran on: startup the image, model/business the combination."""
    keys = item["keys"]
    if item["layer"] == "startup":
        return (keys.get("image"),)
    return (keys.get("image"), keys.get("model"), keys.get("dataset"))


def _item_node(item: ItemDict) -> str | None:
    for record in item["records"]:
        if record["kind"] in NODE_OF:
            name = record["data"].get("node")
            if isinstance(name, str) and name:
                return name
    return None


_READ = frozenset({PLACED.name, NODE_OUTCOME.name, COVERAGE.name})
"""Record kinds :meth:`_NodeFacts._read` takes in."""


class _NodeFacts:
    """Per node of one pool: which claims of which layer ran there and how they ended, and where a
    workload of the pool was placed, from the pool's evidence items."""

    def __init__(self, items: Sequence[ItemDict]) -> None:
        self.order: list[str] = []
        self.placed: set[str] = set()
        self.facts: dict[tuple[str, tuple[Any, ...]], dict[str, set[str]]] = {}
        """(layer, claim) → node → statuses seen there."""
        self.claims: dict[tuple[str, tuple[Any, ...]], set[str]] = {}
        """(layer, claim) → statuses of every item of it (wherever, or nowhere, it ran)."""
        self.reasons: dict[str, str] = {}
        self.discovery_failed: dict[str, list[str]] = {}
        """Node → the categories discovery failed on it with, when it failed on some nodes only (``discovery.nodes``:
        the other nodes' discovery passed)."""
        self.discovery_passed: set[str] = set()
        self.chose = False
        """Whether a node-coverage item of the pool chose its nodes (a ``startup.coverage`` record)."""
        self.listed: set[str] | None = None
        """The nodes a discovery snapshot of the pool listed (None: no snapshot listed nodes). A node exercised later
        that it does not hold (one that joined the pool after discovery read it) was never read by discovery."""
        self.uids: dict[str, set[str]] = {}
        """The ``metadata.uid``s discovery's snapshots read of each node they listed with one. More than one: the
        name held two machines while the pool was read, so no one machine was read under it (its discovery is
        :data:`NOT_RUN_HERE`, and its ``node_status`` names no uid)."""
        model_node: dict[tuple[Any, ...], str] = {}
        for item in items:
            if item["layer"] == "model" and (node := _item_node(item)):
                model_node[_claim(item)] = node
        for item in items:
            layer = item["layer"]
            if layer == "discovery":
                self._discovered(item)
            if layer not in ("scheduling", "startup", "model", "business") or "probe" in item["keys"]:
                continue
            claim = (layer, _claim(item))
            self.claims.setdefault(claim, set()).add(item["status"])
            for record in item["records"]:
                self._read(claim, record)
            if "coverage" in item["keys"]:
                continue  # its nodes' outcomes are its startup.node records
            node = _item_node(item) or (model_node.get(_claim(item)) if layer == "business" else None)
            if node is not None:
                self._see(node)
                if layer != "scheduling":
                    self.facts.setdefault(claim, {}).setdefault(node, set()).add(item["status"])
        self.exercised = list(self.order)
        """The nodes a workload of the pool ran on (:attr:`order` adds the nodes discovery failed on)."""
        for node in self.discovery_failed:  # one nothing ran on too: its status is none, published as such
            self._see(node)

    def _discovered(self, item: ItemDict) -> None:
        """Take in a discovery item: the nodes its pool snapshot listed, and when it failed on some nodes only
        (``discovery.nodes``) which failed, with what, and which passed."""
        for record in item["records"]:
            if (scope := data_of(record, NODE_SCOPE)) is not None:
                self.discovery_failed.update(scope["failed"])
                self.discovery_passed.update(scope["passed"])
            elif (snapshot := data_of(record, SNAPSHOT)) is not None and "nodes" in snapshot:  # a pool's, not a host's
                self.listed = (self.listed or set()) | {n["name"] for n in snapshot["nodes"]}
                for node in snapshot["nodes"]:
                    if (uid := node.get("uid")) is not None:
                        self.uids.setdefault(node["name"], set()).add(str(uid))

    def _read(self, claim: tuple[str, tuple[Any, ...]], record: RecordDict) -> None:
        """Take in one record of an item of ``claim``: a placement, a node's outcome, the coverage choice."""
        if record["kind"] not in _READ:  # most records (one set lookup, not three data_of calls)
            return
        if (placed := data_of(record, PLACED)) is not None:
            self._see(placed["node"])
            self.placed.add(placed["node"])
        elif (outcome := data_of(record, NODE_OUTCOME)) is not None:
            node = outcome["node"]
            self._see(node)
            proven = outcome["proven"]
            # startup passed where it is proven, whatever its smoke model run did after it
            startup = "passed" if "startup" in proven else str(outcome["outcome"])
            self.facts.setdefault(claim, {}).setdefault(node, set()).add(startup)
            if "scheduling" in proven:
                self.placed.add(node)
            smoke = outcome.get("smoke")
            if smoke is not None and claim[1]:  # the smoke run is a run of its model x dataset there
                ran = ("model", (claim[1][0], smoke["model"], smoke["dataset"]))
                status = "passed" if "model" in proven else str(smoke["outcome"])
                self.facts.setdefault(ran, {}).setdefault(node, set()).add(status)
                self.claims.setdefault(ran, set()).add(status)
        elif (coverage := data_of(record, COVERAGE)) is not None:
            self.chose = True
            for entry in coverage["not_exercised"]:
                self.reasons.setdefault(str(entry["node"]), str(entry["reason"]))

    def _see(self, node: str) -> None:
        if node not in self.order:
            self.order.append(node)

    def statuses(self, layer: str, node: str, models: set[str] | None) -> set[str]:
        """Statuses of ``layer`` on ``node`` over every claim of the layer (model/business: of ``models``):
        a claim that ran on some node counts there only (:data:`NOT_RUN_HERE` where it did not run on this
        one); a claim no record ties to a node (blocked, never ran, or named no node) counts everywhere."""
        out: set[str] = set()
        for (name, claim), seen in self.claims.items():
            if name != layer or (models is not None and claim[1] not in models):
                continue
            where = self.facts.get((name, claim))
            out |= (where.get(node) or {NOT_RUN_HERE}) if where else seen
        return out

    def layers(self, node: str, pool: Mapping[str, str], models: set[str]) -> dict[str, str]:
        """``{layer: summary}`` of ``node`` (``pool``: the pool's summary of every layer, as :func:`pool_status`
        builds it): discovery as the pool's (its check covers every node it listed; :data:`NOT_RUN_HERE` on a node
        it did not list, one that joined the pool later, or listed under two uids),
        scheduling passed where the pool's passed and a workload of it was placed on the node, the rest
        from what ran on the node (:meth:`statuses`)."""
        out = {"discovery": pool["discovery"]}
        if self.listed is not None and node not in self.listed and node not in self.discovery_failed:
            out["discovery"] = NOT_RUN_HERE  # it joined the pool after discovery read it: nothing read it
        elif len(self.uids.get(node, ())) > 1 and node not in self.discovery_failed:
            out["discovery"] = NOT_RUN_HERE  # two machines were read under its name: neither is known to be this one
        elif node in self.discovery_failed:  # discovery failed on this node: no higher pass stands in for it
            out["discovery"] = "failed"
        elif node in self.discovery_passed:  # it failed on other nodes only: passed here
            out["discovery"] = "passed"
        sched = pool["scheduling"]
        out["scheduling"] = sched if sched != "passed" else ("passed" if node in self.placed else NOT_RUN_HERE)
        out["startup"] = layer_summary(self.statuses("startup", node, None))
        for layer in ("model", "business"):
            out[layer] = layer_summary(self.statuses(layer, node, models))
        return out


def _node_status(node: str, task_types: dict[str, TaskTypeLevel], uids: set[str]) -> NodeStatus:
    """One ``node_status`` entry: ``uid`` (the machine discovery read under that name) only where exactly one was."""
    out: NodeStatus = {"node": node, "task_types": task_types}
    if len(uids) == 1:
        out["uid"] = next(iter(uids))
    return out


def _unvalidated(items: Sequence[ItemDict], facts: _NodeFacts, coverage: str) -> list[UnvalidatedNode]:
    """Nodes discovery listed in the pool that no workload of the run exercised, each with why."""
    listed: list[str] = []
    for item in items:
        if item["layer"] != "discovery":
            continue
        for record in item["records"]:
            if (snapshot := data_of(record, SNAPSHOT)) is not None and "nodes" in snapshot:  # a pool's, not a host's
                listed += [n["name"] for n in snapshot["nodes"] if n["name"] not in listed]
    ran = ", ".join(facts.exercised) or "no node"
    default = (f"not exercised: coverage {coverage} ran the pool's workload on {ran} only" if facts.exercised else
               "not exercised: no workload of the pool ran (see its failed or blocked items)")
    if coverage != "one" and not facts.chose:  # node-level coverage, but its item never chose (deselected, blocked)
        default = (f"not exercised: the node-coverage item (coverage {coverage}) chose no node (not run, blocked, or "
                   "stopped before choosing); " + (f"the pool's workload ran on {ran} only" if facts.exercised else
                                                   "no workload of the pool ran"))
    return [{"node": n, "status": "unvalidated", "reason": facts.reasons.get(n, default)}
            for n in listed if n not in facts.order]


def pool_status(matrix: Matrix, items: Sequence[ItemDict], finished_at: str) -> list[PoolStatus]:
    """The status entries of every resource of ``matrix``, from ``items`` (the evidence items of that
    matrix, as dicts: a list, or items read back from disk on each pass). ``finished_at`` (ISO) is when the
    status starts to hold."""
    types: dict[str, list[str]] = {}
    for model in matrix.models:
        types.setdefault(model.task_type, []).append(model.name)
    verified = parse_time(finished_at)
    by_resource: dict[Any, list[int]] = {}  # positions, not the items: they may be read from disk (an ItemSpool)
    for n, item in enumerate(items):  # one pass over the items, not one per resource × task type × layer
        by_resource.setdefault(item["keys"].get("resource"), []).append(n)
    out: list[PoolStatus] = []
    for resource in matrix.resources:
        mine = pick(items, by_resource.get(resource.name, []))
        # (layer, model; None on the resource layers, which every task type shares) → statuses seen
        seen: dict[tuple[str, Any], set[str]] = {}
        for item in mine:
            name = None if item["layer"] in RESOURCE_LAYERS else item["keys"].get("model")
            if "task_type" in item["keys"]:  # a task type's queue rule / job (spec.task_queues): its own only
                name = "task:" + str(item["keys"]["task_type"])
            seen.setdefault((item["layer"], name), set()).add(item["status"])
        task_types: dict[str, TaskTypeLevel] = {}
        facts = _NodeFacts(mine)
        per_node: dict[str, dict[str, TaskTypeLevel]] = {node: {} for node in facts.order}
        for task_type, models in types.items():
            layers: dict[str, str] = {layer: layer_summary(
                seen.get((layer, None), set()) | seen.get((layer, f"task:{task_type}"), set())
                if layer in RESOURCE_LAYERS
                else set().union(*(seen.get((layer, m), set()) for m in models))) for layer in LAYERS}
            task_types[task_type] = {"level": level_of(layers), "layers": layers,
                                     "models": [f"{m.name}@{m.version}" for m in matrix.models if m.name in models]}
            for node in facts.order:
                mine_here = facts.layers(node, layers, set(models))
                per_node[node][task_type] = {"level": level_of(mine_here), "layers": mine_here}
        coverage = resource.coverage.describe()
        ran_models = sorted({n for (layer, _), where in facts.facts.items() if layer == "model" for n in where})
        out.append({
            "matrix": matrix.name, "pool": resource.name, "type": resource.type, "vendor": resource.vendor,
            "requests": dict(resource.requests), "node_selector": dict(resource.node_selector),
            "queue": resource.queue, "nodes": list(facts.order), "coverage": coverage,
            "node_status": [_node_status(node, per_node[node], facts.uids.get(node, set())) for node in facts.order],
            "unvalidated": _unvalidated(mine, facts, coverage),
            "model_runs_on": ran_models, "domain": matrix.validation_domain,
            "verified_at": iso(verified), "valid_for_s": matrix.valid_for_s,
            "expires_at": iso(verified + timedelta(seconds=matrix.valid_for_s)), "owners": dict(matrix.owners),
            "task_types": task_types, "untested": sum(1 for i in mine if i["status"] != "passed")})
    return out


def validation_status(matrices: list[tuple[Matrix, str]], items: Sequence[ItemDict],
                      finished_at: str) -> ValidationSection:
    """``{"pools": [...]}`` for ``matrices`` [(Matrix, its evidence prefix)] over the evidence ``items``."""
    pools: list[PoolStatus] = []
    for matrix, prefix in matrices:
        pools += pool_status(matrix, where(items, _of_matrix(prefix)), finished_at)
    return {"pools": pools}


def _of_matrix(prefix: str) -> Callable[[ItemDict], bool]:
    """Whether an item is of the matrix whose nodeid prefix is ``prefix``."""
    return lambda item: item["matrix"] == prefix


def expired(pool: PoolStatus, now: datetime) -> bool:
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
