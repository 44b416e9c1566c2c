"""pytest plugin for ``bench_local_scale.py --item-phases``: where a local model item's wall time goes.

Loaded with ``-p item_clock`` (``bench/`` on ``PYTHONPATH``). At configure it wraps named functions
of the local backend, the sandbox, the layers, the item and the recorder in wall-clock timers, and at
unconfigure prints one line per function to stderr: ``ITEM <function> calls=N per-item X ms`` (total
over the run / model items run). Nested functions overlap (``run_measured`` holds ``_drain``);
``run_folder`` and ``sampling`` are context managers, timed on entry and on exit separately. A
profiling aid: the timers add about a microsecond per call; it never changes what the gate does.
"""

from __future__ import annotations

import contextlib
import functools
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

TOTAL: dict[str, float] = defaultdict(float)
COUNT: dict[str, int] = defaultdict(int)


def _add(label: str, since: float) -> None:
    TOTAL[label] += time.perf_counter() - since
    COUNT[label] += 1


def timed(owner: Any, name: str, label: str | None = None) -> None:
    """Replace ``owner.name`` by a wrapper that adds each call's wall time to ``label``."""
    fn: Callable[..., Any] = getattr(owner, name)
    label = label or name

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _add(label, start)

    setattr(owner, name, wrapper)


def timed_context(owner: Any, name: str) -> None:
    """Replace the context-manager factory ``owner.name``; its entry and exit are timed apart."""
    fn: Callable[..., Any] = getattr(owner, name)

    @contextlib.contextmanager
    def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
        start = time.perf_counter()
        manager = fn(*args, **kwargs)
        value = manager.__enter__()
        _add(f"{name} (enter)", start)
        try:
            yield value
        finally:
            start = time.perf_counter()
            manager.__exit__(*sys.exc_info())
            _add(f"{name} (exit)", start)

    setattr(owner, name, wrapper)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Wrap the functions a local model item goes through."""
    from pytest_hetero.backends import local, sandbox
    from pytest_hetero.evidence import recorder
    from pytest_hetero.layers import base, execution, startup
    from pytest_hetero.pytest_plugin import item

    for owner, name in [(item.LayerItem, "runtest"), (item.LayerItem, "finish"), (execution, "_run_once"),
                        (startup, "verify_inputs"), (execution, "keep_outputs"), (base.LayerContext, "artifact"),
                        (local.LocalBackend, "execute"), (local, "run_confined"), (local, "run_measured"),
                        (local, "_drain"), (local, "read_outputs"), (local, "check_program"),
                        (sandbox.Sandbox, "prepare"), (recorder.Recorder, "item"), (recorder.Recorder, "sync")]:
        timed(owner, name, f"{getattr(owner, '__name__', owner)}.{name}")
    timed(subprocess, "Popen", "subprocess.Popen (the launcher's start)")
    timed_context(local, "run_folder")
    timed_context(local, "sampling")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, None]:
    """Time each item's whole protocol (setup, call, teardown, reports)."""
    start = time.perf_counter()
    yield
    _add("item protocol (whole)", start)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Print the per-item table, longest first."""
    items = COUNT["item protocol (whole)"] or 1
    for label in sorted(TOTAL, key=lambda k: -TOTAL[k]):
        print(f"ITEM {label:<48} calls={COUNT[label]:>7} per-item {1000 * TOTAL[label] / items:8.3f} ms",
              file=sys.stderr)
