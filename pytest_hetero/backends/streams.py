"""A model run's stdout/stderr kept within a memory cap while it streams (head and tail, full size and sha256).

A model that prints hundreds of MB must not take the harness's memory with it: each stream keeps
its first and last ``cap // 2`` bytes and counts and hashes everything, so the evidence still
states the full size and digest (``details["stdout_bytes"]``, ``details["stdout_sha256"]``).
"""

from __future__ import annotations

import hashlib
import re
from collections import deque

STREAM_CAP_BYTES = 16 * 1024 * 1024
"""Most bytes of one stream of a model run held in memory (head + tail halves)."""


EDGE_BYTES = 4096
"""Most bytes of a partial word dropped on each side of a cut (a longer run without white space is kept)."""
_SPACE = re.compile(rb"\s")


def _trim_end(data: bytes) -> bytes:
    """``data`` without its last partial word (bytes after the last white space, if within EDGE_BYTES)."""
    window = data[-EDGE_BYTES:]
    found = [m.start() for m in _SPACE.finditer(window)]
    if not found:
        return data if len(data) > EDGE_BYTES else b""
    return data[:len(data) - len(window) + found[-1] + 1]


def _trim_start(data: bytes) -> bytes:
    """``data`` without its first partial word (bytes before the first white space, if within EDGE_BYTES)."""
    found = _SPACE.search(data, 0, EDGE_BYTES)
    if found is None:
        return data if len(data) > EDGE_BYTES else b""
    return data[found.start():]


class CappedStream:
    """Collect a byte stream: the first and last ``cap // 2`` bytes, the total size and sha256.

    ``add(chunk)`` is O(len(chunk)); memory stays under ``cap`` plus one chunk.
    """

    def __init__(self, cap: int = STREAM_CAP_BYTES) -> None:
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_len = 0
        self.total = 0
        self.sha256 = hashlib.sha256()

    def add(self, chunk: bytes | None) -> None:
        """Append ``chunk`` (None and b"" are ignored)."""
        if not chunk:
            return
        self.total += len(chunk)
        self.sha256.update(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail.append(chunk)
            self.tail_len += len(chunk)
            while self.tail_len - len(self.tail[0]) >= self.half:
                self.tail_len -= len(self.tail.popleft())

    @property
    def capped(self) -> bool:
        """True when bytes were dropped (more than head + tail came through)."""
        return self.total > len(self.head) + min(self.tail_len, self.half)

    def text(self) -> str:
        """The kept bytes as text (UTF-8, invalid bytes replaced); a dropped middle is marked
        ``… [N bytes not kept] …``. At a cut, the partial word on each side (up to
        :data:`EDGE_BYTES` without white space) is dropped too: a token cut in two would otherwise
        leave a prefix that no redaction pattern recognises."""
        tail = b"".join(self.tail)
        if self.tail_len > self.half:
            tail = tail[-self.half:]
        head = bytes(self.head)
        cut = self.total - len(head) - len(tail)
        if cut <= 0:
            return (head + tail).decode("utf-8", "replace")
        head, tail = _trim_end(head), _trim_start(tail)
        cut = self.total - len(head) - len(tail)
        return (head.decode("utf-8", "replace") + f"\n… [{cut} bytes not kept] …\n"
                + tail.decode("utf-8", "replace"))

    def data(self) -> bytes | None:
        """Every byte that came through, in order, when none was dropped (``total`` at most the cap); else None.
        One copy of the kept bytes is built (both are held until the stream is dropped: twice their size)."""
        if self.capped:
            return None
        return b"".join((self.head, *self.tail))

    def facts(self, name: str) -> dict[str, object]:
        """``{"<name>_bytes": total, "<name>_sha256": hex, "<name>_capped": bool}`` for ExecResult details."""
        return {f"{name}_bytes": self.total, f"{name}_sha256": self.sha256.hexdigest(), f"{name}_capped": self.capped}

MAX_OUTPUTS_BYTES = 64 * 1024 * 1024
"""Largest outputs file read back from a model run (it is held in memory); a larger one is refused by its size."""
