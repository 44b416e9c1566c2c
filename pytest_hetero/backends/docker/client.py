"""Container plumbing of the Docker backend: connection, labels, the workload container, exec with a timeout.

Every container and image the backend creates carries :func:`labels` (``pytest-hetero.run-id``
and friends) so ``hetero cleanup`` finds leftovers of crashed runs. The workload container runs
:data:`KEEP_ALIVE` (needs ``/bin/sh``) and every model run is a ``docker exec`` into it.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import docker
import docker.errors
import docker.tls
import msgspec
import requests.exceptions

from pytest_hetero.backends.docker.api import exec_inspect
from pytest_hetero.backends.labels import CREATED_AT, LABEL, OWNER, RUN_ID, utc_stamp
from pytest_hetero.backends.protocol import ExecResult
from pytest_hetero.backends.streams import CappedStream
from pytest_hetero.declared import resolve

if TYPE_CHECKING:
    from pytest_hetero.backends.docker.translate import HostConfigOptions

API_TIMEOUT_S = 120.0
"""Bound of every engine call except a model run's exec (which the layer timeout bounds)."""
KEEP_ALIVE = ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"]
"""PID 1 of a workload container: idles, exits 0 on SIGTERM (so ``docker stop`` is immediate). It runs as
:func:`keeper_user`, never as a model run's user."""
GATE_USER = "0:0"
"""Default user of the gate's own execs (``/dev`` baseline, reset, outputs read, kill): the engine passes the
run's user (:func:`model_user`). The workload container's user is :func:`keeper_user` (not root), so Docker
gives no exec of it a capability (effective and permitted sets empty, whatever the exec's user: measured on
Docker 20.10): uid 0 there is an ordinary uid, and only the run's own uid may kill its processes and remove
what it made in the sticky ``/tmp``, ``/dev/shm`` and ``/dev/mqueue``."""
KEEPER_USERS = ("65534:65534", "65533:65533")
"""Unprivileged ``uid:gid`` of :data:`KEEP_ALIVE` (PID 1) and its idle ``sleep``; the second when the image's user
is the first."""
CAP_DROP = ["SETUID", "SETGID", "SETPCAP", "SYS_PTRACE"]
"""Capabilities dropped from a workload container's bounding set (``HostConfig.CapDrop``; Docker's default set
has no ``SYS_PTRACE``, dropped here all the same): no exec, even one given capabilities, can become
:func:`keeper_user` or trace a process of another uid. With ``no-new-privileges`` (:data:`SECURITY_OPT`) a
set-user-id file gives no uid or capability either."""
SECURITY_OPT = ["no-new-privileges"]
"""``HostConfig.SecurityOpt`` of a workload container: exec of a set-user-id or file-capability program gains
nothing (no other uid, no capability)."""
PIDS_LIMIT = 4096
"""Processes and threads a workload container may hold at once (``HostConfig.PidsLimit``, the container's
``pids.max``; the local sandbox's default, ``HETERO_SANDBOX_PIDS``): a model that forks without end fails in
its own container (its fork gets EAGAIN) instead of taking the host's PIDs from the gate and from the runs
beside it."""


def confined_host_config(api: docker.APIClient, resources: HostConfigOptions, network: str,
                         mounts: list[docker.types.Mount]) -> dict[str, Any]:
    """The ``HostConfig`` of every container a model's code runs in (the resource × image workload, a per-run
    model container, a job's ranks): the engine request's ``resources`` (:meth:`.translate.EngineRequest.host_config`),
    ``network`` (``network_mode``), a read-only root file system with :data:`WORK_TMPFS`, :data:`CAP_DROP` dropped,
    :data:`SECURITY_OPT`, at most :data:`PIDS_LIMIT` tasks, and ``mounts``."""
    return api.create_host_config(**resources, network_mode=network, read_only=True, tmpfs=dict(WORK_TMPFS),
                                  cap_drop=list(CAP_DROP), security_opt=list(SECURITY_OPT), pids_limit=PIDS_LIMIT,
                                  mounts=mounts)


EXEC_WRAPPER = 'mkdir -p "$1" && echo $$ > "$1/.pid" && shift && exec "$@"'
"""``sh -c`` script run as ``sh -c WRAPPER sh RUN_DIR ARGV…``: makes the run folder, then becomes ARGV."""
KILL_ALL = ["/bin/sh", "-c", "kill -9 -1"]
"""Kills every process of the container but PID 1 (kill(-1) spares init and the caller)."""
WORK_TMPFS = {"/tmp": "rw,exec,nosuid,nodev,mode=1777"}
"""Writable folders of a workload container, whose root file system is read-only (``HostConfig.Tmpfs``)."""
DESCRIBE = r"""
describe() {
  if [ -L "$1" ]; then printf '%s|l|%s' "$1" "$(readlink "$1")"; elif [ -d "$1" ]; then printf '%s|d|' "$1"
  elif [ -c "$1" ]; then printf '%s|c|' "$1"; elif [ -b "$1" ]; then printf '%s|b|' "$1"
  elif [ -p "$1" ]; then printf '%s|p|' "$1"; elif [ -S "$1" ]; then printf '%s|s|' "$1"; else printf '%s|f|' "$1"; fi
}
"""
"""Shell function: one line naming a ``/dev`` entry, its type (``l`` link with its target, ``d``, ``c``, ``b``,
``p``, ``s``, ``f``)."""
DEV_BASELINE = DESCRIBE + r"""cd /dev && for f in * .[!.]* ..?*; do
  { [ -e "$f" ] || [ -L "$f" ]; } && { describe "$f"; echo; }
done
"""
"""``sh -c`` script listing the container's ``/dev`` entries (:data:`DESCRIBE` lines) before any model run."""
RESET_BODY = r"""
i=0
while :; do
  kill -9 -1 2>/dev/null
  left=""
  for p in /proc/[0-9]*; do
    n=${p#/proc/}
    [ "$n" = 1 ] || [ "$n" = "$$" ] && continue
    line=""; read -r line < "$p/stat" 2>/dev/null || continue
    [ -n "$line" ] || continue
    set -- ${line##*) }
    [ "$1" != Z ] && [ "$4" != 1 ] && left="$left $n"
  done
  [ -z "$left" ] && break
  i=$((i+1))
  [ "$i" -ge 50 ] && { echo "processes still running after kill -9 -1:$left"; exit 3; }
  sleep 0.1
done
chmod -R u+rwx /tmp /dev/shm 2>/dev/null
rm -rf /tmp/* /tmp/.[!.]* /tmp/..?* /dev/shm/* /dev/shm/.[!.]* /dev/shm/..?* 2>/dev/null
cd /dev || exit 4
for f in * .[!.]* ..?*; do
  { [ -e "$f" ] || [ -L "$f" ]; } || continue
  known "$(describe "$f")" || { [ -d "$f" ] && [ ! -L "$f" ] && chmod -R u+rwx "./$f" 2>/dev/null; rm -rf "./$f"; }
done
rm -f /dev/mqueue/* /dev/mqueue/.[!.]* /dev/mqueue/..?* 2>/dev/null
restore
command -v ipcrm >/dev/null 2>&1 && ipcrm --all >/dev/null 2>&1
for f in /tmp/* /tmp/.[!.]* /tmp/..?* /dev/shm/* /dev/shm/.[!.]* /dev/shm/..?* /dev/mqueue/* /dev/mqueue/.[!.]* \
         /dev/mqueue/..?*; do
  [ -e "$f" ] || [ -L "$f" ] && { echo "could not remove $f"; exit 4; }
done
for f in * .[!.]* ..?*; do
  { [ -e "$f" ] || [ -L "$f" ]; } || continue
  known "$(describe "$f")" || { echo "could not remove /dev/$f"; exit 4; }
done
exit 0
"""
"""The body of :func:`reset_script` (after :data:`DESCRIBE` and the ``known`` function of the baseline)."""


def reset_script(baseline: list[str]) -> str:
    """``sh -c`` script that returns a workload container to its started state between runs: kills every
    process but PID 1 (repeating ``kill -9 -1`` until none is left outside PID 1's session: the idle
    ``sleep`` of :data:`KEEP_ALIVE`, which a run cannot join; zombies are not counted), empties
    :data:`WORK_TMPFS`, ``/dev/shm`` and ``/dev/mqueue`` (POSIX message queues), removes every ``/dev`` entry
    whose :data:`DESCRIBE` line is not in ``baseline`` (taken by :data:`DEV_BASELINE` before the first model
    run: a folder, link, file, FIFO, socket or device node a run made, or a link it re-pointed; the links of
    the baseline are made again) and SysV IPC objects. Exit 0: clean; 3: processes survived; 4: something
    could not be removed (the message says what)."""

    def sh(text: str) -> str:
        return "'" + text.replace("'", "'\\''") + "'"

    quoted = "|".join(sh(line) for line in baseline if line)
    known = f'known() {{ case "$1" in {quoted}) return 0;; esac; return 1; }}\n' if quoted else \
        "known() { return 1; }\n"
    links = [line.split("|", 2) for line in baseline if line.count("|") >= 2 and line.split("|", 2)[1] == "l"]
    restore = "restore() {\n" + "".join(f"  [ -L {sh(name)} ] || ln -s {sh(target)} {sh(name)}\n"
                                        for name, _, target in links) + "  :\n}\n"
    return DESCRIBE + known + restore + RESET_BODY


class ResetFacts(TypedDict):
    """What the reset between model runs guarantees (:data:`RESET_FACTS`): the ``mechanism``, the
    ``root_filesystem``, what stays ``writable``, what happens ``between_runs``, the known ``gaps`` and how
    ``pid_1`` is out of a run's reach."""

    mechanism: str
    root_filesystem: str
    writable: list[str]
    between_runs: list[str]
    gaps: list[str]
    pid_1: str


RESET_FACTS: ResetFacts = {
    "mechanism": "docker container, read-only root file system; reset between runs",
    "root_filesystem": "read-only", "writable": [*WORK_TMPFS, "/dev/shm", "/dev"],
    "between_runs": ["kill -9 -1 until no process outside PID 1's session is left", "/tmp and /dev/shm emptied",
                     "every /dev entry not there before the first model run removed, whatever its type",
                     "POSIX message queues (/dev/mqueue) removed", "SysV IPC objects removed (ipcrm)"],
    "gaps": ["what a run changes inside a device folder that existed at start (docker's are mounts: pts, shm, "
             "mqueue) is not compared",
             "a run has no capability (the container's user is not root): a program that needs one inside a model "
             "run (su, sudo, gosu, set-user-id files, chown, mknod, root's mode-600 files) is refused",
             "the gate's own execs run as the run's user: a process a run left could race the start of the next "
             "reset exec before kill -9 -1 reaches it (same uid, same empty capability set)"],
    "pid_1": "runs as an unprivileged uid other than the run's; SETUID, SETGID, SETPCAP and SYS_PTRACE dropped, "
             "no-new-privileges, no capability in any exec: a run cannot ptrace, write (/proc/1/mem) or signal PID 1 "
             "or its idle sleep",
}
"""What :data:`RESET` guarantees, for a model run's ``isolation`` record (JSON values)."""
OOM_COUNTERS = "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null"
"""cgroup v2 ``memory.events`` / v1 ``memory.oom_control``: both carry an ``oom_kill N`` line."""

CONNECTION_LOST = (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError)
"""What the docker SDK raises (unwrapped ``requests`` errors) when the engine's socket refuses or drops."""


class EngineLost(Exception):
    """The engine stopped answering while doing ``what``: ``error`` (one line) says how it showed.

    ``partial`` is what a model run produced before the engine went away (None elsewhere).
    """

    def __init__(self, what: str, error: str, partial: ExecResult | None = None) -> None:
        self.what, self.error, self.partial = what, error, partial
        super().__init__(f"{what}: {error}")


def labels(run_id: str, owner: str, role: str, **keys: str) -> dict[str, str]:
    """Labels of a created object: run id, owner token, role, created-at, plus ``keys`` (matrix, resource, image)."""
    out = {RUN_ID: run_id, OWNER: owner, LABEL + "role": role, CREATED_AT: utc_stamp()}
    out.update({LABEL + k: v for k, v in keys.items()})
    return out


def safe_name(*parts: str) -> str:
    """A container name from ``parts``: ``[a-zA-Z0-9][a-zA-Z0-9_.-]*``, at most 120 characters."""
    name = re.sub(r"[^a-zA-Z0-9_.-]+", "_", "-".join(parts))
    return name[:120]


class ClientOptions(TypedDict, total=False):
    """``docker.APIClient`` keyword arguments (:func:`connection`; each optional, as the SDK's are): ``base_url``
    (``unix://…``/``tcp://…``; absent: the SDK's default socket), ``tls`` (the target's or the environment's
    ``TLSConfig``) and ``version`` (the API version to speak; absent: negotiated); the read timeout is
    :func:`make_client`'s."""

    base_url: str | None
    tls: docker.tls.TLSConfig
    version: str


class BindMount(TypedDict):
    """A bind mount of a host path into a container (:func:`input_mounts`, an engine request's driver folders)."""

    source: str
    target: str
    read_only: bool


class TlsSettings(msgspec.Struct, frozen=True, kw_only=True):
    """``target.tls``: PEM paths ``ca_cert``, ``client_cert`` with ``client_key`` (mutual TLS), and ``verify`` (check
    the engine's certificate against ``ca_cert``; None: true). None where not given."""

    ca_cert: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    verify: bool | None = None


class EngineAddress(msgspec.Struct, frozen=True, kw_only=True):
    """Where a target's engine is: ``docker_host`` and ``tls`` (None: not given; ``tls: {}``: given, empty)."""

    docker_host: str | None = None
    tls: TlsSettings | None = None


def connection(target: Mapping[str, object]) -> ClientOptions:
    """``docker.APIClient`` keyword arguments from the target (``docker_host``, ``tls``) or the environment.

    ``tls``: ``{"ca_cert", "client_cert", "client_key", "verify"}`` (PEM paths; ``verify`` checks the
    engine's certificate against ``ca_cert``, default true). Without either key,
    ``DOCKER_HOST``/``DOCKER_TLS_VERIFY``/``DOCKER_CERT_PATH`` apply. Raises
    docker.errors.TLSParameterError when a named file does not exist, docker.errors.DockerException naming the
    field when ``docker_host`` or a member of ``tls`` is of another type (:class:`EngineAddress`).
    """
    try:
        where = msgspec.convert(target, EngineAddress)
    except msgspec.ValidationError as exc:
        raise docker.errors.DockerException(f"not a Docker engine address: {exc}") from None
    host, tls = where.docker_host, where.tls
    if host is None and tls is None:
        env = docker.utils.kwargs_from_env()  # type: ignore[attr-defined]  # (docker.utils is not re-exported in types-docker)
        found: ClientOptions = {}
        if "base_url" in env:  # the SDK sets only what DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_CERT_PATH give
            found["base_url"] = str(env["base_url"])
        if "tls" in env:
            found["tls"] = env["tls"]
        return found
    kwargs: ClientOptions = {"base_url": host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"}
    if tls is not None and tls != TlsSettings():  # an empty tls asks for none
        cert = (tls.client_cert, tls.client_key or "") if tls.client_cert else None
        kwargs["tls"] = docker.tls.TLSConfig(client_cert=cert, ca_cert=tls.ca_cert,
                                             verify=tls.verify is not False)
    return kwargs


class EngineClient(docker.APIClient):
    """An APIClient whose streamed exec output closes the engine's socket once read to its end (or dropped).

    The SDK hands a streamed exec's frames out as a generator over the hijacked socket and leaves
    closing it to the caller without giving the caller the response ("the caller is responsible for
    closing the response", ``APIClient._read_from_socket``): the socket then leaks (a ResourceWarning,
    an error under ``-W error``).
    """

    def _read_from_socket(self, response: Any, stream: bool, tty: bool = True, demux: bool = False) -> Any:
        out = super()._read_from_socket(response, stream, tty=tty, demux=demux)  # type: ignore[misc]
        return _closing(out, response) if stream else out


def _closing(frames: Iterator[Any], response: Any) -> Iterator[Any]:
    """``frames``, then close ``response`` and the socket under it (the SDK's SocketIO holds it open)."""
    fp = getattr(getattr(getattr(response, "raw", None), "_fp", None), "fp", None)
    raw = getattr(fp, "raw", None)
    try:
        yield from frames
    finally:
        for part in (response, raw, getattr(raw, "_sock", None)):
            try:
                if part is not None:
                    part.close()
            except OSError:
                pass


class TlsEngineClient(EngineClient):
    """An APIClient whose TLS settings are only the target's: requests' ``trust_env`` (which lets
    ``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE`` replace the engine's CA, and proxies intercept) is off."""

    @property
    def trust_env(self) -> bool:
        """Always False (requests.Session sets it to True in its constructor; that is ignored)."""
        return False

    @trust_env.setter
    def trust_env(self, value: bool) -> None:
        pass


def make_client(conn: ClientOptions, timeout: float | None) -> docker.APIClient:
    """An engine client for :func:`connection` kwargs with a read ``timeout`` (seconds, None: none).

    Raises docker.errors.DockerException when the engine does not answer the version request.
    """
    cls = TlsEngineClient if conn.get("tls") else EngineClient
    return cls(**conn, timeout=timeout)  # type: ignore[arg-type]  # (types-docker says int; requests takes a float or None)


def engine_is_local(kwargs: ClientOptions) -> bool:
    """True when the engine runs on this host (unix socket, or TCP to this host's loopback)."""
    url = str(kwargs.get("base_url") or "unix://")
    if url.startswith(("unix:", "npipe:", "http+unix:", "/")):
        return True
    host = re.sub(r"^[a-z+]+://", "", url).split(":")[0].strip("[]")
    return host in ("localhost", "127.0.0.1", "::1", socket.gethostname())


def model_user(image_user: str | None) -> str:
    """The user a model run (and a startup check) execs as: the image's ``Config.User``, ``0:0`` (root) when empty."""
    return (image_user or "").strip() or "0:0"


def keeper_user(run_user: str) -> str:
    """The ``uid:gid`` of :data:`KEEP_ALIVE` for a container whose runs exec as ``run_user`` (:func:`model_user`):
    the first of :data:`KEEPER_USERS` whose uid is not the run's (``nobody`` counts as 65534)."""
    uid = run_user.split(":", 1)[0].strip()
    taken = "65534" if uid == "nobody" else uid
    return next(u for u in KEEPER_USERS if u.split(":", 1)[0] != taken)


def user_check(api: docker.APIClient, cid: str, user: str) -> str:
    """"" when a process can start as ``user`` in the running container, else what the engine said (one line; e.g.
    an image whose ``USER`` has no passwd entry: the container itself starts, as :func:`keeper_user`).
    Raises docker.errors.APIError when the engine refuses the exec."""
    ex = api.exec_create(cid, ["/bin/sh", "-c", ":"], user=user)
    out = (api.exec_start(ex["Id"]) or b"").decode("utf-8", "replace").strip()
    code = exec_inspect(api, ex["Id"]).exit_code
    return "" if code == 0 else (out.splitlines() or [f"exit {code}"])[-1][:300]


def dev_baseline(api: docker.APIClient, cid: str, user: str = GATE_USER) -> list[str]:
    """The container's ``/dev`` entries (:data:`DEV_BASELINE` lines), read as ``user`` before any model run.
    Raises docker.errors.APIError when the engine refuses the exec."""
    ex = api.exec_create(cid, ["/bin/sh", "-c", DEV_BASELINE], user=user)
    out = (api.exec_start(ex["Id"]) or b"").decode("utf-8", "replace")
    return [line for line in out.splitlines() if line]


def reset(api: docker.APIClient, cid: str, baseline: list[str], user: str = GATE_USER) -> str:
    """Run :func:`reset_script` of ``baseline`` (:func:`dev_baseline`) in the container as ``user`` (the runs'
    user, :func:`model_user`); return "" when it left the container clean, else why not (one line).

    Raises docker.errors.APIError when the engine refuses the exec (container not running).
    """
    ex = api.exec_create(cid, ["/bin/sh", "-c", reset_script(baseline)], user=user)
    out = (api.exec_start(ex["Id"]) or b"").decode("utf-8", "replace").strip()
    code = exec_inspect(api, ex["Id"]).exit_code
    return "" if code == 0 else (out.splitlines() or [f"reset exited with {code}"])[-1][:300]


def oom_kills(api: docker.APIClient, cid: str) -> int | None:
    """The container cgroup's ``oom_kill`` counter (read inside it), or None when unreadable."""
    try:
        ex = api.exec_create(cid, ["/bin/sh", "-c", OOM_COUNTERS], user=GATE_USER)
        out = api.exec_start(ex["Id"]) or b""
    except docker.errors.APIError:
        return None
    found = re.search(rb"^oom_kill (\d+)", out, re.MULTILINE)
    return int(found.group(1)) if found else None


MAX_OUTPUTS_BYTES = 64 * 1024 * 1024
"""Largest outputs file copied out of a container (it is held in memory, and a tar copy of it too)."""


class OutputsRefused(Exception):
    """The outputs file was not read: ``category`` ``outputs_too_large`` or ``bad_outputs`` (the model's
    own fault, as on the local engine), and ``message`` (why, and what to write instead)."""

    def __init__(self, category: str, message: str) -> None:
        super().__init__(message)
        self.category, self.message = category, message


READ_OUTPUTS = r"""
f=$1; max=$2
[ -L "$f" ] && { echo "link $(readlink "$f")" >&2; exit 10; }
[ -e "$f" ] || exit 11
[ -p "$f" ] && { echo fifo >&2; exit 12; }
[ -f "$f" ] || { echo other >&2; exit 12; }
links=$(stat -c %h "$f" 2>/dev/null || echo 1)
[ "$links" = 1 ] || { echo "links $links" >&2; exit 13; }
size=$(stat -c %s "$f" 2>/dev/null || wc -c < "$f")
[ "$size" -le "$max" ] || { echo "size $size" >&2; exit 14; }
chmod u+r "$f" 2>/dev/null
command -v head >/dev/null 2>&1 && exec head -c "$((max + 1))" "$f"
exec cat "$f"
"""
"""``sh -c`` script run as ``sh -c READ_OUTPUTS sh PATH MAX``: refuses by metadata (exit 10 symbolic link,
11 missing, 12 not a regular file, 13 other hard links, 14 larger than MAX bytes; one line on stderr),
else copies at most MAX + 1 bytes of the file to stdout (``head -c``; ``cat`` in an image without ``head``).
A process the run left can swap the file between the checks and the copy (a link to ``/dev/zero``: the copy
stops at MAX + 1 bytes; a FIFO: the copy waits, until :data:`READ_OUTPUTS_TIMEOUT_S`)."""
READ_OUTPUTS_TIMEOUT_S = 30.0
"""How long reading a run's outputs file may take before every process of the container but PID 1 is killed
(the reader waiting on a FIFO a process of the run put in the file's place) and the outputs refused."""


def read_outputs(api: docker.APIClient, cid: str, path: str, max_bytes: int, user: str = GATE_USER
                 ) -> bytes | None:
    """The outputs file's bytes, read inside the container as ``user`` (the run's, :func:`model_user`: its
    owner; ``docker exec`` of :data:`READ_OUTPUTS`:
    the run folder is a tmpfs, which the engine's archive endpoint cannot see); None when it does not exist.

    Checked by its metadata before a byte is read, as the local engine does: raises OutputsRefused
    ``bad_outputs`` when it is a symbolic link, a FIFO or anything but a regular file, or has other hard
    links, ``outputs_too_large`` when it has more than ``max_bytes`` bytes. Raises
    docker.errors.APIError when the engine refuses the exec.
    """
    ex = api.exec_create(cid, ["/bin/sh", "-c", READ_OUTPUTS, "sh", path, str(max_bytes)], user=user)
    timer, fired = _kill_all_after(api, cid, user, READ_OUTPUTS_TIMEOUT_S)
    timer.start()
    try:
        out, err = api.exec_start(ex["Id"], demux=True)
    finally:
        timer.cancel()
    code = exec_inspect(api, ex["Id"]).exit_code
    why = (err or b"").decode("utf-8", "replace").strip()
    name = path.rsplit("/", 1)[-1]
    if fired.is_set():
        raise OutputsRefused("bad_outputs", f"outputs file {name} could not be read within "
                                            f"{READ_OUTPUTS_TIMEOUT_S:g} s: a process the run left made it a FIFO "
                                            "after it was checked; the run's processes were killed")
    if code == 0:
        data = out or b""
        if len(data) > max_bytes:
            raise OutputsRefused("outputs_too_large", f"entrypoint wrote more than {max_bytes} bytes of outputs")
        return data
    if code == 11:
        return None
    if code == 10:
        raise OutputsRefused("bad_outputs", f"outputs file {name} is a symbolic link (to {why[5:]!r}); links are "
                                            "not followed: write the outputs into the file itself")
    if code == 13:
        raise OutputsRefused("bad_outputs", f"outputs file {name} has {why[6:]} hard links; write a new file")
    if code == 14:
        raise OutputsRefused("outputs_too_large", f"entrypoint wrote a {why[5:]}-byte outputs file ({path}), "
                                                  f"more than the {max_bytes} bytes read back")
    if code == 12:
        kind = "a FIFO" if why == "fifo" else "not a regular file"
        raise OutputsRefused("bad_outputs", f"outputs file {name} is {kind}; write a regular file")
    raise docker.errors.APIError(f"reading {path} in the container exited with {code}: {why[:300]}")


class _Watchdog(threading.Timer):
    """A Timer that never receives SIGINT/SIGTERM, so the kernel delivers them to the main thread
    (blocked in the exec's socket read), where pytest turns them into KeyboardInterrupt."""

    def run(self) -> None:
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        super().run()


def _kill_all_after(api: docker.APIClient, cid: str, user: str, timeout_s: float) -> tuple[_Watchdog, threading.Event]:
    """A not yet started :class:`_Watchdog` that, ``timeout_s`` seconds after its start, sets the returned event
    and runs :data:`KILL_ALL` in container ``cid`` as ``user`` (an engine that refuses or is gone is ignored)."""
    fired = threading.Event()

    def kill() -> None:
        fired.set()
        try:
            api.exec_start(api.exec_create(cid, KILL_ALL, user=user)["Id"])
        except (docker.errors.APIError, *CONNECTION_LOST):
            pass

    return _Watchdog(timeout_s, kill), fired


def run_exec(api: docker.APIClient, long_api: docker.APIClient, cid: str, argv: list[str], run_dir: str,
             env: dict[str, str], workdir: str | None, timeout_s: float, user: str = "0:0") -> ExecResult:
    """Run ``argv`` in the container through :data:`EXEC_WRAPPER` as ``user`` (:func:`model_user`); return its
    ExecResult.

    ``long_api`` has no read timeout (the run may take the whole layer timeout). At
    ``timeout_s`` seconds every non-init process in the container is killed (``timed_out``,
    ``exit_code`` None). ``outputs`` is left None; ``details`` holds the exec id and each stream's
    full size and sha256 (at most :data:`~pytest_hetero.backends.streams.STREAM_CAP_BYTES` of each are kept).
    Raises docker.errors.APIError when the engine refuses the exec (container not running),
    :class:`EngineLost` (with the partial output) when the engine went away during the run.
    """
    ex = api.exec_create(cid, ["/bin/sh", "-c", EXEC_WRAPPER, "sh", run_dir, *argv], environment=env,
                         workdir=workdir, user=user)
    timer, fired = _kill_all_after(api, cid, user, timeout_s)
    out, err = CappedStream(), CappedStream()
    start = time.perf_counter()
    timer.start()
    try:
        for chunk_out, chunk_err in long_api.exec_start(ex["Id"], stream=True, demux=True):
            out.add(chunk_out)
            err.add(chunk_err)
    except OSError:  # requests/urllib3/socket errors: the engine dropped the stream; exec_inspect tells why
        pass
    finally:
        timer.cancel()
    duration = time.perf_counter() - start
    result = ExecResult(argv=argv, exit_code=None, duration_s=duration, stdout=out.text(), stderr=err.text(),
                        outputs=None, timed_out=fired.is_set(),
                        details={"exec_id": ex["Id"], **out.facts("stdout"), **err.facts("stderr")})
    what = f"the model run (exec {ex['Id'][:12]} in container {cid[:12]})"
    try:
        found = exec_inspect(api, ex["Id"])
    except CONNECTION_LOST as exc:
        raise EngineLost(what, "the exec stream ended and the engine no longer answers", result) from exc
    except docker.errors.NotFound as exc:  # a restarted engine has forgotten its exec instances
        raise EngineLost(what, "the engine no longer knows the exec (it restarted)", result) from exc
    if found.running and not fired.is_set():
        raise EngineLost(what, "the exec stream ended while the run was still going", result)
    code = found.exit_code
    result.exit_code = None if fired.is_set() else code
    result.details["raw_exit_code"] = code
    return result


def container_paths(model_name: str, model_path: Path, code: Path, dataset_name: str,
                    dataset_path: Path) -> dict[str, str]:
    """In-container paths: ``{"model", "code", "dataset"}`` under ``/hetero`` (the mounts of :func:`input_mounts`)."""
    code_path = f"/hetero/code/{model_name}" + ("" if code.is_dir() else f"/{code.name}")
    return {"model": f"/hetero/models/{model_name}/{model_path.name}", "code": code_path,
            "dataset": f"/hetero/datasets/{dataset_name}/{dataset_path.name}"}


def input_mounts(models: list[tuple[str, Path, Path]], datasets: list[tuple[str, Path]]) -> list[BindMount]:
    """Read-only bind mounts for ``(name, model file, code path)`` and ``(name, dataset file)``.

    A code file is mounted into its model's code folder; a code folder is the folder.
    Returns ``[{"source", "target", "read_only": True}]`` with host paths as sources.
    """
    out: list[BindMount] = []
    for name, path, code in models:
        out.append({"source": str(path), "target": f"/hetero/models/{name}/{path.name}", "read_only": True})
        target = f"/hetero/code/{name}" + ("" if code.is_dir() else f"/{code.name}")
        out.append({"source": str(code), "target": target, "read_only": True})
    for name, path in datasets:
        out.append({"source": str(path), "target": f"/hetero/datasets/{name}/{path.name}", "read_only": True})
    return out


resolve(__name__)
