"""Property tests: any matrix text or rules/outputs pair yields a result or one of our documented
errors — never a traceback, hang or unbounded memory."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import REPO

from pytest_hetero.errors import CaseError, MatrixError
from pytest_hetero.matrix import load_matrix
from pytest_hetero.matrix.acceptance import evaluate, load_rules

EXAMPLE = (REPO / "matrices" / "example-cpu.matrix.yaml").read_text()
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
                           lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                           max_leaves=20)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=400))
def test_arbitrary_text_is_a_matrix_or_a_matrix_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "f.matrix.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    try:
        load_matrix(path)
    except MatrixError as exc:
        assert exc.render()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(min_value=0, max_value=len(EXAMPLE) - 1), st.text(max_size=12),
       st.integers(min_value=0, max_value=20))
def test_mutated_example_is_a_matrix_or_a_positioned_error(tmp_path: Path, at: int, insert: str, cut: int) -> None:
    path = tmp_path / "f.matrix.yaml"
    path.write_bytes((EXAMPLE[:at] + insert + EXAMPLE[at + cut:]).encode("utf-8", "surrogatepass"))
    try:
        load_matrix(path)
    except MatrixError as exc:
        for problem in getattr(exc, "problems", [exc]):
            assert problem.location.file.endswith("f.matrix.yaml")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(json_values, json_values)
def test_rules_and_outputs_of_any_shape(tmp_path: Path, rules: object, outputs: object) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "pytest-hetero/v1", "kind": "AcceptanceRules", "rules": rules}))
    try:
        loaded = load_rules(path)
    except CaseError:
        return
    results = evaluate(loaded, outputs if isinstance(outputs, dict) else {})
    assert {r["verdict"] for r in results} <= {"pass", "fail"}
    json.dumps(results)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["predictions", "labels", "indices", "latency_ms", "metrics"]), json_values))
def test_digits_rules_on_any_outputs(outputs: dict[str, object]) -> None:
    rules = load_rules(REPO / "cases" / "digits" / "acceptance.yaml")
    results = evaluate(rules, outputs)
    assert [r["name"] for r in results] == ["accuracy-floor", "macro-f1-floor", "golden-samples", "per-sample-time",
                                            "mean-confidence", "latency-p95"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["predictions", "ids", "metrics", "latency_ms"]),
                       json_values | st.lists(st.integers(min_value=-2, max_value=5) | st.text(max_size=2), max_size=8)))
def test_the_gate_judges_outputs_of_any_shape_or_refuses_them_cleanly(tmp_path: Path, outputs: dict[str, object]) -> None:
    """Hostile outputs against a real truth file: the gate's values, or one of its two documented refusals."""
    import hashlib

    from pytest_hetero.matrix.model import Dataset, Truth
    from pytest_hetero.truth.gate import OutputsInvalid, TruthUnusable, check_outputs, gate_values

    data = tmp_path / "d.csv"
    data.write_text("id,label\n0,a\n1,b\n2,a\n")
    digest = hashlib.sha256(data.read_bytes()).hexdigest()
    truth = Truth(task="classification", target="label", id="id", path=data, sha256=digest, uri=str(data))
    dataset = Dataset(name="d", version="1", uri=str(data), path=data, sha256=digest, acceptance=None, truth=truth)
    try:
        check_outputs(outputs, dataset)
        judged = gate_values(dataset, outputs, "0" * 64, 1.0, False)
    except (OutputsInvalid, TruthUnusable):
        return
    assert judged.joined is not None
    counts = judged.joined.counts()
    assert counts["joined"] + counts["missing"] <= 3
    json.dumps(judged.record, allow_nan=False)
