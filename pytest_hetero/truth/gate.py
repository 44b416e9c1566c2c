"""The values the gate itself holds for one model run: metrics computed from the dataset's truth, values
measured around the run, and the model's own numbers labelled as self-reported.

:func:`check_outputs` applies the outputs contract (``outputs.schema.json`` in this package, plus ``predictions``
and ``ids`` when the dataset's truth needs them); :func:`gate_values` reads the truth (digest checked at read
time), joins it with the predictions and computes the task's metrics, each with its provenance.
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any, TypedDict, cast

from pytest_hetero.matrix import gate_metrics as metrics
from pytest_hetero.matrix.acceptance import SELF_REPORTED_NOTE, GateValues, ModelOutputs, NotEvaluable, _is_number
from pytest_hetero.matrix.model import Dataset
from pytest_hetero.matrix.truth_table import (
    Joined,
    Labels,
    TruthError,
    TruthTable,
    id_text,
    integer_labels,
    join,
    join_ids,
    label_text,
    label_texts,
    read_truth,
)

if TYPE_CHECKING:
    from typing import NotRequired


class SelfReported(TypedDict, total=False):
    """The model's own numbers (``outputs.metrics``' numeric entries), labelled as self-reported; empty when
    the model wrote none."""

    values: dict[str, float | int]
    note: str


class Measured(TypedDict, total=False):
    """What the gate measured around the run: wall time (s), per sample (ms) and throughput (samples/s), the
    sample count and who measured; or ``unavailable`` and why."""

    wall_s: float
    per_sample_ms: float
    throughput_sps: float
    samples: int | None
    by: str
    unavailable: str


class Computed(TypedDict, total=False):
    """The task's metrics the gate computed from the truth (rounded to 6 places), the functions and library that
    computed them, the classes and confusion matrix of a classification; or ``unavailable`` and why."""

    task: str
    library: str
    outputs_sha256: str
    values: dict[str, float]
    functions: dict[str, str]
    classes: list[str]
    confusion_matrix: list[list[int]]
    unavailable: str


class TruthSource(TypedDict):
    """The truth file read: path, sha256, format, target column, how it was joined, its row count."""

    path: str
    sha256: str
    format: str
    target: str
    join: str
    rows: int


class JoinFindings(TypedDict):
    """Row counts of the join, and a few example ids of each kind (only for a dataset that is not sensitive)."""

    joined: int
    missing: int
    duplicate: int
    extra: int
    examples: NotRequired[dict[str, list[str]]]


class MetricsRecord(TypedDict):
    """The ``business.metrics`` record's data (:func:`gate_values`): the model's own numbers, what was measured,
    what was computed, and (with truth) the truth file and the join's findings."""

    self_reported: SelfReported
    measured: Measured
    computed: Computed | None
    truth: NotRequired[TruthSource]
    join: NotRequired[JoinFindings]


@lru_cache(maxsize=1)
def outputs_schema() -> dict[str, Any]:
    """The published JSON Schema (draft 2020-12) of a model's outputs file."""
    text = resources.files("pytest_hetero.truth").joinpath("outputs.schema.json").read_text("utf-8")
    return dict(json.loads(text))


@dataclass(frozen=True)
class TruthOutputs:
    """The members of a model's outputs object (``outputs.schema.json``) that the truth join and its metrics read,
    parsed once: ``predictions``, ``ids`` (the dataset id of each prediction), ``scores`` (one row of numbers per
    prediction) and ``classes`` (the class label of each score column), each the list as written, None when
    absent or not a list (the schema's other types: :func:`check_outputs` refuses those)."""

    predictions: list[Any] | None
    ids: list[Any] | None
    scores: list[Any] | None
    classes: list[Any] | None

    @classmethod
    def parse(cls, outputs: Mapping[str, object]) -> TruthOutputs:
        """The members of ``outputs`` (a model's outputs JSON object). Never raises."""
        def listed(value: object) -> list[Any] | None:
            return value if isinstance(value, list) else None

        return cls(predictions=listed(outputs.get("predictions")),
                   ids=listed(outputs.get("ids")),
                   scores=listed(outputs.get("scores")),
                   classes=listed(outputs.get("classes")))


class OutputsInvalid(ValueError):
    """The outputs break the contract; ``problems`` lists each (field path and what is wrong)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def check_outputs(outputs: dict[str, Any], dataset: Dataset) -> frozenset[type] | None:
    """Check ``outputs`` against the outputs schema and what ``dataset``'s truth needs (``predictions``; ``ids``
    of the same length when joined by id). Returns the Python types of the ``ids`` entries (None without a list of
    ids), which :func:`gate_values` may be given so as not to look at a million ids again. Raises
    :class:`OutputsInvalid` naming every problem (at most 10)."""
    import jsonschema

    schema = dict(outputs_schema())
    truth = dataset.truth
    if truth is not None:
        schema["required"] = ["predictions", "ids"] if truth.id else ["predictions"]
    problems = []
    read = TruthOutputs.parse(outputs)
    kinds = frozenset(map(type, read.ids)) if read.ids is not None else None
    if kinds is not None and kinds <= {int, str}:  # every id an integer or a string, as the
        properties = dict(schema["properties"])                      # schema's items say: checked in one pass
        properties["ids"] = {k: v for k, v in properties["ids"].items() if k != "items"}
        schema["properties"] = properties
    for err in jsonschema.Draft202012Validator(schema).iter_errors(outputs):
        where = "outputs" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        text = err.message if len(err.message) < 200 else err.message[:200] + "…"
        problems.append(f"{where}: {text}")
        if len(problems) == 10:
            break
    # with no problem, the schema's types hold: the members required above are lists
    if not problems and truth is not None and truth.id and read.ids is not None and read.predictions is not None \
            and len(read.ids) != len(read.predictions):
        problems.append(f"outputs.ids has {len(read.ids)} entries beside {len(read.predictions)} "
                        "predictions: each prediction needs its id")
    if not problems and read.scores is not None:
        problems.extend(_scores_problems(read.scores, read))
    if problems:
        raise OutputsInvalid(problems)
    return kinds


def _scores_problems(scores: list[Any], outputs: TruthOutputs) -> list[str]:
    """``outputs.scores`` is one row per prediction of one number per ``outputs.classes`` entry (distinct labels)."""
    import numpy as np

    classes = outputs.classes
    if classes is None:
        return ["outputs.scores: given without outputs.classes (the class label of each score column)"]
    labels = [label_text(c) for c in classes]
    if None in labels or len(set(labels)) != len(labels):
        return ["outputs.classes: each entry a distinct class label (integer or string)"]
    try:
        shape = np.asarray(scores, dtype=np.float64).shape
    except (ValueError, TypeError):
        return ["outputs.scores: not a table of numbers (one list of numbers per prediction)"]
    rows = len(outputs.predictions) if outputs.predictions is not None else None
    if len(shape) != 2 or shape[1] != len(classes) or (rows is not None and shape[0] != rows):
        return [f"outputs.scores has shape {'x'.join(map(str, shape))}: one row per prediction ({rows}) of one "
                f"score per class ({len(classes)})"]
    return []


@dataclass
class Judged:
    """What :func:`gate_values` found: the ``values`` rules are judged on, the ``record`` for the evidence
    (``business.metrics``), and the ``joined`` rows (None without truth)."""

    values: GateValues
    record: MetricsRecord
    joined: Joined | None = None


class TruthUnusable(Exception):
    """The truth could not be read or joined (``category``: a :class:`TruthError`'s, or ``outputs_invalid`` for
    predictions that are not labels or numbers of the task)."""

    def __init__(self, message: str, category: str) -> None:
        super().__init__(message)
        self.message = message
        self.category = category


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused (a million rows read and joined allocate millions of objects, none of them
    garbage yet; each collection would walk them all again); as it was afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def gate_values(dataset: Dataset, outputs: dict[str, Any], outputs_sha256: str, wall_s: float | None,
                sensitive: bool, id_kinds: frozenset[type] | None = None) -> Judged:
    """:func:`_gate_values` with the garbage collector paused; ``id_kinds``: what :func:`check_outputs` returned for
    the same ``outputs`` (None: looked at here when needed)."""
    with _collector_paused():
        return _gate_values(dataset, outputs, outputs_sha256, wall_s, sensitive, id_kinds)


def _gate_values(dataset: Dataset, outputs: dict[str, Any], outputs_sha256: str, wall_s: float | None,
                 sensitive: bool, id_kinds: frozenset[type] | None) -> Judged:
    """The gate's values for one run of ``dataset``: measured ones (``wall_s``; per sample and throughput when
    the outputs hold predictions), computed ones (the task's metrics from the truth joined with the
    predictions), and the record of it all with the model's self-reported ``metrics`` beside (never used for a
    computed value). ``sensitive``: join examples (ids) withheld. Raises :class:`TruthUnusable`."""
    gate = GateValues()
    record: MetricsRecord = {"self_reported": _self_reported(outputs), "measured": {}, "computed": None}
    read = TruthOutputs.parse(outputs)
    predictions = read.predictions
    count = len(predictions) if predictions is not None else None
    _measured(gate, record, wall_s, count)
    truth = dataset.truth
    if truth is None:
        why = (f"dataset '{dataset.name}' declares no truth (spec.datasets[].truth): the gate cannot compute it, "
               "and does not take the model's own numbers for it")
        gate.why = why
        record["computed"] = {"unavailable": why}
        return Judged(values=gate, record=record)
    try:
        table = read_truth(truth)
    except TruthError as exc:
        raise TruthUnusable(exc.message, exc.category) from None
    assert predictions is not None  # check_outputs required it
    # a null prediction (a sample a service left unanswered) is no prediction: its row counts as missing
    kept = range(len(predictions)) if None not in predictions else \
        [i for i, p in enumerate(predictions) if p is not None]
    if not truth.id and len(kept) < len(predictions):
        raise TruthUnusable(f"outputs.predictions holds {len(predictions) - len(kept)} null(s): joined by row order, "
                            "which rows they stand for would be a guess", "outputs_invalid")
    chosen = _predictions(predictions, kept, truth.task)
    if truth.id:
        assert read.ids is not None  # check_outputs required it
        joined = join_ids(table, chosen, _kept(read.ids, kept), id_kinds if isinstance(kept, range) else None)
    else:
        joined = join(table, chosen, None)
    source: TruthSource = {"path": str(table.path), "sha256": table.sha256, "format": table.format,
                           "target": truth.target, "join": f"id '{truth.id}'" if truth.id else "row order",
                           "rows": table.rows}
    counted = joined.counts()
    findings: JoinFindings = {"joined": counted["joined"], "missing": counted["missing"],
                              "duplicate": counted["duplicate"], "extra": counted["extra"]}
    if joined.examples and not sensitive:
        findings["examples"] = joined.examples
    record["truth"], record["join"] = source, findings
    if not joined.y_true:
        gate.why = f"no prediction joined the truth ({truth.path}: {table.rows} rows; {_counts(joined)})"
        record["computed"] = {"unavailable": gate.why}
        return Judged(values=gate, record=record, joined=joined)
    base = {"source": "computed", "truth_path": str(table.path), "truth_sha256": table.sha256,
            "outputs_sha256": outputs_sha256}
    gate.lazy = _Lazy(dataset, table, joined, read, kept, base).value
    computed = _eager(truth.task, joined.y_true, joined.y_pred)
    library = computed.library
    for other in metrics.TASK_METRICS:
        if other != truth.task:
            gate.unavailable.update({name: f"it is a {other} metric and dataset '{dataset.name}' is a {truth.task} "
                                     "task" for name in metrics.TASK_METRICS[other]})
    gate.why = (f"not a metric of the {truth.task} task of dataset '{dataset.name}' (classes: "
                f"{', '.join(computed.classes[:20])})" if computed.classes else
                f"not a metric of the {truth.task} task of dataset '{dataset.name}'")
    for name, value in computed.values.items():
        gate.values[name] = (value, {**base, "function": computed.functions[name], "library": library,
                                     "rows": len(joined.y_true)})
    done: Computed = {"task": computed.task, "library": library, "outputs_sha256": outputs_sha256,
                      "values": {k: round(v, 6) for k, v in computed.values.items()}, "functions": computed.functions}
    if computed.classes:
        done["classes"], done["confusion_matrix"] = computed.classes, computed.confusion
    record["computed"] = done
    return Judged(values=gate, record=record, joined=joined)


def _eager(task: str, y_true: Sequence[Any], y_pred: Sequence[Any]) -> metrics.Computed:
    """The metrics of ``task`` computed for every run (the others when a rule asks: :class:`_Lazy`)."""
    if task == "classification":
        return metrics.classification(y_true, y_pred)
    # only class labels are ever Labels (codes): the other tasks' values are lists
    y_true, y_pred = cast("list[Any]", y_true), cast("list[Any]", y_pred)
    if task == "regression":
        return metrics.regression(y_true, y_pred)
    out = metrics.Computed(task=task, library="pytest_hetero.matrix.gate_metrics")
    if task == "ranking":
        out.values["mrr"] = metrics.mrr(y_true, y_pred)
    else:
        out.values.update(exact_match=metrics.exact_match(y_true, y_pred), contains=metrics.contains(y_true, y_pred))
    out.functions = {name: metrics.describe(name) for name in out.values}
    return out


class _Lazy:
    """Metrics computed when a rule asks for them: cut-off ones (``recall@5``, ``top_k_accuracy@3``), the costlier
    generation ones (``regex_match``, ``json_valid``, ``rouge_l``), and any metric over a slice of the truth rows."""

    def __init__(self, dataset: Dataset, table: TruthTable, joined: Joined, outputs: TruthOutputs,
                 kept: Sequence[int], base: dict[str, Any]) -> None:
        self.dataset, self.table, self.joined, self.outputs, self.kept, self.base = \
            dataset, table, joined, outputs, kept, base

    def value(self, name: str, where: tuple[str, str] | None) -> tuple[float, dict[str, Any]]:
        """Metric ``name`` over the joined rows (those whose truth column ``where[0]`` is ``where[1]`` when given),
        with its provenance. Raises NotEvaluable saying why there is none."""
        import numpy as np

        truth = self.dataset.truth
        assert truth is not None
        task = metrics.task_of(name)
        if task != truth.task:
            raise NotEvaluable(f"metric '{name}' is not one of the gate's {truth.task} metrics for dataset "
                               f"'{self.dataset.name}'", "no_truth")
        rows = np.arange(len(self.joined.y_true))
        extra: dict[str, Any] = {}
        if where is not None:
            column, wanted = where
            if column not in self.table.slices:
                raise NotEvaluable(f"dataset '{self.dataset.name}' reads no slice column '{column}' (truth.slices: "
                                   f"{', '.join(self.table.slices) or 'none'})", "no_truth")
            values = self.table.slices[column]
            rows = np.flatnonzero(np.fromiter((values[r] == wanted for r in self.joined.truth_rows.tolist()),
                                              dtype=bool, count=len(rows)))
            extra = {"slice": {column: wanted}}
            if not len(rows):
                raise NotEvaluable(f"no joined row has {column} = {wanted!r}", "missing")
        y_true = _at(self.joined.y_true, rows) if where else self.joined.y_true
        y_pred = _at(self.joined.y_pred, rows) if where else self.joined.y_pred
        try:
            value, library = self._compute(name, task, y_true, y_pred, rows)
        except metrics.NotInstalled as exc:
            raise NotEvaluable(f"not available: {exc}", "no_truth") from None
        except ValueError as exc:
            raise NotEvaluable(f"metric '{name}': {exc}", "invalid") from None
        return value, {**self.base, "function": metrics.describe(name), "library": library, "rows": len(y_true),
                       **extra}

    def _compute(self, name: str, task: str, y_true: Sequence[Any], y_pred: Sequence[Any],
                 rows: Any) -> tuple[float, str]:
        import numpy as np

        at = metrics.AT_K_NAME.match(name)
        if at and at.group(1) == "top_k_accuracy":
            scores, classes = self.outputs.scores, self.outputs.classes
            if scores is None or classes is None:
                raise ValueError("the outputs give no scores and classes (outputs.scores, outputs.classes)")
            where = np.asarray(self.kept)[self.joined.pred_rows[rows]]
            chosen = np.asarray(scores, dtype=np.float64)[where]
            return metrics.top_k_accuracy(y_true, chosen, [label_text(c) or "" for c in classes],
                                          int(at.group(2))), f"scikit-learn {metrics.sklearn_version()}"
        # below, only ranking and generation values reach a list-taking metric: lists (only class labels are Labels)
        texts, given = cast("list[Any]", y_true), cast("list[Any]", y_pred)
        if at:
            return metrics.recall_at(texts, given, int(at.group(2))), "pytest_hetero.matrix.gate_metrics"
        if task in ("classification", "regression", "ranking") or name in ("exact_match", "contains"):
            computed = _eager(task, y_true, y_pred)
            if name not in computed.values:
                raise ValueError(f"not computed for these rows (classes: {', '.join(computed.classes[:20])})")
            return computed.values[name], computed.library
        if name == "regex_match":
            return metrics.regex_match(texts, given), "google-re2"
        if name == "json_valid":
            truth = self.dataset.truth
            assert truth is not None
            if truth.json_schema is None:
                raise ValueError(f"dataset '{self.dataset.name}' declares no truth.json_schema to validate against")
            return metrics.json_valid(given, truth.json_schema), "jsonschema (draft 2020-12)"
        return metrics.rouge_l(texts, given), f"rouge-score {metrics.rouge_version()}"


def _at(values: Sequence[Any], rows: Any) -> Sequence[Any]:
    """The entries of ``values`` at ``rows`` (an int array): :class:`Labels` stay codes."""
    return values.take(rows) if isinstance(values, Labels) else [values[i] for i in rows.tolist()]


def _counts(joined: Joined) -> str:
    return ", ".join(f"{k} {v}" for k, v in joined.counts().items())


def join_problem(joined: Joined, rows: int) -> str:
    """One sentence on a join that is not complete, e.g. ``297 of 300 truth rows joined a prediction: 2
    missing, 1 duplicate, 4 extra``, with up to 5 example ids of each kind when kept."""
    parts = [f"{n} {name}" for name, n in (("missing", joined.missing), ("duplicate", joined.duplicate),
                                          ("extra", joined.extra)) if n]
    text = f"{len(joined.y_true)} of {rows} truth rows joined a prediction: {', '.join(parts)}"
    examples = "; ".join(f"{k} e.g. {', '.join(v)}" for k, v in joined.examples.items())
    return text + (f" ({examples})" if examples else "")


def _measured(gate: GateValues, record: MetricsRecord, wall_s: float | None, count: int | None) -> None:
    if wall_s is None:
        why = "the gate has no wall time of this run (a served model, or the run was in another process)"
        gate.unavailable.update({name: why for name in metrics.MEASURED})
        record["measured"] = {"unavailable": why}
        return
    provenance = {"source": "measured", "by": "the gate: wall time of the model run as the engine timed it"}
    values = {"wall_s": wall_s}
    if count:
        values.update(per_sample_ms=wall_s * 1000.0 / count, throughput_sps=count / wall_s if wall_s else 0.0)
    else:
        why = "the outputs hold no predictions to count samples by"
        gate.unavailable.update(per_sample_ms=why, throughput_sps=why)
    for name, value in values.items():
        gate.values[name] = (value, {**provenance, **({"samples": count} if name != "wall_s" else {})})
    measured: Measured = {"wall_s": round(values["wall_s"], 6)}
    if "per_sample_ms" in values:
        measured["per_sample_ms"] = round(values["per_sample_ms"], 6)
        measured["throughput_sps"] = round(values["throughput_sps"], 6)
    measured["samples"], measured["by"] = count, provenance["by"]
    record["measured"] = measured


def _self_reported(outputs: dict[str, Any]) -> SelfReported:
    """The numbers the model wrote about itself: ``outputs.metrics``' numeric entries (read as the rules read them,
    :class:`~pytest_hetero.matrix.acceptance.ModelOutputs`: none when absent or not an object), labelled."""
    values = {k: v for k, v in ModelOutputs.parse(outputs).metrics.items() if _is_number(v)}
    return {"values": values, "note": SELF_REPORTED_NOTE} if values else {}


def _kept(values: list[Any], kept: Sequence[int]) -> list[Any]:
    """The entries of ``values`` at the ``kept`` positions (``values`` itself when all are kept)."""
    return values if isinstance(kept, range) else [values[i] for i in kept]


def _predictions(values: list[Any], kept: Sequence[int], task: str) -> Sequence[Any]:
    """The ``kept`` predictions as the task compares them (class labels as text, regression values as floats),
    each distinct label worked out once. Raises :class:`TruthUnusable` naming the first that is neither."""
    chosen = _kept(values, kept)
    if task == "ranking":
        ranked = [[id_text(i) for i in v] if isinstance(v, list) else None for v in chosen]
        for at, v in zip(kept, ranked, strict=True):
            if v is None or None in v:
                raise TruthUnusable(f"outputs.predictions[{at}] is {values[at]!r}: not a ranked list of ids (integers "
                                    "or strings)", "outputs_invalid")
        return ranked
    if task == "generation":
        for at in kept:
            if not isinstance(values[at], str):
                raise TruthUnusable(f"outputs.predictions[{at}] is {values[at]!r}: not text (a generation "
                                    "prediction)", "outputs_invalid")
        return list(chosen)
    if task == "classification":
        coded = integer_labels(chosen)  # integer classes: codes, not a million strings
        if coded is not None:
            return coded
        found = label_texts(chosen)
        if found is not None:
            return found
    elif set(map(type, chosen)) <= {int, float} and all(map(math.isfinite, chosen)):
        return list(map(float, chosen))
    return [_prediction(values[i], task, i) for i in kept]


def _prediction(value: Any, task: str, i: int) -> Any:
    if task == "classification":
        label = label_text(value)
        if label is None:
            raise TruthUnusable(f"outputs.predictions[{i}] is {value!r}: not a class label (an integer or a "
                                "string)", "outputs_invalid")
        return label
    if not _is_number(value):
        raise TruthUnusable(f"outputs.predictions[{i}] is {value!r}: not a finite number (a regression "
                            "prediction)", "outputs_invalid")
    return float(value)
