"""Business acceptance rules (``kind: AcceptanceRules``, apiVersion ``pytest-hetero/v1``) and their evaluation.

Rules are declarative YAML, evaluated on a model run's outputs JSON object and on the values the gate itself
computed or measured for that run (:class:`GateValues`; see docs/acceptance.md):

- ``metric``: a metric the gate computes from the dataset's truth (:mod:`pytest_hetero.matrix.gate_metrics`:
  ``accuracy``, ``f1_macro``, ``f1[3]``, ``mae``…) or measures around the run (``wall_s``, ``per_sample_ms``,
  ``throughput_sps``); ``op`` one of ``>= <= > < == !=``; ``value``; optional absolute ``tolerance`` for
  ``==``/``!=``. A value the model writes about itself (``outputs.metrics.<name>``, or ``mean(f)``/``min(f)``/
  ``max(f)``/``count(f)`` over an outputs list field) is judged only by a rule that says
  ``self_reported: true``, and its result says "self-reported, not verified".
- ``golden``: ``samples: [{index, expected, tolerance?}]``; the sample whose ``key`` field
  (default ``indices``) equals ``index`` must have ``field`` (default ``predictions``) equal
  to ``expected`` (exact, or within ``tolerance`` for numbers). The expectations are the rules file's own.
- ``latency``: ``field`` (default ``latency_ms``) at ``percentile`` (nearest-rank, 0–100)
  must be ≤ ``max_ms``: latencies the model timed itself, so the rule needs ``self_reported: true``.

Service rules, on an inference service's load levels (``outputs.service.levels``, written by
:mod:`pytest_hetero.layers.serving`: measured by the gate); each applies to the level of ``concurrency`` when
given, else to every level, and names the measured value of each level:

- ``service_latency``: ``percentile`` (0–100) of the level's successful request latencies
  (``latencies_ms``) must be ≤ ``max_ms``.
- ``error_rate``: the share of failed requests (0–1) must be ≤ ``max``.
- ``throughput``: ``min_rps`` (successful requests/s) and/or ``min_sps`` (samples/s) as floors.

Each rule yields ``{"name", "kind", "expected", "observed", "verdict": "pass"|"fail"|"not_evaluable",
"detail", "provenance"}`` and ``unit`` when the observed number has one (``ms`` for latency rules and metrics
over a ``*_ms`` field); ``provenance`` is ``{"source": "computed"|"measured"|"self_reported", …}`` (what
computed the value from which digests, what measured it, or which outputs field the model wrote). A metric or
latency rule adds ``bound`` (``{"op", "value", "tolerance", "unit"?}``: the threshold as data, for trends), a
golden rule ``failing`` (the indices of the samples that did not match); a rule that cannot be evaluated (a
gate metric without truth, a metric or field absent, null, not numeric, NaN or ±Infinity, lists of
inconsistent length, a golden index absent from or repeated in the outputs) is ``not_evaluable`` with
``problem`` (``missing``, ``invalid`` or ``no_truth``) and the metrics and fields ``available``. A golden rule
with no samples, a metric name the gate does not know (``did you mean``), a rule over a self-reported value
without ``self_reported: true`` and two rules of one name are rejected when the file is read.
"""

from __future__ import annotations

import difflib
import hashlib
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict, TypeGuard, cast

import msgspec

from pytest_hetero.declared import resolve
from pytest_hetero.errors import CaseError, Location, RulesInvalid
from pytest_hetero.matrix import gate_metrics
from pytest_hetero.matrix.truth_table import slice_text
from pytest_hetero.matrix.yamlnodes import MAX_BYTES, Positions, parse_yaml
from pytest_hetero.safeio import read_file

if TYPE_CHECKING:  # annotations only (postponed): no run-time dependency on typing_extensions on 3.10
    from typing import NotRequired

    from pytest_hetero.evidence.document import RuleBound, RuleResult, RuleVerdict

OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
    "==": operator.eq, "!=": operator.ne,
}
KINDS: tuple[str, ...] = ("metric", "golden", "latency", "service_latency", "error_rate", "throughput")
SERVICE_CHECKS: dict[str, tuple[tuple[str, ...], str]] = {
    "service_latency": (("percentile", "max_ms"), "e.g. service_latency: {percentile: 95, max_ms: 50, concurrency: 8}"),
    "error_rate": (("max",), "e.g. error_rate: {max: 0.01}"),
    "throughput": (("min_rps", "min_sps"), "e.g. throughput: {min_rps: 100, concurrency: 8}"),
}
"""Service rule kind → (its bound keys: all required, except throughput which needs one; hint)."""
_AGG = re.compile(r"^(mean|min|max|count)\(([A-Za-z_][A-Za-z0-9_]*)\)$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_AT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*@[0-9]+$")
"""The shape of a cut-off metric (``recall@5``); whether the gate knows it is checked next (``did you mean``)."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


RULE_KEYS: tuple[str, ...] = ("name", "description", *KINDS, "op", "value", "tolerance", "self_reported", "slice")
"""Keys a rule may have; any other is reported as unknown (with a ``did you mean`` hint)."""

Number = int | float
"""A bound as YAML writes it (an integer stays one: ``p95`` in an expectation, not ``p95.0``); never a bool."""
Percent = Annotated[int, msgspec.Meta(ge=0, le=100)] | Annotated[float, msgspec.Meta(ge=0, le=100)]
"""A percentile, 0–100 (NaN is not one)."""


class _LatencyBounds(msgspec.Struct, frozen=True, kw_only=True):
    """The bounds a latency rule's body must give (its other keys: :func:`_check_body_keys`)."""

    percentile: Percent
    max_ms: Number


class _GoldenSampleGiven(msgspec.Struct, frozen=True, kw_only=True):
    """A golden sample as it must be written: an ``index`` and the ``expected`` answer (any values; ``tolerance``
    is checked on its own, with its own message)."""

    index: object
    expected: object


class _GoldenGiven(msgspec.Struct, frozen=True, kw_only=True):
    """A golden rule's body as it must be written: its ``samples`` (its other keys: :func:`_check_body_keys`)."""

    samples: list[_GoldenSampleGiven]


class _ServiceLatencyGiven(msgspec.Struct, frozen=True, kw_only=True):
    """A service_latency rule's body as it must be written (a ``concurrency`` level, or None: every level)."""

    percentile: Percent
    max_ms: Number
    concurrency: int | None = None


class _ErrorRateGiven(msgspec.Struct, frozen=True, kw_only=True):
    """An error_rate rule's body as it must be written (a ``concurrency`` level, or None: every level)."""

    max: Number
    concurrency: int | None = None


class _ThroughputGiven(msgspec.Struct, frozen=True, kw_only=True):
    """A throughput rule's body as it must be written: ``min_rps`` and/or ``min_sps`` (UNSET when not given; at
    least one is), a ``concurrency`` level or None (every level)."""

    min_rps: Number | msgspec.UnsetType = msgspec.UNSET
    min_sps: Number | msgspec.UnsetType = msgspec.UNSET
    concurrency: int | None = None


_SERVICE_GIVEN: dict[str, type[_ServiceLatencyGiven] | type[_ErrorRateGiven] | type[_ThroughputGiven]] = {
    "service_latency": _ServiceLatencyGiven, "error_rate": _ErrorRateGiven, "throughput": _ThroughputGiven}
"""Each service rule kind's body as it must be written (:func:`_check_service_rule`)."""


class GoldenSample(TypedDict):
    """One expectation of a golden rule: the sample whose key is ``index`` answers ``expected`` (within
    ``tolerance`` for numbers; None, filled by :func:`load_rules` when absent: exactly)."""

    index: object
    expected: object
    tolerance: float | None


class GoldenBody(TypedDict):
    """A golden rule's body: ``samples``; ``field`` (default ``predictions``) and ``key`` (default ``indices``)
    name the outputs lists read (:func:`load_rules` fills the defaults)."""

    samples: list[GoldenSample]
    field: str
    key: str


class LatencyBody(TypedDict):
    """A latency rule's body: nearest-rank ``percentile`` (0–100) of ``field`` (default ``latency_ms``, filled by
    :func:`load_rules`) at most ``max_ms``."""

    percentile: float
    max_ms: float
    field: str


class ServiceLatencyBody(TypedDict):
    """A service_latency rule's body: nearest-rank ``percentile`` (0–100) of a level's successful request latencies
    at most ``max_ms``, at the ``concurrency`` level (None, filled by :func:`load_rules` when absent: every level)."""

    percentile: float
    max_ms: float
    concurrency: int | None


class ErrorRateBody(TypedDict):
    """An error_rate rule's body: the share of failed requests (0–1) at most ``max``, at the ``concurrency`` level
    (None, filled by :func:`load_rules` when absent: every level)."""

    max: float
    concurrency: int | None


class ThroughputBody(TypedDict):
    """A throughput rule's body: the floors ``min_rps`` (successful requests/s) and ``min_sps`` (samples/s), at least
    one given (the other None, filled by :func:`load_rules`: no floor), at the ``concurrency`` level (None when
    absent: every level)."""

    min_rps: float | None
    min_sps: float | None
    concurrency: int | None


class AcceptanceRule(TypedDict):
    """A checked rule of an AcceptanceRules file (:func:`load_rules`): its ``name``, its one ``kind`` (the key of
    :data:`KINDS` it has, whose body is that key's value), its ``line`` in the file, whether its value is
    ``self_reported`` (default false), its ``tolerance`` (default 0: none), its ``slice`` (default None: every
    row), and the keys of its kind."""

    name: str
    kind: str
    line: int
    self_reported: bool
    tolerance: float
    slice: dict[str, str | int | float] | None
    description: NotRequired[str]
    metric: NotRequired[str]
    op: NotRequired[str]
    value: NotRequired[float]
    golden: NotRequired[GoldenBody]
    latency: NotRequired[LatencyBody]
    service_latency: NotRequired[ServiceLatencyBody]
    error_rate: NotRequired[ErrorRateBody]
    throughput: NotRequired[ThroughputBody]


_PARSED: dict[Path, tuple[bytes, list[AcceptanceRule]]] = {}
"""Rules already parsed in this process: path → (sha256 of the bytes parsed, rules)."""


def load_rules(path: Path, raw: bytes | None = None) -> list[AcceptanceRule]:
    """Read and check an AcceptanceRules file; return its rules (dicts, each with ``line``).

    ``raw``: the file's bytes as the run pinned them when it loaded the matrix (``Matrix.pinned``); the
    rules are parsed from them and the file is not opened. Without it the file is read by the safe
    reader (:func:`pytest_hetero.safeio.read_file`). The same bytes are parsed once per process: later
    calls return copies of the same rules (a matrix of N models on one dataset evaluates N business items
    against one parse).

    Raises CaseError naming file, line and field for an unreadable file, bad YAML, a wrong kind or no
    rules (the first problem found). The rules themselves are all checked: a rule with no name, an unknown
    key (line and column of the key; ``did you mean`` hint), no or several kinds, an unknown op,
    a missing value, or a kind's bad bounds; several such problems raise :class:`RulesInvalid`
    (a CaseError) listing each, one alone raises that CaseError.
    """
    if raw is None:
        raw = read_file(path, "the acceptance rules", MAX_BYTES, CaseError)
    stamp = hashlib.sha256(raw).digest()
    known = _PARSED.get(path)
    if known is not None and known[0] == stamp:
        return [rule.copy() for rule in known[1]]
    rules = _parse_rules(path, raw)
    _PARSED[path] = (stamp, rules)
    return [rule.copy() for rule in rules]


def _parse_rules(path: Path, raw: bytes) -> list[AcceptanceRule]:
    data, pos = parse_yaml(raw, path, CaseError)
    where = str(path)
    if not isinstance(data, dict) or data.get("kind") != "AcceptanceRules":
        raise CaseError("not an AcceptanceRules document", Location(where, 1, 1, "kind"),
                        "start with apiVersion: pytest-hetero/v1 and kind: AcceptanceRules")
    rules = data.get("rules")
    if not isinstance(rules, list) or not rules:
        raise CaseError("no rules", Location(where, *pos.of(("rules",)), "rules"), "list at least one rule")
    out: list[AcceptanceRule] = []
    problems: list[CaseError] = []
    for i, rule in enumerate(rules):
        found = _rule_problems(rule, i, pos, where)
        if found:
            problems.extend(found)
            continue
        kind = next(k for k in KINDS if k in rule)
        line = pos.of(("rules", i))[0]
        first = next((r["line"] for r in out if r["name"] == rule["name"]), None)
        if first is not None:
            problems.append(CaseError(
                f"rule name '{rule['name']}' is used twice (first on line {first})",
                Location(where, *pos.of(("rules", i, "name")), f"rules[{i}].name"),
                "give each rule its own name: results, trends and diffs are keyed by it"))
            continue
        out.append(_with_defaults(cast(AcceptanceRule, {"self_reported": False, "tolerance": 0, "slice": None, **rule,
                                                        "kind": kind, "line": line})))
        # _rule_problems found none: the rule has the shape of its kind
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise RulesInvalid(problems)
    return out


def _with_defaults(rule: AcceptanceRule) -> AcceptanceRule:
    """``rule`` with its body's defaults filled: a golden rule's ``field`` (``predictions``) and ``key``
    (``indices``) and each sample's ``tolerance`` (None: exact), a latency rule's ``field`` (``latency_ms``), a
    service rule's ``concurrency`` (None: every level), a throughput rule's floor it does not give (None)."""
    if "golden" in rule:
        gold = rule["golden"]
        rule["golden"] = {"field": "predictions", "key": "indices", **gold,
                          "samples": [{"tolerance": None, **sample} for sample in gold["samples"]]}
    if "latency" in rule:
        rule["latency"] = {"field": "latency_ms", **rule["latency"]}
    if "service_latency" in rule:
        rule["service_latency"] = {"concurrency": None, **rule["service_latency"]}
    if "error_rate" in rule:
        rule["error_rate"] = {"concurrency": None, **rule["error_rate"]}
    if "throughput" in rule:
        rule["throughput"] = {"concurrency": None, "min_rps": None, "min_sps": None, **rule["throughput"]}
    return rule


def _rule_problems(rule: Any, i: int, pos: Positions, where: str) -> list[CaseError]:
    """Every problem of rule ``i`` (empty when it is valid)."""
    line, col = pos.of(("rules", i))
    loc = Location(where, line, col, f"rules[{i}]")
    problems = []
    unknown = [k for k in rule if k not in RULE_KEYS] if isinstance(rule, dict) else []
    for key in unknown:
        close = difflib.get_close_matches(key, RULE_KEYS, n=1)
        key_loc = Location(where, *pos.of(("rules", i, key), key=True), f"rules[{i}].{key}")
        problems.append(CaseError(
            f"unknown key '{key}'", key_loc,
            f"did you mean '{close[0]}'?" if close else f"allowed keys: {', '.join(RULE_KEYS)}"))
    name = rule.get("name") if isinstance(rule, dict) else None
    if not isinstance(rule, dict) or not isinstance(name, str):
        return [*problems, CaseError("each rule needs a name", loc, "add name: <short-id>")]
    fields: dict[str, object] = rule  # a YAML mapping's keys are checked against RULE_KEYS above
    kinds = [k for k in KINDS if k in fields]
    if len(kinds) != 1:
        if kinds or not unknown:  # no kind but a misspelt key: the unknown-key hint says it all
            problems.append(CaseError(
                f"rule '{name}' must have exactly one of metric, golden, latency", loc,
                "split it into separate rules (inference services also take service_latency, error_rate, "
                "throughput)"))
        return problems
    try:
        _check_rule(fields, name, kinds[0], loc)
    except CaseError as exc:
        problems.append(exc)
    return problems


def _check_metric_name(name: str, expr: str, self_reported: bool, loc: Location) -> None:
    """A rule's metric is one the gate computes or measures, or (with ``self_reported: true``) any name of the
    outputs. Raises CaseError with a ``did you mean`` hint, or saying how to mark a self-reported value."""
    if self_reported or gate_metrics.known(expr):
        return
    if _AGG.match(expr):
        raise CaseError(f"rule '{name}': metric {expr!r} is computed over a list the model wrote about itself",
                        loc, "mark the rule self_reported: true (it is then shown as 'self-reported, not verified'), "
                        "or judge a metric the gate computes (e.g. accuracy) or measures (e.g. per_sample_ms)")
    close = difflib.get_close_matches(expr, gate_metrics.names(), n=1, cutoff=0.6)
    raise CaseError(f"rule '{name}': unknown metric {expr!r}: the gate computes "
                    f"{', '.join(gate_metrics.names())}", loc,
                    f"did you mean '{close[0]}'?" if close else "a value only the model reports needs "
                    "self_reported: true, and is then shown as 'self-reported, not verified'")


def _check_common(rule: dict[str, object], self_reported: object, name: str, kind: str, loc: Location) -> None:
    """``self_reported`` (the rule's, None when absent) is a boolean on a metric or latency rule only."""
    if "self_reported" in rule and (not isinstance(self_reported, bool) or kind not in ("metric", "latency")):
        raise CaseError(f"rule '{name}': self_reported is true or false, on a metric or latency rule",
                        loc, "drop it, or write self_reported: true on a rule over a value the model reports")
    if kind == "latency" and self_reported is not True:
        raise CaseError(f"rule '{name}': a latency rule reads latencies the model timed itself", loc,
                        "mark it self_reported: true (shown as 'self-reported, not verified'), or use the gate's "
                        "measurement: metric: per_sample_ms (or wall_s, throughput_sps)")


def _check_slice(rule: dict[str, object], self_reported: object, name: str, loc: Location) -> None:
    """``slice`` is one ``column: value`` pair (value text or a number), on a metric the gate computes (not on a
    ``self_reported`` one: the rule's, None when absent)."""
    if "slice" not in rule:
        return
    found = rule["slice"]
    if not (isinstance(found, dict) and len(found) == 1 and all(
            isinstance(k, str) and isinstance(v, (str, int, float)) and not isinstance(v, bool)
            for k, v in found.items())):
        raise CaseError(f"rule '{name}': slice is one column: value pair ({found!r})", loc,
                        "e.g. slice: {region: eu} (the column listed in the dataset's truth.slices)")
    if self_reported or gate_metrics.task_of(str(rule["metric"])) is None:
        raise CaseError(f"rule '{name}': slice applies to a metric the gate computes from truth, not to "
                        f"{rule['metric']!r}", loc, "drop slice, or judge a computed metric such as accuracy")


def _check_rule(rule: dict[str, object], name: str, kind: str, loc: Location) -> None:
    """Raise :class:`CaseError` for the first problem of rule ``name`` of ``kind`` (its body, op, value, metric,
    slice, tolerance, then ``self_reported``)."""
    self_reported = rule.get("self_reported")  # the YAML as written: read once, checked last (_check_common)
    if kind in SERVICE_CHECKS:
        _check_service_rule(name, kind, rule[kind], loc)
    if kind == "metric":
        op, value = rule.get("op"), rule.get("value")
        if op not in OPS:
            raise CaseError(f"rule '{name}': op {op!r} unknown", loc,
                            f"use one of {' '.join(OPS)}")
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise CaseError(f"rule '{name}': value must be a number", loc, "e.g. value: 0.95")
        expr = rule["metric"]
        if not isinstance(expr, str) or not (_AGG.match(expr) or _NAME.match(expr)
                                             or gate_metrics.PER_CLASS_NAME.match(expr)
                                             or _AT.match(expr)):
            raise CaseError(f"rule '{name}': metric {expr!r} is neither a metric name nor "
                            "mean(field), min(field), max(field) or count(field)", loc,
                            "e.g. metric: accuracy (computed by the gate from the dataset's truth)")
        _check_metric_name(name, expr, bool(self_reported), loc)
        _check_slice(rule, self_reported, name, loc)
        if "tolerance" in rule and (op not in ("==", "!=") or not _number(rule["tolerance"])):
            raise CaseError(f"rule '{name}': tolerance applies to op == and != only, as a number "
                            f"(op {op}, tolerance {rule['tolerance']!r})", loc,
                            "drop tolerance, or use op: '==' with tolerance: 0.03")
        _check_finite_bound(name, value, "value", "e.g. value: 0.95", loc)
    if kind == "latency":
        try:
            bounds = msgspec.convert(rule["latency"], _LatencyBounds)
        except msgspec.ValidationError:
            raise CaseError(f"rule '{name}': latency needs percentile (0-100) and max_ms",
                            loc, "e.g. latency: {percentile: 95, max_ms: 20}") from None
        _check_finite_bound(name, bounds.max_ms, "latency max_ms", "e.g. latency: {percentile: 95, max_ms: 20}", loc)
    if kind == "golden":
        _check_golden(name, rule["golden"], loc)
    if kind in ("golden", "latency"):
        _check_body_keys(name, kind, rule[kind], loc)
    _check_common(rule, self_reported, name, kind, loc)


_BODY_KEYS: dict[str, tuple[str, ...]] = {"golden": ("samples", "field", "key"),
                                          "latency": ("percentile", "max_ms", "field")}
"""The keys a golden and a latency rule's body may have; ``field`` and ``key`` name outputs lists (strings)."""
_BODY_EXAMPLES: dict[tuple[str, str], str] = {("golden", "field"): "predictions", ("golden", "key"): "indices",
                                              ("latency", "field"): "latency_ms"}
"""Each naming key's default, shown in the hint."""


def _check_body_keys(name: str, kind: str, body: object, loc: Location) -> None:
    """A golden or latency body has only its own keys, and its ``field``/``key`` (the outputs lists it reads) are
    non-empty strings. Raises :class:`CaseError`: a body written otherwise was judged only when a model's outputs
    arrived, and then blamed on the model (``golden.field: [1]`` became "TypeError: unhashable type" owned by
    the algorithm team)."""
    allowed = _BODY_KEYS[kind]
    if not isinstance(body, dict):
        return  # refused above (_check_golden, the latency check)
    for key, value in body.items():
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            raise CaseError(f"rule '{name}': unknown key {key!r} in {kind}", loc,
                            f"did you mean '{close[0]}'?" if close else f"allowed keys: {', '.join(allowed)}")
        if key in ("field", "key") and (not isinstance(value, str) or not value):
            raise CaseError(f"rule '{name}': {kind}.{key} names an outputs list, as text ({value!r})", loc,
                            f"e.g. {key}: {_BODY_EXAMPLES[kind, key]}")


def _check_golden(name: str, gold: Any, loc: Location) -> None:
    """Raise :class:`CaseError` when a golden rule's body is not written as :class:`_GoldenGiven`, has no sample,
    or a sample's ``tolerance`` is not a number."""
    try:
        given = msgspec.convert(gold, _GoldenGiven)
    except msgspec.ValidationError:
        raise CaseError(f"rule '{name}': golden needs samples: [{{index, expected}}]",
                        loc, "e.g. samples: [{index: 0, expected: 7}]") from None
    if not given.samples:
        raise CaseError(f"rule '{name}': golden samples is empty: it would prove nothing", loc,
                        "list at least one sample, e.g. samples: [{index: 0, expected: 7}], or drop the rule")
    if any("tolerance" in x and not _number(x["tolerance"]) for x in gold["samples"]):
        raise CaseError(f"rule '{name}': a golden sample's tolerance must be a number", loc,
                        "e.g. {index: 0, expected: 0.5, tolerance: 0.01}")


def _check_finite_bound(name: str, bound: float, field: str, hint: str, loc: Location) -> None:
    """Raise :class:`CaseError` when the bound a metric or latency rule writes into its result (``bound.value``:
    its ``value``, its ``max_ms``; numbers already, named ``field``) is NaN or ±Infinity: the journal writes those as
    null (:func:`pytest_hetero.evidence.journal.finite`), and a ``business.rules`` record whose bound is null is
    refused by every reader of the bundle."""
    if isinstance(bound, float) and not math.isfinite(bound):
        raise CaseError(f"rule '{name}': {field} must be a finite number, not {bound}", loc, hint)


def _check_service_rule(name: str, kind: str, body: object, loc: Location) -> None:
    """Raise :class:`CaseError` when a service rule's body is not written as its kind's
    (:data:`_SERVICE_GIVEN`: numbers, not bools; a percentile 0–100; a whole concurrency; throughput one floor at
    least)."""
    keys, hint = SERVICE_CHECKS[kind]
    try:
        given = msgspec.convert(body, _SERVICE_GIVEN[kind])
    except msgspec.ValidationError:
        given = None
    if given is None or (isinstance(given, _ThroughputGiven) and given.min_rps is msgspec.UNSET
                         and given.min_sps is msgspec.UNSET):
        needs = " and ".join(keys) if kind != "throughput" else "min_rps or min_sps"
        raise CaseError(f"rule '{name}': {kind} needs numeric {needs}",
                        loc, hint)


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile of ``values`` (pct 0–100). Raises ValueError on an empty list."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return float(ordered[rank - 1])


class NotEvaluable(KeyError):
    """A rule cannot be evaluated on these outputs: ``missing`` (the metric or field is absent) or
    ``invalid`` (present but null, not numeric, or of inconsistent shape). ``message`` says which."""

    def __init__(self, message: str, problem: str = "missing") -> None:
        super().__init__(message)
        self.message = message
        self.problem = problem

    def __str__(self) -> str:
        """The message alone (KeyError would quote it)."""
        return self.message


def _is_number(value: object) -> TypeGuard[int | float]:
    """A finite JSON number: NaN and ±Infinity (non-standard tokens Python's parser accepts, or a float
    literal too large for a double such as ``1e400``) are not measurements and cannot be written as JSON."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class ModelOutputs:
    """A model run's outputs JSON object as the rules read it, parsed once by :func:`evaluate`: ``fields`` its
    top-level members as written (lists the rules aggregate or compare, ``service`` the load levels the gate
    measured) and ``metrics`` the values it reports about itself (``outputs.metrics``; empty when absent or not an
    object)."""

    fields: Mapping[str, object]
    metrics: Mapping[str, object]

    @classmethod
    def parse(cls, outputs: object) -> ModelOutputs:
        """Read ``outputs`` (anything else than a JSON object reads as an empty one). Never raises."""
        if not isinstance(outputs, dict):
            return cls({}, {})
        try:
            reported = msgspec.convert(outputs, _Reported).metrics
        except msgspec.ValidationError:  # metrics that are no object: nothing reported
            reported = None
        return cls(outputs, reported or {})


class _Reported(msgspec.Struct, frozen=True, kw_only=True):
    """What a model's outputs report about the model itself: ``metrics``, name → value as written (None when absent
    or null; the values are judged by the rules: :func:`metric_value`)."""

    metrics: dict[str, object] | None = None


def _numbers(outputs: ModelOutputs, name: str) -> list[float]:
    if name not in outputs.fields:
        raise NotEvaluable(f"outputs field '{name}' is absent")
    values = outputs.fields[name]
    if not isinstance(values, list) or not all(_is_number(v) for v in values):
        raise NotEvaluable(f"outputs field '{name}' is {_shape(values)}, not a list of numbers", "invalid")
    return [float(v) for v in values]


def _shape(value: Any) -> str:
    """A few words on what ``value`` is, e.g. ``null``, ``a str``, ``a list with 2 non-numbers among 5``."""
    if value is None:
        return "null"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list):
        odd = [v for v in value if not _is_number(v)]
        return f"a list with {len(odd)} non-numbers among {len(value)}" if odd else f"a list of {len(value)}"
    return "an object" if isinstance(value, dict) else f"a {type(value).__name__}"


def available(outputs: ModelOutputs) -> dict[str, list[str]]:
    """What ``outputs`` offers rules: ``metrics`` (numeric entries of ``outputs.metrics``) and
    ``fields`` (top-level non-empty lists of numbers, for ``mean(f)``…, latency and golden rules)."""
    return {"metrics": sorted(k for k, v in outputs.metrics.items() if _is_number(v)),
            "fields": sorted(k for k, v in outputs.fields.items()
                             if isinstance(v, list) and v and all(map(_is_number, v)))}


def metric_value(outputs: ModelOutputs, expr: str) -> float:
    """Value of a self-reported metric expression on ``outputs`` (``outputs.metrics.<name>`` or an aggregate over
    a list field; nothing is derived from the outputs' own ``labels``). Raises :class:`NotEvaluable` when the data is
    absent (``missing``) or null, not numeric or of inconsistent shape (``invalid``)."""
    agg = _AGG.match(expr)
    if agg:
        fn, name = agg.groups()
        values = _numbers(outputs, name)
        if fn == "count":
            return float(len(values))
        if not values:
            raise NotEvaluable(f"outputs field '{name}' is empty", "invalid")
        return {"mean": sum(values) / len(values), "min": min(values), "max": max(values)}[fn]
    if expr not in outputs.metrics:
        raise NotEvaluable(f"metric '{expr}' is absent")
    value = outputs.metrics[expr]
    if not isinstance(value, (int, float)) or not _is_number(value):
        raise NotEvaluable(f"metric '{expr}' is {_shape(value)}, not a number", "invalid")
    return float(value)


UNITS: dict[str, str] = {"_ms": "ms", "_s": "s", "_seconds": "s", "_mib": "MiB", "_bytes": "bytes", "_pct": "%"}
"""Field-name suffix → unit of a metric over that field (``mean(latency_ms)`` is in ms)."""


def unit_of(expr: str) -> str | None:
    """The unit of a metric expression's value, from its field's name suffix (:data:`UNITS`); ``count(…)``
    counts and plain metrics carry none; None when unknown."""
    agg = _AGG.match(expr)
    name = agg.group(2) if agg and agg.group(1) != "count" else ("" if agg else expr)
    return next((unit for suffix, unit in UNITS.items() if name.lower().endswith(suffix)), None)


NOT_EVALUABLE = "not_evaluable"
"""Verdict of a rule that cannot be evaluated on the outputs (neither pass nor fail)."""


SELF_REPORTED_NOTE = "self-reported, not verified"
"""What a result judged on a value the model reported about itself says, wherever it is shown."""


@dataclass
class GateValues:
    """The values the gate computed (from truth) or measured (around the run) for one run: ``values`` name →
    (number, provenance); ``unavailable`` name → why the gate has no such value (e.g. the dataset declares no
    truth); ``why`` is the reason for any name not listed."""

    values: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    why: str = "the gate computed no metrics for this run"
    lazy: Callable[[str, tuple[str, str] | None], tuple[float, dict[str, Any]]] | None = None
    """Computes a metric (over a slice: column, value) that is not in ``values`` when a rule asks for it; raises
    :class:`NotEvaluable` saying why it cannot."""

    def get(self, name: str, where: tuple[str, str] | None = None) -> tuple[float, dict[str, Any]]:
        """The value and provenance of ``name`` (over the truth rows whose column ``where[0]`` is ``where[1]``).
        Raises :class:`NotEvaluable` (``no_truth``) saying why not."""
        if name in self.values and where is None:
            return self.values[name]
        if self.lazy is not None and name not in self.unavailable and gate_metrics.task_of(name) is not None:
            return self.lazy(name, where)
        raise NotEvaluable(f"the gate has no value for metric '{name}': {self.unavailable.get(name, self.why)}",
                           "no_truth")


def evaluate(rules: list[AcceptanceRule], outputs: Mapping[str, object],
             gate: GateValues | None = None) -> list[RuleResult]:
    """Evaluate every rule on ``outputs`` and the ``gate``'s own values (none when omitted). A rule whose data
    is absent or unusable gets verdict :data:`NOT_EVALUABLE` with ``detail`` (why), ``problem``
    (``missing``/``invalid``/``no_truth``) and ``available`` (see :func:`available`): it proves nothing either way
    and fails no one's claim."""
    results: list[RuleResult] = []
    read = ModelOutputs.parse(outputs)
    gate = gate if gate is not None else GateValues()
    for rule in rules:
        try:
            results.append({"name": rule["name"], "kind": rule["kind"], **_evaluate(rule, read, gate)})
        except (KeyError, ValueError, TypeError) as exc:
            problem = exc.problem if isinstance(exc, NotEvaluable) else "invalid"
            text = str(exc) if isinstance(exc, NotEvaluable) else f"{type(exc).__name__}: {exc}"
            results.append({"name": rule["name"], "kind": rule["kind"], "expected": None, "observed": None,
                            "verdict": NOT_EVALUABLE, "detail": f"cannot evaluate: {text}", "problem": problem,
                            "available": available(read)})
    return results


def _slice(rule: AcceptanceRule) -> tuple[str, str] | None:
    """A rule's ``slice: {column: value}`` as (column, value text), or None."""
    found = rule["slice"]
    if not found:
        return None
    ((column, value),) = found.items()
    return str(column), slice_text(value)


def _self_reported(expr: str) -> dict[str, str]:
    agg = _AGG.match(expr)
    return {"source": "self_reported", "field": f"outputs.{agg.group(2)}" if agg else f"outputs.metrics.{expr}",
            "note": SELF_REPORTED_NOTE}


def _evaluate(rule: AcceptanceRule, outputs: ModelOutputs, gate: GateValues) -> RuleVerdict:
    """A rule's result on ``outputs`` and ``gate``; one judged on a value the model reported about itself (a
    ``self_reported`` metric, a latency rule) says :data:`SELF_REPORTED_NOTE` as its detail. Raises
    :class:`NotEvaluable` (and KeyError, ValueError, TypeError for outputs of another shape) as :func:`evaluate`
    says."""
    if rule["kind"] == "metric":
        if rule["self_reported"]:
            observed, provenance = metric_value(outputs, rule["metric"]), _self_reported(rule["metric"])
        else:
            observed, provenance = gate.get(rule["metric"], _slice(rule))
        if not math.isfinite(observed):  # e.g. the mean of finite values too large for a double
            raise NotEvaluable(f"metric '{rule['metric']}' evaluates to {_shape(observed)}", "invalid")
        op, value, tol = rule["op"], float(rule["value"]), float(rule["tolerance"])
        if op in ("==", "!=") and tol:
            ok = abs(observed - value) <= tol
            ok = ok if op == "==" else not ok
            expected = f"{rule['metric']} {op} {value} ± {tol}"
        else:
            ok = OPS[op](observed, value)
            expected = f"{rule['metric']} {op} {value}"
        unit = unit_of(rule["metric"])
        bound: RuleBound = {"op": op, "value": value, "tolerance": tol or None}
        if unit:
            bound["unit"] = unit
        judged: RuleVerdict = {"expected": expected + (f" {unit}" if unit else ""), "observed": round(observed, 6),
                               "verdict": "pass" if ok else "fail",
                               "detail": SELF_REPORTED_NOTE if rule["self_reported"] else "", "bound": bound,
                               "provenance": provenance, "metric": rule["metric"]}
        if unit:
            judged["unit"] = unit
        return judged
    if rule["kind"] in SERVICE_CHECKS:
        return {**_evaluate_service(rule, outputs),
                "provenance": {"source": "measured", "by": "the gate's load generator (outputs.service.levels)"}}
    if rule["kind"] == "latency":
        lat = rule["latency"]
        field = lat["field"]
        values = _numbers(outputs, field)
        if not values:
            raise NotEvaluable(f"outputs field '{field}' is an empty list", "invalid")
        observed = percentile(values, float(lat["percentile"]))
        ok = observed <= float(lat["max_ms"])
        return {"expected": f"p{lat['percentile']} ≤ {lat['max_ms']} ms", "observed": round(observed, 4),
                "unit": "ms", "verdict": "pass" if ok else "fail", "detail": SELF_REPORTED_NOTE,
                "provenance": {"source": "self_reported", "field": f"outputs.{field}",
                               "note": SELF_REPORTED_NOTE},
                "bound": {"op": "<=", "value": float(lat["max_ms"]), "tolerance": None, "unit": "ms"}}
    return {**_evaluate_golden(rule["golden"], outputs),
            "provenance": {"source": "computed", "by": "the gate: each golden sample's expected value (the rules "
                           "file's own) against the model's answer"}}


def _evaluate_golden(gold: GoldenBody, outputs: ModelOutputs) -> RuleVerdict:
    """A golden rule's result (see :func:`evaluate`); raises :class:`NotEvaluable` as it says."""
    field, key = gold["field"], gold["key"]
    values, keys = outputs.fields.get(field), outputs.fields.get(key)
    if field not in outputs.fields:
        raise NotEvaluable(f"outputs field '{field}' is absent")
    if not isinstance(values, list):
        raise NotEvaluable(f"outputs field '{field}' is {_shape(values)}, not a list", "invalid")
    if key in outputs.fields and (not isinstance(keys, list) or len(keys) != len(values)):
        raise NotEvaluable(f"outputs field '{key}' is {_shape(keys)} beside {len(values)} '{field}'", "invalid")
    position = _positions(keys, key) if isinstance(keys, list) else None
    mismatches, absent = [], []
    for sample in gold["samples"]:
        idx = position.get(_hashable(sample["index"])) if position is not None \
            else _list_index(sample["index"], len(values))
        if idx is None:
            absent.append(sample["index"])
            continue
        got = values[idx]
        if isinstance(got, float) and not math.isfinite(got):
            raise NotEvaluable(f"outputs field '{field}' holds {_shape(got)} at index {sample['index']!r}", "invalid")
        tol = sample["tolerance"]
        ok = got is not None and (abs(float(got) - _as_float(sample["expected"])) <= float(tol)
                                  if tol is not None else got == sample["expected"])
        if not ok:
            mismatches.append({"index": sample["index"], "expected": sample["expected"], "observed": got})
    where = f"field '{key}'" if position is not None else f"positions of '{field}'"
    if absent and not mismatches:  # a sample that is not there neither matches nor fails
        raise NotEvaluable(f"golden sample index(es) {', '.join(map(repr, absent[:5]))} not in the outputs "
                           f"({where}, {len(values)} entries)")
    n = len(gold["samples"])
    detail = "; ".join(f"sample {m['index']}: expected {m['expected']!r}, got {m['observed']!r}" for m in mismatches)
    if absent:
        detail += f"; sample(s) {', '.join(map(repr, absent[:5]))} not in the outputs ({where})"
    return {"expected": f"{n} golden samples match", "observed": f"{n - len(mismatches) - len(absent)}/{n} match",
            "verdict": "fail" if mismatches else "pass", "detail": detail,
            "failing": [m["index"] for m in mismatches] + absent}


def _hashable(value: Any) -> Any:
    """``value`` usable as a dict key (a list or object from the outputs becomes its repr)."""
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


def _positions(keys: list[Any], name: str) -> dict[Any, int]:
    """Index value → position in the outputs' ``name`` list. Raises :class:`NotEvaluable` (``invalid``)
    when a value repeats: which sample a golden index means would be a guess."""
    position: dict[Any, int] = {}
    for i, k in enumerate(keys):
        if _hashable(k) in position:
            raise NotEvaluable(f"outputs field '{name}' repeats index {k!r} (positions {position[_hashable(k)]} "
                               f"and {i})", "invalid")
        position[_hashable(k)] = i
    return position


def _list_index(index: Any, length: int) -> int | None:
    """``index`` as a position in a list of ``length`` entries, or None when it is not one."""
    return index if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < length else None


_FLOORS: tuple[tuple[Literal["min_rps", "min_sps"], str], ...] = (("min_rps", "req/s"), ("min_sps", "samples/s"))
"""A throughput rule's floors: key and unit."""


def _as_float(value: object) -> float:
    """``float(value)`` of a value as YAML wrote it (a golden sample's ``expected``). Raises TypeError, as
    ``float`` does, for a value that is neither a number nor text, and ValueError for text that is no number."""
    if isinstance(value, (int, float, str, bytes)):
        return float(value)
    raise TypeError(f"float() argument must be a string or a real number, not '{type(value).__name__}'")


class ServiceLevel(msgspec.Struct, frozen=True, kw_only=True):
    """One load level of ``outputs.service.levels`` as the service rules read it: the statistics
    :func:`pytest_hetero.serving.load.summarise` writes (:class:`~pytest_hetero.serving.load.LevelSummary`), its
    ``concurrency`` required; a statistic absent or null is None, and a rule that needs it cannot be evaluated on
    that level (``latencies_ms`` absent: no successful request, as an empty list)."""

    concurrency: int
    latencies_ms: list[float] | None = None
    error_rate: float | None = None
    errors: int | None = None
    requests: int | None = None
    requests_per_s: float | None = None
    samples_per_s: float | None = None


class _Service(msgspec.Struct, frozen=True, kw_only=True):
    """``outputs.service``: its load ``levels`` (None when absent or null)."""

    levels: list[ServiceLevel] | None = None


class _Served(msgspec.Struct, frozen=True, kw_only=True):
    """The outputs of a served model as the service rules read them: ``service`` (None when absent or null; the
    other fields, the model's, are not read here)."""

    service: _Service | None = None


def _lacks(level: ServiceLevel, names: str) -> NotEvaluable:
    return NotEvaluable(f"load level c={level.concurrency} has no {names}", "invalid")


def _service_latency(body: ServiceLatencyBody, level: ServiceLevel) -> tuple[bool, str]:
    """Whether a load level meets a service_latency rule's bound, and what it measured in words."""
    lat = level.latencies_ms or []
    value = round(percentile(lat, float(body["percentile"])), 3) if lat else None
    ok = value is not None and value <= float(body["max_ms"])
    return ok, f"c={level.concurrency}: p{body['percentile']} {value} ms"


def _error_rate(body: ErrorRateBody, level: ServiceLevel) -> tuple[bool, str]:
    """Whether a load level meets an error_rate rule's bound, and what it measured in words. Raises
    :class:`NotEvaluable` when the level lacks its error rate, errors or requests."""
    if level.error_rate is None or level.errors is None or level.requests is None:
        raise _lacks(level, "error_rate, errors or requests")
    ok = level.error_rate <= float(body["max"])
    return ok, f"c={level.concurrency}: {level.error_rate:.4f} ({level.errors}/{level.requests})"


def _throughput(body: ThroughputBody, level: ServiceLevel) -> tuple[bool, str]:
    """Whether a load level meets a throughput rule's floors (an absent floor: 0), and what it measured in words.
    Raises :class:`NotEvaluable` when the level lacks requests_per_s or samples_per_s."""
    rps, sps = level.requests_per_s, level.samples_per_s
    if rps is None or sps is None:
        raise _lacks(level, "requests_per_s or samples_per_s")
    ok = rps >= float(body["min_rps"] or 0) and sps >= float(body["min_sps"] or 0)
    return ok, f"c={level.concurrency}: {rps:g} req/s, {sps:g} samples/s"


def _evaluate_service(rule: AcceptanceRule, outputs: ModelOutputs) -> RuleVerdict:
    """A service rule's result (see :func:`evaluate`) over the load levels the gate measured
    (``outputs.service.levels``); raises :class:`NotEvaluable` when there are none, or none at its concurrency."""
    judge: Callable[[ServiceLevel], tuple[bool, str]]
    if rule["kind"] == "service_latency":
        latency = rule["service_latency"]
        wanted, expected = latency["concurrency"], f"p{latency['percentile']} ≤ {latency['max_ms']} ms"
        judge = partial(_service_latency, latency)
    elif rule["kind"] == "error_rate":
        errors = rule["error_rate"]
        wanted, expected = errors["concurrency"], f"error rate ≤ {errors['max']}"
        judge = partial(_error_rate, errors)
    else:
        floors = rule["throughput"]
        wanted = floors["concurrency"]
        expected = " and ".join(f"{label} ≥ {floors[key]}" for key, label in _FLOORS if floors[key] is not None)
        judge = partial(_throughput, floors)
    try:
        served = msgspec.convert(outputs.fields, _Served)
    except msgspec.ValidationError as exc:
        raise NotEvaluable(f"outputs.service is not the gate's load levels: {exc}", "invalid") from None
    levels = served.service.levels if served.service is not None else None
    if not levels:
        raise NotEvaluable("outputs have no service levels (not the run of a served model?)")
    chosen = [lv for lv in levels if wanted is None or lv.concurrency == wanted]
    if not chosen:
        raise NotEvaluable(f"no load level at concurrency {wanted} (measured: "
                           f"{', '.join(str(lv.concurrency) for lv in levels)})")
    observed, bad = [], []
    for lv in chosen:
        ok, text = judge(lv)
        observed.append(text)
        if not ok:
            bad.append(text)
    scope = f" at concurrency {wanted}" if wanted is not None else " at every concurrency level"
    return {"expected": expected + scope, "observed": "; ".join(observed), "verdict": "fail" if bad else "pass",
            "detail": ("bound missed at " + "; ".join(bad)) if bad else ""}


resolve(__name__)
