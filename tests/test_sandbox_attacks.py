"""A second round of attacks on the local allowlist sandbox (issue 29), as root (both sandboxes) and as uid 65534.

The round of the issue is :mod:`test_sandbox_escape` (engine sockets, sysctls, secrets, limits). Here the code
under test tries what that round did not: other processes through ``/proc`` (the gate's environment, its
descriptors, ``kill -1``), a nested user namespace to unmount the mask over the key's folder or remount
``/proc/sys``, abstract UNIX sockets, every system folder for a writable spot, ``cgroup.procs``, the terminal
(``/dev/tty``), the host name, and the gate's own clean-up: 1,500 nested folders (``shutil.rmtree`` raised
RecursionError, a gate traceback) and a folder of mode 0000 (left behind by a gate that is not root).
The gate part is :data:`test_sandbox_escape.GATE` (one confined run as ``backends.local`` starts it),
which then says whether the run's folder is gone.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from test_sandbox_escape import folder, gate

__all__ = ["folder"]  # the fixture, used by name

PROBE = r"""
import errno, json, os, socket, subprocess, sys
key = sys.argv[1]
keys = os.path.dirname(key)
seen = {}
def attempt(name, fn):
    try:
        seen[name] = "ok: " + repr(fn())[:300]
    except Exception as exc:
        seen[name] = "refused: " + type(exc).__name__ + (f" {errno.errorcode.get(exc.errno, '')}"
                                                         if isinstance(exc, OSError) and exc.errno else "")
seen["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
seen["fds"] = sorted(os.readlink(f"/proc/self/fd/{fd}").split(":")[0] for fd in os.listdir("/proc/self/fd")
                     if os.path.exists(f"/proc/self/fd/{fd}"))
def sh(script):
    done = subprocess.run(["unshare", "-Urm", "sh", "-c", script], capture_output=True, text=True, timeout=20)
    if done.returncode:
        raise RuntimeError(done.stderr.strip()[-200:])
    return done.stdout.strip()[-200:]
seen["nested_userns"] = subprocess.run(["unshare", "-Urm", "true"], timeout=20).returncode == 0
attempt("unmask_key_folder", lambda: sh(f"umount -l {keys} && cat {key}"))
attempt("remount_proc_sys", lambda: sh("mount -o remount,rw /proc/sys && echo 1 > /proc/sys/vm/drop_caches"))
abstract = sorted({line.split()[7] for line in open("/proc/net/unix").read().splitlines()[1:]
                   if len(line.split()) >= 8 and line.split()[7].startswith("@")})
seen["abstract_sockets"] = abstract
def touch(path):
    with open(os.path.join(path, ".hetero-probe"), "w") as fh:
        fh.write("x")
for path in ("/", "/etc", "/usr", "/sys", "/sys/fs/cgroup", "/dev", "/dev/pts", keys, os.getcwd()):
    attempt("write " + path, lambda path=path: touch(path))
attempt("cgroup_procs", lambda: open("/sys/fs/cgroup/cgroup.procs", "w").write(str(os.getpid())))
attempt("dev_tty", lambda: os.open("/dev/tty", os.O_RDWR))
seen["hetero_environment"] = [e.split(b"=")[0].decode() for e in open("/proc/1/environ", "rb").read().split(b"\0")
                              if e.startswith(b"HETERO")]
attempt("kill_every_other_process", lambda: os.kill(-1, 0))
attempt("sethostname", lambda: socket.sethostname("pwned"))
def deep(n):
    fd = os.open(os.environ["HOME"], os.O_RDONLY)
    for _ in range(n):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.symlink(key, "link-to-key", dir_fd=fd)
    os.close(fd)
    return n
attempt("nested_folders", lambda: deep(1500))
def locked():
    path = os.path.join(os.environ["HOME"], "locked")
    os.makedirs(os.path.join(path, "inner"))
    open(os.path.join(path, "inner", "f"), "w").write("x")
    os.chmod(os.path.join(path, "inner"), 0)
    os.chmod(path, 0)
    return "made"
attempt("mode_0000_folder", locked)
print(json.dumps(seen))
"""

AFTER = """
import os
from pytest_hetero.backends.sandbox.zygote import run_root
print(json.dumps({"run_folders_left": sorted(os.listdir(run_root())) if run_root().is_dir() else []}))
"""
"""Appended to the gate part: what is left in its folder of run folders once the run folder was removed."""


def run(folder: Path, as_user: str, network: bool = False) -> dict[str, Any]:
    """One confined run of :data:`PROBE` by :func:`test_sandbox_escape.gate` (its ``seen``), plus
    ``run_folders_left``."""
    (folder / "probe.py").write_text(PROBE)
    env = {"HETERO_SANDBOX_SHARED": "off"} if as_user == "root-per-run" else {}
    answer = gate(folder, as_user="root" if as_user.startswith("root") else "nobody", network=network, env=env,
                  after=AFTER)
    return answer


@pytest.mark.parametrize("as_user", ["root-session", "root-per-run", "uid-65534"])
def test_no_process_namespace_mount_socket_or_clean_up_trick_works(folder: Path, as_user: str) -> None:
    """Before (main): 1,500 nested folders in the run folder made the gate's clean-up raise RecursionError (a
    gate traceback) and a mode-0000 folder stayed behind when the gate was not root. The rest already held and
    is pinned here: only the run's own PID 1, only its three descriptors, no ``HETERO_*`` variable, no other
    process to signal, a nested user namespace that cannot unmount the key's mask nor remount ``/proc/sys``
    (mounts inherited from a more privileged namespace are locked), no abstract socket (own network namespace),
    no writable system folder, no terminal, no host name change."""
    if as_user.startswith("root") and os.geteuid() != 0:
        pytest.fail("this suite runs as root (as CI does)")
    answer = run(folder, as_user)
    seen = answer["seen"]
    assert seen["pids"] == [1]
    assert seen["fds"] == ["/dev/null", "pipe", "pipe"]
    assert seen["hetero_environment"] == []
    assert seen["kill_every_other_process"] == "refused: ProcessLookupError ESRCH"
    assert seen["nested_userns"] is True  # the kernel allows it: what it gives must be nothing
    assert seen["unmask_key_folder"].startswith("refused: RuntimeError"), seen["unmask_key_folder"]
    assert seen["remount_proc_sys"].startswith("refused: RuntimeError"), seen["remount_proc_sys"]
    assert seen["abstract_sockets"] == []
    for path in ("/", "/etc", "/usr", "/sys", "/sys/fs/cgroup", "/dev", "/dev/pts", str(folder / "keys"), str(folder)):
        assert seen["write " + path] in ("refused: OSError EROFS", "refused: PermissionError EACCES"), (path, seen)
    assert seen["cgroup_procs"] == "refused: OSError EROFS"
    assert seen["dev_tty"] == "refused: OSError ENXIO"
    assert seen["sethostname"] == "refused: PermissionError EPERM"
    assert (seen["nested_folders"], seen["mode_0000_folder"]) == ("ok: 1500", "ok: 'made'")
    # the gate removed all of it, without a traceback and without following the link to the key
    tail = json.loads(answer["after"])
    assert tail == {"run_folders_left": []}
    assert (folder / "keys" / "k.key").is_file()


def test_abstract_sockets_of_the_host_are_reachable_only_with_the_network_grant(folder: Path) -> None:
    """``network: true`` shares the host's network namespace, and with it the host's abstract UNIX sockets
    (dockerd's here): the record's gap says so. Without the grant none is visible (above)."""
    answer = run(folder, "root-session", network=True)
    host = sorted({line.split()[7] for line in Path("/proc/net/unix").read_text().splitlines()[1:]
                   if len(line.split()) >= 8 and line.split()[7].startswith("@")})
    assert host, "the host has no abstract socket to compare with"
    assert set(host) & set(answer["seen"]["abstract_sockets"]), (host, answer["seen"]["abstract_sockets"])
    assert "abstract UNIX sockets of the host's network namespace included" in answer["isolation"]["gaps"][0]
