"""Business-sample layer: the model run's outputs meet the dataset's acceptance rules.

Backend-independent: reads the outputs artifact of the model item this item depends on.

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
from typing import Any

from pytest_hetero.errors import CaseError
from pytest_hetero.evidence.inputs import USED
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerFailed, outputs_of
from pytest_hetero.matrix.acceptance import NOT_EVALUABLE, evaluate, load_rules


def check(ctx: LayerContext) -> None:
    """Evaluate every rule on every sample; record expected/observed/verdict each. Raises LayerFailed
    naming the failed rules, else LayerBroken naming the rules that could not be evaluated."""
    dataset = ctx.dataset
    if dataset.acceptance is None:
        raise LayerFailed(f"dataset {dataset.name} has no acceptance rules; nothing to prove",
                          "no_rules")
    rules = _rules(ctx, dataset.acceptance)
    depends = ctx.planned.depends_on or ()
    from pytest_hetero.layers.execution import parse_outputs, repeats

    count = repeats(ctx) if ctx.model.serving is None else 1
    failures: list[tuple[str, str]] = []
    unevaluable: list[dict[str, Any]] = []
    for run in range(1, count + 1) if count > 1 else (0,):
        try:
            # bytes: every encoding the model layer accepted as JSON (UTF-8, UTF-16, UTF-32)
            outputs = parse_outputs(outputs_of(ctx, depends, run))
        except (OSError, ValueError) as exc:
            raise LayerBroken(f"outputs of {'::'.join(depends)} unreadable: {exc}", "outputs_unavailable") from None
        if not isinstance(outputs, dict):
            raise LayerBroken(f"outputs of {'::'.join(depends)} are a JSON {type(outputs).__name__}, not an "
                              "object: no rule can be evaluated", "outputs_invalid")
        results = evaluate(rules, outputs)
        if dataset.sensitive:  # verdicts and aggregates only: no per-sample values
            for r in results:
                if r["kind"] == "golden":
                    r["detail"] = "[withheld: sensitive dataset]" if r["detail"] else ""
        ctx.record("business.rules", file=str(dataset.acceptance), outputs_of="::".join(depends),
                   sensitive=dataset.sensitive, results=results, run=run or None)
        prefix = f"sample {run} of {count}: " if run else ""
        unevaluable += [{**r, "prefix": prefix} for r in results if r["verdict"] == NOT_EVALUABLE]
        failed = [r for r in results if r["verdict"] == "fail"]
        if failed:
            text = "; ".join(f"{r['name']}: expected {r['expected']}, observed {r['observed']}"
                             + (f" {r['unit']}" if r.get("unit") else "")
                             + (f" ({r['detail']})" if r["detail"] else "") for r in failed)
            # a served model's wrong answers are the model's; missed bounds stay business's
            answers_wrong = all(r["kind"] in ("metric", "golden") for r in failed)
            failures.append(("served_answers_wrong" if ctx.model.serving is not None and answers_wrong
                             else "acceptance_failed",
                             f"{prefix}{len(failed)} of {len(results)} acceptance rules failed: {text}"))
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


def _rules(ctx: LayerContext, path: Path) -> list[dict[str, Any]]:
    """The acceptance rules of ``path``, recorded with the file's digest as used (the bundle's copy, taken
    at the finish, is checked against it). Raises LayerFailed (``bad_rules``) for a bad file."""
    try:
        used: str | None = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        used = None  # load_rules says why
    try:
        rules = load_rules(path)
    except CaseError as exc:
        raise LayerFailed(exc.render(), "bad_rules") from None
    ctx.record(USED, input="acceptance", path=str(path), sha256=used)
    return rules


def not_evaluable(rules: list[dict[str, Any]], results: list[dict[str, Any]]) -> LayerBroken:
    """The outcome for rule ``results`` (each with ``prefix``) that could not be evaluated: see the
    module docstring for the categories; the message names each rule, why, and what the outputs
    offered. Rules of different causes (a typo in the rules beside a metric the outputs lack) keep
    each cause in ``causes``, so each goes to its own owner."""
    first = results[0]
    offered = first.get("available") or {"metrics": [], "fields": []}
    names = offered["metrics"] + offered["fields"]
    close = {}
    for result in results:
        rule = next((r for r in rules if r["name"] == result["name"]), {})
        wanted = _wanted(rule)
        match = difflib.get_close_matches(wanted, names, n=1, cutoff=0.75) if wanted else []
        if result.get("problem") == "missing" and match:
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
    decisive = next(name for name in ("rules_error", "outputs_missing_metric", "outputs_invalid")
                      if name in grouped)
    causes = tuple((name, "; ".join(texts)) for name, texts in grouped.items())
    return LayerBroken(message, decisive, causes=causes if len(causes) > 1 else ())


def _cause(result: dict[str, Any], close: dict[str, str]) -> str:
    """The category of one unevaluable rule: a typo in the rules (a close name exists), a metric the
    outputs lack, or an outputs value that cannot be used."""
    if result["name"] in close:
        return "rules_error"
    return "outputs_missing_metric" if result.get("problem") == "missing" else "outputs_invalid"


def _wanted(rule: dict[str, Any]) -> str:
    """The metric or field name a rule reads (``mean(x)`` → ``x``; empty for service rules)."""
    kind = rule.get("kind")
    if kind == "metric":
        expr = str(rule["metric"])
        return expr[expr.find("(") + 1:-1] if expr.endswith(")") and "(" in expr else expr
    if kind == "latency":
        return str(rule["latency"].get("field", "latency_ms"))
    if kind == "golden":
        return str(rule["golden"].get("field", "predictions"))
    return ""
