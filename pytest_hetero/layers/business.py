"""Business-sample layer: the model run's outputs meet the dataset's acceptance rules.

Backend-independent: reads the outputs artifact of the model item this item depends on.
"""

from __future__ import annotations

import json

from pytest_hetero.errors import CaseError
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerFailed, outputs_of
from pytest_hetero.matrix.acceptance import evaluate, load_rules


def check(ctx: LayerContext) -> None:
    """Evaluate every rule; record expected/observed/verdict each; LayerFailed naming the failed rules."""
    dataset = ctx.dataset
    if dataset.acceptance is None:
        raise LayerFailed(f"dataset {dataset.name} has no acceptance rules; nothing to prove",
                          "no_rules", "business")
    try:
        rules = load_rules(dataset.acceptance)
    except CaseError as exc:
        raise LayerFailed(exc.render(), "bad_rules", "business") from None
    depends = ctx.planned.depends_on or ()
    from pytest_hetero.layers.execution import repeats

    count = repeats(ctx) if ctx.model.serving is None else 1
    failures: list[str] = []
    owners: set[str] = set()
    for run in range(1, count + 1) if count > 1 else (0,):
        try:
            # bytes: every encoding the model layer accepted as JSON (UTF-8, UTF-16, UTF-32)
            outputs = json.loads(outputs_of(ctx, depends, run))
        except (OSError, ValueError) as exc:
            raise LayerBroken(f"outputs of {'::'.join(depends)} unreadable: {exc}", "outputs_unavailable") from None
        results = evaluate(rules, outputs if isinstance(outputs, dict) else {})
        if dataset.sensitive:  # verdicts and aggregates only: no per-sample values
            for r in results:
                if r["kind"] == "golden":
                    r["detail"] = "[withheld: sensitive dataset]" if r["detail"] else ""
        ctx.record("business.rules", file=str(dataset.acceptance), outputs_of="::".join(depends),
                   sensitive=dataset.sensitive, results=results, run=run or None)
        failed = [r for r in results if r["verdict"] != "pass"]
        if failed:
            text = "; ".join(f"{r['name']}: expected {r['expected']}, observed {r['observed']}"
                             + (f" ({r['detail']})" if r["detail"] else "") for r in failed)
            prefix = f"sample {run} of {count}: " if run else ""
            failures.append(f"{prefix}{len(failed)} of {len(results)} acceptance rules failed: {text}")
            # a served model's wrong answers are the model's (algorithm); missed bounds stay business's
            answers_wrong = all(r["kind"] in ("metric", "golden") for r in failed)
            owners.add("algorithm" if ctx.model.serving is not None and answers_wrong else "business")
    if failures:
        raise LayerFailed("; ".join(failures), "acceptance_failed", "business" if "business" in owners
                          else owners.pop())
