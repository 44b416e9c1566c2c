"""The nightly trend: every item and every business metric across N runs of the same matrices.

:func:`trend` takes the evidence documents of N bundles (already verified by the caller: ``hetero trend``
reads each through :func:`pytest_hetero.bundle.verify.load_evidence`) and returns, ordered by each run's
start time:

- per item (keyed ``<matrix name>::<id below the matrix file>``, as the baseline diff keys them): its
  status each night (None where the item did not exist), the first night it failed, the night its current
  failing streak began, and whether it is **flaky**: its status changed between two consecutive nights
  whose inputs were the same (matrix file, tool version, target fingerprint, and for model and business
  items the model and data-set version and sha256, the model's code folder and the data set's acceptance
  rules);
- per business rule with a numeric observed value: the series of values and the accepted bound (the
  rule's threshold as recorded, ``bound``; else its ``expected`` text).

:func:`render_trend_text` and :func:`render_trend_html` present it; the JSON is the :func:`trend` dict.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, TypeGuard

import jinja2

from pytest_hetero.evidence.document import item_of, model_identity
from pytest_hetero.evidence.inputs import input_digests
from pytest_hetero.evidence.records import RULES, data_of
from pytest_hetero.reporting.docview import dims, run_view, targets
from pytest_hetero.vocab import FAILED

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import Entry, EvidenceDocument, MatrixEntry, RuleBound, RuleResult

SPARK = "▁▂▃▄▅▆▇█"


class Night(TypedDict):
    """One night: its run id, start time, verdict, how its bundle verified, the tool version."""

    run: str | None
    started_at: str | None
    verdict: str | None
    verification: str
    tool_version: str | None


class ItemTrend(TypedDict):
    """An item across the nights: its status each night (None: it did not exist), the first night it failed,
    the night its failing streak began, status changes, and those with unchanged inputs (flaky)."""

    item: str
    layer: str
    history: list[str | None]
    first_failing: int | None
    failing_since: int | None
    changes: int
    flaky: bool
    flaky_changes: int


class MetricTrend(TypedDict):
    """A business rule's numeric observed value across the nights, its verdicts and its accepted bound."""

    item: str
    rule: str
    series: list[float | None]
    verdicts: list[str | None]
    bound: RuleBound | None
    expected: str


class TrendSummary(TypedDict):
    """How many nights, items, items failing now, flaky items and metric series."""

    nights: int
    items: int
    failing_now: int
    flaky: int
    metrics: int


class Trend(TypedDict):
    """The trend (:func:`trend`): ``hetero trend --format json`` writes it as it is."""

    nights: list[Night]
    items: list[ItemTrend]
    metrics: list[MetricTrend]
    summary: TrendSummary


def _night_inputs(evidence: EvidenceDocument, matrices: list[MatrixEntry]) -> dict[str, str]:
    """Per matrix prefix: a digest of what every item of that matrix was given (matrix, tool, target)."""
    tool_version = run_view(evidence["run"]).tool_version
    target = json.dumps([{"backend": t.backend, "identity": t.identity, "versions": t.versions, "images": t.images}
                         for t in targets(evidence)], sort_keys=True, default=str)
    return {m["prefix"]: hashlib.sha256(f"{m['sha256']}|{tool_version}|{target}".encode())
            .hexdigest()[:16] for m in matrices}


def _identities(evidence: EvidenceDocument) -> dict[tuple[str, ...], str]:
    """(matrix, resource, image, model, dataset) → model/data-set version and sha256 of its model run."""
    out: dict[tuple[str, ...], str] = {}
    for item in evidence["items"]:
        if item["layer"] != "model":
            continue
        ident = next((found for r in item["records"] if (found := model_identity(r)) is not None), None)
        if ident is not None:
            keys = dims(item)
            out[(item["matrix"], str(keys.resource), str(keys.image), str(keys.model), str(keys.dataset))] = \
                f"{ident['version']}|{ident['sha256']}|{ident['dataset_version']}|{ident['dataset_sha256']}"
    return out


def _night(evidence: EvidenceDocument) -> tuple[dict[str, tuple[str, str, str]], dict[tuple[str, str], RuleResult]]:
    """(item key → (status, input digest, layer), (item key, rule) → result) for one night."""
    matrices = evidence["matrices"]
    names = {m["prefix"]: m["name"] for m in matrices}
    inputs, idents, used = _night_inputs(evidence, matrices), _identities(evidence), input_digests(evidence)
    statuses: dict[str, tuple[str, str, str]] = {}
    metrics: dict[tuple[str, str], RuleResult] = {}
    both: list[Entry] = [*evidence["untested"]["items"], *evidence["items"]]
    for entry in both:
        item = item_of(entry)
        prefix, _, rest = entry["nodeid"].partition("::")
        name = names.get(prefix, prefix)
        key = f"{name}::{rest}"
        keys = dims(entry)
        ident = idents.get((item["matrix"] if item else prefix, str(keys.resource), str(keys.image), str(keys.model),
                            str(keys.dataset)), "")
        code, rules = used.get((name, "code", str(keys.model)), ""), used.get((name, "rules", str(keys.dataset)), "")
        statuses[key] = (entry["status"], f"{inputs.get(prefix, '')}|{ident}|{code}|{rules}", entry["layer"])
        for record in item["records"] if item else []:
            judged = data_of(record, RULES)
            for result in judged["results"] if judged else []:
                metrics[(key, str(result["name"]))] = result
    return statuses, metrics


def trend(nights: list[tuple[EvidenceDocument, str]]) -> Trend:
    """The trend of ``nights`` (``(evidence, verification)`` pairs, any order).

    Returns ``{"nights": [{"run", "started_at", "verdict", "verification", "tool_version"}], "items":
    [{"item", "layer", "history": [status|None], "first_failing": night index|None, "failing_since":
    index|None, "changes": n, "flaky": bool, "flaky_changes": n (changes with unchanged inputs)}],
    "metrics": [{"item", "rule", "series": [float|None], "verdicts": [str|None], "bound": dict|None,
    "expected": str}], "summary": {"nights", "items", "failing_now", "flaky", "metrics"}}``; items sorted
    failing-now first, then flaky, then by key.
    """
    runs = [(evidence, run_view(evidence["run"]), verification) for evidence, verification in nights]
    ordered = sorted(runs, key=lambda n: str("" if n[1].started_at is None else n[1].started_at))
    per_night = [_night(evidence) for evidence, _, _ in ordered]
    keys = sorted({k for statuses, _ in per_night for k in statuses})
    items = [_item_trend(key, [statuses.get(key) for statuses, _ in per_night]) for key in keys]
    items.sort(key=lambda e: (e["failing_since"] is None, not e["flaky"], e["item"]))
    metric_keys = sorted({k for _, metrics in per_night for k, r in metrics.items() if _numeric(r["observed"])})
    metrics = [_metric_trend(k, [m.get(k) for _, m in per_night]) for k in metric_keys]
    summary: TrendSummary = {"nights": len(ordered), "items": len(items),
               "failing_now": sum(1 for e in items if e["failing_since"] is not None),
               "flaky": sum(1 for e in items if e["flaky"]), "metrics": len(metrics)}
    return {"nights": [{"run": run.id, "started_at": run.started_at, "verdict": _verdict(ev),
                        "verification": verification, "tool_version": run.tool_version}
                       for ev, run, verification in ordered],
            "items": items, "metrics": metrics, "summary": summary}


def _verdict(evidence: EvidenceDocument) -> str | None:
    """The night's verdict (None when its document has no summary)."""
    summary = evidence.get("summary")
    return summary["verdict"] if summary is not None else None


def _numeric(value: object) -> TypeGuard[float | int]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _item_trend(key: str, seen: list[tuple[str, str, str] | None]) -> ItemTrend:
    history = [s[0] if s else None for s in seen]
    failing = [i for i, s in enumerate(history) if s in FAILED]
    since = None
    if history and history[-1] in FAILED:
        since = len(history) - 1
        while since > 0 and history[since - 1] in FAILED:
            since -= 1
    changes = flaky = 0
    for before, after in zip(seen, seen[1:], strict=False):
        if before and after and before[0] != after[0]:
            changes += 1
            if before[1] == after[1] and {before[0], after[0]} & FAILED and {before[0], after[0]} & {"passed"}:
                flaky += 1
    layer = next(s[2] for s in seen if s)
    return {"item": key, "layer": layer, "history": history, "first_failing": failing[0] if failing else None,
            "failing_since": since, "changes": changes, "flaky": flaky > 0, "flaky_changes": flaky}


def _metric_trend(key: tuple[str, str], results: list[RuleResult | None]) -> MetricTrend:
    latest = next((r for r in reversed(results) if r), None)
    return {"item": key[0], "rule": key[1],
            "series": [float(value) if r and _numeric(value := r["observed"]) else None for r in results],
            "verdicts": [r["verdict"] if r else None for r in results],
            "bound": next((r["bound"] for r in reversed(results) if r and isinstance(r.get("bound"), dict)), None),
            "expected": str((latest["expected"] if latest else None) or "")}


def sparkline(series: list[float | None]) -> str:
    """``series`` as block characters scaled to its own range (``·`` where a night has no value)."""
    values = [v for v in series if v is not None]
    if not values:
        return "·" * len(series)
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    return "".join("·" if v is None else SPARK[min(7, int((v - low) / span * 7.999))] for v in series)


def render_trend_text(data: Trend, limit: int = 50) -> str:
    """Plain text for a terminal: nights, items failing now (with the night they started), flaky items, and
    each metric's series with its bound."""
    nights = data["nights"]
    s = data["summary"]
    mark = {"passed": ".", "failed": "F", "error": "E", "blocked": "b", None: " "}
    lines = [f"trend over {s['nights']} night(s): {s['items']} items, {s['failing_now']} failing now, "
             f"{s['flaky']} flaky, {s['metrics']} metric series"]
    lines += [f"  night {i}: {n['run']} {n['started_at']} verdict {n['verdict']} ({n['verification']})"
              for i, n in enumerate(nights)]
    failing = [e for e in data["items"] if e["failing_since"] is not None]
    flaky = [e for e in data["items"] if e["flaky"]]
    for title, group in (("failing now", failing), ("flaky (status changed, inputs unchanged)", flaky)):
        lines.append(f"{title}: {len(group)}")
        for e in group[:limit]:
            history = "".join(mark.get(h, "-") for h in e["history"])
            since = nights[e["failing_since"]]["run"] if e["failing_since"] is not None else "-"
            first = nights[e["first_failing"]]["run"] if e["first_failing"] is not None else "-"
            lines.append(f"  [{history}] {e['item']}  first failed {first}; failing since {since}; "
                         f"{e['flaky_changes']} change(s) with the same inputs")
        if len(group) > limit:
            lines.append(f"  … {len(group) - limit} more (--format json lists all)")
    lines.append(f"metrics: {len(data['metrics'])}")
    for m in data["metrics"][:limit]:
        last = next((v for v in reversed(m["series"]) if v is not None), None)
        lines.append(f"  {sparkline(m['series'])} {m['item']} {m['rule']}: last {last:g} (bound {bound_text(m)})"
                     if last is not None else f"  {m['item']} {m['rule']}: no value")
    return "\n".join(lines) + "\n"


def bound_text(metric: MetricTrend) -> str:
    """The accepted bound of a metric series in words (``>= 0.95``, ``<= 20 ms``), else its expected text."""
    bound = metric["bound"]
    if not bound:
        return metric["expected"] or "?"
    tol = f" ± {bound['tolerance']:g}" if bound["tolerance"] else ""
    return f"{bound['op']} {bound['value']:g}{tol}" + (f" {bound['unit']}" if bound.get("unit") else "")


def svg_series(series: list[float | None], bound: RuleBound | None, width: int = 240, height: int = 48) -> str:
    """An inline SVG polyline of ``series`` with the bound as a dashed line (values scaled to include it)."""
    values = [v for v in series if v is not None]
    limit = bound["value"] if bound and _numeric(bound["value"]) else None
    scale = values + ([float(limit)] if limit is not None else [])
    if not scale:
        return ""
    low, high = min(scale), max(scale)
    span = (high - low) or 1.0
    step = width / max(1, len(series) - 1)

    def y(v: float) -> float:
        return round(height - 4 - (v - low) / span * (height - 8), 1)

    points = " ".join(f"{round(i * step, 1)},{y(v)}" for i, v in enumerate(series) if v is not None)
    line = (f'<line x1="0" x2="{width}" y1="{y(float(limit))}" y2="{y(float(limit))}" class="bound"/>'
            if limit is not None else "")
    dots = "".join(f'<circle cx="{round(i * step, 1)}" cy="{y(v)}" r="2"/>'
                   for i, v in enumerate(series) if v is not None)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
            f'{line}<polyline points="{points}" class="series"/>{dots}</svg>')


def render_trend_html(data: Trend, limit: int = 50) -> str:
    """A self-contained HTML page (no script, no network): nights, each item's status history as coloured
    cells (failing now and flaky first), and each metric's series as an SVG line with its bound dashed."""
    folder = Path(__file__).parent / "templates"
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(folder)), autoescape=True, trim_blocks=True,
                             lstrip_blocks=True)
    shown = [e for e in data["items"] if e["failing_since"] is not None or e["flaky"] or e["changes"]][:limit]
    metrics = [{**m, "svg": svg_series(m["series"], m["bound"]), "bound_text": bound_text(m)}
               for m in data["metrics"][:limit]]
    return env.get_template("trend.html.j2").render(
        data=data, items=shown, more=max(0, len(data["items"]) - len(shown)), metrics=metrics,
        metrics_more=max(0, len(data["metrics"]) - limit),
        css=(folder / "heatgrid.css").read_text(encoding="utf-8"))
