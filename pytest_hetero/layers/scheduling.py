"""Scheduling layer: a workload asking for the resource through the real path lands in the right pool.

Backends that cannot prove placement (local) raise NotApplicable, recorded as untested scope.
"""

from __future__ import annotations

from pytest_hetero.layers.base import LayerContext


def check(ctx: LayerContext) -> None:
    """Run the backend's scheduling probe; raises LayerFailed with the normalised Pending reasons."""
    ctx.record("scheduling.request", resource=ctx.resource.name, requests=ctx.resource.requests,
               limits=ctx.resource.limits, node_selector=ctx.resource.node_selector,
               tolerations=list(ctx.resource.tolerations), queue=ctx.resource.queue,
               priority_class=ctx.resource.priority_class)
    ctx.backend.schedule(ctx)
