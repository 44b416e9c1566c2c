"""Expand a matrix into layer items keyed by exactly the dimensions each layer depends on.

discovery: resource; scheduling: resource (× image when the backend places by image);
startup: resource × image; model and business: resource × image × model@dataset.
So a resource's discovery is proven once and shared by every combination that uses it.
The id parts of an item read like the claim it proves, e.g.
``("cpu-host", "py311", "digits-logreg@digits-test", "model")``.

A model whose ``task_type`` brings checks (training, fine-tune: :mod:`.training`) gains a model-layer item
per check beside its run, under the same startup item: ``("cpu-2c", "py311", "m@d", "communication", "model")``.

A resource whose ``coverage`` is not ``one`` gains a node-coverage item per image, a startup item keyed
resource × image × coverage: ``("gpu-a", "py311", "nodes", "startup")``. It depends on the scheduling
item, not on the startup item the models depend on, so a broken node never hides the others.

A task type with a queue rule (``spec.task_queues``) gains a scheduling item per resource × image:
``("gpu-a", "py311", "training", "scheduling")`` (:mod:`pytest_hetero.matrix.taskqueues`).

Governance probes (``spec.governance.probes``) are scheduling items keyed resource × probe, after every
resource's items: ``("gpu-a", "governance", "b-cannot-submit-to-a", "scheduling")``. They depend on
nothing: a maintenance probe must run precisely when the pool's discovery fails on a cordoned node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_hetero.matrix.model import Dataset, Image, Matrix, Model, Resource
from pytest_hetero.matrix.training import checks_of
from pytest_hetero.vocab import Layer, Status

DIMENSIONS: dict[str, tuple[str, ...]] = {
    "discovery": ("resource",),
    "scheduling": ("resource",),
    "startup": ("resource", "image"),
    "model": ("resource", "image", "model", "dataset"),
    "business": ("resource", "image", "model", "dataset"),
}
"""Dimensions each layer's items are keyed by (scheduling gains ``image`` per backend)."""

NODES = "nodes"
"""Id part of a node-coverage item (``<resource>::<image>::nodes::startup``)."""


@dataclass(frozen=True)
class PlannedItem:
    """One item to run: ``parts`` is its id below the matrix file, ``depends_on`` the parts of its parent; ``keys``
    the dimensions it depends on, by name: always its ``resource`` (every item is of one resource), then ``image``,
    ``model``, ``dataset``, ``check``, ``coverage``, ``probe`` or ``task_type`` as its layer has them."""

    layer: Layer
    keys: dict[str, str]
    parts: tuple[str, ...]
    depends_on: tuple[str, ...] | None

    @property
    def id(self) -> str:
        """``::``-joined parts, e.g. ``cpu-host::py311::startup``."""
        return "::".join(self.parts)


class PlannedEntries:
    """The matrix entries an item is keyed by, for a context that holds its ``matrix`` and ``planned`` item (the
    layers' :class:`~pytest_hetero.layers.base.LayerContext`, the Kubernetes engine's deferred model run)."""

    matrix: Matrix
    planned: PlannedItem

    @property
    def layer(self) -> str:
        """This item's layer."""
        return self.planned.layer

    @property
    def resource(self) -> Resource:
        """The resource this item is keyed by."""
        return self.matrix.resource(self.planned.keys["resource"])

    @property
    def image(self) -> Image:
        """The image (KeyError on discovery/scheduling items keyed by resource only)."""
        return self.matrix.image(self.planned.keys["image"])

    @property
    def model(self) -> Model:
        """The model (model and business items only)."""
        return self.matrix.model(self.planned.keys["model"])

    @property
    def dataset(self) -> Dataset:
        """The dataset (model and business items only)."""
        return self.matrix.dataset(self.planned.keys["dataset"])


@dataclass(frozen=True)
class Omitted:
    """An item the matrix asks not to run: status ``excluded`` (rule) or ``not_applicable`` (incompatible)."""

    layer: Layer
    keys: dict[str, str]
    parts: tuple[str, ...]
    status: Status
    reason: str


@dataclass
class Plan:
    """All items of one matrix in dependency order, plus what was omitted and why."""

    items: list[PlannedItem] = field(default_factory=list)
    omitted: list[Omitted] = field(default_factory=list)

    def by_id(self) -> dict[str, PlannedItem]:
        """Items by :attr:`PlannedItem.id`."""
        return {item.id: item for item in self.items}


def _combo(model: str, dataset: str) -> str:
    return f"{model}@{dataset}"


def expand(matrix: Matrix, *, scheduling_per_image: bool = False) -> Plan:
    """Return the :class:`Plan` of ``matrix``.

    ``scheduling_per_image``: the backend places by image (Kubernetes), so scheduling items
    are keyed resource × image. Exclude rules apply to an item when every dimension the rule
    names is one of the item's dimensions and matches; images whose ``for`` list lacks the
    resource type are recorded as ``not_applicable`` (incompatible), with no items below.
    """
    plan = Plan()
    label = _Labels(matrix)

    def add(layer: Layer, keys: dict[str, str], parts: tuple[str, ...],
            parent: tuple[str, ...] | None) -> bool:
        for rule in matrix.exclude:
            if set(rule.match) <= set(keys) and rule.matches(keys):
                plan.omitted.append(Omitted(layer, keys, parts, "excluded",
                                            f"excluded by rule at line {rule.line}: {rule.reason}"))
                return False
        plan.items.append(PlannedItem(layer, keys, parts, parent))
        return True

    for res in matrix.resources:
        rk = {"resource": res.name}
        rl = label(res.name)
        disc = (rl, "discovery")
        has_disc = add("discovery", rk, disc, None)
        sched: tuple[str, ...] = (rl, "scheduling")
        if not scheduling_per_image:
            add("scheduling", rk, sched, disc if has_disc else None)
        for img in matrix.images:
            ik = {**rk, "image": img.name}
            il = label(img.name)
            if res.type not in img.for_types:
                for layer in ("startup", "model", "business"):
                    plan.omitted.append(Omitted(
                        layer, ik, (rl, il, layer), "not_applicable",
                        f"image '{img.name}' is built for {', '.join(img.for_types)}, "
                        f"not for resource type {res.type}"))
                continue
            parent = sched
            if scheduling_per_image:
                parent = (rl, il, "scheduling")
                add("scheduling", ik, parent, disc if has_disc else None)
            start = (rl, il, "startup")
            add("startup", ik, start, parent)
            if res.coverage.mode != "one":
                add("startup", {**ik, "coverage": res.coverage.describe()}, (rl, il, NODES, "startup"), parent)
            _add_combos(matrix, add, label, ik, start)
            _add_task_queues(matrix, plan, add, ik, (rl, il), disc if has_disc else None, scheduling_per_image)
    _add_probes(matrix, add, label)
    return plan


def _add_combos(matrix: Matrix, add: Callable[[Layer, dict[str, str], tuple[str, ...], tuple[str, ...] | None], bool],
                label: Callable[[str], str], ik: dict[str, str], start: tuple[str, ...]) -> None:
    """The model and business items of every model × dataset under the startup item ``start``."""
    rl, il = start[0], start[1]
    for mod in matrix.models:
        for ds in matrix.datasets:
            ck = {**ik, "model": mod.name, "dataset": ds.name}
            combo = _combo(label(mod.name), label(ds.name))
            run = (rl, il, combo, "model")
            add("model", ck, run, start)
            add("business", ck, (rl, il, combo, "business"), run)
            for check in checks_of(mod.task_type):  # what the task type brings (matrix/training.py)
                add("model", {**ck, "check": check}, (rl, il, combo, check, "model"), start)


class _Labels:
    """Names as they appear in item ids: a name holding a secret (a model named like a token) has it
    redacted, the same way wherever the id is shown or used as a path (node ids, artifact folders,
    evidence); two names redacted alike get ``~2``, ``~3``… in the order of the matrix."""

    def __init__(self, matrix: Matrix) -> None:
        from pytest_hetero.redact import Redactor

        self._redactor = Redactor(extra=matrix.redact)
        self._given: dict[str, str] = {}
        self._taken: set[str] = set()

    def __call__(self, name: str) -> str:
        known = self._given.get(name)
        if known is not None:
            return known
        label = self._redactor.text(name)
        if label != name:
            n = 2
            base = label
            while label in self._taken:
                label, n = f"{base}~{n}", n + 1
        self._given[name] = label
        self._taken.add(label)
        return label


def _add_probes(matrix: Matrix, add: Callable[[Layer, dict[str, str], tuple[str, ...], tuple[str, ...] | None], bool],
                label: Callable[[str], str]) -> None:
    """One scheduling item per governance probe, with no parent (exclude rules apply as to any item)."""
    for probe in matrix.probes:
        add("scheduling", {"resource": probe.resource, "probe": probe.name},
            (label(probe.resource), "governance", label(probe.name), "scheduling"), None)


def _add_task_queues(matrix: Matrix, plan: Plan,
                     add: Callable[[Layer, dict[str, str], tuple[str, ...], tuple[str, ...] | None], bool],
                     ik: dict[str, str], at: tuple[str, str], parent: tuple[str, ...] | None,
                     per_image: bool) -> None:
    """One scheduling item per ``spec.task_queues`` rule under resource × image ``at``
    (``<resource>::<image>::<task type>::scheduling``), depending on discovery only: the job is submitted
    on its own, whatever the resource × image workload did. Not applicable on a backend that places by
    resource alone (no queue controller: Docker, local)."""
    for rule in matrix.task_queues:
        keys, parts = {**ik, "task_type": rule.task_type}, (*at, rule.task_type, "scheduling")
        if per_image:
            add("scheduling", keys, parts, parent)
        else:
            plan.omitted.append(Omitted("scheduling", keys, parts, "not_applicable",
                                        "queue rules and multi-pod jobs are proven through Kubernetes queues "
                                        "(Kueue); this backend has none"))


def is_task_queue(item: PlannedItem) -> bool:
    """True for a task type's scheduling item (keyed resource × image × task type)."""
    return "task_type" in item.keys


def plan_uses_image(plan: Plan) -> bool:
    """True when the plan's scheduling items are keyed resource × image (a backend with
    ``scheduling_per_image``), False when keyed by resource alone."""
    return any(i.layer == "scheduling" and "image" in i.keys for i in plan.items)


def is_coverage(item: PlannedItem) -> bool:
    """True for a node-coverage item (startup keyed resource × image × coverage)."""
    return "coverage" in item.keys


def is_probe(item: PlannedItem) -> bool:
    """True for a governance probe's item (keyed resource × probe)."""
    return "probe" in item.keys
