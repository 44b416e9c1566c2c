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


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(prog="hetero", description="pytest-hetero commands that need no pytest run "
                                     "(run the gate itself with: pytest MATRIX.matrix.yaml)")
    parser.add_argument("--version", action="version", version=f"pytest-hetero {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``hetero``; returns the process exit code (0 ok, 1 check failed, 2 usage/input error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
