"""pytest plugin the fixed-cost benchmarks share: wall-clock marks of one pytest process's phases.

Loaded with ``-p phase_clock`` (``bench/`` on ``PYTHONPATH``); it writes one JSON object to the file
named by ``HETERO_PHASES_OUT`` when the process exits: ``{"marks": {name: epoch seconds}, "items":
[[nodeid, start, end], …]}``. Marks: ``loaded`` (this module imported: ``-p`` plugins load right after
pytest's own import, before the installed plugins), ``configure`` (first ``pytest_configure``),
``collection_start`` / ``collection_end``, ``loop_start`` / ``loop_end`` (the run-test loop),
``finish_start`` (first ``pytest_sessionfinish``: the gate's bundle is written inside it),
``summary_start`` (first ``pytest_terminal_summary``), ``finish_end`` (last wrapper of
``pytest_sessionfinish`` done, the terminal summary included), ``unconfigure_start`` /
``unconfigure_end`` and ``exit`` (``atexit``). Costs a few microseconds per mark.
"""

from __future__ import annotations

import atexit
import json
import os
import time
from collections.abc import Generator
from typing import Any

import pytest

MARKS: dict[str, float] = {"loaded": time.time()}
ITEMS: list[tuple[str, float, float]] = []


def _mark(name: str) -> None:
    MARKS.setdefault(name, time.time())


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Mark ``configure``."""
    _mark("configure")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_collection(session: pytest.Session) -> Generator[None, Any, None]:
    """Mark ``collection_start`` and ``collection_end``."""
    _mark("collection_start")
    yield
    _mark("collection_end")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, Any, None]:
    """Mark ``loop_start`` and ``loop_end``."""
    _mark("loop_start")
    yield
    _mark("loop_end")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, None]:
    """Record each item's wall span (setup, call, teardown and its reports)."""
    start = time.time()
    yield
    ITEMS.append((item.nodeid, start, time.time()))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None, Any, None]:
    """Mark ``finish_start`` and ``finish_end`` (outermost wrapper: the terminal summary is inside)."""
    _mark("finish_start")
    yield
    _mark("finish_end")


@pytest.hookimpl(tryfirst=True)
def pytest_terminal_summary() -> None:
    """Mark ``summary_start``."""
    _mark("summary_start")


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Mark ``unconfigure_start``."""
    _mark("unconfigure_start")


def _write() -> None:
    _mark("exit")
    out = os.environ.get("HETERO_PHASES_OUT")
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump({"marks": MARKS, "items": ITEMS}, fh)


class _Last:
    """The trylast half of unconfigure (a module holds one implementation per hook name)."""

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Mark ``unconfigure_end``."""
        _mark("unconfigure_end")


@pytest.hookimpl(tryfirst=True)
def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """Register the trylast unconfigure half."""
    pluginmanager.register(_Last(), "phase_clock_last")


atexit.register(_write)
