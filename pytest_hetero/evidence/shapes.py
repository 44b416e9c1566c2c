"""Check a parsed JSON value against a typing form (a :class:`~typing.TypedDict`, a union, ``list[...]``, …).

The evidence document's record kinds declare the shape of their ``data`` as TypedDicts
(:mod:`pytest_hetero.evidence.records`); :func:`check_json` is how the verifying loader and the gate's own item
check hold a record's ``data`` to that declaration, so a reader can subscript what the type says is there. The
forms understood are the ones those declarations use, as JSON holds them: a TypedDict (required keys present,
``NotRequired``/``Required`` and ``total=False`` honoured, keys it does not declare left alone: a newer writer
may add fields), ``X | Y``/``Optional``, ``Literal[...]``, ``list[X]``, ``dict[str, X]``, ``str``, ``int`` (not a
bool), ``float`` (an int too, not a bool; finite: the journal would write NaN or ±Infinity as null), ``bool``,
``None``, and ``Any``/``object`` (anything).

A TypedDict's hints are resolved once (:func:`typing.get_type_hints` with ``include_extras``), in its module's
namespace: a module whose TypedDicts are checked imports ``NotRequired`` at run time.
"""

from __future__ import annotations

import functools
import math
import types
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin, get_type_hints, is_typeddict

__all__ = ["ShapeError", "check_json", "fields_of"]

_JSON_NAMES: dict[type, str] = {dict: "an object", list: "a list", str: "a string", int: "a number",
                                float: "a number", bool: "a boolean", type(None): "null"}
MAX_DEPTH = 64
"""Nesting deeper than this is refused (a hostile document cannot recurse the checker into a stack overflow)."""


class ShapeError(ValueError):
    """``value`` at ``path`` (``.results[2].verdict``, relative to the checked value) is not what the type says."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


@functools.cache
def fields_of(typed: type) -> tuple[tuple[str, object, bool], ...]:
    """The fields of the TypedDict ``typed``: ``(key, hint, required)`` each, in declaration order, the
    ``NotRequired``/``Required`` wrapper taken off ``hint`` and decided into ``required``. Raises
    :class:`NameError` when a hint names something its module does not define at run time (a bug, caught by
    the records' tests)."""
    hints = get_type_hints(typed, include_extras=True)
    required_keys: frozenset[str] = getattr(typed, "__required_keys__", frozenset())
    out = []
    for key, hint in hints.items():
        origin = get_origin(hint)
        if origin is NotRequired:
            out.append((key, get_args(hint)[0], False))
        elif origin is Required:
            out.append((key, get_args(hint)[0], True))
        else:
            out.append((key, hint, key in required_keys))
    return tuple(out)


def _named(value: object) -> str:
    return _JSON_NAMES.get(type(value), f"a {type(value).__name__}")


def _expected(hint: object) -> str:
    """How a message names what ``hint`` wants (``a string or null``)."""
    if hint is type(None) or hint is None:
        return "null"
    if isinstance(hint, type):
        if is_typeddict(hint):
            return "an object"
        return _JSON_NAMES.get(hint, hint.__name__)
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(dict.fromkeys(_expected(a) for a in get_args(hint)))
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(hint))
    if origin is list:
        return "a list"
    if origin is dict:
        return "an object"
    return str(hint)


def check_json(value: object, hint: object, path: str = "", depth: int = 0) -> None:
    """Check ``value`` (what :func:`json.loads` gives: dicts, lists, str, int, float, bool, None) against the
    typing form ``hint``. Returns None when it fits; raises :class:`ShapeError` naming the first path that does
    not (``.results[0].verdict: missing``, ``.waited_s: is a string, not a number``). Raises :class:`TypeError`
    for a form it does not understand (a bug in a declaration, not in the value)."""
    if depth > MAX_DEPTH:
        raise ShapeError(path, f"is nested deeper than {MAX_DEPTH} levels")
    if hint is Any or hint is object:
        return
    if hint is None or hint is type(None):
        if value is not None:
            raise ShapeError(path, f"is {_named(value)}, not null")
        return
    if isinstance(hint, type):
        _check_class(value, hint, path, depth)
        return
    _check_generic(value, hint, path, depth)


def _check_generic(value: object, hint: object, path: str, depth: int) -> None:
    """:func:`check_json` for a subscripted form (a union, ``Literal``, ``list[X]``, ``dict[str, X]``)."""
    origin = get_origin(hint)
    args = get_args(hint)
    if origin in (Union, types.UnionType):
        _check_union(value, hint, args, path, depth)
    elif origin is Literal:
        if value not in args or type(value) is bool and not any(a is value for a in args):
            raise ShapeError(path, f"is {value!r}, not {_expected(hint)}")
    elif origin is list:
        if type(value) is not list:
            raise ShapeError(path, f"is {_named(value)}, not a list")
        for n, element in enumerate(value):
            check_json(element, args[0] if args else Any, f"{path}[{n}]", depth + 1)
    elif origin is dict:
        if type(value) is not dict:
            raise ShapeError(path, f"is {_named(value)}, not an object")
        for key, element in value.items():
            check_json(element, args[1] if args else Any, f"{path}.{key}", depth + 1)
    else:
        raise TypeError(f"check_json does not understand the form {hint!r}")


def _check_class(value: object, hint: type, path: str, depth: int) -> None:
    if is_typeddict(hint):
        if type(value) is not dict:
            raise ShapeError(path, f"is {_named(value)}, not an object")
        for key, field_hint, required in fields_of(hint):
            if key in value:
                check_json(value[key], field_hint, f"{path}.{key}", depth + 1)
            elif required:
                raise ShapeError(f"{path}.{key}", "missing")
        return
    if hint is float:
        if type(value) not in (float, int):
            raise ShapeError(path, f"is {_named(value)}, not a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise ShapeError(path, f"is {value!r}, not a finite number (JSON has no NaN or Infinity)")
    elif hint in (dict, list, str, int, bool):
        if type(value) is not hint:
            raise ShapeError(path, f"is {_named(value)}, not {_JSON_NAMES[hint]}")
    else:
        raise TypeError(f"check_json does not understand the class {hint!r}")


def _check_union(value: object, hint: object, args: tuple[object, ...], path: str, depth: int) -> None:
    """``value`` fits one of ``args``; when none fits and exactly one member is of ``value``'s JSON type (an
    object among ``X | None``, a number among ``float | None``), that member's own error is raised, which names the
    deeper path or the finer reason."""
    if isinstance(value, float) and not math.isfinite(value) and type(None) in args:
        return  # the journal writes it as null, which the form allows: what is read back fits
    errors: list[ShapeError] = []
    for arg in args:
        try:
            check_json(value, arg, path, depth)
        except ShapeError as error:
            errors.append(error)
        else:
            return
    mismatch = f"is {_named(value)}, not "
    specific = [e for e in errors if e.path != path or not e.message.startswith(mismatch)]
    if len(specific) == 1:  # the one member of the value's own JSON type, and what is wrong inside it
        raise specific[0]
    raise ShapeError(path, f"is {_named(value)}, not {_expected(hint)}")
