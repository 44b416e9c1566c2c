"""Metrics the gate computes from a dataset's truth and a model's predictions, with scikit-learn.

Each task kind has a closed set of metric names (:data:`CLASSIFICATION`, :data:`REGRESSION`; per class:
``precision[c]``, ``recall[c]``, ``f1[c]``); a value comes with the scikit-learn function that computed it.
Precision, recall and F1 of a class that is never predicted (or never true) are 0 (``zero_division=0``), as
scikit-learn reports them; the classes are those of the truth and the predictions together, sorted.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field

CLASSIFICATION: dict[str, str] = {
    "accuracy": "sklearn.metrics.accuracy_score",
    "balanced_accuracy": "sklearn.metrics.balanced_accuracy_score",
    "precision_macro": "sklearn.metrics.precision_score(average='macro')",
    "recall_macro": "sklearn.metrics.recall_score(average='macro')",
    "f1_macro": "sklearn.metrics.f1_score(average='macro')",
    "precision_weighted": "sklearn.metrics.precision_score(average='weighted')",
    "recall_weighted": "sklearn.metrics.recall_score(average='weighted')",
    "f1_weighted": "sklearn.metrics.f1_score(average='weighted')",
}
"""Classification metric name → the scikit-learn call that computes it."""
PER_CLASS: dict[str, str] = {
    "precision": "sklearn.metrics.precision_score(average=None)",
    "recall": "sklearn.metrics.recall_score(average=None)",
    "f1": "sklearn.metrics.f1_score(average=None)",
}
"""Per-class metric (``name[class]``) → the scikit-learn call."""
REGRESSION: dict[str, str] = {
    "mae": "sklearn.metrics.mean_absolute_error",
    "mse": "sklearn.metrics.mean_squared_error",
    "rmse": "sklearn.metrics.root_mean_squared_error",
    "r2": "sklearn.metrics.r2_score",
    "max_error": "sklearn.metrics.max_error",
}
"""Regression metric name → the scikit-learn call."""
MEASURED: dict[str, str] = {
    "wall_s": "wall time of the model run as the gate timed it, in seconds",
    "per_sample_ms": "the run's wall time over its predictions, in milliseconds",
    "throughput_sps": "predictions per second of the run's wall time",
    "memory_peak_mib": "the model run's own memory high-water mark as the engine measured it, in MiB (model.run_time)",
    "cpu_s": "CPU-seconds the model run used as the engine measured them (model.run_time)",
}
"""Values the gate measures around a batch run (no truth needed) → what each is."""
TASK_METRICS: dict[str, dict[str, str]] = {"classification": CLASSIFICATION, "regression": REGRESSION}
PER_CLASS_NAME = re.compile(r"^(precision|recall|f1)\[(.+)\]$")


def known(name: str) -> bool:
    """Whether ``name`` is a metric the gate computes or measures (any task kind)."""
    return name in CLASSIFICATION or name in REGRESSION or name in MEASURED or bool(PER_CLASS_NAME.match(name))


def names() -> list[str]:
    """Every metric name a rule may use (per-class ones as ``f1[<class>]``), for ``did you mean`` hints."""
    return [*CLASSIFICATION, *(f"{n}[<class>]" for n in PER_CLASS), *REGRESSION, *MEASURED]


def task_of(name: str) -> str | None:
    """The task kind whose metric ``name`` is; None for a measured value."""
    if name in REGRESSION:
        return "regression"
    if name in CLASSIFICATION or PER_CLASS_NAME.match(name):
        return "classification"
    return None


def sklearn_version() -> str:
    """The installed scikit-learn version."""
    import sklearn

    return str(sklearn.__version__)


@dataclass
class Computed:
    """The metrics of one joined truth/prediction set: ``values`` name → number, ``functions`` name → the
    scikit-learn call, ``classes`` (classification: sorted labels), ``confusion`` (rows: truth, columns:
    prediction, in ``classes`` order)."""

    task: str
    values: dict[str, float] = field(default_factory=dict)
    functions: dict[str, str] = field(default_factory=dict)
    classes: list[str] = field(default_factory=list)
    confusion: list[list[int]] = field(default_factory=list)


def _class_key(label: str) -> tuple[int, int, str]:
    """Sort integral labels numerically, before text ones."""
    try:
        return (0, int(label), "")
    except ValueError:
        return (1, 0, label)


def classification(y_true: list[str], y_pred: list[str]) -> Computed:
    """Every :data:`CLASSIFICATION` metric and the per-class ones, and the confusion matrix, of labels given as
    text. Raises ValueError on empty input."""
    import numpy as np
    from sklearn import metrics as m

    if not y_true:
        raise ValueError("no rows")
    classes = sorted(set(y_true) | set(y_pred), key=_class_key)
    # scikit-learn on integer codes (class i of ``classes``): the same values, without its slow path for objects
    code = {c: i for i, c in enumerate(classes)}
    t = np.fromiter((code[v] for v in y_true), dtype=np.int64, count=len(y_true))
    p = np.fromiter((code[v] for v in y_pred), dtype=np.int64, count=len(y_pred))
    out = Computed(task="classification", classes=classes)
    out.values["accuracy"] = float(m.accuracy_score(t, p))
    with warnings.catch_warnings():  # "y_pred contains classes not in y_true": a fact of the data, not news
        warnings.simplefilter("ignore", UserWarning)
        out.values["balanced_accuracy"] = float(m.balanced_accuracy_score(t, p))
    for avg in ("macro", "weighted"):
        prec, rec, f1, _ = m.precision_recall_fscore_support(t, p, labels=list(code.values()), average=avg,
                                                             zero_division=0)
        out.values.update({f"precision_{avg}": float(prec), f"recall_{avg}": float(rec), f"f1_{avg}": float(f1)})
    prec_c, rec_c, f1_c, _ = m.precision_recall_fscore_support(t, p, labels=list(code.values()), average=None,
                                                               zero_division=0)
    for i, c in enumerate(classes):
        out.values.update({f"precision[{c}]": float(prec_c[i]), f"recall[{c}]": float(rec_c[i]),
                           f"f1[{c}]": float(f1_c[i])})
    out.confusion = m.confusion_matrix(t, p, labels=list(code.values())).tolist()
    out.functions = {**CLASSIFICATION}
    for name in out.values:
        found = PER_CLASS_NAME.match(name)
        if found:
            out.functions[name] = PER_CLASS[found.group(1)]
    return out


def regression(y_true: list[float], y_pred: list[float]) -> Computed:
    """Every :data:`REGRESSION` metric of finite numbers (``r2`` from two rows on). Raises ValueError on empty
    input."""
    import numpy as np
    from sklearn import metrics as m

    if not y_true:
        raise ValueError("no rows")
    t, p = np.asarray(y_true, dtype=np.float64), np.asarray(y_pred, dtype=np.float64)
    out = Computed(task="regression", functions={**REGRESSION})
    out.values["mae"] = float(m.mean_absolute_error(t, p))
    out.values["mse"] = float(m.mean_squared_error(t, p))
    out.values["rmse"] = float(m.root_mean_squared_error(t, p))
    if len(t) > 1:  # R² of one sample is undefined (scikit-learn warns and returns NaN)
        out.values["r2"] = float(m.r2_score(t, p))
    out.values["max_error"] = float(m.max_error(t, p))
    return out
