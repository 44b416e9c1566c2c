"""PID 1 of a session's sandbox: starts each confined run in namespaces of its own.

This file is not imported by the gate: its text runs inside bubblewrap as
``python -I -S -c <text> <control fd>`` (:mod:`pytest_hetero.backends.sandbox.zygote`), so it uses
the standard library only and reads no file of the gate. bubblewrap has already built the session's
view (read-only root, hidden paths, protected paths, the inputs bound back, the folder of the run
folders writable) and left this process ``CAP_SYS_ADMIN``, ``CAP_SETUID``, ``CAP_SETGID`` and
``CAP_SETPCAP`` (to set each run up and drop them); what the gate asked to see only while starting (its own
interpreter) is unmounted before the first run.

Protocol, over the ``SOCK_SEQPACKET`` control socket (one message each, JSON):

- this process → gate: ``{"ready": true}`` once set up (or ``{"error": …}`` and exit);
- gate → this process: a run request ``{"argv", "env", "cwd", "fresh": [[path, mode], …],
  "keep": [[path, "ro"|"rw"], …], "user": [uid, gid] | null, "limits": {tmpfs_bytes, file_bytes, processes,
  memory_bytes} | null}`` (the run folder is the last ``keep``)
  with three descriptors (SCM_RIGHTS): the run's stdout and stderr write ends and its *link*, one end
  of a socket pair of its own; an empty message (or EOF) ends the session.

For each request a supervisor process is forked. It takes new mount, IPC and PID namespaces
(``unshare(2)``), mounts a fresh size-limited tmpfs on every ``fresh`` path (``/tmp``, ``/var/tmp``,
``/dev/shm``, the folder of the run folders: nothing one run writes there is seen by the next), binds the
run's own folder back writable, and forks the run: PID 1 of the new PID namespace, with ``/proc`` of its
own (``/proc/sys`` read-only), its resource limits set, a new session, stdin ``/dev/null``, only its
stdout/stderr open, exec'd (``execvpe``, ``PATH`` of its environment) as ``argv`` once every capability
is gone and, with ``user``, it runs as that uid and
gid (:func:`_drop_privileges`: what ``setpriv`` did for a bubblewrap per run). The supervisor then
waits for the run or a ``kill`` on the link (or the link's EOF: the gate is gone), kills the run's
PID 1 (the kernel then kills every process of its namespace), and answers on the link:
``{"status": wait status, "utime", "stime" (s), "maxrss" (KiB, wait4 of the run),
"inherited_kib" (its own peak RSS at the fork: where the run's ru_maxrss starts)}``
or ``{"error": why the run could not be set up}`` (the code under test never ran).
"""

import ctypes
import json
import os
import resource
import select
import signal
import socket
import sys
import warnings  # noqa: F401 - os.execvpe imports it late, once the interpreter is unmounted
from typing import Any, Literal, TypedDict, final

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = \
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18
MNT_DETACH = 2

PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class _CapHeader(ctypes.Structure):
    """``struct __user_cap_header_struct`` (linux/capability.h)."""

    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    """``struct __user_cap_data_struct`` (linux/capability.h; two of them for version 3)."""

    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


with open("/proc/sys/kernel/cap_last_cap") as _fh:
    CAP_LAST = int(_fh.read())
KEPT = (6, 7, 8, 21)
"""CAP_SETGID, CAP_SETUID, CAP_SETPCAP, CAP_SYS_ADMIN: what PID 1 keeps in its bounding set (every other
capability is dropped from it once, at start); a run drops these last ones too."""
bounding = list(range(CAP_LAST + 1))
"""Capabilities still in the bounding set (inherited by every supervisor and run)."""


class SetupFailed(Exception):
    """A step of a run's namespaces failed (the message names it and the kernel's reason)."""


def _check(ret: int, what: str) -> None:
    if ret != 0:
        raise SetupFailed(f"{what}: {os.strerror(ctypes.get_errno())}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                       flags, data.encode() if data else None), f"mount {fstype or source} on {target}")


class RunLimits(TypedDict):
    """A run request's ``limits`` (the gate's ``Limits.facts``): tmpfs size, ``RLIMIT_FSIZE``, ``RLIMIT_NPROC``,
    ``RLIMIT_DATA`` (bytes, count; 0: none)."""

    tmpfs_bytes: int
    file_bytes: int
    processes: int
    memory_bytes: int


class RunRequest(TypedDict):
    """A run request (module docstring; the gate writes every key): ``argv``, ``env``, ``cwd``, the ``fresh``
    (path, tmpfs mode) and ``keep`` (path, ``ro``/``rw``) pairs, ``user`` ([uid, gid]; None: uid 0), ``limits``."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    fresh: list[list[str]]
    keep: list[list[str]]
    user: list[int] | None
    limits: RunLimits | None


@final
class Ready(TypedDict):
    """The message on the control socket once set up (module docstring)."""

    ready: Literal[True]


@final
class RunEnded(TypedDict):
    """The answer on a run's link once the run ended: its wait ``status``, ``utime``/``stime`` (s), ``maxrss`` and
    ``inherited_kib`` (KiB)."""

    status: int
    utime: float
    stime: float
    maxrss: int
    inherited_kib: int


@final
class RunRefused(TypedDict):
    """The answer on a run's link when the run never started: the ``error``."""

    error: str


RunAnswerDoc = RunEnded | RunRefused
"""Every answer on a run's link: exactly one of them, once."""
Answer = Ready | RunRefused
"""Every message on the control socket: ready, or why not (then PID 1 exits)."""


def _send(sock: socket.socket, message: Answer | RunAnswerDoc) -> None:
    try:
        sock.send(json.dumps(message).encode())
    except OSError:
        pass  # the gate is gone: nobody to tell


def _namespaces(request: RunRequest) -> None:
    """In the supervisor: new mount, IPC and PID namespaces; an empty tmpfs on each ``fresh`` path; each
    ``keep`` path (the inputs under them, then the run folder) bound back at its own path, read-only or
    writable, with what is mounted below it (protected paths stay hidden)."""
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    keep = [(str(path), mode, os.open(path, os.O_PATH | os.O_CLOEXEC))  # reachable once hidden below
            for path, mode in request["keep"]]
    limits = request["limits"]
    size = limits["tmpfs_bytes"] if limits is not None else 0
    for path, mode in request["fresh"]:
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode}" + (f",size={size}" if size else ""))
    for path, mode, fd in keep:
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(path, mode=0o755, exist_ok=True)
        elif not os.path.exists(path):
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        if mode == "ro":
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)


PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")
"""Parts of a run's ``/proc`` bound read-only over themselves (as bubblewrap's ``--proc`` does)."""


def _limit(limits: RunLimits | None) -> None:
    """Set the run's resource limits (``Limits.facts`` of the gate; None: none of them): ``RLIMIT_FSIZE``,
    ``RLIMIT_NPROC``, ``RLIMIT_DATA``, and no core files (always)."""
    given = () if limits is None else ((limits["file_bytes"], resource.RLIMIT_FSIZE),
                                       (limits["processes"], resource.RLIMIT_NPROC),
                                       (limits["memory_bytes"], resource.RLIMIT_DATA))
    for value, which in given:
        if value > 0:
            resource.setrlimit(which, (value, value))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _drop_privileges(user: list[int] | None) -> None:
    """What ``setpriv --reuid --regid --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs``
    does, without its exec: every capability out of the bounding set and the ambient set; with ``user``
    ([uid, gid]) no supplementary groups and that uid and gid (the kernel then clears the permitted and
    effective sets); then the permitted, effective and inheritable sets emptied, and ``no_new_privs``
    (no setuid bit or file capability grants anything at the exec). Without ``user`` the run stays uid 0
    with no capability at all."""
    for cap in bounding:
        _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap} from the bounding set")
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear the ambient capabilities")
    if user is not None:
        uid, gid = int(user[0]), int(user[1])
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    header, data = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "empty the capability sets")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "set no_new_privs")


PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
KEYRING_SYSCALLS = ((0xC000003E, (248, 249, 250, 0x40000000 + 248, 0x40000000 + 249, 0x40000000 + 250)),
                    (0x40000003, (286, 287, 288)), (0xC00000B7, (217, 218, 219)))
"""(AUDIT_ARCH_*, the numbers of ``add_key``, ``request_key``, ``keyctl``): x86_64 (and its x32 ABI), i386, aarch64."""


class _SockFprog(ctypes.Structure):
    """``struct sock_fprog`` (linux/filter.h)."""

    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def keyring_filter() -> bytes:
    """The seccomp program (``struct sock_filter`` array, native byte order: what ``prctl(PR_SET_SECCOMP)`` and
    bubblewrap's ``--seccomp FD`` take) making ``add_key``, ``request_key`` and ``keyctl`` fail with EPERM, as
    Docker's default profile does, on the :data:`KEYRING_SYSCALLS` architectures; every other call is allowed. The
    kernel's key rings are neither files, processes nor IPC objects, so nothing else resets them: without it a run
    reads and writes the gate's session key ring (it inherits and possesses it: a login's credentials are there)
    and the sandbox user's user key ring, which outlives every run (one run's key is the next one's)."""
    import struct

    ld_abs, jeq, ret = 0x20, 0x15, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    prog = [(ld_abs, 0, 0, 4)]  # A = seccomp_data.arch
    for arch, numbers in KEYRING_SYSCALLS:
        m = len(numbers)
        prog.append((jeq, 0, m + 3, arch))  # another arch: skip this block (A still holds the arch)
        prog.append((ld_abs, 0, 0, 0))  # A = seccomp_data.nr
        prog += [(jeq, m - i, 0, n) for i, n in enumerate(numbers)]
        prog += [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    prog.append((ret, 0, 0, allow))
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)


def _deny_keyrings() -> None:
    """Install :func:`keyring_filter` on this process (inherited by every child). Needs ``no_new_privs`` (set by
    :func:`_drop_privileges`)."""
    program = keyring_filter()
    code = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(code))
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0),
           "install the seccomp filter denying the key ring calls")


def _exec_run(request: RunRequest, out: int, err: int, report: int) -> None:
    """In the run (PID 1 of its namespace): /proc, session, descriptors, working folder, exec. Never
    returns; a failure before the exec is written to ``report`` (close-on-exec)."""
    try:
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD):  # Python ignores the first two
            signal.signal(sig, signal.SIG_DFL)
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        for sub in PROC_READ_ONLY:  # what bubblewrap's --proc covers: the host's sysctls stay unwritable
            path = f"/proc/{sub}"
            if os.path.exists(path):
                _mount(path, path, None, MS_BIND | MS_REC)
                _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
        _limit(request["limits"])
        os.setsid()
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.closerange(3, report)
        os.closerange(report + 1, 1 << 16)
        os.chdir(str(request["cwd"]))
        _drop_privileges(request["user"])
        _deny_keyrings()
        argv = [str(a) for a in request["argv"]]
        os.execvpe(argv[0], argv, {str(k): str(v) for k, v in request["env"].items()})
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the gate
        os.write(report, f"{type(exc).__name__}: {exc}".encode()[:4000])
    os._exit(127)


def _supervise(request: RunRequest, out: int, err: int, link: socket.socket) -> None:
    """In the supervisor: set up, start the run, wait for it (or a kill), answer on ``link``. Never returns."""
    try:
        _namespaces(request)
        report_r, report_w = os.pipe2(os.O_CLOEXEC)
        inherited = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        pid = os.fork()
        if pid == 0:
            link.close()
            os.close(report_r)
            _exec_run(request, out, err, report_w)
        os.close(report_w)
        os.close(out)
        os.close(err)
        failed = b""
        while chunk := os.read(report_r, 4096):
            failed += chunk
        if failed:
            os.waitpid(pid, 0)
            _send(link, {"error": f"cannot start the run: {failed.decode(errors='replace')}"})
            os._exit(0)
        pidfd = os.pidfd_open(pid)
        watch: list[Any] = [pidfd, link]
        while True:
            ready = select.select(watch, [], [])[0]
            if link in ready:
                try:
                    said = link.recv(64)
                except OSError:
                    said = b""
                if said in (b"kill", b""):
                    os.kill(pid, signal.SIGKILL)  # PID 1 of its namespace: the kernel kills the rest
                    watch = [pidfd]
            if pidfd in ready:
                break
        _, status, usage = os.wait4(pid, 0)
        _send(link, {"status": status, "utime": usage.ru_utime, "stime": usage.ru_stime,
                     "maxrss": usage.ru_maxrss, "inherited_kib": inherited})
    except (SetupFailed, OSError) as exc:
        _send(link, {"error": f"cannot set the run's namespaces up: {exc}"})
    os._exit(0)


def _reap(block: bool) -> None:
    """Wait for every supervisor that has ended (all of them with ``block``)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _ready(control: socket.socket, unmount: list[str]) -> bool:
    """Unmount what was bound only for the interpreter's start, keep only :data:`KEPT` in the bounding set,
    and tell the gate (ready, or why not)."""
    global bounding
    try:
        for path in unmount:
            _check(_libc.umount2(path.encode(), MNT_DETACH), f"umount {path}")
        for cap in bounding:
            if cap not in KEPT:
                _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap} from the bounding set")
        bounding = [cap for cap in KEPT if cap <= CAP_LAST]
    except SetupFailed as exc:
        _send(control, {"error": str(exc)})
        return False
    _send(control, {"ready": True})
    return True


def main(control_fd: int, unmount: list[str]) -> None:
    """Serve run requests on ``control_fd`` until the gate closes it."""
    control = socket.socket(fileno=control_fd)
    if not _ready(control, unmount):
        return
    while True:
        _reap(block=False)  # supervisors are waited for, so their runs' CPU time reaches bubblewrap and the gate
        try:
            message, fds, _, _ = socket.recv_fds(control, 1 << 20, 3)
        except OSError:
            message, fds = b"", []
        if not message:
            _reap(block=True)
            return
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            continue
        out, err, link_fd = fds
        if os.fork() == 0:
            control.close()
            link = socket.socket(fileno=link_fd)
            try:
                request: RunRequest = json.loads(message)
            except ValueError as exc:
                _send(link, {"error": f"bad request: {exc}"})
                os._exit(0)
            _supervise(request, out, err, link)
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:])
