"""The one reader of every file the gate takes from outside: bundles, journals, matrices, acceptance
files, trust policies, keys, captured tool output.

Any such file may be hostile: a FIFO (an ``open`` that never returns), a device (``/dev/zero``: endless
bytes), a symlink loop or a link out of a bundle, a sparse file of terabytes that holds nothing, or a
document nested or numbered to exhaust the parser. Every read goes through this module:

* :func:`read_file` / :func:`read_local` — a path the operator named (symlinks followed: the operator
  chose it; a loop is refused): opened ``O_NONBLOCK`` (a FIFO opens at once instead of waiting for a
  writer), refused unless ``fstat`` says regular file, refused by its size before a byte is read when
  larger than the bound (a sparse file is never read whole), read to at most the bound;
* :func:`read_regular` / :func:`open_in` — a name inside a bundle: each path component opened relative
  to its parent's descriptor with ``O_NOFOLLOW`` (a symlinked folder or file is refused, not followed);
* :func:`loads_bounded` — JSON (RFC 8259) whose nesting, numbers or encoding are hostile becomes a
  named :class:`Unreadable`, never a ``RecursionError`` or ``ValueError`` traceback.

A refusal always reads the same way (:func:`refusal`): ``<file>: cannot read <what>: <kind>: <detail>``
with a hint saying how to fix it; each caller raises it as its own error type.

:func:`printable_name` is how any name found in a bundle is printed: control, format (bidi,
zero-width) and separator characters are escaped, so a file name holding ESC sequences or a newline
cannot paint a fake ``OK`` on the terminal.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_hetero.errors import HeteroError, Location

MIB = 1 << 20
MAX_CAPTURE_BYTES = 64 * MIB
"""The most a captured tool output (``hetero explain|explain-pending|probe --from``) may hold."""
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


def _refused_open(path: Path | str, exc: OSError) -> Unreadable:
    """The :class:`Unreadable` for an ``open`` of the operator-named ``path`` that failed with ``exc``."""
    if exc.errno == errno.ELOOP:
        return Unreadable("unsafe", "a symlink loop (or a chain of more than 40 symlinks)")
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0
    if exc.errno in (errno.ENXIO, errno.EISDIR) or (mode and not stat.S_ISREG(mode)):
        return Unreadable("unsafe", f"a {file_kind(mode)}, not a regular file" if mode
                          else f"not a regular file ({exc.strerror})")
    if exc.errno == errno.ENOENT:
        return Unreadable("missing", "no such file" + (" (a symlink to nothing)" if os.path.islink(path) else ""))
    return Unreadable("missing", f"cannot be opened ({exc.strerror})")


def open_local(path: Path | str) -> int:
    """Open the file the operator named at ``path`` for reading without blocking; return the descriptor
    of a regular file (the caller closes it). Symlinks are followed (the operator chose the path); a
    symlink loop, a FIFO, a device, a socket or a folder is refused. Raises :class:`Unreadable`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _refused_open(path, exc) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise Unreadable("unsafe", f"a {file_kind(mode)}, not a regular file")
    return fd


def read_local(path: Path | str, limit: int) -> bytes:
    """The bytes of a file the operator named (a matrix, a trust policy, a key, a journal), which may sit
    beside a hostile bundle or be one: see :func:`open_local`; refused by its size (a sparse file is never
    read) when over ``limit`` bytes, and never more than ``limit`` bytes read. Raises :class:`Unreadable`."""
    fd = open_local(path)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise Unreadable("oversize", f"{size} bytes, more than the {limit} a file of this kind may hold")
        return read_fd(fd, limit)
    finally:
        os.close(fd)


def resolved(path: Path) -> Path:
    """``path`` made absolute with symlinks resolved as far as they resolve: a symlink loop (where
    ``Path.resolve`` raises ``RuntimeError``) or an unreadable folder leaves that part as written, so
    the reader that opens it later refuses it by name instead of a traceback here."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):
        return Path(os.path.abspath(path))


FIXES: dict[str, str] = {
    "missing": "check the path",
    "unsafe": "give a regular file: FIFOs, devices, sockets, folders, symlink loops and links out of a bundle "
              "are refused",
    "oversize": "this is not a file the gate wrote or reads: check the path (each kind's size bound is in "
                "docs/safe-reading.md)",
    "malformed": "give the file as the gate (or its documentation) writes it",
}
"""The fix a refusal hints at, per :attr:`Unreadable.kind`."""


def refusal(path: Path | str, what: str, exc: Unreadable, error: type[HeteroError] = HeteroError,
            hint: str = "") -> HeteroError:
    """The one refusal text for the file ``path`` (``what`` it should have been, e.g. ``"the matrix"``):
    ``<path>: cannot read <what>: <kind>: <detail>`` with the fix as hint (``hint`` replaces the
    default one), as an ``error`` (a HeteroError subclass of the caller's)."""
    return error(f"cannot read {what}: {exc.kind}: {exc.detail}", Location(str(path)), hint or FIXES[exc.kind])


def read_source(source: str, what: str, limit: int = MAX_CAPTURE_BYTES,
                error: type[HeteroError] = HeteroError) -> bytes:
    """The bytes of ``source``: a file named on the command line (:func:`read_file`), or standard input
    for ``-`` (at most ``limit`` bytes read; more is refused as oversize)."""
    if source != "-":
        return read_file(source, what, limit, error)
    stream = getattr(sys.stdin, "buffer", None)  # a text stream without one (a test's StringIO): its text
    data = stream.read(limit + 1) if stream is not None else sys.stdin.read(limit + 1).encode("utf-8")
    if len(data) > limit:
        raise refusal("<standard input>", what, Unreadable("oversize", f"more than the {limit} bytes allowed"), error)
    return data


def read_file(path: Path | str, what: str, limit: int, error: type[HeteroError] = HeteroError) -> bytes:
    """:func:`read_local`, its refusal raised as ``error`` (see :func:`refusal`)."""
    try:
        return read_local(path, limit)
    except Unreadable as exc:
        raise refusal(path, what, exc, error) from None


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
    them), for nesting deeper than the parser's recursion limit (about 1,000 levels) and for an integer
    of more than ``sys.get_int_max_str_digits()`` (4,300) digits. The number of keys is bounded by the
    caller's size bound on ``data``."""
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise Unreadable("malformed", f"{what} is not UTF-8") from None
    except RecursionError:
        raise Unreadable("malformed", f"{what} is nested too deeply to be evidence") from None
    except ValueError as exc:
        if "integer string conversion" in str(exc):
            raise Unreadable("malformed", f"{what} holds a number of more than {sys.get_int_max_str_digits()} "
                                          "digits") from None
        raise Unreadable("malformed", f"{what} is not JSON ({str(exc)[:200]})") from None


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
