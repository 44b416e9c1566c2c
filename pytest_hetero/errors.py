"""One error tree for pytest-hetero.

Every error a user can cause names where (file, line, column, field) and how to fix it.
Code that reads user input raises a subclass of :class:`HeteroError`; the pytest glue
and the ``hetero`` command turn it into one readable message, never a traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """Where an error is: ``file`` path, 1-based ``line``/``column`` (0 = unknown), dotted ``field``."""

    file: str = ""
    line: int = 0
    column: int = 0
    field: str = ""

    def __str__(self) -> str:
        where = self.file or "<input>"
        if self.line:
            where += f":{self.line}"
            if self.column:
                where += f":{self.column}"
        if self.field:
            where += f": field '{self.field}'"
        return where


class HeteroError(Exception):
    """Base of all user-facing errors: ``message`` plus optional ``location`` and ``hint``."""

    def __init__(self, message: str, location: Location | None = None, hint: str = "") -> None:
        self.message = message
        self.location = location or Location()
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        """Return ``<file>:<line>:<col>: field 'x': message (hint: ...)`` on one or two lines."""
        text = f"{self.location}: {self.message}" if self.location != Location() else self.message
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class MatrixError(HeteroError):
    """A validation matrix is malformed or invalid (YAML syntax, schema, references)."""


class CaseError(HeteroError):
    """A business-rule case file is malformed or its rules cannot be evaluated."""


class ParseError(HeteroError):
    """Captured tool output (nvidia-smi, npu-smi, kubectl, events) cannot be read at all."""


class BackendError(HeteroError):
    """A backend (local, docker, kubernetes) is unreachable or refused a call."""


class SettingsError(HeteroError):
    """A command-line option, ini key or environment variable has a bad value."""


class BundleError(HeteroError):
    """An evidence bundle is missing, unreadable, tampered or fails verification."""


class ManyProblems(HeteroError):
    """Mixin for "several problems in one file": ``problems`` keeps each, sorted by line; the
    error reads as the first one, and :meth:`render` lists them all under a count."""

    def __init__(self, problems: Sequence[HeteroError]) -> None:
        self.problems = sorted(problems, key=lambda p: (p.location.line, p.location.column))
        first = self.problems[0]
        super().__init__(first.message, first.location, first.hint)

    def render(self) -> str:
        """Return every problem, one block each, prefixed with the count (one problem: just it)."""
        if len(self.problems) == 1:
            return self.problems[0].render()
        head = f"{len(self.problems)} problems in {self.problems[0].location.file}:"
        return "\n".join([head, *(p.render() for p in self.problems)])


class MatrixInvalid(ManyProblems, MatrixError):
    """Several problems found in one matrix file (see :class:`ManyProblems`)."""


class RulesInvalid(ManyProblems, CaseError):
    """Several problems found in one AcceptanceRules file (see :class:`ManyProblems`)."""
