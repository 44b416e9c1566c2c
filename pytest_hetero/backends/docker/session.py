"""The state one Docker engine connection holds for a run, shared by the engine's modules.

The engine (:mod:`.engine`) owns one :class:`DockerSession`; placement (:mod:`.place`) and outage
handling (:mod:`.outage`) receive it instead of the engine object, so no module of the package
imports another's class.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, TypedDict

import docker
import docker.errors

from pytest_hetero.backends.docker import client as run
from pytest_hetero.backends.docker.api import EngineInfo
from pytest_hetero.backends.docker.translate import DockerTarget
from pytest_hetero.backends.protocol import ActionFailed, EngineUnavailable, UsageFacts
from pytest_hetero.backends.spread import Spread
from pytest_hetero.settings import Settings


class DockerWorkload(TypedDict):
    """The resource × image container a session started (:attr:`DockerSession.workloads`; the engine's
    ``Started.handle``): written whole when it is created (the fields the engine learns later None), then
    ``stopped_by_run`` (which run stopped it), ``usage`` (its last
    :class:`~pytest_hetero.backends.protocol.UsageFacts`) and ``dev`` (its ``/dev`` entries before the first model
    run, which the reset keeps) are set as the engine learns them.

    ``id``/``name``: the container's; ``labels``: those it was created with; ``oom_kills``: the cgroup's OOM kill
    count last read; ``dirty``: a run used it since its last reset; ``user``: the uid model runs exec as;
    ``limit_bytes``: its memory limit (None: none); ``started_monotonic``: this process's monotonic clock when it
    was created (ordered against engine outages)."""

    id: str
    name: str
    labels: dict[str, str]
    oom_kills: int
    dirty: bool
    user: str
    limit_bytes: int | None
    started_monotonic: float
    stopped_by_run: str | None
    usage: UsageFacts | None
    dev: list[str] | None
    created_at: float | None
    """A model run's own container (``model_runs: per-run``, :mod:`.spread`): when it was created (epoch s;
    None: the resource × image container)."""


@dataclass
class Interruption:
    """One engine outage seen by this run: wall-clock ``lost_at``/``back_at`` (UTC, ``…Z``),
    ``waited_s`` (seconds waited for the engine; None: it never answered within the wait), and
    ``monotonic`` (the clock when it was lost, for ordering against container starts)."""

    lost_at: str
    what: str
    error: str
    monotonic: float = field(default_factory=time.monotonic)
    back_at: str | None = None
    waited_s: float | None = None

    def describe(self) -> str:
        """One sentence: when the engine went away during what, and whether/when it answered again."""
        back = (f"it answered again after {self.waited_s:.1f} s ({self.back_at})" if self.back_at
                else "it did not answer again")
        return f"the Docker engine went away at {self.lost_at} during {self.what} ({self.error}); {back}"


@dataclass
class DockerSession:
    """Connection and run state: ``conn`` (APIClient kwargs, see :func:`.client.connection`),
    ``local`` (the engine's host is this host), ``owner`` (this process's label token), the
    containers it started (``workloads`` by (resource, image)), image ``digests`` by image name,
    the placement-probe image, engine outages seen (``interruptions``) and the per-run model runs (``spread``)."""

    settings: Settings
    conf: DockerTarget = field(default_factory=DockerTarget)
    """What the engine reads of the matrix's ``spec.target``, parsed once (:meth:`DockerTarget.parse`)."""
    conn: run.ClientOptions = field(default_factory=lambda: run.ClientOptions())
    conn_error: str = ""
    local: bool = True
    owner: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    pull_policy: str = "if-not-present"
    engine: EngineInfo = field(default_factory=EngineInfo)
    workloads: dict[tuple[str, str], DockerWorkload] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    image_ids: dict[str, str] = field(default_factory=dict)
    probe_image: str | None = None
    interruptions: list[Interruption] = field(default_factory=list)
    spread: Spread = field(default_factory=Spread)
    """The per-run model runs of this session (``model_runs: per-run``, :mod:`.spread`)."""
    user_started: set[tuple[str, str]] = field(default_factory=set)
    """``(image id, user)`` a process was seen to start as in a container of this session (:func:`.client.user_check`):
    a model run's own container of the same image and user is not asked again."""
    _api: docker.APIClient | None = None
    _long: docker.APIClient | None = None
    _stats: docker.APIClient | None = None

    @classmethod
    def open(cls, target: dict[str, Any], settings: Settings) -> DockerSession:
        """A session for ``target`` (nothing is contacted yet; a bad TLS setup is kept in ``conn_error``)."""
        conf = DockerTarget.parse(target)
        try:
            conn, error = run.connection(target), ""
        except docker.errors.DockerException as exc:
            conn, error = {"base_url": conf.docker_host}, str(exc)
        return cls(settings=settings, conf=conf, conn=conn, conn_error=error, local=run.engine_is_local(conn),
                   pull_policy=conf.pull_policy)

    @property
    def engine_url(self) -> str | None:
        """Where the engine is, for messages, records and the target's identity: the connection's ``base_url``
        (``DOCKER_HOST`` when the environment chooses it; None when the target names no host and its TLS setup
        failed)."""
        return self.conn.get("base_url", "DOCKER_HOST")

    @property
    def api(self) -> docker.APIClient:
        """Low-level client (calls bounded by :data:`~pytest_hetero.backends.docker.client.API_TIMEOUT_S`).

        Raises EngineUnavailable (``engine_unreachable``) when the engine does not answer, ActionFailed
        (``bad_target``, platform) when the target's TLS files are unusable.
        """
        if self.conn_error:
            raise ActionFailed(f"target.tls: {self.conn_error}", "bad_target")
        if self._api is None:
            try:
                api = run.make_client(self.conn, run.API_TIMEOUT_S)
                api.ping()
            except (docker.errors.DockerException, *run.CONNECTION_LOST) as exc:
                gone = next((o for o in reversed(self.interruptions) if o.back_at is None), None)
                since = f" (gone since {gone.lost_at}, during {gone.what})" if gone else ""
                raise EngineUnavailable(f"Docker engine at {self.engine_url} does not "
                                        f"answer{since}: {exc}", "engine_unreachable") from None
            self._api = api
            # the API version the first client negotiated: without it the second asks GET /version again
            self._long = run.make_client({**self.conn, "version": api.api_version}, None)
            self.engine = EngineInfo.parse(api.version(), api.info())
        return self._api

    @property
    def long_api(self) -> docker.APIClient:
        """A client without read timeout, for streams that last a whole model run."""
        api = self.api
        return self._long or api

    @property
    def stats_api(self) -> docker.APIClient:
        """A client of its own for the stats sampling thread (one ``requests`` session per thread), made on
        first use with :attr:`api`'s API version and timeout. Raises as :attr:`api` does."""
        api = self.api
        if self._stats is None:
            self._stats = run.make_client({**self.conn, "version": api.api_version}, run.API_TIMEOUT_S)
        return self._stats

    def drop_clients(self) -> None:
        """Forget the engine clients (after an outage); the next :attr:`api` use reconnects."""
        for client in (self._api, self._long, self._stats):
            if client is not None:
                client.close()
        self._api = self._long = self._stats = None
