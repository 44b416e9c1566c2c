"""The five layers. Each module exposes ``check(ctx)``; :data:`CHECKS` maps layer name → check."""

from __future__ import annotations

from collections.abc import Callable

from pytest_hetero.layers import business, discovery, execution, scheduling, startup
from pytest_hetero.layers.base import LayerContext

CHECKS: dict[str, Callable[[LayerContext], None]] = {
    "discovery": discovery.check,
    "scheduling": scheduling.check,
    "startup": startup.check,
    "model": execution.check,
    "business": business.check,
}
