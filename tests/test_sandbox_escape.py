"""The code under test cannot leave its allowlist sandbox (issue 29): real clients, real sockets, real limits.

The attack of the round: a model run as uid 0 reached Docker's embedded containerd socket
(``/run/docker/containerd/containerd.sock``) with ``ctr``, started a host container outside the
sandbox, took the key and re-signed the bundle. Here a real ``ctr`` and a real ``docker`` client run
inside the sandbox against every engine socket the host has, and the probe tries the host's sysctls,
``/etc/shadow``, ``/var/lib/docker``, the key and its folder, the network and every resource limit.

The gate runs as root (as CI does: both the session sandbox and a bubblewrap per run) and as an
ordinary user (uid 65534; the interpreter lives under ``/root``, 0700, so that gate is started in a
mount namespace where only the interpreter's prefix is visible under ``/root``). Before each attack the
test proves on the host that the client and the socket work, so a refusal inside means the sandbox.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_hetero.bundle.signing import generate_keypair

REPO = Path(__file__).resolve().parent.parent
CONTAINERD = "/run/docker/containerd/containerd.sock"
"""Docker's embedded containerd: the socket of the round's escape."""

GATE = """\
import json, sys
from pathlib import Path
from pytest_hetero.backends.local import environment_paths, run_confined, run_folder
from pytest_hetero.backends.sandbox import Sandbox, child_environment
folder, key, network, probe = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "1", sys.argv[4:]
sandbox = Sandbox([key, key.parent])
try:
    with run_folder() as tmp:
        env = child_environment({}, tmp, passed=sandbox.passed)
        launch, result = run_confined(sandbox, [sys.executable, str(folder / "probe.py"), *probe], cwd=folder,
                                      run_dir=tmp, env=env, inputs=[folder, *environment_paths(Path(sys.executable))],
                                      timeout_s=120, network=network)
        print(json.dumps({"exit": result.exit_code, "stdout": result.stdout, "stderr": result.stderr[-3000:],
                          "failure": result.failure, "isolation": launch.confinement.facts(),
                          "forked": launch.zygote is not None}))
finally:
    sandbox.close()
"""
"""The gate's part: one confined run of ``probe.py`` as ``backends.local`` starts a model run."""

PROBE = r"""
import errno, json, os, resource, socket, subprocess, sys, threading, time
key, sockets = sys.argv[1], sys.argv[2:]
seen = {"uid": os.getuid(), "gid": os.getgid()}
def attempt(name, fn):
    try:
        seen[name] = "ok: " + repr(fn())[:200]
    except Exception as exc:
        seen[name] = "refused: " + type(exc).__name__ + (f" {errno.errorcode.get(exc.errno, '')}"
                                                         if isinstance(exc, OSError) and exc.errno else "")
def client(argv):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip()[-200:])
    return done.stdout.strip()[:100]
attempt("ctr_docker_containerd", lambda: client(["ctr", "--connect-timeout", "2s", "--address", "/run/docker/containerd/containerd.sock",
                                                  "--namespace", "moby", "containers", "list"]))
attempt("ctr_default", lambda: client(["ctr", "--connect-timeout", "2s", "version"]))
attempt("docker_default", lambda: client(["docker", "version", "--format", "{{.Server.Version}}"]))
attempt("docker_run_sock", lambda: client(["docker", "-H", "unix:///run/docker.sock", "version", "--format",
                                           "{{.Server.Version}}"]))
for path in sockets:
    def connect(path=path):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        return "connected"
    attempt("socket " + path, connect)
def write(path, text):
    with open(path, "w") as fh:
        fh.write(text)
attempt("write_core_pattern", lambda: write("/proc/sys/kernel/core_pattern", "|/tmp/x"))
attempt("write_drop_caches", lambda: write("/proc/sys/vm/drop_caches", "1"))
attempt("write_ip_forward", lambda: write("/proc/sys/net/ipv4/ip_forward", "1"))
attempt("read_shadow", lambda: open("/etc/shadow").read()[:20])
attempt("list_var_lib_docker", lambda: os.listdir("/var/lib/docker"))
attempt("list_run", lambda: os.listdir("/run"))
attempt("list_var_lib", lambda: os.listdir("/var/lib"))
attempt("read_key", lambda: open(key).read()[:30])
attempt("list_key_folder", lambda: os.listdir(os.path.dirname(key)))
attempt("list_root", lambda: os.listdir("/root"))
attempt("tcp_out", lambda: socket.create_connection(("1.1.1.1", 53), timeout=2))
seen["interfaces"] = sorted(line.split(":")[0].strip() for line in open("/proc/net/dev").read().splitlines()[2:])
st = os.statvfs("/dev/shm")
seen["tmpfs_bytes"] = {p: os.statvfs(p).f_blocks * os.statvfs(p).f_frsize for p in ("/tmp", "/var/tmp", "/dev/shm")}
def fill(path, size):
    with open(path, "wb") as fh:
        for _ in range(size >> 20):
            fh.write(b"x" * (1 << 20))
    return size
attempt("fill_dev_shm", lambda: fill("/dev/shm/fill", 32 << 20))
attempt("big_file", lambda: fill(os.path.join(os.environ["HOME"], "big.bin"), 32 << 20))
def threads():
    started = []
    try:
        for _ in range(400):
            t = threading.Thread(target=time.sleep, args=(3,))
            t.start()
            started.append(t)
    except RuntimeError:
        return len(started)
    return len(started)
seen["threads_started"] = threads()
attempt("allocate_1g", lambda: len(bytearray(1 << 30)))
seen["rlimits"] = {n: resource.getrlimit(getattr(resource, n))[0] for n in ("RLIMIT_FSIZE", "RLIMIT_NPROC",
                                                                              "RLIMIT_DATA", "RLIMIT_CORE")}
seen["caps"] = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")]
print(json.dumps(seen))
"""

LIMITS = {"HETERO_SANDBOX_TMPFS": "8M", "HETERO_SANDBOX_FILE_SIZE": "16M", "HETERO_SANDBOX_PIDS": "64",
          "HETERO_SANDBOX_MEMORY": "512M"}
"""Small limits, so the probe hits each in a moment."""


@pytest.fixture
def folder() -> Iterator[Path]:
    """The matrix-like folder (readable by others) and, apart, the key's folder (0700, the gate's)."""
    path = Path(tempfile.mkdtemp(prefix="hetero-escape-", dir="/var/tmp"))
    path.chmod(0o755)
    (path / "probe.py").write_text(PROBE)
    (path / "keys").mkdir(mode=0o700)
    generate_keypair(path / "keys" / "k.key", path / "keys" / "k.pub")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def host_sockets() -> list[str]:
    """Every UNIX socket under the host's /run (engines, dbus, postgres…)."""
    found = []
    for base, _, files in os.walk("/run"):
        for name in files:
            path = os.path.join(base, name)
            if os.path.exists(path) and os.stat(path).st_mode & 0o170000 == 0o140000:
                found.append(path)
    return sorted(found)


def gate(folder: Path, *, as_user: str, network: bool = False, env: dict[str, str] | None = None,
         after: str = "") -> dict[str, Any]:
    """Run :data:`GATE` (then ``after``, Python run by the gate once the sandbox is closed, whose output is
    ``answer["after"]``) as root or as uid 65534 (then in a mount namespace hiding /root but the interpreter's
    prefix); its answer, with the probe's findings as ``seen``."""
    (folder / "gate.py").write_text(GATE + after)
    key = folder / "keys" / "k.key"
    argv = [sys.executable, str(folder / "gate.py"), str(folder), str(key), "1" if network else "0", str(key),
            *host_sockets()]
    environ = {**os.environ, "PYTHONPATH": str(REPO), **LIMITS, **(env or {})}
    if as_user != "root":
        prefix = os.path.realpath(sys.base_prefix)
        dirs = [str(p) for p in reversed(Path(prefix).parents) if str(p).startswith("/root/")]
        for path in [folder, *folder.rglob("*")]:
            os.chown(path, 65534, 65534)
        outer = ["bwrap", "--dev-bind", "/", "/", "--tmpfs", "/root"]
        for d in dirs:
            outer += ["--perms", "0755", "--dir", d]
        argv = [*outer, "--ro-bind", prefix, prefix, "--", "setpriv", "--reuid=65534", "--regid=65534",
                "--clear-groups", "--", *argv]
        environ["HOME"] = "/nonexistent"
    done = subprocess.run(argv, capture_output=True, text=True, env=environ, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    first, _, rest = done.stdout.partition("\n")
    answer: dict[str, Any] = json.loads(first)
    answer["after"] = rest.strip()
    assert (answer["exit"], answer["failure"]) == (0, None), answer
    answer["seen"] = json.loads(answer["stdout"])
    return answer


def test_the_clients_and_sockets_work_on_the_host() -> None:
    """The control: outside the sandbox, root's ``ctr`` reaches Docker's embedded containerd and ``docker``
    reaches dockerd, so a refusal inside the sandbox is the sandbox's doing."""
    ctr = subprocess.run(["ctr", "--address", CONTAINERD, "--namespace", "moby", "containers", "list"],
                         capture_output=True, text=True, timeout=30, check=False)
    assert ctr.returncode == 0, ctr.stderr
    docker = subprocess.run(["docker", "-H", "unix:///run/docker.sock", "version", "--format",
                             "{{.Server.Version}}"], capture_output=True, text=True, timeout=30, check=False)
    assert docker.returncode == 0 and docker.stdout.strip(), docker.stderr
    assert CONTAINERD in host_sockets()


@pytest.mark.parametrize("as_user", ["root-session", "root-per-run", "uid-65534"])
def test_no_engine_sysctl_secret_key_or_network_is_reachable(folder: Path, as_user: str) -> None:
    """Before (main): ``ctr`` as uid 0 listed and started containers through the embedded containerd socket;
    ``/proc/sys`` was writable; ``/etc/shadow`` and ``/var/lib/docker`` readable; the host network shared;
    tmpfs and files unbounded. After: every engine client and every host socket fails with ENOENT (nothing
    of ``/run`` exists), sysctls are read-only, the secrets are absent or unreadable, the key and its folder
    are hidden, only ``lo`` exists, and every limit holds — as root (both sandboxes) and as uid 65534."""
    env = {"HETERO_SANDBOX_SHARED": "off"} if as_user == "root-per-run" else {}
    if as_user.startswith("root") and os.geteuid() != 0:
        pytest.fail("this suite runs as root (as CI does)")
    answer = gate(folder, as_user="root" if as_user.startswith("root") else "nobody", env=env)
    seen, iso = answer["seen"], answer["isolation"]
    assert answer["forked"] is (as_user == "root-session")

    assert seen["uid"] != 0 and seen["gid"] != 0 and seen["caps"] == ["0000000000000000"]
    if as_user == "uid-65534":
        assert seen["uid"] == 65534 and iso["identity"] == "uid 65534 (the gate's user, unprivileged) in a user namespace"
    else:
        assert iso["identity"].startswith("hetero-sandbox (uid ")
    for client in ("ctr_docker_containerd", "ctr_default", "docker_default", "docker_run_sock"):
        assert seen[client].startswith("refused: RuntimeError"), (client, seen[client])
    sockets = {k: v for k, v in seen.items() if k.startswith("socket ")}
    assert f"socket {CONTAINERD}" in sockets and "socket /run/docker.sock" in sockets
    assert set(sockets.values()) == {"refused: FileNotFoundError ENOENT"}, sockets
    for name in ("write_core_pattern", "write_drop_caches", "write_ip_forward"):
        assert seen[name] in ("refused: OSError EROFS", "refused: PermissionError EACCES"), (name, seen[name])
    assert seen["read_shadow"] == "refused: PermissionError EACCES"
    for name in ("list_var_lib_docker", "list_run", "list_var_lib"):
        assert seen[name] == "refused: FileNotFoundError ENOENT", (name, seen[name])
    assert seen["read_key"] == "refused: PermissionError EACCES"  # the key's folder: an empty 0000 tmpfs
    assert seen["list_key_folder"] == "refused: PermissionError EACCES"
    assert seen["list_root"] == "ok: ['.pyenv']" if sys.base_prefix.startswith("/root/.pyenv") else True
    assert seen["tcp_out"] == "refused: OSError ENETUNREACH"
    assert seen["interfaces"] == ["lo"]
    assert seen["tmpfs_bytes"] == {"/tmp": 8 << 20, "/var/tmp": 8 << 20, "/dev/shm": 8 << 20}
    assert seen["fill_dev_shm"] == "refused: OSError ENOSPC"
    assert seen["big_file"] == "refused: OSError EFBIG"
    assert seen["threads_started"] < 64
    assert seen["allocate_1g"] == "refused: MemoryError"
    assert seen["rlimits"] == {"RLIMIT_FSIZE": 16 << 20, "RLIMIT_NPROC": 64, "RLIMIT_DATA": 512 << 20,
                               "RLIMIT_CORE": 0}
    assert iso["network"] == "loopback only (own network namespace)" and "net" in iso["namespaces"]
    assert iso["limits"] == {"tmpfs_bytes": 8 << 20, "file_bytes": 16 << 20, "processes": 64,
                             "memory_bytes": 512 << 20}
    assert "/run" not in iso["visible"] and "/var" not in iso["visible"] and "/etc/shadow" in iso["hidden"]


def test_network_granted_by_the_matrix_is_the_hosts_and_is_recorded(folder: Path) -> None:
    """``network: true`` for a model: the run shares the host's network namespace (its interfaces are the
    host's), the record says it was granted and lists it as a gap; everything else stays confined."""
    answer = gate(folder, as_user="root", network=True)
    seen, iso = answer["seen"], answer["isolation"]
    host = sorted(line.split(":")[0].strip() for line in Path("/proc/net/dev").read_text().splitlines()[2:])
    # containers and pods started meanwhile by other tests add and remove their veth pairs between the run's look
    # and this one: the interfaces that stay are compared (an own namespace would show "lo" alone)
    assert [n for n in seen["interfaces"] if not n.startswith("veth")] == [n for n in host if not n.startswith("veth")]
    assert host != ["lo"]
    assert iso["network"] == "host network (granted by the matrix)" and "net" not in iso["namespaces"]
    assert iso["gaps"] == ["it can reach the host's network and every service listening on it, abstract UNIX "
                           "sockets of the host's network namespace included (granted by the matrix)"]
    assert seen["ctr_docker_containerd"].startswith("refused: RuntimeError")
    assert seen["read_key"] == "refused: PermissionError EACCES"
