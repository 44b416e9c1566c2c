"""Attack round 2, (d): a generation model whose prediction is JSON *text* nested thousands of levels deep. The
outputs file's own nesting is bounded (``parse_outputs``), but a prediction is a string inside it: the gate's
``json_valid`` parsed it with ``json.loads`` and validated it with ``jsonschema``, both recursive, and the
RecursionError escaped the rule (neither a ValueError nor a TypeError): the business item ended as a gate harness
error owned by the platform, with the gate's traceback, instead of judging the model's answer.

A prediction too deep to parse or validate is not valid JSON for the rule: it counts as invalid, like unparsable
text. A real run through pytester and the local engine, and the metric function on its own."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from support import evidence_of

from pytest_hetero.matrix.gate_metrics import json_valid

DEEP = "[" * 5000 + "]" * 5000
SCHEMA = {"type": "array", "items": {"$ref": "#"}}  # recursive: validation descends with the value


def test_json_valid_counts_a_too_deep_prediction_as_invalid() -> None:
    assert json_valid([DEEP, "[[]]"], SCHEMA) == 0.5
    assert json_valid(["[" * 600 + "]" * 600, "[]"], SCHEMA) == 0.5  # parses, but too deep to validate


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_deeply_nested_prediction_is_judged_not_a_gate_error(pytester: pytest.Pytester) -> None:
    root = pytester.path
    (root / ".hetero-root").write_text("")
    (root / "model.bin").write_bytes(b"m")
    (root / "gen.py").write_text("import json, sys\n"
                                 f"json.dump({{'ids': [0, 1], 'predictions': [{DEEP!r}, '[[]]']}}, "
                                 "open(sys.argv[1], 'w'))\n")
    (root / "rows.jsonl").write_text('{"id": 0, "ref": "[]"}\n{"id": 1, "ref": "[[]]"}\n')
    (root / "rules.yaml").write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nmetadata: {name: j}\n"
                                     "rules:\n  - {name: valid-json, metric: json_valid, op: '>=', value: 0.9}\n")
    matrix: dict[str, Any] = {
        "apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": "j"},
        "spec": {"target": {"backend": "local"},
                 "resources": [{"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}],
                 "images": [{"name": "py", "reference": "python:current"}],
                 "models": [{"name": "gen", "version": "1", "uri": "model.bin", "sha256": _sha(root / "model.bin"),
                             "entrypoint": ["{python}", "gen.py", "{outputs}"]}],
                 "datasets": [{"name": "rows", "version": "1", "uri": "rows.jsonl",
                               "sha256": _sha(root / "rows.jsonl"),
                               "truth": {"task": "generation", "target": "ref", "id": "id", "json_schema": SCHEMA},
                               "acceptance": "rules.yaml"}]}}
    (root / "j.matrix.yaml").write_text(json.dumps(matrix))
    pytester.runpytest("-p", "no:cacheprovider", str(root / "j.matrix.yaml"))
    business = next(i for i in evidence_of(pytester)["items"] if i["layer"] == "business")
    assert (business["status"], business["failure"]["category"], business["failure"]["owner"]) == (
        "failed", "acceptance_failed", "business"), business["failure"]
    (rules,) = [r["data"] for r in business["records"] if r["kind"] == "business.rules"]
    (result,) = rules["results"]
    assert (result["observed"], result["verdict"], result["provenance"]["source"]) == (0.5, "fail", "computed")
