"""Every msgspec Struct the package declares is resolved when its module is imported (pytest_hetero.declared):
a nested in-process pytest run drops the modules it imported from ``sys.modules`` while their package keeps them,
and msgspec resolved a shape's postponed annotations through ``sys.modules`` on first use (NameError)."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from pathlib import Path

import msgspec
import pytest

import pytest_hetero


def _modules() -> list[str]:
    """The package's modules that import msgspec (read from their files: some modules of the package are
    scripts a workload runs, which act on import)."""
    out = []
    for info in pkgutil.walk_packages(pytest_hetero.__path__, "pytest_hetero."):
        spec = importlib.util.find_spec(info.name)
        origin = spec.origin if spec else None
        if origin and origin.endswith(".py") and "import msgspec" in Path(origin).read_text(encoding="utf-8"):
            out.append(info.name)
    return sorted(out)


def _declaring() -> list[str]:
    out = []
    for name in _modules():
        module = importlib.import_module(name)
        if any(isinstance(v, type) and issubclass(v, msgspec.Struct) and v.__module__ == name
               for v in vars(module).values()):
            out.append(name)
    return out


DECLARING = _declaring()


def test_the_package_declares_shapes_in_the_modules_the_typing_rounds_converted() -> None:
    """The list below is what the test walks; it is found, not written (a floor keeps the walk honest)."""
    assert "pytest_hetero.backends.kubernetes.objects" in DECLARING
    assert "pytest_hetero.backends.docker.api" in DECLARING
    assert len(DECLARING) >= 30


@pytest.mark.parametrize("name", DECLARING)
def test_a_fresh_copy_of_the_module_has_every_shape_resolved_after_it_left_sys_modules(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Import a fresh copy of ``name`` (its package attribute kept as it was), drop it from ``sys.modules`` as a
    nested pytest run does, then build a decoder of each Struct it declares: an unresolved one raises NameError."""
    parent, _, short = name.rpartition(".")
    monkeypatch.setattr(sys.modules[parent], short, sys.modules[name])
    monkeypatch.delitem(sys.modules, name)
    fresh = importlib.import_module(name)
    monkeypatch.delitem(sys.modules, name)
    shapes = [v for v in vars(fresh).values()
              if isinstance(v, type) and issubclass(v, msgspec.Struct) and v.__module__ == name]
    assert shapes
    for shape in shapes:
        msgspec.json.Decoder(shape)  # raises NameError when the module did not resolve it at import
