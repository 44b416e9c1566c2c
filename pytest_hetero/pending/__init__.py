"""Why a workload is pending: parse scheduler, admission, queue and startup messages into one vocabulary.

``explain(text_or_obj)`` returns :class:`Reason` objects (see :mod:`pytest_hetero.pending.model` for the
code vocabulary; owners are the failure table's, :mod:`pytest_hetero.judge.failures`); ``summarise(reasons)``
renders them on one line.
"""

from __future__ import annotations

from pytest_hetero.pending.model import CODES, OWNERS, SOURCES, Reason
from pytest_hetero.pending.normalise import explain, summarise

__all__ = ["CODES", "OWNERS", "SOURCES", "Reason", "explain", "summarise"]
