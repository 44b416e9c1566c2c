"""Read a dataset's ground truth and join it with a model's predictions.

The truth file is the one the matrix declares (``spec.datasets[].truth``; see docs/acceptance.md): the dataset
file itself, or a separate ``labels`` file with its own sha256. Its bytes are read once, their sha256 compared
with the declared digest, and only those bytes parsed, so a file changed after it was digested is refused
(:class:`TruthError`, ``truth_changed``) and never half-read.

Formats: ``csv`` (RFC 4180 with a header row; :mod:`csv`), ``jsonl`` (one JSON object per line; blank lines
skipped) and ``parquet`` (via ``pyarrow``, the ``parquet`` extra). Ids are compared as text (``7`` and ``"7"`` are
one id); classification labels as text too, with integral numbers written without a fraction (``3``, ``3.0`` and
``"3"`` are one class); regression targets as finite floats.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any, overload

from pytest_hetero.matrix.model import Truth

FORMATS: tuple[str, ...] = ("csv", "jsonl", "parquet")
"""Truth file formats the gate reads."""
SUFFIXES: dict[str, str] = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet",
                            ".pq": "parquet"}
"""File name suffix → format, when the matrix does not name one."""
MAX_TRUTH_BYTES = 2 * 1024 ** 3
"""Largest truth file read (2 GiB): a bigger one is refused, not read into memory."""


class TruthError(Exception):
    """The truth cannot be read: ``category`` is ``truth_changed`` (the file's sha256 is not the declared one),
    ``truth_unavailable`` (absent, unreadable, too large, a format the gate cannot read here) or
    ``truth_invalid`` (the target or id column is absent, a value is empty or not usable, an id repeats)."""

    def __init__(self, message: str, category: str) -> None:
        super().__init__(message)
        self.message = message
        self.category = category


@dataclass(frozen=True)
class TruthTable:
    """The truth as the gate read it: ``ids`` (text; None when joined by order), ``targets`` (class labels as
    text, or floats for regression), the ``path`` and ``sha256`` of the bytes read, their ``format``."""

    ids: Sequence[str] | None
    targets: Sequence[Any]
    path: Path
    sha256: str
    format: str
    slices: dict[str, list[str]] = field(default_factory=dict)
    """Slice column → its value per row (:func:`slice_text`), for ``truth.slices``."""
    numbers: Any = None
    """``ids`` as an int64 numpy array when each is the decimal text of a non-negative integer as ``str`` writes it
    (:func:`_integer_ids`; then two ids are equal exactly when their numbers are), else None."""

    @property
    def rows(self) -> int:
        """Number of truth rows."""
        return len(self.targets)


def file_format(path: Path, declared: str | None) -> str:
    """``declared`` when given, else the format of ``path``'s suffix. Raises TruthError when neither says."""
    if declared:
        return declared
    found = SUFFIXES.get(path.suffix.lower())
    if found is None:
        raise TruthError(f"cannot tell the format of {path} from its suffix: name it (truth.format: csv, jsonl "
                         "or parquet)", "truth_unavailable")
    return found


def read_truth(truth: Truth) -> TruthTable:
    """Read ``truth`` (a matrix dataset's declaration): the file's bytes, checked against ``truth.sha256``,
    parsed per format into ids and targets. Raises :class:`TruthError` as its docstring says."""
    try:
        size = truth.path.stat().st_size
        if size > MAX_TRUTH_BYTES:
            raise TruthError(f"truth file {truth.path} is {size} bytes, over the {MAX_TRUTH_BYTES} the gate reads",
                             "truth_unavailable")
        data = truth.path.read_bytes()
    except OSError as exc:
        raise TruthError(f"truth file {truth.path} unreadable: {exc.strerror or exc}", "truth_unavailable") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != truth.sha256:
        raise TruthError(f"truth file {truth.path} has sha256 {digest}, the matrix declares {truth.sha256}: it "
                         "changed after it was digested; refusing to judge against it", "truth_changed")
    fmt = file_format(truth.path, truth.format)
    columns = [truth.target] + ([truth.id] if truth.id else [])
    columns += [c for c in truth.slices if c not in columns]
    fast = _csv_integer_ids(data, columns, truth.id, truth.path, truth.target) if fmt == "csv" and truth.id else None
    if fast is not None:
        rows, found = fast
    else:
        rows = {"csv": _csv, "jsonl": _jsonl, "parquet": _parquet}[fmt](data, columns, truth.path)
    del data
    targets = _targets(rows[truth.target], truth.task, truth.target, truth.path)
    slices = {c: list(map(slice_text, rows[c])) for c in truth.slices}
    ids: Sequence[str] | None = None
    numbers = None
    if truth.id:
        if fast is not None:
            ids, numbers = IntegerIds(found), found
        else:
            texts = id_texts(rows[truth.id])
            if texts is None:  # a value that is not an id: the slow path names its row
                texts = [_id(v, truth.id, i, truth.path) for i, v in enumerate(rows[truth.id])]
            ids, numbers = texts, _integer_ids(texts)
        repeated = [] if _distinct(ids, numbers) else [k for k, n in Counter(ids).items() if n > 1]
        if repeated:
            raise TruthError(f"truth file {truth.path}: id column '{truth.id}' repeats {len(repeated)} id(s) (e.g. "
                             f"{', '.join(map(repr, repeated[:3]))}): which row is the truth would be a guess",
                             "truth_invalid")
    return TruthTable(ids=ids, targets=targets, path=truth.path, sha256=digest, format=fmt,
                      numbers=numbers if truth.id else None, slices=slices)


def slice_text(value: Any) -> str:
    """A slice column's value as a rule names it: a string stripped, an integer or integral float as digits, null
    as ``""``, anything else as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    found = label_text(value)
    return found if found is not None else json.dumps(value, separators=(",", ":"), sort_keys=True)


class IntegerIds(Sequence[str]):
    """Ids held as an int64 array, each read as ``str(n)`` when asked for (a million ids are not a million strings)."""

    def __init__(self, numbers: Any) -> None:
        self.numbers = numbers

    def __len__(self) -> int:
        return len(self.numbers)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return list(map(str, self.numbers[i].tolist()))
        return str(int(self.numbers[i]))

    def __iter__(self) -> Iterator[str]:
        return map(str, self.numbers.tolist())


class Labels(Sequence[str]):
    """Class labels held as integer ``codes`` (a numpy int array, one per row) into ``texts`` (the label text of each
    code): a million labels are a few MiB, not a million list slots. Reads as the sequence of texts; equal to any
    sequence of the same texts (a list of labels compares equal to its Labels)."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, codes: Any, texts: list[str]) -> None:
        self.codes = codes
        self.texts = texts

    def __len__(self) -> int:
        return len(self.codes)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> Labels: ...

    def __getitem__(self, i: int | slice) -> str | Labels:
        if isinstance(i, slice):
            return Labels(self.codes[i], self.texts)
        return self.texts[int(self.codes[i])]

    def __iter__(self) -> Iterator[str]:
        return map(self.texts.__getitem__, self.codes.tolist())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str) or len(other) != len(self):
            return False
        return all(a == b for a, b in zip(self, other, strict=True))

    def __repr__(self) -> str:
        return f"Labels({list(self)[:10]!r}{' …' if len(self) > 10 else ''})"

    def take(self, rows: Any) -> Labels:
        """The labels at ``rows`` (an int array), still as codes."""
        return Labels(self.codes[rows], self.texts)


def code_dtype(count: int) -> Any:
    """The smallest numpy integer type holding the codes 0 … ``count`` - 1 (uint8 for up to 256 classes)."""
    import numpy as np

    return np.uint8 if count <= 2**8 else np.uint16 if count <= 2**16 else np.int32


def integer_labels(values: list[Any]) -> Labels | None:
    """``values`` as :class:`Labels` when every one is a Python int (not a bool) of at most 9 digits and they span
    at most 2**20 numbers (class labels, not ids): read in blocks of 65,536, so no int64 array of all of them is
    made. The texts are ``str(n)`` (:func:`label_text` of an int). None for anything else."""
    import numpy as np

    if not values or set(map(type, values)) != {int}:
        return None
    raw = np.empty(len(values), dtype=np.int32)
    block = 1 << 16
    for start in range(0, len(values), block):
        part = np.fromiter(values[start:start + block], dtype=np.int64, count=min(block, len(values) - start))
        if int(part.min()) < -10**9 or int(part.max()) > 10**9:
            return None
        raw[start:start + len(part)] = part
    low, high = int(raw.min()), int(raw.max())
    if high - low >= 2**20:
        return None
    raw -= low
    present = np.flatnonzero(counts(raw, high - low + 1))
    lut = np.zeros(high - low + 1, dtype=code_dtype(len(present)))
    lut[present] = np.arange(len(present))
    return Labels(lut[raw], [str(low + int(v)) for v in present.tolist()])


CSV_BLOCK = 1 << 20
"""Bytes of a plain CSV parsed at a time by :func:`_csv_integer_ids` (whole lines): its numpy temporaries stay a
few MiB whatever the file's size."""


def counts(codes: Any, size: int) -> Any:
    """``numpy.bincount(codes, minlength=size)`` counted in blocks of 65,536 (bincount's own int64 copy of its input
    stays small)."""
    import numpy as np

    out = np.zeros(size, dtype=np.int64)
    for start in range(0, len(codes), 1 << 16):
        out += np.bincount(codes[start:start + (1 << 16)], minlength=size)
    return out


def _csv_integer_ids(data: bytes, columns: list[str], id_column: str, path: Path, coded: str | None = None) \
        -> tuple[dict[str, Any], Any] | None:
    """:func:`_csv` and the integer ids of :func:`read_truth` for a plain CSV read with numpy, without a Python
    string per row: ASCII, no quote, NUL or CR, no blank line, every line as many fields as the header, every id the
    decimal text of a non-negative integer as ``str`` writes it (ASCII digits, no leading zero, at most 18). Returns
    the other columns (field texts as :mod:`csv` reads them: each distinct text one string; column ``coded`` as
    :class:`Labels`, integer codes into its distinct texts) and the ids as an int32 array (int64 when one needs
    it); None for any other file (the caller's paths read it, with the same results). Read in blocks of whole lines
    (:data:`CSV_BLOCK` bytes)."""
    import numpy as np

    if not data.isascii() or b'"' in data or b"\x00" in data or b"\r" in data:
        return None
    end = data.find(b"\n")
    if end < 0 or end + 1 >= len(data):
        return None
    header = data[:end].decode("ascii").split(",")
    where = _columns(header, columns, path)
    width = len(header)
    if coded == id_column:
        coded = None
    total = data.count(b"\n", end + 1) + (0 if data.endswith(b"\n") else 1)
    numbers = np.empty(total, dtype=np.int32)  # int64 once an id needs it
    codes = np.empty(total if coded is not None else 0, dtype=code_dtype(1))
    known: dict[str, int] = {}
    out: dict[str, Any] = {c: [] for c in columns if c not in (id_column, coded)}
    start, done = end + 1, 0
    while start < len(data):
        stop = data.find(b"\n", min(start + CSV_BLOCK, len(data)) - 1)
        stop = len(data) if stop < 0 else stop + 1
        block = _csv_block(np.frombuffer(data, dtype=np.uint8, offset=start, count=stop - start), width,
                           {c: where[c] for c in columns}, id_column, coded)
        start = stop
        if block is None or done + len(block[0]) > total:
            return None
        found, distinct_index, texts = block
        rows = slice(done, done + len(found))
        if numbers.dtype != np.int64 and int(found.max()) >= 2**31:
            numbers = numbers.astype(np.int64)
        numbers[rows] = found
        if distinct_index is not None:
            distinct, index = distinct_index
            remap = np.fromiter((known.setdefault(t, len(known)) for t in distinct), dtype=np.int32,
                                count=len(distinct))
            if code_dtype(len(known)) != codes.dtype:
                codes = codes.astype(code_dtype(len(known)))
            codes[rows] = remap[index]
        for c, more in texts.items():
            out[c] += more
        done += len(found)
    if done != total:
        return None
    if coded is not None:
        out[coded] = Labels(codes, list(known))
    return out, numbers


def _csv_block(body: Any, width: int, where: dict[str, int], id_column: str, coded: str | None) \
        -> tuple[Any, tuple[list[str], Any] | None, dict[str, list[str]]] | None:
    """One block of whole lines of a plain CSV (:func:`_csv_integer_ids`): its ids (int64), column ``coded``'s
    distinct texts and index per row, the other columns' texts; None when the block is not plain."""
    import numpy as np

    newline = np.flatnonzero(body == 10).astype(np.int32)
    if not len(newline) or newline[-1] != len(body) - 1:
        newline = np.append(newline, len(body)).astype(np.int32)
    starts = np.empty_like(newline)
    starts[0], starts[1:] = 0, newline[:-1] + 1
    if bool(np.any(newline == starts)):  # a blank line
        return None
    comma = np.flatnonzero(body == 44).astype(np.int32)
    if len(comma) != len(newline) * (width - 1) or (width > 1 and bool(np.any(
            np.searchsorted(comma, newline) != np.arange(1, len(newline) + 1) * (width - 1)))):
        return None
    commas = comma.reshape(len(newline), width - 1)

    def span(j: int) -> tuple[Any, Any]:
        return (starts if j == 0 else commas[:, j - 1] + 1), (newline if j == width - 1 else commas[:, j])

    found = _field_integers(body, *span(where[id_column]))
    if found is None:
        return None
    distinct_index = None
    texts: dict[str, list[str]] = {}
    for c, j in where.items():
        if c == coded:
            distinct_index = _field_codes(body, *span(j))
            if distinct_index is None:
                return None
        elif c != id_column:
            column = _field_texts(body, *span(j))
            if column is None:
                return None
            texts[c] = column
    return found, distinct_index, texts


def _field_integers(body: Any, first: Any, stop: Any) -> Any:
    """The fields ``body[first[i]:stop[i]]`` as an int64 array when each is the decimal text of a non-negative integer
    as ``str`` writes it (1 to 18 ASCII digits, no leading zero), else None."""
    import numpy as np

    length = stop - first
    if int(length.min()) < 1 or int(length.max()) > 18 or bool(np.any((body[first] == 48) & (length > 1))):
        return None
    numbers = np.zeros(len(first), dtype=np.int64)
    last = len(body) - 1
    for d in range(int(length.max())):
        live = length > d
        digit = body[np.minimum(first + d, last)].astype(np.int64) - 48
        if bool(np.any(live & ((digit < 0) | (digit > 9)))):
            return None
        numbers = np.where(live, numbers * 10 + digit, numbers)
    return numbers


def _field_texts(body: Any, first: Any, stop: Any) -> list[str] | None:
    """The texts of the fields ``body[first[i]:stop[i]]``, each distinct text one string (labels repeat); None when
    the fields would take over 64 MiB as a table of bytes (long texts: the caller's path reads them)."""
    found = _field_codes(body, first, stop)
    if found is None:
        return None
    texts, index = found
    return list(map(texts.__getitem__, index.tolist()))


def _field_codes(body: Any, first: Any, stop: Any) -> tuple[list[str], Any] | None:
    """The distinct texts of the fields ``body[first[i]:stop[i]]`` (sorted) and, per field, the index of its text
    (an int array); None when the fields would take over 64 MiB as a table of bytes."""
    import numpy as np

    length = stop - first
    widest = max(int(length.max()), 1)
    if widest * len(first) > 64 * 2**20:
        return None
    table = np.zeros((len(first), widest), dtype=np.uint8)
    last = len(body) - 1
    for d in range(widest):
        table[:, d] = np.where(length > d, body[np.minimum(first + d, last)], 0)
    distinct, index = np.unique(table.view(f"S{widest}").ravel(), return_inverse=True)
    return [t.decode("ascii") for t in distinct.tolist()], index


def _csv(data: bytes, columns: list[str], path: Path) -> dict[str, list[Any]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TruthError(f"truth file {path} is not UTF-8 text: {exc}", "truth_invalid") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except (StopIteration, csv.Error) as exc:
        raise TruthError(f"truth file {path} has no CSV header row ({exc or 'empty file'})", "truth_invalid") \
            from None
    where = _columns(header, columns, path)
    out: dict[str, list[Any]] = {c: [] for c in columns}
    fast = _plain_csv_columns(text, [where[c] for c in columns], len(header))
    if fast is None:
        try:
            fast = _csv_columns(reader, [where[c] for c in columns], len(header))
        except csv.Error:
            fast = None
    if fast is not None:
        return dict(zip(columns, fast, strict=True))
    reader = csv.reader(io.StringIO(text, newline=""))  # a row of another width: read again, naming its line
    next(reader)
    try:
        for row in reader:
            if not row:
                continue
            if len(row) != len(header):
                raise TruthError(f"truth file {path} line {reader.line_num}: {len(row)} fields, the header has "
                                 f"{len(header)}", "truth_invalid")
            for c in columns:
                out[c].append(row[where[c]])
    except csv.Error as exc:
        raise TruthError(f"truth file {path} line {reader.line_num}: {exc}", "truth_invalid") from None
    return out


def _plain_csv_columns(text: str, where: list[int], width: int) -> list[list[str]] | None:
    """The fields at ``where`` of every row after the header, one list per column, for a *plain* CSV text: no
    quote character, no NUL, lines ended by ``\n`` or ``\r\n`` only, no blank line, every line ``width`` fields.
    There :mod:`csv` reads each line as ``line.split(",")``, and so does this, with str methods over the whole text
    instead of a Python loop per row. None for any other text (the caller's :mod:`csv` path reads it)."""
    if '"' in text or "\x00" in text:
        return None
    body = text.replace("\r\n", "\n") if "\r" in text else text
    if "\r" in body:
        return None
    lines = body.split("\n")[1:]  # the header is the first line: no quote can make it span two
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return [[] for _ in where]
    if "" in lines or set(map(str.count, lines, repeat(","))) != {width - 1}:
        return None
    flat = ",".join(lines).split(",")
    del lines
    return [flat[i::width] for i in where]


def _csv_columns(reader: Any, where: list[int], width: int) -> list[list[str]] | None:
    """The fields at ``where`` of every row of ``reader`` (blank rows skipped), one list per column; None when a
    row does not have ``width`` fields (the caller reads again to name it). The fast path of :func:`_csv`: the
    rows are not kept, only their columns."""
    if len(where) == 2:
        first, second = where
        a: list[str] = []
        b: list[str] = []
        put_a, put_b = a.append, b.append
        for row in reader:
            if len(row) != width:
                if row:
                    return None
                continue
            put_a(row[first])
            put_b(row[second])
        return [a, b]
    cols: list[list[str]] = [[] for _ in where]
    for row in reader:
        if len(row) != width:
            if row:
                return None
            continue
        for col, i in zip(cols, where, strict=True):
            col.append(row[i])
    return cols


def _targets(values: Sequence[Any], task: str, column: str, path: Path) -> Sequence[Any]:
    """The truth targets of ``values``: class labels as :func:`label_text` (worked out once per distinct value) or
    finite floats; ranking: the relevant ids of each row (:func:`relevant_ids`); generation: the reference text.
    Raises TruthError naming the first row that is none of these. Class labels read as :class:`Labels` stay
    :class:`Labels` (their distinct texts made :func:`label_text` once)."""
    if isinstance(values, Labels):
        coded = _canonical_labels(values) if task == "classification" else None
        if coded is not None:
            return coded
        values = list(values)
    if task in ("ranking", "generation"):
        out = list(map(relevant_ids if task == "ranking" else _text, values))
        if None in out:
            row = out.index(None)
            what = "relevant id(s): an id, a list of ids, or ids separated by '|'" if task == "ranking" else \
                "reference text (a string)"
            raise TruthError(f"truth file {path} row {row + 1}: target '{column}' is {values[row]!r}, not {what}",
                             "truth_invalid")
        return out
    if task == "regression":
        try:
            floats = list(map(float, values)) if set(map(type, values)) <= {str, int, float} else None
        except ValueError:
            floats = None
        if floats is not None and all(map(math.isfinite, floats)):
            return floats
        return [_target(v, task, column, i, path) for i, v in enumerate(values)]
    labels = label_texts(values)
    if labels is None:
        return [_target(v, task, column, i, path) for i, v in enumerate(values)]
    return labels


def _canonical_labels(values: Labels) -> Labels | None:
    """``values`` with each distinct text made :func:`label_text` (``3.0`` and ``3`` one code); None when a text is
    not a class label (the caller's path names its row)."""
    import numpy as np

    canonical = [label_text(t) for t in values.texts]
    if None in canonical:
        return None
    at: dict[str | None, int] = {}
    remap = np.fromiter((at.setdefault(c, len(at)) for c in canonical), dtype=code_dtype(len(canonical)),
                        count=len(canonical))
    codes = values.codes if len(at) == len(canonical) else remap[values.codes]
    return Labels(codes, [c for c in at if c is not None])


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def relevant_ids(value: Any) -> tuple[str, ...] | None:
    """The relevant ids of a ranking truth row: a list of ids, one id, or text with ids separated by ``|`` (CSV);
    each as :func:`id_text`. None when empty or when one is not an id."""
    if isinstance(value, str):
        parts: list[Any] = value.split("|")
    elif isinstance(value, (list, tuple)):
        parts = list(value)
    else:
        parts = [value]
    found = [id_text(p) for p in parts]
    return tuple(f for f in found if f is not None) if found and None not in found else None


def label_texts(values: Sequence[Any]) -> list[str] | None:
    """:func:`label_text` of every value, worked out once per distinct value (labels repeat); None when one is not
    a class label (or is a bool, or unhashable): the caller then looks at each value to name the bad one."""
    kinds = set(map(type, values))
    if not kinds <= {str, int, float}:  # bool, None, lists…: value by value
        return None
    canonical: dict[Any, str] = {}
    for value in set(values):  # 1 and 1.0 are one key here, and one label ("1") too
        text = label_text(value)
        if text is None:
            return None
        canonical[value] = text
    return list(map(canonical.__getitem__, values))


def id_texts(values: list[Any]) -> list[str] | None:
    """:func:`id_text` of every value when all are ids (ints, or strings not blank); None when one is not."""
    kinds = set(map(type, values))
    if kinds == {int} or not values:
        return list(map(str, values))
    if kinds == {str}:
        out = list(map(str.strip, values))
        return None if "" in out else out
    if kinds == {int, str}:
        out = [str(v) if type(v) is int else v.strip() for v in values]
        return None if "" in out else out
    return None


def join_ids(table: TruthTable, predictions: Sequence[Any], ids: list[Any],
             kinds: frozenset[type] | None = None) -> Joined:
    """:func:`join` by id with the outputs' ``ids`` as the model wrote them (parallel to ``predictions``): compared
    as :func:`id_text` (an id that is not one joins nothing). When the truth's ids are all plain decimal integers
    (no sign, no leading zero: their text is ``str(int)``) and the outputs' are all JSON integers, the same join is
    done on numbers with numpy (a sort and a binary search), without turning a million ids into text. ``kinds``:
    the Python types of ``ids``' entries when the caller knows them."""
    fast = _join_numbers(table, predictions, ids, kinds)
    if fast is not None:
        return fast
    texts = id_texts(ids)
    return join(table, predictions, texts if texts is not None else [id_text(v) or "" for v in ids])


def _integer_ids(texts: list[str]) -> Any:
    """``texts`` as an int64 array when each is the decimal text of a non-negative integer as ``str`` writes it
    (ASCII digits, no sign, no leading zero, at most 18 digits), else None: such texts are equal exactly when their
    numbers are."""
    import numpy as np

    if not texts or not all(map(str.isdigit, texts)) or not all(map(str.isascii, texts)):
        return None
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    if int(lengths.max()) > 18:
        return None
    numbers = np.fromiter(map(int, texts), dtype=np.int64, count=len(texts))
    digits = np.searchsorted(_POWERS, numbers, side="right") + 1  # digits of str(n): 1 for 0-9, 2 for 10-99…
    return numbers if bool(np.array_equal(digits, lengths)) else None  # a leading zero makes a text longer


_POWERS = [10 ** i for i in range(1, 19)]


def _distinct(ids: Sequence[str], numbers: Any) -> bool:
    """No id repeats (checked on ``numbers`` when given: a sort instead of a set of texts)."""
    import numpy as np

    if numbers is None:
        return len(set(ids)) == len(ids)
    if len(numbers) and int(numbers.min()) >= 0 and int(numbers.max()) < 4 * len(numbers):  # row numbers: a bitmap
        seen = np.zeros(int(numbers.max()) + 1, dtype=bool)
        seen[numbers] = True
        return int(np.count_nonzero(seen)) == len(numbers)
    ranked = np.sort(numbers)
    return not bool(np.any(ranked[1:] == ranked[:-1]))


def _positions(given: Any, truth: Any) -> Any:
    """For each of the ``truth`` numbers, the position of the same number in ``given`` (-1: none), both int64
    arrays; None when a number repeats in ``given``. A table indexed by the number when the ids are small
    non-negative integers (up to 4 × their count, as row numbers are), else a sort and a binary search."""
    import numpy as np

    n = len(given)
    low, high = int(given.min()), int(given.max())
    small = np.int32 if n < 2**31 - 1 else np.int64  # positions in half the memory
    if low >= 0 and high < 4 * max(n, len(truth)):
        table: Any = np.full(high + 1, -1, dtype=small)
        table[given] = np.arange(n, dtype=small)
        if int(np.count_nonzero(table >= 0)) != n:  # a number given twice
            return None
        if len(truth) and int(truth.min()) >= 0 and int(truth.max()) <= high:
            return table[truth]
        inside = (truth >= 0) & (truth <= high)
        return np.where(inside, table[np.where(inside, truth, 0)], -1)
    order = np.argsort(given, kind="stable")
    ranked = given[order]
    if n > 1 and bool(np.any(ranked[1:] == ranked[:-1])):
        return None
    at = np.searchsorted(ranked, truth)
    at[at == n] = 0
    return np.where(ranked[at] == truth, order[at], -1)


def _join_numbers(table: TruthTable, predictions: Sequence[Any], ids: list[Any],
                  kinds: frozenset[type] | None = None) -> Joined | None:
    """The numeric :func:`join_ids` (None when it does not apply): the same rows, counts, examples and order."""
    import numpy as np

    truth = table.numbers
    if table.ids is None or truth is None or not ids or (kinds if kinds is not None else set(map(type, ids))) != {int}:
        return None
    try:
        given = np.fromiter(ids, dtype=np.int64, count=len(ids))
    except OverflowError:
        return None
    where = _positions(given, truth)
    del given
    if where is None:
        return None  # an id predicted twice: the text path counts duplicates
    hit = where >= 0
    whole = bool(hit.all())  # every truth row joined: its rows in order, its labels as they are
    picked = where if whole else where[hit]
    used = np.zeros(len(ids), dtype=bool)
    used[picked] = True
    missing = np.flatnonzero(~hit)
    extra = np.flatnonzero(~used)
    examples = {name: found for name, found in (("missing", [table.ids[i] for i in missing[:5].tolist()]),
                                                ("extra", [str(ids[i]) for i in extra[:5].tolist()])) if found}
    del hit, used
    rows = np.arange(len(where), dtype=np.int32 if len(where) < 2**31 - 1 else np.int64) if whole else \
        _narrow(np.flatnonzero(where >= 0))
    return Joined(y_true=table.targets if whole else _take(table.targets, rows), y_pred=_take(predictions, picked),
                  missing=len(missing), duplicate=0, extra=len(extra), examples=examples, truth_rows=rows,
                  pred_rows=_narrow(picked))


def _narrow(rows: Any) -> Any:
    """Row numbers as int32 when they fit (half the memory of int64 for the rows kept beside a join)."""
    import numpy as np

    return rows.astype(np.int32, copy=False) if len(rows) and int(rows.max()) < 2**31 - 1 else rows


def _take(values: Sequence[Any], rows: Any) -> Sequence[Any]:
    """``[values[i] for i in rows]`` (``rows`` an int array) through an object array: no Python int per row;
    :class:`Labels` stay codes."""
    import numpy as np

    if isinstance(values, Labels):
        return values.take(rows)
    found = np.fromiter(values, dtype=object, count=len(values))  # lists stay elements (ranked ids), not a 2-D table
    return list(found[rows].tolist())


def _columns(header: list[str], columns: list[str], path: Path) -> dict[str, int]:
    where = {name: i for i, name in enumerate(header)}
    for c in columns:
        if c not in where:
            raise TruthError(f"truth file {path} has no column '{c}' (columns: {', '.join(header[:20])}"
                             f"{' …' if len(header) > 20 else ''})", "truth_invalid")
    return where


def _jsonl(data: bytes, columns: list[str], path: Path) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {c: [] for c in columns}
    for n, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise TruthError(f"truth file {path} line {n}: not JSON ({exc})", "truth_invalid") from None
        if not isinstance(row, dict):
            raise TruthError(f"truth file {path} line {n}: a JSON {type(row).__name__}, not an object",
                             "truth_invalid")
        for c in columns:
            if c not in row:
                raise TruthError(f"truth file {path} line {n}: no field '{c}' (fields: {', '.join(list(row)[:20])})",
                                 "truth_invalid")
            out[c].append(row[c])
    return out


def _parquet(data: bytes, columns: list[str], path: Path) -> dict[str, list[Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise TruthError(f"truth file {path} is Parquet, and pyarrow is not installed here: pip install "
                         "'pytest-hetero[parquet]'", "truth_unavailable") from None
    try:
        names = pq.read_schema(io.BytesIO(data)).names
        missing = [c for c in columns if c not in names]
        if missing:
            raise TruthError(f"truth file {path} has no column '{missing[0]}' (columns: {', '.join(names[:20])})",
                             "truth_invalid")
        table = pq.read_table(io.BytesIO(data), columns=columns)
    except TruthError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a damaged file
        raise TruthError(f"truth file {path} is not readable Parquet: {exc}", "truth_invalid") from None
    return {c: table.column(c).to_pylist() for c in columns}


def _target(value: Any, task: str, column: str, row: int, path: Path) -> Any:
    if task == "regression":
        number = _float(value)
        if number is None:
            raise TruthError(f"truth file {path} row {row + 1}: target '{column}' is {value!r}, not a finite number",
                             "truth_invalid")
        return number
    label = label_text(value)
    if label is None:
        raise TruthError(f"truth file {path} row {row + 1}: label '{column}' is {value!r}, not a class label",
                         "truth_invalid")
    return label


def _id(value: Any, column: str, row: int, path: Path) -> str:
    found = id_text(value)
    if found is None:
        raise TruthError(f"truth file {path} row {row + 1}: id '{column}' is {value!r}, not an id", "truth_invalid")
    return found


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def label_text(value: Any) -> str | None:
    """A class label as text: a string stripped (an integral one like ``"3.0"`` as ``"3"``), an int, an
    integral float without its fraction. None for an empty string, a bool, null, a non-integral or non-finite
    float, or anything else."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str):
        text = value.strip()
        number = _float(text)
        if number is not None and number.is_integer() and any(ch.isdigit() for ch in text):
            return str(int(number))
        return text or None
    return None


def id_text(value: Any) -> str | None:
    """An id as text: a non-empty string stripped, or an int. None for anything else (a float, a bool)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


@dataclass(frozen=True)
class Joined:
    """Truth and predictions joined row by row: ``y_true`` and ``y_pred`` (same length, truth order), and the
    findings: ``missing`` (truth rows without a prediction), ``duplicate`` (ids predicted more than once: their
    rows are left out), ``extra`` (predictions for ids the truth does not have), each with a few ``examples``."""

    y_true: Sequence[Any]
    y_pred: Sequence[Any]
    """Either may be :class:`Labels` (class labels as codes) on the fast paths."""
    missing: int
    duplicate: int
    extra: int
    examples: dict[str, list[str]]
    truth_rows: Any = field(default=None, compare=False)
    """Truth row of each joined row (int64 array), for slices."""
    pred_rows: Any = field(default=None, compare=False)
    """Position in the predictions given of each joined row (int64 array), for values beside them (scores)."""

    @property
    def complete(self) -> bool:
        """Every truth row has exactly one prediction and no prediction is unaccounted for."""
        return not (self.missing or self.duplicate or self.extra)

    def counts(self) -> dict[str, int]:
        """``{"joined", "missing", "duplicate", "extra"}`` row counts."""
        return {"joined": len(self.y_true), "missing": self.missing, "duplicate": self.duplicate,
                "extra": self.extra}


def join(table: TruthTable, predictions: Sequence[Any], ids: list[str] | None) -> Joined:
    """Join ``predictions`` with ``table``: by ``ids`` (text, parallel to predictions) when the truth has an id
    column, else by position (row i of the truth ↔ prediction i; a length difference counts as missing or
    extra). A duplicated id joins none of its predictions (which one counts would be a guess)."""
    import numpy as np

    if table.ids is None:
        n = min(len(predictions), table.rows)
        rows = np.arange(n, dtype=np.int64)
        return Joined(y_true=table.targets[:n], y_pred=_head(predictions, n), missing=table.rows - n,
                      duplicate=0, extra=len(predictions) - n, examples={}, truth_rows=rows, pred_rows=rows)
    assert ids is not None
    fast = _join_unique(table, predictions, ids)
    if fast is not None:
        return fast
    seen = Counter(ids)
    by_id = {k: i for i, k in enumerate(ids) if seen[k] == 1}
    truth_ids = set(table.ids)
    y_true, y_pred, missing, truth_rows, pred_rows = [], [], [], [], []
    for row, (k, target) in enumerate(zip(table.ids, table.targets, strict=True)):
        if k in by_id:
            y_true.append(target)
            y_pred.append(predictions[by_id[k]])
            truth_rows.append(row)
            pred_rows.append(by_id[k])
        elif seen[k] == 0:
            missing.append(k)
    duplicate = [k for k, n in seen.items() if n > 1]
    extra = [k for k in seen if k not in truth_ids]
    return Joined(y_true=y_true, y_pred=y_pred, missing=len(missing), duplicate=len(duplicate), extra=len(extra),
                  examples={name: found[:5] for name, found in (("missing", missing), ("duplicate", duplicate),
                                                                 ("extra", extra)) if found},
                  truth_rows=np.asarray(truth_rows, dtype=np.int64), pred_rows=np.asarray(pred_rows, dtype=np.int64))


def _head(values: Sequence[Any], n: int) -> Sequence[Any]:
    """The first ``n`` of ``values``: a list, or :class:`Labels` kept as codes."""
    return values[:n] if isinstance(values, Labels) else list(values[:n])


def _join_unique(table: TruthTable, predictions: Sequence[Any], ids: list[str]) -> Joined | None:
    """:func:`join` by id when no id is predicted twice (None otherwise: the caller's path counts duplicates), with
    one dictionary of prediction positions and numpy masks instead of a Python loop over the rows: the same rows,
    counts and examples, in the same order."""
    import numpy as np

    at = dict(zip(ids, range(len(ids)), strict=True))
    if len(at) != len(ids):
        return None
    assert table.ids is not None
    where = np.fromiter(map(at.get, table.ids, repeat(-1)), dtype=np.int64, count=table.rows)
    hit = where >= 0
    picked = where[hit]
    used = np.zeros(len(ids), dtype=bool)
    used[picked] = True
    missing = np.flatnonzero(~hit)
    extra = np.flatnonzero(~used)
    examples = {name: [keys[i] for i in found[:5].tolist()] for name, found, keys in
                (("missing", missing, table.ids), ("extra", extra, ids)) if len(found)}
    rows = np.flatnonzero(hit)
    return Joined(y_true=_take(table.targets, rows), y_pred=_take(predictions, picked), missing=len(missing),
                  duplicate=0, extra=len(extra), examples=examples, truth_rows=_narrow(rows), pred_rows=_narrow(picked))
