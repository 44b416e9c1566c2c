"""``hetero explain-pending``: the scheduling/startup reasons ``hetero explain`` finds in a captured text
(arguments: :mod:`pytest_hetero.cli._parser`).

A view of :func:`pytest_hetero.explain.core.explain_text`'s findings, not a reader of its own: the same
text gives the same codes and owners in both commands (issue 31). Reads a file (or ``-`` for stdin) holding
``kubectl describe`` output, an events listing, a Workload / PodGroup / Pod / Event as YAML or JSON, or a
bare scheduler / apiserver message, and prints the findings whose code is a Kubernetes reason
(:data:`pytest_hetero.pending.model.CODES`) as a JSON list (``source``, ``code``, ``category``, ``failure``,
``owner`` from the failure table, ``message``, the finding's quantities and entity), or one line per reason
with ``--text``. Text no reader understands is listed as ``unknown`` with its lines. ``--owner ROLE=TEAM``
names the team of an owner role (``platform``, ``infrastructure``, ``algorithm``, ``business``, ``image``), as a
matrix's ``spec.owners`` does.

Exit codes: 0 at least one reason was explained; 1 nothing could be explained (the ``unknown``
fragments are still printed); 2 the input could not be read at all (missing, a folder, binary).
"""

from __future__ import annotations

import argparse
import json
import sys

from pytest_hetero.errors import HeteroError
from pytest_hetero.explain.model import Report
from pytest_hetero.judge.failures import field_owner
from pytest_hetero.pending.model import CODES, OWNERS


def _read(source: str) -> bytes:
    from pytest_hetero.safeio import read_source

    return read_source(source, "the captured output")


def reasons(report: Report) -> list[dict[str, object]]:
    """The Kubernetes reasons among ``report``'s findings, in input order, as JSON-ready dicts; each
    unrecognised finding as an ``unknown`` reason whose message is its lines."""
    out: list[dict[str, object]] = []
    for f in report.findings:
        if f.code in CODES:
            row: dict[str, object] = {
                "source": str(f.quantities.get("source", f.kind)), "code": f.code, "category": f.category,
                "failure": f.failure, "owner": "undetermined" if f.undetermined else f.owner,
                "owner_role": field_owner(f.failure), "message": f.meaning}
            row.update({k: v for k, v in {**f.entity, **f.quantities}.items() if k not in row})
            out.append(row)
        elif f.severity == "unrecognised":
            out.append({"source": f.kind, "code": "unknown", "category": "unknown", "failure": None, "owner": None,
                        "message": " ".join(line.text.strip() for line in f.lines)})
    return out


def _what(row: dict[str, object]) -> str:
    """``<code> <resource> in flavor <f> (<taint>), <n> more needed on <n>/<m> nodes``, as far as known."""
    text = str(row["code"])
    for key, fmt in (("resource", " {}"), ("flavor", " in flavor {}"), ("taint", " ({})"),
                     ("more_needed", ", {} more needed")):
        if row.get(key) is not None:
            text += fmt.format(row[key])
    if row.get("nodes") is not None:
        text += f" on {row['nodes']}" + (f"/{row['total_nodes']}" if row.get("total_nodes") is not None else "") + \
            " nodes"
    return text


def _line(row: dict[str, object]) -> str:
    """``<source>: <code> <what> [<owner>] -- <message>``."""
    return f"{row['source']}: {_what(row)} [{row['owner'] or 'no owner'}] -- {row['message']}"


def teams_of(items: list[str]) -> dict[str, str]:
    """``--owner ROLE=TEAM`` arguments → ``{role: team}``. Raises ``ValueError`` naming a role outside
    :data:`~pytest_hetero.pending.model.OWNERS` or an empty team."""
    teams = dict(item.partition("=")[::2] for item in items)
    bad = sorted(role for role in teams if role not in OWNERS)
    if bad:
        raise ValueError(f"unknown owner role(s) {bad}; expected ROLE=TEAM with ROLE one of {sorted(OWNERS)} "
                         "(owners come from the failure table; --owner names their teams)")
    empty = sorted(role for role, team in teams.items() if not team.strip())
    if empty:
        raise ValueError(f"no team named for {empty}; expected ROLE=TEAM")
    return teams


def run(args: argparse.Namespace) -> int:
    """Run the command for parsed ``args`` (``source``, ``text``, ``owner``); returns the exit code."""
    from pytest_hetero.explain.core import explain_bytes

    name = "standard input" if args.source == "-" else args.source
    try:
        teams = teams_of(args.owner)
    except ValueError as exc:
        print(f"hetero explain-pending: --owner: {exc}", file=sys.stderr)
        return 2
    try:
        data = _read(args.source)
    except HeteroError as exc:
        print(f"hetero explain-pending: {exc.render()}", file=sys.stderr)
        return 2
    report = explain_bytes(data)
    if not report.readable and report.reason and report.reason.startswith("binary"):
        print(f"hetero explain-pending: cannot read {name}: {report.reason}", file=sys.stderr)
        return 2
    rows = reasons(report)
    for row in rows:
        role = row.pop("owner_role", None)
        if role in teams:
            row["owner"] = teams[str(role)]
    if args.text:
        for row in rows:
            print(_line(row))
        if not rows:
            print("no reason found")
    else:
        print(json.dumps(rows, indent=2))
    return 0 if any(r["code"] != "unknown" for r in rows) else 1

