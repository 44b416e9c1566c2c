"""Model runs spread over a pool's capacity, engine-neutral part (``resources[].model_runs: per-run``).

With ``per-run`` (``--hetero-model-runs`` overrides the matrix, ini ``hetero_model_runs`` is the default) every
model × dataset run of a resource × image runs in a workload of its own, which the engine makes and removes: a Pod
on Kubernetes (:mod:`pytest_hetero.backends.kubernetes.spread`), a container pinned to one device slot on Docker
(:mod:`pytest_hetero.backends.docker.spread`), a sandbox pinned to one device slot locally
(:mod:`pytest_hetero.backends.local.spread`; the slots: :mod:`pytest_hetero.backends.slots`). This module holds
what every engine shares: the setting's precedence (:func:`mode`), which steps it applies to (:func:`wanted`), the
step a run in a helper thread is handed (:class:`Deferred`), and the launching and joining of the runs
(:class:`Spread`).

**Concurrency and joining.** pytest items stay the units of report, run one after the other. The first model item
of a matrix × resource × image to run (its startup passed: gating is the items', unchanged) launches the runs of
itself and of the model items after it in this session (``state["upcoming"]``, set by the pytest glue
:mod:`pytest_hetero.pytest_plugin.spread`, less the items whose model or dataset file fails its declared digest or
whose dataset view cannot be made: :func:`pytest_hetero.layers.execution.launchable`), at most the group's width at
once (the engine's answer to
``concurrency``: ``--hetero-concurrency`` > ``resources[].concurrency`` > ini ``hetero_concurrency``, default 4);
each model item then waits for its own run's result, joined to it when it arrives, and the records the run made
are written into that item's evidence. A run no item asked for ahead (a rerun, a repeat) runs when asked.
:meth:`Spread.shutdown` (the engine's close) cancels what has not started; the engine removes what it created.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pytest_hetero.backends.protocol import ActionFailed, EngineFault, ExecResult, Step
from pytest_hetero.evidence.model import Artifact
from pytest_hetero.matrix.expand import PlannedEntries
from pytest_hetero.signals import quiet_thread

if TYPE_CHECKING:
    from pytest_hetero.layers.base import LayerState
    from pytest_hetero.matrix.expand import PlannedItem
    from pytest_hetero.matrix.model import Matrix
    from pytest_hetero.settings import Settings


Concurrency = int | Literal["free"]
"""A group's concurrency as set: a number of runs at once (≥ 1), or ``free`` (as many as the pool holds now: the
engine counts them when its group's first run is planned)."""


def mode(step: Step) -> tuple[str, Concurrency]:
    """``(model_runs, concurrency)`` of the step's resource: the command line's, else the matrix's, else the ini's."""
    s, res = step.settings, step.resource
    runs = s.model_runs or res.model_runs or s.default_model_runs
    width = s.concurrency or res.concurrency or s.default_concurrency
    return runs, width if width == "free" else max(1, int(width))


def wanted(step: Step) -> bool:
    """True when the step's model run goes to a workload of its own: ``per-run`` and an ordinary model item (not a
    node-coverage smoke run, which has its pinned workload, nor a task type's check)."""
    return step.pinned_node is None and "check" not in step.planned.keys and mode(step)[0] == "per-run"


@dataclass
class Deferred(PlannedEntries):
    """The Step a run in a helper thread is handed: the item's matrix entries and timeout; what the run records
    (and the artifacts it keeps) wait in ``records``/``artifacts`` until the item joins the result."""

    matrix: Matrix
    planned: PlannedItem
    settings: Settings
    timeout_s: float
    pinned_node: str | None = None
    records: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    artifacts: list[tuple[str, str | bytes, str]] = field(default_factory=list)

    def record(self, kind: str, **data: Any) -> None:
        """Keep the record for the item that joins the run."""
        self.records.append((kind, data))

    def artifact(self, name: str, content: str | bytes, media_type: str = "text/plain") -> Artifact:
        """Keep the artifact for the item that joins the run; the Artifact returned is provisional."""
        self.artifacts.append((name, content, media_type))
        data = content.encode("utf-8", "replace") if isinstance(content, str) else content
        return Artifact(name=name, path=f"(kept with the item: {name})", size=len(data),
                        sha256=hashlib.sha256(data).hexdigest(), media_type=media_type)

    def replay(self, step: Step) -> None:
        """Write what the run recorded and kept into ``step`` (the joining item)."""
        for name, content, media_type in self.artifacts:
            step.artifact(name, content, media_type)
        for kind, data in self.records:
            step.record(kind, **data)


Outcome = tuple["ExecResult | EngineFault", Deferred]
Run = Callable[[Deferred, int, float], ExecResult]
"""An engine's run of one model item in a workload of its own: ``run(step, width, queued)`` (``queued``: epoch
seconds the run was queued at); raises EngineFault for what went wrong."""


@dataclass
class Plan:
    """What an engine answers for a group's first item: how its runs go.

    ``run`` runs one model item (:data:`Run`); ``unexpected(exc, step)`` turns any other exception of a run into
    the EngineFault its item reports; ``width`` is how many run at once (≥ 1); ``noun`` names the workload in
    messages (``Pod``, ``container``); ``facts`` are added to the first item's ``model.spread`` record."""

    run: Run
    unexpected: Callable[[Exception, Deferred], EngineFault]
    width: int
    noun: str
    facts: dict[str, Any] = field(default_factory=dict)


class Group:
    """The runs of one matrix × resource × image: a pool of ``plan.width`` threads (at most ``planned``, the runs
    launched ahead, when given: a width beyond them would be said of runs that never went at once), each run's future
    by item id."""

    def __init__(self, plan: Plan, stop: threading.Event, planned: int | None = None) -> None:
        self.plan, self.stop = plan, stop
        self.width = plan.width if planned is None else max(1, min(plan.width, planned))
        self.pool = ThreadPoolExecutor(plan.width, thread_name_prefix="hetero-run")
        self.futures: dict[tuple[str, ...], list[Future[Outcome]]] = {}
        self.launched: set[Future[Outcome]] = set()
        """Every run queued that has not ended, joined or not (:meth:`Spread.wait`): an ended run leaves it, so once
        its item has joined it nothing here holds its result (a long group's memory does not grow with its runs)."""
        self.lock = threading.Lock()

    def launch(self, step: Step, planned: PlannedItem) -> None:
        """Queue the run of ``planned`` (``step``'s matrix, settings and timeout)."""
        deferred = Deferred(step.matrix, planned, step.settings, step.timeout_s)
        future = self.pool.submit(self._guarded, deferred, time.time())
        with self.lock:
            self.futures.setdefault(planned.parts, []).append(future)
            self.launched.add(future)
        future.add_done_callback(self._ended)  # also called on cancel (shutdown), or here when already ended

    def _ended(self, future: Future[Outcome]) -> None:
        """Forget an ended run (result, fault or cancel) in :attr:`launched`."""
        with self.lock:
            self.launched.discard(future)

    def take(self, planned: PlannedItem) -> Future[Outcome] | None:
        """The first queued run of ``planned`` not yet joined, or None."""
        with self.lock:
            queue = self.futures.get(planned.parts) or []
            return queue.pop(0) if queue else None

    def _guarded(self, deferred: Deferred, queued: float) -> Outcome:
        """The plan's run in a helper thread: an EngineFault is the run's outcome, not the thread's death."""
        quiet_thread()
        try:
            if self.stop.is_set():
                raise ActionFailed(f"the gate stopped before this model run's {self.plan.noun} was created",
                                   "harness")
            return self.plan.run(deferred, self.width, queued), deferred
        except EngineFault as fault:
            return fault, deferred
        except Exception as exc:  # noqa: BLE001 - translated: the item that joins it reports it
            return self.plan.unexpected(exc, deferred), deferred


class Spread:
    """The per-run model runs of one engine session: a :class:`Group` per matrix × resource × image."""

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str, str], Group] = {}
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def execute(self, step: Step, plan: Callable[[Concurrency], Plan]) -> ExecResult:
        """The item's model run in a workload of its own (see the module docstring). On the group's first item,
        ``plan(concurrency)`` says how the group's runs go (the engine turns ``free`` into a number and names the
        setting in the plan's facts; the group's width is at most the runs launched ahead), and the runs of the model
        items after it are launched too (recorded as ``model.spread``). Raises what the run raised (an EngineFault),
        after writing the run's records into ``step``."""
        runs, width = mode(step)
        key = (step.matrix.sha256, step.resource.name, step.image.name)
        upcoming: list[PlannedItem] = []
        with self.lock:
            group = self.groups.get(key)
            first = group is None
            if group is None:  # the runs go at most as many at once as were planned: a lone run is alone
                upcoming = ahead(step)
                group = self.groups[key] = Group(plan(width), self.stop, planned=len(upcoming))
        if first:
            step.record("model.spread", model_runs=runs, concurrency=group.width, launched=len(upcoming),
                        items=["::".join(p.parts) for p in upcoming], **group.plan.facts)
            for planned in upcoming:
                group.launch(step, planned)
        future = group.take(step.planned)
        if future is None:
            step.record("model.note", message="this model run was not launched ahead (a rerun, a repeat, or its "
                        "inputs did not verify when its group's runs were launched): run now")
            group.launch(step, step.planned)
            future = group.take(step.planned)
            assert future is not None  # noqa: S101 - launched on the line above
        outcome, deferred = future.result()
        deferred.replay(step)
        if isinstance(outcome, EngineFault):
            raise outcome
        return outcome

    def shutdown(self) -> None:
        """Stop launching runs: queued ones are cancelled, running ones end when the engine removes their
        workloads."""
        self.stop.set()
        for group in list(self.groups.values()):
            group.pool.shutdown(wait=False, cancel_futures=True)

    def wait(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` seconds for every run launched to end (after :meth:`shutdown`, once the engine
        has stopped the running ones); how many had not ended by then. A run cancelled before it started (queued
        at :meth:`shutdown`) has ended: ``concurrent.futures.wait`` never counts a future cancelled by
        ``shutdown(cancel_futures=True)`` as done (it is never notified), so it is left out of the wait."""
        launched: list[Future[Outcome]] = []
        with self.lock:
            groups = list(self.groups.values())
        for group in groups:
            with group.lock:  # a run ending meanwhile leaves the set (Group._ended)
                launched += [f for f in group.launched if not f.cancelled()]
        return len(concurrent.futures.wait(launched, timeout=timeout_s).not_done)


def ahead(step: Step) -> list[PlannedItem]:
    """The model items of this session from ``step``'s on, in the order they will run (``state["upcoming"]``: the
    whole group's list, set by the pytest glue; narrowed by ``state["launchable"]()`` when the model layer set it, to
    the items whose inputs verify: :func:`pytest_hetero.layers.execution.launchable`, asked here, once per group);
    just ``step``'s when the glue gave none or it is not in it."""
    state: LayerState | None = getattr(step, "state", None)  # a LayerContext's, every key written; others have none
    if state is None:
        return [step.planned]
    narrowed = state["launchable"]
    group = (narrowed() if narrowed is not None else state["upcoming"]) or []
    at = next((i for i, p in enumerate(group) if p.parts == step.planned.parts), None)
    return [step.planned] if at is None else list(group[at:])
