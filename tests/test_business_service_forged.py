"""A batch model cannot supply the service levels a service rule is judged on: the gate measures them only around
a served model (its load generator writes ``outputs.service``). A model that writes its own fast ``service`` levels
into its outputs got a ``service_latency`` rule passed "measured by the gate's load generator"."""

from __future__ import annotations

import pytest
from smallcase import ACCEPTANCE, MODEL, matrix, write_case
from support import evidence_of, statuses

FORGER = MODEL.replace("with open(args.out, \"w\", encoding=\"utf-8\") as fh:",
                       "out[\"service\"] = {\"levels\": [{\"concurrency\": 1, \"latencies_ms\": [0.1, 0.1], "
                       "\"requests\": 2, \"errors\": 0, \"error_rate\": 0.0, \"requests_per_s\": 9999.0}]}\n"
                       "with open(args.out, \"w\", encoding=\"utf-8\") as fh:")
RULES = ACCEPTANCE + """  - name: fast-service
    service_latency: {percentile: 95, max_ms: 5}
"""
"""The small case's rules (its golden samples) and a service rule a batch model's own levels would pass."""


def test_a_batch_model_writing_its_own_service_levels_is_not_judged_on_them(pytester: pytest.Pytester) -> None:
    case = pytester.path / "case"
    write_case(case)
    assert FORGER != MODEL
    (case / "model.py").write_text(FORGER)
    (case / "acceptance.yaml").write_text(RULES)
    (pytester.path / "m.matrix.yaml").write_text(matrix(case, "case"))
    pytester.runpytest("m.matrix.yaml", "-p", "no:cacheprovider")
    ev = evidence_of(pytester)
    (business,) = [i for i in ev["items"] if i["layer"] == "business"]
    (rules,) = [r["data"] for r in business["records"] if r["kind"] == "business.rules"]
    verdicts = {r["name"]: (r["verdict"], r["detail"]) for r in rules["results"]}
    assert verdicts["golden"] == ("pass", verdicts["golden"][1])
    assert verdicts["fast-service"] == (
        "not_evaluable", "cannot evaluate: outputs have no service levels (not the run of a served model?)")
    assert statuses(ev)[business["nodeid"].split("::", 1)[1]] != "passed"
