"""``hetero prune REPORTS --keep N --older-than T [--baseline PATH]… [--dry-run] [--json]``: retention of run
folders (:mod:`pytest_hetero.bundle.retention`). Exit 0 done (or listed with ``--dry-run``), 1 a removal
failed, 2 bad arguments or a baseline that names nothing."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pytest_hetero.durations import EXAMPLES, parse_duration
from pytest_hetero.errors import HeteroError


def run(args: argparse.Namespace) -> int:
    """Run ``hetero prune`` for parsed ``args``; returns the exit code."""
    from pytest_hetero.bundle.retention import plan, remove

    try:
        older = None if args.older_than is None else parse_duration(args.older_than)
    except ValueError:
        sys.stderr.write(f"hetero prune: --older-than {args.older_than!r} is not a duration ({EXAMPLES})\n")
        return 2
    try:
        decisions = plan(Path(args.reports), keep=args.keep, older_than_s=older, baselines=list(args.baseline))
    except HeteroError as exc:
        sys.stderr.write(f"hetero prune: {exc.render()}\n")
        return 2
    failed = 0
    rows: list[dict[str, str | float]] = []
    for d in decisions:
        error = remove(d) if d.action == "remove" and not args.dry_run else None
        failed += error is not None
        verb = ("would remove" if args.dry_run else "removed" if error is None else f"FAILED ({error})") \
            if d.action == "remove" else "kept"
        rows.append({"path": str(d.path), "action": d.action, "done": verb, "why": d.why, "age_s": round(d.age_s, 1)})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            print(f"{row['done']} {row['path']} (age {float(row['age_s']) / 86400:.1f}d: {row['why']})")
        removed = sum(r["action"] == "remove" for r in rows)
        print(f"{removed} of {len(rows)} run folders {'to remove' if args.dry_run else 'removed'}")
    return 1 if failed else 0
