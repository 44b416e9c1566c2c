"""Build the digits example's served models for MLServer's scikit-learn runtime, deterministically.

MLServer's ``mlserver_sklearn.SKLearnModel`` loads a joblib/pickle of a scikit-learn estimator,
so the ONNX file of ``cases/digits/model`` cannot be served by it; this script trains the same
kind of classifier on the same split (see ``cases/digits/train.py``: UCI hand-written digits as
shipped by scikit-learn, every fifth sample is the test part) and writes two versions:

  <out>/digits-1.0.0/model.joblib + model-settings.json   StandardScaler → LogisticRegression(C=0.05)
  <out>/digits-2.0.0/model.joblib + model-settings.json   StandardScaler → LogisticRegression(C=1.0)

Test accuracy is 0.955556 for 1.0.0 and 0.963889 for 2.0.0; both read the ten golden samples of
``serving/acceptance.yaml`` right. Inputs are the raw pixel values as the test CSV stores them
(float, shape [N, 64], values 0..16); the estimator's ``predict`` output is an int64 label per
row. Nothing is random (lbfgs on a fixed split), so the same scikit-learn/joblib versions give
the same bytes.

Run it with the interpreter of the MLServer environment (the pickle must match the scikit-learn
that loads it)::

    python cases/digits/serving/build.py OUT [--only 2.0.0]

Prints ``<sha256>  <path>`` per model file. Exits 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

VERSIONS: dict[str, float] = {"1.0.0": 0.05, "2.0.0": 1.0}
"""Model version → inverse regularisation strength C of its LogisticRegression."""
MODEL_NAME = "digits"


def build(out: Path, versions: list[str]) -> dict[str, str]:
    """Train and write each version under ``out``; return {model file path: sha256 hex}."""
    import joblib
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    digits = load_digits()
    x = digits.data.astype(np.float64)
    y = digits.target.astype(np.int64)
    train = np.arange(len(y)) % 5 != 0
    written: dict[str, str] = {}
    for version in versions:
        clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000, C=VERSIONS[version]))
        clf.fit(x[train], y[train])
        folder = out / f"{MODEL_NAME}-{version}"
        folder.mkdir(parents=True, exist_ok=True)
        model = folder / "model.joblib"
        joblib.dump(clf, model)
        settings = {"name": MODEL_NAME, "implementation": "mlserver_sklearn.SKLearnModel",
                    "parameters": {"uri": "./model.joblib", "version": version}}
        (folder / "model-settings.json").write_text(json.dumps(settings, indent=2) + "\n", "utf-8")
        written[str(model)] = hashlib.sha256(model.read_bytes()).hexdigest()
    return written


def main() -> int:
    """Build the versions named by ``--only`` (default all) into OUT."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", action="append", choices=sorted(VERSIONS), default=None)
    args = parser.parse_args()
    for path, digest in build(args.out, args.only or sorted(VERSIONS)).items():
        print(f"{digest}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
