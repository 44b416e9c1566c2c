"""What every rendering shows, computed once from the evidence.json document (never terminal text).

:func:`heatgrid` lays the run out as a resource × image grid whose cells hold the five layers, with
the failure reasons numbered (it scales: the grid does not grow with model × dataset); :func:`heatmap`
lists small runs one row per resource × image × model × dataset; :func:`failures_by_owner` groups
failed/errored items. Who signed comes in as plain data,
the sign-off view built by :mod:`pytest_hetero.bundle.signoff`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, overload

from pytest_hetero import LAYERS
from pytest_hetero.evidence.document import failure_of
from pytest_hetero.evidence.model import STATUSES
from pytest_hetero.evidence.records import RULES, data_of
from pytest_hetero.evidence.spool import ItemSpool
from pytest_hetero.reporting.docview import signoff_state

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import (
        ArtifactDict,
        Entry,
        EvidenceDocument,
        FailureDict,
        ItemDict,
        RecordDict,
        RuleResult,
    )
    from pytest_hetero.evidence.views import SignoffView


class RuleRow(TypedDict):
    """One rule's result of a judged sample, as the JUnit and CTRF renderings show it (see :func:`rule_results`)."""

    name: str | None
    metric: str | None
    threshold: str | None
    observed: float | int | str | None
    unit: str | None
    provenance: str | None
    verdict: str | None
    run: int | None


class HeatCell(TypedDict):
    """A heat-map cell: the item's status, its index in :func:`entries`, node id, root, reason, why."""

    status: str
    index: int
    nodeid: str
    blocked_by: str | None
    reason: str | None
    why: str


class HeatRow(TypedDict):
    """A heat-map row: the matrix, the combination's key values and each layer's cell (None: no item)."""

    matrix: str
    keys: list[str]
    cells: dict[str, HeatCell | None]


class Heatmap(TypedDict):
    """The heat map: its rows, or none when ``summarised`` (more than the limit: ``total_rows``)."""

    summarised: bool
    total_rows: int
    rows: list[HeatRow]


class SubCell(TypedDict):
    """One layer of a grid cell: the worst status, counts by status, passed of total, notes and hover text."""

    layer: str
    letter: str
    status: str
    counts: dict[str, int]
    passed: int
    total: int
    notes: list[int]
    title: str


class GridCell(TypedDict):
    """A resource × image cell (``layers`` None where the resource has no such image)."""

    image: str
    layers: list[SubCell] | None


class GridRow(TypedDict):
    """A resource's row of cells."""

    resource: str
    cells: list[GridCell]


class Grid(TypedDict):
    """One matrix's grid."""

    matrix: str
    images: list[str]
    rows: list[GridRow]


class Reason(TypedDict):
    """A numbered failure reason and how many items it explains."""

    n: int
    text: str
    count: int


class FailedRow(TypedDict):
    """A failed or errored item as the failure lists show it: its index in :func:`entries` (the report's
    detail anchor), node id, layer, status, failure, records and artifacts."""

    index: int
    nodeid: str
    layer: str
    status: str
    failure: FailureDict | None
    records: list[RecordDict]
    artifacts: list[ArtifactDict]


class Heatgrid(TypedDict):
    """The grids, the numbered reasons (``reasons_more``: reasons beyond the limit)."""

    grids: list[Grid]
    reasons: list[Reason]
    reasons_more: int

_INVISIBLE = ("\x7f-\x9f"  # DEL and the C1 controls (CSI \x9b starts a terminal sequence by itself)
              # Unicode format characters (category Cf, Unicode 14): bidi embeddings, overrides and isolates,
              # zero-width space/joiners, word joiner, BOM, invisible operators, tag characters…
              "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
              "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438"
              "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
              "\ufffe\uffff")  # noncharacters
_CONTROL = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f{_INVISIBLE}]")
_TERMINAL = re.compile(f"[\x00-\x08\x0b-\x1f{_INVISIBLE}]")
_BREAKS = re.compile("[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]+")
_SURROGATE = re.compile("[\ud800-\udfff]")
_UNPRINTABLE = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f{_INVISIBLE}\ud800-\udfff]")
_JUNIT_PROPERTY = re.compile("[\\[\\]%|]")
_JUNIT_UNSAFE = re.compile(f"[\\[\\]%|\x00-\x1f\x85\u2028\u2029\ud800-\udfff{_INVISIBLE}]")


def verification(signoff: SignoffView) -> tuple[str, str | None]:
    """(``verified`` | ``unverified`` | ``unsigned``, the trusted keyid it verified with or None) of a
    sign-off view (:func:`pytest_hetero.bundle.signoff.signoff_context`): what every rendering states
    before the verdict."""
    read = signoff_state(signoff)
    return read.state, read.by


def printable(text: str) -> str:
    """``text`` without what XML 1.0 cannot carry, terminals act on or a reader cannot see: C0 and C1
    control characters (NUL, ESC of colour sequences, BEL, backspace, CSI…), DEL, Unicode format
    characters (bidi overrides and isolates, zero-width spaces and joiners, BOM, tag characters) and
    noncharacters; a lone surrogate (which UTF-8 cannot encode) becomes U+FFFD. Tab, newline and
    carriage return stay. Every rendering uses it on text from evidence (a model's stderr, owner and
    rule names from a matrix)."""
    # the common case: str.isprintable (4-5x faster than the scan) is False for every character the
    # expression matches (categories Cc, Cf, Cs, Cn), so only text it refuses (a newline, a tab…) is scanned
    if text.isprintable() or not _UNPRINTABLE.search(text):
        return text
    return _SURROGATE.sub("\ufffd", _CONTROL.sub("", text))


def printable_data(obj: Any) -> Any:
    """``obj`` (JSON-like data) with :func:`printable` applied to every string, keys included."""
    if isinstance(obj, str):
        return printable(obj)
    if isinstance(obj, dict):
        return {printable_data(k): printable_data(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [printable_data(v) for v in obj]
    return obj


def json_text(obj: Any) -> str:
    """``obj`` as compact JSON (UTF-8 characters kept) whose strings carry nothing :func:`printable`
    removes. The document is walked only when its text shows such a character, raw or escaped."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False)
    # the encoder escapes every C0 control, so of what printable removes only an escape (\u00XX, \b, \f)
    # can be in ASCII text, and DEL; str.isascii is a flag lookup, so ASCII text (the common case) is
    # never scanned by the regular expression (one scan of a 3.5 MB ctrf.json cost ~40 ms); other text
    # only when str.isprintable refuses it (see printable); the escapes are looked for only when the text
    # has a backslash at all (one scan, not three)
    suspect = ("\x7f" in text) if text.isascii() else not text.isprintable() and bool(_UNPRINTABLE.search(text))
    if suspect or "\\" in text and ("\\u00" in text or "\\b" in text or "\\f" in text):
        text = json.dumps(printable_data(obj), ensure_ascii=False, allow_nan=False)
    return text


def terminal_text(text: str) -> str:
    """:func:`printable` for a terminal: carriage returns go too (``\r`` would let a line overwrite the
    one before, e.g. a fake ``PASSED``); newlines stay."""
    return _SURROGATE.sub("\ufffd", _TERMINAL.sub("", text.replace("\r\n", "\n")))


def one_line(text: str) -> str:
    """:func:`terminal_text` on one line: every line break (``\n``, ``\r``, VT, FF, NEL, U+2028/9) becomes
    a space, so a value cannot start a line of its own in a summary, a log or a ``[[PROPERTY|…]]`` list."""
    return terminal_text(_BREAKS.sub(" ", text))


def junit_property(name: str, value: str) -> str:
    """One ``[[PROPERTY|name=value]]`` line (the convention JUnit readers take from ``<system-out>``), with
    both parts on one line and ``[``, ``]``, ``|`` and ``%`` percent-encoded, so a value (an owner or
    rule name from a matrix) cannot close the property and open another."""
    def encode(part: str) -> str:
        if not _JUNIT_UNSAFE.search(part):  # the common case: nothing to change
            return part
        return _JUNIT_PROPERTY.sub(lambda m: f"%{ord(m.group()):02X}", one_line(part))

    return f"[[PROPERTY|{encode(name)}={encode(value)}]]"


def junit_properties(pairs: list[tuple[str, str]]) -> str:
    """:func:`junit_property` of each (name, value), one per line. The parts are checked in one scan of
    their concatenation (none unsafe: the common case, written as they are), else one by one."""
    if _JUNIT_UNSAFE.search("".join(part for pair in pairs for part in pair)):
        return "\n".join(junit_property(k, v) for k, v in pairs)
    return "\n".join(f"[[PROPERTY|{k}={v}]]" for k, v in pairs)


HEATMAP_ROW_LIMIT = 400
"""Combinations shown one row each; beyond this only the resource × image grid (:func:`heatgrid`) is shown."""
DIMENSIONS: tuple[str, ...] = ("resource", "image", "model", "dataset")
SEVERITY: tuple[str, ...] = ("failed", "error", "not_run", "blocked", "skipped", "not_applicable", "deselected",
                             "excluded", "passed")
"""Worst first: a summarised cell takes the colour of its worst status."""


def entries(evidence: EvidenceDocument) -> Sequence[Entry]:
    """Every item once (reported items first, then untested-only entries); an entry's position is its
    ``index`` (used as anchor ``item-N``). A list for a loaded document; for an assembled one (its items an
    :class:`~pytest_hetero.evidence.spool.ItemSpool`, one item per nodeid) a sequence that reads the items from
    the spool on each access and holds only the untested-only entries."""
    items = evidence["items"]
    if not isinstance(items, list):
        reported = set(items.nodeids()) if isinstance(items, ItemSpool) else {i["nodeid"] for i in items}
        rest: list[Entry] = []
        for untested in evidence["untested"]["items"]:
            if untested["nodeid"] not in reported:
                reported.add(untested["nodeid"])
                rest.append(untested)
        return _Entries(items, rest)
    out: list[Entry] = []
    seen: set[str] = set()
    both: list[Entry] = [*evidence["items"], *evidence["untested"]["items"]]
    for entry in both:
        if entry["nodeid"] in seen:
            continue
        seen.add(entry["nodeid"])
        out.append(entry)
    return out


class _Entries(Sequence["Entry"]):
    """Items (read on each access) followed by untested-only entries (see :func:`entries`)."""

    def __init__(self, items: Sequence[ItemDict], rest: list[Entry]) -> None:
        self._items, self._rest = items, rest

    def __len__(self) -> int:
        return len(self._items) + len(self._rest)

    @overload
    def __getitem__(self, index: int) -> Entry: ...

    @overload
    def __getitem__(self, index: slice) -> list[Entry]: ...

    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        if isinstance(index, slice):
            return [self[n] for n in range(*index.indices(len(self)))]
        n = range(len(self))[index]
        return self._items[n] if n < len(self._items) else self._rest[n - len(self._items)]

    def __iter__(self) -> Iterator[Entry]:
        yield from self._items
        yield from self._rest


def matrix_of(entry: Entry) -> str:
    """The matrix nodeid prefix of an item or untested entry (an untested-only entry names none: its
    nodeid's first part)."""
    return ("matrix" in entry and entry["matrix"]) or entry["nodeid"].split("::", 1)[0]


def rule_results(entry: Entry) -> list[RuleRow]:
    """A business item's acceptance results for the JUnit and CTRF renderings: per rule of each judged sample
    ``{"name", "metric", "threshold", "observed", "unit", "provenance", "verdict", "run"}`` (``provenance`` is
    computed, measured or self_reported; ``run`` the repeated sample, else None). Empty for other items."""
    out: list[RuleRow] = []
    if "records" not in entry:
        return out
    for record in entry["records"]:
        data = data_of(record, RULES)
        if data is None:
            continue
        for r in data["results"]:
            out.append({"name": r["name"], "metric": r.get("metric") or r["kind"],
                        "threshold": r["expected"], "observed": r["observed"], "unit": r.get("unit"),
                        "provenance": provenance_source(r), "verdict": r["verdict"],
                        "run": data["run"]})
    return out


def provenance_source(result: RuleResult) -> str | None:
    """Where a rule's observed value came from: its ``provenance.source`` (``computed``, ``measured``,
    ``measured_in_workload`` or ``self_reported``); None for a result without one."""
    provenance = result.get("provenance")
    return provenance.get("source") if provenance else None


def _key(entry: Entry) -> tuple[str, ...]:
    keys = entry["keys"]
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


def heatmap(evidence: EvidenceDocument, limit: int = HEATMAP_ROW_LIMIT) -> Heatmap:
    """Rows of the per-combination heat map (every resource × image × model × dataset).

    Returns ``{"summarised": bool, "total_rows": int, "rows": [{"matrix", "keys": [str, …], "cells":
    {layer: cell}}]}``. Cell: ``{"status", "index", "nodeid", "blocked_by", "reason"}`` or None (no item).
    Beyond ``limit`` rows there are no rows (``summarised``): :func:`heatgrid` shows the run instead.
    """
    items = entries(evidence)
    located = [(matrix_of(entry), _key(entry)) for entry in items]
    keysets: dict[str, set[tuple[str, ...]]] = {}
    for matrix, key in located:
        keysets.setdefault(matrix, set()).add(key)
    leaves: dict[str, set[tuple[str, ...]]] = {}
    for matrix, keys in keysets.items():
        prefixes: set[tuple[str, ...]] = set()  # every proper prefix of a key; kept closed under prefixes, so a
        for k in keys:                          # key's walk down stops at the first prefix already there
            for n in range(len(k) - 1, 0, -1):
                if k[:n] in prefixes:
                    break
                prefixes.add(k[:n])
        leaves[matrix] = keys - prefixes
    total = sum(len(keys) for keys in leaves.values())
    if total > limit:  # no rows: only their count is shown
        return {"summarised": True, "total_rows": total, "rows": []}
    rows_keys = [(matrix, k) for matrix in sorted(leaves) for k in sorted(leaves[matrix])]
    return {"summarised": False, "total_rows": total, "rows": _item_rows(items, located, rows_keys)}


def _item_rows(items: Sequence[Entry], located: list[tuple[str, tuple[str, ...]]],
               rows_keys: list[tuple[str, tuple[str, ...]]]) -> list[HeatRow]:
    """One heat-map row per combination; each layer's cell is the item keyed by the longest prefix."""
    by_prefix = {(matrix, entry["layer"], key): index
                 for index, (entry, (matrix, key)) in enumerate(zip(items, located, strict=True))
                 if "check" not in entry["keys"]}
    for index, (entry, (matrix, key)) in enumerate(zip(items, located, strict=True)):
        # a check a training task type brings shares its combination's model cell: shown there when no model run is, or
        # when it did not pass while the model run did (a failure is never hidden, the model run's own never replaced)
        slot = (matrix, entry["layer"], key)
        if "check" in entry["keys"] and (slot not in by_prefix or (
                entry["status"] != "passed" and items[by_prefix[slot]]["status"] == "passed")):
            by_prefix[slot] = index
    rows: list[HeatRow] = []
    for matrix, key in rows_keys:
        cells: dict[str, HeatCell | None] = {}
        for layer in LAYERS:
            found = next((by_prefix[(matrix, layer, key[:n])] for n in range(len(key), 0, -1)
                          if (matrix, layer, key[:n]) in by_prefix), None)
            e = items[found] if found is not None else None
            cells[layer] = None if e is None or found is None else {
                "status": e["status"], "index": found, "nodeid": e["nodeid"], "blocked_by": e["blocked_by"],
                "reason": e["reason"], "why": why(e)}
        rows.append({"matrix": matrix, "keys": list(key), "cells": cells})
    return rows


LETTERS: dict[str, str] = {"discovery": "D", "scheduling": "S", "startup": "U", "model": "M", "business": "B"}
"""A layer's letter in a grid sub-cell."""
GRID_REASONS = 200
"""Distinct failure reasons numbered under the grid; further ones are counted."""
NOTED: frozenset[str] = frozenset({"failed", "error", "blocked", "not_run"})
"""Statuses whose reason the grid shows (hover and numbered notes)."""


def why(entry: Entry) -> str:
    """One line saying why an item did not pass: ``category: message`` of its failure, ``blocked by
    <root>``, or its reason; '' for a pass."""
    failure = entry["failure"] if "failure" in entry else None
    if failure:
        return printable(f"{failure['category']}: {failure['message']}")[:200]
    if entry["blocked_by"]:
        return "blocked by " + str(entry["blocked_by"]).split("::", 1)[-1]
    return printable(str(entry["reason"] or ""))[:200]


def heatgrid(evidence: EvidenceDocument, reason_limit: int = GRID_REASONS) -> Heatgrid:
    """The run as a resource × image grid per matrix, each cell holding the five layers as sub-cells.

    A sub-cell counts the items of its layer for that resource × image (every model@dataset for model and
    business; an item keyed by the resource alone, such as discovery, counts in each of its resource's image
    columns) and takes the colour of the worst status (:data:`SEVERITY`). Failure reasons (failed, error,
    blocked, not_run) are numbered once each; a sub-cell lists its numbers and carries them as hover text.

    Returns ``{"grids": [{"matrix", "images": [name], "rows": [{"resource", "cells": [{"image", "layers":
    [{"layer", "letter", "status", "counts": {status: n}, "passed", "total", "notes": [n], "title"}] or None}]}]}],
    "reasons": [{"n", "text", "count"}], "reasons_more": int}`` (a cell is None where no item exists).
    Linear in the number of items; the grid's size does not grow with model × dataset combinations.
    """
    tally: dict[tuple[str, str, str, str], Counter[str]] = {}
    notes: dict[tuple[str, str, str, str], list[int]] = {}
    images: dict[str, dict[str, set[str]]] = {}
    reasons: dict[str, list[int]] = {}
    for entry in entries(evidence):
        matrix = matrix_of(entry)
        keys = entry["keys"]
        res, img = str(keys.get("resource", "")), str(keys.get("image", "*"))
        # looked up before made: setdefault's default (a dict, a set, a Counter) was built for every item
        resources = images.get(matrix)
        if resources is None:
            resources = images[matrix] = {}
        per = resources.get(res)
        if per is None:
            per = resources[res] = set()
        if img != "*":
            per.add(img)
        cell = (matrix, res, img, entry["layer"])
        counts = tally.get(cell)
        if counts is None:
            counts = tally[cell] = Counter()
        counts[entry["status"]] += 1
        if entry["status"] in NOTED:
            text = why(entry)
            found = reasons.setdefault(text, [len(reasons) + 1, 0])
            found[1] += 1
            mine = notes.setdefault(cell, [])
            if found[0] <= reason_limit and found[0] not in mine and len(mine) < 3:
                mine.append(found[0])
    texts = {n: text for text, (n, _) in reasons.items()}
    grids = [_grid(matrix, per, tally, notes, texts) for matrix, per in sorted(images.items())]
    numbered: list[Reason] = [{"n": n, "text": text, "count": count} for text, (n, count) in reasons.items()
                              if n <= reason_limit]
    return {"grids": grids, "reasons": numbered, "reasons_more": max(0, len(reasons) - reason_limit)}


def _grid(matrix: str, per: dict[str, set[str]], tally: dict[tuple[str, str, str, str], Counter[str]],
          notes: dict[tuple[str, str, str, str], list[int]], texts: dict[int, str]) -> Grid:
    columns = sorted({img for imgs in per.values() for img in imgs}) or ["*"]
    rows: list[GridRow] = []
    for res in sorted(per):
        cells: list[GridCell] = []
        for img in columns:
            if img not in per[res] and per[res]:
                cells.append({"image": img, "layers": None})
                continue
            layers: list[SubCell] = []
            for layer in LAYERS:
                counts: Counter[str] = Counter()
                mine: list[int] = []
                for key in ((matrix, res, img, layer), (matrix, res, "*", layer)):
                    counts.update(tally.get(key, Counter()))
                    mine += [n for n in notes.get(key, []) if n not in mine]
                layers.append(_subcell(layer, counts, mine[:3], texts))
            cells.append({"image": img, "layers": layers})
        rows.append({"resource": res, "cells": cells})
    return {"matrix": matrix, "images": columns, "rows": rows}


def _subcell(layer: str, counts: Counter[str], mine: list[int], texts: dict[int, str]) -> SubCell:
    total = sum(counts.values())
    status = next((s for s in SEVERITY if counts[s]), "none")
    title = f"{layer}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) if total else f"{layer}: —"
    title += "".join(f"\n[{n}] {texts[n]}" for n in mine)
    return {"layer": layer, "letter": LETTERS[layer], "status": status, "counts": dict(counts),
            "passed": counts["passed"],
            "total": total, "notes": mine, "title": title}


def failures_by_owner(evidence: EvidenceDocument) -> list[tuple[str, list[FailedRow]]]:
    """[(owner team, [failed/errored items, each with ``index`` as in :func:`entries`])], teams with most
    failures first."""
    groups: dict[str, list[FailedRow]] = {}
    for index, item in enumerate(evidence["items"]):
        if item["status"] in ("failed", "error"):
            failure = failure_of(item)
            owner = (failure["owner"] if failure else "") or item["owner"] or "unowned"
            groups.setdefault(owner, []).append({
                "index": index, "nodeid": item["nodeid"], "layer": item["layer"], "status": item["status"],
                "failure": failure, "records": item["records"], "artifacts": item["artifacts"]})
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def layer_counts(evidence: EvidenceDocument) -> list[tuple[str, dict[str, int]]]:
    """[(layer, {status: n for every status in STATUSES})] in layer order."""
    by_layer = evidence["summary"]["by_layer"]
    return [(layer, {s: int(by_layer[layer].get(s, 0)) for s in STATUSES}) for layer in LAYERS]


def owner_shown(entry: Entry) -> str:
    """The owner every rendering shows for an item or untested entry: its failure's owner (the failure
    table's, :mod:`pytest_hetero.judge.failures`) when it failed, else the owner of its layer's conclusion,
    so evidence, terminal, pytest-html, JUnit and CTRF name the same team for the same failure."""
    if "owner" not in entry:  # an untested-only entry: no item, no owner
        return ""
    failure = failure_of(entry)
    return (failure["owner"] if failure else "") or entry["owner"]
