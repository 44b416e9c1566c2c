"""The end-of-run terminal summary: per-layer status counts, verdict, bundle path, untested scope."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pytest_hetero import LAYERS

ORDER = ("passed", "failed", "error", "blocked", "not_applicable", "skipped", "excluded", "deselected",
         "not_run")


def cut(text: str, limit: int) -> str:
    """``text`` shortened to at most ``limit`` characters at a word boundary, with ``…`` when cut."""
    if len(text) <= limit:
        return text
    head = text[:limit - 1]
    return (head.rsplit(" ", 1)[0] if " " in head else head) + "…"


def summary_lines(evidence: dict[str, Any], bundle_dir: Path) -> list[str]:
    """Plain-text lines of the summary (also used by ``hetero`` commands and tests)."""
    summary = evidence["summary"]
    lines = [f"verdict: {summary['verdict'].upper()}   evidence: {bundle_dir / 'evidence.json'}"]
    width = max(len(layer) for layer in LAYERS)
    for layer in LAYERS:
        counts = summary["by_layer"].get(layer, {})
        text = ", ".join(f"{counts[s]} {s}" for s in ORDER if counts.get(s)) or "no items"
        lines.append(f"  {layer:<{width}}  {text}")
    lines += _failure_lines(evidence) + _cleanup_lines(evidence) + _untested_lines(evidence)
    lines += [f"collection error: {err['nodeid']}" for err in evidence.get("errors", [])]
    return lines


def _cleanup_lines(evidence: dict[str, Any]) -> list[str]:
    """``cleanup: N objects left`` and each leftover with why and how to remove it (clean: nothing)."""
    left = (evidence.get("cleanup") or {}).get("leftovers") or []
    if not left:
        return []
    lines = [f"cleanup: NOT CLEAN, {len(left)} object(s) the run created are still there:"]
    for x in left:
        where = f"{x['namespace']}/" if x.get("namespace") else ""
        text = f"    {x['backend']} {x['kind']} {where}{x['name']}: {x['reason']} (remove: {x['remove']})"
        lines.append(cut(text, 220))
    return lines


def _failure_lines(evidence: dict[str, Any]) -> list[str]:
    """``failures by owner:`` then each owner's count and failed items (none: nothing)."""
    failures = [i for i in evidence["items"] if i["status"] in ("failed", "error") and i.get("failure")]
    if not failures:
        return []
    lines = ["failures by owner:"]
    for owner, n in Counter(i["failure"]["owner"] for i in failures).most_common():
        lines.append(f"  {owner}: {n}")
        lines += [f"    {i['nodeid']}: {i['failure']['category']}: {cut(i['failure']['message'].splitlines()[0], 140)}"
                  for i in failures if i["failure"]["owner"] == owner]
    return lines


def _untested_lines(evidence: dict[str, Any]) -> list[str]:
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
              for entry in evidence["untested"].get("not_proven", [])]
    for matrix, gaps in evidence["untested"]["never_covered"].items():
        lines += [f"  never covered in {matrix}: {dim}: {', '.join(values)}" for dim, values in gaps.items()]
    return lines


def write_summary(terminalreporter: Any, evidence: dict[str, Any], bundle_dir: Path, signature: str) -> None:
    """Write the summary section to pytest's terminal reporter (any object with ``write_sep`` and
    ``write_line``); ``signature`` is the last line (who signed the bundle, or UNSIGNED)."""
    terminalreporter.write_sep("=", "pytest-hetero evidence")
    for line in summary_lines(evidence, bundle_dir):
        terminalreporter.write_line(line)
    terminalreporter.write_line(signature)
