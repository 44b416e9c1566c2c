"""The judge on real runs (local backend through pytester): a run that did not cover its plan is not
signed ``pass``, and rules that cannot be evaluated are never a business failure."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import evidence_of, matrix_text, statuses

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

COMBO = "digits-logreg@digits-test"


def test_a_selection_of_the_plan_is_signed_incomplete_not_pass(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", m=matrix_text())
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "discovery or startup")
    result.assert_outcomes(passed=2, deselected=3)
    assert result.ret == 0
    ev = evidence_of(pytester)
    assert ev["summary"]["verdict"] == "incomplete"
    assert ev["summary"]["selection"] == {
        "deselected": 3, "by": ["deselected (not selected by -k/-m/--lf in this session)"]}
    assert ev["summary"]["verdict_reason"] == (
        "3 planned item(s) not selected (deselected (not selected by -k/-m/--lf in this session))")
    assert ev["run"]["exit_status"] == 0


def test_a_malformed_rules_file_is_an_error_of_the_rules_owner_not_a_business_failure(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n  - {name: x, metric: [\n")
    pytester.makefile(".matrix.yaml", m=matrix_text(acceptance=broken))
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == 1
    ev = evidence_of(pytester)
    business = next(i for i in ev["items"] if i["layer"] == "business")
    assert statuses(ev)[f"cpu-host::py::{COMBO}::model"] == "passed"
    assert (business["status"], business["failure"]["category"], business["failure"]["owner"],
            business["failure"]["owner_category"]) == ("error", "bad_rules", "business", "business")
    assert ev["summary"]["verdict"] == "fail"


def test_a_typo_in_a_rule_beside_a_missing_metric_keeps_each_cause_with_its_owner(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                     "  - {name: typo, metric: acuracy, op: '>=', value: 0.5}\n"
                     "  - {name: absent, metric: f1_macro, op: '>=', value: 0.5}\n")
    pytester.makefile(".matrix.yaml", m=matrix_text(acceptance=rules, truth=True))
    pytester.runpytest("-p", "no:cacheprovider")
    ev = evidence_of(pytester)
    business = next(i for i in ev["items"] if i["layer"] == "business")
    failure = business["failure"]
    # since the gate computes the metrics (issue 30) an unknown metric name is refused when the rules file is read:
    # the rules' author's error (business), never the model team's, and it says what was meant
    assert (business["status"], failure["category"], failure["owner"]) == ("error", "bad_rules", "business")
    assert "did you mean 'accuracy'?" in failure["message"]
    assert all(c["owner"] == "business" for c in failure.get("causes", []))


def test_a_collection_error_in_one_matrix_does_not_call_the_others_interrupted(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", good=matrix_text())
    pytester.makefile(".matrix.yaml", bad="apiVersion: pytest-hetero/v1\nkind: Nonsense\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    ev = evidence_of(pytester)
    reasons = {u["nodeid"]: (u["status"], u["reason"]) for u in ev["untested"]["items"]}
    expected = ("not_run", "not_run (session stopped early: 1 collection error(s) (bad.matrix.yaml) stopped pytest "
                           "before any item ran; fix them or run with --continue-on-collection-errors)")
    assert reasons[f"good.matrix.yaml::cpu-host::py::{COMBO}::model"] == expected
    assert not any("interrupted" in reason for _, reason in reasons.values())
    assert (ev["run"]["interrupted"], ev["summary"]["verdict"], ev["summary"]["verdict_reason"]) == (
        False, "fail", "1 file(s) could not be collected")


TIMEOUT_CONFTEST = '''
import signal

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """What pytest-timeout's signal method does: SIGALRM after the timeout, then pytest.fail in the handler."""
    if not item.nodeid.endswith("::model"):
        yield
        return

    def handler(signum, frame):
        pytest.fail("Timeout (>1.0s) from pytest-timeout.")

    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
'''


def test_a_model_killed_by_a_timeout_plugin_blocks_its_business_item(pytester: pytest.Pytester,
                                                                     tmp_path: Path) -> None:
    """With pytest-timeout a killed model's business item said ``not_run`` (it judges a run that did not
    finish, it is blocked by it)."""
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "infer.py").write_text("import time\ntime.sleep(30)\n")
    import json

    doc = json.loads(matrix_text())
    doc["spec"]["models"][0]["code"] = str(slow)
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    pytester.makeconftest(TIMEOUT_CONFTEST)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    assert result.ret == 1
    ev = evidence_of(pytester)
    items = {i["nodeid"].split("::", 1)[1]: i for i in ev["items"]}
    model = items[f"cpu-host::py::{COMBO}::model"]
    business = items[f"cpu-host::py::{COMBO}::business"]
    assert (model["status"], model["failure"]["category"], model["failure"]["owner"]) == (
        "error", "pytest_outcome", "platform")
    assert "Timeout (>1.0s) from pytest-timeout." in model["failure"]["message"]
    assert (business["status"], business["blocked_by"]) == ("blocked", f"m.matrix.yaml::cpu-host::py::{COMBO}::model")


def test_junit_and_ctrf_name_the_failures_owner_as_evidence_does(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """``outputs_invalid``: evidence, terminal and pytest-html said algorithm, JUnit and CTRF business."""
    import json
    import xml.etree.ElementTree as ET

    code = tmp_path / "nulls"
    code.mkdir()
    (code / "infer.py").write_text(
        "import json, sys\nout = sys.argv[sys.argv.index('--out') + 1]\n"
        "json.dump({'metrics': {'accuracy': None}, 'predictions': [], 'latency_ms': []}, open(out, 'w'))\n")
    rules = tmp_path / "rules.yaml"
    rules.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                     "  - {name: floor, metric: accuracy, op: '>=', value: 0.5}\n")
    doc = json.loads(matrix_text(acceptance=rules, truth=True))
    doc["spec"]["models"][0]["code"] = str(code)
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider")
    ev = evidence_of(pytester)
    business = next(i for i in ev["items"] if i["layer"] == "business")
    assert (business["status"], business["failure"]["category"], business["failure"]["owner"], business["owner"]) \
        == ("error", "outputs_invalid", "algorithm", "business")
    bundle = next((pytester.path / "reports").iterdir())
    case = next(c for c in ET.parse(bundle / "junit.xml").getroot().iter("testcase")
                if c.get("name") == "business")
    out = case.findtext("system-out") or ""
    assert "[[PROPERTY|owner=algorithm]]" in out and "[[PROPERTY|layer_owner=business]]" in out
    ctrf = json.loads((bundle / "ctrf.json").read_text())
    test = next(t for t in ctrf["results"]["tests"] if t["name"].endswith("::business"))
    assert (test["labels"]["owner"], test["extra"]["owner"], test["extra"]["layer_owner"]) == (
        "algorithm", "algorithm", "business")
