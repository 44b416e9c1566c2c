"""One bubblewrap sandbox per session and view, forking a run in namespaces of its own per request.

Starting bubblewrap for every model run costs 6-8 ms of a 3 ms plain item on a 2-core machine (new
namespaces, ``--ro-bind / /`` copying every mount of the host, ``/dev``, the hidden paths, then
``setpriv``; measured in ``bench/bench_local_scale.py``). A :class:`Zygote` builds that view once:
bubblewrap starts :mod:`~pytest_hetero.backends.sandbox.init` as PID 1 of a PID namespace, with the
same read-only root, hidden and protected paths and inputs a single run would get, plus the folder of
all run folders (:func:`run_root`) writable. Each run is then forked by it into new mount, IPC and
PID namespaces, with every hidden folder (``/tmp``, ``/var/tmp``, the gate's home…) and ``/dev/shm``
empty again, only its own run folder writable, ``/proc`` of its own, and killed with its whole process
tree at its end — what a bubblewrap per run gave, less the namespace setup shared by the session (UTS
and cgroup namespaces, the root view). Runs of one session are sequential; none can see or signal
another.

Used when the gate runs as root (the supervisor needs ``CAP_SYS_ADMIN`` outside a user namespace to
remount what it must); otherwise each run gets a bubblewrap of its own
(:class:`~pytest_hetero.backends.sandbox.Sandbox` decides). bubblewrap's ``--die-with-parent`` follows
the thread that started the sandbox (the one running items): a sandbox that dies is started again for
the next run.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_hetero.backends.sandbox.init import Answer, RunAnswerDoc, RunLimits, RunRequest

INIT_SOURCE = Path(__file__).with_name("init.py")
"""The program PID 1 of the sandbox runs (its text is handed over with ``-c``: no file of the gate is read
inside)."""

READY_TIMEOUT_S = 30.0
"""How long a sandbox may take to say it is ready."""

CLOSE_TIMEOUT_S = 5.0
"""How long a closed sandbox may take to exit before it is killed."""


class ZygoteFailed(Exception):
    """The sandbox could not start, or stopped answering: ``message`` is bubblewrap's or the kernel's reason."""


@dataclass
class RunAnswer:
    """What the supervisor of one run answered: ``status`` (wait status; None with ``error``), CPU seconds
    ``utime``/``stime``, ``maxrss`` and ``inherited_kib`` (KiB), or ``error`` (the run never started, or
    with ``lost`` its supervisor vanished)."""

    status: int | None = None
    utime: float = 0.0
    stime: float = 0.0
    maxrss: int = 0
    inherited_kib: int = 0
    error: str = ""
    lost: bool = False
    """The supervisor ended without an answer (the sandbox was killed): the run may have started."""


def run_root() -> Path:
    """The folder of this process's run folders (``<tmp>/hetero-run-<pid>-runs``, mode 0711, created
    once): its name carries the gate's pid for ``sweep_run_folders``; 0711 lets the sandbox user reach
    its own run folder and nothing else in it."""
    pid = os.getpid()
    root = _ROOTS.get(pid)
    if root is None or not root.is_dir():
        root = Path(tempfile.gettempdir()) / f"hetero-run-{pid}-runs"
        try:
            root.mkdir(mode=0o711)
        except FileExistsError:
            pass
        _ROOTS[pid] = root
    return root


_ROOTS: dict[int, Path] = {}


class Zygote:
    """One running sandbox (bubblewrap + :mod:`init`). ``bwrap`` and ``args`` (its arguments, without the
    command) as :class:`~pytest_hetero.backends.sandbox.Sandbox` builds them; ``unmount``: paths bound only
    so the interpreter could start, taken away before the first run.

    Raises ZygoteFailed from :meth:`start` and :meth:`run` (the caller then counts a refused start)."""

    def __init__(self, bwrap: str, args: list[str], unmount: list[str], env: dict[str, str], python: str,
                 root: Path) -> None:
        self.bwrap = bwrap
        self.python = python
        self.root = root
        self._root_id: tuple[int, int] | None = None
        self.args = args
        self.unmount = unmount
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.control: socket.socket | None = None

    def start(self) -> None:
        """Start bubblewrap and wait (up to :data:`READY_TIMEOUT_S`) for PID 1 to say it is ready."""
        st = os.stat(self.root)
        self._root_id = (st.st_dev, st.st_ino)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fds = args_pipe(b"".join(a.encode() + b"\0" for a in self.args))
        argv = [self.bwrap, "--args", str(fds.read), "--", self.python, "-I", "-S", "-c",
                INIT_SOURCE.read_text("utf-8"), str(theirs.fileno()), *self.unmount]
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, env=self.env, pass_fds=(fds.read, theirs.fileno()),
                                         start_new_session=True)
        except OSError as exc:
            ours.close()
            raise ZygoteFailed(f"cannot start {self.bwrap}: {exc.strerror}") from None
        finally:
            os.close(fds.read)
            theirs.close()
        self.control = ours
        answer = self._receive(ours, READY_TIMEOUT_S)
        if answer is None or "error" in answer:
            why = (answer["error"] if answer is not None else "") or self._stderr() \
                or "the sandbox ended before it was ready"
            self.close()
            raise ZygoteFailed(str(why))
        assert self.proc.stderr is not None
        self.proc.stderr.close()  # nothing more is written there; a write now fails instead of blocking

    def _stderr(self) -> str:
        """What bubblewrap wrote before it gave up (its ``bwrap: …`` line)."""
        if self.proc is None or self.proc.stderr is None:
            return ""
        try:
            self.proc.wait(timeout=CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return ""
        return self.proc.stderr.read().decode("utf-8", "replace").strip()[-2000:]

    @staticmethod
    def _receive(sock: socket.socket, timeout_s: float) -> Answer | None:
        """One JSON message from ``sock`` within ``timeout_s``; None on EOF or timeout."""
        if not select.select([sock], [], [], timeout_s)[0]:
            return None
        try:
            data = sock.recv(1 << 16)
        except OSError:
            return None
        if not data:
            return None
        answer: Answer = json.loads(data)
        return answer

    def alive(self) -> bool:
        """True while the sandbox runs."""
        return self.proc is not None and self.proc.poll() is None and self.control is not None

    def stale(self) -> bool:
        """True when the folder of the run folders is no longer the one bound at the start (removed and made
        again, e.g. by another launcher's close): new run folders would not be inside this sandbox."""
        if self._root_id is None:
            return False
        try:
            st = os.stat(self.root)
        except OSError:
            return True
        return (st.st_dev, st.st_ino) != self._root_id

    def submit(self, argv: list[str], env: dict[str, str], cwd: Path, fresh: list[tuple[str, str]],
               keep: list[tuple[str, str]], user: tuple[int, int] | None,
               limits: RunLimits | None = None) -> ZygoteRun:
        """Ask for one run of ``argv`` (environment ``env``, working folder ``cwd``), with an empty tmpfs on
        each ``fresh`` (path, mode) and each ``keep`` (path, ``ro``/``rw``) bound back above them, outermost
        first (the run folder, ``rw``, last), as ``user`` (uid, gid; None: uid 0), without any capability,
        with ``limits`` (``Limits.facts``: tmpfs size, RLIMIT_FSIZE, RLIMIT_NPROC, RLIMIT_DATA);
        returns its :class:`ZygoteRun` (stdout/stderr read ends, the
        link). Raises ZygoteFailed when the sandbox no longer takes requests."""
        if not self.alive():
            raise ZygoteFailed("the sandbox is gone")
        assert self.control is not None
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        link, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        request: RunRequest = {"argv": argv, "env": env, "cwd": str(cwd), "fresh": [[p, m] for p, m in fresh],
                               "keep": [[p, m] for p, m in keep], "user": list(user) if user is not None else None,
                               "limits": limits}
        try:
            socket.send_fds(self.control, [json.dumps(request).encode()], [out_w, err_w, far.fileno()])
        except OSError as exc:
            for fd in (out_r, err_r):
                os.close(fd)
            link.close()
            raise ZygoteFailed(f"the sandbox takes no request: {exc.strerror}") from None
        finally:
            os.close(out_w)
            os.close(err_w)
            far.close()
        return ZygoteRun(out_r, err_r, link)

    def close(self) -> str:
        """End the sandbox (EOF on its control socket; killed after :data:`CLOSE_TIMEOUT_S`); returns ``""``
        or why it did not exit by itself."""
        why = ""
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=CLOSE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                why = f"sandbox pid {self.proc.pid} did not exit within {CLOSE_TIMEOUT_S:g} s and was killed"
            if self.proc.stderr is not None:
                self.proc.stderr.close()
            self.proc = None
        return why


class ZygoteRun:
    """One run in a :class:`Zygote`: ``stdout``/``stderr`` (read ends of its pipes) and the reaper verbs
    of ``backends.local`` (``poll``, ``expire``, ``kill``, ``wait``, ``fired``) over its link."""

    def __init__(self, stdout: int, stderr: int, link: socket.socket) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.link = link
        self.fired = False
        self.deadline = float("inf")
        self.answer: RunAnswer | None = None

    def arm(self, timeout_s: float) -> None:
        """Start the run's clock: it is killed ``timeout_s`` from now."""
        self.deadline = time.monotonic() + timeout_s

    def expire(self) -> None:
        """Kill the run once its deadline has passed (sets :attr:`fired`)."""
        if not self.fired and self.answer is None and time.monotonic() >= self.deadline:
            self.fired = True
            self.kill()

    def kill(self) -> None:
        """Ask the supervisor to SIGKILL the run (a no-op once answered)."""
        if self.answer is None:
            try:
                self.link.send(b"kill")
            except OSError:
                pass

    def poll(self) -> bool:
        """True (with :attr:`answer`) once the supervisor has answered."""
        if self.answer is None and select.select([self.link], [], [], 0)[0]:
            self._read()
        return self.answer is not None

    def _read(self) -> None:
        try:
            data = self.link.recv(1 << 16)
        except OSError as exc:
            data, why = b"", exc.strerror
        else:
            why = "its supervisor ended without an answer"
        if not data:
            self.answer = RunAnswer(error=f"the run was lost: {why}", lost=True)
            return
        got: RunAnswerDoc = json.loads(data)
        self.answer = RunAnswer(status=got["status"], utime=float(got["utime"]), stime=float(got["stime"]),
                                maxrss=int(got["maxrss"]), inherited_kib=int(got["inherited_kib"])) \
            if "status" in got else RunAnswer(error=str(got["error"]))

    def wait(self, poll_s: float) -> RunAnswer:
        """Block until answered, killing the run at its deadline; close the link."""
        while self.answer is None:
            self.expire()
            left = poll_s if self.fired else max(0.0, min(poll_s, self.deadline - time.monotonic()))
            if select.select([self.link], [], [], left)[0]:
                self._read()
        self.link.close()
        return self.answer


@dataclass
class _Fds:
    """A pipe whose read end carries bwrap's arguments (``--args FD``)."""

    read: int = -1
    fds: tuple[int, ...] = field(default_factory=tuple)


def args_pipe(blob: bytes) -> _Fds:
    """A pipe holding ``blob`` (written whole, write end closed) for bwrap's ``--args``; the caller
    passes ``read`` to the child and closes it after the start. ``blob`` must fit the pipe (64 KiB on Linux)."""
    if not blob:
        return _Fds()
    read, write = os.pipe()
    try:
        if len(blob) > 65536:
            raise ValueError(f"sandbox arguments are {len(blob)} bytes, more than a pipe holds")
        os.write(write, blob)
    finally:
        os.close(write)
    return _Fds(read=read, fds=(read,))
