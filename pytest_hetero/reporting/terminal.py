"""The end-of-run terminal summary: verdict and evidence path, per-layer status counts, what the verdict
covers, failures by owner team, flaky items, observed business values (with units), untested scope,
and the path of report.html.

Every line is shown without control, format or line-break characters
(:func:`pytest_hetero.reporting.view.one_line`): text from evidence (node ids, owner and rule names,
failure messages, reasons, observed values) cannot colour, move the cursor in or forge lines of the
summary."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_hetero import LAYERS
from pytest_hetero.evidence.document import failure_of
from pytest_hetero.evidence.records import RULES, data_of
from pytest_hetero.evidence.untested import NEVER_COVERED_LABELS
from pytest_hetero.reporting.view import one_line, provenance_source

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import EvidenceDocument, RuleResult

ORDER = ("passed", "failed", "error", "blocked", "not_applicable", "skipped", "excluded", "deselected",
         "not_run")


def cut(text: str, limit: int) -> str:
    """``text`` shortened to at most ``limit`` characters at a word boundary, with ``…`` when cut."""
    if len(text) <= limit:
        return text
    head = text[:limit - 1]
    return (head.rsplit(" ", 1)[0] if " " in head else head) + "…"


def summary_lines(evidence: EvidenceDocument, bundle_dir: Path) -> list[str]:
    """Plain-text lines of the summary (also used by ``hetero`` commands and tests)."""
    summary = evidence["summary"]
    lines = [f"verdict: {summary['verdict'].upper()}   evidence: {bundle_dir / 'evidence.json'}"]
    width = max(len(layer) for layer in LAYERS)
    for layer in LAYERS:
        counts = summary["by_layer"][layer]
        text = ", ".join(f"{counts[s]} {s}" for s in ORDER if counts.get(s)) or "no items"
        lines.append(f"  {layer:<{width}}  {text}")
    lines += _coverage_lines(evidence) + _failure_lines(evidence) + _cleanup_lines(evidence) + _flaky_lines(evidence)
    lines += _observed_lines(evidence) + _untested_lines(evidence)
    lines += [f"collection error: {err['nodeid']}" for err in evidence["errors"]]
    lines += _journal_lines(evidence)
    if (bundle_dir / "report.html").is_file():
        lines.append(f"report: {bundle_dir / 'report.html'}")
    return [one_line(line) for line in lines]


def _journal_lines(evidence: EvidenceDocument) -> list[str]:
    """Journal lines rejected (not the gate's) or lost (unreadable), when there were any."""
    journal = evidence.get("journal")  # absent: a bundle written before the journal was authenticated
    lines = []
    if journal and journal["rejected"]:
        lines.append(f"journal: {len(journal['rejected'])} line(s) not written by the gate were rejected (lines "
                     f"{', '.join(str(r['line']) for r in journal['rejected'][:10])})")
    if journal and journal["lost"]:
        lines.append(f"journal: {len(journal['lost'])} line(s) could not be read and were lost (lines "
                     f"{', '.join(str(r['line']) for r in journal['lost'][:10])})")
    return lines


def _coverage_lines(evidence: EvidenceDocument) -> list[str]:
    """What the verdict covers when some planned items did not run in this session (deselected by
    -k/-m/--lf/profile/shard, or not run after an interruption); nothing when every item ran."""
    missing = Counter(u["status"] for u in evidence["untested"]["items"] if u["status"] in ("deselected", "not_run"))
    if not missing:
        return []
    ran = len(evidence["items"])
    text = ", ".join(f"{n} {status}" for status, n in sorted(missing.items()))
    return [f"  covers {ran} of {ran + sum(missing.values())} planned items; not run in this session: {text} "
            "(listed in untested scope)"]


def _flaky_lines(evidence: EvidenceDocument) -> list[str]:
    """Items that passed only on a rerun, with how each earlier attempt ended."""
    flaky = set(evidence["summary"].get("flaky", []))
    lines = []
    for item in (i for i in evidence["items"] if i["nodeid"] in flaky):
        before = "; ".join(f"attempt {a['attempt']} {a['status']}: {a['failure']['category'] if a['failure'] else ''}"
                           for a in item.get("attempts", []))
        lines.append(f"flaky (passed on a rerun): {item['nodeid']} ({before})")
    return lines


def _cleanup_lines(evidence: EvidenceDocument) -> list[str]:
    """``cleanup: N objects left`` and each leftover with why and how to remove it (clean: nothing)."""
    cleanup = evidence.get("cleanup")
    left = cleanup["leftovers"] if cleanup else []
    if not left:
        return []
    lines = [f"cleanup: NOT CLEAN, {len(left)} object(s) the run created are still there:"]
    for x in left:
        where = f"{x['namespace']}/" if x.get("namespace") else ""
        text = f"    {x['backend']} {x['kind']} {where}{x['name']}: {x['reason']} (remove: {x['remove']})"
        lines.append(cut(text, 220))
    return lines


def _failure_lines(evidence: EvidenceDocument) -> list[str]:
    """``failures by owner:`` then each owner's count and failed items (none: nothing)."""
    failures = [(i["nodeid"], f) for i in evidence["items"] if i["status"] in ("failed", "error")
                and (f := failure_of(i))]
    if not failures:
        return []
    lines = ["failures by owner:"]
    for owner, n in Counter(f["owner"] for _, f in failures).most_common():
        lines.append(f"  {owner}: {n}")
        lines += [f"    {nodeid}: {f['category']}: {cut(f['message'].splitlines()[0], 140)}"
                  for nodeid, f in failures if f["owner"] == owner]
    return lines


def _untested_lines(evidence: EvidenceDocument) -> list[str]:
    """The untested scope: counts by status, the first 12 items, parts not proven, never covered."""
    lines: list[str] = []
    untested = evidence["untested"]["items"]
    if untested:
        kinds = Counter(u["status"] for u in untested)
        lines.append("untested scope: " + ", ".join(f"{n} {k}" for k, n in kinds.most_common()))
        lines += [f"  {entry['status']:<14} {entry['nodeid']}  ({cut(entry['reason'], 110)})"
                  for entry in untested[:12]]
        if len(untested) > 12:
            lines.append(f"  … {len(untested) - 12} more in evidence.json")
    lines += [f"  not proven     {entry['nodeid']}: {entry['part']} ({cut(entry['reason'], 100)})"
              for entry in evidence["untested"]["not_proven"]]
    for matrix, gaps in evidence["untested"]["never_covered"].items():
        lines += [f"  {NEVER_COVERED_LABELS.get(dim, dim)} in {matrix}: {', '.join(values)}"
                  for dim, values in gaps.items()]
    nodes = evidence["untested"].get("nodes") or []
    lines += [f"  unvalidated    node {e['node']} of {e['matrix']}/{e['pool']} ({cut(e['reason'], 100)})"
              for e in nodes[:12]]
    if len(nodes) > 12:
        lines.append(f"  … {len(nodes) - 12} more unvalidated nodes in evidence.json")
    return lines


OBSERVED_ITEMS = 10
"""Business items whose observed values the terminal lists (the rest are in report.html)."""


def observed(result: RuleResult) -> str:
    """One rule's observed value with its unit, provenance and verdict, e.g. ``accuracy 0.96 computed (pass)``
    or ``latency-p95 3.1 ms self-reported, not verified (pass)``."""
    value = result["observed"]
    shown = f"{value:g}" if isinstance(value, float) else str(value if value is not None else "—")
    unit = f" {result['unit']}" if result.get("unit") else ""
    return f"{result['name']} {shown}{unit}{provenance_text(result)} ({result['verdict']})"


def provenance_text(result: RuleResult) -> str:
    """`` computed``, `` measured`` or `` self-reported, not verified`` for a rule result with provenance."""
    source = provenance_source(result)
    if source == "self_reported":
        return " self-reported, not verified"
    return f" {source}" if source else ""


def _observed_lines(evidence: EvidenceDocument) -> list[str]:
    """``observed:`` then, per business item that judged outputs, each rule's observed value (first
    :data:`OBSERVED_ITEMS` items; a repeated sample shows its last run)."""
    lines = []
    judged = 0  # counted, not held: the items may be read from disk one at a time
    for item in evidence["items"]:
        rules = [d for r in item["records"] if (d := data_of(r, RULES)) is not None] \
            if item["layer"] == "business" else []
        if not rules:
            continue
        judged += 1
        if judged <= OBSERVED_ITEMS:
            lines.append(f"  {item['nodeid']}: " + ", ".join(observed(r) for r in rules[-1]["results"]))
    if judged > OBSERVED_ITEMS:
        lines.append(f"  … {judged - OBSERVED_ITEMS} more in report.html")
    return ["observed business values:", *lines] if lines else []


def write_summary(terminalreporter: Any, evidence: EvidenceDocument, bundle_dir: Path, signature: str) -> None:
    """Write the summary section to pytest's terminal reporter (any object with ``write_sep`` and
    ``write_line``); ``signature`` is the last line (who signed the bundle, or UNSIGNED)."""
    terminalreporter.write_sep("=", "pytest-hetero evidence")
    for line in summary_lines(evidence, bundle_dir):
        terminalreporter.write_line(line)
    terminalreporter.write_line(signature)
