"""A small self-contained case (the README tour's: a threshold model in plain Python, four rows of data, two
acceptance rules) written into any folder, so a test can build a project of its own — its own git repository,
no ini file, an old and a new matrix — without reaching into the repository's cases/ by absolute path."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

DATA = "index,label,x\n0,0,0.10\n1,1,0.92\n2,0,0.31\n3,1,0.77\n"
MODEL = '''import argparse, csv, json

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--data", required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()
with open(args.model, encoding="utf-8") as fh:
    threshold = json.load(fh)["threshold"]
out = {"indices": [], "predictions": []}
with open(args.data, encoding="utf-8") as fh:
    for row in csv.DictReader(fh):
        out["predictions"].append(int(float(row["x"]) > threshold))
        out["indices"].append(int(row["index"]))
with open(args.out, "w", encoding="utf-8") as fh:
    json.dump(out, fh)
'''
ACCEPTANCE = """apiVersion: pytest-hetero/v1
kind: AcceptanceRules
metadata: {name: small}
rules:
  - name: golden
    golden: {field: predictions, key: indices, samples: [{index: 0, expected: 0}, {index: 1, expected: 1}]}
"""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_case(folder: Path, threshold: float = 0.5) -> None:
    """``folder``/{data.csv, threshold.json, model.py, acceptance.yaml}."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.csv").write_text(DATA)
    (folder / "threshold.json").write_text(json.dumps({"threshold": threshold}))
    (folder / "model.py").write_text(MODEL)
    (folder / "acceptance.yaml").write_text(ACCEPTANCE)


def matrix(case: Path, rel: str, *, name: str = "small", resources: tuple[str, ...] = ("cpu-a",),
           model_version: str = "1.0.0") -> str:
    """A local-backend matrix (JSON, which is YAML) over the case in ``case``, reached through the relative
    path ``rel`` (e.g. ``../case``) as a user writes it; one CPU resource per name in ``resources``."""
    doc = {"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": name},
           "spec": {"target": {"backend": "local"},
                    "resources": [{"name": r, "type": "cpu", "requests": {"cpu": 1}} for r in resources],
                    "images": [{"name": "py", "reference": "python:current", "for": ["cpu"]}],
                    "models": [{"name": "threshold", "version": model_version, "uri": f"{rel}/threshold.json",
                                "sha256": sha256(case / "threshold.json"), "code": rel,
                                "entrypoint": ["{python}", "{code}/model.py", "--model", "{model}",
                                               "--data", "{dataset}", "--out", "{outputs}"]}],
                    "datasets": [{"name": "rows", "version": "1.0.0", "uri": f"{rel}/data.csv",
                                  "sha256": sha256(case / "data.csv"), "acceptance": f"{rel}/acceptance.yaml"}]}}
    return json.dumps(doc, indent=2) + "\n"
