"""A model that copies the labels instead of predicting them, laid out as the digits example is (its data inside its
code folder), for the tests that the truth stays out of its reach on every engine (issue 30 follow-up).

Layout under ``root``::

    digits/cheat.py                        the model: reads every CSV it can reach for an index→label table
    digits/data/digits-test-1.0.0.csv      dataset ``inline``: the truth is its ``label`` column
    digits/data/labels.csv                 dataset ``separate``'s truth file (index,label)
    features/digits-features.csv           dataset ``separate``: the features only (the model's input)
    matrices/v.matrix.yaml                 the matrix (cwd of a local run)
    matrices/old/digits-copy.csv           a copy of the inline truth under the matrix folder (same bytes)

The cheat walks ``{code}`` and its working folder and reads the truth files' host paths given on its command line;
every CSV row with ``index`` and ``label`` fills its table, and a sample it finds no label for is predicted 0. With
the truth withheld it finds none: its predictions are all 0 and the gate's accuracy is that of a constant model.
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DIGITS_CSV = REPO / "cases" / "digits" / "data" / "digits-test-1.0.0.csv"

CHEAT = """import csv, json, os, sys
code, dataset, out, *paths = sys.argv[1:]
found = {}
def harvest(path):
    try:
        with open(path, newline='') as fh:
            for row in csv.DictReader(fh):
                if row.get('index') and row.get('label'):
                    found[row['index']] = row['label']
    except (OSError, UnicodeDecodeError, csv.Error):
        pass
for top in (code, '.'):
    for folder, _, files in os.walk(top):
        for name in files:
            harvest(os.path.join(folder, name))
for path in paths:
    harvest(path)
ids = [row['index'] for row in csv.DictReader(open(dataset, newline=''))]
print(f'labels found: {len(found)}', file=sys.stderr)
json.dump({'ids': [int(i) for i in ids], 'predictions': [int(found.get(i, 0)) for i in ids]}, open(out, 'w'))
"""

# The four cheating models of issue 30, on a balanced 3-class CSV ``id,feature,label`` (label = id % 3); each
# body runs in :data:`SCRIPT` (argv: dataset, outputs).
CHEATERS = {
    # one class for every sample, and a self-reported accuracy
    "one-class": "out = {'ids': ids, 'predictions': [0] * len(ids), 'metrics': {'accuracy': 0.999}}",
    # its own labels equal to its predictions, no metrics
    "own-labels": "out = {'ids': ids, 'predictions': [0] * len(ids), 'labels': [0] * len(ids)}",
    # right answers, a self-reported metric under another name
    "correct": "out = {'ids': ids, 'predictions': [t % 3 for t in ids], 'metrics': {'acc': 0.5}}",
    # ids 0-1 left out, id 2 twice, ids 900 and 901 the truth does not have
    "unmatched": ("keep = [i for i in ids if i > 1] + [2, 900, 901]\n"
                  "out = {'ids': keep, 'predictions': [i % 3 for i in keep]}"),
}
SCRIPT = """import csv, json, sys
ids = [int(r['id']) for r in csv.DictReader(open(sys.argv[1]))]
{body}
json.dump(out, open(sys.argv[2], 'w'))
"""

RULES = ("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
         "  - {name: acc, metric: accuracy, op: '>=', value: 0.9}\n")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def truth_labels() -> tuple[list[int], list[int]]:
    """(index, label) columns of the digits test CSV, in file order."""
    rows = list(csv.DictReader(DIGITS_CSV.open(newline="")))
    return [int(r["index"]) for r in rows], [int(r["label"]) for r in rows]


def layout(root: Path, spec: dict[str, Any]) -> dict[str, Path]:
    """Write the layout above under ``root`` and the matrix (``spec``'s target/resources/images merged in);
    return the paths by role: code, inline, labels, features, copy, matrix."""
    (root / ".hetero-root").write_text("")  # the project's boundary: the matrix may name files beside its folder
    code = root / "digits"
    (code / "data").mkdir(parents=True)
    (code / "cheat.py").write_text(CHEAT)
    inline = code / "data" / DIGITS_CSV.name
    shutil.copyfile(DIGITS_CSV, inline)
    index, label = truth_labels()
    labels = code / "data" / "labels.csv"
    labels.write_text("index,label\n" + "".join(f"{i},{y}\n" for i, y in zip(index, label, strict=True)))
    features = root / "features" / "digits-features.csv"
    features.parent.mkdir()
    features.write_text("index,x\n" + "".join(f"{i},0\n" for i in index))
    matrices = root / "matrices"
    (matrices / "old").mkdir(parents=True)
    copy = matrices / "old" / "digits-copy.csv"
    shutil.copyfile(DIGITS_CSV, copy)
    (matrices / "rules.yaml").write_text(RULES)
    weights = root / "weights.bin"
    weights.write_bytes(b"no weights: the script is the model\n")
    model = {"name": "cheat", "version": "1", "uri": str(weights), "sha256": sha(weights), "code": str(code),
             "entrypoint": ["{python}", "{code}/cheat.py", "{code}", "{dataset}", "{outputs}", str(inline),
                            str(labels), str(copy)]}
    datasets = [
        {"name": "inline", "version": "1", "uri": str(inline), "sha256": sha(inline), "acceptance": "rules.yaml",
         "truth": {"task": "classification", "target": "label", "id": "index"}},
        {"name": "separate", "version": "1", "uri": str(features), "sha256": sha(features), "acceptance": "rules.yaml",
         "truth": {"task": "classification", "target": "label", "id": "index",
                   "labels": {"uri": str(labels), "sha256": sha(labels)}}},
    ]
    doc = {"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": "v"},
           "spec": {"layers": {"model": {"timeout": "2m"}}, **spec, "models": [model], "datasets": datasets}}
    matrix = matrices / "v.matrix.yaml"
    matrix.write_text(json.dumps(doc, indent=1))
    return {"code": code, "inline": inline, "labels": labels, "features": features, "copy": copy, "matrix": matrix}


def constant_accuracy() -> float:
    """scikit-learn's accuracy of predicting 0 for every digits test sample, as the gate rounds it (6 places)."""
    from sklearn.metrics import accuracy_score

    _, label = truth_labels()
    return round(float(accuracy_score(label, [0] * len(label))), 6)
