"""Read the text a rank of a collective job left (stderr, log) into a failure category: the training checks'
reader (:mod:`pytest_hetero.layers.training`).

NCCL and HCCL text goes through the field readers ``hetero explain`` uses (:mod:`.read_framework`,
:mod:`.read_text`: NCCL watchdog timeouts, socket/IB errors, HCCL init and HCCP errors), so a rank's log and a
pasted log read alike. Gloo (torch.distributed's CPU backend, and jax's CPU collectives), torch's TCPStore
rendezvous, jax's coordination service and the file system's errno text are read here, from the messages as
those libraries print them (gloo ``Connection closed by peer``; TCPStore ``The client socket has timed out
after``; XLA coordination ``RegisterTask`` with ``DEADLINE_EXCEEDED``, ``heartbeat timeout``; Python's
``[Errno 28] No space left on device``).
"""

from __future__ import annotations

import re

_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("volume_full", re.compile(r"No space left on device|\[Errno 28\]|Disk quota exceeded|\[Errno 122\]")),
    ("volume_read_only", re.compile(r"Read-only file system|\[Errno 30\]")),
    ("no_collective_framework", re.compile(r"no collective framework in the image")),
    ("rendezvous_unreachable", re.compile(
        r"CoordinationService/RegisterTask|client socket has timed out after .* trying to connect|"
        r"DistNetworkError|TCPStore.*(?:Connection refused|timed out)|Failed to connect to coordination service|"
        r"failed to connect to all addresses", re.S)),
    ("collective_peer_lost", re.compile(
        r"[Hh]eartbeat timeout|stopped sending heartbeats|Connection closed by peer|Connection reset by peer|"
        r"Gloo context initialization failed|another task died|peer .* closed the connection")),
)
"""(category, pattern) in the order tried: the first match wins (a full disk says more than the peer loss
it causes)."""

_STATUS = re.compile(r"absl::Status: ([A-Z_]{4,40})")
"""The status code an XLA coordination failure prints (``DEADLINE_EXCEEDED``, ``UNAVAILABLE``)."""
_FIELD = re.compile(r"NCCL|HCCL|HCCP|ERR0\d{4}|E[EIJZ]\d{4}")
"""Text the field readers of NCCL/HCCL/CANN are asked about."""


def read_failure(text: str) -> tuple[str, str] | None:
    """``(category, line)`` of the first failure ``text`` names (a key of the failure table, or of its
    undetermined rows for an NCCL/HCCL text that cannot name an owner), with the line that says it; None when
    nothing is recognised. ``text``: any size, any content (bounded work: the field readers bound their own)."""
    if _FIELD.search(text):
        from pytest_hetero.explain.core import explain_text

        for finding in explain_text(text).findings:
            if finding.failure and finding.severity == "error":
                line = finding.lines[0].text if finding.lines else finding.meaning
                return finding.failure, str(line)
    for category, pattern in _RULES:
        match = pattern.search(text)
        if match:
            start = text.rfind("\n", 0, match.start()) + 1
            end = text.find("\n", match.end())
            line = text[start:end if end >= 0 else len(text)].strip()[:300]
            status = _STATUS.search(text)  # absl/gRPC status of an XLA coordination failure: says which
            return category, f"{line} ({status.group(1)})" if status and status.group(1) not in line else line
    return None
