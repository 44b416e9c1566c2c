"""One ``usage.workload`` record per workload an item saw, the same for every engine.

The engine reports facts (:data:`~pytest_hetero.backends.protocol.USAGE_FACTS`: namespace, tenant,
requests, epoch times, attempts); this module adds what the item knows (the model and its task type
for a model run), computes ``held_s`` and ``idle_s`` as far as the item can tell, and records it.
Assembly (:func:`pytest_hetero.evidence.usage.ledger`) folds the records of every item into the run's
``usage`` section.

The gate's run-time values of a model run (``model.run_time``: its peak memory and CPU-seconds, each with
its source, :data:`~pytest_hetero.probes.usage.RUN_TIME_UNITS`) are recorded and handed to the business
item by :func:`keep_run_time`, read back by :func:`run_time_of` and added to the values the gate judges
rules on by :func:`add_run_time` (a rule ``metric: memory_peak_mib`` then reads the gate's number).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, TypedDict

from pytest_hetero.backends.protocol import UsageFacts
from pytest_hetero.evidence.usage import RECORD, held, idle
from pytest_hetero.layers.base import LayerContext

if TYPE_CHECKING:
    from pytest_hetero.matrix.model import Model
    from pytest_hetero.probes.usage import Measured

RUN_TIME_RECORD = "model.run_time"


class Attribution(TypedDict, total=False):
    """What a ``usage.workload`` record adds to the engine's :class:`UsageFacts` for a workload of a model
    (:func:`record`): ``model`` (``name@version``) and its ``task_type``; absent for any other workload."""

    model: str
    task_type: str


def record(ctx: LayerContext, facts: UsageFacts | None, outcome: str | None = None, run: bool = False,
           model: Model | None = None) -> None:
    """Record ``facts`` (an engine's usage facts; nothing when empty or None) as ``usage.workload``.

    ``outcome`` overrides the engine's when the layer knows better (``failed``: the action the
    workload was made for did not happen); ``run``: the workload is this item's model run, so it is
    attributed to the model (``model`` ``name@version``, ``task_type``); ``model``: attribute it to this model
    (a serving pod of the model). ``held_s`` is counted up to
    now when the workload is still held (``open``: True); ``idle_s`` is ``started − placed``.
    """
    if not facts:
        return
    data = facts.copy()
    if outcome is not None:
        data["outcome"] = outcome
    if run and "model" in ctx.planned.keys:
        model = ctx.model
    served: Attribution = ({"model": f"{model.name}@{model.version}", "task_type": model.task_type}
                           if model is not None else {})
    seconds, missing = held(data, time.time())
    gap = idle(data)
    ctx.record(RECORD, **data, **served, held_s=None if seconds is None else round(seconds, 3),
               idle_s=None if gap is None else round(gap, 3), open="released" in missing)


def record_failed(ctx: LayerContext, facts: UsageFacts, run: bool = False) -> None:
    """Record the workload of an action that failed (an :class:`~pytest_hetero.backends.protocol.EngineFault`'s
    ``usage``: it held, or was denied, what it asked for) as :func:`record` does, its outcome the engine's when it
    gave one (``refused``), else ``failed``."""
    record(ctx, facts, facts.get("outcome") or "failed", run=run)


def _key(ctx: LayerContext, parts: tuple[str, ...], run: int) -> str:
    return "::".join(ctx.scope + parts) + f"#run_time{run}"


def keep_run_time(ctx: LayerContext, values: dict[str, Measured] | None, engine: str, run: int = 0,
                  devices: dict[str, Measured] | None = None) -> None:
    """Record the gate's run-time ``values`` of this model run (``{name: measured(...)}`` from the engine's
    ``details["run_time"]``; None: the engine measures none, each is then unavailable and says so), with the
    device values ``devices`` (:func:`~pytest_hetero.probes.device_values.device_run_time`) as
    ``model.run_time`` and hand them to the business item (the same process: a resource's items never
    split across xdist workers), when this session has it (``ctx.state["read"]``)."""
    from pytest_hetero.probes.usage import RUN_TIME_UNITS, measured

    if not isinstance(values, dict):
        values = {name: measured(name, None, f"the {engine} engine", f"the {engine} engine does not measure "
                                 "a model run's own memory and CPU time") for name in RUN_TIME_UNITS}
    values = {**values, **(devices or {})}
    ctx.record(RUN_TIME_RECORD, run=run or None, values=values)
    if ctx.state["read"]:  # else no business item of this session takes them back
        ctx.handoff[_key(ctx, ctx.planned.parts, run)] = json.dumps(values).encode()


def run_time_of(ctx: LayerContext, parts: tuple[str, ...], run: int = 0) -> dict[str, Measured] | None:
    """The run-time values the gate measured of model item ``parts`` (see :func:`keep_run_time`, which handed
    them over as JSON); None when this process holds none (the model item did not run here)."""
    raw = ctx.handoff.pop(_key(ctx, parts, run), None)
    found: dict[str, Measured] | None = None if raw is None else json.loads(raw)
    return found if isinstance(found, dict) else None


def add_run_time(gate: Any, values: dict[str, Measured] | None) -> None:
    """Add the run-time ``values`` (:func:`run_time_of`) to ``gate`` (a
    :class:`~pytest_hetero.matrix.acceptance.GateValues`): a measured number with provenance ``{"source":
    "measured", "by": "the gate: <its source>", "unit"}`` (``measured_in_workload`` when the gate's sampler took
    it inside the model's container, where the code under test can overwrite it), or, when it could not be
    measured, why (a rule on it is then not evaluable, never judged on 0). None: the model run was not in this
    process, said per name."""
    from pytest_hetero.probes.device_values import DEVICE_RUN_TIME_UNITS
    from pytest_hetero.probes.usage import RUN_TIME_UNITS

    for name in (*RUN_TIME_UNITS, *DEVICE_RUN_TIME_UNITS):
        found = values.get(name) if values else None  # a name the engine did not measure is absent
        value = found["value"] if found else None
        if found and isinstance(value, (int, float)) and not isinstance(value, bool):
            where = "measured_in_workload" if found.get("in_workload") else "measured"
            gate.values[name] = (float(value), {"source": where, "by": f"the gate: {found['source']}",
                                                "unit": found["unit"]})
            continue
        gate.values.pop(name, None)
        gate.unavailable[name] = str(found.get("unavailable")) if found else (
            "the gate has no run-time values of this run (the model run was in another process)")
