"""Issue 30, the metrics left: top-k accuracy from scores, ranking (recall@k, MRR), text generation (exact match,
contains, RE2 match, JSON validity, ROUGE-L) and slices over a dataset column. Real runs of the gate (pytester, the
local engine) on small datasets written here; each value the gate computed is asserted equal to the maintained
library's call on the same arrays."""

from __future__ import annotations

import csv
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from support import evidence_of
from test_business_truth import _business, _data, _matrix, _sha

HEAD = "apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"


def _results(pytester: pytest.Pytester, model: str = "m") -> dict[str, dict[str, Any]]:
    item = _business(evidence_of(pytester), model)
    return {r["name"]: r for r in _data(item, "business.rules")["results"]}


SCORED = """import csv, json, random, sys
rows = list(csv.DictReader(open(sys.argv[1], newline='')))
assert 'label' not in rows[0], 'the truth column reached the model'
classes = [2, 0, 1]                       # the model's own column order, not sorted
ids, preds, scores = [], [], []
for row in rows:
    i = int(row['id'])
    rng = random.Random(i)
    s = [rng.random() for _ in classes]
    truth = i % 3
    if i % 4:                              # three rows in four: the true class scored highest
        s[classes.index(truth)] = 1.5
    elif i % 8 == 0:                       # one in eight: second highest
        s[classes.index(truth)] = sorted(s)[-1] - 1e-3
    ids.append(i); scores.append(s); preds.append(classes[max(range(3), key=s.__getitem__)])
json.dump({'ids': ids, 'predictions': preds, 'scores': scores, 'classes': classes}, open(sys.argv[2], 'w'))
"""


def test_top_k_accuracy_and_slices_equal_scikit_learn(pytester: pytest.Pytester) -> None:
    """A 3-class CSV with a ``region`` column: top-2 and top-1 accuracy from the outputs' scores (columns in the
    model's order) equal sklearn.metrics.top_k_accuracy_score; accuracy and macro F1 over the rows of one region equal
    scikit-learn's on those rows; the label column never reaches the model."""
    from sklearn.metrics import accuracy_score, f1_score, top_k_accuracy_score

    data = pytester.path / "blobs.csv"
    regions = ["eu" if i % 5 < 2 else "us" for i in range(120)]
    data.write_text("id,region,feature,label\n" + "".join(f"{i},{regions[i]},{i * 0.5},{i % 3}\n" for i in range(120)))
    truth = {"task": "classification", "target": "label", "id": "id", "slices": ["region"]}
    rules = HEAD + ("  - {name: top2, metric: 'top_k_accuracy@2', op: '>=', value: 0.99}\n"
                    "  - {name: top1, metric: 'top_k_accuracy@1', op: '>=', value: 0.9}\n"
                    "  - {name: eu, metric: accuracy, slice: {region: eu}, op: '>=', value: 0.7}\n"
                    "  - {name: us-f1, metric: f1_macro, slice: {region: us}, op: '>=', value: 0.7}\n"
                    "  - {name: mars, metric: accuracy, slice: {region: mars}, op: '>=', value: 0.7}\n")
    pytester.makefile(".matrix.yaml", m=_matrix(pytester.path, {"name": "blobs", "uri": str(data),
                                                                "sha256": _sha(data), "truth": truth},
                                                {"m": SCORED}, rules))
    pytester.runpytest("-p", "no:cacheprovider")
    got = _results(pytester)
    # the same arrays, rebuilt as the model built them
    rng_rows = []
    for i in range(120):
        rng = random.Random(i)
        s = [rng.random() for _ in range(3)]
        if i % 4:
            s[[2, 0, 1].index(i % 3)] = 1.5
        elif i % 8 == 0:
            s[[2, 0, 1].index(i % 3)] = sorted(s)[-1] - 1e-3
        rng_rows.append([s[1], s[2], s[0]])  # columns of classes 0, 1, 2
    y = [i % 3 for i in range(120)]
    pred = [max(range(3), key=row.__getitem__) for row in rng_rows]
    for name, k in (("top2", 2), ("top1", 1)):
        expected = top_k_accuracy_score(y, rng_rows, k=k, labels=[0, 1, 2])
        assert got[name]["observed"] == round(expected, 6)
        assert got[name]["provenance"]["source"] == "computed"
    assert got["top1"]["observed"] == round(accuracy_score(y, pred), 6)
    assert got["top2"]["verdict"] == "fail" and got["top2"]["observed"] < 1.0  # rows with the truth third
    eu = [i for i in range(120) if regions[i] == "eu"]
    us = [i for i in range(120) if regions[i] == "us"]
    assert got["eu"]["observed"] == round(accuracy_score([y[i] for i in eu], [pred[i] for i in eu]), 6)
    assert got["eu"]["provenance"]["slice"] == {"region": "eu"} and got["eu"]["provenance"]["rows"] == len(eu) == 48
    assert got["us-f1"]["observed"] == round(f1_score([y[i] for i in us], [pred[i] for i in us], average="macro",
                                                      zero_division=0), 6)
    assert (got["mars"]["verdict"], got["mars"]["detail"]) == (
        "not_evaluable", "cannot evaluate: no joined row has region = 'mars'")


RANKED = """import json, random, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
assert all('relevant' not in r for r in rows), 'the truth field reached the model'
ids, lists = [], []
for r in rows:
    rng = random.Random(r['q'])
    docs = ['d%d' % j for j in range(6)]
    rng.shuffle(docs)
    ids.append(r['q']); lists.append(docs)
json.dump({'ids': ids, 'predictions': lists}, open(sys.argv[2], 'w'))
"""


def test_ranking_recall_at_k_and_mrr_equal_scikit_learn(pytester: pytest.Pytester) -> None:
    """A JSONL truth with one relevant document per query; the model ranks six documents. recall@k equals
    sklearn.metrics.top_k_accuracy_score and MRR equals sklearn.metrics.label_ranking_average_precision_score on the
    score matrix of the same rankings (with one relevant item they are those metrics)."""
    from sklearn.metrics import label_ranking_average_precision_score, top_k_accuracy_score

    data = pytester.path / "queries.jsonl"
    relevant = {f"q{i}": f"d{(i * 7) % 6}" for i in range(40)}
    data.write_text("".join(json.dumps({"q": q, "text": "x", "relevant": [d]}) + "\n" for q, d in relevant.items()))
    truth = {"task": "ranking", "target": "relevant", "id": "q"}
    rules = HEAD + ("  - {name: r1, metric: 'recall@1', op: '>=', value: 0.5}\n"
                    "  - {name: r3, metric: 'recall@3', op: '>=', value: 0.4}\n"
                    "  - {name: mrr, metric: mrr, op: '>=', value: 0.3}\n")
    pytester.makefile(".matrix.yaml", m=_matrix(pytester.path, {"name": "search", "uri": str(data),
                                                                "sha256": _sha(data), "truth": truth},
                                                {"m": RANKED}, rules))
    pytester.runpytest("-p", "no:cacheprovider")
    got = _results(pytester)
    y, scores = [], []
    for q, d in relevant.items():
        rng = random.Random(q)
        docs = [f"d{j}" for j in range(6)]
        rng.shuffle(docs)
        scores.append([6.0 - docs.index(f"d{j}") for j in range(6)])  # higher: ranked earlier
        y.append(int(d[1:]))
    hot = [[1 if j == t else 0 for j in range(6)] for t in y]
    assert got["r1"]["observed"] == round(top_k_accuracy_score(y, scores, k=1, labels=list(range(6))), 6)
    assert got["r3"]["observed"] == round(top_k_accuracy_score(y, scores, k=3, labels=list(range(6))), 6)
    assert got["mrr"]["observed"] == round(label_ranking_average_precision_score(hot, scores), 6)
    assert {r["provenance"]["source"] for r in got.values()} == {"computed"}


def test_recall_at_k_and_mrr_with_several_relevant_ids() -> None:
    """Several relevant ids per row (no library computes recall@k over ranked id lists as such): the values by
    hand; an id listed twice counts at its first place."""
    from pytest_hetero.matrix.gate_metrics import mrr, recall_at

    relevant = [("a", "b"), ("c",), ("d", "e", "f")]
    ranked = [["x", "a", "a", "b"], ["y", "z"], ["f", "d"]]
    assert recall_at(relevant, ranked, 2) == pytest.approx((1 / 2 + 0 + 2 / 3) / 3)
    assert recall_at(relevant, ranked, 3) == pytest.approx((2 / 2 + 0 + 2 / 3) / 3)  # x, a, b: the repeat skipped
    assert mrr(relevant, ranked) == pytest.approx((1 / 2 + 0 + 1) / 3)


GENERATED = """import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1], newline='')))
answers = {'0': 'Paris', '1': 'the capital is Rome', '2': 'berlin', '3': 'Madrid, Spain', '4': 'Lisbon'}
# a model that copies the reference when it can see it: it cannot
out = {'ids': [r['id'] for r in rows], 'predictions': [r.get('reference') or answers[r['id']] for r in rows]}
json.dump(out, open(sys.argv[2], 'w'))
"""


def test_generation_exact_contains_rouge_equal_the_libraries(pytester: pytest.Pytester) -> None:
    """Text references in a CSV: exact match equals sklearn.metrics.accuracy_score on the texts, contains equals
    Python's ``in``, ROUGE-L equals rouge_score's own scorer; the reference column never reaches the model (a model
    that would copy it scores what its own answers score)."""
    from rouge_score import rouge_scorer
    from sklearn.metrics import accuracy_score

    refs = ["Paris", "Rome", "Berlin", "Madrid", "Lisbon"]
    preds = ["Paris", "the capital is Rome", "berlin", "Madrid, Spain", "Lisbon"]
    data = pytester.path / "capitals.csv"
    data.write_text("id,question,reference\n" + "".join(f"{i},capital {i}?,{r}\n" for i, r in enumerate(refs)))
    truth = {"task": "generation", "target": "reference", "id": "id"}
    rules = HEAD + ("  - {name: exact, metric: exact_match, op: '>=', value: 0.5}\n"
                    "  - {name: contains, metric: contains, op: '>=', value: 0.7}\n"
                    "  - {name: rouge, metric: rouge_l, op: '>=', value: 0.5}\n")
    pytester.makefile(".matrix.yaml", m=_matrix(pytester.path, {"name": "capitals", "uri": str(data),
                                                                "sha256": _sha(data), "truth": truth},
                                                {"m": GENERATED}, rules))
    pytester.runpytest("-p", "no:cacheprovider")
    got = _results(pytester)
    assert got["exact"]["observed"] == round(accuracy_score(refs, preds), 6) == 0.4
    assert got["exact"]["verdict"] == "fail"
    assert got["contains"]["observed"] == round(sum(r in p for r, p in zip(refs, preds, strict=True)) / 5, 6) == 0.8
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    expected = sum(scorer.score(r, p)["rougeL"].fmeasure for r, p in zip(refs, preds, strict=True)) / 5
    assert got["rouge"]["observed"] == round(expected, 6)
    assert got["rouge"]["provenance"]["library"].startswith("rouge-score 0.")


def test_rouge_l_without_its_package_is_not_available_never_zero(pytester: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """rouge-score absent (an install without the ``rouge`` extra; simulated by blocking its import in this
    process): the rule is not evaluable and says how to install it; no 0 is reported."""
    monkeypatch.setitem(sys.modules, "rouge_score", None)
    data = pytester.path / "capitals.csv"
    data.write_text("id,question,reference\n0,capital?,Paris\n")
    truth = {"task": "generation", "target": "reference", "id": "id"}
    rules = HEAD + "  - {name: rouge, metric: rouge_l, op: '>=', value: 0.5}\n"
    pytester.makefile(".matrix.yaml", m=_matrix(pytester.path, {"name": "capitals", "uri": str(data),
                                                                "sha256": _sha(data), "truth": truth},
                                                {"m": GENERATED}, rules))
    pytester.runpytest("-p", "no:cacheprovider")
    got = _results(pytester)["rouge"]
    assert (got["verdict"], got["observed"]) == ("not_evaluable", None)
    assert got["detail"] == ("cannot evaluate: not available: rouge_l needs the rouge-score package, not installed "
                             "here: pip install 'pytest-hetero[rouge]'")


PADDED = """import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1], newline='')))
# row 1's answer buried in three million tokens: a table of 3M x 1 cells per reference token
out = {'ids': [r['id'] for r in rows], 'predictions': ['Paris', 'Rome ' + 'a ' * 3_000_000]}
json.dump(out, open(sys.argv[2], 'w'))
"""


def test_a_prediction_far_longer_than_its_reference_is_refused_not_scored_for_minutes(
        pytester: pytest.Pytester) -> None:
    """Before: ROUGE-L's LCS table is prediction x reference cells in pure Python, so a model writing a huge
    generation made the gate compute for minutes and hold gigabytes (30 x 1M tokens: 11 s, +369 MiB). After: a
    prediction over max(8 x its reference's tokens, 2048) is refused with its row named (the rule is not evaluable,
    invalid outputs) in well under a second of metric time."""
    import time

    data = pytester.path / "capitals.csv"
    data.write_text("id,question,reference\n0,capital?,Paris\n1,capital?,Rome\n")
    truth = {"task": "generation", "target": "reference", "id": "id"}
    rules = HEAD + "  - {name: rouge, metric: rouge_l, op: '>=', value: 0.5}\n"
    pytester.makefile(".matrix.yaml", m=_matrix(pytester.path, {"name": "capitals", "uri": str(data),
                                                                "sha256": _sha(data), "truth": truth},
                                                {"m": PADDED}, rules))
    started = time.monotonic()
    pytester.runpytest("-p", "no:cacheprovider")
    assert time.monotonic() - started < 60
    got = _results(pytester)["rouge"]
    assert (got["verdict"], got["observed"]) == ("not_evaluable", None)
    assert got["detail"] == ("cannot evaluate: metric 'rouge_l': the prediction of row 1 has 3000001 tokens, more "
                             "than the 2048 ROUGE-L scores against its reference (max(8 x the reference's tokens, "
                             "2048)): outputs too long to score; shorten the model's generations")


JSONISH = """import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1], newline='')))
texts = ['{"n": 3}', '{"n": "three"}', 'not json', '{"n": 12, "extra": true}', '{"m": 1}']
json.dump({'ids': [r['id'] for r in rows], 'predictions': texts[:len(rows)]}, open(sys.argv[2], 'w'))
"""


def test_regex_match_and_json_validity_equal_re_and_jsonschema(pytester: pytest.Pytester) -> None:
    """References that are RE2 patterns, predictions that should be JSON objects with an integer ``n``: regex_match
    equals Python's re.search on the same pairs, json_valid equals jsonschema's own validation."""
    import jsonschema

    patterns = ['"n": [0-9]+', 'three', '^not', '[0-9]{2}', 'zzz']
    texts = ['{"n": 3}', '{"n": "three"}', 'not json', '{"n": 12, "extra": true}', '{"m": 1}']
    schema = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}
    data = pytester.path / "json.csv"
    with data.open("w", newline="") as fh:  # the csv module quotes the patterns holding '"'
        csv.writer(fh).writerows([["id", "prompt", "pattern"], *([i, "p", p] for i, p in enumerate(patterns))])
    truth = {"task": "generation", "target": "pattern", "id": "id", "json_schema": schema}
    rules = HEAD + ("  - {name: rx, metric: regex_match, op: '>=', value: 0.5}\n"
                    "  - {name: js, metric: json_valid, op: '>=', value: 0.5}\n")
    pytester.makefile(".matrix.yaml", m=_matrix(pytester.path, {"name": "json", "uri": str(data),
                                                                "sha256": _sha(data), "truth": truth},
                                                {"m": JSONISH}, rules))
    pytester.runpytest("-p", "no:cacheprovider")
    got = _results(pytester)
    assert got["rx"]["observed"] == sum(re.search(p, t) is not None for p, t in zip(patterns, texts, strict=True)) / 5
    assert got["rx"]["observed"] == 0.8

    def valid(text: str) -> bool:
        try:
            jsonschema.validate(json.loads(text), schema)
        except (ValueError, jsonschema.ValidationError):
            return False
        return True

    assert got["js"]["observed"] == sum(map(valid, texts)) / 5 == 0.4
    assert (got["rx"]["verdict"], got["js"]["verdict"]) == ("pass", "fail")


def test_new_metric_names_are_checked_with_did_you_mean(tmp_path: Path) -> None:
    """A misspelt new metric gets a ``did you mean``; a slice on a self-reported value is refused."""
    from pytest_hetero.errors import CaseError
    from pytest_hetero.matrix.acceptance import load_rules

    for metric, hint in (("'recal@5'", "did you mean 'recall@<k>'?"), ("exact_mach", "did you mean 'exact_match'?"),
                         ("'top_k_acuracy@3'", "did you mean 'top_k_accuracy@<k>'?")):
        path = tmp_path / "r.yaml"
        path.write_text(HEAD + f"  - {{name: x, metric: {metric}, op: '>=', value: 0.5}}\n")
        with pytest.raises(CaseError) as err:
            load_rules(path)
        assert hint in err.value.render()
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + "  - {name: x, metric: acc, self_reported: true, slice: {region: eu}, op: '>=', value: 1}\n")
    with pytest.raises(CaseError) as err:
        load_rules(path)
    assert "slice applies to a metric the gate computes from truth" in err.value.render()
    assert load_rules(_ok(tmp_path))[0]["slice"] == {"region": "eu"}


def _ok(tmp_path: Path) -> Path:
    path = tmp_path / "ok.yaml"
    path.write_text(HEAD + "  - {name: x, metric: 'recall@10', slice: {region: eu}, op: '>=', value: 0.5}\n")
    return path


def test_lint_names_a_slice_column_the_truth_does_not_read_and_a_metric_of_another_task(tmp_path: Path) -> None:
    """``hetero lint``'s reference check: a rule sliced on a column absent from truth.slices, and a ranking metric on
    a classification dataset, are both named with the fix, before any model runs."""
    from pytest_hetero.matrix.load import load_matrix
    from pytest_hetero.matrix.references import reference_problems

    data = tmp_path / "blobs.csv"
    data.write_text("id,region,label\n0,eu,1\n")
    rules = HEAD + ("  - {name: eu, metric: accuracy, slice: {region: eu}, op: '>=', value: 0.5}\n"
                    "  - {name: m, metric: mrr, op: '>=', value: 0.5}\n")
    truth = {"task": "classification", "target": "label", "id": "id"}
    (tmp_path / "m.matrix.yaml").write_text(_matrix(tmp_path, {"name": "blobs", "uri": str(data), "sha256": _sha(data),
                                                               "truth": truth}, {"m": "out = {}"}, rules))
    problems = [p.render() for p in reference_problems(load_matrix(tmp_path / "m.matrix.yaml"))]
    assert len(problems) == 2
    assert "dataset 'blobs' reads no column 'region' beside its truth" in problems[0]
    assert "hint: add truth.slices: [region]" in problems[0]
    assert "judges mrr, a ranking metric, and dataset 'blobs' is a classification task" in problems[1]
