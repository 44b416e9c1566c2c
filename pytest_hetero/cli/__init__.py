"""The ``hetero`` command: subcommands that do not need a pytest run. The library never imports this package.

Every sub-command is declared with plain argparse in :mod:`._parser` and runs from its own module
(``probe``, ``pending``, ``cleanup``, ``workflow``, ``signing``, ``evidence``), imported only when
that sub-command runs: ``hetero --version`` and ``hetero --help`` import nothing heavy.
Sub-commands that resolve backends or call writers (``lint``, ``plan``, ``cleanup``, ``report``,
``merge``) use the plugin registry (:mod:`pytest_hetero.hooks.registry`; ``-p MODULE`` adds a plugin).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from pytest_hetero.cli._parser import build_parser

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``hetero``; returns the process exit code (0 ok, 1 check failed, 2 usage/input error). A reader
    that closes the pipe early (``hetero probe cpu | head``) ends the command quietly with 0."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "cleanup":
        args.cleanup_args = extra  # cleanup parses its own arguments: backends add options to it
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args))
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader left (`hetero probe cpu | head`): not an error of ours; stop writing quietly
        # (the interpreter's own flush at exit would raise again, so stdout goes to /dev/null)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
