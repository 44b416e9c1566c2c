"""Ground truth: the gate reads a dataset's labels or targets itself and computes the business metrics.

:mod:`pytest_hetero.matrix.truth_table` reads the truth file a matrix declares (``spec.datasets[].truth``:
CSV, JSONL or Parquet), checking its sha256 against the matrix at read time, and joins it with a model's
``predictions`` (by id or by order); :mod:`pytest_hetero.matrix.gate_metrics` computes the metrics of each task
kind with scikit-learn over the joined rows. Nothing here reads the numbers a model writes about itself.

Both live in :mod:`pytest_hetero.matrix` (they need only its model), so matrix validation can use them without
importing this package, which imports matrix (no package cycle).
"""
