"""The sandbox's scan for input entries its user cannot read (:func:`~pytest_hetero.backends.sandbox.unreadable_inside`)
against the plain ``os.walk`` + ``Path.stat`` walk it replaced: the same first entry, for every limit, on a real tree of
folders, files, modes, symbolic links (to folders, to files, dangling) and skipped paths."""

from __future__ import annotations

import os
import random
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from pytest_hetero.backends.sandbox import readable_by, unreadable_inside

UID, GID = 65534, 65534


def plain_walk(path: Path, uid: int, gids: Iterable[int], skip: Sequence[Path], limit: int) -> Path | None:
    """The walk as written before (os.walk, a Path per entry, ``is_symlink`` then ``readable_by``)."""
    if not readable_by(path, uid, gids):
        return path
    if not path.is_dir():
        return None
    seen = 0
    for folder, dirs, files in os.walk(path):
        here = Path(folder)
        dirs[:] = [d for d in dirs if here / d not in skip and not (here / d).is_symlink()]
        for name in [*dirs, *files]:
            entry = here / name
            seen += 1
            if seen > limit:
                return None
            if entry in skip or entry.is_symlink():
                continue
            if not readable_by(entry, uid, gids):
                return entry
    return None


def make_tree(root: Path, rng: random.Random, depth: int = 0) -> list[Path]:
    """Folders and files under ``root`` with modes drawn from readable and unreadable ones, and links."""
    made: list[Path] = []
    for k in range(rng.randint(2, 6)):
        kind = rng.random()
        path = root / f"e{depth}-{k}"
        if kind < 0.3 and depth < 4:
            path.mkdir()
            made += [path, *make_tree(path, rng, depth + 1)]
        elif kind < 0.85:
            path.write_text("x")
            made.append(path)
        else:
            target = rng.choice([root, root / "missing", *(made or [root])])
            path.symlink_to(target)
    return made


@pytest.mark.skipif(os.geteuid() != 0, reason="modes and owners of other users are set as root")
@pytest.mark.parametrize("seed", range(12))
def test_the_scan_finds_the_same_first_unreadable_entry_as_the_plain_walk(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = tmp_path / "input"
    root.mkdir()
    made = make_tree(root, rng)
    for path in made:
        if rng.random() < 0.25:
            mode = rng.choice([0o700, 0o711, 0o600, 0o640, 0o604, 0o750, 0o755, 0o644])
            os.chmod(path, mode if path.is_dir() else mode & ~stat.S_IXOTH)
        if rng.random() < 0.1:
            os.chown(path, UID, 0)
        if rng.random() < 0.1:
            os.chown(path, 0, GID)
    skip = [p for p in made if rng.random() < 0.15]
    for limit in range(len(made) + 3):
        assert unreadable_inside(root, UID, [GID], skip, limit) == plain_walk(root, UID, [GID], skip, limit), limit
    found = plain_walk(root, UID, [GID], skip, 10**6)
    assert unreadable_inside(root, UID, [GID], skip) == found


@pytest.mark.skipif(os.geteuid() != 0, reason="modes and owners of other users are set as root")
def test_an_unreadable_entry_deep_inside_is_named(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (tmp_path / "a" / "ok").write_text("x")
    secret = deep / "key"
    secret.write_text("k")
    secret.chmod(0o600)
    assert unreadable_inside(tmp_path / "a", UID, [GID]) == secret
    assert unreadable_inside(tmp_path / "a", UID, [GID], [deep]) is None
    secret.chmod(0o644)
    assert unreadable_inside(tmp_path / "a", UID, [GID]) is None
