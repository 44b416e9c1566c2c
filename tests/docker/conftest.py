"""Docker-backend tests: a real engine with the offline test images, and per-test run ids.

The session fixture :func:`engine` runs ``tests/infra/docker-engine.sh ensure`` + ``images`` (it
starts dockerd and builds the images on a fresh machine, as root). Without an engine and without
root the Docker tests are skipped, except under ``CI=true`` where that is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from dockerkit import IN_CI, docker, engine_answers, infra, leftovers


@pytest.fixture(scope="session")
def engine() -> Iterator[Any]:
    """A ``docker.APIClient`` to a live engine holding ``ONNX_IMAGE`` and ``SHELL_IMAGE``."""
    if not engine_answers() and not (hasattr(os, "geteuid") and os.geteuid() == 0):
        reason = "no Docker engine answers and not root, so tests/infra/docker-engine.sh cannot start one"
        if IN_CI:
            pytest.fail(f"CI=true: {reason}")
        pytest.skip(reason)
    infra.ensure_docker()
    infra.ensure_images()
    api = docker.APIClient(**{**docker.utils.kwargs_from_env(), "timeout": 120})
    yield api
    api.close()


@pytest.fixture
def run_id(engine: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh run id for one test; whatever still carries it afterwards is removed (and the test
    that left it is told: leftovers are a failure of the backend's cleanup, asserted in the tests)."""
    value = "t" + os.urandom(5).hex()
    yield value
    for name in leftovers(engine, value):
        try:
            if name.startswith("sha256:"):
                engine.remove_image(name, force=True)
            elif name.startswith("/"):
                engine.remove_container(name, force=True, v=True)
            else:
                engine.remove_volume(name, force=True)
        except docker.errors.NotFound:
            pass


