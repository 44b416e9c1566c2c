"""The five layers. Each module exposes ``check(ctx)`` and writes its layer's verdict once for every
engine; :data:`CHECKS` maps layer name → check, with an engine's account of an action it could not
carry out (:class:`~pytest_hetero.backends.protocol.EngineFault`) turned into the layer's outcome
in one place (:func:`outcome_of`). A layer's module is imported when its check is first asked for: a run
of some layers (``-k "startup or model"``) never imports the others (business's rules and truth gate,
scheduling's queue and governance checks)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping

from pytest_hetero.backends.protocol import EngineFault, EngineUnavailable, Unsupported, UsageFacts
from pytest_hetero.layers import usage
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerFailed, LayerOutcome, NotApplicable
from pytest_hetero.vocab import LAYERS


def outcome_of(fault: EngineFault) -> LayerOutcome:
    """The layer outcome of an engine action that did not happen: the claim is false when the
    engine answered and the action failed (LayerFailed), unproven when the engine or a call to it
    broke (LayerBroken), not applicable when the engine has no such verb (NotApplicable). The category
    is the fault's; its owner is the failure table's (:mod:`pytest_hetero.judge.failures`)."""
    if isinstance(fault, Unsupported):
        return NotApplicable(fault.message)
    if isinstance(fault, EngineUnavailable):
        return LayerBroken(fault.message, fault.category)
    return LayerFailed(fault.message, fault.category)


def _judging(check: Callable[[LayerContext], None]) -> Callable[[LayerContext], None]:
    def run(ctx: LayerContext) -> None:
        try:
            check(ctx)
        except EngineFault as fault:
            # the workload the failed action created held (or was denied) resources: the ledger's waste
            # a third party's fault may skip EngineFault.__init__
            held: UsageFacts = getattr(fault, "usage", None) or UsageFacts()
            usage.record_failed(ctx, held, run=ctx.layer == "model")
            raise outcome_of(fault) from None

    run.__doc__ = check.__doc__
    return run


def _model(ctx: LayerContext) -> None:
    """The model run, or the check a task type brings (keyed ``check``: :mod:`.training`)."""
    _check_of("training" if "check" in ctx.planned.keys else "execution")(ctx)


def _check_of(module: str) -> Callable[[LayerContext], None]:
    """``check`` of the layer module ``pytest_hetero.layers.<module>``, imported now if it was not."""
    check: Callable[[LayerContext], None] = importlib.import_module(f"{__name__}.{module}").check
    return check


class _Checks(Mapping[str, Callable[[LayerContext], None]]):
    """:data:`CHECKS`: each layer's judged check, its module imported on first use (see the module docstring)."""

    def __init__(self) -> None:
        self._made: dict[str, Callable[[LayerContext], None]] = {}

    def __getitem__(self, layer: str) -> Callable[[LayerContext], None]:
        made = self._made.get(layer)
        if made is None:
            if layer not in LAYERS:
                raise KeyError(layer)
            # each layer's module is named after it; the model layer's check is chosen per item (:func:`_model`)
            made = self._made[layer] = _judging(_model if layer == "model" else _check_of(layer))
        return made

    def __iter__(self) -> Iterator[str]:
        return iter(LAYERS)

    def __len__(self) -> int:
        return len(LAYERS)


CHECKS: Mapping[str, Callable[[LayerContext], None]] = _Checks()
"""Layer name → its check, an engine's fault turned into the layer's outcome (:func:`outcome_of`)."""
