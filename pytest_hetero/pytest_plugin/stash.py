"""Typed keys for pytest's ``config.stash`` / ``item.stash``: all per-run state lives behind these."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_hetero.evidence.document import SlimEvidence

if TYPE_CHECKING:
    from pytest_hetero.backends.protocol import Backend
    from pytest_hetero.evidence.document import AttemptDict, ItemDict  # noqa: F401 - named in StashKey["…"]
    from pytest_hetero.evidence.recorder import Recorder  # noqa: F401 - named in StashKey["…"]
    from pytest_hetero.matrix.expand import Plan
    from pytest_hetero.matrix.model import Matrix
    from pytest_hetero.redact import Redactor
    from pytest_hetero.settings import Settings  # noqa: F401 - named in StashKey["…"]

SETTINGS = pytest.StashKey["Settings"]()
"""The frozen run settings (set by ``pytest_configure``, which aborts the run when they do not resolve: read it
with a subscript)."""
RECORDER = pytest.StashKey["Recorder | None"]()
"""The evidence journal on the controller (or a run without xdist); None on a pytest-xdist worker, which journals
nothing (``pytest_configure`` sets it either way, with :data:`SETTINGS`: read it with a subscript)."""
PLANS = pytest.StashKey[dict[str, tuple["Matrix", "Plan"]]]()
"""Matrix file nodeid → (matrix, plan), filled at collection (``pytest_configure`` sets it empty, with
:data:`SETTINGS`: read it with a subscript)."""
AHEAD = pytest.StashKey[dict[str, tuple["Matrix", "Plan"]]]()
"""Nodeid prefix → (matrix, plan) of the matrix files on the command line, loaded before collection
(selection options, ``--hetero-baseline``, and the pytest-xdist controller, which collects nothing)."""
PREVIOUS_SIGTERM = pytest.StashKey[Any]()
"""The SIGTERM handler :func:`pytest_hetero.signals.catch_sigterm` replaced, given back at unconfigure."""
BACKENDS = pytest.StashKey[dict[tuple[str, str], "Backend"]]()
"""(backend name, canonical target JSON) → live Backend, built on first use, closed at session end
(``pytest_configure`` sets it empty, with :data:`SETTINGS`)."""


OUTCOME = pytest.StashKey["ItemDict | SlimEvidence"]()
"""On an item: its finished evidence dict (status, failure, blocked_by…), read by dependents; :class:`SlimEvidence`
once its report is logged."""
REDACTORS = pytest.StashKey[dict[str, "Redactor"]]()
"""Matrix sha256 → the Redactor for that matrix's items (environment secrets + spec.redact patterns)."""
HANDOFF = pytest.StashKey[dict[str, bytes]]()
"""Model item id → its outputs bytes, for the business item on the same process (see layers.base.keep_outputs)."""
DESELECTED = pytest.StashKey[dict[str, str]]()
"""Nodeid → reason for items deselected in this process (-k/-m/profile/shard)."""
FINAL = pytest.StashKey[SlimEvidence]()
"""On an item: the evidence already attached to one of this attempt's reports (attached once per attempt)."""
ATTEMPTS = pytest.StashKey[list["AttemptDict"]]()
"""On an item a rerun plugin ran again: the evidence of its earlier attempts, artifacts moved to ``attempt-N/``."""
RAISED = pytest.StashKey[list[BaseException]]()
"""On an item: the failures its runs raised (:class:`~pytest_hetero.pytest_plugin.item.LayerFailure`), whose
frames are cleared once its protocol is over (:func:`~pytest_hetero.pytest_plugin.item.release_frames`)."""


EVIDENCE_PROPERTY = "hetero_evidence"
"""The ``user_properties`` name under which an item's evidence rides on its report (to xdist's controller,
the journal, pytest-html)."""


def evidence_of(report: Any) -> ItemDict | SlimEvidence | None:
    """The item evidence dict pytest-hetero put on ``report.user_properties`` (its
    :class:`~pytest_hetero.evidence.document.ItemDict`, checked when the item finished, or its
    :class:`~pytest_hetero.pytest_plugin.stash.SlimEvidence` once journaled), or None."""
    for name, value in getattr(report, "user_properties", ()):
        carried: ItemDict | SlimEvidence = value
        if name == EVIDENCE_PROPERTY and isinstance(carried, dict):
            return carried
    return None
