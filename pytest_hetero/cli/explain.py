"""``hetero explain --from FILE|-``: read any pasted GPU/NPU cluster output and say what it means
(arguments: :mod:`pytest_hetero.cli._parser`).

Prints the :class:`~pytest_hetero.explain.model.Report` as JSON (``exit_code``, ``readable``, ``blocks``,
``findings``), or one line per finding with ``--text``. Exit status: 0 nothing unhealthy, 1 something
unhealthy or blocking, 2 nothing in the input could be read (empty, binary, or no block recognised; the
unrecognised lines are still listed). ``hetero explain-pending`` and ``hetero probe … --from`` read the
same kinds through the same readers and keep their own output formats.
"""

from __future__ import annotations

import argparse
import json
import sys

from pytest_hetero.errors import HeteroError
from pytest_hetero.explain.core import explain_bytes
from pytest_hetero.explain.model import Finding, Report

_MARK = {"ok": "ok   ", "warning": "WARN ", "error": "ERROR", "unrecognised": "?    "}


def _printable(text: str) -> str:
    return "".join(ch if ch.isprintable() or ch == "\t" else "?" for ch in text)


def finding_line(finding: Finding) -> str:
    """``ERROR xid_79 [infrastructure] bus_id=… — meaning (lines 3-5)``: one line for people."""
    entity = " ".join(f"{k}={v}" for k, v in finding.entity.items())
    where = ""
    if finding.lines:
        first, last = finding.lines[0].number, finding.lines[-1].number
        where = f" (line {first})" if first == last else f" (lines {first}-{last})"
    extra = []
    if finding.count and finding.count > 1:
        extra.append(f"x{finding.count}")
    if finding.age:
        extra.append(f"age {finding.age}")
    if finding.timestamps:
        extra.append(" .. ".join(finding.timestamps))
    undetermined = finding.undetermined
    owner = f"[{finding.owner}]" if finding.owner else ("[owner undetermined]" if undetermined else "[no owner]")
    parts = [_MARK.get(finding.severity, finding.severity), finding.code, owner]
    if entity:
        parts.append(entity)
    text = " ".join(parts) + " - " + finding.meaning
    if undetermined and finding.owner_candidates:
        text += f"; candidates: {finding.owner_candidates}"
        if finding.quantities.get("next"):
            text += f"; next: {finding.quantities['next']}"
    if extra:
        text += " {" + ", ".join(extra) + "}"
    return _printable(text + where)


def render_text(report: Report, *, everything: bool = False) -> str:
    """The ``--text`` rendering: problems first-seen order, then a summary line."""
    lines: list[str] = []
    shown = [f for f in report.findings if everything or f.severity != "ok"]
    lines.extend(finding_line(f) for f in shown)
    healthy = sum(1 for f in report.findings if f.severity == "ok")
    if not report.readable:
        lines.append(f"nothing could be read: {report.reason}")
    owners = ", ".join(report.owners()) or "none"
    kinds = ", ".join(dict.fromkeys(b.kind for b in report.blocks if b.kind not in ("prompt", "section")))
    lines.append(f"{len(report.unhealthy)} problem(s), {healthy} healthy/informational finding(s)"
                 + ("" if everything else " (shown with --all)" if healthy else "")
                 + f"; owners: {owners}; blocks: {kinds or 'none'}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run ``hetero explain`` for parsed ``args``; returns the exit code (0/1/2 as in the docstring)."""
    name = "standard input" if args.source == "-" else args.source
    from pytest_hetero.safeio import read_source

    try:
        data = read_source(args.source, "the captured output")
    except HeteroError as exc:
        print(f"hetero explain: {exc.render()}", file=sys.stderr)
        return 2
    report = explain_bytes(data)
    if args.text:
        print(render_text(report, everything=bool(getattr(args, "all", False))))
    else:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    if not report.readable:
        print(f"hetero explain: {name}: nothing could be read ({report.reason})", file=sys.stderr)
    return report.exit_code()
