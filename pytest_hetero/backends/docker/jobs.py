"""Jobs of several ranks on one Docker engine (:mod:`pytest_hetero.backends.jobs`): one container per rank on a
user-defined bridge network of the job's own, so every rank reaches rank 0 by its container name (Docker's
embedded DNS); the gate's programs bind-mounted read-only at :data:`~pytest_hetero.backends.jobs.JOB_DIR`, the
matrix's volume (a host path) bind-mounted read-write at :data:`~pytest_hetero.backends.jobs.VOLUME_DIR`.

Each rank container runs the program as its PID 1 with the same confinement as the resource × image workload
(read-only root file system, the work tmpfs, dropped capabilities, no-new-privileges, the resource's CPU and
memory limits, the image's user), so its exit code, OOM verdict and log are Docker's own facts. Facts only:
the training layer judges. Containers carry the run's owner label (removed by the engine's close as a last
resort); the network is removed by :func:`remove`.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors

from pytest_hetero.backends.docker import client as run
from pytest_hetero.backends.docker import place
from pytest_hetero.backends.docker.api import ContainerState, container_state, inspect_image
from pytest_hetero.backends.docker.errors import outcome
from pytest_hetero.backends.docker.session import DockerSession
from pytest_hetero.backends.jobs import JOB_DIR, VOLUME_DIR, Job, JobSpec, RankExit
from pytest_hetero.backends.labels import LABEL
from pytest_hetero.backends.protocol import ActionFailed, Step, Unsupported, UsageFacts

LOG_LIMIT = 256 * 1024
"""Bytes of each rank's stdout and stderr kept (the tail)."""
RANK_ALIAS = "hetero-rank-{rank}"
"""DNS name of a rank on its job's network (rank 0's is the rendezvous host)."""
POLL_S = 0.25
"""Seconds between two looks at the rank containers while waiting."""


@dataclass
class DockerJobHandle:
    """What this engine keeps of a job :func:`start` made (the :data:`HANDLE` entry of :attr:`Job.handle`): the
    job's own ``network`` (its name), the ``programs`` folder bind-mounted into each rank, and the rank containers'
    ``ids`` in rank order (as they are created)."""

    network: str
    programs: Path
    ids: list[str] = field(default_factory=list)


HANDLE = "docker"
"""The key of a job's :class:`DockerJobHandle` in :attr:`Job.handle` (engine-private)."""


def _handle(job: Job) -> DockerJobHandle:
    """The :class:`DockerJobHandle` of ``job`` (one :func:`start` returned)."""
    own: DockerJobHandle = job.handle[HANDLE]
    return own


def start(session: DockerSession, step: Step, spec: JobSpec, image: str, python: str) -> Job:
    """Create the job's network and its ``spec.world_size`` rank containers from ``image`` and start them (rank 0
    first). ``python``: the interpreter ``{python}`` in ``spec.argv`` stands for. Raises Unsupported on a remote
    engine (the programs and the volume are bind mounts of this host), ActionFailed (classified like a
    startup) when a rank cannot be created or started; what was created is removed first."""
    if not session.local:
        raise Unsupported("jobs of several ranks need the Docker engine of this host (bind mounts of the gate's "
                          "programs and of the volume)")
    api = session.api
    base = run.safe_name("hetero", session.settings.run_id, step.resource.name, step.image.name, spec.name,
                         f"a{spec.attempt}", session.owner[:6])
    programs = Path(tempfile.mkdtemp(prefix="hetero-job-"))
    for name, data in spec.files.items():
        (programs / name).write_bytes(data)
    programs.chmod(0o755)
    for f in programs.iterdir():
        f.chmod(0o644)
    # rank 0 is reached by a short alias on the job's own network: a container name can exceed the 63 characters
    # of a DNS label (a long run id), and then the other ranks' resolver cannot look it up
    job = Job(spec=spec, ranks=[f"{base}-r{rank}" for rank in range(spec.world_size)],
              rendezvous_host=RANK_ALIAS.format(rank=0), where=f"Docker network {base}",
              handle={HANDLE: DockerJobHandle(network=base, programs=programs)})
    labels = run.labels(session.settings.run_id, session.owner, "job", matrix=step.matrix.name,
                        resource=step.resource.name, image=step.image.name, job=spec.name)
    try:
        api.create_network(base, driver="bridge", labels=labels)
        request = place.translate_or_fail(step, session.conf, session.local)
        user = run.model_user(inspect_image(api, image).user)
        mounts = [docker.types.Mount(JOB_DIR, str(programs), type="bind", read_only=True)]
        if spec.volume:
            mounts.append(docker.types.Mount(VOLUME_DIR, spec.volume, type="bind", read_only=False))
        argv = [python if a == "{python}" else a for a in spec.argv]
        for rank, name in enumerate(job.ranks):
            host_config = run.confined_host_config(api, request.host_config(), base, mounts)
            cid = api.create_container(image, command=argv, name=name, user=user, host_config=host_config,
                                       environment={**request.environment,
                                                    **spec.rank_env(rank, job.rendezvous_host)},
                                       labels={**labels, f"{LABEL}rank": str(rank)},
                                       networking_config=api.create_networking_config(
                                           {base: api.create_endpoint_config(  # type: ignore[arg-type]  # a dict of
                                               aliases=[RANK_ALIAS.format(rank=rank)])}))["Id"]  # EndpointConfig
            _handle(job).ids.append(cid)
            api.start(cid)
    except docker.errors.APIError as exc:
        remove(session, job)
        raise outcome(exc, f"starting job {spec.name} ({spec.world_size} ranks) from {image}", phase="start") \
            from None
    return job


def logs(session: DockerSession, job: Job, rank: int) -> str:
    """Rank ``rank``'s stdout so far (its last :data:`LOG_LIMIT` bytes)."""
    raw = session.api.logs(_handle(job).ids[rank], stdout=True, stderr=False)
    return bytes(raw[-LOG_LIMIT:]).decode("utf-8", "replace")


def running(session: DockerSession, job: Job) -> list[int]:
    """The ranks whose containers are running now."""
    return [r for r, cid in enumerate(_handle(job).ids) if container_state(session.api, cid).running]


def kill(session: DockerSession, job: Job, rank: int) -> None:
    """SIGKILL rank ``rank``'s container; record the gate's kill in ``job.killed``."""
    job.killed.add(rank)
    try:
        session.api.kill(_handle(job).ids[rank], signal="SIGKILL")
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: it had already stopped
            raise ActionFailed(f"killing rank {rank} ({job.ranks[rank]}): {exc}", "container_exited") from None


def wait(session: DockerSession, job: Job, timeout_s: float, settle_s: float) -> list[RankExit]:
    """Wait for every rank (see :meth:`~pytest_hetero.backends.protocol.Backend.wait_job`); return their exits."""
    api = session.api
    ids = _handle(job).ids
    deadline = time.monotonic() + timeout_s
    settle_until: float | None = None
    stopped_after: set[int] = set()
    while True:
        states = [container_state(api, cid) for cid in ids]
        running = [r for r, st in enumerate(states) if st.running]
        if not running:
            break
        failed = [r for r, st in enumerate(states) if not st.running and st.exit_code and r not in job.killed]
        now = time.monotonic()
        if failed and settle_until is None:
            settle_until = now + settle_s
        if settle_until is not None and now >= settle_until:
            for r in running:
                stopped_after.add(r)
                _kill_quietly(api, ids[r])
            continue
        if now >= deadline:
            for r in running:
                _kill_quietly(api, ids[r])
            states = [container_state(api, cid) for cid in ids]
            return [_exit(session, job, r, st, timed_out=r in running) for r, st in enumerate(states)]
        time.sleep(POLL_S)
    return [_exit(session, job, r, st, stopped=r in stopped_after) for r, st in enumerate(states)]


def _kill_quietly(api: docker.APIClient, cid: str) -> None:
    try:
        api.kill(cid, signal="SIGKILL")
    except docker.errors.APIError:
        pass


def _epoch(text: str | None) -> float | None:
    """Docker's RFC 3339 time (nanoseconds, ``Z``) as epoch seconds; None for its zero time."""
    if not text or text.startswith("0001-"):
        return None
    from datetime import datetime

    head, _, frac = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(head + "+00:00").timestamp() + (float("0." + frac[:6]) if frac else 0.0)


def _exit(session: DockerSession, job: Job, rank: int, state: ContainerState, *, timed_out: bool = False,
          stopped: bool = False) -> RankExit:
    api = session.api
    cid = _handle(job).ids[rank]
    out = bytes(api.logs(cid, stdout=True, stderr=False)[-LOG_LIMIT:]).decode("utf-8", "replace")
    err = bytes(api.logs(cid, stdout=False, stderr=True)[-LOG_LIMIT:]).decode("utf-8", "replace")
    code = None if timed_out else state.exit_code
    started, ended = _epoch(state.started_at), _epoch(state.finished_at)
    usage: UsageFacts = {"workload": f"container/{cid}", "object": "container", "name": job.ranks[rank],
                         "namespace": "docker", "started": started, "ended": ended, "attempts": 1,
                         "outcome": "completed" if code == 0 else "failed"}
    return RankExit(rank=rank, name=job.ranks[rank], exit_code=code, stdout=out, stderr=err,
                    signal=(code - 128) if isinstance(code, int) and code > 128 else None,
                    oom_killed=state.oom_killed, killed_by_gate=rank in job.killed,
                    stopped_after_peer=stopped, started=started, ended=ended, usage=usage)


def remove(session: DockerSession, job: Job) -> None:
    """Remove the rank containers, the network and the programs' folder (never the volume). Never raises."""
    own = _handle(job)
    try:
        api = session.api
        for cid in own.ids:
            try:
                api.remove_container(cid, force=True, v=True)
            except docker.errors.NotFound:
                pass
        try:
            api.remove_network(own.network)
        except docker.errors.NotFound:
            pass
    except Exception:  # noqa: BLE001 - cleanup must not raise; the owner label lets `hetero cleanup` finish it
        pass
    import shutil

    shutil.rmtree(own.programs, ignore_errors=True)
