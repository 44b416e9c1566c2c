"""The job verbs an engine may offer for the training checks: a job of ``world_size`` ranks, each a workload
running the same gate program from the image, able to reach rank 0's rendezvous port, optionally with a
volume. Neutral ground (no engine imports it back): the types here, the verbs on
:class:`~pytest_hetero.backends.protocol.Backend` (``start_job``, ``job_logs``, ``job_running``, ``kill_rank``,
``wait_job``, ``remove_job``), an engine's implementation in its own package (Docker: :mod:`.docker.jobs`).

An engine reports facts only (exit codes, signals, its own OOM verdict, logs, times); the training layer
(:mod:`pytest_hetero.layers.training`) reads them and judges.

For an engine author (Kubernetes: an Indexed Job of ``world_size`` completions with a headless Service named
like :attr:`Job.rendezvous_host`, the rank from the completion index): start every rank with the environment
:meth:`JobSpec.rank_env` gives it, :data:`JOB_DIR` holding :attr:`JobSpec.files` read-only, and the volume
at :data:`VOLUME_DIR` when :attr:`JobSpec.volume` is set; rank 0 must be reachable at
``rendezvous_host:port`` from every rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_hetero.backends.protocol import UsageFacts

JOB_DIR = "/hetero-job"
"""Where the job's programs (:attr:`JobSpec.files`) are, read-only, in every rank's workload."""
VOLUME_DIR = "/hetero-volume"
"""Where the volume (:attr:`JobSpec.volume`) is mounted, read-write, in every rank's workload."""


@dataclass(frozen=True)
class JobSpec:
    """What to run: ``name`` (short, for workload names: ``communication``, ``checkpoint``), ``world_size``
    ranks each running ``argv`` (placeholders already rendered; ``{python}`` is the engine's to substitute:
    the target's interpreter), ``files`` (file name → bytes, at :data:`JOB_DIR`), ``env`` (for every rank,
    beside :meth:`rank_env`), ``port`` (rank 0's rendezvous port), ``volume`` (the matrix's volume: a host path on
    Docker, a PersistentVolumeClaim name on Kubernetes; None: none), ``attempt`` (1, 2… when the same job is
    started again over the same volume: a restart)."""

    name: str
    world_size: int
    argv: tuple[str, ...]
    files: dict[str, bytes] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    port: int = 29500
    volume: str | None = None
    attempt: int = 1

    def rank_env(self, rank: int, rendezvous_host: str) -> dict[str, str]:
        """The environment of ``rank``: :attr:`env` and ``HETERO_RANK``, ``HETERO_WORLD_SIZE``,
        ``HETERO_RENDEZVOUS_ADDR``/``PORT``, and the same under torchrun's names (``RANK``, ``WORLD_SIZE``,
        ``MASTER_ADDR``, ``MASTER_PORT``, ``LOCAL_RANK``: one rank per workload)."""
        return {**self.env, "HETERO_RANK": str(rank), "HETERO_WORLD_SIZE": str(self.world_size),
                "HETERO_RENDEZVOUS_ADDR": rendezvous_host, "HETERO_RENDEZVOUS_PORT": str(self.port),
                "RANK": str(rank), "WORLD_SIZE": str(self.world_size), "MASTER_ADDR": rendezvous_host,
                "MASTER_PORT": str(self.port), "LOCAL_RANK": "0",
                **({"HETERO_CHECKPOINT_DIR": VOLUME_DIR} if self.volume else {})}


@dataclass
class Job:
    """A started job: ``spec``, ``ranks`` (engine names of the rank workloads, by rank), ``rendezvous_host``
    (the name rank 0 is reached by), ``where`` (the network or namespace, for messages), ``handle``
    (engine-private), ``killed`` (ranks the gate killed on purpose: :meth:`Backend.kill_rank`)."""

    spec: JobSpec
    ranks: list[str]
    rendezvous_host: str
    where: str = ""
    handle: dict[str, Any] = field(default_factory=dict)
    killed: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class RankExit:
    """How one rank ended: ``exit_code`` (None: still running when the wait ended, then stopped by the engine),
    ``signal`` (the killing signal number when the engine knows it, e.g. 9), ``oom_killed`` (the engine says
    its memory limit killed it), ``killed_by_gate`` (the gate asked for it: :meth:`Backend.kill_rank`),
    ``stopped_after_peer`` (the gate stopped it because another rank had already ended in failure),
    ``stdout``/``stderr`` (as the workload wrote them, bounded), ``started``/``ended`` (epoch seconds, None when
    unknown), ``usage`` (:data:`~pytest_hetero.backends.protocol.USAGE_FACTS` of its workload)."""

    rank: int
    name: str
    exit_code: int | None
    stdout: str
    stderr: str
    signal: int | None = None
    oom_killed: bool = False
    killed_by_gate: bool = False
    stopped_after_peer: bool = False
    started: float | None = None
    ended: float | None = None
    usage: UsageFacts = field(default_factory=UsageFacts)

    @property
    def failed(self) -> bool:
        """Ended on its own with a non-zero code (a rank stopped by the gate is not counted here)."""
        return self.exit_code not in (0, None) and not self.killed_by_gate and not self.stopped_after_peer
