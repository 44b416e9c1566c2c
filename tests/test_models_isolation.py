"""A model run that shared an unreset workload with other runs keeps the verdict from ``pass`` (``incomplete``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from pytest_hetero.evidence.untested import MODELS_ISOLATION_PART, summarise
from pytest_hetero.layers.execution import Isolation

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import ItemDict, UntestedSection


def untested(parts: list[str]) -> UntestedSection:
    return {"items": [], "never_covered": {}, "not_proven": [{"nodeid": "m::r::i::a@b::model", "layer": "model", "part": p,
                                         "reason": "why"} for p in parts]}


def test_isolation_between_model_runs_not_proven_makes_the_verdict_incomplete() -> None:
    items = cast("list[ItemDict]", [{"nodeid": "m::r::i::a@b::model", "layer": "model", "status": "passed"}])
    assert summarise(items, untested([]))["verdict"] == "pass"
    assert summarise(items, untested(["queue/quota"]))["verdict"] == "pass"
    assert summarise(items, untested([MODELS_ISOLATION_PART]))["verdict"] == "incomplete"
    failed = [*items, cast("ItemDict", {"nodeid": "m::r::i::a@b::business", "layer": "business", "status": "failed"})]
    assert summarise(failed, untested([MODELS_ISOLATION_PART]))["verdict"] == "fail"


def test_an_engines_isolation_facts_are_read_once_and_garbled_ones_prove_nothing() -> None:
    """``details["isolation"]`` is converted once to its declared keys: absent keys take their defaults (confined,
    not shared), a null ``confined`` is not confined and an empty text is none, as before; a key of another JSON
    type (``"confined": "yes"``, which ``bool()`` used to read as confined) makes the run unconfined, the reason
    naming the field."""
    assert Isolation.of({}) == Isolation(confined=True, reason=None, contention=None, shared_between_runs=False)
    assert Isolation.of({"confined": None, "reason": "", "contention": None}) == Isolation(
        confined=False, reason=None, contention=None, shared_between_runs=False)
    assert Isolation.of({"confined": True, "shared_between_runs": True, "reason": "one pod", "mechanism": "pod"}) \
        == Isolation(confined=True, reason="one pod", contention=None, shared_between_runs=True)
    garbled = Isolation.of({"confined": "yes"})
    assert not garbled.confined and garbled.reason is not None and "`$.confined`" in garbled.reason
