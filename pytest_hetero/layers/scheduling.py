"""Scheduling layer: a workload asking for the resource through the real path lands in the right pool.

The engine places a workload with the resource's requests
(:meth:`~pytest_hetero.backends.protocol.Backend.place`) and records what it submitted, what the
scheduler or engine did and why; the verdict is written here once for every engine:

* not placed → failed with the decisive normalised Pending reason's code and owner
  (:mod:`pytest_hetero.pending`), or ``scheduling_timeout`` (platform) when nothing explains it;
* a request the engine cannot express for an accelerator → ``request_untranslatable`` (platform);
  fewer devices on the host than requested → ``insufficient_devices`` (infrastructure);
* placed with other limits than requested → ``allocation_mismatch`` (platform).

Governance probes (``spec.governance``) are scheduling items too: see :mod:`pytest_hetero.layers.governance`;
so are a task type's queue rules and multi-pod job (``spec.task_queues``): :mod:`pytest_hetero.layers.taskqueue`.

Engines that place nothing (local) answer Unsupported: not applicable, recorded as untested scope.
"""

from __future__ import annotations

from typing import Any

from pytest_hetero.layers import governance, taskqueue, usage
from pytest_hetero.layers.base import LayerContext, LayerFailed


def check(ctx: LayerContext) -> None:
    """Record the request, have the engine place it, judge the placement (see the module docstring);
    a governance probe's item is judged by :func:`pytest_hetero.layers.governance.check`."""
    if "probe" in ctx.planned.keys:
        governance.check(ctx)
        return
    if "task_type" in ctx.planned.keys:
        taskqueue.check(ctx)
        return
    ctx.record("scheduling.request", resource=ctx.resource.name, requests=ctx.resource.requests,
               limits=ctx.resource.limits, node_selector=ctx.resource.node_selector,
               tolerations=list(ctx.resource.tolerations), queue=ctx.resource.queue,
               priority_class=ctx.resource.priority_class)
    placement = ctx.backend.place(ctx)
    usage.record(ctx, placement.usage, None if placement.placed else "refused")
    if placement.untranslatable:
        raise LayerFailed(placement.untranslatable, "request_untranslatable")
    if placement.short_devices:
        raise LayerFailed(placement.short_devices, "insufficient_devices")
    if not placement.placed:
        decisive = placement.decisive
        if decisive is None:
            raise LayerFailed(placement.message, "scheduling_timeout")
        raise LayerFailed(placement.message, decisive["code"])
    wrong = allocation_differences(placement.requested, placement.allocated)
    if wrong:
        raise LayerFailed("engine stored other limits than requested: " + ", ".join(
            f"{k} requested {a!r}, allocated {b!r}" for k, (a, b) in wrong.items()), "allocation_mismatch")


def allocation_differences(requested: dict[str, Any], allocated: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{field: (requested, allocated)}`` for every requested limit the engine stored otherwise (an
    absent allocation counts as the requested type's zero value)."""
    return {k: (v, allocated.get(k)) for k, v in requested.items() if (allocated.get(k) or type(v)()) != v}
