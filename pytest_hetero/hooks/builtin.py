"""Built-in implementations of the ``pytest_hetero_*`` hooks, registered as the last resort."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from pytest_hetero.backends.protocol import Backend
from pytest_hetero.settings import Settings

PLUGIN_MODULES: tuple[str, ...] = (
    "pytest_hetero.pytest_plugin.selection",
    "pytest_hetero.bundle.baseline",
    "pytest_hetero.reporting.writers",
    "pytest_hetero.pytest_plugin.pytest_html",
)
"""Modules of built-in hook implementations registered at configure (writers, signing, selection)."""

BACKENDS: dict[str, str] = {
    "local": "pytest_hetero.backends.local:LocalBackend",
    "docker": "pytest_hetero.backends.docker.engine:DockerBackend",
    "kubernetes": "pytest_hetero.backends.kubernetes.engine:KubernetesBackend",
}
"""Built-in backend classes by name, imported lazily (``module:Class``)."""


@pytest.hookimpl(trylast=True)
def pytest_hetero_backend_class(name: str) -> type[Backend] | None:
    """Import a built-in backend class; None for unknown names."""
    spec = BACKENDS.get(name)
    if spec is None:
        return None
    module, cls = spec.split(":")
    return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]


@pytest.hookimpl(trylast=True)
def pytest_hetero_make_backend(name: str, target: dict[str, Any], settings: Settings) -> Backend | None:
    """Build a built-in backend; None for unknown names."""
    cls = pytest_hetero_backend_class(name)
    return cls(target, settings) if cls else None


@pytest.hookimpl(trylast=True)
def pytest_hetero_failure_owner(layer: str, category: str, default: str) -> str | None:
    """The owner the check named, else the matrix's owner of the layer."""
    return default
