"""The ``hetero`` command: subcommands that do not need a pytest run.

Each subcommand lives in the module of its concern and exposes
``add_parser(subparsers) -> None``, which registers an ``argparse`` sub-parser whose
``func`` default is called with the parsed namespace and returns the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from pytest_hetero import __version__

COMMAND_MODULES: tuple[str, ...] = (
    "pytest_hetero.probes.cli",
    "pytest_hetero.pending.cli",
    "pytest_hetero.explain.cli",
    "pytest_hetero.backends.docker_cli",
    "pytest_hetero.workflow_cli",
    "pytest_hetero.signing_cli",
    "pytest_hetero.evidence.cli",
)
"""Modules that register subcommands, in help order."""

DIRECT: dict[str, str] = {
    "explain": "pytest_hetero.explain.cli",
    "explain-pending": "pytest_hetero.pending.cli",
    "probe": "pytest_hetero.probes.cli",
}
"""Subcommand -> the one module that registers it, for commands run on pasted text: ``hetero explain``
imports only its own module, not the Docker, Kubernetes and signing stacks the other commands load
(about 2 s of imports on a busy machine, against a few hundred ms of reading)."""


def build_parser(modules: Sequence[str] = COMMAND_MODULES) -> argparse.ArgumentParser:
    """Return the top-level parser with the subcommands of ``modules`` (default: every one) registered."""
    parser = argparse.ArgumentParser(prog="hetero", description="pytest-hetero commands that need no pytest run "
                                     "(run the gate itself with: pytest MATRIX.matrix.yaml)")
    parser.add_argument("--version", action="version", version=f"pytest-hetero {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in modules:
        importlib.import_module(name).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``hetero``; returns the process exit code (0 ok, 1 check failed, 2 usage/input error).

    A subcommand named in :data:`DIRECT` as the first argument is parsed by a parser holding only its
    module (same options, help and errors for that subcommand); anything else gets every subcommand."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    direct = DIRECT.get(args_list[0]) if args_list else None
    parser = build_parser((direct,) if direct else COMMAND_MODULES)
    args = parser.parse_args(args_list)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
