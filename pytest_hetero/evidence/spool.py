"""The evidence document's items kept on disk, read back one at a time: a run's memory stays flat in items.

An assembled document (:func:`pytest_hetero.evidence.recorder.assemble`) holds its ``items`` as an
:class:`ItemSpool`: every item's evidence as one line of compact JSON (sorted keys, ASCII: the exact text
evidence.json holds for it) in an anonymous temporary file (``O_TMPFILE``: no name, nobody else opens it),
ordered by nodeid. It is a read-only :class:`~collections.abc.Sequence` of item dicts: iterating parses one
line at a time, ``spool[n]`` parses line ``n``, and each read gives a fresh dict, so a change to one is not
kept. At 10,000 model items the dicts were ~400 MiB held through the whole finish; the spool holds two
integers per item.

:class:`Subset` is a sequence of some of a spool's items (a matrix's), read back the same way.
"""

from __future__ import annotations

import json
import os
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import ItemDict

__all__ = ["ItemSpool", "Subset", "encode_item", "pick", "where"]

encode_item: Callable[[object], str] = json.JSONEncoder(sort_keys=True, separators=(",", ":"),
                                                        allow_nan=False).encode
"""An item's text in evidence.json (and in the spool): compact, sorted keys, ASCII, no NaN or ±Infinity."""
_encode_nonfinite = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode
_READ = 1 << 20
"""Bytes read at a time when iterating."""


class ItemSpool(Sequence["ItemDict"]):
    """Item dicts on disk, one JSON line each (see the module docstring). Fill with :meth:`add`, then put them
    in their final order once with :meth:`order`; only then read. Raises OSError when the temporary file cannot
    be written or read (a full disk)."""

    def __init__(self) -> None:
        self._fh = tempfile.TemporaryFile(prefix="hetero-items-")
        self._starts = array("q")
        self._sizes = array("q")
        self._nonfinite: set[int] = set()
        self._end = 0
        self._nodeids: list[str] = []

    def add(self, item: ItemDict | dict[str, Any]) -> tuple[int, bytes]:
        """Append ``item`` (an item the journal's line check accepted: its ``nodeid`` a string); return its number
        (0, 1, … in the order added) and its JSON text (ASCII bytes). An item holding a NaN or ±Infinity is kept
        (evidence.json refuses it when written: :meth:`lines`)."""
        try:
            text = encode_item(item)
        except ValueError:  # a NaN or ±Infinity a hand-made line carried: written as JSON's extension, refused later
            text = _encode_nonfinite(item)
            self._nonfinite.add(len(self._starts))
        data = text.encode("ascii") + b"\n"
        self._fh.write(data)
        self._starts.append(self._end)
        self._sizes.append(len(data) - 1)
        self._end += len(data)
        self._nodeids.append(str(item["nodeid"]))
        return len(self._starts) - 1, data[:-1]

    def order(self, numbers: Iterable[int]) -> None:
        """Keep only the items ``numbers`` (as :meth:`add` numbered them), in that order: the file is rewritten
        in that order, so iterating reads it front to back."""
        self._fh.flush()
        old, starts, sizes = self._fh, self._starts, self._sizes
        nonfinite, nodeids = self._nonfinite, self._nodeids
        self._fh, self._starts, self._sizes, self._nonfinite, self._end, self._nodeids = (
            tempfile.TemporaryFile(prefix="hetero-items-"), array("q"), array("q"), set(), 0, [])
        fd = old.fileno()
        with old:
            for number in numbers:
                data = os.pread(fd, sizes[number] + 1, starts[number])
                if number in nonfinite:
                    self._nonfinite.add(len(self._starts))
                self._fh.write(data)
                self._starts.append(self._end)
                self._sizes.append(sizes[number])
                self._nodeids.append(nodeids[number])
                self._end += len(data)
        self._fh.flush()

    def close(self) -> None:
        """Remove the file (the sequence is empty afterwards)."""
        self._fh.close()
        self._starts, self._sizes, self._end, self._nodeids = array("q"), array("q"), 0, []

    def nodeids(self) -> list[str]:
        """Each item's nodeid, in order (kept in memory: a pass over the items need not read them for it)."""
        return list(self._nodeids)

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> ItemDict: ...

    @overload
    def __getitem__(self, index: slice) -> list[ItemDict]: ...

    def __getitem__(self, index: int | slice) -> ItemDict | list[ItemDict]:
        if isinstance(index, slice):
            return [self[n] for n in range(*index.indices(len(self)))]
        n = range(len(self))[index]  # IndexError as a list's
        self._fh.flush()
        loaded: ItemDict = json.loads(os.pread(self._fh.fileno(), self._sizes[n], self._starts[n]))
        return loaded

    def __iter__(self) -> Iterator[ItemDict]:
        for line in self.lines():
            yield json.loads(line)

    def lines(self, check: bool = False) -> Iterator[bytes]:
        """Each item's JSON text (ASCII bytes, no newline), in order: what evidence.json holds for it. With
        ``check``, an item holding a NaN or ±Infinity raises ValueError (evidence.json is RFC 8259 JSON)."""
        self._fh.flush()
        fd, n, at, buffer = self._fh.fileno(), 0, 0, b""
        while n < len(self._starts):
            chunk = os.pread(fd, _READ, at)
            if not chunk:
                raise OSError(f"the item spool ended at byte {at}, before item {n}")
            at += len(chunk)
            buffer += chunk
            lines = buffer.split(b"\n")
            buffer = lines.pop()
            for line in lines:
                if check and n in self._nonfinite:
                    raise ValueError("Out of range float values are not JSON compliant")
                n += 1
                yield line

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (ItemSpool, list, Subset)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return f"<ItemSpool of {len(self)} items>"


class Subset(Sequence["ItemDict"]):
    """The items ``numbers`` of ``items`` (positions in it), in that order, read from it on each access."""

    def __init__(self, items: Sequence[ItemDict], numbers: Sequence[int]) -> None:
        self._items, self._numbers = items, numbers

    def __len__(self) -> int:
        return len(self._numbers)

    @overload
    def __getitem__(self, index: int) -> ItemDict: ...

    @overload
    def __getitem__(self, index: slice) -> list[ItemDict]: ...

    def __getitem__(self, index: int | slice) -> ItemDict | list[ItemDict]:
        if isinstance(index, slice):
            return [self._items[n] for n in self._numbers[index]]
        return self._items[self._numbers[index]]

    def __iter__(self) -> Iterator[ItemDict]:
        numbers = self._numbers
        if not isinstance(self._items, ItemSpool) or any(a >= b for a, b in zip(numbers, numbers[1:], strict=False)):
            yield from (self._items[n] for n in numbers)
            return
        wanted = iter(numbers)  # ascending (a filter's): one pass over the spool, front to back
        want = next(wanted, None)
        for n, line in enumerate(self._items.lines()):
            if want is None:
                return
            if n == want:
                yield json.loads(line)
                want = next(wanted, None)

    def __repr__(self) -> str:
        return f"<Subset of {len(self)} items>"


def pick(items: Sequence[ItemDict], numbers: list[int]) -> Sequence[ItemDict]:
    """The items at positions ``numbers`` of ``items``: a list for a list (the same dicts), else a :class:`Subset`
    read back from the spool on each pass, not held (a subset of a subset reads the spool directly)."""
    if isinstance(items, list):
        return [items[n] for n in numbers]
    if isinstance(items, Subset) and isinstance(items._items, ItemSpool):
        return Subset(items._items, [items._numbers[n] for n in numbers])
    return Subset(items, numbers)


def where(items: Sequence[ItemDict], keep: Callable[[ItemDict], bool]) -> Sequence[ItemDict]:
    """The items of ``items`` for which ``keep`` is true (see :func:`pick`)."""
    return pick(items, [n for n, i in enumerate(items) if keep(i)])
