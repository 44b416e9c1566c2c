"""Shared helpers of the block readers: the paste's lines and a finding constructor."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pytest_hetero.explain.blocks import Piece
from pytest_hetero.explain.model import Finding, SourceLine, Value
from pytest_hetero.judge.failures import TABLE, UNDETERMINED

TIMESTAMP = re.compile(
    r"(?P<ts>"
    r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"  # ISO / MindIE
    r"|\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d(?:\.\d+)*"  # CANN plog 2025-05-13-02:25:58.068.817
    r"|\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?"  # Go log
    r"|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+"  # klog
    r"|(?:[A-Z][a-z]{2} ){1,2}[ \d]?\d \d\d:\d\d:\d\d(?: \d{4})?"  # syslog / ctime
    r"|\b\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?"  # vLLM 03-24 14:38:36
    r")"
)
"""Wall-clock timestamps as log lines print them (kept verbatim)."""


def line_timestamp(line: str) -> str | None:
    """The first wall-clock timestamp printed on ``line``, verbatim, or None."""
    m = TIMESTAMP.search(line)
    return m.group("ts") if m else None


def first_line(lines: list[str], pid: int | None, template: str) -> list[int]:
    """``[i]`` for the first line ``i`` where ``template`` (a regex with ``{}`` for the pid) matches, ``[]``
    when none does or ``pid`` is None. Lines without the pid's digits are skipped before the regex."""
    if pid is None:
        return []
    digits = str(pid)
    pattern = re.compile(template.format(digits))
    return next(([i] for i, ln in enumerate(lines) if digits in ln and pattern.search(ln)), [])


class UnknownFailure(LookupError):
    """A reader named a failure category the failure table does not have (a bug of the reader)."""


@dataclass
class Ctx:
    """The paste being read: ``raw`` lines (exact text) and ``clean`` lines (no ANSI, no trailing space)."""

    raw: list[str]
    clean: list[str]

    def lines(self, piece: Piece) -> list[str]:
        """The clean lines of ``piece``."""
        return self.clean[piece.start : piece.end]

    def src(self, indexes: Iterable[int], base: int = 0) -> tuple[SourceLine, ...]:
        """Source lines for 0-based ``indexes`` relative to ``base`` (sorted, de-duplicated)."""
        return tuple(SourceLine(base + i + 1, self.raw[base + i]) for i in sorted(set(indexes)))

    def span(self, piece: Piece, limit: int | None = None) -> tuple[SourceLine, ...]:
        """Every non-blank line of ``piece``, or its first ``limit`` non-blank lines (``span(p)[:limit]``
        without building the rest)."""
        if limit is None:
            return tuple(SourceLine(i + 1, self.raw[i]) for i in range(piece.start, piece.end) if self.clean[i].strip())
        out: list[SourceLine] = []
        for i in range(piece.start, piece.end):
            if len(out) >= limit:
                break
            if self.clean[i].strip():
                out.append(SourceLine(i + 1, self.raw[i]))
        return tuple(out)


def make(
    kind: str,
    code: str,
    *,
    category: str,
    failure: str | None = None,
    severity: str,
    meaning: str,
    lines: tuple[SourceLine, ...] = (),
    entity: Mapping[str, object] | None = None,
    timestamps: Iterable[str | None] = (),
    count: int | None = None,
    age: str | None = None,
    quantities: Mapping[str, Value] | None = None,
) -> Finding:
    """Build a :class:`Finding`: entity values become strings and Nones are dropped; timestamps keep
    the first and the last distinct one; quantities whose value is None are dropped. ``failure`` is the
    failure-table category of an unhealthy fact (the table, not the reader, gives its owner); a key the
    table does not have raises :class:`UnknownFailure` (a reader's bug; not caught by ``explain_text``)."""
    if failure is not None and failure not in TABLE and failure not in UNDETERMINED:
        raise UnknownFailure(f"{failure!r} is not a failure-table category (pytest_hetero/judge/failures.py)")
    stamps = [t for t in timestamps if t]
    kept: tuple[str, ...] = ()
    if stamps:
        kept = (stamps[0],) if stamps[0] == stamps[-1] else (stamps[0], stamps[-1])
    return Finding(
        kind=kind,
        code=code,
        category=category,
        failure=failure,
        severity=severity,
        meaning=meaning,
        entity={k: str(v) for k, v in (entity or {}).items() if v is not None and v != ""},
        timestamps=kept,
        count=count,
        age=age,
        quantities={k: v for k, v in (quantities or {}).items() if v is not None},
        lines=lines,
    )
