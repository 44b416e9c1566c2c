"""Each item's CTRF test and JUnit testcase, rendered while the run goes on, so the finish only joins them.

The controller's :class:`~pytest_hetero.evidence.recorder.Recorder` hands every item line it writes to the
journal (sealed: its bytes and MAC) to :meth:`ItemTexts.add`, which parses the line exactly as assembly will
read it back (:func:`pytest_hetero.evidence.journal.parse_line`) and renders the item's CTRF test
(:func:`pytest_hetero.reporting.ctrf.ctrf_test` through :func:`~pytest_hetero.reporting.view.json_text`) and
JUnit testcase (:func:`pytest_hetero.reporting.junit.case_xml`). The texts go to an anonymous temporary file
(no name any other process could open; removed when closed), so memory holds one offset per item, not its
texts.

A text is used at the finish only for an item whose journal line was authenticated with the run's key and
whose MAC is the one this process sealed (:meth:`ItemTexts.bind`): the text was rendered from exactly those
bytes, so it is the text the finish would render from the assembled item. Anything else (an item journaled by
another process, a journal read without the key, a line that failed to render here) is rendered at the finish
as before. ``hetero report --from-journal`` has no texts and renders everything.
"""

from __future__ import annotations

import mmap
import struct
import tempfile
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, cast

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import Entry
    from pytest_hetero.evidence.journal import JournalRead

_HEAD = struct.Struct("<II")
"""A record's head in the spool: the byte lengths of its CTRF text and its JUnit text (UTF-8), which follow."""


class ItemTexts:
    """The rendered texts of the items this process journaled (see the module docstring)."""

    def __init__(self) -> None:
        self._spool: IO[bytes] | None = None
        self._size = 0
        self._at: dict[bytes, int] = {}  # line MAC (its 32 bytes: half a hex str's size) -> offset of the item's record
        self._bound: dict[str, int] = {}  # nodeid -> offset, for the items assembly took from those lines
        self._view: mmap.mmap | None = None
        self.rendered = 0
        """Items rendered by :meth:`add`."""
        self.bound = 0
        """Assembled items the last :meth:`bind` found texts for (the rest are rendered at the finish)."""
        self.broken = ""
        """Why texts are no longer kept (the spool could not be written, a rendering failed); empty while they
        are. The finish then renders every item itself."""

    def add(self, line: bytes) -> None:
        """Render the item of ``line`` (one item line as the recorder wrote it, newline included) and keep its
        texts under the line's MAC. Never raises: a failure is noted in :attr:`broken`, every text is dropped
        and the finish renders them all (it raises there, where a rendering error is reported)."""
        if self.broken:
            return
        from pytest_hetero.evidence.journal import parse_line
        from pytest_hetero.reporting.ctrf import ctrf_test
        from pytest_hetero.reporting.junit import case_xml
        from pytest_hetero.reporting.view import json_text

        try:
            entry, _body, mac, why = parse_line(line)
            if entry is None or not mac:
                raise ValueError(why or "the line has no MAC")
            item = cast("Entry", entry["evidence"])
            ctrf = json_text(ctrf_test(item)).encode("utf-8", "surrogatepass")
            junit = case_xml(item).encode("utf-8", "surrogatepass")
            if self._spool is None:
                self._spool = tempfile.TemporaryFile()  # O_TMPFILE / unlinked at once: no name to open
            self._spool.write(_HEAD.pack(len(ctrf), len(junit)) + ctrf + junit)
        except Exception as exc:  # noqa: BLE001 - the run goes on; the finish renders (and reports) it
            self.broken = f"{type(exc).__name__}: {exc}"
            self.close()
            return
        self._at[bytes.fromhex(mac)] = self._size
        self._size += _HEAD.size + len(ctrf) + len(junit)
        self.rendered += 1

    def bind(self, read: JournalRead, lines: Iterable[tuple[str, int]]) -> None:
        """Note which journal line each assembled item came from: ``lines`` are ``(nodeid, seq)`` of the item
        lines assembly took; an item is bound to its texts only when ``read`` authenticated its line and the
        line's MAC is one :meth:`add` kept. Binding again replaces what was bound."""
        self._bound, self.bound = {}, 0
        if self.broken or self._spool is None or not read.authenticated:
            return
        for nodeid, seq in lines:
            at = self._at.get(_mac_key(read.mac_of(seq)))
            if at is not None:
                self._bound[nodeid] = at
        self.bound = len(self._bound)
        self._spool.flush()
        if self._view is not None:
            self._view.close()
        self._view = mmap.mmap(self._spool.fileno(), 0, access=mmap.ACCESS_READ) if self._size else None

    def kept(self, entry: Entry) -> int | None:
        """Where the texts of the item ``entry`` are kept (for :meth:`ctrf_at`, :meth:`junit_at`: a number that
        holds nothing of the item); None when they are not (an untested-only entry, an item not bound)."""
        at = self._bound.get(entry["nodeid"])
        if at is None or self._view is None or "records" not in entry:  # an untested-only entry: no item
            return None
        return at

    def ctrf(self, entry: Entry) -> str | None:
        """The CTRF test text of the item ``entry`` (``json_text(ctrf_test(entry))``), None when not kept."""
        at = self.kept(entry)
        return None if at is None else self.ctrf_at(at)

    def junit(self, entry: Entry) -> str | None:
        """The JUnit testcase text of the item ``entry`` (``case_xml(entry)``), None when not kept."""
        at = self.kept(entry)
        return None if at is None else self.junit_at(at)

    def ctrf_at(self, at: int) -> str:
        """The CTRF test text kept at ``at`` (:meth:`kept`'s answer)."""
        view = self._bound_view()
        ctrf, _ = _HEAD.unpack_from(view, at)
        start = at + _HEAD.size
        return view[start:start + ctrf].decode("utf-8", "surrogatepass")

    def junit_at(self, at: int) -> str:
        """The JUnit testcase text kept at ``at`` (:meth:`kept`'s answer)."""
        view = self._bound_view()
        ctrf, junit = _HEAD.unpack_from(view, at)
        start = at + _HEAD.size + ctrf
        return view[start:start + junit].decode("utf-8", "surrogatepass")

    def _bound_view(self) -> mmap.mmap:
        """The texts' file, mapped by :meth:`bind`; ValueError when nothing is bound (closed, or never bound)."""
        if self._view is None:
            raise ValueError("no item texts are bound")
        return self._view

    def close(self) -> None:
        """Drop every text (the spool file goes with it); idempotent."""
        if self._view is not None:
            self._view.close()
            self._view = None
        if self._spool is not None:
            self._spool.close()
            self._spool = None
        self._at, self._bound = {}, {}


def _mac_key(mac: str | None) -> bytes:
    """The key :meth:`ItemTexts.add` keeps a line's texts under: the bytes of its MAC (64 hex digits, as
    :func:`~pytest_hetero.evidence.journal.parse_line` finds it); empty, a key never kept, for None or a MAC
    that is not hex."""
    try:
        return bytes.fromhex(mac) if mac else b""
    except ValueError:
        return b""
