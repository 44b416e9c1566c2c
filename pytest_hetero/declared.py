"""Declared shapes of foreign and untrusted JSON: the one rule every module declaring :mod:`msgspec` Structs follows.

Kubernetes and Docker objects, tool payloads, DSSE envelopes and trust policies are converted once, at the boundary
where they enter, into ``msgspec.Struct`` shapes (``msgspec.convert(raw, Shape)``; a value that does not fit raises
``msgspec.ValidationError``, a ValueError naming the field's ``$.path``). Each such module ends with
``resolve(__name__)``.

Why: msgspec resolves a Struct's postponed annotations (``from __future__ import annotations``) on the shape's first
use, through ``sys.modules[<its module>]``. A nested in-process pytest run (pytester's: how a plugin author tests a
pytest-hetero hook, and how this project's real-node tests run the gate) drops the modules it imported from
``sys.modules`` when it ends while their package keeps the module object, so a shape first used after that raised
``NameError``. Resolving every shape at import keeps its field types on the shape (tests/test_declared_shapes.py
imports a fresh copy of every module of the package and proves each Struct it declares is resolved).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec


def resolve(module: str) -> None:
    """Resolve now the field types of every msgspec Struct the module named ``module`` declares (its classes whose
    ``__module__`` is ``module``, and every shape they hold, nested and TypedDicts included): building a decoder
    resolves and caches them on the type. Call it as the last statement of the module: ``resolve(__name__)``.
    Raises NameError/TypeError at import when an annotation names nothing (a defect of the module)."""
    for value in list(vars(sys.modules[module]).values()):
        if isinstance(value, type) and issubclass(value, msgspec.Struct) and value.__module__ == module:
            msgspec.json.Decoder(value)


_Shape = TypeVar("_Shape", bound=msgspec.Struct)


def as_written(raw: Mapping[Any, object], shape: type[_Shape]) -> _Shape:
    """The mapping ``raw`` (a part of a pasted object, from YAML or JSON: hostile or partial) as ``shape``, a Struct
    that declares the fields its readers use, each typed ``object`` with the default an absent key reads as; values
    are kept as written (null included) for the reader to narrow. Unknown keys are ignored, and so is a key that is
    not text (YAML ``1: x``), as a field no reader names. Never raises for such a ``shape``."""
    try:
        return msgspec.convert(raw, shape)
    except msgspec.ValidationError:  # a key that is not text: msgspec reads an object's keys as field names
        return msgspec.convert({k: v for k, v in raw.items() if isinstance(k, str)}, shape)
