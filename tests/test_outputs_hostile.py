"""Hostile outputs are the model's fault, refused cleanly (issue 29): never a gate traceback.

Before (main): 200,000-deep JSON raised RecursionError and a 5,000-digit number ValueError inside the
gate, recorded as ``model/harness (owner: platform)`` with a traceback. Each case here is a real model
run on the local engine writing the hostile outputs; the model item must fail ``bad_outputs`` owned by
algorithm with a message saying what was wrong, its business item blocked, and no traceback anywhere.
"""

from __future__ import annotations

import json

import pytest
from support import DATA_SHA, DIGITS, MODEL_SHA, evidence_of, statuses

from pytest_hetero.layers.execution import MAX_OUTPUTS_DEPTH, OutputsUnusable, parse_outputs

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

RULES = """\
apiVersion: pytest-hetero/v1
kind: AcceptanceRules
rules:
  - {name: accuracy-floor, metric: accuracy, op: ">=", value: 0.5}
"""


def run_model(pytester: pytest.Pytester, writer: str) -> tuple[pytest.RunResult, dict[str, object]]:
    """A matrix whose one model runs ``writer`` (Python, ``o`` the outputs path); pytest's result and the
    model item of the evidence."""
    (pytester.path / "rules.yaml").write_text(RULES)
    escaped = writer.replace("{", "{{").replace("}", "}}")  # entrypoint placeholders use braces
    entry = ["{python}", "-c", f"import os, sys; o = sys.argv[1]; {escaped}", "{outputs}"]
    doc = {"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": "t"},
           "spec": {"target": {"backend": "local"},
                    "resources": [{"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}],
                    "images": [{"name": "py", "reference": "python:current"}],
                    "models": [{"name": "m", "version": "1", "uri": str(DIGITS / "model" / "digits-logreg-1.0.0.onnx"),
                                "sha256": MODEL_SHA, "code": ".", "entrypoint": entry}],
                    "datasets": [{"name": "d", "version": "1", "uri": str(DIGITS / "data" / "digits-test-1.0.0.csv"),
                                  "sha256": DATA_SHA, "acceptance": "rules.yaml"}]}}
    (pytester.path / "m.matrix.yaml").write_text(json.dumps(doc))
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", "r1", "-k", "model or business")
    evidence = evidence_of(pytester)
    item = next(i for i in evidence["items"] if i["layer"] == "model")
    got = statuses(evidence)
    assert (got["cpu-host::py::m@d::model"], got["cpu-host::py::m@d::business"]) == ("failed", "blocked")
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text and "INTERNALERROR" not in text and "harness" not in text
    return result, item


@pytest.mark.parametrize(("writer", "message"), [
    ("open(o, 'w').write('[' * 200000 + ']' * 200000)",
     "outputs file is nested deeper than the parser's limit (the most read is 64 levels of arrays and objects)"),
    ("open(o, 'w').write('{\"metrics\": {\"accuracy\": ' + '9' * 5000 + '}}')",
     "outputs file holds a 5000-character number (99999999999999999999…); numbers of more than 64 characters are "
     "not read: write metrics as ordinary numbers"),
    ("open(o, 'w').write('{\"metrics\": {\"accuracy\": 0.' + '1' * 400 + '}}')",
     "outputs file holds a 402-character number (0.111111111111111111…); numbers of more than 64 characters are "
     "not read: write metrics as ordinary numbers"),
    ("open(o, 'w').write('{\"a\": ' + '[' * 80 + ']' * 80 + '}')",
     "outputs file is nested 65+ levels deep; the most read is 64 levels of arrays and objects"),
    ("os.mkdir(o)", "outputs file outputs.json is not a regular file"),
])
def test_hostile_outputs_fail_the_model_cleanly(pytester: pytest.Pytester, writer: str, message: str) -> None:
    """Deep nesting (200,000 and 81 levels), long numbers (5,000 digits, 402 characters) and an outputs
    "file" that is a folder: ``bad_outputs`` (algorithm) with the exact reason, kept as unusable outputs."""
    result, item = run_model(pytester, writer)
    result.assert_outcomes(failed=1, skipped=1)  # business: blocked
    failure = item["failure"]
    assert isinstance(failure, dict)
    assert (failure["category"], failure["owner"]) == ("bad_outputs", "algorithm")
    assert str(failure["message"]).split(" (kept as ")[0] == message


def test_parse_outputs_bounds() -> None:
    """The reader itself: the deepest accepted nesting reads, one more level and a 65-character number do
    not, a 64-character one does; never RecursionError."""
    deep_ok = "[" * MAX_OUTPUTS_DEPTH + "]" * MAX_OUTPUTS_DEPTH
    assert parse_outputs(deep_ok) is not None
    with pytest.raises(OutputsUnusable):
        parse_outputs("[" * (MAX_OUTPUTS_DEPTH + 1) + "]" * (MAX_OUTPUTS_DEPTH + 1))
    with pytest.raises(OutputsUnusable):
        parse_outputs("{" + '"a":{' * 100000 + "1" + "}" * 100001)
    assert parse_outputs('{"n": ' + "1" * 64 + "}") == {"n": int("1" * 64)}
    with pytest.raises(OutputsUnusable):
        parse_outputs('{"n": ' + "1" * 65 + "}")
    assert parse_outputs(b'{"metrics": {"accuracy": 0.5}}') == {"metrics": {"accuracy": 0.5}}

