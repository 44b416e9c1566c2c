"""pytest plugin the backend benchmarks share: wall time of the run-test loop plus backend cleanup."""

from __future__ import annotations

import time
from typing import Any

import pytest

from pytest_hetero.pytest_plugin.stash import BACKENDS


class LoopTimer:
    """pytest plugin: seconds (``seconds``) from the run-test loop's start to the end of every backend's close."""

    def __init__(self) -> None:
        self.seconds = 0.0

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        """Time the loop, then close every backend inside the timed span (the plugin's own close at
        session finish then finds nothing left)."""
        start = time.perf_counter()
        yield
        for backend in session.config.stash.get(BACKENDS, {}).values():
            backend.close()
        self.seconds = time.perf_counter() - start
