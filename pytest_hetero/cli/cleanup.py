"""Remove what crashed runs left behind (containers, volumes, images, pods, Jobs), per backend.

Every backend that can clean up implements ``pytest_hetero_cleanup`` (and adds its own options,
prefixed by its name, with ``pytest_hetero_cleanup_options``); the built-ins clean Docker
(``--docker-host``) and Kubernetes (``--kube-context``, ``--kube-namespace``). Plugins come from
the ``pytest_hetero`` entry points and ``-p MODULE``. ``--backend all`` (the default) asks every
backend.

Selection: objects labelled ``pytest-hetero.run-id`` whose ``pytest-hetero.created-at`` label
(else the engine's creation time) is older than ``--older-than``, and/or whose run id is
``--run-id``. At least one of the two is required, so a bare ``hetero cleanup`` never removes
a run that is still going.

Exit codes: 0 every selected object removed (or listed with ``--dry-run``); 1 some removal
failed; 2 bad arguments or a backend that cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_hetero.durations import EXAMPLES, parse_duration
from pytest_hetero.errors import HeteroError
from pytest_hetero.hooks.registry import plugin_manager

if TYPE_CHECKING:
    from pytest_hetero.backends.labels import CleanupEntry


def build_parser(hook: Any) -> argparse.ArgumentParser:
    """The ``hetero cleanup`` parser: the shared options, then each backend's (``hook`` is the
    registry's hook relay, asked ``pytest_hetero_cleanup_options``)."""
    parser = argparse.ArgumentParser(prog="hetero cleanup", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="all", metavar="NAME",
                        help="which backend's leftovers to remove, e.g. docker or kubernetes (default: all)")
    parser.add_argument("--older-than", metavar="DURATION", default=None,
                        help="only objects created more than DURATION ago (e.g. 90s, 30m, 2h, 2d)")
    parser.add_argument("--run-id", metavar="ID", default=None, help="only objects of this run")
    parser.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of one line per object")
    parser.add_argument("-p", dest="plugins", action="append", default=[], metavar="MODULE",
                        help="import MODULE as a pytest-hetero plugin (repeatable)")
    hook.pytest_hetero_cleanup_options(parser=parser)
    return parser


def main(argv: Sequence[str]) -> int:
    """Run ``hetero cleanup`` with its arguments ``argv``; returns the exit code (see module docstring)."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("-p", dest="plugins", action="append", default=[])
    try:
        hook = plugin_manager(early.parse_known_args(list(argv))[0].plugins).hook
    except HeteroError as exc:
        sys.stderr.write(f"hetero cleanup: {exc.render()}\n")
        return 2
    args = build_parser(hook).parse_args(list(argv))
    return run(args, hook)


def run(args: argparse.Namespace, hook: Any) -> int:
    """Clean up for parsed ``args``, asking ``hook.pytest_hetero_cleanup``; returns the exit code."""
    if args.older_than is None and args.run_id is None:
        sys.stderr.write("hetero cleanup: give --older-than DURATION and/or --run-id ID "
                         "(a bare cleanup could remove a run that is still going)\n")
        return 2
    try:
        args.older_than_s = None if args.older_than is None else parse_duration(args.older_than)
    except ValueError:
        sys.stderr.write(f"hetero cleanup: --older-than {args.older_than!r} is not a duration ({EXAMPLES})\n")
        return 2
    reports = [r for found in hook.pytest_hetero_cleanup(backend=None if args.backend == "all" else args.backend,
                                                         args=args) for r in found or ()]
    if args.backend != "all" and not reports:
        sys.stderr.write(f"hetero cleanup: no installed plugin cleans up backend {args.backend!r} "
                         "(built in: docker, kubernetes)\n")
        return 2
    entries: list[CleanupEntry] = []
    unreachable = False
    for report in reports:
        entries += report.entries
        if report.error is not None:
            sys.stderr.write(f"hetero cleanup: {report.backend}: {report.error}\n")
            unreachable = True
    if args.json:
        print(json.dumps(entries, indent=2))
    else:
        for e in entries:
            verb = "would remove" if args.dry_run else ("removed" if e["removed"] else f"FAILED ({e['error']})")
            age = "?" if e["age_s"] is None else f"{e['age_s'] / 3600:.1f}h"
            print(f"{verb} {e['backend']} {e['kind']} {e['name']} (run {e['run_id']}, age {age})")
        if not entries:
            print("nothing to clean up")
    if unreachable:
        return 2
    return 1 if any(e["error"] for e in entries) else 0
