"""release_frames: a failure kept until the session ends no longer holds its layer's context."""

from __future__ import annotations

import gc
import weakref

from pytest_hetero.pytest_plugin.item import release_frames


class _Context:
    """Stands for a layer's context (the evidence, the outputs) a frame holds."""


def _check(ctx: _Context) -> None:
    raise ValueError(f"the check failed on {id(ctx)}")


def _run(ctx: _Context) -> None:
    try:
        _check(ctx)
    except ValueError as exc:
        raise RuntimeError("the layer failed") from exc


def _raised(made: list[weakref.ref[_Context]]) -> BaseException:
    ctx = _Context()
    made.append(weakref.ref(ctx))
    try:
        _run(ctx)
    except RuntimeError as exc:
        return exc
    raise AssertionError("_run did not raise")


def test_the_frames_of_a_kept_failure_hold_its_context_until_released() -> None:
    made: list[weakref.ref[_Context]] = []
    kept = _raised(made)  # kept, as a plugin keeps a failed call's exception
    gc.collect()
    assert made[0]() is not None  # the frames of the failure and of its cause hold the context
    release_frames(kept)
    gc.collect()
    assert made[0]() is None
    assert str(kept) == "the layer failed" and str(kept.__cause__).startswith("the check failed")


def test_a_failure_that_is_its_own_context_is_released_once() -> None:
    made: list[weakref.ref[_Context]] = []
    kept = _raised(made)
    assert kept.__cause__ is not None
    kept.__cause__.__context__ = kept  # a cycle: walked once, no endless loop
    release_frames(kept)
    gc.collect()
    assert made[0]() is None
