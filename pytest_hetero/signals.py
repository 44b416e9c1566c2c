"""Signals: SIGTERM handled like Ctrl-C, and pytest-xdist workers that die with their controller.

A nightly job's scheduler stops a run with SIGTERM; it then must end like Ctrl-C (items not
finished are ``not_run (interrupted)``, workloads removed), so SIGTERM raises KeyboardInterrupt
in the controller and in every worker. A controller killed with SIGKILL cannot tell its
workers; on Linux each worker asks the kernel for SIGTERM when its parent dies
(``prctl(PR_SET_PDEATHSIG)``), so it stops its model run and cleans up at once instead of running
on with containers or pods held.

A Ctrl-C during a model run is the run's interruption, never the model's failure, on every engine:
:func:`interruptions_noticed` notes each SIGINT/SIGTERM that reaches the gate while the engine runs
the model and, whatever the engine then returns or raises, ends the item with KeyboardInterrupt
(``not_run (interrupted)``, pytest exit 2). The gate's helper threads take no SIGINT/SIGTERM
(:func:`quiet_thread`), so the kernel delivers them to the main thread at once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
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


INTERRUPTS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM") if hasattr(signal, name))
"""The signals that interrupt a run (Ctrl-C, a scheduler's stop)."""


def quiet_thread() -> None:
    """Block SIGINT and SIGTERM in the calling (helper) thread, so the kernel delivers them to a thread
    that has not blocked them: the main thread, woken from its blocking read at once, where Python runs
    the handlers. Call first thing in every helper thread's target. No-op where ``pthread_sigmask`` is
    missing."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, set(INTERRUPTS))


@contextmanager
def interruptions_noticed(what: str) -> Iterator[list[int]]:
    """Note every SIGINT/SIGTERM that arrives while the block runs (``what``, e.g. "the model run"), and
    end the block with KeyboardInterrupt when one arrived, whatever the block returned or raised.

    Without it, who noticed first was a race: a Ctrl-C that also ended the model process (it is in the
    terminal's process group), or a KeyboardInterrupt lost where Python cannot raise it (a finalizer
    running when the handler ran prints "Exception ignored" and goes on), let the engine return a
    finished run, judged as the model's failure (``no_outputs``, ``nonzero_exit``). The handler records
    the signal before raising, so the record survives any loss of the exception. A signal whose handler
    is SIG_IGN (held off by an engine) or SIG_DFL is left alone. Yields the list of signal numbers seen.
    Main thread only (elsewhere Python cannot set handlers, and the block runs unwatched)."""
    seen: list[int] = []
    previous: dict[int, Any] = {}

    def note(signum: int, frame: Any) -> None:
        seen.append(signum)
        handler = previous.get(signum)
        if callable(handler) and handler is not signal.default_int_handler:
            handler(signum, frame)
        raise KeyboardInterrupt(f"signal {signum} during {what}")

    if threading.current_thread() is threading.main_thread():
        for sig in INTERRUPTS:
            current = signal.getsignal(sig)
            if current in (signal.SIG_IGN, signal.SIG_DFL, None):
                continue
            previous[sig] = signal.signal(sig, note)
    try:
        yield seen
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        if seen:
            raise KeyboardInterrupt(f"signal {seen[0]} during {what}") from exc
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if seen:
        raise KeyboardInterrupt(f"signal {seen[0]} during {what}")
