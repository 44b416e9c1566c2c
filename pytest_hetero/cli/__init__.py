"""The ``hetero`` command: subcommands that do not need a pytest run. The library never imports this package.

Every sub-command is declared with plain argparse in :mod:`._parser` and runs from its own module
(``probe``, ``pending``, ``cleanup``, ``workflow``, ``signing``, ``evidence``), imported only when
that sub-command runs: ``hetero --version`` and ``hetero --help`` import nothing heavy.
Sub-commands that resolve backends or call writers (``lint``, ``plan``, ``cleanup``, ``report``,
``merge``) use the plugin registry (:mod:`pytest_hetero.hooks.registry`; ``-p MODULE`` adds a plugin).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

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
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Neutralised(out), Neutralised(err)
    try:
        code = int(args.func(args))
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader left (`hetero probe cpu | head`): not an error of ours; stop writing quietly
        # (the interpreter's own flush at exit would raise again, so stdout goes to /dev/null)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        return 0
    finally:
        sys.stdout, sys.stderr = out, err
    return code


class Neutralised(io.TextIOBase):
    """A text stream that writes through :func:`pytest_hetero.reporting.view.terminal_text`: every
    printer of every sub-command (``catalog``, ``trend``, ``verify``, ``explain``…) goes through this
    one sanitiser, so text from a bundle, a matrix or a model (ESC and C1 sequences, BEL, NUL, bidi
    overrides, zero-width characters, carriage returns that overwrite a line) cannot steer the
    terminal or forge a line. Newlines and tabs stay; bytes written to :attr:`buffer` (a rendering
    sent to stdout) are passed as they are."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream

    def write(self, text: str) -> int:
        """Write ``text`` without what :func:`~pytest_hetero.reporting.view.terminal_text` removes;
        returns ``len(text)`` (what the caller handed over)."""
        from pytest_hetero.reporting.view import terminal_text

        self._stream.write(terminal_text(text))
        return len(text)

    def flush(self) -> None:
        """Flush the wrapped stream."""
        self._stream.flush()

    def fileno(self) -> int:
        """The wrapped stream's file descriptor."""
        return self._stream.fileno()

    def isatty(self) -> bool:
        """Whether the wrapped stream is a terminal."""
        return self._stream.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """The wrapped stream's encoding."""
        return getattr(self._stream, "encoding", "utf-8")

    @property
    def buffer(self) -> Any:
        """The wrapped stream's binary buffer (renderings written as bytes)."""
        return self._stream.buffer


if __name__ == "__main__":
    sys.exit(main())
