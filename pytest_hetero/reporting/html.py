"""The self-contained HTML report (``report.html``): Jinja2, server-rendered, no script, no network.

The page carries its stylesheet inline and a Content-Security-Policy that forbids scripts and
any fetch, so it opens offline and prints (print stylesheet in ``report.css``). Every value from
evidence is autoescaped: a log line with HTML or ``<script>`` renders as text.

Scale: the heat map is a resource × image grid with the five layers as sub-cells and the failure
reasons numbered (:func:`~pytest_hetero.reporting.view.heatgrid`, whose size does not grow with model ×
dataset); up to :data:`~pytest_hetero.reporting.view.HEATMAP_ROW_LIMIT` combinations are also listed one
row each. Per-item evidence is collapsed
(``<details>``) and limited to :data:`ITEM_DETAIL_LIMIT` items, failures first, then untested,
then passed; untested scope lists at most :data:`UNTESTED_LIMIT` rows. Everything is complete
in evidence.json, which the manifest covers.
"""

from __future__ import annotations

import json
import json.encoder
import math
import os
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import jinja2
import markupsafe

from pytest_hetero import LAYERS, __version__
from pytest_hetero.evidence.document import item_of
from pytest_hetero.evidence.model import STATUSES
from pytest_hetero.reporting.view import (
    DIMENSIONS,
    entries,
    failures_by_owner,
    heatgrid,
    heatmap,
    layer_counts,
    printable,
    verification,
)
from pytest_hetero.usercache import cache_dir

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import Entry, EvidenceDocument
    from pytest_hetero.evidence.views import SignoffView
    from pytest_hetero.vocab import Status

ITEM_DETAIL_LIMIT = 1500
UNTESTED_LIMIT = 1000
RECORD_CHARS = 4000
TEMPLATES = Path(__file__).parent / "templates"
_PRIORITY: dict[Status, int] = {"failed": 0, "error": 0, "not_run": 1, "blocked": 1, "not_applicable": 2, "skipped": 2,
                                 "excluded": 3, "deselected": 3, "passed": 4}
"""Where each status sorts among the item details (failures first); every status has one."""


@lru_cache(maxsize=1)
def _short(text: Any, n: int = 160) -> str:
    """``text`` as a string of at most ``n`` characters (cut with an ellipsis)."""
    value = str(text or "")
    return value[: n - 1] + "…" if len(value) > n else value


def template_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept between processes under ``$XDG_CACHE_HOME/pytest-hetero/jinja2`` (default
    ``~/.cache``), a folder only this user may use; None (compile each time) when it cannot be made so.
    Compiling report.html.j2 cost ~0.1-0.2 s of every run; Jinja checks each entry against the
    template's source and its own version before using it."""
    folder = cache_dir("jinja2")
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = folder.stat()
    except OSError:
        return None
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:  # loaded as code: nobody else may write it
        return None
    return jinja2.FileSystemBytecodeCache(str(folder))


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, bytecode_cache=template_cache(),
                             finalize=lambda value: value if isinstance(value, markupsafe.Markup)
                             else printable(value) if isinstance(value, str) else value)
    env.filters["short"] = _short
    return env


RECORD_LINE = 100
"""A record's value whose compact JSON is longer than this many characters is shown indented."""
_compact = json.JSONEncoder(sort_keys=True, default=str, allow_nan=False, ensure_ascii=False).encode
_stdlib_indented = json.JSONEncoder(sort_keys=True, default=str, allow_nan=False, ensure_ascii=False, indent=1).encode


class _NotPlain(Exception):
    """A value :func:`_indented` leaves to the standard library's encoder (a tuple, a key that is not a string)."""


def _indented(value: Any) -> str:
    """``json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False, default=str)``, the same
    text. The standard library indents with its pure-Python encoder, whose nested functions refer to each other:
    every call left a cycle of them for the cyclic collector, which the finish pauses, so each item shown in
    detail left ~13 KB until the bundle was finished. JSON data (string keys; dicts, lists and scalars, as the
    evidence is read back) is indented here without them: containers by a plain recursion, every scalar by the C
    encoder (:data:`_compact`); anything else by the standard library's encoder."""
    try:
        return _indent(value, 0)
    except _NotPlain:
        return _stdlib_indented(value)


def _indent(value: Any, level: int) -> str:
    """:func:`_indented` of ``value`` nested ``level`` deep (its lines after the first indented that much)."""
    if type(value) is dict and value:
        inner = "\n" + " " * (level + 1)
        if not all(type(key) is str for key in value):
            raise _NotPlain
        return ("{" + ",".join(f"{inner}{_compact(key)}: {_indent(value[key], level + 1)}" for key in sorted(value))
                + "\n" + " " * level + "}")
    if type(value) is list and value:
        inner = "\n" + " " * (level + 1)
        return "[" + ",".join(inner + _indent(v, level + 1) for v in value) + "\n" + " " * level + "]"
    kind = type(value)
    if kind is str:
        return _string(value)
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    if kind in _CONSTANTS:
        return _CONSTANTS[kind][value]
    if isinstance(value, (dict, list, tuple)) and not (kind in (dict, list) and not value):
        raise _NotPlain
    return _compact(value)  # NaN or ±Infinity (refused), an empty container, another object (its str())


_string: Callable[[str], str] = json.encoder.encode_basestring
"""A string as the encoders write it with ``ensure_ascii=False`` (the C function both use)."""
_CONSTANTS: dict[type, dict[Any, str]] = {bool: {True: "true", False: "false"}, type(None): {None: "null"}}


def _value_text(value: Any) -> str:
    """One value of a record as JSON: compact (the C encoder) when it fits :data:`RECORD_LINE`, else a
    nested mapping or list indented one space per level (:func:`_indented`), continuing the record's own
    indentation."""
    text = _compact(value)
    if len(text) <= RECORD_LINE or not isinstance(value, (dict, list)):
        return text
    return _indented(value).replace("\n", "\n ")


def _record_text(data: Any) -> str:
    """A record's data as the page shows it: a ``{"text"}`` record as its text; a mapping one key per
    line (sorted), each value by :func:`_value_text` (``json.dumps(indent=1)`` of every record took the
    pure-Python encoder for all of them: 40 % of the page at 1,500 items); anything else the same way.
    Characters stay as they are (not ``\\u`` escapes; the page's finalizer removes what cannot be shown).
    Cut at :data:`RECORD_CHARS` characters, saying how many more evidence.json holds."""
    if isinstance(data, dict) and set(data) == {"text"}:
        text = str(data["text"])
    elif isinstance(data, dict) and data:
        text = "{\n" + ",\n".join(f" {_compact(str(k))}: {_value_text(data[k])}"
                                   for k in sorted(data, key=str)) + "\n}"
    else:
        text = _value_text(data)
    if len(text) > RECORD_CHARS:
        text = text[:RECORD_CHARS] + f"\n… [{len(text) - RECORD_CHARS} more characters in evidence.json]"
    return text


def _details(items: Sequence[Entry]) -> tuple[_Details, set[int]]:
    """The items shown in detail (at most :data:`ITEM_DETAIL_LIMIT`: failures first, then untested, then
    passed; in their order on the page) and the set of their indices."""
    statuses = [entry["status"] for entry in items]  # one pass: the items may be read from disk
    order = sorted(range(len(statuses)), key=lambda i: (_PRIORITY[statuses[i]], i))[:ITEM_DETAIL_LIMIT]
    shown = sorted(order)
    return _Details(items, shown), set(shown)


class RecordShown(TypedDict):
    """One record of an item shown in detail: its kind, time and data as the page shows it (:func:`_record_text`)."""

    kind: str
    at: str
    text: str


class DetailShown(TypedDict):
    """An item shown in detail: its position in the item list, the item and its records as shown."""

    index: int
    item: Entry
    records: list[RecordShown]


class _Details:
    """The detailed items, each (``{"index", "item", "records"}``, its records' texts) built as the page is
    rendered, not held: up to :data:`ITEM_DETAIL_LIMIT` items and their record texts were held at once."""

    def __init__(self, items: Sequence[Entry], shown: list[int]) -> None:
        self._items, self._shown = items, shown

    def __len__(self) -> int:
        return len(self._shown)

    def __iter__(self) -> Iterator[DetailShown]:
        for index in self._shown:
            item = self._items[index]
            reported = item_of(item)
            yield {"index": index, "item": item,
                   "records": [{"kind": r["kind"], "at": r["at"], "text": _record_text(r["data"])}
                               for r in (reported["records"] if reported else [])]}


def render_html(evidence: EvidenceDocument, signoff: SignoffView) -> str:
    """Return report.html as text. ``signoff`` has the shape of :func:`pytest_hetero.bundle.signoff.signoff_context`."""
    return "".join(html_chunks(evidence, signoff))


def html_chunks(evidence: EvidenceDocument, signoff: SignoffView) -> Iterator[str]:
    """report.html as consecutive pieces of text (Jinja's ``generate``), so a writer need not hold the
    page: its whole text, the pieces joined, was about three times the page at 1,500 detailed items."""
    items = entries(evidence)
    details, detailed = _details(items)
    untested = evidence["untested"]["items"]
    return _environment().get_template("report.html.j2").generate(
        ev=evidence, run=evidence["run"], dims=DIMENSIONS, verdict=evidence["summary"]["verdict"], layers=LAYERS,
        statuses=[s for s in STATUSES if evidence["summary"]["totals"].get(s)], counts=layer_counts(evidence),
        heat=heatmap(evidence), grid=heatgrid(evidence), plain=str, failures=failures_by_owner(evidence),
        untested=untested[:UNTESTED_LIMIT],
        untested_more=max(0, len(untested) - UNTESTED_LIMIT), details=details, detailed=detailed,
        detail_more=len(items) - len(details), signoff=signoff, version=__version__,
        verification=verification(signoff)[0], verified_by=verification(signoff)[1],
        css="\n".join((TEMPLATES / name).read_text(encoding="utf-8") for name in ("report.css", "heatgrid.css")),
        baseline=_baseline_lines(evidence))


def _baseline_lines(evidence: EvidenceDocument) -> list[str]:
    """The ``baseline_diff`` section (added before evidence.json is written, see
    :mod:`pytest_hetero.bundle.baseline`) as lines; empty without one."""
    diff = evidence.get("baseline_diff")
    if not diff:
        return []
    if "error" in diff:
        return [diff["error"]]
    from pytest_hetero.bundle.baseline import diff_lines

    return diff_lines(diff, limit=50)
