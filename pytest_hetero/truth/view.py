"""The model's view of a dataset: the file the code under test reads, without the ground truth.

When a dataset's truth is a column or field of the dataset file itself (``truth.target``, no separate
``truth.labels`` file), a model that reads the same file could copy the answers into its predictions. So every
engine hands the model :func:`model_input` instead of :attr:`Dataset.path`: for such a dataset, a copy of the file
with the target column (CSV, Parquet) or key (JSONL) removed, made by the gate in its own process, outside any
sandbox, from the digested bytes (their sha256 checked), once per dataset per process, in a gate-owned temporary
folder removed at exit. The id column stays (predictions are joined on it). A dataset without truth, or with a
separate labels file, is given as it is.

:attr:`Dataset.path` and its sha256 stay what the claims, digests, verification and bundle copies are about.
"""

from __future__ import annotations

import atexit
import csv
import hashlib
import io
import json
import shutil
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_hetero.matrix.model import Dataset
from pytest_hetero.matrix.truth_table import MAX_TRUTH_BYTES, TruthError, file_format

RECORD = "model.dataset_view"
"""Evidence record kind of the view a model run was given (:meth:`DatasetView.record`)."""


class ViewError(TruthError):
    """The view cannot be made: ``category`` is ``truth_changed`` (the dataset file's bytes are not the declared
    sha256), ``truth_unavailable`` (unreadable, too large, Parquet without pyarrow) or ``truth_invalid`` (the
    target column is absent, the file does not parse). The truth reader's error, with ``message`` and
    ``category`` as it has them."""


@dataclass(frozen=True)
class DatasetView:
    """A dataset file as the model sees it: ``path`` (same file name as the original, in a gate-owned folder),
    its ``sha256``, the ``removed`` column/field, the ``original_sha256`` it was made from, its ``format``."""

    path: Path
    sha256: str
    removed: str
    original_sha256: str
    format: str

    def record(self) -> dict[str, str]:
        """The ``model.dataset_view`` record's data: file name, sha256, removed column, original's sha256, format."""
        return {"path": self.path.name, "sha256": self.sha256, "removed": self.removed,
                "original_sha256": self.original_sha256, "format": self.format}


_lock = threading.Lock()
_views: dict[tuple[str, str, str, str], DatasetView] = {}
_folder: Path | None = None


def hides_truth(dataset: Dataset) -> bool:
    """True when the dataset's truth is inline (a column/field of the file the model would read)."""
    return dataset.truth is not None and not dataset.truth.separate


def model_input(dataset: Dataset) -> Path:
    """The file the model under test reads for ``dataset``: :func:`view`'s path when the truth is inline, else
    :attr:`Dataset.path` itself. Raises :class:`ViewError` when the view cannot be made."""
    made = view(dataset)
    return dataset.path if made is None else made.path


def model_inputs(datasets: Iterable[Dataset]) -> list[tuple[str, Path]]:
    """``(name, file the model reads)`` for each of ``datasets`` (for engines that copy or mount every dataset of a
    matrix up front); a dataset whose view cannot be made is left out: its model run is refused before it starts
    (the model layer calls :func:`view` first), so nothing is ever given the unfiltered file in its place."""
    out: list[tuple[str, Path]] = []
    for dataset in datasets:
        try:
            out.append((dataset.name, model_input(dataset)))
        except ViewError:
            continue
    return out


def view(dataset: Dataset) -> DatasetView | None:
    """The view of ``dataset`` (None when its truth is not inline), made on first use and kept for the process.
    Raises :class:`ViewError`."""
    if not hides_truth(dataset):
        return None
    truth = dataset.truth
    assert truth is not None
    try:
        fmt = file_format(dataset.path, truth.format)
    except TruthError as exc:
        raise ViewError(exc.message, exc.category) from None
    key = (str(dataset.path), dataset.sha256, truth.target, fmt)
    with _lock:
        found = _views.get(key)
        if found is None:
            found = _views[key] = _make(dataset, truth.target, fmt)
        return found


def _make(dataset: Dataset, target: str, fmt: str) -> DatasetView:
    path = dataset.path
    try:
        size = path.stat().st_size
        if size > MAX_TRUTH_BYTES:
            raise ViewError(f"dataset file {path} is {size} bytes, over the {MAX_TRUTH_BYTES} the gate copies to "
                            f"hide its truth column '{target}': declare a separate truth.labels file",
                            "truth_unavailable")
        data = path.read_bytes()
    except OSError as exc:
        raise ViewError(f"dataset file {path} unreadable: {exc.strerror or exc}", "truth_unavailable") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != dataset.sha256:
        raise ViewError(f"dataset file {path} has sha256 {digest}, the matrix declares {dataset.sha256}: it changed "
                        "after it was digested; no view is made of it", "truth_changed")
    body = {"csv": _csv, "jsonl": _jsonl, "parquet": _parquet}[fmt](data, target, path)
    folder = Path(tempfile.mkdtemp(prefix=f"{digest[:12]}-", dir=gate_folder()))
    out = folder / path.name
    out.write_bytes(body)
    out.chmod(0o444)
    folder.chmod(0o755)  # a container or sandbox user reads it; it holds nothing the model may not see
    return DatasetView(path=out, sha256=hashlib.sha256(body).hexdigest(), removed=target, original_sha256=digest,
                       format=fmt)


def gate_folder() -> Path:
    """The process's folder of views (made 0755 on first use, removed at exit)."""
    global _folder
    if _folder is None:
        _folder = Path(tempfile.mkdtemp(prefix="hetero-dataset-views-"))
        _folder.chmod(0o755)
        atexit.register(shutil.rmtree, _folder, True)
    return _folder


def _csv(data: bytes, target: str, path: Path) -> bytes:
    """``data`` without column ``target``: the other fields as read, written back with the file's own line ending
    (CRLF or LF) and minimal quoting; a UTF-8 byte-order mark is kept."""
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ViewError(f"dataset file {path} is not UTF-8 text: {exc}", "truth_invalid") from None
    first = text.find("\n")
    ending = "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"
    reader = csv.reader(io.StringIO(text, newline=""))
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, lineterminator=ending)
    try:
        header = next(reader)
        if target not in header:
            raise ViewError(f"dataset file {path} has no column '{target}' (columns: {', '.join(header[:20])}): "
                            "fix truth.target", "truth_invalid")
        drop = header.index(target)
        writer.writerow(header[:drop] + header[drop + 1:])
        for row in reader:
            writer.writerow(row[:drop] + row[drop + 1:] if row else row)
    except StopIteration:
        raise ViewError(f"dataset file {path} has no CSV header row (empty file)", "truth_invalid") from None
    except csv.Error as exc:
        raise ViewError(f"dataset file {path} line {reader.line_num}: {exc}", "truth_invalid") from None
    written = buf.getvalue()
    if not text.endswith(("\n", "\r")) and written.endswith(ending):
        written = written[: -len(ending)]
    return (b"\xef\xbb\xbf" if bom else b"") + written.encode("utf-8")


def _jsonl(data: bytes, target: str, path: Path) -> bytes:
    """``data`` with key ``target`` removed from each object (each line re-serialised, its line ending kept;
    blank lines kept)."""
    out: list[bytes] = []
    for n, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            out.append(line)
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ViewError(f"dataset file {path} line {n}: not JSON ({exc})", "truth_invalid") from None
        if not isinstance(row, dict):
            raise ViewError(f"dataset file {path} line {n}: a JSON {type(row).__name__}, not an object",
                            "truth_invalid")
        row.pop(target, None)
        out.append(json.dumps(row, ensure_ascii=False).encode("utf-8") + (b"\r" if line.endswith(b"\r") else b""))
    return b"\n".join(out)


def _parquet(data: bytes, target: str, path: Path) -> bytes:
    """``data`` with column ``target`` dropped, written back by pyarrow (the ``parquet`` extra)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ViewError(f"dataset file {path} is Parquet with its truth column '{target}' inline, and pyarrow is "
                        "not installed here to give the model a copy without it: pip install "
                        "'pytest-hetero[parquet]', or declare a separate truth.labels file", "truth_unavailable") \
            from None
    try:
        table = pq.read_table(io.BytesIO(data))
        if target not in table.column_names:
            raise ViewError(f"dataset file {path} has no column '{target}' (columns: "
                            f"{', '.join(table.column_names[:20])}): fix truth.target", "truth_invalid")
        sink = io.BytesIO()
        pq.write_table(table.drop_columns([target]), sink)
    except ViewError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a damaged file
        raise ViewError(f"dataset file {path} is not readable Parquet: {exc}", "truth_invalid") from None
    return sink.getvalue()

