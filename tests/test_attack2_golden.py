"""Attack round 2, (a): a golden rule's expected values are truth the gate holds, like the truth column. They live
in the dataset's acceptance file, which sits in the matrix folder (the local run's working folder) or the model's
code folder, as the README tour lays them out. A model that reads that file and answers the golden samples with their
expected values passes the golden rule without predicting them: a ``computed`` pass the model decided.

A real run through pytester, the local engine and its bubblewrap sandbox: the cheat looks for the acceptance file
in its working folder and its code folder and answers each golden index it finds there; the rest it predicts as
class 0. With the file withheld it finds nothing and the golden rule fails on its real answers."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from support import evidence_of

CHEAT = r"""import json, os, re, sys
code, dataset, out = sys.argv[1:]
golden = {}
for top in (code, '.'):
    for folder, _, files in os.walk(top):
        for name in files:
            try:
                text = open(os.path.join(folder, name), encoding='utf-8').read()
            except (OSError, UnicodeDecodeError):
                continue
            for index, expected in re.findall(r'index: (\d+), expected: (\d+)', text):
                golden[int(index)] = int(expected)
ids = [int(line.split(',')[0]) for line in open(dataset).read().split()[1:]]
print(f'golden answers found: {len(golden)}', file=sys.stderr)
json.dump({'ids': ids, 'predictions': [golden.get(i, 0) for i in ids]}, open(out, 'w'))
"""


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _layout(root: Path) -> Path:
    (root / ".hetero-root").write_text("")
    code = root / "code"
    code.mkdir()
    (code / "cheat.py").write_text(CHEAT)
    (code / "model.bin").write_bytes(b"weights")
    data = root / "data"
    data.mkdir()
    # truth: label = 1 for every row; the golden samples name rows 1 and 2
    (data / "rows.csv").write_text("index,label,x\n" + "".join(f"{i},1,{i}\n" for i in range(6)))
    (code / "acceptance.yaml").write_text(
        "apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nmetadata: {name: g}\nrules:\n"
        "  - name: golden\n    golden: {field: predictions, key: ids, samples: "
        "[{index: 1, expected: 1}, {index: 2, expected: 1}]}\n")
    matrix: dict[str, Any] = {
        "apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": "g"},
        "spec": {"target": {"backend": "local"},
                 "resources": [{"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}],
                 "images": [{"name": "py", "reference": "python:current"}],
                 "models": [{"name": "cheat", "version": "1", "uri": "code/model.bin",
                             "sha256": _sha(code / "model.bin"), "code": "code",
                             "entrypoint": ["{python}", "{code}/cheat.py", "{code}", "{dataset}", "{outputs}"]}],
                 "datasets": [{"name": "rows", "version": "1", "uri": "data/rows.csv",
                               "sha256": _sha(data / "rows.csv"),
                               "truth": {"task": "classification", "target": "label", "id": "index"},
                               "acceptance": "code/acceptance.yaml"}]}}
    path = root / "g.matrix.yaml"
    path.write_text(json.dumps(matrix))
    return path


def _records(item: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [dict(r["data"]) for r in item["records"] if r["kind"] == kind]


def test_a_model_cannot_read_the_golden_answers_from_its_acceptance_file(pytester: pytest.Pytester) -> None:
    matrix = _layout(pytester.path)
    pytester.runpytest("-p", "no:cacheprovider", str(matrix))
    ev = evidence_of(pytester)
    model = next(i for i in ev["items"] if i["layer"] == "model")
    (run,) = _records(model, "model.run")
    assert run["isolation"]["mechanism"] == "bubblewrap"
    assert "golden answers found: 0" in run["stderr"]["text"], run["stderr"]["text"]
    business = next(i for i in ev["items"] if i["layer"] == "business")
    (result,) = _records(business, "business.rules")[0]["results"]
    assert (result["name"], result["verdict"], result["observed"]) == ("golden", "fail", "0/2 match")
    assert business["status"] == "failed"


def test_the_container_code_view_leaves_the_golden_acceptance_file_out(tmp_path: Path) -> None:
    """Docker mounts and Kubernetes unpacks this copy of the code folder: without the rules file that holds the
    golden answers (found by path and, renamed, by bytes), everything else as it was."""
    from pytest_hetero.matrix.load import load_matrix
    from pytest_hetero.truth.withhold import code_view

    matrix_path = _layout(tmp_path)
    code = tmp_path / "code"
    (code / "notes.yaml").write_bytes((code / "acceptance.yaml").read_bytes())
    matrix = load_matrix(matrix_path)
    view = code_view(code, matrix.datasets)
    assert sorted(p.name for p in view.path.iterdir()) == ["cheat.py", "model.bin"]
    assert {(w.path.name, w.why) for w in view.withheld} == {
        ("acceptance.yaml", "golden samples"), ("notes.yaml", f"same bytes as {code / 'acceptance.yaml'}")}
