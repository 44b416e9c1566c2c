"""Discovery layer: nodes/devices are visible, healthy, labelled, and expose the claimed resource.

The backend probes and compares (it knows where to look); this module only delegates, so
the rule "each discovery records a timestamped snapshot" lives in one place per backend.
"""

from __future__ import annotations

from pytest_hetero.layers.base import LayerContext


def check(ctx: LayerContext) -> None:
    """Run the backend's discovery for ``ctx.resource``; raises LayerFailed with named differences."""
    ctx.backend.discover(ctx)
