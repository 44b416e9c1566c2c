"""Signals: SIGTERM handled like Ctrl-C, and pytest-xdist workers that die with their controller.

A nightly job's scheduler stops a run with SIGTERM; it then must end like Ctrl-C (items not
finished are ``not_run (interrupted)``, workloads removed), so SIGTERM raises KeyboardInterrupt
in the controller and in every worker. A controller killed with SIGKILL cannot tell its
workers; on Linux each worker asks the kernel for SIGTERM when its parent dies
(``prctl(PR_SET_PDEATHSIG)``), so it stops its model run and cleans up at once instead of running
on with containers or pods held.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

PR_SET_PDEATHSIG = 1
"""``prctl`` option (linux/prctl.h): signal to deliver when the parent thread exits."""


def _sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def catch_sigterm() -> Any:
    """Make SIGTERM raise KeyboardInterrupt; return the handler it replaced (give it back with
    :func:`restore_sigterm`), or None where nothing was replaced: no SIGTERM on this system, or not
    the main thread (pytest embedded in another program)."""
    if not hasattr(signal, "SIGTERM"):
        return None
    try:
        return signal.signal(signal.SIGTERM, _sigterm)
    except ValueError:
        return None


def restore_sigterm(previous: Any) -> None:
    """Give SIGTERM back to ``previous``, the handler :func:`catch_sigterm` returned (None: nothing
    to give back). Matters for in-process pytest."""
    if previous is not None:
        try:
            signal.signal(signal.SIGTERM, previous)
        except ValueError:
            pass


def follow_controller(controller_pid: int | None) -> None:
    """In a pytest-xdist worker (Linux): have the kernel send SIGTERM when the controller (our parent,
    pid ``controller_pid``) dies. If it already died, SIGTERM now. No-op elsewhere, without a pid,
    or where ``prctl`` cannot be called."""
    if controller_pid is None or not parent_death_signal(signal.SIGTERM):
        return
    if os.getppid() != controller_pid:
        os.kill(os.getpid(), signal.SIGTERM)


def parent_death_signal(sig: int) -> bool:
    """Ask Linux to send ``sig`` to this process when its parent (thread) exits
    (``prctl(PR_SET_PDEATHSIG)``). Also used in a forked child before exec. True when set; False on
    other systems or where prctl cannot be called. Never raises."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return bool(ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig)) == 0)
    except (OSError, AttributeError):
        return False
