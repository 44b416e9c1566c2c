"""The judge on real runs (local backend through pytester): a run that did not cover its plan is not
signed ``pass``, and rules that cannot be evaluated are never a business failure."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import evidence_of, matrix_text, statuses

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
    pytester.makefile(".matrix.yaml", m=matrix_text(acceptance=rules))
    pytester.runpytest("-p", "no:cacheprovider")
    ev = evidence_of(pytester)
    business = next(i for i in ev["items"] if i["layer"] == "business")
    failure = business["failure"]
    assert (business["status"], failure["category"], failure["owner"]) == ("error", "rules_error", "business")
    assert [(c["category"], c["owner"]) for c in failure["causes"]] == [
        ("rules_error", "business"), ("outputs_missing_metric", "algorithm")]
    assert "did you mean 'accuracy'?" in failure["causes"][0]["message"]
