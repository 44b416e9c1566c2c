"""pytest failing an item for a reason outside the layer's verdict never leaves the evidence saying passed.

Two real ways, on the local backend: a plugin whose check after the call raises (as pytest's own
unraisable-exception check does under ``-W error`` for a leaked socket: the new user's Docker run
signed PASS while pytest said FAILED), and a teardown hook that raises.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import evidence_of, matrix_text, statuses

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

CPU = {"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}
COMBO = "digits-logreg@digits-test"
AFTER_CALL = '''
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    if item.nodeid.endswith("::model"):
        raise RuntimeError("leaked a socket during the call")
    return result
'''
TEARDOWN = '''
def pytest_runtest_teardown(item, nextitem):
    if item.nodeid.endswith("::business"):
        raise RuntimeError("teardown check failed")
'''


def run(pytester: pytest.Pytester, conftest: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    pytester.makeconftest(conftest)
    pytester.makefile(".matrix.yaml", m=matrix_text(resources=[CPU]))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    return result, evidence_of(pytester)


def item(ev: dict[str, Any], suffix: str) -> dict[str, Any]:
    found: dict[str, Any] = next(i for i in ev["items"] if i["nodeid"].endswith(suffix))
    return found


def test_a_failure_after_the_call_is_an_error_owned_by_platform(pytester: pytest.Pytester) -> None:
    result, ev = run(pytester, AFTER_CALL)
    result.assert_outcomes(passed=3, failed=1, skipped=1)
    model = item(ev, f"::{COMBO}::model")
    assert model["status"] == "error"
    failure = model["failure"]
    assert (failure["layer"], failure["category"], failure["owner"]) == ("model", "pytest_outcome", "platform")
    assert failure["message"].startswith("pytest reported the call phase as failed although the layer's verdict "
                                         "was passed: ")
    assert "RuntimeError: leaked a socket during the call" in failure["message"]
    assert ev["summary"]["verdict"] == "fail"


def test_a_teardown_error_after_a_pass_is_journaled_as_an_error(pytester: pytest.Pytester) -> None:
    result, ev = run(pytester, TEARDOWN)
    result.assert_outcomes(passed=4, errors=1, skipped=1)
    business = item(ev, f"::{COMBO}::business")
    assert business["status"] == "error"
    assert business["failure"]["message"].startswith(
        "pytest reported the teardown phase as failed although the layer's verdict was passed: ")
    assert "RuntimeError: teardown check failed" in business["failure"]["message"]
    assert statuses(ev)[f"cpu-host::py::{COMBO}::model"] == "passed"
    assert ev["summary"]["verdict"] == "fail"
    # one journal line per item: the correction is journaled once, not as a second, conflicting line
    journal = (pytester.path / "reports" / ev["run"]["id"] / "journal.jsonl").read_text().splitlines()
    lines = [json.loads(x) for x in journal]
    assert [x["evidence"]["nodeid"] for x in lines if x["type"] == "item"].count(business["nodeid"]) == 1
