"""What every rendering shows, computed once from the evidence.json document (never terminal text).

:func:`heatmap` lays the matrix out as rows (resource × image × model × dataset) by the five
layers; :func:`failures_by_owner` groups failed/errored items. Who signed comes in as plain data,
the sign-off view built by :mod:`pytest_hetero.bundle.signoff`.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from pytest_hetero import LAYERS
from pytest_hetero.evidence.model import STATUSES

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def printable(text: str) -> str:
    """``text`` without the control characters XML 1.0 cannot carry and terminals act on (NUL, ESC
    sequences' ESC, backspace…); tab, newline and carriage return stay. Every rendering uses it on
    text from evidence (a model's stderr may hold colour codes)."""
    return _CONTROL.sub("", text)


HEATMAP_ROW_LIMIT = 400
"""Rows shown one by one; beyond this the heat map is summarised per resource × image."""
DIMENSIONS: tuple[str, ...] = ("resource", "image", "model", "dataset")
SEVERITY: tuple[str, ...] = ("failed", "error", "not_run", "blocked", "skipped", "not_applicable", "deselected",
                             "excluded", "passed")
"""Worst first: a summarised cell takes the colour of its worst status."""


def entries(evidence: dict[str, Any]) -> list[dict[str, Any]]:
    """Every item once (reported items first, then untested-only entries), each with ``owner``
    (may be empty for never-run items) and ``index`` (its position, used as anchor ``item-N``)."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for entry in [*evidence["items"], *evidence["untested"]["items"]]:
        if entry["nodeid"] in seen:
            continue
        seen.add(entry["nodeid"])
        out.append(entry)
    return out


def _key(entry: dict[str, Any]) -> tuple[str, ...]:
    keys = entry.get("keys", {})
    if len(keys) == 4:  # the common case: a model or business item
        try:
            return (str(keys["resource"]), str(keys["image"]), str(keys["model"]), str(keys["dataset"]))
        except KeyError:
            pass
    out = []
    for dim in DIMENSIONS:
        if dim not in keys:
            break
        out.append(str(keys[dim]))
    return tuple(out)


def heatmap(evidence: dict[str, Any], limit: int = HEATMAP_ROW_LIMIT) -> dict[str, Any]:
    """Rows of the matrix heat map.

    Returns ``{"summarised": bool, "total_rows": int, "rows": [{"matrix", "keys": [str, …],
    "cells": {layer: cell}}]}``. Unsummarised cell: ``{"status", "index", "nodeid", "blocked_by",
    "reason"}`` or None (no item). Beyond ``limit`` rows, rows are resource × image and each cell
    is ``{"status": worst, "counts": {status: n}}``.
    """
    items = entries(evidence)
    located = [(entry.get("matrix") or entry["nodeid"].split("::", 1)[0], _key(entry)) for entry in items]
    keysets: dict[str, set[tuple[str, ...]]] = {}
    for matrix, key in located:
        keysets.setdefault(matrix, set()).add(key)
    rows_keys: list[tuple[str, tuple[str, ...]]] = []
    for matrix in sorted(keysets):
        keys = keysets[matrix]
        prefixes = {k[:n] for k in keys for n in range(1, len(k))}
        rows_keys.extend((matrix, k) for k in sorted(keys - prefixes))
    summarised = len(rows_keys) > limit
    rows = _summary_rows(items, located, rows_keys) if summarised else _item_rows(items, located, rows_keys)
    return {"summarised": summarised, "total_rows": len(rows_keys), "rows": rows}


def _item_rows(items: list[dict[str, Any]], located: list[tuple[str, tuple[str, ...]]],
               rows_keys: list[tuple[str, tuple[str, ...]]]) -> list[dict[str, Any]]:
    """One heat-map row per combination; each layer's cell is the item keyed by the longest prefix."""
    by_prefix = {(matrix, entry["layer"], key): index
                 for index, (entry, (matrix, key)) in enumerate(zip(items, located, strict=True))}
    rows = []
    for matrix, key in rows_keys:
        cells: dict[str, Any] = {}
        for layer in LAYERS:
            found = next((by_prefix[(matrix, layer, key[:n])] for n in range(len(key), 0, -1)
                          if (matrix, layer, key[:n]) in by_prefix), None)
            e = items[found] if found is not None else None
            cells[layer] = None if e is None else {"status": e["status"], "index": found, "nodeid": e["nodeid"],
                                                    "blocked_by": e.get("blocked_by"), "reason": e.get("reason")}
        rows.append({"matrix": matrix, "keys": list(key), "cells": cells})
    return rows


def _summary_rows(items: list[dict[str, Any]], located: list[tuple[str, tuple[str, ...]]],
                  rows_keys: list[tuple[str, tuple[str, ...]]]) -> list[dict[str, Any]]:
    """One heat-map row per resource × image; each cell counts its items by status (worst shown)."""
    groups = sorted({(matrix, k[:2]) for matrix, k in rows_keys})
    by_resource: dict[tuple[str, str], list[tuple[str, tuple[str, ...]]]] = {}
    for group in groups:
        by_resource.setdefault((group[0], group[1][0]), []).append(group)
    tally: Counter[tuple[str, tuple[str, ...], str, str]] = Counter()
    for entry, (matrix, key) in zip(items, located, strict=True):
        if len(key) >= 2:
            tally[(matrix, key[:2], entry["layer"], entry["status"])] += 1
        elif key:
            for _, group_key in by_resource.get((matrix, key[0]), []):
                tally[(matrix, group_key, entry["layer"], entry["status"])] += 1
    per_group: dict[tuple[str, tuple[str, ...]], dict[str, dict[str, int]]] = {g: {} for g in groups}
    for (matrix, key, layer_name, status), n in tally.items():
        per_group[(matrix, key)].setdefault(layer_name, {})[status] = n
    rows = []
    for (matrix, key), per_layer in per_group.items():
        cells: dict[str, Any] = {}
        for layer in LAYERS:
            counts = per_layer.get(layer)
            cells[layer] = None if not counts else {
                "status": next((s for s in SEVERITY if counts.get(s)), "passed"), "counts": counts}
        rows.append({"matrix": matrix, "keys": list(key), "cells": cells})
    return rows


def failures_by_owner(evidence: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """[(owner team, [failed/errored item dicts, each with ``index`` as in :func:`entries`])],
    teams with most failures first."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for index, item in enumerate(evidence["items"]):
        if item["status"] in ("failed", "error"):
            owner = (item.get("failure") or {}).get("owner") or item.get("owner") or "unowned"
            groups.setdefault(owner, []).append({**item, "index": index})
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def layer_counts(evidence: dict[str, Any]) -> list[tuple[str, dict[str, int]]]:
    """[(layer, {status: n for every status in STATUSES})] in layer order."""
    by_layer = evidence["summary"]["by_layer"]
    return [(layer, {s: int(by_layer.get(layer, {}).get(s, 0)) for s in STATUSES}) for layer in LAYERS]
