"""Usage facts of the gate's Docker containers (:data:`~pytest_hetero.backends.protocol.USAGE_FACTS`),
from ``GET /containers/{id}/json`` (Docker Engine API, ContainerInspectResponse): ``Created`` (submitted and
placed: a single engine places a container when it creates it), ``State.StartedAt``/``FinishedAt``
(RFC 3339 with nanoseconds; ``0001-01-01T00:00:00Z`` when not yet), ``RestartCount``; requests from
``HostConfig.NanoCpus`` (cpu cores) and ``Memory`` (bytes; 0: no limit, left out). Device requests
(GPUs) are not counted. Namespace ``docker``. Facts only.

Run-time sampling of a model run's container (:class:`StatsSampling`): the stream of ``GET
/containers/{id}/stats`` (Docker Engine API, ContainerStatsResponse; one document per 1 s tick): memory
working set = ``memory_stats.usage`` − ``memory_stats.stats.inactive_file`` (cgroup v2) or
``total_inactive_file`` (cgroup v1), what ``docker stats`` and cAdvisor show (page cache left out); CPU from
the cumulative ``cpu_stats.cpu_usage.total_usage`` (ns) between two samples, as % of ``online_cpus``."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from pytest_hetero.backends.docker.api import ContainerInspect, EngineAnswerUnreadable, HostConfig, StatsDocument
from pytest_hetero.backends.protocol import UsageFacts
from pytest_hetero.evidence.usage import epoch
from pytest_hetero.probes.usage import Measured, Sampler, Source, UsageRecord, _now, measured


def requests_of(host_config: HostConfig) -> dict[str, str | float]:
    """``{"cpu": cores, "memory": bytes}`` of a container's HostConfig (each only when limited)."""
    out: dict[str, str | float] = {}
    if host_config.nano_cpus:
        out["cpu"] = host_config.nano_cpus / 1e9
    if host_config.memory:
        out["memory"] = host_config.memory
    return out


def container_facts(inspect: ContainerInspect, outcome: str | None = None) -> UsageFacts:
    """The usage facts of one container from its inspect document; ``outcome`` overrides its state's."""
    state = inspect.state
    created = epoch(inspect.created)
    running = state.running
    facts: UsageFacts = {"workload": f"container/{inspect.id[:12]}", "object": "container",
             "name": inspect.name.lstrip("/"), "namespace": "docker", "tenant": None,
             "requests": requests_of(inspect.host_config), "submitted": created, "placed": created,
             "started": epoch(state.started_at), "ended": None if running else epoch(state.finished_at),
             "attempts": 1 + inspect.restart_count,
             "outcome": outcome or ("running" if running else "completed" if state.exit_code == 0 else "failed")}
    return facts


def exec_facts(container: UsageFacts, begun: float, ended: float) -> UsageFacts:
    """A model run exec'd in ``container`` (its facts, :func:`container_facts`) from ``begun`` to ``ended``
    (epoch s): the container's requests over the run's wall time, counted for the model only."""
    return {"workload": f"exec/docker/{container['workload'].split('/', 1)[1]}/{uuid.uuid4().hex[:8]}",
            "object": "exec", "within": container["workload"], "name": container.get("name"), "namespace": "docker",
            "tenant": None, "requests": dict(container.get("requests") or {}), "started": begun, "ended": ended,
            "released": ended, "attempts": 1}


STATS_INTERVAL_S: float | None = 1.0
"""Seconds between two stats documents of a model run's container (Docker's stats collector tick; the API
offers no other); None: not sampled."""
STATS_SOURCE = ("Docker Engine stats API (GET /containers/{id}/stats stream): the container's cgroup, "
                "memory working set = usage − inactive_file")


def working_set_bytes(stats: StatsDocument) -> float | None:
    """The memory working set (bytes) of one stats document: ``memory_stats.usage`` less the inactive file
    pages (``stats.inactive_file`` on cgroup v2, ``stats.total_inactive_file`` on cgroup v1). None when the
    usage or the inactive file pages are absent (e.g. a stopped container's empty ``memory_stats``)."""
    if stats.memory_usage is None or stats.inactive_file is None:
        return None
    return max(0.0, float(stats.memory_usage) - float(stats.inactive_file))


def cpu_ns(stats: StatsDocument) -> tuple[float | None, int | None]:
    """(``cpu_stats.cpu_usage.total_usage`` ns, ``cpu_stats.online_cpus``) of one stats document (None: absent)."""
    online = stats.online_cpus
    return (float(stats.cpu_total_ns) if stats.cpu_total_ns is not None else None,
            online if online is not None and online > 0 else None)


def stream_opener(api: Any) -> Callable[[str], tuple[Iterator[Any], Callable[[], None]]]:
    """``open(cid)`` for :class:`StatsSampling` on the docker ``APIClient`` ``api``: starts
    ``GET /containers/{cid}/stats?stream=true`` and returns (the decoded documents, a close of the response).
    The SDK's ``stats(stream=True)`` hides the response, which then could not be closed."""
    def open_stream(cid: str) -> tuple[Iterator[Any], Callable[[], None]]:
        response = api._get(api._url("/containers/{0}/stats", cid), stream=True, params={"stream": True})
        return api._stream_helper(response, decode=True), response.close
    return open_stream


class StatsSampling:
    """The stats of container ``cid`` (named ``name``) during one model run, from the engine's stats stream
    (``open``: :func:`stream_opener`), read on a thread of its own between :meth:`start` and :meth:`stop`:
    the engine pushes one document per collection tick (Docker's stats collector: every 1 s), so sampling
    never blocks the run (a ``one-shot`` request waits up to a tick: 1 s added to every run).

    The engine sets :attr:`during` while the model run's exec is under way; :meth:`result` is the
    ``model.usage`` series (:meth:`~pytest_hetero.probes.usage.Sampler.result`'s shape) and :meth:`run_time`
    the run's ``memory_peak_mib`` (the highest working set sampled during the exec) and ``cpu_s`` (the
    container's CPU time between the first and last sample during it: a lower bound, up to a tick short at
    each end). A run shorter than a tick may have no sample: then each says why, never 0."""

    def __init__(self, open_stream: Callable[[str], tuple[Iterator[Any], Callable[[], None]]], cid: str,
                 name: str, interval_s: float = 1.0) -> None:
        self.open_stream, self.cid, self.name = open_stream, cid, name
        self.source = Source("docker-stats", f"container {name}'s cgroup during this model run (every process in "
                                             "the container: the exec'd model run and the container's idle main "
                                             f"process), read through the {STATS_SOURCE}; CPU % of the "
                                             "container's online CPUs",
                             {"container": {"name": name, "memory_total_mib": None}}, lambda: {})
        self.sampler = Sampler(self.source, interval_s)
        self.during = False
        self.first: tuple[float, float] | None = None  # (monotonic s, cpu ns) of the first sample during the run
        self.last: tuple[float, float] | None = None
        self.peak: float | None = None
        self.count_during = 0
        self.missed: list[str] = []
        self._prev: tuple[float, float] | None = None
        self._lock = threading.Lock()
        self._stopped = False
        self._t0 = 0.0

    def start(self) -> None:
        """Open the stream on a daemon thread (the call returns at once)."""
        self.sampler.started_at, self._t0 = _now(), time.monotonic()
        threading.Thread(target=self._loop, name="hetero-docker-stats", daemon=True).start()

    def stop(self) -> None:
        """No more samples for this run (the thread closes the stream at its next document; not waited for)."""
        with self._lock:
            self._stopped = True
            self.sampler.finished_at = _now()

    def _loop(self) -> None:
        close: Callable[[], None] | None = None
        try:
            docs, close = self.open_stream(self.cid)
            for doc in docs:
                with self._lock:
                    if self._stopped:
                        return
                    self._take(doc, time.monotonic())
        except Exception as exc:  # noqa: BLE001 - the engine's answer, whatever it is, loses samples, not the run
            with self._lock:
                if not self._stopped and len(self.sampler.errors) < 5:
                    self.sampler.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            if close is not None:
                with contextlib.suppress(Exception):  # closing cannot change what was read
                    close()

    def _take(self, doc: Any, at: float) -> None:
        if not isinstance(doc, dict):
            self.sampler.errors.append(f"stats sent a {type(doc).__name__}, not a JSON object")
            return
        try:
            parsed = StatsDocument.parse(doc)
        except EngineAnswerUnreadable as exc:  # one document of another shape loses its sample, not the stream's
            if len(self.sampler.errors) < 5:
                self.sampler.errors.append(str(exc))
            return
        ws, (ns, online) = working_set_bytes(parsed), cpu_ns(parsed)
        if ws is None and len(self.missed) < 5:
            self.missed.append("memory_stats has no usage or inactive file pages (container not running?)")
        util = None
        if ns is not None:
            if self._prev is not None and at > self._prev[0] and online:
                util = round(max(0.0, ns - self._prev[1]) / 1e9 / (at - self._prev[0]) / online * 100.0, 1)
            self._prev = (at, ns)
            if self.during:
                self.first = self.first or (at, ns)
                self.last = (at, ns)
        if ws is not None and self.during:
            self.peak = ws if self.peak is None else max(self.peak, ws)
            self.count_during += 1
        self.sampler.times.append(round(at - self._t0, 3))
        self.sampler.readings.append({"container": (None if ws is None else round(ws / 2**20, 1), util)})

    def result(self) -> UsageRecord:
        """The ``model.usage`` evidence of the samples taken (see :meth:`Sampler.result`)."""
        with self._lock:
            out = self.sampler.result()
        if not out["available"] and not self.sampler.errors:
            out["unavailable"] = "the engine sent no stats document before the run ended (one per 1 s tick)"
        return out

    def run_time(self, run_s: float) -> dict[str, Measured]:
        """``{"memory_peak_mib", "cpu_s"}`` (:func:`~pytest_hetero.probes.usage.measured`); ``run_s``: the
        exec's wall time, to explain a run too short to be sampled during it."""
        with self._lock:
            errors = [*self.sampler.errors, *self.missed][:3]
            short = (f"no stats sample fell during the {run_s:.2f} s run (the engine sends one per "
                     f"{self.sampler.interval_s:g} s tick)")
            why = "; ".join(errors) or short
            peak = None if self.peak is None else self.peak / 2**20
            cpu = None
            if self.first is not None and self.last is not None and self.count_during >= 2:
                cpu = (self.last[1] - self.first[1]) / 1e9
            return {"memory_peak_mib": measured("memory_peak_mib", peak, f"{STATS_SOURCE}: highest of the "
                                                f"{self.count_during} sample(s) of container {self.name} taken "
                                                "during the run", why),
                    "cpu_s": measured("cpu_s", cpu, f"{STATS_SOURCE}: cpu_stats.cpu_usage.total_usage, last − first "
                                                    f"of the {self.count_during} sample(s) during the run (a lower "
                                                    f"bound: up to a tick of the run at each end is not counted)",
                                      why if errors or self.count_during >= 2 else
                                      f"fewer than 2 stats samples during the {run_s:.2f} s run (the engine sends "
                                      f"one per {self.sampler.interval_s:g} s tick)")}
