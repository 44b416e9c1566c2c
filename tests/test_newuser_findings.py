"""Findings of a new user's trial on evidence truth, inputs and the CLI: each test reproduces one with real
files and real runs (pytester, the ``hetero`` command in a subprocess) and asserts the corrected behaviour."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import matrix_text


def _strict_json(text: str) -> Any:
    """Parse ``text`` as RFC 8259 JSON: NaN and ±Infinity refused as JSON.parse and jq refuse them."""
    def refuse(token: str) -> Any:
        raise ValueError(f"non-standard JSON token {token}")
    return json.loads(text, parse_constant=refuse)


def _model(name: str, outputs: str) -> dict[str, Any]:
    """A model of the digits case whose entrypoint writes ``outputs`` (raw text) as its outputs file (hex in
    the argv: braces there are entrypoint placeholders)."""
    doc = json.loads(matrix_text())["spec"]["models"][0]
    return {**doc, "name": name, "entrypoint": [
        "{python}", "-c", "import sys; open(sys.argv[1], 'wb').write(bytes.fromhex(sys.argv[2]))", "{outputs}",
        outputs.encode().hex()]}


def _business(ev: dict[str, Any], model: str) -> dict[str, Any]:
    return next(i for i in ev["items"] if i["layer"] == "business" and f"::{model}@" in i["nodeid"])


def _layer(ev: dict[str, Any], model: str, layer: str) -> dict[str, Any]:
    return next(i for i in ev["items"] if i["layer"] == layer and f"::{model}@" in i["nodeid"])


def test_non_finite_metrics_are_not_evaluable_and_every_file_stays_standard_json(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Finding 2: ``Infinity`` passed ``acc >= 0.9``, ``-Infinity`` passed ``<= 2``, ``1e400`` (read as
    inf) passed, and evidence.json/journal.jsonl held bare ``Infinity``. Finding 11: a key written twice
    in the outputs silently kept the last value."""
    rules = tmp_path / "rules.yaml"
    rules.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                     "  - {name: acc, metric: accuracy, op: '>=', value: 0.9}\n"
                     "  - {name: err, metric: accuracy, op: '<=', value: 2}\n"
                     "  - {name: lat, metric: mean(latency_ms), op: '<=', value: 5}\n")
    doc = json.loads(matrix_text(acceptance=rules))
    doc["spec"]["models"] = [
        _model("inf", '{"metrics": {"accuracy": Infinity}, "latency_ms": [1, 2]}'),
        _model("neginf", '{"metrics": {"accuracy": -Infinity}, "latency_ms": [1, 2]}'),
        _model("huge", '{"metrics": {"accuracy": 1e400}, "latency_ms": [1e308, 1e308]}'),
        _model("dupkey", '{"metrics": {"accuracy": 0.95, "accuracy": 0.1}, "latency_ms": [1]}'),
        _model("good", '{"metrics": {"accuracy": 0.95}, "latency_ms": [1, 2]}'),
    ]
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    bundle = next((pytester.path / "reports").iterdir())
    ev = _strict_json((bundle / "evidence.json").read_text())
    for line in (bundle / "journal.jsonl").read_text().splitlines():
        _strict_json(line)
    for model in ("inf", "neginf", "huge"):
        business = _business(ev, model)
        assert business["status"] == "error", model
        assert (business["failure"]["category"], business["failure"]["owner"]) == ("outputs_invalid", "algorithm")
        results = {r["name"]: r for r in next(r["data"] for r in business["records"]
                                              if r["kind"] == "business.rules")["results"]}
        assert results["acc"]["verdict"] == results["err"]["verdict"] == "not_evaluable"
    assert "metric 'accuracy' is Infinity, not a number" in _business(ev, "inf")["failure"]["message"]
    assert "metric 'accuracy' is -Infinity, not a number" in _business(ev, "neginf")["failure"]["message"]
    assert "metric 'mean(latency_ms)' evaluates to Infinity" in _business(ev, "huge")["failure"]["message"]
    dup = _layer(ev, "dupkey", "model")
    assert (dup["status"], dup["failure"]["category"], dup["failure"]["owner"]) == ("failed", "bad_outputs",
                                                                                   "algorithm")
    assert dup["failure"]["message"].startswith("outputs file repeats key 'accuracy' in one object")
    assert _business(ev, "good")["status"] == "passed"
    assert ev["summary"]["verdict"] == "fail"


def test_a_non_finite_number_in_a_record_is_written_as_null_never_as_bare_infinity(tmp_path: Path) -> None:
    """Finding 2: the journal (and from it the evidence) wrote bare ``Infinity``/``NaN``, which JSON.parse
    refuses; a non-finite float anywhere in a record is now written as null, and evidence.json refuses one."""
    from pytest_hetero.evidence.journal import JournalKey, seal
    from pytest_hetero.evidence.recorder import write_evidence

    line = seal({"type": "record", "data": {"peak": float("inf"), "values": [1.5, float("nan"), -float("inf")]}},
                3, JournalKey.ephemeral())
    parsed = _strict_json(line.decode("ascii"))
    assert parsed["data"] == {"peak": None, "values": [1.5, None, None]} and parsed["seq"] == 3
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        write_evidence(tmp_path, {"summary": {"mean": float("inf")}})
    assert not (tmp_path / "evidence.json").exists()
