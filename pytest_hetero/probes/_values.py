"""Reading single field values as vendor tools print them (shared by every parser).

Tools print "not available" in many spellings (``N/A``, ``[N/A]``, ``NA``, ``-``, ``ERR!``,
``[Unknown Error]``, ``Requested functionality has been deprecated``); some locales print
decimal commas (``67,03 W``). These helpers turn one printed value into a number or ``None``
and tell the caller *why* it is ``None`` so errors are not mistaken for "not supported".
"""

from __future__ import annotations

import re

NOT_AVAILABLE = frozenset(
    {
        "",
        "n/a",
        "[n/a]",
        "na",
        "-",
        "--",
        "none",
        "not supported",
        "[not supported]",
        "not available",
        "unknown",
    }
)
"""Spellings that mean "the tool has no value" (compared lower-case)."""

ERROR_MARKERS = (
    "err!",
    "unknown error",
    "gpu is lost",
    "gpu is inaccessible",
    "insufficient permissions",
    "requested functionality has been deprecated",
)
"""Substrings (lower-case) that mean "the tool tried and failed to read this field"."""

PLAIN_UNITS = frozenset({"", "MiB", "KiB", "GiB", "MB", "W", "C", "%", "MHz", "ms", "us"})
"""Units after which a plain number needs no further checks (no error marker, no separator)."""

_NUMBER = re.compile(r"[-+]?(?:\d+(?:[.,]\d+)*|[.,]\d+)")
_THOUSANDS = re.compile(r"[-+]?\d{1,3}(,\d{3})+")
_UNIT = re.compile(r"([KMGT])i?B", re.IGNORECASE)
_SCALE = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
_ERROR = re.compile("|".join(re.escape(m) for m in ERROR_MARKERS), re.IGNORECASE)
# Every marker holds a space or "!", characters without case variants, so text with neither
# cannot hold one and skips the (case-insensitive, hence slow) search. Checked here, so that a
# future marker without them simply turns the shortcut off.
_GATED = all(" " in m or "!" in m for m in ERROR_MARKERS)


def _unit_scale(unit: str) -> float | None:
    match = _UNIT.search(unit)
    return _SCALE[match.group(1).upper()] if match else None


_PLAIN_SCALE = {unit: _unit_scale(unit) for unit in PLAIN_UNITS}


def _plain(text: str) -> tuple[float, str] | None:
    """Return ``(value, unit)`` for ``"1232"``, ``"67.03 W"``, ``"19968 MiB"`` (ASCII digits, known unit).

    The common case, read without regular expressions; anything else (signs, commas, N/A,
    markers, other units, stray spaces) returns None and takes the general path, which reads
    these texts the same way.
    """
    head, sep, unit = text.partition(" ")
    if sep and unit not in PLAIN_UNITS:
        return None
    whole, dot, frac = head.partition(".")
    if whole.isdecimal() and whole.isascii() and (not dot or (frac.isdecimal() and frac.isascii())):
        return float(head), unit
    return None


def _has_marker(text: str) -> bool:
    if _GATED and " " not in text and "!" not in text:
        return False
    return _ERROR.search(text) is not None


def field_error(text: str | None) -> str | None:
    """Return the raw text when it is an error marker (``ERR!``, ``[Unknown Error]``), else None."""
    if text is None:
        return None
    return text.strip() if _has_marker(text) else None


def is_missing(text: str | None) -> bool:
    """Return True when ``text`` reports no value (N/A-like) or an error marker."""
    if text is None:
        return True
    low = text.strip().lower()
    return low in NOT_AVAILABLE or _has_marker(low)


def number(text: str | None, *, integer: bool = False) -> float | None:
    """Return the first number in ``text`` (units ignored) or None when missing/unreadable.

    ``"67.03 W"`` → 67.03; ``"67,03 W"`` → 67.03 (decimal comma); with ``integer=True``
    ``"1,232"`` is read as a thousands separator → 1232. ``"N/A"``, ``"ERR!"`` → None.
    """
    if text is None:
        return None
    plain = _plain(text)
    if plain is not None:
        return plain[0]
    if is_missing(text):
        return None
    match = _NUMBER.search(text)
    if not match:
        return None
    raw = match.group(0)
    if "," in raw and "." not in raw:
        if integer and _THOUSANDS.fullmatch(raw):
            raw = raw.replace(",", "")
        elif raw.count(",") == 1:
            raw = raw.replace(",", ".")
        else:
            raw = raw.replace(",", "")
    elif "," in raw:
        # "1,234.5" (English thousands) or "1.234,5" (German): the last separator is the decimal one.
        if raw.rfind(",") > raw.rfind("."):
            raw = raw.replace(".", "").replace(",", ".")
        else:
            raw = raw.replace(",", "")
    if raw.count(".") > 1:
        return None
    try:
        return float(raw)
    except ValueError:
        return None


def integer(text: str | None) -> int | None:
    """Return ``number(text, integer=True)`` rounded to int, or None (``"19968 MiB"`` → 19968)."""
    value = number(text, integer=True)
    return None if value is None else round(value)


def text_or_none(text: str | None) -> str | None:
    """Return the stripped text, or None when it is N/A-like or an error marker."""
    return None if is_missing(text) else (text or "").strip()


def yes(text: str | None) -> bool | None:
    """Return True for Yes/Enabled/On, False for No/Disabled/Off, None otherwise."""
    low = (text or "").strip().lower()
    if low in {"yes", "enabled", "on", "true"}:
        return True
    if low in {"no", "disabled", "off", "false"}:
        return False
    return None


def mib(text: str | None) -> int | None:
    """Return a memory size in MiB from ``"81920 MiB"``, ``"80 GiB"``, ``"512 KiB"``, ``"2021MiB"``."""
    if text is None:
        return None
    plain = _plain(text)
    if plain is not None:
        scale = _PLAIN_SCALE[plain[1]]
        return round(plain[0] * scale) if scale is not None else round(plain[0])
    value = number(text, integer=True)
    if value is None:
        return None
    unit = _UNIT.search(text)
    return round(value * _SCALE[unit.group(1).upper()]) if unit else round(value)
