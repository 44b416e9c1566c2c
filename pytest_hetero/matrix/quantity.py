"""Kubernetes resource quantities as numbers: ``"500m"`` → 0.5, ``"2Gi"`` → 2147483648, ``"1e3"`` → 1000.

Grammar of ``resource.Quantity`` (k8s.io/apimachinery/pkg/api/resource, quantity.go): a signed
decimal number followed by a binary-SI suffix (``Ki Mi Gi Ti Pi Ei``), a decimal-SI suffix
(``n u m "" k M G T P E``) or a decimal exponent (``e3``, ``E-2``). One parser serves the matrix,
every engine and every layer, without importing the Kubernetes client.
"""

from __future__ import annotations

import re

_BINARY: dict[str, float] = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50,
                             "Ei": 2.0**60}
_DECIMAL: dict[str, float] = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9,
                              "T": 1e12, "P": 1e15, "E": 1e18}
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")


def quantity(value: str | int | float) -> float:
    """``value`` (a quantity string, or a number) as a float in base units (cores, bytes, devices).

    Raises ValueError naming the value when it is not a quantity (e.g. ``"2 GB"``, ``"1.5x"``).
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"{value!r} is not a quantity (e.g. 2, 500m, 512Mi, 1G)")
    number, suffix = float(match.group(1)), match.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    return number * 10.0 ** int(suffix[1:])


def quantity_or_none(value: str | int | float | None) -> float | None:
    """:func:`quantity`, or None for an absent (None) or unparsable value."""
    if value is None:
        return None
    try:
        return quantity(value)
    except ValueError:
        return None
