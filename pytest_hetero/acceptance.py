"""Business acceptance rules (``kind: AcceptanceRules``, apiVersion ``pytest-hetero/v1``) and their evaluation.

Rules are declarative YAML, evaluated on a model run's outputs JSON object:

- ``metric``: ``name`` (from ``outputs.metrics``; ``accuracy`` is computed from
  ``predictions``/``labels`` when absent) or ``mean(f)``/``min(f)``/``max(f)``/``count(f)``
  over a numeric list field; ``op`` one of ``>= <= > < == !=``; ``value``; optional absolute
  ``tolerance`` for ``==``/``!=``.
- ``golden``: ``samples: [{index, expected, tolerance?}]``; the sample whose ``key`` field
  (default ``indices``) equals ``index`` must have ``field`` (default ``predictions``) equal
  to ``expected`` (exact, or within ``tolerance`` for numbers).
- ``latency``: ``field`` (default ``latency_ms``) at ``percentile`` (nearest-rank, 0–100)
  must be ≤ ``max_ms``.

Each rule yields ``{"name", "kind", "expected", "observed", "verdict": "pass"|"fail", "detail"}``.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_hetero.errors import CaseError, Location
from pytest_hetero.matrix.yamlnodes import read_yaml

OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
    "==": operator.eq, "!=": operator.ne,
}
_AGG = re.compile(r"^(mean|min|max|count)\(([A-Za-z_][A-Za-z0-9_]*)\)$")


def load_rules(path: Path) -> list[dict[str, Any]]:
    """Read and check an AcceptanceRules file; return its rules (dicts, each with ``line``).

    Raises CaseError naming file, line and field for bad YAML, wrong kind, a rule with no or
    several kinds, an unknown op, or a missing value.
    """
    data, pos = read_yaml(path, CaseError)
    where = str(path)
    if not isinstance(data, dict) or data.get("kind") != "AcceptanceRules":
        raise CaseError("not an AcceptanceRules document", Location(where, 1, 1, "kind"),
                        "start with apiVersion: pytest-hetero/v1 and kind: AcceptanceRules")
    rules = data.get("rules")
    if not isinstance(rules, list) or not rules:
        raise CaseError("no rules", Location(where, *pos.of(("rules",)), "rules"), "list at least one rule")
    out = []
    for i, rule in enumerate(rules):
        line, col = pos.of(("rules", i))
        loc = Location(where, line, col, f"rules[{i}]")
        if not isinstance(rule, dict) or not isinstance(rule.get("name"), str):
            raise CaseError("each rule needs a name", loc, "add name: <short-id>")
        kinds = [k for k in ("metric", "golden", "latency") if k in rule]
        if len(kinds) != 1:
            raise CaseError(f"rule '{rule['name']}' must have exactly one of metric, golden, latency",
                            loc, "split it into separate rules")
        if kinds[0] == "metric":
            if rule.get("op") not in OPS:
                raise CaseError(f"rule '{rule['name']}': op {rule.get('op')!r} unknown", loc,
                                f"use one of {' '.join(OPS)}")
            if not isinstance(rule.get("value"), (int, float)) or isinstance(rule.get("value"), bool):
                raise CaseError(f"rule '{rule['name']}': value must be a number", loc, "e.g. value: 0.95")
        if kinds[0] == "latency":
            lat = rule["latency"]
            if not isinstance(lat, dict) or not isinstance(lat.get("max_ms"), (int, float)) \
                    or not 0 <= float(lat.get("percentile", -1)) <= 100:
                raise CaseError(f"rule '{rule['name']}': latency needs percentile (0-100) and max_ms",
                                loc, "e.g. latency: {percentile: 95, max_ms: 20}")
        if kinds[0] == "golden":
            gold = rule["golden"]
            if not isinstance(gold, dict) or not isinstance(gold.get("samples"), list) or not all(
                    isinstance(s, dict) and "index" in s and "expected" in s for s in gold["samples"]):
                raise CaseError(f"rule '{rule['name']}': golden needs samples: [{{index, expected}}]",
                                loc, "e.g. samples: [{index: 0, expected: 7}]")
        out.append({**rule, "kind": kinds[0], "line": line})
    return out


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile of ``values`` (pct 0–100). Raises ValueError on an empty list."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return float(ordered[rank - 1])


def _numbers(outputs: dict[str, Any], name: str) -> list[float]:
    values = outputs.get(name)
    if not isinstance(values, list) or not all(isinstance(v, (int, float)) for v in values):
        raise KeyError(f"outputs field '{name}' is missing or not a list of numbers")
    return [float(v) for v in values]


def metric_value(outputs: dict[str, Any], expr: str) -> float:
    """Value of a metric expression on ``outputs``; KeyError when the data is missing."""
    agg = _AGG.match(expr)
    if agg:
        fn, name = agg.groups()
        values = _numbers(outputs, name)
        if fn == "count":
            return float(len(values))
        if not values:
            raise KeyError(f"outputs field '{name}' is empty")
        return {"mean": sum(values) / len(values), "min": min(values), "max": max(values)}[fn]
    metrics = outputs.get("metrics") or {}
    if expr in metrics:
        return float(metrics[expr])
    if expr == "accuracy" and isinstance(outputs.get("predictions"), list):
        preds, labels = outputs["predictions"], outputs.get("labels") or []
        if len(preds) != len(labels) or not preds:
            raise KeyError("predictions and labels differ in length or are empty")
        return sum(p == t for p, t in zip(preds, labels)) / len(preds)
    raise KeyError(f"metric '{expr}' not in outputs")


def evaluate(rules: list[dict[str, Any]], outputs: dict[str, Any]) -> list[dict[str, Any]]:
    """Evaluate every rule on ``outputs``; a rule whose data is missing fails with the reason."""
    results = []
    for rule in rules:
        try:
            results.append({"name": rule["name"], "kind": rule["kind"], **_evaluate(rule, outputs)})
        except (KeyError, ValueError, TypeError) as exc:
            results.append({"name": rule["name"], "kind": rule["kind"], "expected": None,
                            "observed": None, "verdict": "fail", "detail": f"cannot evaluate: {exc}"})
    return results


def _evaluate(rule: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
    if rule["kind"] == "metric":
        observed = metric_value(outputs, rule["metric"])
        op, value, tol = rule["op"], float(rule["value"]), float(rule.get("tolerance", 0))
        if op in ("==", "!=") and tol:
            ok = abs(observed - value) <= tol
            ok = ok if op == "==" else not ok
            expected = f"{rule['metric']} {op} {value} ± {tol}"
        else:
            ok = OPS[op](observed, value)
            expected = f"{rule['metric']} {op} {value}"
        return {"expected": expected, "observed": round(observed, 6), "verdict": "pass" if ok else "fail",
                "detail": ""}
    if rule["kind"] == "latency":
        lat = rule["latency"]
        observed = percentile(_numbers(outputs, lat.get("field", "latency_ms")), float(lat["percentile"]))
        ok = observed <= float(lat["max_ms"])
        return {"expected": f"p{lat['percentile']} ≤ {lat['max_ms']} ms", "observed": round(observed, 4),
                "verdict": "pass" if ok else "fail", "detail": ""}
    gold = rule["golden"]
    field, key = gold.get("field", "predictions"), gold.get("key", "indices")
    values, keys = outputs.get(field), outputs.get(key)
    if not isinstance(values, list):
        raise KeyError(f"outputs field '{field}' missing")
    position = {k: i for i, k in enumerate(keys)} if isinstance(keys, list) else None
    mismatches = []
    for sample in gold["samples"]:
        idx = position.get(sample["index"]) if position is not None else sample["index"]
        got = values[idx] if isinstance(idx, int) and 0 <= idx < len(values) else None
        tol = sample.get("tolerance")
        ok = got is not None and (abs(float(got) - float(sample["expected"])) <= float(tol)
                                  if tol is not None else got == sample["expected"])
        if not ok:
            mismatches.append({"index": sample["index"], "expected": sample["expected"], "observed": got})
    n = len(gold["samples"])
    return {"expected": f"{n} golden samples match", "observed": f"{n - len(mismatches)}/{n} match",
            "verdict": "fail" if mismatches else "pass",
            "detail": "; ".join(f"sample {m['index']}: expected {m['expected']!r}, got {m['observed']!r}"
                                for m in mismatches)}
