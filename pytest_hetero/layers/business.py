"""Business-sample layer: the model run's outputs meet the dataset's acceptance rules.

Backend-independent: reads the outputs artifact of the model item this item depends on, checks it against the
outputs contract (:mod:`pytest_hetero.truth.gate`), reads the dataset's truth itself (its sha256 checked at read
time), joins it with the predictions and computes the metrics the rules judge (``business.metrics`` record: every
value with its provenance; the model's own numbers beside, labelled self-reported).

Categories besides those below: ``truth_changed`` (the truth file's sha256 is not the matrix's), ``truth_invalid``
(a column absent, a value unusable, an id repeated), ``truth_unavailable`` (unreadable, too large, Parquet without
pyarrow): all ``error``, owned by business (the dataset is theirs); ``predictions_unmatched`` (truth rows without
exactly one prediction, or predictions for ids the truth lacks: ``failed``, algorithm) and ``no_truth`` (a rule
names a metric only truth gives, and the dataset declares none: ``error``, business).

A rule that fails is the business claim being false (``failed``, ``acceptance_failed``). A rule that
cannot be evaluated proves nothing either way, so it is never a business failure: the item ends
``error``, naming the metrics and fields the outputs had, and blamed on whoever can fix it: the
model's outputs (``outputs_invalid``: a value null, not numeric, lists of inconsistent length;
``outputs_missing_metric``: absent from the outputs; algorithm), or the rules file
(``rules_error``: the rule names something the outputs have under a close name; the rules' owner).
A malformed rules file (``bad_rules``) is the same: nothing was evaluated, status ``error``, owned by the
rules' owner. With several causes each keeps its own owner (``failure.causes``); owners are the failure
table's (:mod:`pytest_hetero.judge.failures`).
"""

from __future__ import annotations

import difflib
import hashlib
from pathlib import Path
from typing import Any, TypedDict

from pytest_hetero.errors import CaseError
from pytest_hetero.evidence.document import RuleResult
from pytest_hetero.evidence.records import INPUT_USED, UsedData
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerFailed, outputs_of, wall_of
from pytest_hetero.layers.usage import add_run_time, run_time_of
from pytest_hetero.matrix.acceptance import NOT_EVALUABLE, AcceptanceRule, evaluate, load_rules
from pytest_hetero.truth.gate import Judged, OutputsInvalid, TruthUnusable, check_outputs, gate_values, join_problem


class Unevaluable(TypedDict):
    """A rule result that could not be evaluated (verdict ``not_evaluable``), with the ``prefix`` that names its
    sample (empty for a single run): the rule's ``name``, why (``detail``), the ``problem`` (``missing``,
    ``invalid``, ``no_truth``) and what the outputs offered (``available``: ``metrics`` and ``fields``), which
    :func:`pytest_hetero.matrix.acceptance.evaluate` writes for every such result."""

    name: str
    detail: str
    problem: str
    available: dict[str, list[str]]
    prefix: str


def _unevaluable(result: RuleResult, prefix: str) -> Unevaluable:
    """The :class:`Unevaluable` of a ``not_evaluable`` ``result`` of sample ``prefix``."""
    return Unevaluable(name=result["name"], detail=result["detail"], problem=result["problem"],
                       available=result["available"], prefix=prefix)


def check(ctx: LayerContext) -> None:
    """Evaluate every rule on every sample; record expected/observed/verdict each. Raises LayerFailed
    naming the failed rules, else LayerBroken naming the rules that could not be evaluated."""
    dataset = ctx.dataset
    if dataset.acceptance is None:
        raise LayerFailed(f"dataset {dataset.name} has no acceptance rules; nothing to prove",
                          "no_rules")
    rules = _rules(ctx, dataset.acceptance)
    depends = ctx.planned.depends_on or ()
    from pytest_hetero.layers.execution import repeats

    count = repeats(ctx) if ctx.model.serving is None else 1
    failures: list[tuple[str, str]] = []
    unevaluable: list[Unevaluable] = []
    unmatched: list[str] = []
    for run in range(1, count + 1) if count > 1 else (0,):
        raw, outputs = _outputs(ctx, depends, run)
        prefix = f"sample {run} of {count}: " if run else ""
        judged = _judge_values(ctx, outputs, hashlib.sha256(raw).hexdigest(), wall_of(ctx, depends, run), prefix)
        add_run_time(judged.values, run_time_of(ctx, depends, run))  # memory_peak_mib, cpu_s: model.run_time
        ctx.record("business.metrics", run=run or None, **judged.record)
        # service levels are the gate's own measurement around a served model (its load generator writes
        # outputs.service); a batch model's outputs are its own, so a "service" it writes is never judged on
        read = outputs if ctx.model.serving is not None else {k: v for k, v in outputs.items() if k != "service"}
        results = evaluate(rules, read, judged.values)
        if dataset.sensitive:  # verdicts and aggregates only: no per-sample values
            for r in results:
                if r["kind"] == "golden":
                    r["detail"] = "[withheld: sensitive dataset]" if r["detail"] else ""
        ctx.record("business.rules", file=str(dataset.acceptance), outputs_of="::".join(depends),
                   sensitive=dataset.sensitive, results=results, run=run or None)
        unevaluable += [_unevaluable(r, prefix) for r in results if r["verdict"] == NOT_EVALUABLE]
        failed = [r for r in results if r["verdict"] == "fail"]
        if failed:
            text = _failed_text(failed)
            # a served model's wrong answers are the model's; missed bounds stay business's
            answers_wrong = all(r["kind"] in ("metric", "golden") for r in failed)
            failures.append(("served_answers_wrong" if ctx.model.serving is not None and answers_wrong
                             else "acceptance_failed",
                             f"{prefix}{len(failed)} of {len(results)} acceptance rules failed: {text}"))
        if judged.joined is not None and not judged.joined.complete:
            unmatched.append(prefix + join_problem(judged.joined, judged.record["truth"]["rows"]))
    if unmatched:  # a claim over the dataset needs a prediction for each of its rows, and nothing else
        more = f"; {'; '.join(m for _, m in failures)}" if failures else ""
        raise LayerFailed("predictions do not match the dataset's truth one to one: " + "; ".join(unmatched) + more,
                          "predictions_unmatched")
    if failures:
        more = f"; {len(unevaluable)} rule(s) could not be evaluated" if unevaluable else ""
        categories = [c for c, _ in failures]
        first = "acceptance_failed" if "acceptance_failed" in categories else categories[0]
        broken = not_evaluable(rules, unevaluable) if unevaluable else None
        causes = tuple(failures) + ((broken.causes or ((broken.category, broken.message),)) if broken else ())
        raise LayerFailed("; ".join(m for _, m in failures) + more, first,
                          causes=causes if len({c for c, _ in causes}) > 1 else ())
    if unevaluable:
        raise not_evaluable(rules, unevaluable)


def _failed_text(failed: list[RuleResult]) -> str:
    """Each failed rule: expected, observed with its unit, detail, and the observed value's provenance."""
    return "; ".join(f"{r['name']}: expected {r['expected']}, observed {r['observed']}"
                     + (f" {r['unit']}" if r.get("unit") else "")
                     + (f" ({r['detail']})" if r["detail"] else "")
                     + (f" [{r['provenance']['source']}]" if r.get("provenance", {}).get("source") in
                        ("computed", "measured", "measured_in_workload")
                        else "")  # a self-reported value's detail says so
                     for r in failed)


def _outputs(ctx: LayerContext, depends: tuple[str, ...], run: int) -> tuple[bytes, dict[str, Any]]:
    """The bytes and the JSON object of a model run's outputs. Raises LayerBroken when unreadable or not an
    object."""
    from pytest_hetero.layers.execution import parse_outputs

    try:
        raw = outputs_of(ctx, depends, run)
        # bytes: every encoding the model layer accepted as JSON (UTF-8, UTF-16, UTF-32), within its bounds
        outputs = parse_outputs(raw)
    except (OSError, ValueError) as exc:
        raise LayerBroken(f"outputs of {'::'.join(depends)} unreadable: {exc}", "outputs_unavailable") from None
    if not isinstance(outputs, dict):
        raise LayerBroken(f"outputs of {'::'.join(depends)} are a JSON {type(outputs).__name__}, not an "
                          "object: no rule can be evaluated", "outputs_invalid")
    return raw, outputs


def _judge_values(ctx: LayerContext, outputs: dict[str, Any], digest: str, wall_s: float | None,
                  prefix: str) -> Judged:
    """The outputs checked against the contract, then the gate's own values for them (see
    :func:`pytest_hetero.truth.gate.gate_values`). Raises LayerBroken (``outputs_invalid``, algorithm; a truth
    category, business)."""
    try:
        kinds = check_outputs(outputs, ctx.dataset)
        return gate_values(ctx.dataset, outputs, digest, wall_s, ctx.dataset.sensitive, kinds)
    except OutputsInvalid as exc:
        raise LayerBroken(f"{prefix}outputs break the outputs contract (pytest_hetero/truth/outputs.schema.json): "
                          + "; ".join(exc.problems), "outputs_invalid") from None
    except TruthUnusable as exc:
        raise LayerBroken(prefix + exc.message, exc.category) from None


def _rules(ctx: LayerContext, path: Path) -> list[AcceptanceRule]:
    """The acceptance rules of ``path`` as the run pinned them when it loaded the matrix (``Matrix.pinned``;
    the file itself only when it did not read then), recorded with the digest of the bytes judged by (the
    bundle keeps a copy of the same bytes). Raises LayerFailed (``bad_rules``) for a bad file."""
    raw = ctx.matrix.pinned.get(path)
    try:
        rules = load_rules(path, raw)
    except CaseError as exc:
        raise LayerFailed(exc.render(), "bad_rules") from None
    if raw is None:
        raw = ctx.matrix.pinned.get(path)
    used = hashlib.sha256(raw).hexdigest() if raw is not None else _digest_now(path)
    ctx.write(INPUT_USED, UsedData(input="acceptance", path=str(path), sha256=used))
    return rules


def _digest_now(path: Path) -> str | None:
    """sha256 of the acceptance file as it reads now (a matrix loaded without its rules pinned)."""
    from pytest_hetero.matrix.yamlnodes import MAX_BYTES
    from pytest_hetero.safeio import Unreadable, read_local

    try:
        return hashlib.sha256(read_local(path, MAX_BYTES)).hexdigest()
    except Unreadable:
        return None


def not_evaluable(rules: list[AcceptanceRule], results: list[Unevaluable]) -> LayerBroken:
    """The outcome for rule ``results`` (each with ``prefix``) that could not be evaluated: see the
    module docstring for the categories; the message names each rule, why, and what the outputs
    offered. Rules of different causes (a typo in the rules beside a metric the outputs lack) keep
    each cause in ``causes``, so each goes to its own owner."""
    first = results[0]
    offered = first["available"]
    names = offered["metrics"] + offered["fields"]
    close = {}
    for result in results:
        rule = next((r for r in rules if r["name"] == result["name"]), None)
        wanted = _wanted(rule) if rule is not None else ""
        match = difflib.get_close_matches(wanted, names, n=1, cutoff=0.75) if wanted else []
        if result["problem"] == "missing" and match:
            close[result["name"]] = match[0]
    text = "; ".join(f"{r['prefix']}rule {r['name']}: {r['detail'].removeprefix('cannot evaluate: ')}"
                     + (f" (did you mean '{close[r['name']]}'?)" if r["name"] in close else "") for r in results)
    have = (f"available metrics: {', '.join(offered['metrics']) or 'none'}; numeric list fields: "
            f"{', '.join(offered['fields']) or 'none'}")
    message = f"{len(results)} acceptance rule(s) could not be evaluated: {text} ({have})"
    per_rule = [(_cause(r, close), f"{r['prefix']}rule {r['name']}: {r['detail'].removeprefix('cannot evaluate: ')}"
                 + (f" (did you mean '{close[r['name']]}'?)" if r["name"] in close else "")) for r in results]
    grouped: dict[str, list[str]] = {}
    for category, text_of in per_rule:
        grouped.setdefault(category, []).append(text_of)
    decisive = next(name for name in ("rules_error", "no_truth", "outputs_missing_metric", "outputs_invalid")
                      if name in grouped)
    causes = tuple((name, "; ".join(texts)) for name, texts in grouped.items())
    return LayerBroken(message, decisive, causes=causes if len(causes) > 1 else ())


def _cause(result: Unevaluable, close: dict[str, str]) -> str:
    """The category of one unevaluable rule: a typo in the rules (a close name exists), a gate metric the
    dataset's truth would give and none is declared, a metric the outputs lack, or an outputs value that cannot
    be used."""
    if result["name"] in close:
        return "rules_error"
    if result["problem"] == "no_truth":
        return "no_truth"
    return "outputs_missing_metric" if result["problem"] == "missing" else "outputs_invalid"


def _wanted(rule: AcceptanceRule) -> str:
    """The metric or field name a rule reads (``mean(x)`` → ``x``; empty for service rules)."""
    kind = rule["kind"]
    if kind == "metric":
        expr = str(rule["metric"])
        return expr[expr.find("(") + 1:-1] if expr.endswith(")") and "(" in expr else expr
    if kind == "latency":
        return rule["latency"]["field"]  # load_rules filled the default (latency_ms)
    if kind == "golden":
        return rule["golden"]["field"]  # load_rules filled the default (predictions)
    return ""
