"""What ``hetero explain`` returns: :class:`Finding` records grouped in a :class:`Report`.

A finding is one fact a reader took from a paste: a device's state, an Xid burst on one GPU, a
scheduling refusal, a CUDA error in a container log, a node's advertised resources. Every finding
names its ``kind`` (the reader / block kind that produced it), a ``code``, the ``category`` of that
code, the ``failure`` category of an unhealthy fact (a key of the one failure table,
:data:`pytest_hetero.judge.failures.TABLE` or :data:`~pytest_hetero.judge.failures.UNDETERMINED`; ``None``
for healthy/informational facts, for text that was not recognised and for a fact no row fits), a ``severity``,
the entity it is
about, timestamps exactly as the source printed them, counts, ages, quantities, the source lines
(exact text and 1-based line numbers) and a one-line meaning. Readers never name an owner: ``owner`` (the
team that would act first: ``platform``, ``infrastructure``, ``algorithm``, ``business``) is the failure
table's row of ``failure``; an undetermined row gives no owner and names its candidates.

Severity: ``ok`` (healthy or informational), ``warning`` (degraded, the device or workload still
runs), ``error`` (unhealthy device, blocked or failed workload), ``unrecognised`` (readable text no
reader understood; never owned by a team).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

from pytest_hetero.judge.failures import UNDETERMINED, field_owner

Value: TypeAlias = "str | int | float | bool | None"
"""A quantity: numbers as read (units in the key name), strings as printed, booleans for yes/no."""

TEAMS: frozenset[str] = frozenset({"platform", "infrastructure", "algorithm", "business"})
"""The project's team names; every owned finding names one of them."""

SEVERITIES: tuple[str, ...] = ("ok", "warning", "error", "unrecognised")
"""Severity values, least to most interesting for a reader who has to act (unrecognised last)."""

UNHEALTHY: frozenset[str] = frozenset({"warning", "error"})
"""Severities that make ``hetero explain`` exit 1."""


@dataclass(frozen=True)
class SourceLine:
    """One input line: its 1-based ``number`` in the paste and its exact ``text`` (line ending removed)."""

    number: int
    text: str

    def to_dict(self) -> dict[str, int | str]:
        """Return ``{"number": n, "text": "..."}``."""
        return {"number": self.number, "text": self.text}


@dataclass(frozen=True)
class Finding:
    """One fact read from a paste (see the module docstring for the field vocabulary).

    ``entity`` keys in use: ``node``, ``gpu_index``, ``bus_id``, ``uuid``, ``gpu_name``, ``npu_id``,
    ``chip``, ``pod``, ``namespace``, ``container``, ``queue``, ``workload``, ``podgroup``, ``rank``,
    ``pid``, ``process``. ``timestamps`` are as printed, first and (when different) last.
    ``count`` is how many source records the finding groups (kernel lines, event repeats);
    ``age`` is the event age as kubectl printed it (``16s``, ``5d15h``). ``quantities`` keys carry
    their unit (``memory_total_mib``, ``power_w``, ``temperature_c``).
    """

    kind: str
    code: str
    category: str
    failure: str | None
    severity: str
    meaning: str
    entity: Mapping[str, str] = field(default_factory=dict)
    timestamps: tuple[str, ...] = ()
    count: int | None = None
    age: str | None = None
    quantities: Mapping[str, Value] = field(default_factory=dict)
    lines: tuple[SourceLine, ...] = ()

    @property
    def unhealthy(self) -> bool:
        """True for ``warning`` and ``error`` findings."""
        return self.severity in UNHEALTHY

    @property
    def owner(self) -> str | None:
        """The team the failure table gives ``failure`` (``image`` rows: the platform, the default image
        owner); None for no failure category and for an undetermined one."""
        owner = field_owner(self.failure)
        return "platform" if owner == "image" else owner

    @property
    def undetermined(self) -> bool:
        """True when the failure table says the text cannot decide the owner of ``failure``."""
        return self.failure in UNDETERMINED

    @property
    def owner_candidates(self) -> str | None:
        """For an undetermined ``failure``: the candidate owners and what to read next; else None."""
        row = UNDETERMINED.get(self.failure or "")
        return f"{row.candidates}; read next: {row.next}" if row else None

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-ready dict with every field (mappings as dicts, lines as dicts)."""
        return {
            "kind": self.kind,
            "code": self.code,
            "category": self.category,
            "failure": self.failure,
            "owner": self.owner if not self.undetermined else "undetermined",
            "owner_candidates": self.owner_candidates,
            "severity": self.severity,
            "meaning": self.meaning,
            "entity": dict(self.entity),
            "timestamps": list(self.timestamps),
            "count": self.count,
            "age": self.age,
            "quantities": dict(self.quantities),
            "lines": [line.to_dict() for line in self.lines],
        }


@dataclass(frozen=True)
class Block:
    """One part of a paste as the splitter cut it: ``kind``, first/last line (1-based, inclusive).

    ``recognised`` is False for text no reader understood (its findings are ``unrecognised``);
    ``command`` is the shell command printed just before the block, when there was one.
    """

    kind: str
    start: int
    end: int
    recognised: bool = True
    command: str | None = None

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-ready dict."""
        return {
            "kind": self.kind,
            "start": self.start,
            "end": self.end,
            "recognised": self.recognised,
            "command": self.command,
        }


@dataclass(frozen=True)
class Report:
    """Everything ``explain`` read from one paste.

    ``readable`` is False when nothing in the input could be read: empty input, binary data, or text
    in which no block was recognised (its ``unrecognised`` findings are still listed); ``reason``
    then says which.
    """

    findings: tuple[Finding, ...]
    blocks: tuple[Block, ...]
    readable: bool = True
    reason: str | None = None
    lines: int = 0

    @property
    def unhealthy(self) -> tuple[Finding, ...]:
        """The ``warning`` and ``error`` findings, in input order."""
        return tuple(f for f in self.findings if f.unhealthy)

    def exit_code(self) -> int:
        """2 when nothing was readable, 1 when a finding is unhealthy or blocking, else 0."""
        if not self.readable:
            return 2
        return 1 if self.unhealthy else 0

    def owners(self) -> tuple[str, ...]:
        """Teams named by unhealthy findings, most findings first (ties in first-seen order)."""
        counts = Counter(finding.owner for finding in self.unhealthy if finding.owner)
        return tuple(sorted(counts, key=lambda team: -counts[team]))

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-ready dict: ``exit_code``, ``readable``, ``reason``, ``lines``, ``blocks``, ``findings``."""
        return {
            "exit_code": self.exit_code(),
            "readable": self.readable,
            "reason": self.reason,
            "lines": self.lines,
            "owners": list(self.owners()),
            "blocks": [b.to_dict() for b in self.blocks],
            "findings": [f.to_dict() for f in self.findings],
        }
