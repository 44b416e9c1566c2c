"""``hetero report --from-journal DIR``: rebuild a complete bundle from a run's journal alone.

For a run that crashed or was killed (even with SIGKILL): every item that finished is in the
journal; everything planned but unfinished becomes ``not_run (interrupted …)`` in untested
scope; the renderings, manifest and statement are written (and signed with ``--sign-key``),
so the recovered bundle verifies like any other.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_hetero.errors import HeteroError
from pytest_hetero.evidence.recorder import assemble
from pytest_hetero.reporting.terminal import summary_lines


def add_parser(subparsers: Any) -> None:
    """Register ``hetero report``."""
    parser = subparsers.add_parser("report", help="rebuild a bundle (evidence.json, renderings, signature) "
                                                  "from a run's journal, e.g. after a crash")
    parser.add_argument("--from-journal", metavar="DIR", required=True, type=Path,
                        help="the run's report folder (holding journal.jsonl)")
    parser.add_argument("--sign-key", metavar="PEM", type=Path, default=None,
                        help="Ed25519 private key to sign the rebuilt bundle")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Assemble, render, manifest and sign; print the summary. Exit 0 ok, 2 unreadable journal/key."""
    from pytest_hetero.reporting.writers import finish_bundle, write_renderings

    bundle = args.from_journal.resolve()
    try:
        evidence = assemble(bundle)
        write_renderings(evidence, bundle, args.sign_key)
        finish_bundle(evidence, bundle, args.sign_key)
    except HeteroError as exc:
        print(f"hetero report: {exc.render()}", file=sys.stderr)
        return 2
    for line in summary_lines(evidence, bundle):
        print(line)
    return 0
