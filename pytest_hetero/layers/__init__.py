"""The five layers. Each module exposes ``check(ctx)`` and writes its layer's verdict once for every
engine; :data:`CHECKS` maps layer name → check, with an engine's account of an action it could not
carry out (:class:`~pytest_hetero.backends.protocol.EngineFault`) turned into the layer's outcome
in one place (:func:`outcome_of`)."""

from __future__ import annotations

from collections.abc import Callable

from pytest_hetero.backends.protocol import EngineFault, EngineUnavailable, Unsupported, UsageFacts
from pytest_hetero.layers import business, discovery, execution, scheduling, startup, training, usage
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerFailed, LayerOutcome, NotApplicable


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
    (training.check if "check" in ctx.planned.keys else execution.check)(ctx)


CHECKS: dict[str, Callable[[LayerContext], None]] = {
    "discovery": _judging(discovery.check),
    "scheduling": _judging(scheduling.check),
    "startup": _judging(startup.check),
    "model": _judging(_model),
    "business": _judging(business.check),
}
