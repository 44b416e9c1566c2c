"""A model run that shared an unreset workload with other runs keeps the verdict from ``pass`` (``incomplete``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from pytest_hetero.evidence.untested import MODELS_ISOLATION_PART, summarise

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
