"""The truth stays out of the model's reach on the local engine (issue 30 follow-up): a model whose code folder holds
the dataset (as the digits example's does), with a labels file and a copy under the matrix folder, cannot read any
of them through ``{code}``, its working folder or their host paths; it fails honestly on the accuracy the gate
computes from its real predictions. Before the fix it read the labels and passed with accuracy 1.0.

A real run through pytester, the local engine and its bubblewrap sandbox; and the container engines' code view on
real files."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest
from cheatkit import constant_accuracy, layout, sha
from support import evidence_of

from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.truth.withhold import code_view, find_in, truth_files

LOCAL = {"target": {"backend": "local"}, "resources": [{"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}],
         "images": [{"name": "py", "reference": "python:current"}]}


def _item(ev: dict[str, Any], layer: str, dataset: str) -> dict[str, Any]:
    return next(i for i in ev["items"] if i["layer"] == layer and i["keys"]["dataset"] == dataset)


def _record(item: dict[str, Any], kind: str) -> dict[str, Any]:
    (found,) = [dict(r["data"]) for r in item["records"] if r["kind"] == kind]
    return found


def test_a_model_reading_labels_through_its_code_folder_finds_none_on_the_local_engine(
        pytester: pytest.Pytester) -> None:
    paths = layout(pytester.path, LOCAL)
    pytester.runpytest("-p", "no:cacheprovider", str(paths["matrix"]))
    ev = evidence_of(pytester)
    expected = constant_accuracy()
    for dataset in ("inline", "separate"):
        model = _item(ev, "model", dataset)
        run = _record(model, "model.run")
        assert run["isolation"]["mechanism"] == "bubblewrap"
        assert "labels found: 0" in run["stderr"]["text"]
        withheld = _record(model, "model.truth_withheld")
        assert withheld["how"] == "masked in the sandbox where the run could see them (opening one fails)"
        assert {(f["path"], f["sha256"], f["dataset"], f["why"]) for f in withheld["files"]} == {
            (str(paths["inline"]), sha(paths["inline"]), "inline", "truth file"),
            (str(paths["labels"]), sha(paths["labels"]), "separate", "truth file"),
            (str(paths["copy"]), sha(paths["inline"]), "inline", f"same bytes as {paths['inline']}")}
        assert {str(paths["inline"]), str(paths["labels"]), str(paths["copy"])} <= set(run["isolation"]["hidden"])
        business = _item(ev, "business", dataset)
        assert (business["status"], business["failure"]["category"], business["failure"]["owner"]) == \
            ("failed", "acceptance_failed", "business")
        (result,) = _record(business, "business.rules")["results"]
        assert (result["observed"], result["verdict"], result["provenance"]["source"]) == (expected, "fail",
                                                                                             "computed")
    # the files are still there for the gate: it read the truth from them
    assert _record(_item(ev, "business", "separate"), "business.metrics")["truth"]["sha256"] == sha(paths["labels"])


def test_the_container_code_view_leaves_the_truth_files_and_their_copies_out(tmp_path: Path) -> None:
    """Docker mounts and Kubernetes unpacks this copy: the cheat's code folder without the inline dataset and the
    labels file (found by path and by bytes: a renamed copy too), everything else as it was."""
    paths = layout(tmp_path, LOCAL)
    renamed = paths["code"] / "notes.txt"
    renamed.write_bytes(paths["labels"].read_bytes())
    (paths["code"] / "link.csv").symlink_to(paths["inline"])
    matrix = load_matrix(paths["matrix"])
    truths = truth_files(matrix.datasets)
    assert {(t.path, t.sha256) for t in truths} == {(paths["inline"], sha(paths["inline"])),
                                                    (paths["labels"], sha(paths["labels"]))}
    view = code_view(matrix.models[0].code or paths["code"], matrix.datasets)
    assert view.original == paths["code"] and view.path != paths["code"]
    assert sorted(str(p.relative_to(view.path)) for p in view.path.rglob("*")) == ["cheat.py", "data"]
    assert {(w.path.name, w.why) for w in view.withheld} == {
        ("digits-test-1.0.0.csv", "truth file"), ("labels.csv", "truth file"),
        ("notes.txt", f"same bytes as {paths['labels']}"), ("link.csv", f"links to truth file {paths['inline']}")}
    assert code_view(paths["code"], matrix.datasets).path == view.path  # made once for the same content
    assert find_in(paths["features"].parent, truths) == []

    from pytest_hetero.backends.kubernetes.run import input_tar

    with tarfile.open(fileobj=io.BytesIO(input_tar(matrix))) as tar:
        names = tar.getnames()
    assert [n for n in names if n.startswith("code/")] == ["code/cheat", "code/cheat/cheat.py", "code/cheat/data"]
    assert "datasets/separate/digits-features.csv" in names
