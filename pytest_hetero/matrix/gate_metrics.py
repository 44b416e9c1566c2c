"""Metrics the gate computes from a dataset's truth and a model's predictions, with scikit-learn.

Each task kind has a closed set of metric names (:data:`CLASSIFICATION`, :data:`REGRESSION`; per class:
``precision[c]``, ``recall[c]``, ``f1[c]``); a value comes with the scikit-learn function that computed it.
Precision, recall and F1 of a class that is never predicted (or never true) are 0 (``zero_division=0``), as
scikit-learn reports them; the classes are those of the truth and the predictions together, sorted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

CLASSIFICATION: dict[str, str] = {
    "accuracy": "trace(C) / n (= sklearn.metrics.accuracy_score)",
    "balanced_accuracy": "mean of recall over the classes present in the truth (= sklearn.metrics."
                         "balanced_accuracy_score)",
    **{f"{kind}_{avg}": f"{how} of per-class {kind} (= sklearn.metrics.{kind}_score"
                        f"(average='{avg}', zero_division=0))"
       for avg, how in (("macro", "mean"), ("weighted", "support-weighted mean"))
       for kind in ("precision", "recall", "f1")},
}
"""Classification metric name → how the gate computes it from the confusion matrix ``C`` (rows: truth, columns:
prediction; counted once with :func:`numpy.bincount`) and the scikit-learn function it equals. The formulas are
scikit-learn's own, in its order of operations (``_prf_divide``, ``numpy.nanmean``, the weighted average as the sum
of value × support over the sum of support), so the values equal scikit-learn's calls bit for bit on the same
labels (tests/test_business_truth.py checks them against scikit-learn on random labels); one pass over the rows
instead of one validation and confusion count per scikit-learn call."""
PER_CLASS: dict[str, str] = {
    "precision": "C[c, c] / column sum of C, 0 when 0 (= sklearn.metrics.precision_score(average=None, "
                 "zero_division=0))",
    "recall": "C[c, c] / row sum of C, 0 when 0 (= sklearn.metrics.recall_score(average=None, zero_division=0))",
    "f1": "2 C[c, c] / (row sum + column sum), 0 when 0 (= sklearn.metrics.f1_score(average=None, "
          "zero_division=0))",
}
"""Per-class metric (``name[class]``) → how the gate computes it and the scikit-learn function it equals."""
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
    "gpu_memory_peak_mib": "highest memory used on a device allocated to the model run, in MiB, sampled by the "
                           "gate inside its container (nvidia-smi / NVML / npu-smi HBM; model.run_time)",
    "device_utilisation_mean": "mean utilisation 0-1 of the devices allocated to the model run over its samples "
                               "(utilization.gpu / AI Core; model.run_time)",
}
"""Values the gate measures around a batch run (no truth needed) → what each is."""
RANKING: dict[str, str] = {
    "mrr": "mean over the truth rows of 1 / rank of the first relevant id in the ranked list (0 when none is "
           "listed); with one relevant id per row and a full ranking = sklearn.metrics."
           "label_ranking_average_precision_score",
}
"""Ranking metric name → how the gate computes it (``recall@<k>`` is parameterised: :data:`AT_K`)."""
GENERATION: dict[str, str] = {
    "exact_match": "share of rows whose prediction equals the reference text exactly (= sklearn.metrics."
                   "accuracy_score on the texts)",
    "contains": "share of rows whose prediction contains the reference text",
    "regex_match": "share of rows whose prediction matches the reference, a RE2 pattern, somewhere (re2.search: "
                   "linear time in the model's text)",
    "json_valid": "share of rows whose prediction is JSON text valid against truth.json_schema "
                  "(jsonschema, draft 2020-12)",
    "rouge_l": "mean ROUGE-L F-measure of prediction against reference (rouge_score.rouge_scorer.RougeScorer("
               "['rougeL']); the 'rouge' extra)",
}
"""Generation metric name → how the gate computes it."""
AT_K: dict[str, tuple[str, str]] = {
    "top_k_accuracy": ("classification", "share of rows whose true class is among the k highest outputs.scores "
                       "(= sklearn.metrics.top_k_accuracy_score(k=k, labels=sorted classes))"),
    "recall": ("ranking", "mean over the truth rows of |relevant ids in the first k listed| / |relevant ids|; with "
               "one relevant id per row = sklearn.metrics.top_k_accuracy_score on the ranking"),
}
"""Metric names taking a cut-off ``@k`` (``top_k_accuracy@3``, ``recall@10``) → (task kind, how)."""
TASK_METRICS: dict[str, dict[str, str]] = {"classification": CLASSIFICATION, "regression": REGRESSION,
                                           "ranking": RANKING, "generation": GENERATION}
PER_CLASS_NAME = re.compile(r"^(precision|recall|f1)\[(.+)\]$")
AT_K_NAME = re.compile(r"^(top_k_accuracy|recall)@([1-9][0-9]{0,5})$")
"""``<name>@<k>``: k from 1 to 999999."""


def known(name: str) -> bool:
    """Whether ``name`` is a metric the gate computes or measures (any task kind)."""
    return name in MEASURED or task_of(name) is not None


def names() -> list[str]:
    """Every metric name a rule may use (per-class ones as ``f1[<class>]``, cut-off ones as ``recall@<k>``), for
    ``did you mean`` hints."""
    return [*CLASSIFICATION, *(f"{n}[<class>]" for n in PER_CLASS), *(f"{n}@<k>" for n in AT_K), *REGRESSION,
            *RANKING, *GENERATION, *MEASURED]


def task_of(name: str) -> str | None:
    """The task kind whose metric ``name`` is; None for a measured value or an unknown name."""
    for task, table in TASK_METRICS.items():
        if name in table:
            return task
    if PER_CLASS_NAME.match(name):
        return "classification"
    found = AT_K_NAME.match(name)
    return AT_K[found.group(1)][0] if found else None


def describe(name: str) -> str:
    """How the gate computes metric ``name`` (a known one)."""
    found = AT_K_NAME.match(name)
    if found:
        return AT_K[found.group(1)][1].replace("k=k", f"k={found.group(2)}").replace(" k ", f" {found.group(2)} ")
    per = PER_CLASS_NAME.match(name)
    if per:
        return PER_CLASS[per.group(1)]
    task = task_of(name)
    return TASK_METRICS[task][name] if task else MEASURED[name]


def sklearn_version() -> str:
    """The installed scikit-learn version, from its distribution's metadata (``importlib.metadata``: importing
    ``sklearn`` only to read ``__version__`` costs about a second of CPU per gate process). Raises
    ``importlib.metadata.PackageNotFoundError`` when scikit-learn is not installed."""
    from importlib.metadata import version

    return version("scikit-learn")


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
    library: str = ""
    """What computed the values (filled by :func:`classification` and :func:`regression`)."""


def _class_key(label: str) -> tuple[int, int, str]:
    """Sort integral labels numerically, before text ones."""
    try:
        return (0, int(label), "")
    except ValueError:
        return (1, 0, label)


def classification(y_true: Sequence[str], y_pred: Sequence[str]) -> Computed:
    """Every :data:`CLASSIFICATION` metric and the per-class ones, and the confusion matrix, of labels given as
    text (lists, or :class:`~pytest_hetero.matrix.truth_table.Labels`: codes, used as they are). Raises ValueError
    on empty input."""
    import numpy as np

    if not y_true:
        raise ValueError("no rows")
    coded = _coded(y_true, y_pred)
    if coded is not None:
        classes, t, p = coded
    else:
        classes = sorted(set(y_true) | set(y_pred), key=_class_key)
        # scikit-learn on integer codes (class i of ``classes``): the same values, without its slow path for objects
        code = {c: i for i, c in enumerate(classes)}
        t = np.fromiter(map(code.__getitem__, y_true), dtype=np.int64, count=len(y_true))
        p = np.fromiter(map(code.__getitem__, y_pred), dtype=np.int64, count=len(y_pred))
    out = Computed(task="classification", classes=classes, library=f"pytest_hetero.matrix.gate_metrics (equal to "
                   f"scikit-learn {sklearn_version()}, tested)")
    k = len(classes)
    flat = np.zeros(k * k, dtype=np.int64)
    for start in range(0, len(t), 1 << 16):  # in blocks: small temporaries, small codes widened a block at a time
        block = slice(start, start + (1 << 16))
        flat += np.bincount(t[block].astype(np.int64) * k + p[block], minlength=k * k)
    confusion = flat.reshape(k, k)
    tp = np.diagonal(confusion).copy()
    true_sum, pred_sum = confusion.sum(axis=1), confusion.sum(axis=0)
    out.values["accuracy"] = float(tp.sum()) / len(t)
    recall = _divide(tp, true_sum)
    out.values["balanced_accuracy"] = float(np.mean(recall[true_sum > 0]))
    precision = _divide(tp, pred_sum)
    f1 = _divide(2.0 * tp.astype(np.float64), 1.0 * true_sum.astype(np.float64) + pred_sum.astype(np.float64))
    weights = true_sum.astype(np.float64)
    for kind, value in (("precision", precision), ("recall", recall), ("f1", f1)):
        out.values[f"{kind}_macro"] = float(np.nanmean(value))
        out.values[f"{kind}_weighted"] = float(np.sum(np.multiply(value, weights)) / np.sum(weights))
    for i, c in enumerate(classes):
        out.values.update({f"precision[{c}]": float(precision[i]), f"recall[{c}]": float(recall[i]),
                           f"f1[{c}]": float(f1[i])})
    out.confusion = confusion.tolist()
    out.functions = {**CLASSIFICATION}
    for name in out.values:
        found = PER_CLASS_NAME.match(name)
        if found:
            out.functions[name] = PER_CLASS[found.group(1)]
    return out


def _coded(y_true: Sequence[str], y_pred: Sequence[str]) -> tuple[list[str], Any, Any] | None:
    """The sorted classes of two :class:`~pytest_hetero.matrix.truth_table.Labels` (the texts their codes use) and
    both as indexes into them (int32), without a string per row; None when either is not Labels."""
    import numpy as np

    from pytest_hetero.matrix.truth_table import Labels, code_dtype, counts

    if not isinstance(y_true, Labels) or not isinstance(y_pred, Labels):
        return None
    used = [np.flatnonzero(counts(v.codes, len(v.texts))).tolist() for v in (y_true, y_pred)]
    classes = sorted({y_true.texts[i] for i in used[0]} | {y_pred.texts[i] for i in used[1]}, key=_class_key)
    at = {c: i for i, c in enumerate(classes)}
    found = []
    for v in (y_true, y_pred):  # a text neither uses has no class: 0, never read
        lut = np.fromiter((at.get(x, 0) for x in v.texts), dtype=code_dtype(len(classes)), count=len(v.texts))
        found.append(lut[v.codes])
    return classes, found[0], found[1]


def _divide(numerator: Any, denominator: Any) -> Any:
    """``numerator / denominator`` element-wise, 0.0 where the denominator is 0: scikit-learn's ``_prf_divide``
    with ``zero_division=0`` (the same division of the same numbers)."""
    import numpy as np

    zero = denominator == 0
    safe = denominator.copy()
    safe[zero] = 1
    result = np.true_divide(numerator, safe)
    result[zero] = 0.0
    return result


def regression(y_true: list[float], y_pred: list[float]) -> Computed:
    """Every :data:`REGRESSION` metric of finite numbers (``r2`` from two rows on). Raises ValueError on empty
    input."""
    import numpy as np
    from sklearn import metrics as m

    if not y_true:
        raise ValueError("no rows")
    t, p = np.asarray(y_true, dtype=np.float64), np.asarray(y_pred, dtype=np.float64)
    out = Computed(task="regression", functions={**REGRESSION}, library=f"scikit-learn {sklearn_version()}")
    out.values["mae"] = float(m.mean_absolute_error(t, p))
    out.values["mse"] = float(m.mean_squared_error(t, p))
    out.values["rmse"] = float(m.root_mean_squared_error(t, p))
    if len(t) > 1:  # R² of one sample is undefined (scikit-learn warns and returns NaN)
        out.values["r2"] = float(m.r2_score(t, p))
    out.values["max_error"] = float(m.max_error(t, p))
    return out


def top_k_accuracy(y_true: Sequence[str], scores: Any, classes: list[str], k: int) -> float:
    """sklearn.metrics.top_k_accuracy_score of the true labels ``y_true`` (text) against ``scores`` (rows × classes,
    float64), whose columns are the labels ``classes`` (text, distinct) in the model's order: the columns are put
    in sorted label order, as scikit-learn requires (with two classes, the second's column, as it requires). Raises
    ValueError when a true label is not among ``classes``."""
    import warnings

    import numpy as np
    from sklearn.metrics import top_k_accuracy_score

    unknown = set(y_true) - set(classes)
    if unknown:
        raise ValueError(f"true label(s) {', '.join(sorted(unknown)[:5])} not among outputs.classes")
    order = sorted(range(len(classes)), key=classes.__getitem__)
    labels = np.asarray([classes[i] for i in order])
    ranked = np.asarray(scores, dtype=np.float64)[:, order]
    with warnings.catch_warnings():  # k >= the number of classes: a perfect score, as scikit-learn warns
        warnings.simplefilter("ignore")
        return float(top_k_accuracy_score(np.asarray(list(y_true)), ranked[:, 1] if len(classes) == 2 else ranked,
                                          k=k, labels=labels))


def _first_seen(ranked: list[str]) -> list[str]:
    return list(dict.fromkeys(ranked))


def recall_at(relevant: list[tuple[str, ...]], ranked: list[list[str]], k: int) -> float:
    """Mean over rows of the share of the row's relevant ids among the first ``k`` distinct ids of its ranked list
    (an id listed twice counts at its first place). Raises ValueError on empty input."""
    if not relevant:
        raise ValueError("no rows")
    total = 0.0
    for want, got in zip(relevant, ranked, strict=True):
        wanted = set(want)
        total += len(wanted.intersection(_first_seen(got)[:k])) / len(wanted)
    return total / len(relevant)


def mrr(relevant: list[tuple[str, ...]], ranked: list[list[str]]) -> float:
    """Mean reciprocal rank: mean over rows of 1 / (place of the first relevant id among the distinct ids listed,
    from 1), 0 when none is listed. Raises ValueError on empty input."""
    if not relevant:
        raise ValueError("no rows")
    total = 0.0
    for want, got in zip(relevant, ranked, strict=True):
        wanted = set(want)
        total += next((1.0 / place for place, i in enumerate(_first_seen(got), 1) if i in wanted), 0.0)
    return total / len(relevant)


def exact_match(references: list[str], texts: list[str]) -> float:
    """Share of rows where the text equals the reference exactly (no normalisation)."""
    return sum(map(str.__eq__, texts, references)) / len(references)


def contains(references: list[str], texts: list[str]) -> float:
    """Share of rows where the text contains the reference."""
    return sum(map(str.__contains__, texts, references)) / len(references)


def regex_match(patterns: list[str], texts: list[str]) -> float:
    """Share of rows where RE2 pattern ``patterns[i]`` matches somewhere in ``texts[i]`` (each distinct pattern
    compiled once; matching is linear in the text). Raises ValueError naming a pattern RE2 cannot compile."""
    import re2

    options = re2.Options()
    options.log_errors = False
    compiled: dict[str, Any] = {}
    for pattern in set(patterns):
        try:
            compiled[pattern] = re2.compile(pattern, options)
        except re2.error as exc:
            raise ValueError(f"reference {pattern!r} is not a RE2 pattern: {exc}") from None
    return sum(compiled[p].search(t) is not None for p, t in zip(patterns, texts, strict=True)) / len(patterns)


def json_valid(texts: list[str], schema: dict[str, Any]) -> float:
    """Share of ``texts`` that parse as JSON and are valid against ``schema`` (draft 2020-12); a text nested too deep
    for the (recursive) parser or validator counts as invalid, never as a gate error. Raises ValueError for a schema
    that is not one."""
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"truth.json_schema is not a JSON Schema: {exc.message}") from None
    validator = jsonschema.Draft202012Validator(schema)
    good = 0
    for text in texts:
        try:
            good += validator.is_valid(json.loads(text))
        except (ValueError, RecursionError):  # not JSON, or nested past what the parser / validator can descend
            continue
    return good / len(texts)


class NotInstalled(Exception):
    """A metric's package is not installed here (the message says which and how)."""


ROUGE_RATIO, ROUGE_FLOOR = 8, 2048
"""A prediction is scored by ROUGE-L only when it has at most ``max(ROUGE_RATIO × its reference's tokens,
ROUGE_FLOOR)`` tokens: the LCS table is prediction × reference cells in pure Python (time and memory), so the
dataset's references, not the model's outputs, bound what scoring a run costs."""
_ROUGE_TOKEN = re.compile(r"[a-z0-9]+")


def _rouge_tokens(text: str) -> int:
    """How many tokens rouge-score's default tokenizer makes of ``text`` (lower-cased runs of [a-z0-9]), counted
    without building them."""
    return _ROUGE_TOKEN.subn("", text.lower())[1]


def rouge_l(references: list[str], texts: list[str]) -> float:
    """Mean ROUGE-L F-measure of ``texts`` against ``references`` by Google's ``rouge-score`` package (its default
    tokenizer, no stemming). Raises :class:`NotInstalled` without it, and ValueError (the rule is then not
    evaluable: invalid outputs) for a prediction longer than :data:`ROUGE_RATIO` × its reference (at least
    :data:`ROUGE_FLOOR` tokens), naming its row."""
    try:
        from rouge_score import rouge_scorer
    except ImportError:
        raise NotInstalled("rouge_l needs the rouge-score package, not installed here: pip install "
                           "'pytest-hetero[rouge]'") from None
    for row, (reference, text) in enumerate(zip(references, texts, strict=True)):
        if len(text) <= ROUGE_FLOOR:
            continue  # fewer characters than the floor's tokens: within the bound
        limit = max(ROUGE_RATIO * _rouge_tokens(reference), ROUGE_FLOOR)
        if (n := _rouge_tokens(text)) > limit:
            raise ValueError(f"the prediction of row {row} has {n} tokens, more than the {limit} ROUGE-L scores "
                             f"against its reference (max({ROUGE_RATIO} x the reference's tokens, {ROUGE_FLOOR})): "
                             "outputs too long to score; shorten the model's generations")
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    total = sum(float(scorer.score(r, t)["rougeL"].fmeasure) for r, t in zip(references, texts, strict=True))
    return total / len(texts)


def rouge_version() -> str:
    """The installed rouge-score version ("" when absent)."""
    from importlib import metadata

    try:
        return metadata.version("rouge-score")
    except metadata.PackageNotFoundError:
        return ""
