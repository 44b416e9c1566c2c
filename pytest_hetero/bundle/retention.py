"""Retention of run folders under a reports folder (``hetero prune``): keep the newest N and/or those younger
than T, never a bundle a baseline points to.

A *run folder* is a directory directly under the reports folder holding ``evidence.json`` (a finished bundle)
or ``journal.jsonl`` (a run that is still going or crashed before assembling). Anything else there (files,
symlinks, other folders) is never touched. A run folder's time is the modification time of its
``evidence.json`` (written once, at the end of the run), else of the folder itself.

Protected, whatever the rules say:

- every bundle a *baseline pointer* names: a symlink directly in the reports folder (``reports/baseline ->
  20261201T020000Z-1a2b3c``), and each path given as a baseline — a bundle folder, a symlink to one, or a
  text file listing bundles one per line (a path, relative to that file's folder or absolute, or a run id
  in the reports folder; ``#`` starts a comment), such as the file a CI job passes to ``--hetero-baseline``;
- a folder without ``evidence.json`` (a run in progress) unless ``older_than_s`` is given and it is older.

Pure file-system logic; imports nothing of the package but :mod:`pytest_hetero.errors`.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from pytest_hetero.errors import HeteroError


@dataclass(frozen=True)
class Decision:
    """What prune does with one run folder: ``action`` ``remove`` or ``keep``, ``why`` in words, ``age_s``."""

    path: Path
    action: str
    why: str
    age_s: float


def run_folders(reports: Path) -> list[Path]:
    """Run folders directly under ``reports`` (see the module docstring), sorted by name."""
    return sorted(p for p in reports.iterdir() if p.is_dir() and not p.is_symlink()
                  and ((p / "evidence.json").is_file() or (p / "journal.jsonl").is_file()))


def _time(folder: Path) -> float:
    evidence = folder / "evidence.json"
    return (evidence if evidence.is_file() else folder).stat().st_mtime


def _lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HeteroError(f"baseline file {path}: cannot read it ({exc})", hint="name a readable text file") from None
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]


def protected(reports: Path, baselines: list[Path]) -> dict[Path, str]:
    """Resolved run folder → why it is protected: symlinks in ``reports`` and each of ``baselines`` (see the
    module docstring). Raises HeteroError naming a baseline that names nothing, so a typo never leaves the
    bundle it meant to keep unprotected."""
    out: dict[Path, str] = {}
    for link in sorted(p for p in reports.iterdir() if p.is_symlink()):
        if link.resolve().is_dir():
            out.setdefault(link.resolve(), f"baseline: the link {link.name} points to it")
    for given in baselines:
        if given.is_dir():
            out.setdefault(given.resolve(), f"baseline: named by {given}")
            continue
        if not given.is_file():
            raise HeteroError(f"baseline {given}: no such bundle or file",
                              hint="give a bundle folder, a link to one, or a text file listing bundles")
        for line in _lines(given):
            candidates = [given.parent / line, reports / line]
            found = next((c.resolve() for c in candidates if c.is_dir()), None)
            if found is None:
                raise HeteroError(f"baseline file {given}: {line!r} names no bundle (looked in {given.parent} and "
                                  f"{reports})", hint="fix the line or remove it")
            out.setdefault(found, f"baseline: listed in {given}")
    return out


def plan(reports: Path, *, keep: int | None, older_than_s: float | None, baselines: list[Path],
         now: float | None = None) -> list[Decision]:
    """One Decision per run folder, newest first. A folder is removed only when no rule keeps it: it is not
    among the ``keep`` newest finished bundles (when given), not younger than ``older_than_s`` (when given), not
    protected. Raises HeteroError when neither rule is given, ``keep`` < 0, or ``reports`` is not a folder."""
    if keep is None and older_than_s is None:
        raise HeteroError("give --keep N and/or --older-than DURATION",
                          hint="a bare prune would remove every bundle that is not a baseline")
    if keep is not None and keep < 0:
        raise HeteroError(f"--keep {keep}: must be 0 or more", hint="e.g. --keep 20")
    if not reports.is_dir():
        raise HeteroError(f"{reports}: no such reports folder", hint="give the folder runs write to (reports/)")
    now = time.time() if now is None else now
    guarded = protected(reports, baselines)
    folders = sorted(run_folders(reports), key=_time, reverse=True)
    finished = [f for f in folders if (f / "evidence.json").is_file()]
    newest = set(finished[:keep]) if keep is not None else set()
    out = []
    for folder in folders:
        age = max(0.0, now - _time(folder))
        why = guarded.get(folder.resolve())
        if why is None and folder in newest:
            why = f"one of the {keep} newest"
        if why is None and older_than_s is not None and age < older_than_s:
            why = f"younger than {older_than_s:g} s"
        if why is None and not (folder / "evidence.json").is_file() and older_than_s is None:
            why = "no evidence.json yet (a run in progress?): only --older-than removes it"
        out.append(Decision(folder, "keep" if why else "remove", why or "no rule keeps it", age))
    return out


def remove(decision: Decision) -> str | None:
    """Delete the run folder of a ``remove`` decision; the error in words, or None."""
    try:
        shutil.rmtree(decision.path)
    except OSError as exc:
        return str(exc)
    return None
