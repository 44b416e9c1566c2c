"""The truth files are withheld from the code under test, on every engine.

The gate reads a dataset's ground truth from a file (:attr:`Truth.path`: the dataset file itself when the truth
is a column of it, or a separate labels file) and the model is given :func:`~pytest_hetero.truth.view.model_input`
instead. But the model also reads its ``code`` folder (bound or copied whole into the sandbox, container or pod),
and on the local engine the matrix's folder (its working folder): a truth file kept there, or any file with the
same bytes, would hand it the answers. This module finds them:

- :func:`truth_files`: the truth files of a matrix's datasets (path, declared sha256, size);
- :func:`find_in`: every file under a folder that *is* one (same path) or has the same bytes (same size, then the
  same sha256; hashes cached per inode, size and mtime), symbolic links to one included;
- :func:`code_view`: what ``{code}`` is made of on the container engines (Docker, Kubernetes): the code folder
  itself when it holds no truth, else a copy made by the gate without those files (once per content, in the gate's
  folder of views, removed at exit); the local engine masks them in its sandbox instead
  (:func:`~pytest_hetero.backends.sandbox.Sandbox.prepare`'s ``hide``).

Each withheld file is a :class:`Withheld` (host path, sha256, dataset, why) recorded as ``model.truth_withheld``.
What this cannot find: a copy under the system folders or the interpreter's environment the sandbox shows, a copy
inside the container image, or labels the code under test carries in another form (memorised, compressed,
re-encoded): see docs/acceptance.md.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_hetero.matrix.model import Dataset, Matrix, Model
from pytest_hetero.truth.view import gate_folder

RECORD = "model.truth_withheld"
"""Evidence record kind: the truth files the model run could not read, and how they were withheld."""

MAX_ENTRIES = 500_000
"""Entries looked at under one folder; a larger folder is refused (:class:`WithholdError`), never half-searched."""


class WithholdError(Exception):
    """A folder could not be searched for truth files (too many entries): ``message`` names it and the fix."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class TruthFile:
    """A file the gate reads truth from: ``path`` (resolved), its declared ``sha256``, its ``size`` in bytes
    (None when it cannot be read now: then only the same path is withheld), the ``dataset`` it is the truth of."""

    path: Path
    sha256: str
    size: int | None
    dataset: str
    kind: str = "truth file"
    """What it is, in the ``why`` of a :class:`Withheld`: ``truth file``, or ``golden samples`` (an acceptance file
    whose golden rules hold expected answers: :func:`answer_files`)."""


@dataclass(frozen=True)
class Withheld:
    """One file the model run could not read: its host ``path``, its ``sha256``, the ``dataset`` whose truth it is
    or copies, and ``why`` (``truth file`` or ``same bytes as <truth path>``)."""

    path: Path
    sha256: str
    dataset: str
    why: str

    def record(self) -> dict[str, str]:
        """The evidence form: path, sha256, dataset, why."""
        return {"path": str(self.path), "sha256": self.sha256, "dataset": self.dataset, "why": self.why}


def truth_files(datasets: Iterable[Dataset]) -> list[TruthFile]:
    """The truth file of each dataset that declares one (:attr:`Truth.path`, deduplicated by path)."""
    out: dict[Path, TruthFile] = {}
    for dataset in datasets:
        truth = dataset.truth
        if truth is None:
            continue
        path = _resolved(truth.path)
        if path in out:
            continue
        try:
            size: int | None = path.stat().st_size
        except OSError:
            size = None
        out[path] = TruthFile(path=path, sha256=truth.sha256, size=size, dataset=dataset.name)
    return list(out.values())


def answer_files(datasets: Iterable[Dataset]) -> list[TruthFile]:
    """What the code under test must not read: the :func:`truth_files`, and each dataset's acceptance file that holds
    a golden rule (its samples' ``expected`` values are answers the gate holds, like the truth column: a model that
    read them would pass the rule without predicting them); deduplicated by path. An acceptance file that cannot be
    read or parsed is left to the business item to report."""
    from pytest_hetero.errors import CaseError
    from pytest_hetero.matrix.acceptance import load_rules
    from pytest_hetero.matrix.yamlnodes import MAX_BYTES
    from pytest_hetero.safeio import read_file

    out = {t.path: t for t in truth_files(datasets)}
    for dataset in datasets:
        if dataset.acceptance is None:
            continue
        path = _resolved(dataset.acceptance)
        if path in out:
            continue
        try:
            raw = read_file(path, "the acceptance rules", MAX_BYTES, CaseError)
            rules = load_rules(path, raw)
        except CaseError:  # the business item reports the file; nothing to withhold from it here
            continue
        if any(isinstance(rule, dict) and "golden" in rule for rule in rules):
            out[path] = TruthFile(path=path, sha256=hashlib.sha256(raw).hexdigest(), size=len(raw),
                                  dataset=dataset.name, kind="golden samples")
    return list(out.values())


_hash_lock = threading.Lock()
_hashes: dict[tuple[int, int, int, int], str] = {}


def _sha256_of(path: Path, st: os.stat_result) -> str | None:
    """sha256 of a regular file, cached by (device, inode, size, mtime); None when unreadable."""
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _hash_lock:
        found = _hashes.get(key)
    if found is not None:
        return found
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    with _hash_lock:
        _hashes[key] = digest.hexdigest()
    return digest.hexdigest()


def match(path: Path, truths: Sequence[TruthFile]) -> Withheld | None:
    """``path`` as a :class:`Withheld` when it is (or links to) a truth file, or has one's bytes; else None."""
    try:
        real = _resolved(path)
        st = real.stat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    for truth in truths:
        if real == truth.path:
            return Withheld(path=path, sha256=truth.sha256, dataset=truth.dataset,
                            why=f"links to {truth.kind} {truth.path}" if path.is_symlink() else truth.kind)
    sized = [t for t in truths if t.size == st.st_size]
    if not sized:
        return None
    digest = _sha256_of(real, st)
    for truth in sized:
        if digest == truth.sha256:
            return Withheld(path=path, sha256=digest, dataset=truth.dataset, why=f"same bytes as {truth.path}")
    return None


def find_in(folder: Path, truths: Sequence[TruthFile]) -> list[Withheld]:
    """Every file under ``folder`` (itself when it is a file) that :func:`match` es ``truths``, in walk order.
    Folders reached through symbolic links are not entered (their target is searched where it is bound).
    Raises :class:`WithholdError` past :data:`MAX_ENTRIES` entries."""
    if not truths:
        return []
    if not folder.is_dir():
        found = match(folder, truths)
        return [] if found is None else [found]
    out: list[Withheld] = []
    seen = 0
    for here, dirs, files in os.walk(folder):
        seen += len(dirs) + len(files)
        if seen > MAX_ENTRIES:
            raise WithholdError(f"folder {folder} has more than {MAX_ENTRIES} entries: the gate cannot search it "
                                "for copies of the truth files the model must not read; give the model a smaller "
                                "code folder (spec.models[].code) or matrix folder")
        base = Path(here)
        for name in sorted(files) + sorted(d for d in dirs if (base / d).is_symlink()):
            found = match(base / name, truths)
            if found is not None:
                out.append(found)
    return out


@dataclass(frozen=True)
class CodeView:
    """The code folder as a container engine gives it to the model: ``path`` (``original`` itself when nothing was
    withheld, else the gate's copy without ``withheld``)."""

    path: Path
    original: Path
    withheld: tuple[Withheld, ...]

    def record(self, how: str) -> dict[str, object]:
        """The ``model.truth_withheld`` record's data (``how``: the engine's words)."""
        return {"how": how, "code": str(self.original), "copy": None if self.path == self.original else
                str(self.path), "files": [w.record() for w in self.withheld]}


_view_lock = threading.Lock()
_code_views: dict[tuple[Path, tuple[tuple[str, str], ...]], Path] = {}


def code_view(code: Path, datasets: Iterable[Dataset]) -> CodeView:
    """The model's view of its code folder ``code`` (:class:`CodeView`): the truth files of ``datasets`` and every
    file with their bytes left out of a copy made once per (folder, withheld files and their digests) in the gate's
    folder (modes kept, ``__pycache__`` left out as the container copies do). A code *file* that is a truth file is
    replaced by an empty file. Raises :class:`WithholdError` (folder too large) and OSError (copy failed)."""
    original = code
    withheld = tuple(find_in(code, answer_files(datasets)))
    if not withheld:
        return CodeView(path=original, original=original, withheld=())
    key = (_resolved(code), tuple(sorted((str(w.path), w.sha256) for w in withheld)))
    with _view_lock:
        made = _code_views.get(key)
        if made is None or not made.exists():
            made = _code_views[key] = _copy(code, {w.path for w in withheld})
    return CodeView(path=made, original=original, withheld=withheld)


def _copy(code: Path, skip: set[Path]) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="code-", dir=gate_folder()))
    folder.chmod(0o755)
    target = folder / code.name
    if not code.is_dir():
        target.touch(mode=0o444)
        return target

    def ignore(here: str, names: list[str]) -> set[str]:
        return {n for n in names if n == "__pycache__" or Path(here) / n in skip}

    shutil.copytree(code, target, symlinks=True, ignore=ignore)
    return target


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path.absolute()


CONTAINER_HOW = "left out of the copy of the code folder given to the container"
"""``how`` of the container engines' ``model.truth_withheld`` record."""


def model_code(matrix: Matrix, model: Model) -> CodeView:
    """:func:`code_view` of ``model``'s code folder (the matrix's folder when it names none) against every dataset
    of ``matrix`` (a container holds the code of every model for every dataset). Raises :class:`WithholdError`
    when the folder cannot be searched or copied (the engines' ``inputs_copy_failed``)."""
    code = model.code or matrix.path.parent
    try:
        return code_view(code, matrix.datasets)
    except OSError as exc:
        raise WithholdError(f"copying code folder {code} without its truth files failed: {exc}") from None


def record_of(matrix: Matrix, view: CodeView, how: str = CONTAINER_HOW) -> dict[str, object] | None:
    """The ``model.truth_withheld`` record of a container run with ``view`` (None when no dataset of ``matrix``
    declares truth: nothing to withhold)."""
    return view.record(how) if answer_files(matrix.datasets) else None
