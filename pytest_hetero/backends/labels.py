"""What every engine labels its objects with, and how ``hetero cleanup`` selects leftovers by them.

Neutral ground between engines (each engine imports this, never another engine): the label keys
(``pytest-hetero.run-id``, ``…owner``, ``…role``, ``…created-at``), the selection of objects by
``--run-id`` and ``--older-than``, and the report a backend's cleanup returns. Imports nothing
heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol, TypedDict

LABEL = "pytest-hetero."
RUN_ID = LABEL + "run-id"
OWNER = LABEL + "owner"
ROLE = LABEL + "role"
CREATED_AT = LABEL + "created-at"
"""UTC ``YYYY-mm-ddTHH:MM:SSZ`` (a Docker label; a Kubernetes annotation, since the value is no valid label value)."""
STAMP = "%Y-%m-%dT%H:%M:%S%z"
"""``strptime`` format of a ``created-at`` value (``Z`` parses as UTC)."""


def utc_stamp() -> str:
    """Now, UTC, ``YYYY-mm-ddTHH:MM:SSZ`` (the ``created-at`` format)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class CleanupError(Exception):
    """A backend cannot be reached or refuses to list its objects (``hetero cleanup`` exit code 2)."""


class Criteria(Protocol):
    """What selects leftovers: the parsed ``hetero cleanup`` arguments."""

    run_id: str | None
    """Only objects of this run (None: any run)."""
    older_than_s: float | None
    """Only objects older than this many seconds (None: any age)."""


class CleanupEntry(TypedDict):
    """One object a backend's cleanup selected: ``backend``, ``kind`` (``container``, ``pod``…), ``name``
    (``namespace/name`` on Kubernetes), its ``run_id`` label and ``created_at`` value (None: not labelled),
    ``age_s`` (seconds; None: unknown), ``removed`` (gone now) and the engine's ``error`` (None: none)."""

    backend: str
    kind: str
    name: str
    run_id: str | None
    created_at: str | None
    age_s: float | None
    removed: bool
    error: str | None


@dataclass
class CleanupReport:
    """What one backend's cleanup did: ``entries`` (:class:`CleanupEntry`), or ``error`` when the backend
    could not be reached or listed (then ``entries`` holds what was done before)."""

    backend: str
    entries: list[CleanupEntry] = field(default_factory=list)
    error: str | None = None


def age_s(created_at: str | None, fallback_epoch: float | None, now: float) -> float | None:
    """Seconds since ``created_at`` (a ``created-at`` value), else since ``fallback_epoch`` (the
    engine's creation time, epoch seconds); None when neither is known."""
    if created_at:
        try:
            return now - datetime.strptime(created_at, STAMP).timestamp()
        except ValueError:
            pass
    return None if fallback_epoch is None else now - fallback_epoch


def selected(labels: dict[str, str], engine_created: float | None, criteria: Criteria,
             now: float) -> tuple[bool, float | None]:
    """``(matches, age in seconds)`` of an object by its labels (and annotations) against the
    ``--run-id`` / ``--older-than`` ``criteria``; an object of unknown age never matches ``--older-than``."""
    age = age_s(labels.get(CREATED_AT), engine_created, now)
    if criteria.run_id is not None and labels.get(RUN_ID) != criteria.run_id:
        return False, age
    if criteria.older_than_s is not None and (age is None or age < criteria.older_than_s):
        return False, age
    return True, age
