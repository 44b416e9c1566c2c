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
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_hetero.backends.sandbox.zygote import Zygote, run_root

SANDBOX_USER = "hetero-sandbox"
"""System user that runs the code under test when the gate runs as root (``HETERO_SANDBOX_USER`` overrides)."""

PASS_ENV: tuple[str, ...] = ("PATH", "LANG", "LANGUAGE", "LC_*", "TZ", "TERM", "LD_LIBRARY_PATH", "PYTHONPATH",
                             "VIRTUAL_ENV", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
                             "NVIDIA_DRIVER_CAPABILITIES", "ASCEND_*", "OMP_NUM_THREADS")
"""Environment names (globs) a confined run inherits from the gate; everything else is dropped."""
NEVER_PASS: tuple[str, ...] = ("HETERO_SIGN_KEY",)
"""Names that never reach the code under test, even when listed in ``HETERO_PASS_ENV``."""

HIDE_ALWAYS: tuple[str, ...] = ("/tmp", "/var/tmp", "/run/docker.sock", "/var/run/docker.sock", "/run/containerd",
                                "/run/crio", "/run/podman", "/etc/kubernetes", "/var/lib/kubelet", "/root",
                                "/run/user")
"""Paths hidden from every confined run (when they exist): shared temporary folders, container-engine
sockets, kubelet and kubeconfig locations, root's home."""

SHARED_TMP: tuple[str, ...] = ("/tmp", "/var/tmp")
"""Hidden folders the run gets a private, world-writable (sticky) empty copy of."""

BWRAP_FLAGS: tuple[str, ...] = ("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                                "--die-with-parent", "--new-session", "--as-pid-1")
"""``--as-pid-1``: the run's main process is PID 1 of its namespace and bwrap waits for it itself, so the
gate's ``wait4`` of bwrap includes the run's CPU time and peak RSS; with bwrap's own reaper as PID 1 both
were lost (the gate recorded bwrap's 2 ms of CPU for a 200 ms run). When PID 1 exits, the kernel still
kills every process left in the namespace."""


@dataclass(frozen=True)
class Confinement:
    """How one run of code under test was confined (recorded as ``model.isolation``).

    ``mechanism``: ``bubblewrap`` or ``none``; ``identity``: who the run was outside the sandbox;
    ``namespaces``: Linux namespaces it had of its own; ``hidden``: paths it could not see;
    ``writable``: the only paths it could write; ``gaps``: what it could still do that it should
    not; ``confined``: the key was unreadable, the bundle and journal unwritable, the gate's
    processes invisible and its whole process tree killed with it; ``reason``: why not, when not.
    """

    mechanism: str
    identity: str
    confined: bool
    namespaces: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    gaps: tuple[str, ...] = ()
    reason: str = ""

    def facts(self) -> dict[str, Any]:
        """The record's data (JSON values)."""
        return {"mechanism": self.mechanism, "identity": self.identity, "confined": self.confined,
                "namespaces": list(self.namespaces), "hidden": list(self.hidden), "writable": list(self.writable),
                "gaps": list(self.gaps), "reason": self.reason}


@dataclass
class Launch:
    """What to start: ``argv`` (the launcher's, then the run's), ``args`` (bwrap arguments to hand
    through a pipe, NUL-separated; empty: none), ``env`` and the :class:`Confinement`."""

    argv: list[str]
    env: dict[str, str]
    confinement: Confinement
    args: bytes = b""
    zygote: Zygote | None = None
    """Set when the run is forked by the session's sandbox (:mod:`.zygote`) instead of a bubblewrap of its
    own; ``argv`` is then what that sandbox execs (``setpriv …`` first)."""
    fresh: list[tuple[str, str]] = field(default_factory=list)
    """(path, tmpfs mode) the run gets empty (zygote runs)."""
    keep: list[tuple[str, str]] = field(default_factory=list)
    """(path, ``ro``/``rw``) bound back above ``fresh``, outermost first, the run folder last (zygote runs)."""
    user: tuple[int, int] | None = None
    """(uid, gid) the run switches to (zygote runs; None: it stays uid 0, without capabilities)."""


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
    """True when user ``uid`` (groups ``gids``) can reach ``path`` and read it (and list it, for a
    folder), judged from the mode bits of the path and of every folder above it (no ACLs)."""
    groups = set(gids)
    try:
        parts = [path, *path.parents]
        for i, part in enumerate(parts):
            st = part.stat()
            want = (stat.S_IROTH | stat.S_IXOTH) if stat.S_ISDIR(st.st_mode) else stat.S_IROTH
            if i > 0:
                want = stat.S_IXOTH  # a folder above only needs to be searched
            if st.st_uid == uid:
                have = (st.st_mode >> 6) & 0o7
            elif st.st_gid in groups:
                have = (st.st_mode >> 3) & 0o7
            else:
                have = st.st_mode & 0o7
            if have & want != want:
                return False
    except OSError:
        return False
    return True


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


def _sandbox_identity(name: str) -> tuple[_Identity | None, str]:
    """The sandbox user (created as a system user when missing); ``(None, why)`` when there is none."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        try:
            subprocess.run([useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                            "--shell", "/usr/sbin/nologin", name], capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"cannot create user {name}: {exc}"
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            return None, f"user {name} does not exist and useradd could not create it"
    if entry.pw_uid == 0:
        return None, f"user {name} is uid 0"
    return _Identity(entry.pw_uid, entry.pw_gid, name), ""


class Sandbox:
    """The launcher of one backend instance (one per pytest process): finds bwrap and the sandbox
    user once, then prepares each run.

    ``protect``: paths the code under test must not see (the report folder, the signing key,
    the gate's kubeconfig…); missing ones are skipped. ``mode``: ``auto`` (default: confine when
    possible, say so when not) or ``off`` (never confine: every run says so), default from
    ``HETERO_SANDBOX``. Raises ValueError for another mode.
    """

    def __init__(self, protect: Sequence[Path], mode: str | None = None) -> None:
        self.mode = (mode or os.environ.get("HETERO_SANDBOX") or "auto").strip().lower()
        if self.mode not in ("auto", "off"):
            raise ValueError(f"HETERO_SANDBOX={self.mode!r}: use auto or off")
        self.protect = [p for p in protect if p is not None]
        self._probed = False
        self._bwrap: str | None = None
        self._why_not = ""
        self._user: _Identity | None = None
        self._user_why = ""
        self._readable: dict[tuple[Path, int], bool] = {}
        self._hidden_paths: list[Path] | None = None
        self._rebound: dict[tuple[Path, ...], list[Path]] = {}
        self._zygotes: dict[tuple[tuple[Path, ...], tuple[Path, ...]], Zygote] = {}
        self._views: dict[tuple[tuple[Path, ...], tuple[Path, ...]],
                          tuple[list[tuple[str, str]], list[tuple[str, str]]]] = {}
        self.shared = os.geteuid() == 0 and os.environ.get("HETERO_SANDBOX_SHARED", "on").strip().lower() != "off"
        """Runs whose folder is in :func:`~.zygote.run_root` (``backends.local.run_folder``) are forked by one
        sandbox per session and view (:mod:`.zygote`; gate running as root only). False (or
        ``HETERO_SANDBOX_SHARED=off``): a bubblewrap per run."""
        self.passed = passed_environment()
        """What every confined run inherits of the gate's environment (read once)."""

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
            probe = subprocess.run([bwrap, *self._base_flags(), "--ro-bind", "/", "/", "--proc", "/proc",
                                    "--dev", "/dev", "--", "/bin/sh", "-c", "exit 0"],
                                   capture_output=True, text=True, timeout=30, check=False)
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
    def _base_flags() -> list[str]:
        flags = list(BWRAP_FLAGS)
        if os.geteuid() != 0:
            flags.insert(0, "--unshare-user")
        return flags

    def _can_read(self, ident: _Identity, paths: Iterable[Path]) -> Path | None:
        """The first of ``paths`` the sandbox user cannot read (None: it can read them all)."""
        for path in paths:
            key = (path, ident.uid)
            if key not in self._readable:
                self._readable[key] = readable_by(path, ident.uid, (ident.gid,))
            if not self._readable[key]:
                return path
        return None

    def prepare(self, argv: Sequence[str], *, cwd: Path, run_dir: Path, inputs: Sequence[Path],
                env: Mapping[str, str]) -> Launch:
        """How to start ``argv`` confined: working folder ``cwd``; ``run_dir`` its only writable
        folder (made owned by the sandbox user when there is one); ``inputs`` the paths it must
        read (bound back read-only where a hidden path covers them); ``env`` its environment
        (see :func:`child_environment`)."""
        self._probe()
        if self._bwrap is None:
            return self._plain(argv, env)
        inputs = [p for p in inputs if p.exists()]
        identity, gaps, user = self._identity(cwd, inputs, run_dir)
        protected = self._protected()
        if self.shared and run_dir.parent == run_root():  # run folders of backends.local.run_folder
            return self._forked(argv, user, identity, gaps, cwd=cwd, inputs=inputs, run_dir=run_dir,
                                protected=protected, env=env)
        args = self._bwrap_args(cwd, inputs, run_dir, protected)
        inner = _dropped(argv, user)
        if "setpriv" in inner[:1]:
            args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
        confinement = Confinement(
            mechanism="bubblewrap", identity=identity, confined=True,
            namespaces=("pid", "mount", "ipc", "uts", *(("user",) if os.geteuid() != 0 else ())),
            hidden=tuple(str(p) for p in [*(self._hidden_paths or ()), *protected]), writable=(str(run_dir),),
            gaps=tuple(gaps))
        blob = b"".join(a.encode() + b"\0" for a in args)
        return Launch(argv=[str(self._bwrap), "--args", "{fd}", "--", *inner], env=dict(env),
                      confinement=confinement, args=blob)

    def _forked(self, argv: Sequence[str], user: tuple[int, int] | None, identity: str, gaps: list[str], *, cwd: Path,
                inputs: Sequence[Path], run_dir: Path, protected: Sequence[Path], env: Mapping[str, str]) -> Launch:
        """The launch of a run forked by the session's sandbox for this view (started on first use by
        ``backends.local``): its mount, IPC and PID namespaces are its own; it runs as ``user`` (or uid 0),
        without any capability (the sandbox's PID 1 keeps
        ``CAP_SYS_ADMIN`` to set each run up; the run's process drops everything before its exec)."""
        hidden, rebound = self._hidden_and_rebound(cwd, inputs)
        zkey = (tuple(rebound), tuple(protected))
        zygote = self._zygotes.get(zkey)
        if zygote is not None and zygote.alive() and zygote.stale():
            zygote.close()
        if zygote is None or (zygote.proc is not None and not zygote.alive()):
            zygote = self._zygotes[zkey] = self._zygote(rebound, protected, hidden)
        if zkey not in self._views:
            self._views[zkey] = self._fresh_and_kept(rebound, hidden)
        fresh, keep = self._views[zkey]
        confinement = Confinement(
            mechanism="bubblewrap", identity=identity, confined=True, namespaces=("pid", "mount", "ipc"),
            hidden=tuple(str(p) for p in [*hidden, *protected]), writable=(str(run_dir),), gaps=tuple(gaps))
        return Launch(argv=list(argv), env=dict(env), confinement=confinement, zygote=zygote, fresh=fresh,
                      keep=[*keep, (str(run_dir), "rw")], user=user)

    @staticmethod
    def _fresh_and_kept(rebound: Sequence[Path], hidden: Sequence[Path]
                        ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """(the paths a run of this view gets an empty tmpfs on, with their mode; the inputs under them to bind
        back read-only): every hidden folder (the session's tmpfs there is writable by a run that stays
        uid 0: the gate's home, ``/run/user``…; ``/tmp`` and ``/var/tmp`` world-writable), ``/dev/shm``, and
        the folder of the run folders unless one of those holds it. Nothing a run writes reaches the next."""
        fresh = [(str(h), "1777" if str(h) in SHARED_TMP else "0755") for h in hidden if h.is_dir()]
        fresh.append(("/dev/shm", "1777"))
        root = run_root().resolve()
        if not any(root == Path(f) or Path(f) in root.parents for f, _ in fresh):
            fresh.append((str(root), "0711"))
        under = [Path(f) for f, _ in fresh]
        return fresh, [(str(p), "ro") for p in rebound if any(f == p or f in p.parents for f in under)]

    def _zygote(self, rebound: Sequence[Path], protected: Sequence[Path], hidden: Sequence[Path]) -> Zygote:
        """A (not yet started) sandbox for this view: the arguments of a single run's bubblewrap with the
        folder of all run folders writable in place of one, the capabilities its PID 1 needs, and the
        gate's interpreter bound back (then unmounted by it) when a hidden path covers it."""
        assert self._bwrap is not None
        root = run_root().resolve()
        args = self._view(hidden, rebound, root, protected)
        prefix = Path(os.path.realpath(sys.base_prefix))
        unmount: list[str] = []
        if any(h == prefix or h in prefix.parents for h in hidden) and \
                not any(r == prefix or r in prefix.parents for r in rebound):
            args += ["--ro-bind", str(prefix), str(prefix)]
            unmount.append(str(prefix))
        for cap in ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"):
            args += ["--cap-add", cap]
        python = prefix / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
        return Zygote(self._bwrap, [*args, "--chdir", "/"], unmount,
                      {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"},
                      python=str(python if python.is_file() else os.path.realpath(sys.executable)), root=root)

    def close(self) -> list[str]:
        """End every sandbox this launcher started; what did not end by itself (one line each)."""
        problems = [why for why in (z.close() for z in self._zygotes.values()) if why]
        self._zygotes.clear()
        with suppress(OSError):
            run_root().rmdir()  # when no run folder is left in it
        return problems

    def _identity(self, cwd: Path, inputs: Sequence[Path], run_dir: Path
                  ) -> tuple[str, list[str], tuple[int, int] | None]:
        """(who the run runs as, the gaps that leaves, the (uid, gid) it switches to or None); gives
        ``run_dir`` to the sandbox user when the run switches to it (it can read ``cwd`` and ``inputs``)."""
        user = self._user
        unreadable = self._can_read(user, [cwd, *inputs]) if user is not None else None
        if os.geteuid() != 0:
            return f"uid {os.geteuid()} (the gate's user) in a user namespace", \
                ["files of the gate's user outside the hidden paths are readable by it"], None
        if user is not None and unreadable is None:
            os.chown(run_dir, user.uid, user.gid)
            for sub in run_dir.iterdir():
                os.chown(sub, user.uid, user.gid)
            return f"{user.name} (uid {user.uid}), no capabilities", [], (user.uid, user.gid)
        why = f"{user.name} cannot read {unreadable}" if user is not None else self._user_why
        return f"uid 0 without capabilities ({why})", \
            ["root-owned files outside the hidden paths are readable by it (uid 0, no capabilities)"], None

    def _bwrap_args(self, cwd: Path, inputs: Sequence[Path], run_dir: Path, protected: Sequence[Path]) -> list[str]:
        """The arguments of bwrap: namespaces, read-only root, hidden paths, inputs bound back, the run
        folder writable, protected paths hidden last (a key inside the matrix folder stays hidden)."""
        hidden, rebound = self._hidden_and_rebound(cwd, inputs)
        return [*self._view(hidden, rebound, run_dir, protected), "--chdir", str(cwd)]

    def _hidden_and_rebound(self, cwd: Path, inputs: Sequence[Path]) -> tuple[list[Path], list[Path]]:
        """(the hidden paths, the inputs and ``cwd`` under them to bind back), each looked up once."""
        if self._hidden_paths is None:
            self._hidden_paths = self._hidden()
        key = (cwd, *inputs)
        if key not in self._rebound:
            self._rebound[key] = self._rebind(inputs, cwd, self._hidden_paths)
        return self._hidden_paths, self._rebound[key]

    def _view(self, hidden: Sequence[Path], rebound: Sequence[Path], writable: Path,
              protected: Sequence[Path]) -> list[str]:
        """The bwrap arguments of a view: namespaces, read-only root, ``hidden`` paths (an empty tmpfs, or
        ``/dev/null`` for a file), ``rebound`` inputs back read-only, ``writable`` bound writable (its
        parent made 0711 where a hidden path holds it: bwrap would make it 0700 and the sandbox user must
        pass), ``protected`` paths hidden last (a key inside the matrix folder stays hidden)."""
        args = [*self._base_flags(), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
                "--perms", "1777", "--tmpfs", "/dev/shm"]
        for path in hidden:
            if not path.is_dir():
                args += ["--ro-bind", "/dev/null", str(path)]
            else:
                args += [*(("--perms", "1777") if str(path) in SHARED_TMP else ()), "--tmpfs", str(path)]
        for path in rebound:
            args += ["--ro-bind", str(path), str(path)]
        parent = writable.parent
        if any(h in parent.parents for h in hidden):
            args += ["--perms", "0711", "--dir", str(parent)]
        args += ["--bind", str(writable), str(writable)]
        for path in protected:
            args += ["--ro-bind", "/dev/null", str(path)] if path.is_file() else ["--tmpfs", str(path)]
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

    def _hidden(self) -> list[Path]:
        """Existing paths of :data:`HIDE_ALWAYS`, the gate's home and the engines' credentials, resolved,
        outermost first, none inside another (the inputs and the run folder are bound back afterwards)."""
        found: list[Path] = []
        kubeconfig = os.environ.get("KUBECONFIG", "")
        extra: list[str | Path] = [Path.home(), *(Path(p) for p in kubeconfig.split(os.pathsep) if p)]
        docker = os.environ.get("DOCKER_HOST", "")
        if docker.startswith("unix://"):
            extra.append(Path(docker[len("unix://"):]))
        for raw in [*HIDE_ALWAYS, *extra]:
            try:
                path = Path(raw).resolve()
            except OSError:
                continue
            if path == Path("/") or not path.exists() or path in found:
                continue
            if any(q == path or q in path.parents for q in found):
                continue
            found = [q for q in found if path not in q.parents]
            found.append(path)
        return sorted(found, key=lambda p: len(p.parts))

    @staticmethod
    def _rebind(inputs: Sequence[Path], cwd: Path, hidden: Sequence[Path]) -> list[Path]:
        """The inputs (and ``cwd``) that lie under a hidden path, to be bound back read-only, outermost first."""
        out: list[Path] = []
        for path in [cwd, *inputs]:
            real = path.resolve()
            if real.exists() and any(h == real or h in real.parents for h in hidden) and real not in out:
                out.append(real)
        out.sort(key=lambda p: len(p.parts))
        return [p for i, p in enumerate(out) if not any(q in p.parents for q in out[:i])]

    def _plain(self, argv: Sequence[str], env: Mapping[str, str]) -> Launch:
        """Unconfined start (no bwrap): killed with pytest by the kernel's parent-death signal."""
        launcher = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
        gaps = ("it can read the signing key and every file the gate can", "it can write into the bundle and journal",
                "it can read and signal the gate's processes",
                "children that leave its process group survive it")
        return Launch(argv=[*launcher, *argv], env=dict(env),
                      confinement=Confinement(mechanism="none", identity=f"uid {os.geteuid()} (the gate's own)",
                                              confined=False, gaps=gaps, reason=self._why_not))
