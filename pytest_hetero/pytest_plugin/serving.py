"""Hook implementations of the serving package, and what a running item lends to its checks.

Registered as the ``hetero_serving`` pytest11 entry point. The built-in
``pytest_hetero_make_protocol`` answers ``oip`` and ``openai`` last (trylast), so a plugin adds or
replaces a protocol the same way it adds a backend. While a layer item runs, a
:class:`Runtime` (the protocol factory hook, and a terminal progress writer) is set in a
context variable; checks read it with :func:`current` and fall back to the built-ins without it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Generator
from contextlib import nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_hetero.matrix.model import Serving
from pytest_hetero.serving.protocol import ServingProtocol

PROTOCOLS: dict[str, str] = {
    "oip": "pytest_hetero.serving.oip:OpenInferenceProtocol",
    "openai": "pytest_hetero.serving.openai:OpenAICompatible",
}
"""Built-in protocol clients by name, imported lazily (``module:Class``)."""


@dataclass(frozen=True)
class Runtime:
    """What a running item lends its serving checks: the protocol factory and a progress line sink."""

    make_protocol: Callable[..., ServingProtocol | None]
    progress: Callable[[str], None] | None = None


_RUNTIME: ContextVar[Runtime | None] = ContextVar("pytest_hetero_serving_runtime", default=None)


def current() -> Runtime:
    """The running item's Runtime, or the built-in protocols and no progress outside a pytest item."""
    return _RUNTIME.get() or Runtime(make_protocol=pytest_hetero_make_protocol)


class TerminalProgress:
    """Writes progress lines to the terminal while output capture is suspended (no-op under xdist workers)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def __call__(self, line: str) -> None:
        """Write ``line`` on its own terminal line, prefixed ``[serving]``."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        with capman.global_and_fixture_disabled() if capman is not None else nullcontext():
            reporter.write_line(f"    [serving] {line}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
    """Lend the item's hook caller and terminal to serving checks for the duration of its run."""
    token = _RUNTIME.set(Runtime(make_protocol=item.config.hook.pytest_hetero_make_protocol,
                                 progress=TerminalProgress(item.config)))
    try:
        yield
    finally:
        _RUNTIME.reset(token)


@pytest.hookimpl(trylast=True)
def pytest_hetero_make_protocol(name: str, serving: Serving) -> ServingProtocol | None:
    """Build a built-in protocol client; None for unknown names."""
    spec = PROTOCOLS.get(name)
    if spec is None:
        return None
    module, cls = spec.split(":")
    return getattr(importlib.import_module(module), cls)(serving)  # type: ignore[no-any-return]
