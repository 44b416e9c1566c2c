"""The code under test runs confined: it cannot read the signing key, write the evidence, or see the gate.

A model entrypoint (and a local "image", i.e. a Python environment asked for its packages) is code
the gate does not trust. On the local backend each run is started through this launcher:

- **bubblewrap** (``bwrap``, Debian package ``bubblewrap``) puts the run in new PID, mount, IPC and
  UTS namespaces: the gate's processes are not visible (so cannot be read or signalled); the
  whole file system is mounted read-only; the report folder, the signing key, ``/tmp``, the gate
  user's home, container-engine sockets and kubeconfig locations are hidden (an empty tmpfs, or
  ``/dev/null`` for a file); the inputs the run needs (matrix folder, code, model, dataset,
  interpreter environment) are bound back read-only and only its own run folder is writable.
  Its arguments reach bwrap through a pipe (``--args FD``), so ``/proc/1/cmdline`` inside names
  no hidden path. When the run's main process exits, is killed at the timeout, or pytest itself
  is killed (``--die-with-parent``: the kernel's parent-death signal), PID 1 of the namespace (the
  run's main process itself, ``--as-pid-1``) exits and the kernel kills every process left in it:
  forked, ``setsid`` and SIGTERM-ignoring children included.
- **identity**: when the gate runs as root, the run is switched (``setpriv``, util-linux) to the
  unprivileged user :data:`SANDBOX_USER` (created as a system user when missing), with no
  capabilities and ``no_new_privs``, so file permissions protect the key (the gate requires it
  to be mode 0600) and every root-owned file even through paths the namespace does not hide.
  That user must be able to read the inputs; where it cannot (a matrix in a 0700 folder), the
  run stays uid 0 *without any capability* in the same namespaces, and the record says so.
  A gate run by an ordinary user runs bwrap in a user namespace: the run keeps that user's uid
  outside, and the namespace's hiding is what protects the key.

When bwrap is missing or cannot create namespaces (a container without user namespaces, or
``HETERO_SANDBOX=off``), the run is started the plain way (``setpriv --pdeathsig KILL``, a new
session, killed as a process group) and its :class:`Confinement` says ``confined: False`` with
the reason; the model layer records that as a part of the item it could not prove, which keeps
the run's verdict from being ``pass``. Nothing is ever silently unconfined.

The child's environment is scrubbed to :data:`PASS_ENV` (locale, search paths, device
selection), the names listed in ``HETERO_PASS_ENV`` (comma-separated globs) and what the gate
sets itself (``HETERO_EXECUTION_PROVIDER``, ``HOME`` and ``TMPDIR`` in the run folder);
``HETERO_SIGN_KEY`` never passes.
"""

from __future__ import annotations

import fnmatch
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypedDict

from pytest_hetero.backends.sandbox.init import RunLimits, keyring_filter
from pytest_hetero.backends.sandbox.zygote import Zygote, run_root

SANDBOX_USER = "hetero-sandbox"
"""System user that runs the code under test when the gate runs as root (``HETERO_SANDBOX_USER`` overrides)."""

PASS_ENV: tuple[str, ...] = ("PATH", "LANG", "LANGUAGE", "LC_*", "TZ", "TERM", "LD_LIBRARY_PATH", "PYTHONPATH",
                             "VIRTUAL_ENV", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
                             "NVIDIA_DRIVER_CAPABILITIES", "ASCEND_*", "OMP_NUM_THREADS")
"""Environment names (globs) a confined run inherits from the gate; everything else is dropped."""
NEVER_PASS: tuple[str, ...] = ("HETERO_SIGN_KEY",)
"""Names that never reach the code under test, even when listed in ``HETERO_PASS_ENV``."""

SYSTEM_READ_ONLY: tuple[str, ...] = ("/usr", "/etc", "/sys")
"""Folders of the host every confined run sees read-only (when they exist): the system's programs and
libraries, its configuration (less :func:`etc_secrets`) and sysfs (device discovery). Nothing else of the host
is visible but the run's declared inputs and its interpreter: no ``/run`` (engine sockets), no ``/var``
(``/var/lib/docker``, ``/var/lib/kubelet``), no ``/home`` or ``/root``, no ``/opt``, ``/srv`` or ``/mnt``."""

ROOT_LINKS: tuple[str, ...] = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Top-level names recreated in the view: as the same symbolic link (merged ``/usr``) or bound read-only."""

SHARED_TMP: tuple[str, ...] = ("/tmp", "/var/tmp", "/dev/shm")
"""Folders a run gets a private, world-writable (sticky), size-limited empty tmpfs on."""

ETC_SECRETS: tuple[str, ...] = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers",
                                "/etc/sudoers.d", "/etc/ssh", "/etc/ssl/private", "/etc/docker", "/etc/containerd",
                                "/etc/kubernetes", "/etc/security/opasswd")
"""Files and folders of ``/etc`` always masked (``/dev/null`` or an empty read-only tmpfs), with every entry of
``/etc`` that is not world-readable (:func:`etc_secrets`)."""

BWRAP_FLAGS: tuple[str, ...] = ("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                                "--die-with-parent", "--new-session", "--as-pid-1")
"""``--as-pid-1``: the run's main process is PID 1 of its namespace and bwrap waits for it itself, so the
gate's ``wait4`` of bwrap includes the run's CPU time and peak RSS; with bwrap's own reaper as PID 1 both
were lost (the gate recorded bwrap's 2 ms of CPU for a 200 ms run). When PID 1 exits, the kernel still
kills every process left in the namespace."""

NOBODY = 65534
"""uid and gid a run takes when the gate runs as root and no sandbox user exists or can be created (the
kernel's overflow id: it owns no file)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of every confined run (recorded in ``model.isolation.limits``).

    ``tmpfs_bytes``: size of each private tmpfs (``/tmp``, ``/var/tmp``, ``/dev/shm``); ``file_bytes``:
    ``RLIMIT_FSIZE`` (largest file a run may write; a bigger write gets SIGXFSZ); ``processes``:
    ``RLIMIT_NPROC`` (processes and threads of the run's uid; the sandbox user's, shared by concurrent runs);
    ``memory_bytes``: ``RLIMIT_DATA`` (private writable memory: heap and anonymous mappings; address space
    reserved without access, as GPU runtimes do, is not counted). Defaults: 512 MiB, 4 GiB, 4096 and half
    the host's memory; ``HETERO_SANDBOX_TMPFS``, ``HETERO_SANDBOX_FILE_SIZE``, ``HETERO_SANDBOX_PIDS`` and
    ``HETERO_SANDBOX_MEMORY`` (bytes, or with a K/M/G/T suffix, powers of 1024) override them. Raises
    ValueError for a value that is not a positive size."""

    tmpfs_bytes: int
    file_bytes: int
    processes: int
    memory_bytes: int

    @classmethod
    def from_environment(cls, source: Mapping[str, str] | None = None) -> Limits:
        """The limits of :class:`Limits`' defaults, overridden by ``source`` (default ``os.environ``)."""
        source = os.environ if source is None else source
        try:
            total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError):
            total = 16 << 30
        return cls(tmpfs_bytes=_size(source, "HETERO_SANDBOX_TMPFS", 512 << 20),
                   file_bytes=_size(source, "HETERO_SANDBOX_FILE_SIZE", 4 << 30),
                   processes=_size(source, "HETERO_SANDBOX_PIDS", 4096),
                   memory_bytes=_size(source, "HETERO_SANDBOX_MEMORY", max(total // 2, 1 << 30)))

    def facts(self) -> RunLimits:
        """The record's data (and a run request's ``limits``)."""
        return {"tmpfs_bytes": self.tmpfs_bytes, "file_bytes": self.file_bytes, "processes": self.processes,
                "memory_bytes": self.memory_bytes}

    def prlimit(self) -> list[str]:
        """The ``prlimit`` (util-linux) prefix that sets them (and no core files) before the run's exec."""
        return ["prlimit", f"--fsize={self.file_bytes}", f"--nproc={self.processes}",
                f"--data={self.memory_bytes}", "--core=0", "--"]


def _size(source: Mapping[str, str], name: str, default: int) -> int:
    raw = source.get(name, "").strip()
    if not raw:
        return default
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    unit = raw[-1:].upper()
    number = raw[:-1] if unit in scale else raw
    if not number.isdigit() or int(number) <= 0:
        raise ValueError(f"{name}={raw!r}: give a positive number, optionally with K, M, G or T (powers of 1024)")
    return int(number) * scale.get(unit, 1)


class SandboxRefused(Exception):
    """The run cannot be confined as required (no unprivileged identity can read an input); ``message``
    names the path and the fix. The code under test is never started then."""


def etc_secrets(root: str = "/etc", limit: int = 20000) -> list[Path]:
    """:data:`ETC_SECRETS` that exist, and every file or folder under ``root`` (at most ``limit`` entries
    looked at, three levels deep) that is not readable by others: what a run must not see of ``/etc``."""
    found = [Path(p) for p in ETC_SECRETS if os.path.lexists(p)]
    seen = 0
    for folder, dirs, files in os.walk(root):
        depth = folder.count("/") - root.count("/")
        if depth >= 3:
            dirs[:] = []
        for name in [*dirs, *files]:
            seen += 1
            path = Path(folder) / name
            try:
                st = path.lstat()
            except OSError:
                continue
            if not stat.S_ISLNK(st.st_mode) and not st.st_mode & stat.S_IROTH and path not in found:
                found.append(path)
        dirs[:] = [d for d in dirs if (Path(folder) / d) not in found]
        if seen > limit:
            break
    return sorted(found, key=lambda p: len(p.parts))


class ConfinementFacts(TypedDict):
    """:meth:`Confinement.facts`: a model run's ``isolation`` record (every key written; see :class:`Confinement`)."""

    mechanism: str
    identity: str
    confined: bool
    namespaces: list[str]
    visible: list[str]
    hidden: list[str]
    writable: list[str]
    network: str
    limits: RunLimits | None
    copied: list[str]
    gaps: list[str]
    reason: str


@dataclass(frozen=True)
class Confinement:
    """How one run of code under test was confined (recorded as ``model.isolation``).

    ``mechanism``: ``bubblewrap`` or ``none``; ``identity``: who the run was outside the sandbox;
    ``namespaces``: Linux namespaces it had of its own; ``visible``: the host paths it could see (read-only,
    but ``writable``); ``hidden``: paths masked inside those (the signing key, the report folder, secrets of
    ``/etc``); ``writable``: the only paths it could write; ``network``: ``loopback only`` or what the matrix
    granted; ``limits``: :meth:`Limits.facts`; ``gaps``: what it could still do that it should not;
    ``confined``: the key was unreadable, the bundle and journal unwritable, the gate's processes invisible
    and its whole process tree killed with it; ``reason``: why not, when not.
    """

    mechanism: str
    identity: str
    confined: bool
    namespaces: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    gaps: tuple[str, ...] = ()
    reason: str = ""
    visible: tuple[str, ...] = ()
    network: str = ""
    limits: Limits | None = None
    copied: tuple[str, ...] = ()
    """Inputs the run saw as a readable copy made by the gate (its user could not read the original)."""

    def facts(self) -> ConfinementFacts:
        """The record's data (JSON values)."""
        return {"mechanism": self.mechanism, "identity": self.identity, "confined": self.confined,
                "namespaces": list(self.namespaces), "visible": list(self.visible), "hidden": list(self.hidden),
                "writable": list(self.writable), "network": self.network,
                "limits": self.limits.facts() if self.limits is not None else None,
                "copied": list(self.copied), "gaps": list(self.gaps), "reason": self.reason}


SECCOMP_FD = "{seccomp-fd}"
"""Stands for the descriptor of :attr:`Launch.seccomp` in :attr:`Launch.args` until the run is started."""


@dataclass
class Launch:
    """What to start: ``argv`` (the launcher's, then the run's), ``args`` (bwrap arguments to hand
    through a pipe, NUL-separated; empty: none), ``env`` and the :class:`Confinement`."""

    argv: list[str]
    env: dict[str, str]
    confinement: Confinement
    args: bytes = b""
    seccomp: bytes = b""
    """The seccomp program bubblewrap loads (its ``--seccomp`` argument in ``args`` is :data:`SECCOMP_FD`, replaced
    by the descriptor it is handed in); empty when none (zygote runs install their own)."""
    zygote: Zygote | None = None
    """Set when the run is forked by the session's sandbox (:mod:`.zygote`) instead of a bubblewrap of its
    own; ``argv`` is then what that sandbox execs (``setpriv …`` first)."""
    fresh: list[tuple[str, str]] = field(default_factory=list)
    """(path, tmpfs mode) the run gets empty (zygote runs)."""
    keep: list[tuple[str, str]] = field(default_factory=list)
    """(path, ``ro``/``rw``) bound back above ``fresh``, outermost first, the run folder last (zygote runs)."""
    user: tuple[int, int] | None = None
    """(uid, gid) the run switches to (zygote runs: the gate runs as root, so it is always set)."""
    limits: Limits | None = None
    """The resource limits the run sets before its exec (zygote runs)."""
    single: bool = False
    """The zygote serves this run only (a per-run model run's sandbox of its own): closed after the run."""


@dataclass
class _Identity:
    uid: int
    gid: int
    name: str


def passed_environment(source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The part of ``source`` (default ``os.environ``) a confined run inherits: the names of
    :data:`PASS_ENV` and ``HETERO_PASS_ENV``, never those of :data:`NEVER_PASS`."""
    source = os.environ if source is None else source
    wanted = PASS_ENV + tuple(g.strip() for g in source.get("HETERO_PASS_ENV", "").split(",") if g.strip())
    return {k: v for k, v in source.items()
            if k not in NEVER_PASS and any(fnmatch.fnmatchcase(k, g) for g in wanted)}


def child_environment(extra: Mapping[str, str], run_dir: Path, source: Mapping[str, str] | None = None,
                      passed: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a confined run: ``passed`` (default :func:`passed_environment` of ``source``),
    ``HOME`` and ``TMPDIR`` in ``run_dir``, then ``extra``. Names in :data:`NEVER_PASS` are dropped
    whatever the lists say."""
    env = dict(passed_environment(source) if passed is None else passed)
    env.update(HOME=str(run_dir), TMPDIR=str(run_dir / "tmp"))
    env.update({k: v for k, v in extra.items() if k not in NEVER_PASS})
    return env


def readable_by(path: Path, uid: int, gids: Iterable[int]) -> bool:
    """True when user ``uid`` (groups ``gids``) can read ``path`` itself (and list and enter it, for a
    folder), judged from its mode bits (no ACLs). The folders above it do not count: a confined run sees
    an input at its own path under folders the sandbox makes (mode 0755), never the host's."""
    try:
        st = path.stat()
    except OSError:
        return False
    return _mode_readable(st, uid, set(gids))


def _mode_readable(st: os.stat_result, uid: int, groups: set[int]) -> bool:
    """Whether the mode bits of ``st`` let user ``uid`` (groups ``groups``) read it (and list and enter it, for a
    folder): the owner's, else the group's, else the others' bits."""
    want = (stat.S_IROTH | stat.S_IXOTH) if stat.S_ISDIR(st.st_mode) else stat.S_IROTH
    if st.st_uid == uid:
        have = (st.st_mode >> 6) & 0o7
    elif st.st_gid in groups:
        have = (st.st_mode >> 3) & 0o7
    else:
        have = st.st_mode & 0o7
    return have & want == want


def _dropped(argv: Sequence[str], user: tuple[int, int] | None) -> list[str]:
    """What a bubblewrap of its own execs for ``argv``: as root, ``setpriv`` (util-linux) switching to
    ``user`` (uid, gid) when given and emptying every capability set, the bounding set too, with
    ``no_new_privs`` (bwrap run as root keeps every capability of the gate: measured, CAP_SYS_ADMIN
    included); otherwise ``argv`` itself (a user namespace of the gate's user holds nothing more)."""
    if os.geteuid() != 0:
        return list(argv)
    drop = ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--", *argv]
    if user is None:
        return ["setpriv", *drop]
    return ["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups", *drop]


def _sandbox_identity(name: str) -> tuple[_Identity, str]:
    """The sandbox user (created as a system user when missing); when there is none, uid and gid
    :data:`NOBODY` by number, and why. Never uid 0."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        try:
            subprocess.run([useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                            "--shell", "/usr/sbin/nologin", name], capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            pass
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            return _Identity(NOBODY, NOBODY, f"uid {NOBODY}"), f"user {name} does not exist and cannot be created"
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        return _Identity(NOBODY, NOBODY, f"uid {NOBODY}"), f"user {name} is uid or gid 0: not used"
    return _Identity(entry.pw_uid, entry.pw_gid, name), ""


STAGE_LIMIT_BYTES = 1 << 30
"""Most bytes of inputs the sandbox user cannot read that a session copies for it (``HETERO_SANDBOX_STAGE``
overrides, same units as :class:`Limits`); more is refused (:class:`SandboxRefused`)."""

STAGE_SCAN_ENTRIES = 20000
"""Entries of an input folder looked at for one its run's user cannot read (a bigger folder is judged by
those)."""


def unreadable_inside(path: Path, uid: int, gids: Iterable[int], skip: Sequence[Path] = (),
                      limit: int = STAGE_SCAN_ENTRIES) -> Path | None:
    """The first entry of ``path`` (itself, then what is under a folder, at most ``limit`` entries; symbolic
    links and ``skip`` paths not looked at) that user ``uid`` cannot read (:func:`readable_by`); None.

    Folders are taken in :func:`os.walk`'s top-down order, each folder's sub-folders then its other entries;
    one ``lstat`` per entry (``os.scandir``: the entry's type comes with the listing), not a ``Path`` and
    three system calls: the interpreter's tree is scanned to the limit once per session."""
    groups = set(gids)
    if not readable_by(path, uid, groups):
        return path
    if not path.is_dir():
        return None
    skipped = {os.fspath(p) for p in skip}
    seen = 0
    pending = [os.fspath(path)]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue  # as os.walk: a folder that cannot be listed is not walked
        dirs: list[os.DirEntry[str]] = []
        others: list[os.DirEntry[str]] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            (dirs if is_dir else others).append(entry)
        dirs = [d for d in dirs if d.path not in skipped and not d.is_symlink()]
        for entry in (*dirs, *others):
            seen += 1
            if seen > limit:
                return None
            if entry.path in skipped or entry.is_symlink():
                continue
            if not _entry_readable(entry, uid, groups):
                return Path(entry.path)
        pending.extend(d.path for d in reversed(dirs))
    return None


def _entry_readable(entry: os.DirEntry[str], uid: int, groups: set[int]) -> bool:
    """:func:`readable_by` for a listed entry that is not a symbolic link (its ``lstat`` is its ``stat``)."""
    try:
        return _mode_readable(entry.stat(follow_symlinks=False), uid, groups)
    except OSError:
        return False


def stage_copy(source: Path, target: Path, skip: Sequence[Path], limit_bytes: int) -> int:
    """Copy ``source`` (a file or folder) to ``target``, readable by everyone (folders 0755, files 0644, or
    0755 when executable), ``skip`` paths left empty (the view masks them), symbolic links kept as links,
    anything but regular files and folders (FIFOs, sockets, devices) left out; returns the bytes copied. Raises
    :class:`SandboxRefused` past ``limit_bytes``."""
    total = 0

    def copy_file(src: Path, dst: Path) -> None:
        nonlocal total
        st = src.lstat()
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src), dst)
            return
        if not stat.S_ISREG(st.st_mode):
            return
        total += st.st_size
        if total > limit_bytes:
            raise SandboxRefused(f"{source} is not readable by the sandbox user and holds more than {limit_bytes} "
                                 "bytes, the most a session copies for it (HETERO_SANDBOX_STAGE): make it "
                                 f"readable to others (chmod -R o+rX {source})")
        shutil.copyfile(src, dst, follow_symlinks=False)
        os.chmod(dst, 0o755 if st.st_mode & 0o111 else 0o644)

    if not source.is_dir():
        copy_file(source, target)
        return total
    for folder, dirs, files in os.walk(source):
        here = Path(folder)
        out = target / here.relative_to(source)
        out.mkdir(mode=0o755, exist_ok=True)
        os.chmod(out, 0o755)
        keep = []
        for d in dirs:
            if here / d in skip:
                (out / d).mkdir(mode=0o755, exist_ok=True)  # where the view masks it
                continue
            if (here / d).is_symlink():
                copy_file(here / d, out / d)
            else:
                keep.append(d)
        dirs[:] = keep
        for name in files:
            if here / name in skip:
                (out / name).touch(mode=0o644)  # where the view masks it
            else:
                copy_file(here / name, out / name)
    return total


class Sandbox:
    """The launcher of one backend instance (one per pytest process): finds bwrap and the sandbox
    user once, then prepares each run.

    The view is an allowlist: an empty root, :data:`SYSTEM_READ_ONLY` and :data:`ROOT_LINKS` read-only
    (``/etc`` less :func:`etc_secrets`), a fresh ``/proc`` (``/proc/sys`` read-only) and a minimal ``/dev``,
    private size-limited tmpfs on :data:`SHARED_TMP`, the run's declared inputs and interpreter bound
    read-only at their own paths, its run folder writable, and ``protect`` paths masked last. The run has
    its own network namespace (loopback only) unless its model is granted the network.

    ``protect``: paths the code under test must not see even inside an input (the report folder, the
    signing key and its folder…); missing ones are skipped. ``mode``: ``auto`` (default: confine when
    possible, say so when not) or ``off`` (never confine: every run says so), default from
    ``HETERO_SANDBOX``. Raises ValueError for another mode or a bad :class:`Limits` variable.
    """

    def __init__(self, protect: Sequence[Path], mode: str | None = None) -> None:
        self.mode = (mode or os.environ.get("HETERO_SANDBOX") or "auto").strip().lower()
        if self.mode not in ("auto", "off"):
            raise ValueError(f"HETERO_SANDBOX={self.mode!r}: use auto or off")
        self.protect = [p for p in protect if p is not None]
        self.limits = Limits.from_environment()
        self._probed = False
        self._bwrap: str | None = None
        self._why_not = ""
        self._user: _Identity | None = None
        self._user_why = ""
        self._system: list[str] | None = None
        self._zygotes: dict[tuple[tuple[Path, ...], tuple[Path, ...], bool], Zygote] = {}
        self._staged: dict[Path, Path] = {}
        """Input (as the run sees it) → the readable copy bound there (:meth:`_stage`)."""
        self._stage_root: Path | None = None
        self._staged_bytes = 0
        self._readable: dict[tuple[Path, int], tuple[int, int, int, int, int, int]] = {}
        """(input, uid) → the input's own (device, inode, mode, uid, gid, mtime) when a scan found everything in it
        readable by that uid (:meth:`_unreadable`)."""
        self.stage_limit = _size(os.environ, "HETERO_SANDBOX_STAGE", STAGE_LIMIT_BYTES)
        self.shared = os.geteuid() == 0 and os.environ.get("HETERO_SANDBOX_SHARED", "on").strip().lower() != "off"
        """Runs whose folder is in :func:`~.zygote.run_root` (``backends.local.run_folder``) are forked by one
        sandbox per session and view (:mod:`.zygote`; gate running as root only). False (or
        ``HETERO_SANDBOX_SHARED=off``): a bubblewrap per run."""
        self.passed = passed_environment()
        """What every confined run inherits of the gate's environment (read once)."""
        self._lock = threading.Lock()

    def _probe(self) -> None:
        """Find bwrap and check it can build the namespaces here (once)."""
        if self._probed:
            return
        self._probed = True
        if self.mode == "off":
            self._why_not = "HETERO_SANDBOX=off"
            return
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            self._why_not = "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
            return
        try:
            probe = subprocess.run([bwrap, *self._base_flags(False), *self._system_args(), "--", "/bin/sh", "-c",
                                    "exit 0"], capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self._why_not = f"bwrap cannot run: {exc}"
            return
        if probe.returncode != 0:
            self._why_not = f"bwrap cannot create namespaces here: {probe.stderr.strip()[-300:]}"
            return
        self._bwrap = bwrap
        if os.geteuid() == 0:
            self._user, self._user_why = _sandbox_identity(os.environ.get("HETERO_SANDBOX_USER") or SANDBOX_USER)

    @staticmethod
    def _base_flags(network: bool) -> list[str]:
        flags = list(BWRAP_FLAGS)
        if not network:
            flags.insert(0, "--unshare-net")
        if os.geteuid() != 0:
            flags.insert(0, "--unshare-user")
        return flags

    def _system_args(self) -> list[str]:
        """The bwrap arguments of the system part of every view (looked up once): the allowlisted folders, the
        top-level links, ``/etc``'s secrets masked, ``/proc``, ``/dev`` and the private tmpfs."""
        if self._system is None:
            args: list[str] = []
            for name in ROOT_LINKS:
                if os.path.islink(name):
                    args += ["--symlink", os.readlink(name), name]
                elif os.path.isdir(name):
                    args += ["--ro-bind", name, name]
            for name in SYSTEM_READ_ONLY:
                if os.path.isdir(name):
                    args += ["--ro-bind", name, name]
            for secret in etc_secrets():
                args += _mask(secret)
            # bwrap covers /proc/sys only without a network namespace of its own: bind it read-only (the
            # net/ part still answers for the run's own network namespace: sysctl looks at the caller's)
            args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev"]
            for tmp in SHARED_TMP:
                args += ["--size", str(self.limits.tmpfs_bytes), "--perms", "1777", "--tmpfs", tmp]
            self._system = args
        return list(self._system)

    def prepare(self, argv: Sequence[str], *, cwd: Path, run_dir: Path, inputs: Sequence[Path],
                env: Mapping[str, str], network: bool = False, hide: Sequence[Path] = (), alone: bool = False
                ) -> Launch:
        """How to start ``argv`` confined: working folder ``cwd``; ``run_dir`` its only writable
        folder (made owned by the sandbox user when the gate runs as root); ``inputs`` the paths it must
        read (bound read-only); ``env`` its environment (see :func:`child_environment`); ``network``: the
        matrix grants the run the host's network (else loopback only); ``hide``: files of this run it must not
        read (the gate's truth files), masked where the view would show them (inside an input or a system
        folder; elsewhere they are not visible anyway); ``alone``: a sandbox of this run's own, never the
        session's (a per-run model run: its network and UTS namespaces its own too): as root, a sandbox that
        forks it (:mod:`.zygote`, whatever ``HETERO_SANDBOX_SHARED`` says) started for this run only and closed
        after it (:attr:`Launch.single`); otherwise a bubblewrap of its own.

        Raises :class:`SandboxRefused` when the gate runs as root and the run's unprivileged user cannot read
        ``cwd`` or an input, or when a ``hide`` file is itself an input (it cannot be both given and withheld).
        Safe to call from several threads at once (per-run model runs): one prepares at a time."""
        with self._lock:
            return self._prepare(argv, cwd=cwd, run_dir=run_dir, inputs=inputs, env=env, network=network, hide=hide,
                                 alone=alone)

    def _prepare(self, argv: Sequence[str], *, cwd: Path, run_dir: Path, inputs: Sequence[Path],
                 env: Mapping[str, str], network: bool, hide: Sequence[Path], alone: bool) -> Launch:
        """:meth:`prepare` under the launcher's lock."""
        self._probe()
        if self._bwrap is None:
            return self._plain(argv, env)
        own = run_dir.resolve()
        bound = [p for p in self._inputs([cwd, *inputs]) if p != own and own not in p.parents]
        # a protected folder that is or holds an input or the run folder cannot be masked whole (the key's
        # folder when it is the matrix folder): what is protected inside it still is
        protected = [p for p in self._protected() if not any(p == b or p in b.parents for b in [*bound, own])]
        protected += [p for p in self._hidden(hide, bound) if p not in protected]
        identity, copied, user = self._identity(bound, run_dir, protected)
        gaps: list[str] = []
        network_fact = "host network (granted by the matrix)" if network else "loopback only (own network namespace)"
        if network:
            gaps.append("it can reach the host's network and every service listening on it, abstract UNIX sockets "
                        "of the host's network namespace included (granted by the matrix)")
        namespaces = ("pid", "mount", "ipc", "uts", *(() if network else ("net",)),
                      *(("user",) if os.geteuid() != 0 else ()))
        confinement = Confinement(
            mechanism="bubblewrap", identity=identity, confined=True, namespaces=namespaces,
            visible=tuple([*SYSTEM_READ_ONLY, *(str(p) for p in bound)]),
            hidden=tuple(str(p) for p in [*etc_secrets(), *protected]), writable=(str(run_dir),),
            gaps=tuple(gaps), network=network_fact, limits=self.limits, copied=tuple(copied))
        # a run of its own as root is always forked by a sandbox of its own: in a bubblewrap per run, the run (as the
        # sandbox user) outlives a killed bubblewrap, whose parent-death signal to it the kernel refuses (no CAP_KILL)
        if (self.shared or (alone and os.geteuid() == 0)) and run_dir.parent == run_root():  # local.run_folder's
            return self._forked(argv, user, confinement, cwd=cwd, bound=bound, run_dir=run_dir,
                                protected=protected, env=env, network=network, alone=alone)
        # the root of the view is bubblewrap's tmpfs, without a size: in a user namespace it is the run's own
        # (writable, unbounded RAM), and so is its /dev: both are made read-only once everything is mounted
        args = [*self._view(bound, run_dir, protected, network), "--remount-ro", "/", "--remount-ro", "/dev", "--chdir",
                str(cwd), "--seccomp", SECCOMP_FD]
        inner = [*self.limits.prlimit(), *_dropped(argv, user)]
        if os.geteuid() == 0:
            args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
        blob = b"".join(a.encode() + b"\0" for a in args)
        return Launch(argv=[str(self._bwrap), "--args", "{fd}", "--", *inner], env=dict(env),
                      confinement=confinement, args=blob, seccomp=keyring_filter())

    def _forked(self, argv: Sequence[str], user: tuple[int, int] | None, confinement: Confinement, *,
                cwd: Path, bound: Sequence[Path], run_dir: Path, protected: Sequence[Path],
                env: Mapping[str, str], network: bool, alone: bool = False) -> Launch:
        """The launch of a run forked by the session's sandbox for this view (started on first use by
        ``backends.local``): its mount, IPC and PID namespaces are its own (the network namespace is the
        sandbox's: loopback only unless granted); it runs as ``user``, without any capability (the sandbox's
        PID 1 keeps ``CAP_SYS_ADMIN`` to set each run up; the run's process drops everything before its
        exec). ``alone``: a sandbox of this run's own instead, never kept for another run (:attr:`Launch.single`:
        the network and UTS namespaces are the run's own too)."""
        if alone:
            fresh, keep = self._fresh_and_kept(bound)
            return Launch(argv=list(argv), env=dict(env), confinement=confinement,
                          zygote=self._zygote(bound, protected, network), fresh=fresh,
                          keep=[*keep, (str(run_dir), "rw")], user=user, limits=self.limits, single=True)
        zkey = (tuple(bound), tuple(protected), network)
        zygote = self._zygotes.get(zkey)
        if zygote is not None and zygote.alive() and zygote.stale():
            zygote.close()
        if zygote is None or (zygote.proc is not None and not zygote.alive()):
            zygote = self._zygotes[zkey] = self._zygote(bound, protected, network)
        fresh, keep = self._fresh_and_kept(bound)
        return Launch(argv=list(argv), env=dict(env), confinement=replace(confinement, namespaces=tuple(
                          n for n in confinement.namespaces if n != "uts")),
                      zygote=zygote, fresh=fresh, keep=[*keep, (str(run_dir), "rw")], user=user,
                      limits=self.limits)

    @staticmethod
    def _fresh_and_kept(bound: Sequence[Path]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """(the paths a run of this view gets an empty tmpfs on, with their mode; the inputs under them to bind
        back read-only): :data:`SHARED_TMP` and the folder of the run folders unless one of those holds it.
        Nothing a run writes reaches the next."""
        fresh = [(h, "1777") for h in SHARED_TMP]
        root = run_root().resolve()
        if not any(root == Path(f) or Path(f) in root.parents for f, _ in fresh):
            fresh.append((str(root), "0711"))
        under = [Path(f) for f, _ in fresh]
        return fresh, [(str(p), "ro") for p in bound if any(f == p or f in p.parents for f in under)]

    def _zygote(self, bound: Sequence[Path], protected: Sequence[Path], network: bool) -> Zygote:
        """A (not yet started) sandbox for this view: the arguments of a single run's bubblewrap with the
        folder of all run folders writable in place of one, the capabilities its PID 1 needs, and the
        gate's interpreter bound (then unmounted by it) when it is not an input."""
        assert self._bwrap is not None
        root = run_root().resolve()
        args = self._view(bound, root, protected, network)
        prefix = Path(os.path.realpath(sys.base_prefix))
        unmount: list[str] = []
        if not any(r == prefix or r in prefix.parents for r in bound) and \
                not any(Path(s) == prefix or Path(s) in prefix.parents for s in SYSTEM_READ_ONLY):
            args += ["--ro-bind", str(prefix), str(prefix)]
            unmount.append(str(prefix))
        for cap in ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"):
            args += ["--cap-add", cap]
        python = prefix / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
        return Zygote(self._bwrap, [*args, "--chdir", "/"], unmount,
                      {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"},
                      python=str(python if python.is_file() else os.path.realpath(sys.executable)), root=root)

    def _unreadable(self, path: Path, user: _Identity, protected: Sequence[Path]) -> bool:
        """True when ``user`` cannot read something in input ``path`` (:func:`unreadable_inside`). A folder found
        wholly readable is not scanned again in this session while it is the same folder (device, inode) with the same
        mode, owner and mtime:
        the interpreter's tree (tens of thousands of entries, scanned to the limit) cost about 0.4 s of CPU per
        run, twice per model item. A mode changed deeper inside after the first scan is not seen: the run then
        meets the permission error itself."""
        try:
            st = path.stat()
        except OSError:
            return True
        key, mark = (path, user.uid), (st.st_dev, st.st_ino, st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns)
        if self._readable.get(key) == mark:
            return False
        if unreadable_inside(path, user.uid, (user.gid,), protected) is not None:
            return True
        self._readable[key] = mark
        return False

    def _stage(self, path: Path, user: _Identity, protected: Sequence[Path]) -> Path:
        """Copy ``path`` once per session into this process's staging folder (``<tmp>/hetero-run-<pid>-stage``,
        0700, removed by :meth:`close` or ``sweep_run_folders``), readable by ``user``, without the protected
        paths inside it; the copy is bound read-only at ``path``. Returns the first entry ``user`` could not
        read (for the record). Raises :class:`SandboxRefused` past :attr:`stage_limit`."""
        why = unreadable_inside(path, user.uid, (user.gid,), protected) or path
        if path in self._staged:
            return why
        if self._stage_root is None:
            self._stage_root = Path(tempfile.gettempdir()) / f"hetero-run-{os.getpid()}-stage"
            shutil.rmtree(self._stage_root, ignore_errors=True)
            self._stage_root.mkdir(mode=0o700)
        target = self._stage_root / str(len(self._staged))
        self._staged_bytes += stage_copy(path, target, protected, self.stage_limit - self._staged_bytes)
        self._staged[path] = target
        return why

    def close(self) -> list[str]:
        """End every sandbox this launcher started and remove the staged copies; what did not end by itself
        (one line each)."""
        problems = [why for why in (z.close() for z in self._zygotes.values()) if why]
        self._zygotes.clear()
        if self._stage_root is not None:
            shutil.rmtree(self._stage_root, ignore_errors=True)
            self._stage_root = None
            self._staged.clear()
            self._staged_bytes = 0
        with suppress(OSError):
            run_root().rmdir()  # when no run folder is left in it
        return problems

    def _identity(self, bound: Sequence[Path], run_dir: Path, protected: Sequence[Path]
                  ) -> tuple[str, list[str], tuple[int, int] | None]:
        """(who the run runs as, the inputs it sees as a copy (one line each), the (uid, gid) it switches to:
        None when the gate is not root, and the run keeps the gate's uid in a user namespace); gives
        ``run_dir`` to the sandbox user. An input the sandbox user cannot read (a matrix in a 0700 folder) is
        copied readable (:meth:`_stage`), never run as uid 0; raises :class:`SandboxRefused` when that copy
        would exceed :attr:`stage_limit`."""
        if os.geteuid() != 0:
            return f"uid {os.geteuid()} (the gate's user, unprivileged) in a user namespace", [], None
        user = self._user
        assert user is not None
        copied = [f"{path} (copied: {user.name} cannot read {self._stage(path, user, protected)})"
                  for path in bound if path in self._staged or self._unreadable(path, user, protected)]
        os.chown(run_dir, user.uid, user.gid)
        for sub in run_dir.iterdir():
            os.chown(sub, user.uid, user.gid)
        why = f" ({self._user_why})" if self._user_why else ""
        return f"{user.name} (uid {user.uid}), no capabilities{why}", copied, (user.uid, user.gid)

    @staticmethod
    def _inputs(paths: Iterable[Path]) -> list[Path]:
        """The existing ``paths`` resolved, outermost first, none inside another or inside a system folder
        already visible; ``/`` is never bound (it would undo the allowlist)."""
        out: list[Path] = []
        system = [Path(s) for s in SYSTEM_READ_ONLY]
        for path in paths:
            try:
                real = path.resolve()
            except OSError:
                continue
            if real == Path("/") or not real.exists() or real in out:
                continue
            if any(s == real or s in real.parents for s in system):
                continue
            out.append(real)
        out.sort(key=lambda p: len(p.parts))
        return [p for i, p in enumerate(out) if not any(q in p.parents for q in out[:i])]

    def _view(self, bound: Sequence[Path], writable: Path, protected: Sequence[Path], network: bool) -> list[str]:
        """The bwrap arguments of a view: namespaces, the system part (:meth:`_system_args`), ``bound``
        inputs read-only (the folders above them made 0755; a staged copy where :meth:`_stage` made one),
        ``writable`` bound writable (its parent made 0711: a run must not list its neighbours), ``protected``
        paths masked last (a key inside the matrix folder stays hidden)."""
        args = [*self._base_flags(network), *self._system_args()]
        system = [Path(s) for s in SYSTEM_READ_ONLY]
        made: list[Path] = []
        for path in bound:
            for above in reversed(path.parents):  # bwrap would copy the host's mode (a 0700 /root)
                if above != Path("/") and above not in made and not any(s == above or s in above.parents
                                                                        for s in system):
                    args += ["--perms", "0755", "--dir", str(above)]
                    made.append(above)
            args += ["--ro-bind", str(self._staged.get(path, path)), str(path)]
        args += ["--perms", "0711", "--dir", str(writable.parent), "--bind", str(writable), str(writable)]
        for path in protected:
            copy = next((self._staged[b] / path.relative_to(b) for b in bound
                         if b in self._staged and (b == path or b in path.parents)), None)
            if copy is None or os.path.lexists(copy):  # not in a copy: it stays masked; absent from one: unseen
                args += _mask(path)
        return args

    def _protected(self) -> list[Path]:
        """Protected paths that exist, resolved (looked up at each run: the report folder appears late)."""
        out: list[Path] = []
        for path in self.protect:
            try:
                real = path.resolve()
            except OSError:
                continue
            if real.exists() and real not in out:
                out.append(real)
        return out

    @staticmethod
    def _hidden(hide: Sequence[Path], bound: Sequence[Path]) -> list[Path]:
        """The ``hide`` files (resolved) that the view would show: inside a bound input or a system folder.
        Raises :class:`SandboxRefused` for one that is an input itself."""
        out: list[Path] = []
        visible = [*bound, *(Path(s) for s in SYSTEM_READ_ONLY)]
        for path in hide:
            try:
                real = path.resolve()
            except OSError:
                continue
            if real in bound:
                raise SandboxRefused(f"{real} is given to the run as an input and is also a file it must not read "
                                     "(a truth file, or a copy of one): give the model another file")
            if real.exists() and real not in out and any(v in real.parents for v in visible):
                out.append(real)
        return out

    def _plain(self, argv: Sequence[str], env: Mapping[str, str]) -> Launch:
        """Unconfined start (no bwrap): killed with pytest by the kernel's parent-death signal."""
        launcher = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
        gaps = ("it can read the signing key and every file the gate can", "it can write into the bundle and journal",
                "it can read and signal the gate's processes", "it can reach every engine socket and the network",
                "children that leave its process group survive it")
        return Launch(argv=[*launcher, *argv], env=dict(env),
                      confinement=Confinement(mechanism="none", identity=f"uid {os.geteuid()} (the gate's own)",
                                              confined=False, gaps=gaps, reason=self._why_not))


def remove_tree(path: Path) -> str:
    """Remove ``path`` and everything under it, as the code under test may have left it: at any depth (no
    recursion: ``shutil.rmtree`` raised RecursionError on 1,000 nested folders, a gate traceback), without
    following a symbolic link, and making each folder the gate may not enter or write (mode 0000, which a run
    as the gate's own uid can set) ``0700`` first. Only one folder descriptor is open at a time (10,000 nested
    folders would exceed the descriptor limit); the way back up is ``..``, so ``path`` must not be written
    by anyone meanwhile (a run folder once its run's processes are gone). Returns "" when all is gone, else
    the first problem (one line); never raises."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

    def enter(name: str, parent: int | None) -> int:
        try:
            return os.open(name, flags, dir_fd=parent)
        except PermissionError:
            os.chmod(name, 0o700, dir_fd=parent)  # a folder (lstat said so); nobody can swap it now
            return os.open(name, flags, dir_fd=parent)

    try:
        st = path.lstat()
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    fd = -1
    try:
        if not stat.S_ISDIR(st.st_mode):
            path.unlink()
            return ""
        fd = enter(str(path), None)
        pending: list[list[str] | None] = [None]  # per open level: its sub-folders still to remove (None: unlisted)
        while True:
            subs = pending[-1]
            if subs is None:
                subs = pending[-1] = _unlink_all_but_folders(fd)
            if subs:
                child = enter(subs[-1], fd)
                os.close(fd)
                fd = child
                pending.append(None)
                continue
            pending.pop()
            if not pending:
                break
            parent = os.open("..", flags, dir_fd=fd)
            os.close(fd)
            fd = parent
            above = pending[-1]
            assert above is not None
            os.rmdir(above.pop(), dir_fd=fd)
        os.close(fd)
        fd = -1
        os.rmdir(path)
    except OSError as exc:
        return f"{path}: {exc.strerror}" + (f" ({exc.filename})" if exc.filename else "")
    finally:
        if fd >= 0:
            os.close(fd)
    return ""


def _unlink_all_but_folders(fd: int) -> list[str]:
    """Unlink every entry of the folder ``fd`` that is not a folder (links included, not followed), once the
    folder is ``u+rwx`` (a run as the gate's uid can take that away); return the names of its folders."""
    if os.fstat(fd).st_mode & 0o700 != 0o700:
        os.fchmod(fd, 0o700)
    folders: list[str] = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    return folders


def _mask(path: Path) -> list[str]:
    """The bwrap arguments hiding ``path``: ``/dev/null`` over a file, an empty read-only tmpfs over a folder."""
    if path.is_dir() and not path.is_symlink():
        return ["--perms", "0000", "--tmpfs", str(path), "--remount-ro", str(path)]
    return ["--ro-bind", "/dev/null", str(path)]
