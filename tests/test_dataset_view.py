"""The model's view of a dataset (issue 30 follow-up): when the truth is a column of the dataset file itself, the
code under test is given a copy without it, made by the gate. Real runs through pytester and the local engine
(bubblewrap sandbox), and the view's own transforms on real files (CSV, JSONL, Parquet)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from support import evidence_of

from pytest_hetero.matrix.model import Dataset, Truth
from pytest_hetero.truth.view import ViewError, model_input, view

RULES = ("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
         "  - {name: acc, metric: accuracy, op: '>=', value: 0.97}\n")
CHEAT = ("import csv, json, sys\nrows = list(csv.DictReader(open(sys.argv[1])))\n"
         "json.dump({'ids': [r['id'] for r in rows], 'predictions': [r['label'] for r in rows]}, open(sys.argv[2], 'w'))\n")
HONEST = ("import csv, json, sys\nrows = list(csv.DictReader(open(sys.argv[1])))\n"
          "json.dump({'ids': [r['id'] for r in rows], 'predictions': [int(r['id']) % 3 for r in rows]}, "
          "open(sys.argv[2], 'w'))\n")
ROWS = 30


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _matrix(root: Path, datasets: list[dict[str, Any]], models: dict[str, str]) -> str:
    (root / "rules.yaml").write_text(RULES)
    weights = root / "weights.bin"
    weights.write_bytes(b"no weights: the scripts are the models\n")
    entries = []
    for name, body in models.items():
        code = root / "code" / name
        code.mkdir(parents=True, exist_ok=True)
        (code / "run.py").write_text(body)
        entries.append({"name": name, "version": "1", "uri": str(weights), "sha256": _sha(weights.read_bytes()),
                        "code": str(code), "entrypoint": ["{python}", "{code}/run.py", "{dataset}", "{outputs}"]})
    doc = {"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": "view"},
           "spec": {"target": {"backend": "local"}, "layers": {"model": {"timeout": "1m"}},
                    "resources": [{"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}],
                    "images": [{"name": "py", "reference": "python:current"}], "models": entries,
                    "datasets": [{"version": "1", "acceptance": str(root / "rules.yaml"), **d} for d in datasets]}}
    return json.dumps(doc, indent=1)


def _item(ev: dict[str, Any], layer: str, model: str, dataset: str) -> dict[str, Any]:
    return next(i for i in ev["items"] if i["layer"] == layer and i["keys"]["model"] == model
                and i["keys"]["dataset"] == dataset)


def _records(item: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [dict(r["data"]) for r in item["records"] if r["kind"] == kind]


def test_a_model_copying_the_inline_label_column_finds_no_such_column(pytester: pytest.Pytester) -> None:
    """Before: the cheater read `label` from the dataset file and scored accuracy 1.0 (business passed). Now it is
    given a copy without the column: KeyError, the model item fails, the business item does not pass; the model
    item's evidence names the view. The honest model passes on the same view; a dataset whose truth is a separate
    labels file is given as it is (no view)."""
    original = "id,feature,label\r\n" + "".join(f'{i},"{i * 0.5}",{i % 3}\r\n' for i in range(ROWS))
    data = pytester.path / "blobs.csv"
    data.write_bytes(original.encode())
    expected = ("id,feature\r\n" + "".join(f"{i},{i * 0.5}\r\n" for i in range(ROWS))).encode()
    labels = pytester.path / "labels.csv"
    labels.write_text("id,y\n" + "".join(f"{i},{i % 3}\n" for i in range(ROWS)))
    inline = {"name": "inline", "uri": str(data), "sha256": _sha(data.read_bytes()),
              "truth": {"task": "classification", "target": "label", "id": "id"}}
    separate = {"name": "separate", "uri": str(data), "sha256": _sha(data.read_bytes()),
                "truth": {"task": "classification", "target": "y", "id": "id",
                          "labels": {"uri": str(labels), "sha256": _sha(labels.read_bytes())}}}
    pytester.makefile(".matrix.yaml", m=_matrix(pytester.path, [inline, separate], {"cheat": CHEAT, "honest": HONEST}))
    pytester.runpytest("-p", "no:cacheprovider")
    ev = evidence_of(pytester)

    cheat = _item(ev, "model", "cheat", "inline")
    assert (cheat["status"], cheat["failure"]["category"], cheat["failure"]["owner"]) == \
        ("failed", "nonzero_exit", "algorithm")
    assert cheat["failure"]["message"] == "entrypoint exited with 1: KeyError: 'label'"
    view_record = {"path": "blobs.csv", "sha256": _sha(expected), "removed": "label",
                   "original_sha256": _sha(original.encode()), "format": "csv"}
    assert _records(cheat, "model.dataset_view") == [view_record]
    (run,) = _records(cheat, "model.run")
    given = Path(run["argv"][2])
    assert (given.name, given != data) == ("blobs.csv", True)
    assert _item(ev, "business", "cheat", "inline")["status"] == "blocked"

    honest = _item(ev, "model", "honest", "inline")
    assert (honest["status"], _records(honest, "model.dataset_view")) == ("passed", [view_record])
    business = _item(ev, "business", "honest", "inline")
    assert business["status"] == "passed"
    (result,) = next(r for r in _records(business, "business.rules"))["results"]
    assert (result["observed"], result["provenance"]["source"]) == (1.0, "computed")

    # a separate labels file: the dataset is given as it is, and the cheater's copied column is judged as the
    # guess it is (the `label` column here is not the truth: `y` in labels.csv is)
    for model in ("cheat", "honest"):
        item = _item(ev, "model", model, "separate")
        assert (item["status"], _records(item, "model.dataset_view")) == ("passed", [])
        assert _records(item, "model.run")[0]["argv"][2] == str(data)


def _dataset(path: Path, target: str = "label", fmt: str | None = None, separate: bool = False) -> Dataset:
    digest = _sha(path.read_bytes())
    truth = Truth(task="classification", target=target, id="id", path=path, sha256=digest, uri=str(path),
                  format=fmt, separate=separate)
    return Dataset(name=path.stem, version="1", uri=str(path), path=path, sha256=digest, acceptance=None,
                   truth=truth)


def test_csv_view_drops_only_the_target_column(tmp_path: Path) -> None:
    """Header and every row lose the target field; quoting that csv needs stays, the BOM and LF endings stay,
    a final line without a newline stays without one."""
    src = tmp_path / "q.csv"
    src.write_bytes('\ufeffid,label,text\n1,a,"x, y"\n2,b,"say ""hi"""\n3,c,plain'.encode())
    made = view(_dataset(src))
    assert made is not None
    assert made.path.read_bytes() == '\ufeffid,text\n1,"x, y"\n2,"say ""hi"""\n3,plain'.encode()
    assert (made.removed, made.format, made.original_sha256, made.sha256) == (
        "label", "csv", _sha(src.read_bytes()), _sha(made.path.read_bytes()))
    assert model_input(_dataset(src)) == made.path  # made once per session: the same file again


def test_jsonl_view_drops_the_key_of_every_object(tmp_path: Path) -> None:
    src = tmp_path / "t.jsonl"
    src.write_text('{"id": 1, "label": "cat", "input": "purr"}\n\n{"id": 2, "input": "bark", "label": "dog"}\n')
    made = view(_dataset(src))
    assert made is not None
    assert made.path.read_text() == '{"id": 1, "input": "purr"}\n\n{"id": 2, "input": "bark"}\n'


def test_parquet_view_drops_the_column(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")  # the [parquet] extra; installed with [test]
    import pyarrow.parquet as pq

    src = tmp_path / "h.parquet"
    pq.write_table(pa.table({"id": [1, 2], "label": ["a", "b"], "x": [0.5, 1.5]}), src)
    made = view(_dataset(src))
    assert made is not None
    assert pq.read_table(made.path).to_pydict() == {"id": [1, 2], "x": [0.5, 1.5]}


def test_parquet_without_pyarrow_is_refused_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No pyarrow (made absent here: it is installed with [test]) means no view, never the unfiltered file."""
    src = tmp_path / "np.parquet"
    src.write_bytes(b"PAR1 not read: pyarrow is absent PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ViewError) as caught:
        model_input(_dataset(src))
    assert caught.value.category == "truth_unavailable"
    assert caught.value.message == (
        f"dataset file {src} is Parquet with its truth column 'label' inline, and pyarrow is not installed here to "
        "give the model a copy without it: pip install 'pytest-hetero[parquet]', or declare a separate truth.labels "
        "file")


def test_no_view_for_separate_labels_and_none_of_a_changed_file(tmp_path: Path) -> None:
    src = tmp_path / "s.csv"
    src.write_text("id,label\n1,a\n")
    assert model_input(_dataset(src, separate=True)) == src
    changed = _dataset(src)
    src.write_text("id,label\n1,b\n")
    with pytest.raises(ViewError) as caught:
        view(changed)
    assert caught.value.category == "truth_changed"
    missing = tmp_path / "m.csv"
    missing.write_text("id,y\n1,a\n")
    with pytest.raises(ViewError) as absent:
        view(_dataset(missing))
    assert (absent.value.category, absent.value.message) == (
        "truth_invalid", f"dataset file {missing} has no column 'label' (columns: id, y): fix truth.target")


def test_the_kubernetes_input_tar_carries_the_view() -> None:
    """What is copied into the pod (the tar of every input) holds the example's dataset without `label`, at the
    in-pod path the entrypoint is given; the id column `index` stays."""
    import io
    import tarfile

    from support import REPO

    from pytest_hetero.backends.kubernetes.run import input_paths, input_tar
    from pytest_hetero.matrix.load import load_matrix

    matrix = load_matrix(REPO / "matrices" / "example-cpu.matrix.yaml")
    (dataset,) = matrix.datasets
    with tarfile.open(fileobj=io.BytesIO(input_tar(matrix))) as tar:
        member = tar.extractfile("datasets/digits-test/digits-test-1.0.0.csv")
        assert member is not None
        header = member.readline().decode().strip().split(",")
    assert header == ["index", *(f"p{i}" for i in range(64))]
    model = matrix.models[0]
    assert input_paths("/r", model.name, model.path, REPO, dataset.name, model_input(dataset))["dataset"] == \
        "/r/datasets/digits-test/digits-test-1.0.0.csv"


@pytest.mark.usefixtures("outside_inputs")  # the matrix in tmp_path names the repository's cases/
def test_a_model_runs_own_pod_gets_its_model_and_dataset_only(tmp_path: Path) -> None:
    """A per-run pod's tar (``only``) holds the run's model file, code and dataset view, none of the other models'
    or datasets': the run sees its own inputs, and the tar does not grow with the matrix."""
    import io
    import json
    import tarfile

    from support import DIGITS, matrix_text

    from pytest_hetero.backends.kubernetes.run import input_tar
    from pytest_hetero.matrix.load import load_matrix

    doc = json.loads(matrix_text(backend="kubernetes", name="o"))
    first, data = doc["spec"]["models"][0], doc["spec"]["datasets"][0]
    doc["spec"]["models"] = [first, {**first, "name": "other"}]
    doc["spec"]["datasets"] = [data, {**data, "name": "second"}]
    (tmp_path / "o.matrix.yaml").write_text(json.dumps(doc))
    matrix = load_matrix(tmp_path / "o.matrix.yaml")
    with tarfile.open(fileobj=io.BytesIO(input_tar(matrix))) as tar:
        whole = {n.split("/")[0] + "/" + n.split("/")[1] for n in tar.getnames() if n.count("/") >= 1}
    assert whole == {f"models/{first['name']}", "models/other", f"code/{first['name']}", "code/other",
                     f"datasets/{data['name']}", "datasets/second"}
    with tarfile.open(fileobj=io.BytesIO(input_tar(matrix, ("other", "second")))) as tar:
        names = tar.getnames()
    assert {n.split("/")[0] + "/" + n.split("/")[1] for n in names if n.count("/") >= 1} == {
        "models/other", "code/other", "datasets/second"}
    assert f"models/other/{matrix.models[1].path.name}" in names and DIGITS.is_dir()
