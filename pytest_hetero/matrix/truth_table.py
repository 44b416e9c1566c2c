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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

    ids: list[str] | None
    targets: list[Any]
    path: Path
    sha256: str
    format: str

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
    rows = {"csv": _csv, "jsonl": _jsonl, "parquet": _parquet}[fmt](data, columns, truth.path)
    targets = [_target(v, truth.task, truth.target, i, truth.path) for i, v in enumerate(rows[truth.target])]
    ids = None
    if truth.id:
        ids = [_id(v, truth.id, i, truth.path) for i, v in enumerate(rows[truth.id])]
        repeated = [k for k, n in Counter(ids).items() if n > 1]
        if repeated:
            raise TruthError(f"truth file {truth.path}: id column '{truth.id}' repeats {len(repeated)} id(s) (e.g. "
                             f"{', '.join(map(repr, repeated[:3]))}): which row is the truth would be a guess",
                             "truth_invalid")
    return TruthTable(ids=ids, targets=targets, path=truth.path, sha256=digest, format=fmt)


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

    y_true: list[Any]
    y_pred: list[Any]
    missing: int
    duplicate: int
    extra: int
    examples: dict[str, list[str]]

    @property
    def complete(self) -> bool:
        """Every truth row has exactly one prediction and no prediction is unaccounted for."""
        return not (self.missing or self.duplicate or self.extra)

    def counts(self) -> dict[str, int]:
        """``{"joined", "missing", "duplicate", "extra"}`` row counts."""
        return {"joined": len(self.y_true), "missing": self.missing, "duplicate": self.duplicate,
                "extra": self.extra}


def join(table: TruthTable, predictions: list[Any], ids: list[str] | None) -> Joined:
    """Join ``predictions`` with ``table``: by ``ids`` (text, parallel to predictions) when the truth has an id
    column, else by position (row i of the truth ↔ prediction i; a length difference counts as missing or
    extra). A duplicated id joins none of its predictions (which one counts would be a guess)."""
    if table.ids is None:
        n = min(len(predictions), table.rows)
        return Joined(y_true=table.targets[:n], y_pred=list(predictions[:n]), missing=table.rows - n,
                      duplicate=0, extra=len(predictions) - n, examples={})
    assert ids is not None
    seen = Counter(ids)
    by_id = {k: p for k, p in zip(ids, predictions, strict=True) if seen[k] == 1}
    truth_ids = set(table.ids)
    y_true, y_pred, missing = [], [], []
    for k, target in zip(table.ids, table.targets, strict=True):
        if k in by_id:
            y_true.append(target)
            y_pred.append(by_id[k])
        elif seen[k] == 0:
            missing.append(k)
    duplicate = [k for k, n in seen.items() if n > 1]
    extra = [k for k in seen if k not in truth_ids]
    return Joined(y_true=y_true, y_pred=y_pred, missing=len(missing), duplicate=len(duplicate), extra=len(extra),
                  examples={name: found[:5] for name, found in (("missing", missing), ("duplicate", duplicate),
                                                                 ("extra", extra)) if found})
