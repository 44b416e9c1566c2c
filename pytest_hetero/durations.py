"""The one duration grammar of pytest-hetero, for every place a length of time is written.

Layer and serving timeouts, ``spec.validation.valid_for``, ``hetero verify --max-age``,
``hetero cleanup --older-than``, ``hetero prune --older-than`` and every other duration read the same
forms through :func:`parse_duration`:

- a number of seconds: ``30``, ``0.5`` (YAML number, or the same digits as a string on a command line);
- one or more amounts with a unit, largest first or not, no spaces: ``250ms``, ``30s``, ``5m``, ``2h``,
  ``2d``, ``1w``, ``1m30s``, ``1d12h``. Units: ``ms`` milliseconds, ``s`` seconds, ``m`` minutes, ``h``
  hours, ``d`` days (86,400 s), ``w`` weeks (7 d). Units are lower case (``M`` would read as months to some).

A duration is greater than zero. :data:`DURATION_PATTERN` is the same grammar as a regular expression for
the JSON Schema (strings only; the schema takes numbers as numbers). Imports nothing of the package.
"""

from __future__ import annotations

import re

UNITS_S: dict[str, float] = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
"""Seconds per unit."""

DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h|d|w))+$"
"""The string form as a regular expression (JSON Schema ``pattern``); a bare number string is also read by
:func:`parse_duration` (command lines), not by the schema (YAML gives numbers as numbers)."""

EXAMPLES = "a number of seconds, or e.g. 250ms, 30s, 5m, 2h, 2d, 1w, 1m30s"
"""The accepted forms in words, for error hints."""

_AMOUNT = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d|w)")
_WHOLE = re.compile(DURATION_PATTERN)
_NUMBER = re.compile(r"^[0-9]+(\.[0-9]+)?$")


def parse_duration(value: float | int | str) -> float:
    """Seconds (float, > 0) from ``value``: an int/float of seconds, a string of digits (seconds), or a string
    of amounts with units (``'250ms'``, ``'1m30s'``, ``'2d'``); surrounding blanks are ignored.

    Raises ValueError (message ``bad duration '<value>': <the accepted forms>``) for anything else: a bool,
    a negative or zero length, an unknown unit (``'5 minutes'``, ``'2D'``), spaces inside, or a number too
    large to be finite.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"bad duration {value!r}: {EXAMPLES}")
    if isinstance(value, str):
        text = value.strip()
        if _NUMBER.match(text):
            seconds = float(text)
        elif _WHOLE.match(text):
            seconds = sum(float(n) * UNITS_S[u] for n, u in _AMOUNT.findall(text))
        else:
            raise ValueError(f"bad duration {value!r}: {EXAMPLES}")
    else:
        seconds = float(value)
    if not 0 < seconds < float("inf"):
        raise ValueError(f"bad duration {value!r}: must be more than zero ({EXAMPLES})")
    return seconds
