"""pytest hooks of ``--hetero-baseline`` / ``--hetero-fail-on``: check both and load (verify) the
baseline bundle before collection, then compare the run with it (the pure diff is
:mod:`pytest_hetero.bundle.baseline`).

With a baseline, a :class:`BaselineGate` holding it is registered for the session: its
``pytest_hetero_amend_evidence`` adds ``baseline_diff`` to the evidence before evidence.json is
written (the judge, :func:`pytest_hetero.judge.verdict.exit_status`, then decides the exit status the run
signs and returns from its gate), and it prints the comparison.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_hetero.bundle.baseline import POLICIES, baseline_section, diff_lines, matrix_names
from pytest_hetero.errors import HeteroError
from pytest_hetero.pytest_plugin.selection import matrices_in_args, usage_error
from pytest_hetero.pytest_plugin.stash import PLANS, SETTINGS
from pytest_hetero.settings import Settings

if TYPE_CHECKING:
    from pytest_hetero.bundle.baseline import BaselineSection
    from pytest_hetero.evidence.document import EvidenceDocument

_GATE = pytest.StashKey["BaselineGate"]()


class BaselineGate:
    """Session plugin: the verified baseline evidence (``old``, ``verification`` as
    :func:`~pytest_hetero.bundle.verify.load_evidence` said) and, after the run, its ``diff``."""

    def __init__(self, old: EvidenceDocument, verification: str) -> None:
        self.old = old
        self.verification = verification
        self.diff: BaselineSection | None = None

    def pytest_hetero_amend_evidence(self, evidence: EvidenceDocument, settings: Settings) -> None:
        """Add the ``baseline_diff`` section (transitions, target and metric changes, the gate)."""
        self.diff = evidence["baseline_diff"] = baseline_section(self.old, self.verification, evidence,
                                                                 settings.fail_on)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        """The baseline comparison and the gate verdict, under the evidence summary."""
        diff = self.diff
        if diff is None:
            return
        terminalreporter.write_sep("-", "baseline comparison")
        for line in ([diff["error"]] if "error" in diff else diff_lines(diff)):
            terminalreporter.write_line(line)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Check ``--hetero-fail-on`` and load and verify ``--hetero-baseline`` before collection."""
    config = session.config
    settings = config.stash[SETTINGS]
    if settings.fail_on not in POLICIES:
        raise pytest.UsageError(f"--hetero-fail-on {settings.fail_on!r}: use one of {', '.join(POLICIES)}")
    if settings.fail_on != "any-failure" and settings.baseline is None:
        raise pytest.UsageError(f"--hetero-fail-on {settings.fail_on} compares with a baseline: "
                                "add --hetero-baseline BUNDLE")
    if settings.baseline is None:
        return
    from pytest_hetero.bundle.verify import load_evidence, trusted_keys

    try:
        old, verification = load_evidence(settings.baseline, allow_unsigned=settings.allow_unsigned,
                                          keys=trusted_keys(private=settings.sign_key))
    except HeteroError as exc:
        raise usage_error(exc) from None
    gate = config.stash[_GATE] = BaselineGate(old, verification)
    config.pluginmanager.register(gate, "pytest_hetero.baseline_gate")
    _check_matrix(old, {m.name for _, m, _ in matrices_in_args(config)})


def _check_matrix(baseline: EvidenceDocument, names: set[str]) -> None:
    if names and not names & matrix_names(baseline):
        raise pytest.UsageError(
            f"--hetero-baseline covers matrix {', '.join(sorted(matrix_names(baseline)))}, "
            f"this run collects {', '.join(sorted(names))}\n  hint: compare runs of the same matrix")


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Backstop for matrices only known after collection: a baseline of another matrix is a usage error."""
    gate = session.config.stash.get(_GATE, None)
    if gate is not None:
        _check_matrix(gate.old, {m.name for m, _ in session.config.stash[PLANS].values()})
