"""Evidence records as plain data: built while an item runs, carried on pytest reports, journaled.

Everything here serialises to JSON with :meth:`to_dict` so it survives pytest-xdist (reports
cross process boundaries as plain data) and is written by the controller only.

Status vocabulary (``STATUSES``): passed, failed, error (the harness or an infrastructure
call broke), blocked (a dependency failed), not_applicable (the backend cannot prove this
layer), skipped, excluded (matrix exclude rule), deselected (-k/-m/profile/shard), not_run
(interrupted before it ran).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pytest_hetero import vocab
from pytest_hetero.judge.model import Cause, CauseDict, Failure, FailureDict
from pytest_hetero.vocab import Layer, Status

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import ArtifactDict, ItemDict, RecordDict

__all__ = ["Artifact", "Cause", "CauseDict", "Failure", "FailureDict", "ItemEvidence"]

STATUSES = vocab.STATUSES
"""Every status (defined once in :mod:`pytest_hetero.vocab`)."""
UNTESTED_STATUSES = vocab.UNTESTED
"""Statuses that put an item into the report's untested scope (:data:`pytest_hetero.vocab.UNTESTED`)."""
SCHEMA = "pytest-hetero/evidence/v1"


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a large evidence document is rendered or signed.

    Rendering allocates millions of short-lived objects next to a heap already holding the
    whole document; each full collection would walk that heap again (measured: over half
    the rendering time at 50,000 items). Rendering creates no reference cycles worth
    collecting; the collector is simply resumed at the end.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def utc_now() -> str:
    """Current UTC time as ISO 8601 with microseconds and ``Z``."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Artifact:
    """A captured file: ``path`` relative to the bundle folder, ``size`` in bytes, ``sha256`` hex."""

    name: str
    path: str
    size: int
    sha256: str
    media_type: str = "text/plain"

    def to_dict(self) -> ArtifactDict:
        """JSON-ready dict."""
        return {"name": self.name, "path": self.path, "size": self.size, "sha256": self.sha256,
                "media_type": self.media_type}


@dataclass
class ItemEvidence:
    """Everything one item proved or failed to prove.

    ``keys`` maps dimension → name (resource, image, model, dataset); ``records`` is a list
    of ``{"kind": str, "at": ISO time, "data": dict}``; ``duration_s`` is wall seconds.
    """

    nodeid: str
    matrix: str
    layer: Layer
    keys: dict[str, str]
    owner: str
    status: Status = "passed"
    started_at: str = field(default_factory=utc_now)
    finished_at: str = ""
    duration_s: float = 0.0
    records: list[RecordDict] = field(default_factory=list)
    failure: Failure | None = None
    blocked_by: str | None = None
    reason: str | None = None
    artifacts: list[Artifact] = field(default_factory=list)

    def record(self, kind: str, **data: Any) -> RecordDict:
        """Append a timestamped typed record ``{"kind", "at", "data"}`` and return it."""
        entry: RecordDict = {"kind": kind, "at": utc_now(), "data": data}
        self.records.append(entry)
        return entry

    def to_dict(self) -> ItemDict:
        """JSON-ready dict (failure and artifacts as dicts); its containers are copies (what records hold
        is JSON data: dicts, lists, tuples and scalars; ``dataclasses.asdict`` deep-copied them at ~3 ms
        per model item, a plain walk takes ~0.2 ms)."""
        return {"nodeid": self.nodeid, "matrix": self.matrix, "layer": self.layer, "keys": dict(self.keys),
                "owner": self.owner, "status": self.status, "started_at": self.started_at,
                "finished_at": self.finished_at, "duration_s": self.duration_s, "records": json_copy(self.records),
                "failure": self.failure.to_dict() if self.failure else None, "blocked_by": self.blocked_by,
                "reason": self.reason, "artifacts": [a.to_dict() for a in self.artifacts]}


def json_copy(value: Any) -> Any:
    """``value`` with every dict, list and tuple copied (recursively); other values as they are."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_copy(v) for v in value]
    if isinstance(value, tuple):
        return tuple(json_copy(v) for v in value)
    return value


def sha256_text(text: str | bytes) -> str:
    """Hex sha256 of ``text`` (UTF-8 encoded when str)."""
    data = text.encode("utf-8", "replace") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def bounded(text: str, limit: int) -> dict[str, Any]:
    """Keep at most ``limit`` bytes of ``text`` (head and tail) with the full text's size and sha256.

    Returns ``{"text": str, "truncated": bool, "bytes": int, "sha256": str}``.
    """
    raw = text.encode("utf-8", "replace")
    if len(raw) <= limit:
        return {"text": text, "truncated": False, "bytes": len(raw), "sha256": sha256_text(raw)}
    half = limit // 2
    kept = (raw[:half].decode("utf-8", "ignore") + f"\n… [{len(raw) - 2 * half} bytes cut] …\n"
            + raw[-half:].decode("utf-8", "ignore"))
    return {"text": kept, "truncated": True, "bytes": len(raw), "sha256": sha256_text(raw)}
