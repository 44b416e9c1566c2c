"""The Docker engine's sockets are all closed: a whole run under ``-W error`` passes, with evidence to match.

Before, the streamed model exec left its engine socket open; the ResourceWarning that ``-W error``
turns into an error failed the business item in pytest while the evidence said passed.
"""

from __future__ import annotations

from typing import Any

import pytest
from dockerkit import COMBO, docker_matrix, evidence, leftovers, statuses

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def test_a_whole_run_leaks_no_engine_socket(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    pytester.makefile(".matrix.yaml", d=docker_matrix())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "-W", "error",
                                           "--hetero-run-id", run_id)
    assert "ResourceWarning" not in result.stdout.str()
    result.assert_outcomes(passed=5)
    ev = evidence(pytester)
    assert statuses(ev)[f"cpu::img::{COMBO}::business"] == "passed"
    assert ev["summary"]["verdict"] == "pass"
    assert leftovers(engine, run_id) == []
