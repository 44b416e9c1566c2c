"""``hetero explain-pending``: explain a captured pending/unschedulable workload offline (arguments:
:mod:`pytest_hetero.cli._parser`).

Reads a file (or ``-`` for stdin) holding ``kubectl describe`` output, an events listing, a
Workload / PodGroup / Pod / Event as YAML or JSON, or a bare scheduler / apiserver message, and
prints the normalised reasons as a JSON list of Reason dicts, or one line per reason with ``--text``.
Each reason's owner is the failure table's (:mod:`pytest_hetero.judge.failures`); ``--owner ROLE=TEAM``
names the team of an owner role (``platform``, ``infrastructure``, ``algorithm``, ``business``, ``image``),
as a matrix's ``spec.owners`` does.

Exit codes: 0 at least one reason was explained; 1 nothing could be explained (the ``unknown``
fragments are still printed); 2 the input could not be read at all.
"""

from __future__ import annotations

import argparse
import json
import sys

from pytest_hetero.errors import HeteroError
from pytest_hetero.pending.model import OWNERS, Reason
from pytest_hetero.pending.normalise import explain, summarise


def _read(source: str) -> bytes:
    from pytest_hetero.safeio import read_source

    return read_source(source, "the captured output")


def _line(reason: Reason, teams: dict[str, str]) -> str:
    """``<source>: <code> <what> [<owner>] -- <original message>``."""
    return f"{reason.source}: {summarise([reason], owners=teams)} -- {reason.message}"


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
    name = "standard input" if args.source == "-" else args.source
    try:
        data = _read(args.source)
    except HeteroError as exc:
        print(f"hetero explain-pending: {exc.render()}", file=sys.stderr)
        return 2
    try:
        teams = teams_of(args.owner)
    except ValueError as exc:
        print(f"hetero explain-pending: --owner: {exc}", file=sys.stderr)
        return 2
    try:
        reasons = explain(data)
    except HeteroError as exc:
        print(f"hetero explain-pending: cannot read {name}: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr)
        return 2
    if args.text:
        for reason in reasons:
            print(_line(reason, teams))
        if not reasons:
            print("no reason found")
    else:
        shown = [{**r.to_dict(), "owner": teams.get(r.owner, r.owner)} for r in reasons]
        print(json.dumps(shown, indent=2))
    return 0 if any(r.code != "unknown" for r in reasons) else 1
