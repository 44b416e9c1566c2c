"""The gate computes business results itself, from the dataset's ground truth (issue 30): real runs through
pytester and the local engine, on small datasets written here (CSV, JSONL, Parquet)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from cheatkit import CHEATERS, SCRIPT
from sklearn.metrics import accuracy_score, mean_absolute_error
from support import evidence_of

RULES = ("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
         "  - {name: acc, metric: accuracy, op: '>=', value: 0.97}\n")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _matrix(root: Path, dataset: dict[str, Any], models: dict[str, str], rules: str = RULES) -> str:
    """A local matrix running each of ``models`` (name → script body) on ``dataset``."""
    (root / "rules.yaml").write_text(rules)
    weights = root / "weights.bin"
    weights.write_bytes(b"no weights: the scripts are the models\n")
    entries = []
    for name, body in models.items():
        code = root / "code" / name
        code.mkdir(parents=True, exist_ok=True)
        (code / "run.py").write_text(SCRIPT.format(body=body) if "sys.argv" not in body else body)
        entries.append({"name": name, "version": "1", "uri": str(weights), "sha256": _sha(weights),
                        "code": str(code), "entrypoint": ["{python}", "{code}/run.py", "{dataset}", "{outputs}"]})
    doc = {"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": "truth"},
           "spec": {"target": {"backend": "local"}, "layers": {"model": {"timeout": "1m"}},
                    "resources": [{"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}],
                    "images": [{"name": "py", "reference": "python:current"}],
                    "models": entries,
                    "datasets": [{"version": "1", "acceptance": str(root / "rules.yaml"), **dataset}]}}
    return json.dumps(doc, indent=1)


def _balanced_csv(path: Path, rows: int = 300) -> Path:
    """A balanced 3-class CSV: ``id,feature,label`` with label = id % 3."""
    path.write_text("id,feature,label\n" + "".join(f"{i},{i * 0.5},{i % 3}\n" for i in range(rows)))
    return path


def _business(ev: dict[str, Any], model: str) -> dict[str, Any]:
    return next(i for i in ev["items"] if i["layer"] == "business" and i["keys"]["model"] == model)


def _data(item: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(dict(r["data"]) for r in item["records"] if r["kind"] == kind)


def test_the_gate_computes_accuracy_from_the_csv_truth_whatever_the_model_says(pytester: pytest.Pytester) -> None:
    """Before: the one-class model writing accuracy 0.999 passed `accuracy >= 0.97`, and so did the one writing
    its own labels (accuracy from the outputs' labels). Now both fail on 0.333333 computed from the label column;
    the correct model passes on the value scikit-learn gives for the same arrays; ids left out, repeated or
    unknown are counted and fail the item."""
    data = _balanced_csv(pytester.path / "blobs.csv")
    truth = {"task": "classification", "target": "label", "id": "id"}
    pytester.makefile(".matrix.yaml", m=_matrix(pytester.path, {"name": "blobs", "uri": str(data), "sha256": _sha(data),
                                                                "truth": truth}, CHEATERS))
    pytester.runpytest("-p", "no:cacheprovider")
    ev = evidence_of(pytester)
    for cheat in ("one-class", "own-labels"):
        item = _business(ev, cheat)
        assert (item["status"], item["failure"]["category"], item["failure"]["owner"]) == \
            ("failed", "acceptance_failed", "business")
        (result,) = _data(item, "business.rules")["results"]
        assert (result["observed"], result["verdict"]) == (0.333333, "fail")
        prov = result["provenance"]
        assert {k: prov[k] for k in ("source", "function", "truth_path", "truth_sha256", "rows")} == {
            "source": "computed", "function": "trace(C) / n (= sklearn.metrics.accuracy_score)", "truth_path": str(data),
            "truth_sha256": _sha(data), "rows": 300}
        import sklearn
        assert prov["library"] == f"pytest_hetero.matrix.gate_metrics (equal to scikit-learn {sklearn.__version__}, tested)"
        assert "acc: expected accuracy >= 0.97, observed 0.333333 [computed]" in item["failure"]["message"]
        metrics = _data(item, "business.metrics")
        assert metrics["computed"]["confusion_matrix"] == [[100, 0, 0], [100, 0, 0], [100, 0, 0]]
        assert metrics["join"] == {"joined": 300, "missing": 0, "duplicate": 0, "extra": 0}
    assert _data(_business(ev, "one-class"), "business.metrics")["self_reported"] == {
        "values": {"accuracy": 0.999}, "note": "self-reported, not verified"}
    correct = _business(ev, "correct")
    assert correct["status"] == "passed"
    truth_labels = [i % 3 for i in range(300)]
    (result,) = _data(correct, "business.rules")["results"]
    assert result["observed"] == accuracy_score(truth_labels, truth_labels) == 1.0
    assert _data(correct, "business.metrics")["self_reported"]["values"] == {"acc": 0.5}
    unmatched = _business(ev, "unmatched")
    assert (unmatched["status"], unmatched["failure"]["category"], unmatched["failure"]["owner"]) == \
        ("failed", "predictions_unmatched", "algorithm")
    assert _data(unmatched, "business.metrics")["join"] == {
        "joined": 297, "missing": 2, "duplicate": 1, "extra": 2,
        "examples": {"missing": ["0", "1"], "duplicate": ["2"], "extra": ["900", "901"]}}
    assert ("predictions do not match the dataset's truth one to one: 297 of 300 truth rows joined a prediction: "
            "2 missing, 1 duplicate, 2 extra") in unmatched["failure"]["message"]
    # JUnit properties and CTRF extra carry each rule's threshold, observed value, provenance and verdict
    bundle = pytester.path / "reports" / ev["run"]["id"]
    assert "[[PROPERTY|rule.acc=accuracy &gt;= 0.97; observed 0.333333; computed; fail]]" in \
        (bundle / "junit.xml").read_text()
    ctrf = json.loads((bundle / "ctrf.json").read_text())
    test = next(t for t in ctrf["results"]["tests"] if t["name"] == item_id(ev, "one-class"))
    assert test["extra"]["rules"] == [{"name": "acc", "metric": "accuracy", "threshold": "accuracy >= 0.97",
                                       "observed": 0.333333, "unit": None, "provenance": "computed",
                                       "verdict": "fail", "run": None}]


def item_id(ev: dict[str, Any], model: str) -> str:
    return str(_business(ev, model)["nodeid"])


def test_jsonl_labels_file_of_its_own_joined_by_id(pytester: pytest.Pytester) -> None:
    """A separate JSONL labels file (its own digest) holds the truth; the model reads only the features."""
    data = pytester.path / "inputs.csv"
    data.write_text("id,feature\n" + "".join(f"{i},{i}\n" for i in range(10)))
    labels = pytester.path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": f"s{i}", "y": "cat" if i < 6 else "dog"}) + "\n" for i in range(10)))
    body = ("out = {'ids': ['s%d' % i for i in ids], 'predictions': ['cat' if i < 8 else 'dog' for i in ids], "
            "'metrics': {'accuracy': 1.0}}")
    truth = {"task": "classification", "target": "y", "id": "id",
             "labels": {"uri": str(labels), "sha256": _sha(labels)}}
    rules = RULES.replace("0.97", "0.5") + ("  - {name: dog-recall, metric: 'recall[dog]', op: '>=', value: 0.9}\n"
                                            "  - {name: own, metric: accuracy, op: '>=', value: 0.9, self_reported: true}\n")
    pytester.makefile(".matrix.yaml", m=_matrix(pytester.path, {"name": "pets", "uri": str(data), "sha256": _sha(data),
                                                                "truth": truth}, {"m": body}, rules))
    result = pytester.runpytest("-p", "no:cacheprovider")
    item = _business(evidence_of(pytester), "m")
    results = {r["name"]: (r["observed"], r["verdict"], r["provenance"]["source"], r["detail"])
               for r in _data(item, "business.rules")["results"]}
    assert results == {"acc": (0.8, "pass", "computed", ""), "dog-recall": (0.5, "fail", "computed", ""),
                       "own": (1.0, "pass", "self_reported", "self-reported, not verified")}
    result.stdout.fnmatch_lines(["*business: acc 0.8 computed (pass), dog-recall 0.5 computed (fail), "
                                 "own 1 self-reported, not verified (pass)"])
    metrics = _data(item, "business.metrics")
    assert metrics["truth"] == {"path": str(labels), "sha256": _sha(labels), "format": "jsonl", "target": "y",
                                "join": "id 'id'", "rows": 10}
    assert metrics["computed"]["classes"] == ["cat", "dog"]
    assert metrics["computed"]["confusion_matrix"] == [[6, 0], [2, 2]]


def test_parquet_regression_truth_joined_by_order(pytester: pytest.Pytester) -> None:
    """A Parquet dataset, a regression target, predictions in row order: MAE computed by the gate equals
    scikit-learn's on the same arrays."""
    pa = pytest.importorskip("pyarrow")  # the [parquet] extra; installed with [test]
    import pyarrow.parquet as pq

    data = pytester.path / "houses.parquet"
    targets = [100.0 + 10 * i for i in range(20)]
    pq.write_table(pa.table({"rooms": list(range(20)), "price": targets}), data)
    script = ("import json, sys\nimport pyarrow.parquet as pq\n"
              "rooms = pq.read_table(sys.argv[1]).column('rooms').to_pylist()\n"
              "json.dump({'predictions': [100.0 + 10 * r + 3 for r in rooms]}, open(sys.argv[2], 'w'))\n")
    truth = {"task": "regression", "target": "price", "join": "order"}
    rules = ("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
             "  - {name: mae, metric: mae, op: '<=', value: 2.5}\n  - {name: r2, metric: r2, op: '>=', value: 0.9}\n")
    pytester.makefile(".matrix.yaml", m=_matrix(pytester.path, {"name": "houses", "uri": str(data),
                                                                "sha256": _sha(data), "truth": truth},
                                                {"m": script}, rules))
    pytester.runpytest("-p", "no:cacheprovider")
    item = _business(evidence_of(pytester), "m")
    results = {r["name"]: (r["observed"], r["verdict"]) for r in _data(item, "business.rules")["results"]}
    expected_mae = mean_absolute_error(targets, [t + 3 for t in targets])
    assert expected_mae == 3.0
    assert results["mae"] == (3.0, "fail")
    assert results["r2"][1] == "pass"
    assert _data(item, "business.metrics")["truth"]["format"] == "parquet"


def test_a_truth_file_edited_after_digesting_is_refused(pytester: pytest.Pytester) -> None:
    """The labels file changed after its sha256 went into the matrix: the gate refuses to judge against it."""
    data = _balanced_csv(pytester.path / "blobs.csv", rows=9)
    labels = pytester.path / "labels.csv"
    labels.write_text("id,label\n" + "".join(f"{i},{i % 3}\n" for i in range(9)))
    digest = _sha(labels)
    labels.write_text("id,label\n" + "".join(f"{i},0\n" for i in range(9)))  # now the one-class cheat is right
    truth = {"task": "classification", "target": "label", "id": "id", "labels": {"uri": str(labels), "sha256": digest}}
    pytester.makefile(".matrix.yaml", m=_matrix(pytester.path, {"name": "blobs", "uri": str(data), "sha256": _sha(data),
                                                                "truth": truth}, {"one-class": CHEATERS["one-class"]}))
    pytester.runpytest("-p", "no:cacheprovider")
    item = _business(evidence_of(pytester), "one-class")
    assert (item["status"], item["failure"]["category"], item["failure"]["owner"]) == ("error", "truth_changed",
                                                                                      "business")
    assert item["failure"]["message"] == (
        f"truth file {labels} has sha256 {_sha(labels)}, the matrix declares {digest}: it changed after it was "
        "digested; refusing to judge against it")


def test_a_gate_metric_without_truth_is_not_evaluable(pytester: pytest.Pytester) -> None:
    """No truth declared: `accuracy` is not taken from the model's metrics nor its labels; the rule cannot be
    evaluated, and says why (before: computed silently from the outputs' labels, or read from its metrics)."""
    data = _balanced_csv(pytester.path / "blobs.csv", rows=3)
    pytester.makefile(".matrix.yaml", m=_matrix(pytester.path, {"name": "blobs", "uri": str(data),
                                                                "sha256": _sha(data)},
                                                {"own-labels": CHEATERS["own-labels"]}))
    pytester.runpytest("-p", "no:cacheprovider")
    item = _business(evidence_of(pytester), "own-labels")
    assert (item["status"], item["failure"]["category"], item["failure"]["owner"]) == ("error", "no_truth", "business")
    assert ("rule acc: the gate has no value for metric 'accuracy': dataset 'blobs' declares no truth "
            "(spec.datasets[].truth)") in item["failure"]["message"]


def test_every_classification_and_regression_metric_is_scikit_learns_own() -> None:
    """The gate's values equal scikit-learn's direct calls on the same arrays, bit for bit: the classification
    metrics, computed by the gate from one confusion matrix with scikit-learn's formulas, on random label sets
    (1 to 13 classes, classes predicted but never true, classes never predicted), given to scikit-learn as the
    gate's integer codes (class i of the gate's sorted classes) and, for the per-class and averaged values, as
    the text labels with ``labels=`` in the gate's order."""
    import random
    import warnings

    import numpy as np
    from sklearn import metrics as m

    from pytest_hetero.matrix.gate_metrics import classification, regression
    from pytest_hetero.matrix.truth_table import integer_labels

    rng = random.Random(30)
    y_true = [str(rng.randrange(4)) for _ in range(500)]
    y_pred = [t if rng.random() < 0.7 else str(rng.randrange(5)) for t in y_true]
    assert classification(y_true, y_pred).classes == ["0", "1", "2", "3", "4"]
    for _ in range(200):
        k, n = rng.randrange(1, 14), rng.randrange(1, 400)
        y_true = [str(rng.randrange(k)) for _ in range(n)]
        y_pred = [t if rng.random() < rng.random() else str(rng.randrange(k + 2)) for t in y_true]
        got = classification(y_true, y_pred)
        labels = got.classes
        code = {c: i for i, c in enumerate(labels)}
        t, p = np.array([code[v] for v in y_true]), np.array([code[v] for v in y_pred])
        expected = {"accuracy": m.accuracy_score(t, p)}
        with warnings.catch_warnings():  # "y_pred contains classes not in y_true"
            warnings.simplefilter("ignore", UserWarning)
            expected["balanced_accuracy"] = m.balanced_accuracy_score(t, p)
        for name, fn in (("precision", m.precision_score), ("recall", m.recall_score), ("f1", m.f1_score)):
            for avg in ("macro", "weighted"):
                expected[f"{name}_{avg}"] = fn(y_true, y_pred, labels=labels, average=avg, zero_division=0)
            per_class = fn(y_true, y_pred, labels=labels, average=None, zero_division=0)
            expected.update({f"{name}[{c}]": v for c, v in zip(labels, per_class, strict=True)})
        assert {name: got.values[name] for name in expected} == expected
        assert got.confusion == m.confusion_matrix(y_true, y_pred, labels=labels).tolist()
        # the same labels as integer codes (the 1M-row path: no string per row) give the very same result
        t_codes, p_codes = integer_labels(list(map(int, y_true))), integer_labels(list(map(int, y_pred)))
        assert t_codes is not None and p_codes is not None and t_codes == y_true
        coded = classification(t_codes, p_codes)
        assert (coded.values, coded.classes, coded.confusion) == (got.values, got.classes, got.confusion)
    many = [rng.randrange(-5, 300) for _ in range(3000)]  # over 256 classes: wider codes
    guess = [v if rng.random() < 0.5 else rng.randrange(-5, 300) for v in many]
    t_codes, p_codes = integer_labels(many), integer_labels(guess)
    assert t_codes is not None and p_codes is not None and t_codes.codes.dtype == np.uint16
    coded, plain = classification(t_codes, p_codes), classification(list(map(str, many)), list(map(str, guess)))
    assert (coded.values, coded.classes, coded.confusion) == (plain.values, plain.classes, plain.confusion)
    assert integer_labels([True, 1]) is None and integer_labels([1, 2**40]) is None and integer_labels([]) is None
    t_values = [rng.uniform(0, 10) for _ in range(200)]
    p_values = [v + rng.gauss(0, 1) for v in t_values]
    reg = regression(t_values, p_values)
    assert (reg.values["mae"], reg.values["rmse"], reg.values["r2"], reg.values["max_error"]) == (
        m.mean_absolute_error(t_values, p_values), m.root_mean_squared_error(t_values, p_values),
        m.r2_score(t_values, p_values), m.max_error(t_values, p_values))
    assert "r2" not in regression([1.0], [2.0]).values  # undefined for one sample: absent, not NaN


def test_the_fast_paths_read_and_join_as_the_plain_ones() -> None:
    """The plain-CSV reader and the integer-id join (the 1M-prediction fast paths) give what the csv module and the
    text join give: the same columns, rows, counts, examples and order, on random files and predictions (ids left
    out, repeated, unknown, negative, huge, strings, leading zeros; CRLF, blank lines, quoted fields)."""
    import csv
    import io
    import random
    from dataclasses import replace

    from pytest_hetero.matrix.truth_table import (
        TruthTable,
        _csv_columns,
        _integer_ids,
        _plain_csv_columns,
        id_text,
        integer_labels,
        join,
        join_ids,
    )

    rng = random.Random(30)
    for _ in range(300):
        rows = rng.randrange(0, 40)
        ids = rng.sample(range(60), rows)
        ending = rng.choice(["\n", "\r\n"])
        lines = [f"{i},{'x' if rng.random() < 0.1 else ''}{i % 3}" for i in ids]
        if rng.random() < 0.2 and lines:
            lines.insert(rng.randrange(len(lines)), "")
        if rng.random() < 0.2 and lines:
            lines[0] = f'"{ids[0]}",0'
        text = "id,label" + ending + ending.join(lines) + (ending if rng.random() < 0.8 else "")
        reader = csv.reader(io.StringIO(text, newline=""))
        next(reader)
        plain = _plain_csv_columns(text, [0, 1], 2)
        assert plain is None or plain == _csv_columns(reader, [0, 1], 2)
        truth_ids = [str(i) for i in ids]
        table = TruthTable(ids=truth_ids, targets=[str(i % 3) for i in ids], path=Path("t.csv"), sha256="0",
                           format="csv", numbers=_integer_ids(truth_ids))
        given: list[Any] = rng.sample(range(70), rng.randrange(0, 50)) + ([ids[0]] if ids and rng.random() < 0.2 else [])
        given += [rng.choice([-1, 2**70, "007", " 5 ", 3])] if rng.random() < 0.2 else []
        rng.shuffle(given)
        predictions = [str(rng.randrange(3)) for _ in given]
        expected = join(replace(table, numbers=None), predictions, [id_text(v) or "" for v in given])
        found = join_ids(table, predictions, given)
        assert found == expected
        coded = integer_labels([int(v) for v in predictions])  # predictions as codes (the 1M-row path) join alike
        assert (coded is None) == (not predictions)
        if coded is not None:
            assert join_ids(table, coded, given) == expected
        # the rows each joined row came from (slices, scores) are the text join's too
        assert found.truth_rows.tolist() == expected.truth_rows.tolist()
        assert found.pred_rows.tolist() == expected.pred_rows.tolist()
        assert [table.targets[r] for r in found.truth_rows.tolist()] == found.y_true
        assert [predictions[r] for r in found.pred_rows.tolist()] == found.y_pred


def _random_csv(rng: Any) -> tuple[str, str]:
    """A small CSV ``label,id,region`` (or with another id column name) with random faults, and its header."""
    rows = rng.randrange(1, 30)
    cells = []
    for i in rng.sample(range(10 ** rng.randrange(2, 6)), rows):
        roll = rng.random()
        text = {0: "0", 1: " ", 2: "-", 3: ""}.get(int(roll * 100) // 2, "") + str(i) if roll < 0.08 else str(i)
        text = "" if 0.08 <= roll < 0.09 else text
        label = rng.choice(["0", "1", "2", "cat", " dog", "3.0", ""]) if rng.random() < 0.3 else str(i % 3)
        cells.append(f"{label},{text},{rng.choice(['eu', 'us', '', 'x y'])}")
    if rng.random() < 0.05:
        cells.append(cells[0])  # a repeated id
    if rng.random() < 0.05:
        cells.insert(rng.randrange(len(cells)), "")
    if rng.random() < 0.05:
        cells[-1] = cells[-1].rsplit(",", 1)[0]  # a short row
    if rng.random() < 0.05:
        cells[0] = '"1",' + cells[0].split(",", 1)[1]
    ending = "\r\n" if rng.random() < 0.05 else "\n"
    header = rng.choice(["label,id,region", "label,id,region", "label,ident,region"])
    return header + ending + ending.join(cells) + (ending if rng.random() < 0.8 else ""), header


def _read_table(truth: Any) -> tuple[Any, ...]:
    import pytest_hetero.matrix.truth_table as tt

    try:
        table = tt.read_truth(truth)
    except tt.TruthError as exc:
        return ("error", exc.message, exc.category)
    assert table.ids is not None
    return (list(table.ids), None if table.numbers is None else table.numbers.tolist(), table.targets, table.slices)


def test_the_numpy_csv_read_gives_what_the_csv_paths_give(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The numpy read of a plain CSV with integer ids (the 1M-prediction memory path: no Python string per id) gives
    the csv paths' ids, numbers, targets and slices, and the same error or the same refusal, on random files:
    leading zeros, signs, spaces, empty fields, blank lines, quotes, CRLF, missing final newline, short rows, text
    labels, a repeated id, a missing column."""
    import random

    import pytest_hetero.matrix.truth_table as tt
    from pytest_hetero.matrix.model import Truth

    rng = random.Random(3030)
    fast_used = 0
    numpy_read = tt._csv_integer_ids
    for n in range(400):
        text, header = _random_csv(rng)
        path = tmp_path / f"t{n}.csv"
        path.write_bytes(text.encode())
        truth = Truth(task="classification", target="label", id="id", path=path,
                      sha256=hashlib.sha256(text.encode()).hexdigest(), uri=str(path), slices=("region",))
        monkeypatch.setattr(tt, "_csv_integer_ids", numpy_read)
        monkeypatch.setattr(tt, "CSV_BLOCK", rng.choice([1, 7, 20, 1 << 20]))  # blocks of a line or a few
        fast = _read_table(truth)
        monkeypatch.setattr(tt, "_csv_integer_ids", lambda *a: None)  # the csv paths only
        assert fast == _read_table(truth), text
        if header == "label,id,region":
            fast_used += numpy_read(text.encode(), ["label", "id", "region"], "id", path) is not None
    assert fast_used > 50  # the numpy path was taken, not only refused
