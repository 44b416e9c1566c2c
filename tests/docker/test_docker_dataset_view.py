"""On the real Docker engine the model reads the gate's view of a dataset whose truth is inline: the mounted file
has no ``label`` column, so a model copying it into its predictions cannot score; the honest digits model still
passes on the same view (issue 30 follow-up)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from dockerkit import (
    CPU,
    DATA_SHA,
    DIGITS,
    ENTRYPOINT,
    MODEL_SHA,
    ONNX_IMAGE,
    evidence,
    failure,
    items,
    leftovers,
    record,
    statuses,
)

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

CHEAT = ("import csv, json, sys\nrows = list(csv.DictReader(open(sys.argv[1])))\n"
         "json.dump({'ids': [int(r['index']) for r in rows], 'predictions': [int(r['label']) for r in rows]}, "
         "open(sys.argv[2], 'w'))\n")
RULES = ("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
         "  - {name: acc, metric: accuracy, op: '>=', value: 0.95}\n")


def _view_sha() -> str:
    """sha256 of the digits CSV without its label column (the second), as the gate's csv writer makes it."""
    lines = (DIGITS / "data" / "digits-test-1.0.0.csv").read_text().splitlines()
    body = "".join(",".join(p[:1] + p[2:]) + "\n" for p in (line.split(",") for line in lines))
    return hashlib.sha256(body.encode()).hexdigest()


def test_the_container_sees_the_dataset_without_its_label_column(pytester: pytest.Pytester, run_id: str,
                                                                 engine: Any) -> None:
    cheat = pytester.path / "cheat"
    cheat.mkdir()
    (cheat / "run.py").write_text(CHEAT)
    (pytester.path / "rules.yaml").write_text(RULES)
    model = {"version": "1.0.0", "uri": str(DIGITS / "model" / "digits-logreg-1.0.0.onnx"), "sha256": MODEL_SHA,
             "runtime": "onnxruntime"}
    spec = {"target": {"backend": "docker", "pull_policy": "never"},
            "layers": {"startup": {"timeout": "60s"}, "model": {"timeout": "60s"}},
            "resources": [CPU], "images": [{"name": "img", "reference": ONNX_IMAGE, "for": ["cpu"]}],
            "models": [{"name": "honest", "code": str(DIGITS), "entrypoint": ENTRYPOINT, **model},
                       {"name": "cheat", "code": str(cheat),
                        "entrypoint": ["{python}", "{code}/run.py", "{dataset}", "{outputs}"], **model}],
            "datasets": [{"name": "digits", "version": "1.0.0", "uri": str(DIGITS / "data" / "digits-test-1.0.0.csv"),
                          "sha256": DATA_SHA, "acceptance": str(pytester.path / "rules.yaml"),
                          "truth": {"task": "classification", "target": "label", "id": "index"}}]}
    doc = {"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": "v"}, "spec": spec}
    pytester.makefile(".matrix.yaml", v=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id)
    ev = evidence(pytester)
    it = items(ev)
    view = {"path": "digits-test-1.0.0.csv", "sha256": _view_sha(), "removed": "label", "original_sha256": DATA_SHA,
            "format": "csv"}

    assert failure(it["cpu::img::cheat@digits::model"]) == (
        "failed", "nonzero_exit", "algorithm", "entrypoint exited with 1: KeyError: 'label'")
    assert record(it["cpu::img::cheat@digits::model"], "model.dataset_view") == view
    assert record(it["cpu::img::cheat@digits::model"], "model.run")["argv"][2] == \
        "/hetero/datasets/digits/digits-test-1.0.0.csv"
    assert statuses(ev)["cpu::img::cheat@digits::business"] == "blocked"

    assert record(it["cpu::img::honest@digits::model"], "model.dataset_view") == view
    honest = it["cpu::img::honest@digits::business"]
    assert honest["status"] == "passed"
    (result,) = record(honest, "business.rules")["results"]
    assert (result["verdict"], result["provenance"]["source"]) == ("pass", "computed")
    assert result["observed"] >= 0.95
    assert leftovers(engine, run_id) == []
    assert not Path("/hetero").exists()  # the paths above are the container's
