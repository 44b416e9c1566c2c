"""Digits example entrypoint: run the ONNX classifier on the test CSV, one sample at a time.

Usage::

    python3 infer.py --model M.onnx --data D.csv --out outputs.json [--provider CPUExecutionProvider]

Input CSV: columns ``index`` and ``p0..p63`` read by name (see train.py); the dataset's ``label`` column is the
gate's ground truth: the gate gives the model a copy without it, and this script never reads it. Needs numpy
and onnxruntime only, so it runs inside a minimal image. The provider defaults to ``$HETERO_EXECUTION_PROVIDER`` or
CPUExecutionProvider; a provider the ONNX Runtime build lacks is an error (exit 3), never a
silent fallback to CPU, so a GPU row cannot pass on the CPU.

Writes ``outputs.json`` (the outputs contract, docs/acceptance.md): {"provider": str,
"providers_available": [str], "n": int, "ids": [int] (the index column), "predictions": [int],
"top_probability": [float], "latency_ms": [float]}. The gate joins ids with the dataset's truth and
computes accuracy itself; top_probability and latency_ms are self-reported.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> int:
    """Run inference; exit 0 ok, 2 bad input, 3 provider unavailable."""
    import numpy as np
    import onnxruntime as ort

    parser = argparse.ArgumentParser(description="digits ONNX inference")
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--provider",
                        default=os.environ.get("HETERO_EXECUTION_PROVIDER", "CPUExecutionProvider"))
    args = parser.parse_args()

    available = ort.get_available_providers()
    if args.provider not in available:
        print(f"execution provider {args.provider} not available; this build has {available}",
              file=sys.stderr)
        return 3
    session = ort.InferenceSession(args.model, providers=[args.provider])
    used = session.get_providers()[0]
    if used != args.provider:
        print(f"session fell back to {used} instead of {args.provider}", file=sys.stderr)
        return 3

    with open(args.data, encoding="utf-8") as fh:
        header = fh.readline().strip().split(",")
    wanted = ["index", *(f"p{i}" for i in range(64))]
    missing = [name for name in wanted if name not in header]
    if missing:
        print(f"{args.data}: no column(s) {', '.join(missing[:5])} (need index,p0..p63; got {len(header)} columns)",
              file=sys.stderr)
        return 2
    columns = [header.index(name) for name in wanted]  # by name: a label column, if any, is never read
    table = np.loadtxt(args.data, delimiter=",", skiprows=1, dtype=np.int64, ndmin=2, usecols=columns)
    indices, pixels = table[:, 0], (table[:, 1:] / 16.0).astype(np.float32)
    input_name = session.get_inputs()[0].name
    predictions: list[int] = []
    top: list[float] = []
    latency: list[float] = []
    for row in pixels:
        start = time.perf_counter()
        label, proba = session.run(None, {input_name: row[None, :]})
        latency.append((time.perf_counter() - start) * 1000.0)
        predictions.append(int(label[0]))
        top.append(round(float(proba[0].max()), 6))
    result = {
        "provider": used, "providers_available": available, "n": int(len(indices)),
        "ids": indices.tolist(), "predictions": predictions,
        "top_probability": top, "latency_ms": [round(v, 4) for v in latency],
    }
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    print(f"{len(indices)} samples, provider {used}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
