"""Build the digits example's model and data set, deterministically.

Source data: the UCI ML hand-written digits set (1,797 samples of 8x8 pixels, values 0..16)
that scikit-learn ships (``sklearn.datasets.load_digits``). Split without randomness:
every fifth sample (index % 5 == 0) is the test part (360 rows), the rest trains.

Writes (paths relative to this folder):
  data/digits-test-1.0.0.csv   header ``index,label,p0..p63``; integers; LF line ends
  model/digits-logreg-1.0.0.onnx  a multinomial logistic regression exported with skl2onnx
                                  (inputs: float32 [N, 64] scaled by 1/16; outputs: label, probabilities)

Run ``python cases/digits/train.py [--check]``; ``--check`` rebuilds into a temp folder and
exits 1 when the bytes differ from the committed files (reproducibility check).
Requires scikit-learn and skl2onnx (the ``example-build`` extra), not needed at inference.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = Path("data/digits-test-1.0.0.csv")
MODEL = Path("model/digits-logreg-1.0.0.onnx")


def build(out: Path) -> dict[str, str]:
    """Write the test CSV and ONNX model under ``out``; return {relative path: sha256}."""
    import numpy as np
    from skl2onnx import to_onnx
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    digits = load_digits()
    x = digits.data.astype(np.int64)
    y = digits.target.astype(np.int64)
    test = np.arange(len(y)) % 5 == 0
    clf = LogisticRegression(max_iter=5000, C=1.0)
    clf.fit((x[~test] / 16.0).astype(np.float32), y[~test])

    (out / DATA.parent).mkdir(parents=True, exist_ok=True)
    (out / MODEL.parent).mkdir(parents=True, exist_ok=True)
    lines = ["index,label," + ",".join(f"p{i}" for i in range(64))]
    for idx in np.flatnonzero(test):
        lines.append(f"{idx},{y[idx]}," + ",".join(str(v) for v in x[idx]))
    (out / DATA).write_text("\n".join(lines) + "\n", encoding="ascii")

    onx = to_onnx(clf, (x[:1] / 16.0).astype(np.float32), options={"zipmap": False},
                  target_opset=17)
    onx.doc_string = "pytest-hetero digits example, logistic regression 1.0.0"
    (out / MODEL).write_bytes(onx.SerializeToString())
    return {str(p): hashlib.sha256((out / p).read_bytes()).hexdigest() for p in (DATA, MODEL)}


def main() -> int:
    """Build into this folder, or with ``--check`` compare a fresh build to the committed files."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="rebuild in a temp dir and compare")
    args = parser.parse_args()
    if not args.check:
        for path, digest in build(HERE).items():
            print(f"{digest}  cases/digits/{path}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = build(Path(tmp))
    bad = [p for p, d in fresh.items()
           if hashlib.sha256((HERE / p).read_bytes()).hexdigest() != d]
    for p in bad:
        print(f"differs from a fresh build: cases/digits/{p}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
