"""``hetero explain-pending``: explain a captured pending/unschedulable workload offline (arguments:
:mod:`pytest_hetero.cli._parser`).

Reads a file (or ``-`` for stdin) holding ``kubectl describe`` output, an events listing, a
Workload / PodGroup / Pod / Event as YAML or JSON, or a bare scheduler / apiserver message, and
prints the normalised reasons as a JSON list of Reason dicts, or one line per reason with ``--text``.

Exit codes: 0 at least one reason was explained; 1 nothing could be explained (the ``unknown``
fragments are still printed); 2 the input could not be read at all.
"""

from __future__ import annotations

import argparse
import json
import sys

from pytest_hetero.errors import HeteroError
from pytest_hetero.pending.model import Reason
from pytest_hetero.pending.normalise import explain, summarise


def _read(source: str) -> bytes:
    from pytest_hetero.safeio import read_source

    return read_source(source, "the captured output")


def _line(reason: Reason) -> str:
    """``<source>: <code> <what> [<owner>] -- <original message>``."""
    return f"{reason.source}: {summarise([reason])} -- {reason.message}"


def run(args: argparse.Namespace) -> int:
    """Run the command for parsed ``args`` (``source``, ``text``, ``owner``); returns the exit code."""
    name = "standard input" if args.source == "-" else args.source
    try:
        data = _read(args.source)
    except HeteroError as exc:
        print(f"hetero explain-pending: {exc.render()}", file=sys.stderr)
        return 2
    owners = dict(item.partition("=")[::2] for item in args.owner)
    try:
        reasons = explain(data, owners=owners)
    except ValueError as exc:
        print(f"hetero explain-pending: --owner: {exc}", file=sys.stderr)
        return 2
    except HeteroError as exc:
        print(f"hetero explain-pending: cannot read {name}: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr)
        return 2
    if args.text:
        for reason in reasons:
            print(_line(reason))
        if not reasons:
            print("no reason found")
    else:
        print(json.dumps([r.to_dict() for r in reasons], indent=2))
    return 0 if any(r.code != "unknown" for r in reasons) else 1
