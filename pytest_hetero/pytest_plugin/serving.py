"""Terminal progress for long checks (serving load levels): the ``ctx.progress`` a running item lends.

The serving checks reach the protocol hook and this progress sink through the LayerContext
(``ctx.hook``, ``ctx.progress``), never through globals; the built-in protocols are the
last-resort ``pytest_hetero_make_protocol`` in :mod:`pytest_hetero.hooks.builtin`.
"""

from __future__ import annotations

from contextlib import nullcontext

import pytest


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
