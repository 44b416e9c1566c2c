"""Reading a bundle that may be hostile: only regular files inside it, never past a size bound.

A bundle arrives from elsewhere (a CI artifact, a shard, an auditor's copy), so every name in it may
be a FIFO (an ``open`` that never returns), a device (``/dev/zero``: endless bytes), a symlink out of
the folder, or a file far larger than any bundle writes. Every read of the verifier goes through
:func:`read_regular`, which opens each path component relative to its parent directory's descriptor
with ``O_NOFOLLOW`` (a symlinked folder is refused, not followed), opens the file itself
``O_NONBLOCK`` (a FIFO opens at once instead of waiting for a writer), checks with ``fstat`` that it
is a regular file, and reads at most ``limit`` bytes. :func:`loads_bounded` parses JSON whose
nesting or encoding is hostile into a named :class:`Unreadable`, never a ``RecursionError``.

:func:`printable_name` is how the verifier prints any name it found in a bundle: control, format
(bidi, zero-width) and separator characters are escaped, so a file name holding ESC sequences or a
newline cannot paint a fake ``OK`` on the terminal.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import unicodedata
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

MIB = 1 << 20
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_CHUNK = 4 * MIB
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


class Unreadable(Exception):  # noqa: N818 - a verification outcome, not a programming error
    """A bundle file that cannot be read as evidence: ``kind`` is ``missing``, ``unsafe`` (symlink,
    FIFO, device, socket, a folder where a file belongs, a path leaving the bundle), ``oversize`` or
    ``malformed`` (not JSON, nested too deep, not UTF-8); ``detail`` says which and why."""

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind
        self.detail = detail
        super().__init__(f"{kind}: {detail}")


def file_kind(mode: int) -> str:
    """Human name of the file type in ``mode`` (``st_mode``): regular file, directory, symlink, FIFO…"""
    for test, name in ((stat.S_ISREG, "regular file"), (stat.S_ISDIR, "directory"), (stat.S_ISLNK, "symlink"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def safe_relative(rel: str) -> bool:
    """True when ``rel`` is a relative POSIX path that stays inside the bundle (no ``..``, no
    absolute path, no backslash, no empty or ``.`` component)."""
    if not rel or "\\" in rel or "\x00" in rel:
        return False
    pure = PurePosixPath(rel)
    return not pure.is_absolute() and all(part not in ("..", ".", "") for part in rel.split("/"))


def open_in(bundle_dir: Path, rel: str) -> int:
    """Open the regular file ``rel`` inside ``bundle_dir`` for reading without following any symlink
    and without blocking; return the descriptor (the caller closes it).

    Raises :class:`Unreadable` (``missing``, or ``unsafe`` naming the file type found).
    """
    if not safe_relative(rel):
        raise Unreadable("unsafe", "the path leaves the bundle or is not a plain relative path")
    parts = rel.split("/")
    try:
        fd = os.open(bundle_dir, _OPEN_DIR & ~os.O_NOFOLLOW)
    except OSError as exc:
        raise Unreadable("missing", f"the bundle folder cannot be opened ({exc.strerror})") from None
    try:
        for part in parts[:-1]:
            try:
                sub = os.open(part, _OPEN_DIR, dir_fd=fd)
            except OSError as exc:
                raise _open_error(exc, fd, part) from None
            os.close(fd)
            fd = sub
        try:
            file_fd = os.open(parts[-1], _OPEN_FILE, dir_fd=fd)
        except OSError as exc:
            raise _open_error(exc, fd, parts[-1]) from None
    finally:
        os.close(fd)
    mode = os.fstat(file_fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(file_fd)
        raise Unreadable("unsafe", f"a {file_kind(mode)}, not a regular file")
    return file_fd


def _open_error(exc: OSError, dir_fd: int, name: str) -> Unreadable:
    try:
        mode = os.lstat(name, dir_fd=dir_fd).st_mode
    except OSError:
        return Unreadable("missing", "not in the bundle")
    return Unreadable("unsafe", f"a {file_kind(mode)}, not a regular file or folder ({exc.strerror})")


def _chunks(fd: int, most: int) -> Iterator[bytes]:
    """What ``fd`` holds from its offset, in chunks of at most ``_CHUNK`` bytes, ``most`` bytes at most."""
    left = most
    while left > 0:
        chunk = os.read(fd, min(left, _CHUNK))
        if not chunk:
            return
        yield chunk
        left -= len(chunk)


def read_fd(fd: int, limit: int) -> bytes:
    """Read at most ``limit`` bytes from ``fd``; raises Unreadable(``oversize``) when there is more."""
    data = b"".join(_chunks(fd, limit + 1))
    if len(data) > limit:
        raise Unreadable("oversize", f"larger than {limit} bytes, the most this file may hold")
    return data


def read_regular(bundle_dir: Path, rel: str, limit: int) -> bytes:
    """The bytes of the regular file ``rel`` inside ``bundle_dir``, at most ``limit`` bytes.
    Raises :class:`Unreadable` (missing, unsafe, oversize)."""
    fd = open_in(bundle_dir, rel)
    try:
        if os.fstat(fd).st_size > limit:  # refused before reading a byte
            raise Unreadable("oversize", f"larger than {limit} bytes, the most this file may hold")
        return read_fd(fd, limit)
    finally:
        os.close(fd)


def read_local(path: Path, limit: int) -> bytes:
    """The bytes of a file the operator named (a trust policy, its signature), which may sit beside a
    hostile bundle: opened without blocking (a FIFO does not hang), refused unless a regular file of at
    most ``limit`` bytes. Symlinks are followed (the operator chose the path). Raises :class:`Unreadable`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise Unreadable("missing", f"cannot be opened ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable("unsafe", f"a {file_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise Unreadable("oversize", f"larger than {limit} bytes, the most this file may hold")
        return read_fd(fd, limit)
    finally:
        os.close(fd)


def hash_fd(fd: int, limit: int) -> tuple[str, int]:
    """(hex sha256, size) of what ``fd`` holds, reading at most ``limit`` + 1 bytes: a size above
    ``limit`` is returned as ``limit + 1`` (the caller compares it with the expected size)."""
    digest = hashlib.sha256()
    size = 0
    for chunk in _chunks(fd, limit + 1):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


def _no_constant(token: str) -> Any:
    """``json.loads`` hook for the non-standard tokens NaN, Infinity and -Infinity: refuses them."""
    raise ValueError(f"non-standard token {token} (RFC 8259 has no NaN or Infinity)")


def loads_bounded(data: bytes, what: str) -> Any:
    """Parse ``data`` as UTF-8 JSON (RFC 8259). Raises :class:`Unreadable` (``malformed``) naming ``what`` for
    bytes that are not UTF-8 JSON, for ``NaN``/``Infinity``/``-Infinity`` (not JSON; the gate never writes
    them) and for nesting deeper than the parser's recursion limit."""
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise Unreadable("malformed", f"{what} is not UTF-8") from None
    except RecursionError:
        raise Unreadable("malformed", f"{what} is nested too deeply to be evidence") from None
    except ValueError as exc:
        raise Unreadable("malformed", f"{what} is not JSON ({exc})") from None


def printable_name(text: str) -> str:
    """``text`` with every control, format (bidi, zero-width), private-use, unassigned and line/
    paragraph separator character, and backslash, written as a Python-style escape (``\\x1b``,
    ``\\u202e``); other text is unchanged. Names from a bundle are printed through it."""
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif unicodedata.category(ch) in _ESCAPED_CATEGORIES:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)
