"""Node coverage: the startup check on each chosen schedulable node of a pool (``resources[].coverage``).

A resource whose ``coverage`` is ``every``, ``{sample: N}`` or ``{share: F}`` has one node-coverage item per
image (``<resource>::<image>::nodes::startup``, a startup item). Its check, once for every engine:

1. ask the engine for the pool as it is now (:meth:`~pytest_hetero.backends.protocol.Backend.inventory`;
   an engine without a node pool: not applicable);
2. keep the schedulable nodes (Ready, not cordoned, every NoSchedule/NoExecute taint tolerated by the
   resource) and choose among them (:func:`choose`: all, a sample drawn with a seed derived from the run id,
   or a share rounded up); record ``startup.coverage`` (pool, schedulable, chosen, and why each other node
   was not exercised);
3. have the engine start the image on each chosen node, pinned to it but placed by the real scheduler
   (:meth:`~pytest_hetero.backends.protocol.Backend.start_on`), and judge each as the startup layer judges
   its workload (image digest, device payload: :func:`pytest_hetero.layers.startup.judge_payload`). The pods
   are created together, so placement and container start overlap; the nodes are then checked concurrently,
   at most ``--hetero-node-parallel`` (ini ``hetero_node_parallel``, default 8) at a time, each in a thread of
   its own (on Kubernetes each exec opens a websocket of its own: :func:`~pytest_hetero.backends.kubernetes.
   podexec.open_exec`): the item takes about ⌈nodes / N⌉ payload times, not one per node. Records of
   different nodes interleave in time; each names its node;
4. on each node whose startup passed, a **smoke model run**: the first model × dataset the plan has for this
   resource × image (:func:`smoke_combo`; a served model is skipped) runs once in that node's pinned pod
   (:func:`pytest_hetero.layers.execution.run_once`: recorded and judged as a model item's run, its
   records and artifacts, under ``<node>/<model@dataset>/``, in this item); none when the plan has none;
5. record ``startup.node`` per chosen node: ``{"node", "outcome": passed|failed|error, "category",
   "message", "proven": [layers proven on it by this item: model only when its smoke run passed], "pod",
   "simulated", "smoke": {"model", "dataset", "outcome", "category"} or None}``; a failed smoke run fails
   the node (its category, startup still proven there).

The item fails when any chosen node failed, naming each (the category of the first; every cause keeps its
own owner); the nodes that passed are proven all the same, node by node, in the validation status
(:mod:`pytest_hetero.status.compute`: a node's model level counts its smoke run). The model items themselves
run on the resource × image workload's node only, which each states (``scope.not_proven``); business
(acceptance) is judged there only.
"""

from __future__ import annotations

import hashlib
import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING

from pytest_hetero.backends.nodefit import blockers
from pytest_hetero.backends.protocol import EngineFault, NodeFacts, Started
from pytest_hetero.layers import usage
from pytest_hetero.layers.base import LayerContext, LayerFailed, LayerOutcome, NotApplicable
from pytest_hetero.matrix.expand import PlannedItem
from pytest_hetero.matrix.model import Coverage, Resource
from pytest_hetero.probes.payload import payload_script
from pytest_hetero.signals import quiet_thread

if TYPE_CHECKING:
    from pytest_hetero.evidence.records import SmokeRun

NODE_RECORD = "startup.node"
"""Record kind of one node's outcome in a node-coverage item."""
COVERAGE_RECORD = "startup.coverage"
"""Record kind of the choice of nodes (pool, schedulable, chosen, not exercised with reasons)."""


def unschedulable_reason(resource: Resource, facts: NodeFacts) -> str | None:
    """Why a pod of ``resource`` cannot land on the node (facts as ``NodePool.nodes`` holds them), or None: the first
    of :func:`pytest_hetero.backends.nodefit.blockers`."""
    return next(iter(blockers(facts, resource.tolerations)), None)


def choose(coverage: Coverage, names: list[str], seed: str) -> list[str]:
    """The nodes of ``names`` (schedulable, any order) to exercise: every one, or :meth:`Coverage.how_many`
    drawn at random with ``seed`` (the same seed draws the same nodes), sorted by name."""
    ordered = sorted(names)
    wanted = coverage.how_many(len(ordered))
    if wanted >= len(ordered):
        return ordered
    rng = random.Random(int(hashlib.sha256(seed.encode()).hexdigest()[:16], 16))  # noqa: S311 - a sample, not a secret
    return sorted(rng.sample(ordered, wanted))


def check(ctx: LayerContext) -> None:
    """Run the startup check on each chosen node of the pool (see the module docstring). Raises
    NotApplicable without a node pool, LayerFailed ``no_nodes`` when no node is schedulable, else
    LayerFailed (LayerBroken when every failure is the engine's) naming every node that failed."""
    engine = ctx.backend
    seen = engine.inventory(ctx)
    if seen.pool is None:
        raise NotApplicable(f"node coverage ({ctx.resource.coverage.describe()}) needs a node pool; the "
                            f"{engine.name} backend has a single host")
    coverage = ctx.resource.coverage
    pool = [str(f["name"]) for f in seen.pool.nodes]
    skipped = {str(f["name"]): why for f in seen.pool.nodes
               if (why := unschedulable_reason(ctx.resource, f)) is not None}
    usable = [n for n in pool if n not in skipped]
    seed = f"{ctx.settings.run_id}/{ctx.resource.name}"
    chosen = choose(coverage, usable, seed)
    not_chosen = [{"node": n, "reason": f"not schedulable for this resource: {skipped[n]}"}
                  for n in pool if n in skipped]
    not_chosen += [{"node": n, "reason": f"not chosen (coverage {coverage.describe()}: {len(chosen)} of "
                                         f"{len(usable)} schedulable nodes)"}
                   for n in usable if n not in chosen]
    ctx.record(COVERAGE_RECORD, coverage=coverage.describe(), pool=pool, schedulable=usable, chosen=chosen,
               not_exercised=not_chosen, seed=seed if coverage.mode == "sample" else None)
    if not chosen:
        raise LayerFailed(f"node coverage {coverage.describe()}: no schedulable node in the pool of "
                          f"{ctx.resource.name} ({len(pool)} node(s): "
                          + "; ".join(f"{e['node']}: {e['reason']}" for e in not_chosen[:5]) + ")", "no_nodes")
    answers = engine.start_on(ctx, chosen)
    smoke = smoke_combo(ctx)
    ctx.state["smoke"] = smoke
    outcomes = each_node(ctx, chosen, answers)
    failures = [(node, outcome) for node, outcome in zip(chosen, outcomes, strict=True) if outcome is not None]
    if failures:
        _fail(ctx, chosen, failures)


def each_node(ctx: LayerContext, chosen: list[str], answers: list[Started | EngineFault]
              ) -> list[LayerOutcome | None]:
    """Check every node's answer (:func:`_judge_node`), at most ``settings.node_parallel`` at a time, each in
    a helper thread (SIGINT/SIGTERM left to the main thread); one failure (None: passed) per node, in order.
    An exception that is not a layer outcome (a harness bug) is raised here once every node has finished. A Ctrl-C
    (KeyboardInterrupt) goes on at once, not after every node's smoke run has ended by itself: the engine's close
    ends the runs still in flight (the Kubernetes engine kills each before it deletes the pods)."""
    width = max(1, min(ctx.settings.node_parallel, len(chosen)))
    if width == 1:
        return [_judge_node(ctx, node, answer) for node, answer in zip(chosen, answers, strict=True)]

    def one(pair: tuple[str, Started | EngineFault]) -> LayerOutcome | None:
        quiet_thread()
        return _judge_node(ctx, *pair)

    pool = ThreadPoolExecutor(width, thread_name_prefix="hetero-node")
    interrupted = False
    try:
        futures = [pool.submit(one, pair) for pair in zip(chosen, answers, strict=True)]
        return [f.result() for f in futures]
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        pool.shutdown(wait=not interrupted, cancel_futures=interrupted)


def _judge_node(ctx: LayerContext, node: str, answer: Started | EngineFault) -> LayerOutcome | None:
    """Judge one node's answer; record ``startup.node``; the failure (None: passed)."""
    from pytest_hetero.layers import outcome_of
    from pytest_hetero.layers.startup import judge_digest, judge_payload

    placed = _placed_on(ctx, node)
    if isinstance(answer, EngineFault):
        usage.record_failed(ctx, answer.usage)
        fault = outcome_of(answer)
        _record(ctx, node, fault, ["scheduling"] if placed else [], None, None)
        return fault
    usage.record(ctx, answer.usage)
    try:
        if answer.identity is not None:
            judge_digest(ctx, answer.identity)
        timeout = str(max(1, int(ctx.timeout_s // 4)))
        done = ctx.backend.run(answer, ["/bin/sh", "-c", payload_script()], ctx.timeout_s,
                               {"HETERO_TIMEOUT": timeout})
        judge_payload(ctx, answer, done.exit_code, done.stdout, done.stderr, artifact=f"payload-{node}.txt")
    except EngineFault as exc:
        fault = outcome_of(exc)
        _record(ctx, node, fault, ["scheduling"], answer.name, answer.simulated)
        return fault
    except LayerOutcome as exc:
        _record(ctx, node, exc, ["scheduling"], answer.name, answer.simulated)
        return exc
    smoke = _smoke(ctx, node)
    if smoke is not None and smoke[1] is not None:
        _record(ctx, node, smoke[1], ["scheduling", "startup"], answer.name, answer.simulated, smoke[0])
        return smoke[1]
    proven = ["scheduling", "startup"] + (["model"] if smoke is not None else [])
    _record(ctx, node, None, proven, answer.name, answer.simulated, smoke[0] if smoke else None)
    return None


def smoke_combo(ctx: LayerContext) -> PlannedItem | None:
    """The model item of this resource × image a smoke run per node repeats: the plan's first (matrix order,
    excluded combinations left out) whose model is run, not served; None when there is none."""
    from pytest_hetero.matrix.expand import expand

    keys = ctx.planned.keys
    for item in expand(ctx.matrix, scheduling_per_image=ctx.backend.scheduling_per_image).items:
        if (item.layer == "model" and item.keys["resource"] == keys["resource"]  # a model item's keys: resource,
                and item.keys["image"] == keys["image"]  # image, model, dataset (matrix.expand writes every one)
                and ctx.matrix.model(item.keys["model"]).serving is None):
            return item
    return None


def _smoke(ctx: LayerContext, node: str) -> tuple[SmokeRun, LayerOutcome | None] | None:
    """Run the smoke model run on ``node``'s pinned workload; ``(facts, failure or None)``, None when there
    is no combination to run. Its records land in this item (``model.run`` names the node)."""
    from pytest_hetero.layers import outcome_of
    from pytest_hetero.layers.execution import run_once

    combo = ctx.state["smoke"]
    if combo is None:
        return None
    parts = (*ctx.planned.parts[:-1], node, combo.parts[-2])
    run = replace(ctx, planned=PlannedItem("model", dict(combo.keys), parts, None), pinned_node=node,
                  _made=set())
    failure: LayerOutcome | None = None
    try:
        run_once(run)
    except EngineFault as exc:
        failure = outcome_of(exc)
    except LayerOutcome as exc:
        failure = exc
    finally:  # the business item never reads a smoke run's outputs: nothing kept in memory for it
        mine = "::".join(run.scope + parts)
        for key in [k for k in ctx.handoff if k.startswith(mine)]:
            ctx.handoff.pop(key, None)
    outcome = "passed" if failure is None else "error" if failure.status == "error" else "failed"
    facts: SmokeRun = {"model": combo.keys["model"], "dataset": combo.keys["dataset"], "outcome": outcome,
                       "category": None if failure is None else failure.category}
    return facts, failure


def _placed_on(ctx: LayerContext, node: str) -> bool:
    """True when this item recorded a placement on ``node`` (``scheduling.placed``)."""
    from pytest_hetero.evidence.records import PLACED, data_of

    return any((placed := data_of(r, PLACED)) is not None and placed["node"] == node for r in ctx.evidence.records)


def _record(ctx: LayerContext, node: str, failure: LayerOutcome | None, proven: list[str], pod: str | None,
            simulated: bool | None, smoke: SmokeRun | None = None) -> None:
    if failure is None:
        ctx.record(NODE_RECORD, node=node, outcome="passed", category=None, message=None, proven=proven, pod=pod,
                   simulated=simulated, smoke=smoke)
        return
    ctx.record(NODE_RECORD, node=node, outcome="error" if failure.status == "error" else "failed",
               category=failure.category, message=failure.message[:2000], proven=proven, pod=pod, simulated=simulated,
               smoke=smoke)


def _fail(ctx: LayerContext, chosen: list[str], failures: list[tuple[str, LayerOutcome]]) -> None:
    """Raise the item's outcome naming every node that failed (LayerBroken when the engine broke on every one)."""
    from pytest_hetero.layers.base import LayerBroken

    if all(isinstance(f, NotApplicable) for _, f in failures):
        raise NotApplicable(failures[0][1].message)
    text = "; ".join(f"{node}: {f.category}: {f.message}" for node, f in failures)
    message = (f"startup failed on {len(failures)} of {len(chosen)} node(s) of pool {ctx.resource.name} "
               f"(the others passed and are validated node by node): {text}")
    causes: dict[str, list[str]] = {}
    for node, f in failures:
        causes.setdefault(f.category, []).append(node)
    listed = tuple((c, f"on {', '.join(nodes)}") for c, nodes in causes.items()) if len(causes) > 1 else ()
    if all(isinstance(f, LayerBroken) for _, f in failures):
        raise LayerBroken(message, failures[0][1].category, causes=listed)
    first = next(f for _, f in failures if not isinstance(f, LayerBroken))
    raise LayerFailed(message, first.category, causes=listed)
