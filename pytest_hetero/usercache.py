"""Where the gate keeps what it can derive again, and how a cached entry names what it was derived from.

Everything under :func:`cache_dir` is an optimisation: deleting it costs time, never a result. An entry is
named by the digest of its inputs, so a changed input is a miss, not a stale answer.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """``$XDG_CACHE_HOME/pytest-hetero/<parts…>`` (default ``~/.cache``); not created here."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "pytest-hetero", *parts)


def installed_files(package: str) -> str | None:
    """The hex sha256 naming the installed files of ``package``: path, size, mtime and inode of its
    ``__init__.py`` (its origin) and of its folder, so a reinstall or an upgrade changes it. Found without
    importing the package (its metadata's version costs 30-40 ms); None when it is not installed or a file
    cannot be read."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        return None
    digest = hashlib.sha256()
    for path in (spec.origin, os.path.dirname(spec.origin)):
        try:
            st = os.stat(path)
        except OSError:
            return None
        digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\0".encode())
    return digest.hexdigest()
