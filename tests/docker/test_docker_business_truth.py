"""Issue 30 on the real Docker engine: the gate computes business results from the dataset's truth, and the truth
stays out of the container.

- a model whose code folder holds the dataset and a labels file (as the digits example's does) reads every file it
  can reach through ``{code}`` and its working folder and finds no label: the container's code folder is the gate's
  copy without them (``model.truth_withheld``), so it fails on the accuracy the gate computes from its real
  predictions (before the fix it read 360 labels and passed with accuracy 1.0);
- the four cheating models of the issue (one class with a self-reported 0.999, their own labels, a renamed
  self-reported metric, ids missing/repeated/unknown) fail or are labelled self-reported, and the correct one passes
  on scikit-learn's accuracy of the same arrays;
- a JSONL and a Parquet labels file of their own are read by the gate, outside the container.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from cheatkit import CHEATERS, SCRIPT, constant_accuracy, layout, sha
from dockerkit import CPU, ONNX_IMAGE, evidence, leftovers, record
from sklearn.metrics import accuracy_score

DOCKER = {"target": {"backend": "docker", "pull_policy": "never"},
          "layers": {"startup": {"timeout": "60s"}, "model": {"timeout": "60s"}},
          "resources": [CPU], "images": [{"name": "img", "reference": ONNX_IMAGE, "for": ["cpu"]}]}


def _item(ev: dict[str, Any], layer: str, model: str, dataset: str) -> dict[str, Any]:
    return next(i for i in ev["items"] if i["layer"] == layer and i["keys"]["model"] == model
                and i["keys"]["dataset"] == dataset)


def _status(item: dict[str, Any]) -> tuple[str, str, str]:
    f = item["failure"] or {}
    return item["status"], f.get("category", ""), f.get("owner", "")


def test_a_model_reading_labels_through_its_code_folder_finds_none_in_the_container(
        pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    paths = layout(pytester.path, DOCKER)
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, str(paths["matrix"]))
    ev = evidence(pytester)
    expected = constant_accuracy()
    for dataset in ("inline", "separate"):
        model = _item(ev, "model", "cheat", dataset)
        assert model["status"] == "passed", model["failure"]
        run = record(model, "model.run")
        assert run["argv"][2] == "/hetero/code/cheat"
        assert run["stderr"]["text"].strip().endswith("labels found: 0")
        withheld = record(model, "model.truth_withheld")
        assert withheld["how"] == "left out of the copy of the code folder given to the container"
        assert withheld["code"] == str(paths["code"]) and withheld["copy"] not in (None, str(paths["code"]))
        assert sorted((f["path"], f["sha256"], f["dataset"], f["why"]) for f in withheld["files"]) == sorted([
            (str(paths["inline"]), sha(paths["inline"]), "inline", "truth file"),
            (str(paths["labels"]), sha(paths["labels"]), "separate", "truth file")])
        business = _item(ev, "business", "cheat", dataset)
        assert _status(business) == ("failed", "acceptance_failed", "business")
        (result,) = record(business, "business.rules")["results"]
        assert (result["observed"], result["verdict"], result["provenance"]["source"]) == (expected, "fail",
                                                                                             "computed")
    startup = next(i for i in ev["items"] if i["layer"] == "startup")
    mounts = {m["target"]: m["source"] for m in record(startup, "startup.container")["mounts"]}
    assert mounts["/hetero/code/cheat"] == withheld["copy"]
    assert sorted(p.name for p in Path(withheld["copy"]).rglob("*")) == ["cheat.py", "data"]
    assert leftovers(engine, run_id) == []


def _matrix(root: Path, datasets: list[dict[str, Any]], models: dict[str, str], rules: str) -> str:
    """A Docker matrix running each of ``models`` (name → :data:`SCRIPT` body) on each of ``datasets``."""
    (root / "rules.yaml").write_text(rules)
    weights = root / "weights.bin"
    weights.write_bytes(b"no weights: the scripts are the models\n")
    entries = []
    for name, body in models.items():
        code = root / "code" / name
        code.mkdir(parents=True)
        (code / "run.py").write_text(SCRIPT.format(body=body))
        entries.append({"name": name, "version": "1", "uri": str(weights), "sha256": sha(weights), "code": str(code),
                        "entrypoint": ["{python}", "{code}/run.py", "{dataset}", "{outputs}"]})
    spec = {**DOCKER, "models": entries,
            "datasets": [{"version": "1", "acceptance": str(root / "rules.yaml"), **d} for d in datasets]}
    return json.dumps({"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": "t"},
                       "spec": spec})


def test_the_four_cheating_models_fail_or_are_self_reported_in_the_container(
        pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    data = pytester.path / "blobs.csv"
    data.write_text("id,feature,label\n" + "".join(f"{i},{i * 0.5},{i % 3}\n" for i in range(300)))
    dataset = {"name": "blobs", "uri": str(data), "sha256": sha(data),
               "truth": {"task": "classification", "target": "label", "id": "id"}}
    rules = ("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
             "  - {name: acc, metric: accuracy, op: '>=', value: 0.97}\n")
    pytester.makefile(".matrix.yaml", m=_matrix(pytester.path, [dataset], CHEATERS, rules))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id)
    ev = evidence(pytester)
    for cheat in ("one-class", "own-labels"):
        item = _item(ev, "business", cheat, "blobs")
        assert _status(item) == ("failed", "acceptance_failed", "business")
        (result,) = record(item, "business.rules")["results"]
        assert (result["observed"], result["verdict"], result["provenance"]["source"]) == (0.333333, "fail",
                                                                                             "computed")
        assert result["provenance"]["truth_sha256"] == sha(data)
        metrics = record(item, "business.metrics")
        assert metrics["computed"]["confusion_matrix"] == [[100, 0, 0], [100, 0, 0], [100, 0, 0]]
    assert record(_item(ev, "business", "one-class", "blobs"), "business.metrics")["self_reported"] == {
        "values": {"accuracy": 0.999}, "note": "self-reported, not verified"}
    correct = _item(ev, "business", "correct", "blobs")
    assert correct["status"] == "passed"
    truth = [i % 3 for i in range(300)]
    (result,) = record(correct, "business.rules")["results"]
    assert result["observed"] == accuracy_score(truth, [i % 3 for i in range(300)]) == 1.0
    assert record(correct, "business.metrics")["self_reported"]["values"] == {"acc": 0.5}
    unmatched = _item(ev, "business", "unmatched", "blobs")
    assert _status(unmatched) == ("failed", "predictions_unmatched", "algorithm")
    assert record(unmatched, "business.metrics")["join"] == {
        "joined": 297, "missing": 2, "duplicate": 1, "extra": 2,
        "examples": {"missing": ["0", "1"], "duplicate": ["2"], "extra": ["900", "901"]}}
    assert record(_item(ev, "model", "correct", "blobs"), "model.run")["argv"][2] == \
        "/hetero/datasets/blobs/blobs.csv"
    assert leftovers(engine, run_id) == []


def test_jsonl_and_parquet_labels_files_are_read_by_the_gate_outside_the_container(
        pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    pa = pytest.importorskip("pyarrow")  # the [parquet] extra; installed with [test]
    import pyarrow.parquet as pq

    data = pytester.path / "inputs.csv"
    data.write_text("id,feature\n" + "".join(f"{i},{i}\n" for i in range(10)))
    classes = ["cat" if i < 6 else "dog" for i in range(10)]
    jsonl = pytester.path / "labels.jsonl"
    jsonl.write_text("".join(json.dumps({"id": i, "y": y}) + "\n" for i, y in enumerate(classes)))
    parquet = pytester.path / "labels.parquet"
    pq.write_table(pa.table({"id": list(range(10)), "y": classes}), parquet)
    datasets = [{"name": name, "uri": str(data), "sha256": sha(data),
                 "truth": {"task": "classification", "target": "y", "id": "id",
                           "labels": {"uri": str(path), "sha256": sha(path)}}}
                for name, path in (("pets-jsonl", jsonl), ("pets-parquet", parquet))]
    body = "out = {'ids': ids, 'predictions': ['cat' if i < 8 else 'dog' for i in ids]}"
    rules = ("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
             "  - {name: acc, metric: accuracy, op: '>=', value: 0.75}\n"
             "  - {name: dog-recall, metric: 'recall[dog]', op: '>=', value: 0.9}\n")
    pytester.makefile(".matrix.yaml", m=_matrix(pytester.path, datasets, {"m": body}, rules))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id)
    ev = evidence(pytester)
    for name, path, fmt in (("pets-jsonl", jsonl, "jsonl"), ("pets-parquet", parquet, "parquet")):
        item = _item(ev, "business", "m", name)
        assert _status(item) == ("failed", "acceptance_failed", "business")
        results = {r["name"]: (r["observed"], r["verdict"], r["provenance"]["source"])
                   for r in record(item, "business.rules")["results"]}
        assert results == {"acc": (0.8, "pass", "computed"), "dog-recall": (0.5, "fail", "computed")}
        metrics = record(item, "business.metrics")
        assert metrics["truth"] == {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                                    "format": fmt, "target": "y", "join": "id 'id'", "rows": 10}
        assert metrics["computed"]["confusion_matrix"] == [[6, 0], [2, 2]]
        assert metrics["join"] == {"joined": 10, "missing": 0, "duplicate": 0, "extra": 0}
    assert leftovers(engine, run_id) == []


def test_a_jsonl_dataset_with_its_truth_inline_is_given_without_it(
        pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    """A JSONL dataset whose objects carry the truth (``y``): the container reads the gate's view without the key,
    the gate reads ``y`` from the digested file and joins on ``id``."""
    data = pytester.path / "pets.jsonl"
    data.write_text("".join(json.dumps({"id": i, "x": i, "y": "cat" if i < 6 else "dog"}) + "\n" for i in range(10)))
    code = pytester.path / "code" / "j"
    code.mkdir(parents=True)
    (code / "run.py").write_text(
        "import json, sys\nrows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]\n"
        "print('keys:', sorted({k for r in rows for k in r}), file=sys.stderr)\n"
        "json.dump({'ids': [r['id'] for r in rows], 'predictions': [r.get('y') or ('cat' if r['x'] < 8 else 'dog') "
        "for r in rows]}, open(sys.argv[2], 'w'))\n")
    (pytester.path / "rules.yaml").write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                                              "  - {name: acc, metric: accuracy, op: '>=', value: 0.9}\n")
    weights = pytester.path / "weights.bin"
    weights.write_bytes(b"no weights\n")
    spec = {**DOCKER, "models": [{"name": "j", "version": "1", "uri": str(weights), "sha256": sha(weights),
                                  "code": str(code), "entrypoint": ["{python}", "{code}/run.py", "{dataset}",
                                                                    "{outputs}"]}],
            "datasets": [{"name": "pets", "version": "1", "uri": str(data), "sha256": sha(data),
                          "acceptance": str(pytester.path / "rules.yaml"),
                          "truth": {"task": "classification", "target": "y", "id": "id"}}]}
    pytester.makefile(".matrix.yaml", m=json.dumps({"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix",
                                                     "metadata": {"name": "j"}, "spec": spec}))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id)
    ev = evidence(pytester)
    model = _item(ev, "model", "j", "pets")
    assert record(model, "model.dataset_view")["removed"] == "y"
    assert "keys: ['id', 'x']" in record(model, "model.run")["stderr"]["text"]
    item = _item(ev, "business", "j", "pets")
    assert _status(item) == ("failed", "acceptance_failed", "business")
    (result,) = record(item, "business.rules")["results"]
    assert (result["observed"], result["provenance"]["source"]) == (0.8, "computed")
    assert record(item, "business.metrics")["truth"]["format"] == "jsonl"
    assert leftovers(engine, run_id) == []


def test_a_ranking_truth_is_withheld_and_recall_at_k_is_computed_outside_the_container(
        pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    """A JSONL ranking dataset whose objects carry the relevant documents (``relevant``, a list) and a ``lang``
    column: the container reads the view without ``relevant`` (a model that would copy it ranks them first and cannot);
    the gate computes recall@1 and MRR, and recall@2 over the ``lang: de`` rows, equal to scikit-learn's
    top_k_accuracy_score and label_ranking_average_precision_score on the same ranking."""
    from sklearn.metrics import label_ranking_average_precision_score, top_k_accuracy_score

    rows: list[dict[str, Any]] = [{"q": i, "lang": "de" if i % 3 == 0 else "en", "relevant": [f"d{(i * 3 + 1) % 4}"]}
                                  for i in range(24)]
    data = pytester.path / "search.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = pytester.path / "code" / "r"
    code.mkdir(parents=True)
    (code / "run.py").write_text(
        "import json, sys\nrows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]\n"
        "print('keys:', sorted({k for r in rows for k in r}), file=sys.stderr)\n"
        "def rank(r):\n    docs = ['d%d' % ((r['q'] + j) % 4) for j in range(4)]\n"
        "    return r.get('relevant', []) + [d for d in docs if d not in r.get('relevant', [])]\n"
        "json.dump({'ids': [r['q'] for r in rows], 'predictions': [rank(r) for r in rows]}, open(sys.argv[2], 'w'))\n")
    (pytester.path / "rules.yaml").write_text(
        "apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
        "  - {name: r1, metric: 'recall@1', op: '>=', value: 0.9}\n  - {name: mrr, metric: mrr, op: '>=', value: 0.1}\n"
        "  - {name: de, metric: 'recall@2', slice: {lang: de}, op: '>=', value: 0.1}\n")
    weights = pytester.path / "weights.bin"
    weights.write_bytes(b"no weights\n")
    spec = {**DOCKER, "models": [{"name": "r", "version": "1", "uri": str(weights), "sha256": sha(weights),
                                  "code": str(code), "entrypoint": ["{python}", "{code}/run.py", "{dataset}",
                                                                    "{outputs}"]}],
            "datasets": [{"name": "search", "version": "1", "uri": str(data), "sha256": sha(data),
                          "acceptance": str(pytester.path / "rules.yaml"),
                          "truth": {"task": "ranking", "target": "relevant", "id": "q", "slices": ["lang"]}}]}
    pytester.makefile(".matrix.yaml", m=json.dumps({"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix",
                                                     "metadata": {"name": "r"}, "spec": spec}))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id)
    ev = evidence(pytester)
    model = _item(ev, "model", "r", "search")
    assert record(model, "model.dataset_view")["removed"] == "relevant"
    assert "keys: ['lang', 'q']" in record(model, "model.run")["stderr"]["text"]
    # the same ranking as scores (document d_j scored 4 - its place) and the truth as class indices
    scores = [[4.0 - [(r["q"] + j) % 4 for j in range(4)].index(d) for d in range(4)] for r in rows]
    truth = [int(r["relevant"][0][1:]) for r in rows]
    de = [i for i, r in enumerate(rows) if r["lang"] == "de"]
    results = {r["name"]: r for r in record(_item(ev, "business", "r", "search"), "business.rules")["results"]}
    assert results["r1"]["observed"] == round(top_k_accuracy_score(truth, scores, k=1, labels=range(4)), 6)
    assert results["r1"]["verdict"] == "fail"  # the copy of the truth never reached the model
    hot = [[int(j == t) for j in range(4)] for t in truth]
    assert results["mrr"]["observed"] == round(label_ranking_average_precision_score(hot, scores), 6)
    assert results["de"]["observed"] == round(top_k_accuracy_score(
        [truth[i] for i in de], [scores[i] for i in de], k=2, labels=range(4)), 6)
    assert results["de"]["observed"] == 0.5 and results["mrr"]["observed"] == 0.375
    assert results["de"]["provenance"]["slice"] == {"lang": "de"} and results["de"]["provenance"]["rows"] == 8
    assert leftovers(engine, run_id) == []
