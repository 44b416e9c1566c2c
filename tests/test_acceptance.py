"""Business acceptance rules: loading errors and exact evaluation."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from support import DIGITS, dedent

from pytest_hetero.errors import CaseError, RulesInvalid
from pytest_hetero.matrix.acceptance import AcceptanceRule, GateValues, evaluate, load_rules, percentile

OUTPUTS = {"indices": [0, 5, 10, 15], "labels": [0, 5, 0, 5], "predictions": [0, 9, 0, 5],
           "top_probability": [0.9, 0.5, 0.8, 0.7], "latency_ms": [1.0, 2.0, 3.0, 10.0]}


def _rules(tmp_path: Path, body: str) -> list[AcceptanceRule]:
    path = tmp_path / "r.yaml"
    path.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n" + body)
    return load_rules(path)


def test_digits_rules_load() -> None:
    rules = load_rules(DIGITS / "acceptance.yaml")
    assert [(r["name"], r["kind"]) for r in rules] == [
        ("accuracy-floor", "metric"), ("macro-f1-floor", "metric"), ("golden-samples", "golden"),
        ("per-sample-time", "metric"), ("mean-confidence", "metric"), ("latency-p95", "latency")]
    assert [r["name"] for r in rules if r.get("self_reported")] == ["mean-confidence", "latency-p95"]


def test_evaluation_exact(tmp_path: Path) -> None:
    rules = _rules(tmp_path, dedent("""
      - {name: acc, metric: accuracy, op: ">=", value: 0.8}
      - {name: conf, metric: mean(top_probability), op: "==", value: 0.7, tolerance: 0.05, self_reported: true}
      - {name: lat, latency: {percentile: 75, max_ms: 2.5}, self_reported: true}
      - name: gold
        golden: {samples: [{index: 0, expected: 0}, {index: 5, expected: 5}, {index: 99, expected: 1}]}
      - {name: n, metric: count(latency_ms), op: "==", value: 4, self_reported: true}
    """))
    gate = GateValues(values={"accuracy": (0.75, {"source": "computed", "rows": 4})})
    results = {r["name"]: r for r in evaluate(rules, {**OUTPUTS, "metrics": {"accuracy": 0.99}}, gate)}
    assert results["acc"]["observed"] == 0.75 and results["acc"]["verdict"] == "fail"
    assert results["acc"]["provenance"] == {"source": "computed", "rows": 4} and results["acc"]["detail"] == ""
    assert results["conf"]["provenance"] == {"source": "self_reported", "field": "outputs.top_probability",
                                             "note": "self-reported, not verified"}
    assert results["conf"]["detail"] == results["lat"]["detail"] == "self-reported, not verified"
    assert results["conf"]["observed"] == 0.725 and results["conf"]["verdict"] == "pass"
    assert results["conf"]["expected"] == "mean(top_probability) == 0.7 ± 0.05"
    assert results["lat"]["observed"] == 3.0 and results["lat"]["verdict"] == "fail"
    assert results["gold"]["observed"] == "1/3 match"
    assert results["gold"]["detail"] == ("sample 5: expected 5, got 9; sample(s) 99 not in the outputs "
                                         "(field 'indices')")
    assert results["gold"]["failing"] == [5, 99]
    assert results["n"]["verdict"] == "pass"


def test_missing_data_makes_the_rule_not_evaluable_with_what_was_available(tmp_path: Path) -> None:
    """A rule that could not be evaluated was a failed rule (a business failure); it proves nothing."""
    rules = _rules(tmp_path, "  - {name: f1, metric: f1_macro, op: '>=', value: 0.9}\n")
    [result] = evaluate(rules, {**OUTPUTS, "metrics": {"f1_macro": 1.0}})  # the model's own: never taken
    assert result["verdict"] == "not_evaluable" and result["problem"] == "no_truth"
    assert result["detail"] == ("cannot evaluate: the gate has no value for metric 'f1_macro': the gate computed no "
                                "metrics for this run")
    assert result["available"] == {"metrics": ["f1_macro"], "fields": ["indices", "labels", "latency_ms", "predictions",
                                                             "top_probability"]}


@pytest.mark.parametrize(("outputs", "rule", "detail"), [
    ({"metrics": {"accuracy": None}}, "{name: r, metric: accuracy, op: '>=', value: 0.9, self_reported: true}",
     "metric 'accuracy' is null, not a number"),
    ({"latency_ms": [1.0, "slow"]}, "{name: r, latency: {percentile: 95, max_ms: 20}, self_reported: true}",
     "outputs field 'latency_ms' is a list with 1 non-numbers among 2, not a list of numbers"),
    ({"predictions": [0, 1], "indices": [0]}, "{name: r, golden: {samples: [{index: 0, expected: 0}]}}",
     "outputs field 'indices' is a list of 1 beside 2 'predictions'"),
    ({"predictions": [0, 1], "indices": [3, 3]}, "{name: r, golden: {samples: [{index: 3, expected: 0}]}}",
     "outputs field 'indices' repeats index 3 (positions 0 and 1)"),
    ({"predictions": [0, float("inf")], "indices": [3, 4]},
     "{name: r, golden: {samples: [{index: 4, expected: 0, tolerance: 1}]}}",
     "outputs field 'predictions' holds Infinity at index 4"),
    ({"metrics": {"accuracy": float("nan")}}, "{name: r, metric: accuracy, op: '>=', value: 0.9, self_reported: true}",
     "metric 'accuracy' is NaN, not a number"),
    ({"latency_ms": []}, "{name: r, latency: {percentile: 95, max_ms: 20}, self_reported: true}",
     "outputs field 'latency_ms' is an empty list"),
])
def test_unusable_outputs_make_the_rule_not_evaluable(tmp_path: Path, outputs: dict[str, Any], rule: str,
                                                      detail: str) -> None:
    [result] = evaluate(_rules(tmp_path, f"  - {rule}\n"), outputs)
    assert (result["verdict"], result["problem"], result["detail"]) == ("not_evaluable", "invalid",
                                                                      f"cannot evaluate: {detail}")


@pytest.mark.parametrize(("body", "message"), [
    ("  - {name: x, metric: accuracy, op: '=>', value: 1}\n", "rule 'x': op '=>' unknown"),
    ("  - {name: x, metric: accuracy, op: '>=', value: high}\n", "rule 'x': value must be a number"),
    ("  - {name: x, metric: accuracy, latency: {percentile: 9, max_ms: 1}, op: '>=', value: 1}\n",
     "rule 'x' must have exactly one of metric, golden, latency"),
    ("  - {name: x, latency: {percentile: 101, max_ms: 1}}\n",
     "rule 'x': latency needs percentile (0-100) and max_ms"),
    # a boolean is no bound (YAML's true read as 1: 'p95 ≤ True ms'); accepted before the body's shape was declared
    ("  - {name: x, latency: {percentile: 95, max_ms: true}, self_reported: true}\n",
     "rule 'x': latency needs percentile (0-100) and max_ms"),
    ("  - {metric: accuracy}\n", "each rule needs a name"),
    ("  - {name: x, metric: avg(latency_ms), op: '<=', value: 1}\n",
     "rule 'x': metric 'avg(latency_ms)' is neither a metric name nor mean(field), min(field), max(field) or "
     "count(field)"),
    ("  - {name: x, metric: accuracy, op: '>=', value: 0.9, tolerance: 0.01}\n",
     "rule 'x': tolerance applies to op == and != only, as a number (op >=, tolerance 0.01)"),
    ("  - {name: x, golden: {samples: [{index: 0, expected: 1, tolerance: tight}]}}\n",
     "rule 'x': a golden sample's tolerance must be a number"),
    ("  - {name: x, golden: {samples: []}}\n",
     "rule 'x': golden samples is empty: it would prove nothing"),
    ("  - {name: x, metric: accuracy, op: '>=', value: .nan}\n", "rule 'x': value must be a finite number, not nan"),
    ("  - {name: x, latency: {percentile: 95, max_ms: -.inf}, self_reported: true}\n",
     "rule 'x': latency max_ms must be a finite number, not -inf"),
    ("  - {name: x, golden: {field: [1], samples: [{index: 0, expected: 1}]}}\n",
     "rule 'x': golden.field names an outputs list, as text ([1])"),
    ("  - {name: x, golden: {key: '', samples: [{index: 0, expected: 1}]}}\n",
     "rule 'x': golden.key names an outputs list, as text ('')"),
    ("  - {name: x, golden: {feild: labels, samples: [{index: 0, expected: 1}]}}\n",
     "rule 'x': unknown key 'feild' in golden"),
    ("  - {name: x, latency: {percentile: 95, max_ms: 20, field: {a: 1}}, self_reported: true}\n",
     "rule 'x': latency.field names an outputs list, as text ({'a': 1})"),
    ("  - {name: x, metric: acuracy, op: '>=', value: 0.9}\n",
     "rule 'x': unknown metric 'acuracy': the gate computes accuracy, balanced_accuracy, precision_macro, "
     "recall_macro, f1_macro, precision_weighted, recall_weighted, f1_weighted, precision[<class>], "
     "recall[<class>], f1[<class>], top_k_accuracy@<k>, recall@<k>, mae, mse, rmse, r2, max_error, mrr, "
     "exact_match, contains, regex_match, json_valid, rouge_l, wall_s, per_sample_ms, throughput_sps, "
     "memory_peak_mib, cpu_s, gpu_memory_peak_mib, device_utilisation_mean"),
    ("  - {name: x, metric: mean(top_probability), op: '>=', value: 0.9}\n",
     "rule 'x': metric 'mean(top_probability)' is computed over a list the model wrote about itself"),
    ("  - {name: x, latency: {percentile: 95, max_ms: 20}}\n",
     "rule 'x': a latency rule reads latencies the model timed itself"),
])
def test_bad_rules(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(CaseError) as info:
        _rules(tmp_path, body)
    assert info.value.message == message
    assert info.value.location.line == 4


def test_percentile_nearest_rank() -> None:
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 95) == 5.0
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert percentile([7.0], 0) == 7.0


def test_unknown_rule_key_says_where_and_what_was_meant(tmp_path: Path) -> None:
    with pytest.raises(CaseError) as info:
        _rules(tmp_path, "  - name: x\n    metrc: accuracy\n    op: '>='\n    value: 0.9\n")
    assert info.value.render() == (f"{tmp_path / 'r.yaml'}:5:5: field 'rules[0].metrc': unknown key 'metrc'\n"
                                   "  hint: did you mean 'metric'?")


def test_every_rule_problem_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(RulesInvalid) as info:
        _rules(tmp_path, dedent("""
          - {name: a, metric: accuracy, op: '>=', value: 1, colour: red}
          - {name: b, metric: accuracy, op: '=>', value: 1}
          - {name: c, latency: {percentile: 95}}
        """))
    where = tmp_path / "r.yaml"
    assert info.value.message == "unknown key 'colour'"
    assert info.value.render() == dedent(f"""
        3 problems in {where}:
        {where}:4:51: field 'rules[0].colour': unknown key 'colour'
          hint: allowed keys: name, description, metric, golden, latency, service_latency, error_rate, throughput, op, value, tolerance, self_reported, slice
        {where}:5:3: field 'rules[1]': rule 'b': op '=>' unknown
          hint: use one of >= <= > < == !=
        {where}:6:3: field 'rules[2]': rule 'c': latency needs percentile (0-100) and max_ms
          hint: e.g. latency: {{percentile: 95, max_ms: 20}}""")


def test_rules_are_parsed_once_per_file_until_it_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20.5: acceptance rules were re-parsed for every business item (3.3 ms each)."""
    import pytest_hetero.matrix.acceptance as acceptance

    path = tmp_path / "rules.yaml"
    path.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                    "  - {name: a, metric: accuracy, op: '>=', value: 0.5}\n")
    parses: list[Path] = []
    real = acceptance._parse_rules

    def counted(p: Path, raw: Any) -> Any:
        parses.append(p)
        return real(p, raw)

    monkeypatch.setattr(acceptance, "_parse_rules", counted)
    first = acceptance.load_rules(path)
    first[0]["value"] = 99  # a caller changing its copy changes nothing for the next
    assert [acceptance.load_rules(path)[0]["value"] for _ in range(50)] == [0.5] * 50
    assert parses == [path]
    path.write_text(path.read_text().replace("0.5", "0.75"))
    os.utime(path, ns=(path.stat().st_mtime_ns + 10**9,) * 2)
    assert acceptance.load_rules(path)[0]["value"] == 0.75 and parses == [path, path]


def test_a_golden_index_absent_from_the_outputs_is_not_evaluable_not_a_business_failure(tmp_path: Path) -> None:
    """Finding 11: a golden index the outputs do not have failed as ``got None`` (a business failure)."""
    rules = _rules(tmp_path, "  - {name: g, golden: {samples: [{index: 0, expected: 0}, {index: 42, expected: 1}]}}\n")
    [result] = evaluate(rules, OUTPUTS)
    assert (result["verdict"], result["problem"]) == ("not_evaluable", "missing")
    assert result["detail"] == "cannot evaluate: golden sample index(es) 42 not in the outputs (field 'indices', 4 entries)"
    [by_position] = evaluate(rules, {"predictions": [0, 1]})
    assert by_position["detail"] == ("cannot evaluate: golden sample index(es) 42 not in the outputs "
                                     "(positions of 'predictions', 2 entries)")


def test_two_rules_of_one_name_are_rejected(tmp_path: Path) -> None:
    """Finding 11: results, trends and diffs are keyed by rule name; a repeated name was accepted."""
    with pytest.raises(CaseError) as info:
        _rules(tmp_path, "  - {name: acc, metric: accuracy, op: '>=', value: 0.9}\n"
                         "  - {name: acc, metric: accuracy, op: '<=', value: 1}\n")
    assert info.value.message == "rule name 'acc' is used twice (first on line 4)"
    assert (info.value.location.line, info.value.location.field) == (5, "rules[1].name")


def test_a_throughput_floor_not_given_bounds_nothing(tmp_path: Path) -> None:
    """load_rules fills the floor a throughput rule leaves out (None): it is not in the expectation, and a level is
    judged on the floor given alone (as against 0 requests/s)."""
    rules = _rules(tmp_path, "  - {name: sps, throughput: {min_sps: 60}}\n")
    assert rules[0]["throughput"] == {"min_rps": None, "min_sps": 60, "concurrency": None}
    levels = {"service": {"levels": [
        {"concurrency": 1, "requests_per_s": 500.0, "samples_per_s": 50.0},
        {"concurrency": 8, "requests_per_s": 0.0, "samples_per_s": 180.0}]}}
    [result] = evaluate(rules, levels)
    assert (result["expected"], result["verdict"]) == ("samples/s ≥ 60 at every concurrency level", "fail")
    assert result["detail"] == "bound missed at c=1: 500 req/s, 50 samples/s"


def test_service_levels_of_another_shape_are_not_evaluable_naming_the_field(tmp_path: Path) -> None:
    """``outputs.service.levels`` is read as its declared shape (acceptance.ServiceLevel): a level without the
    statistic a rule needs, or a field of another type, makes the rule not evaluable, saying which (a KeyError's
    or TypeError's text before); an absent or null service is still "no service levels"."""
    rules = _rules(tmp_path, "  - {name: e, error_rate: {max: 0.1}}\n  - {name: t, throughput: {min_rps: 1}}\n")
    partial = evaluate(rules, {"service": {"levels": [{"concurrency": 1, "requests_per_s": 5.0}]}})
    assert [(r["verdict"], r["detail"], r.get("problem")) for r in partial] == [
        ("not_evaluable", "cannot evaluate: load level c=1 has no error_rate, errors or requests", "invalid"),
        ("not_evaluable", "cannot evaluate: load level c=1 has no requests_per_s or samples_per_s", "invalid")]
    [wrong, _] = evaluate(rules, {"service": {"levels": [{"concurrency": "1", "error_rate": 0.0}]}})
    assert wrong["detail"] == ("cannot evaluate: outputs.service is not the gate's load levels: Expected `int`, got "
                               "`str` - at `$.service.levels[0].concurrency`")
    assert evaluate(rules, {"service": None})[0]["detail"] == (
        "cannot evaluate: outputs have no service levels (not the run of a served model?)")


def test_outputs_metrics_that_are_no_object_report_nothing() -> None:
    """acceptance.ModelOutputs: ``outputs.metrics`` read as its declared shape (name → value); absent, null or of
    another type it reports nothing, and the outputs' other fields stay as written."""
    from pytest_hetero.matrix.acceptance import ModelOutputs

    for outputs in ({"metrics": [0.9]}, {"metrics": None}, {"predictions": [1]}):
        read = ModelOutputs.parse(outputs)
        assert (dict(read.metrics), read.fields) == ({}, outputs)
    assert dict(ModelOutputs.parse({"metrics": {"acc": None}}).metrics) == {"acc": None}
    assert ModelOutputs.parse([1]).fields == {}
