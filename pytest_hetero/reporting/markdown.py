"""Markdown summary (``summary.md``) sized for a PR comment or a meeting agenda.

Sections: verdict and signature state, per-layer counts, failures by owner team (at most
:data:`MAX_LINES` listed), sign-off status, untested scope by status with the first entries,
never-covered dimension values. Text from evidence is escaped for Markdown tables and inline HTML, and
what GitHub or GitLab would turn into a mention or a link to an issue (``@team``, ``#123``, ``GH-123``,
``owner/repo#123``) is shown as code, where neither links.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING, Any

from pytest_hetero.evidence.model import STATUSES
from pytest_hetero.evidence.untested import NEVER_COVERED_LABELS
from pytest_hetero.reporting.docview import run_view, signoff_state
from pytest_hetero.reporting.view import failures_by_owner, layer_counts, printable

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import EvidenceDocument
    from pytest_hetero.evidence.views import SignoffView
    from pytest_hetero.reporting.docview import SignoffState

MAX_LINES = 20
_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_REFERENCE = re.compile(r"(\S*(?:(?<!\w)@[A-Za-z0-9]|[#!]\d|\bGH-\d)\S*)")
"""A word holding a mention (``@team``, not ``user@host``) or an issue/merge-request reference."""


def md(text: Any, limit: int = 160) -> str:
    """One line of ``text``, at most ``limit`` characters, with Markdown/HTML specials escaped and
    mentions and issue references inside code spans (they neither ping nor link there)."""
    line = " ".join(printable(str(text or "")).split())
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    parts = _REFERENCE.split(line)  # odd positions: words to show as code
    return "".join(f"`{part.replace('`', chr(39))}`" if n % 2
                   else _SPECIAL.sub(r"\\\1", part).replace("<", "&lt;").replace(">", "&gt;")
                   for n, part in enumerate(parts))


def code(text: Any, limit: int = 200) -> str:
    """``text`` as an inline code span (backticks inside become quotes; code spans take no escapes)."""
    line = " ".join(printable(str(text or "")).split()).replace("`", "'")
    return f"`{line[: limit - 1] + '…' if len(line) > limit else line}`"


def render_markdown(evidence: EvidenceDocument, signoff: SignoffView) -> str:
    """Return the summary as Markdown text (GitHub-flavoured tables)."""
    run = run_view(evidence["run"])
    verdict = evidence["summary"]["verdict"].upper()
    read = signoff_state(signoff)
    signer, state, by = read.run_signer, read.state, read.by
    why = f" ({md(str(read.signer_error))})" if read.signer_error else ""
    sig = (f"**verified**, signed by `{str(by)[:16]}`" if state == "verified" else
           f"signed by `{signer[:16]}`, **not verified**{why}") if signer else f"**UNSIGNED**{why}"
    heading = verdict if state == "verified" else f"{verdict} (**NOT VERIFIED**: an unproven claim)"
    out = [f"## pytest-hetero: {heading}", "",
           (f"Run {code(run.id)} · matrices: {', '.join(md(m['name']) for m in evidence['matrices']) or 'none'}"
           f" · bundle {sig}"), ""]
    shown = [s for s in STATUSES if evidence["summary"]["totals"].get(s)]
    out += ["| layer | " + " | ".join(shown) + " |", "|---|" + "---:|" * len(shown)]
    for layer, counts in layer_counts(evidence):
        out.append(f"| {layer} | " + " | ".join(str(counts[s]) for s in shown) + " |")
    out.append("")
    out += _failures(evidence) + _signoff(read) + _baseline(evidence) + _untested(evidence) + _usage(evidence)
    out += ["", "_A pass proves only what report.html's \"What this run does not prove\" section allows._", ""]
    return "\n".join(out)


def _failures(evidence: EvidenceDocument) -> list[str]:
    """``### Failures by owner``: at most MAX_LINES failures under their owner (none: no section)."""
    groups = failures_by_owner(evidence)
    if not groups:
        return []
    out = ["### Failures by owner"]
    lines = 0
    for owner, items in groups:
        out.append(f"- **{md(owner)}** ({len(items)})")
        for item in items[: max(0, MAX_LINES - lines)]:
            lines += 1
            failure = item["failure"]
            category, message = (failure["category"], failure["message"]) if failure else (None, None)
            out.append(f"  - {code(item['nodeid'])}: {md(category)}: {md(message)}")
    total = sum(len(i) for _, i in groups)
    if total > lines:
        out.append(f"- … {total - lines} more in report.html / evidence.json")
    return [*out, ""]


def _signoff(signoff: SignoffState) -> list[str]:
    """``### Sign-off``: each role with its layers, state and who signed (none: no section). A
    view written at the end of the run (``source: run_end``) shows no state: sign-offs come later."""
    if not signoff.roles:
        return []
    out = ["### Sign-off", "", md(signoff.note, limit=600), ""]
    for role in signoff.roles:
        head = f"- {md(role['role'])} ({', '.join(role['layers'])})"
        if signoff.source == "run_end":
            out.append(head)
            continue
        out.append(f"{head}: **{role['state'].replace('_', ' ')}**")
        for c in role["signed"]:
            if c["verified"]:
                text = f": {md(c['conditions'])}" if c["conditions"] else ""
                out.append(f"  - verified {c['decision']} by {md(', '.join(c['names']))} (key `{c['keyid'][:16]}`) "
                           f"at {md(c['signed_at'])}{text}")
            else:
                out.append(f"  - not verified (key `{c['keyid'][:16]}`): {md(c['why_unverified'])}")
    return [*out, ""]


def _baseline(evidence: EvidenceDocument) -> list[str]:
    """``### Baseline comparison`` when the run was compared with a baseline."""
    diff = evidence.get("baseline_diff")
    if not diff or "error" in diff:  # a baseline that could not be compared has no lines to list
        return []
    from pytest_hetero.bundle.baseline import diff_lines

    return ["### Baseline comparison", *(f"- {md(line.strip(), 240)}" for line in diff_lines(diff, limit=MAX_LINES)),
            ""]


def _untested(evidence: EvidenceDocument) -> list[str]:
    """``### Untested scope``: counts by status, the first MAX_LINES items, parts not proven, never covered."""
    untested = evidence["untested"]["items"]
    out = ["### Untested scope"]
    if not untested:
        out.append("Nothing excluded, blocked, skipped or deselected.")
    else:
        by_status = Counter(entry["status"] for entry in untested)
        out.append(", ".join(f"{n} {s}" for s, n in sorted(by_status.items(), key=lambda kv: -kv[1])))
        out.append("")
        out += [f"- {entry['status']}: {code(entry['nodeid'])} — {md(entry['reason'])}"
                for entry in untested[:MAX_LINES]]
        if len(untested) > MAX_LINES:
            out.append(f"- … {len(untested) - MAX_LINES} more in report.html / evidence.json")
    not_proven = evidence["untested"]["not_proven"]
    out += [f"- not proven: {code(entry['nodeid'])} {md(entry['part'])} — {md(entry['reason'])}"
            for entry in not_proven[:MAX_LINES]]
    if len(not_proven) > MAX_LINES:
        out.append(f"- … {len(not_proven) - MAX_LINES} more not-proven parts in evidence.json")
    for matrix, gaps in evidence["untested"]["never_covered"].items():
        out += [f"- {md(NEVER_COVERED_LABELS.get(dim, dim))} in {md(matrix)}: {md(', '.join(values))}"
                for dim, values in gaps.items()]
    return out


def _usage(evidence: EvidenceDocument) -> list[str]:
    """``### Usage ledger``: resource-seconds per namespace and project, and waste (nothing when the evidence
    has no ledger or the gate created no workload)."""
    usage = evidence.get("usage")
    if not usage or not usage["workloads"]:
        return []
    tables = usage["resource_seconds"]

    def per(table: dict[str, dict[str, float]]) -> str:
        return "; ".join(f"{md(k)}: " + ", ".join(f"{md(r)} {v:g}" for r, v in amounts.items())
                         for k, amounts in list(table.items())[:MAX_LINES]) or "none"

    waste = usage["waste"]
    failed, retries, idle = waste["failed"], waste["retries"], waste["idle"]
    out = ["", "### Usage ledger",
           f"{usage['workloads']} workloads ({usage['simulated']} on simulated nodes); resource-seconds "
           "(request × seconds held)", "",
           f"- by namespace: {per(tables['by_namespace'])}",
           f"- by project: {per(tables['by_project'])}",
           f"- by model: {per(tables['by_model'])}",
           f"- waste: {failed['workloads']} failed workloads, {retries['reruns']} reruns, "
           f"{retries['restarts']} restarts, {idle['seconds']:g} s idle between placement and start"]
    if usage["incomplete"]["count"]:
        out.append(f"- incomplete: {usage['incomplete']['count']} workloads missing a time or quantity "
                   "(evidence.json names them)")
    return out
