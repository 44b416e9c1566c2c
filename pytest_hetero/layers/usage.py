"""One ``usage.workload`` record per workload an item saw, the same for every engine.

The engine reports facts (:data:`~pytest_hetero.backends.protocol.USAGE_FACTS`: namespace, tenant,
requests, epoch times, attempts); this module adds what the item knows (the model and its task type
for a model run), computes ``held_s`` and ``idle_s`` as far as the item can tell, and records it.
Assembly (:func:`pytest_hetero.evidence.usage.ledger`) folds the records of every item into the run's
``usage`` section.
"""

from __future__ import annotations

import time
from typing import Any

from pytest_hetero.evidence.usage import RECORD, held, idle
from pytest_hetero.layers.base import LayerContext


def record(ctx: LayerContext, facts: dict[str, Any] | None, outcome: str | None = None, run: bool = False) -> None:
    """Record ``facts`` (an engine's usage facts; nothing when empty or None) as ``usage.workload``.

    ``outcome`` overrides the engine's when the layer knows better (``failed``: the action the
    workload was made for did not happen); ``run``: the workload is this item's model run, so it is
    attributed to the model (``model`` ``name@version``, ``task_type``). ``held_s`` is counted up to
    now when the workload is still held (``open``: True); ``idle_s`` is ``started − placed``.
    """
    if not facts:
        return
    data = dict(facts)
    if outcome is not None:
        data["outcome"] = outcome
    if run and "model" in ctx.planned.keys:
        model = ctx.model
        data["model"] = f"{model.name}@{model.version}"
        data["task_type"] = model.task_type
    seconds, missing = held(data, time.time())
    gap = idle(data)
    data["held_s"] = None if seconds is None else round(seconds, 3)
    data["idle_s"] = None if gap is None else round(gap, 3)
    data["open"] = "released" in missing
    ctx.record(RECORD, **data)
