"""Baseline comparison on real runs: transitions, the fail-on gate driving pytest's exit status, errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import DIGITS, matrix_text

from pytest_hetero.bundle.baseline import classify, diff_evidence, metric_changes, status_map, target_changes
from pytest_hetero.bundle.signing import generate_keypair
from pytest_hetero.cli import main
from pytest_hetero.evidence.document import as_document

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

RESOURCES = [{"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}},
             {"name": "gpu-nvidia", "type": "gpu", "vendor": "nvidia", "requests": {"nvidia.com/gpu": 1},
              "expect": {"devices": 1}}]
BIZ = "t::cpu-host::py::digits-logreg@digits-test::business"


def write_matrix(pytester: pytest.Pytester, acceptance: Path | None = None) -> None:
    """cpu-host passes every layer here; gpu-nvidia fails discovery on a host without an NVIDIA driver. The digits
    dataset declares its label column as truth: the rules (the digits ones, or a stricter copy) judge gate-computed metrics."""
    pytester.makefile(".matrix.yaml", t=matrix_text(resources=RESOURCES, acceptance=acceptance, truth=True))


def run(pytester: pytest.Pytester, name: str, *args: str) -> tuple[pytest.RunResult, Path]:
    """Run t.matrix.yaml; move the bundle to ``name/``; return the result and the bundle."""
    result = pytester.runpytest("t.matrix.yaml", "-p", "no:cacheprovider", *args)
    (bundle,) = list((pytester.path / "reports").iterdir())
    return result, Path(bundle.rename(pytester.path / name))


def evidence(bundle: Path) -> dict[str, Any]:
    return dict(json.loads((bundle / "evidence.json").read_text()))


@pytest.fixture
def baseline(pytester: pytest.Pytester) -> Path:
    write_matrix(pytester)
    result, bundle = run(pytester, "base")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    statuses = {i["nodeid"]: i["status"] for i in evidence(bundle)["items"]}
    assert statuses["t.matrix.yaml::gpu-nvidia::discovery"] == "failed"
    assert statuses["t.matrix.yaml::cpu-host::py::digits-logreg@digits-test::business"] == "passed"
    return bundle


def test_known_failures_pass_the_regression_gate_but_not_any_failure(pytester: pytest.Pytester, baseline: Path) -> None:
    result, bundle = run(pytester, "new", "--hetero-baseline", str(baseline), "--hetero-allow-unsigned",
                         "--hetero-fail-on", "regression")
    assert result.ret == pytest.ExitCode.OK
    diff = evidence(bundle)["baseline_diff"]
    assert diff["counts"] == {"regression": 0, "new_failure": 0, "still_failing": 5, "fixed": 0,
                              "newly_untested": 0, "newly_covered": 0}
    assert diff["gate"] == {"policy": "regression", "failed": False, "reasons": []}
    assert diff["verification"] == "unsigned"
    assert diff["baseline"]["run"] == evidence(baseline)["run"]["id"]
    result.stdout.fnmatch_lines(["*baseline comparison*", "*5 still failing*", "gate (fail-on regression): PASS"])
    result, _ = run(pytester, "new2", "--hetero-baseline", str(baseline), "--hetero-allow-unsigned")
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_regression_fails_the_gate_and_is_named(pytester: pytest.Pytester, baseline: Path) -> None:
    strict = pytester.path / "strict.yaml"
    strict.write_text((DIGITS / "acceptance.yaml").read_text().replace("value: 0.95", "value: 0.9999"))
    write_matrix(pytester, acceptance=strict)
    result, bundle = run(pytester, "new", "--hetero-baseline", str(baseline), "--hetero-allow-unsigned",
                         "--hetero-fail-on", "regression")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    diff = evidence(bundle)["baseline_diff"]
    assert diff["transitions"]["regression"] == [{"item": BIZ, "old": "passed", "new": "failed"}]
    assert diff["gate"]["reasons"] == ["1 regression(s)"]
    result.stdout.fnmatch_lines([f"*regression*{BIZ}*(passed → failed)*", "gate (fail-on regression): FAIL*"])
    summary = (bundle / "summary.md").read_text()
    assert "### Baseline comparison" in summary and "gate (fail-on regression): FAIL" in summary
    assert '<h2 id="baseline">' in (bundle / "report.html").read_text()
    assert main(["diff", str(baseline), str(bundle), "--allow-unsigned"]) == 1
    assert main(["diff", str(bundle), str(baseline), "--allow-unsigned", "--json"]) == 0


def test_untested_growth(pytester: pytest.Pytester, baseline: Path) -> None:
    args = ["--hetero-baseline", str(baseline), "--hetero-allow-unsigned", "--hetero-profile", "quick"]
    result, bundle = run(pytester, "quick", *args, "--hetero-fail-on", "untested-growth")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    diff = evidence(bundle)["baseline_diff"]
    assert [e["item"] for e in diff["transitions"]["newly_untested"]] == [
        BIZ, "t::cpu-host::py::digits-logreg@digits-test::model"]
    assert {e["new"] for e in diff["transitions"]["newly_untested"]} == {"deselected"}
    result, _ = run(pytester, "quick2", *args, "--hetero-fail-on", "regression")
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.parametrize("args, message", [
    (["--hetero-fail-on", "regression"], "*--hetero-fail-on regression compares with a baseline*"),
    (["--hetero-fail-on", "never"], "*--hetero-fail-on 'never': use one of any-failure, regression, untested-growth*"),
])
def test_policy_errors(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    write_matrix(pytester)
    result = pytester.runpytest("t.matrix.yaml", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_unsigned_other_matrix_and_tampered_baselines_are_refused(pytester: pytest.Pytester, baseline: Path) -> None:
    result = pytester.runpytest("t.matrix.yaml", "--hetero-baseline", str(baseline))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*bundle is not signed*", "*--hetero-allow-unsigned*"])
    other = pytester.path / "other"
    shutil.copytree(baseline, other)
    doc = evidence(other)
    doc["matrices"][0]["name"] = "another"
    (other / "evidence.json").write_text(json.dumps(doc))
    result = pytester.runpytest("t.matrix.yaml", "--hetero-baseline", str(other), "--hetero-allow-unsigned")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--hetero-baseline covers matrix another, this run collects t*"])
    assert not list((pytester.path / "reports").iterdir())
    key = pytester.path / "k.pem"
    generate_keypair(key, pytester.path / "k.pub")
    _, signed = run(pytester, "signed", "--hetero-sign-key", str(key))
    result, bundle = run(pytester, "ok", "--hetero-baseline", str(signed), "--hetero-sign-key", str(key))
    assert evidence(bundle)["baseline_diff"]["verification"] == "verified"
    (signed / "evidence.json").write_text((signed / "evidence.json").read_text() + " ")
    result = pytester.runpytest("t.matrix.yaml", "--hetero-baseline", str(signed), "--hetero-sign-key", str(key))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*bundle does not verify*evidence.json: modified*"])
    assert not list((pytester.path / "reports").iterdir())


def test_target_and_metric_changes_from_real_bundle(baseline: Path) -> None:
    old = evidence(baseline)
    new = json.loads(json.dumps(old))
    fp = new["target"][0]
    fp["versions"]["driver"] = "550.54"
    fp["nodes"] = [*fp["nodes"], "node-b"]
    changes = target_changes(old["target"], new["target"])
    assert {c["field"] for c in changes} == {"versions.driver", "nodes"}
    nodes = next(c for c in changes if c["field"] == "nodes")
    assert nodes["added"] == ["node-b"] and nodes["removed"] == []
    item = next(i for i in new["items"] if i["layer"] == "business" and i["status"] == "passed")
    results = next(r for r in item["records"] if r["kind"] == "business.rules")["data"]["results"]
    accuracy = next(r for r in results if r["name"] == "accuracy-floor")
    before = accuracy["observed"]
    accuracy["observed"] = before * 0.9
    found = metric_changes(status_map(as_document(old)), status_map(as_document(new)), 0.05)
    changed = [(m["item"], m["rule"], m["relative_change"]) for m in found if m["rule"] == "accuracy-floor"]
    assert [c[:2] for c in changed] == [(BIZ, "accuracy-floor")] and changed[0][2] == pytest.approx(-0.1)
    assert diff_evidence(as_document(old), new)["metric_changes"] == found


@pytest.mark.parametrize("old, new, expected", [
    ("passed", "failed", "regression"), ("passed", "blocked", "regression"), ("error", "passed", "fixed"),
    (None, "failed", "new_failure"), ("failed", "error", "still_failing"), ("passed", "deselected", "newly_untested"),
    ("passed", None, "newly_untested"), ("deselected", "passed", "newly_covered"), ("passed", "passed", None),
    ("blocked", "deselected", None),
])
def test_classify(old: str | None, new: str | None, expected: str | None) -> None:
    assert classify(old, new) == expected
