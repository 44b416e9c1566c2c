"""A governance probe's attempt facts as the layers read them (:mod:`pytest_hetero.layers.governance`,
:mod:`pytest_hetero.layers.boundaries`): the engine's :class:`~pytest_hetero.backends.protocol.AttemptFacts`, where
each role writes its own keys, converted once into :class:`AttemptRead` (msgspec), every key the layers read
declared with its JSON type and its default (None: the role did not write it), the rest left alone.

A third party's engine may write the facts of its own attempts: one of another JSON type is refused here, once,
as an error of the probe naming the field, not later as a ``TypeError`` inside a sentence.
"""

from __future__ import annotations

import msgspec

from pytest_hetero.backends.protocol import AttemptDict, PolicyFacts, VictimFacts
from pytest_hetero.declared import resolve
from pytest_hetero.layers.base import LayerBroken

__all__ = ["AttemptRead", "facts_of"]


class AttemptRead(msgspec.Struct, frozen=True, kw_only=True):
    """The facts of one attempt the layers read (:class:`~pytest_hetero.backends.protocol.AttemptFacts` says
    which role writes which): a submission's ``node`` and ``requests``; a read's ``returned``; maintenance's
    ``target_node`` and its ``maintenance`` reasons; the device-isolation pod's ``device_nodes``, ``visible_env``
    and ``log_complete``; preemption's ``victim``; a network attempt's ``address``, ``target`` and ``policies``; a
    data attempt's ``claim``, ``volume`` and ``pull_secret``; a name the probe gave that the target lacks:
    which list it is ``absent`` from and the names ``present``. Each None when not written (or written as null)."""

    node: str | None = None
    requests: dict[str, str] | None = None
    returned: list[str] | None = None
    target_node: str | None = None
    maintenance: list[str] | None = None
    device_nodes: list[str] | None = None
    visible_env: dict[str, str] | None = None
    log_complete: bool | None = None
    victim: VictimFacts | None = None
    address: str | None = None
    target: str | None = None
    policies: PolicyFacts | None = None
    claim: str | None = None
    volume: str | None = None
    pull_secret: str | None = None
    absent: str | None = None
    present: list[str] | None = None


def facts_of(attempt: AttemptDict) -> AttemptRead:
    """``attempt``'s facts as :class:`AttemptRead`. Raises :class:`~pytest_hetero.layers.base.LayerBroken`
    ``probe_not_run`` naming the attempt and the field when a fact is not of its declared JSON type (the probe
    proved nothing: its engine's report cannot be read)."""
    try:
        return msgspec.convert(attempt["facts"], AttemptRead)
    except msgspec.ValidationError as error:
        raise LayerBroken(f"the engine's facts of the attempt {attempt['action']!r} ({attempt['role']}) are not of "
                          f"their shape: {error}", "probe_not_run") from None


resolve(__name__)
