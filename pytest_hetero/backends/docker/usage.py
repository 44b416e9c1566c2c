"""Usage facts of the gate's Docker containers (:data:`~pytest_hetero.backends.protocol.USAGE_FACTS`),
from ``GET /containers/{id}/json`` (Docker Engine API, ContainerInspectResponse): ``Created`` (submitted and
placed: a single engine places a container when it creates it), ``State.StartedAt``/``FinishedAt``
(RFC 3339 with nanoseconds; ``0001-01-01T00:00:00Z`` when not yet), ``RestartCount``; requests from
``HostConfig.NanoCpus`` (cpu cores) and ``Memory`` (bytes; 0: no limit, left out). Device requests
(GPUs) are not counted. Namespace ``docker``. Facts only.

Run-time sampling of a model run's container (:func:`stats_source`): ``GET /containers/{id}/stats?stream=false
&one-shot=true`` (Docker Engine API ≥ 1.41, ContainerStatsResponse) every :data:`STATS_INTERVAL_S`: memory
working set = ``memory_stats.usage`` − ``memory_stats.stats.inactive_file`` (cgroup v2) or
``total_inactive_file`` (cgroup v1), what ``docker stats`` and cAdvisor show (page cache left out); CPU from
the cumulative ``cpu_stats.cpu_usage.total_usage`` (ns) between two samples, as % of ``online_cpus``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from pytest_hetero.evidence.usage import epoch
from pytest_hetero.probes.usage import Reading, Source, measured


def requests_of(host_config: dict[str, Any]) -> dict[str, float]:
    """``{"cpu": cores, "memory": bytes}`` of a container's HostConfig (each only when limited)."""
    out: dict[str, float] = {}
    if host_config.get("NanoCpus"):
        out["cpu"] = int(host_config["NanoCpus"]) / 1e9
    if host_config.get("Memory"):
        out["memory"] = float(host_config["Memory"])
    return out


def container_facts(inspect: dict[str, Any], outcome: str | None = None) -> dict[str, Any]:
    """The usage facts of one container from its inspect document; ``outcome`` overrides its state's."""
    state = inspect.get("State") or {}
    created = epoch(inspect.get("Created"))
    running = bool(state.get("Running"))
    facts = {"workload": f"container/{str(inspect.get('Id'))[:12]}", "object": "container",
             "name": str(inspect.get("Name") or "").lstrip("/"), "namespace": "docker", "tenant": None,
             "requests": requests_of(inspect.get("HostConfig") or {}), "submitted": created, "placed": created,
             "started": epoch(state.get("StartedAt")), "ended": None if running else epoch(state.get("FinishedAt")),
             "attempts": 1 + int(inspect.get("RestartCount") or 0),
             "outcome": outcome or ("running" if running else "completed" if state.get("ExitCode") == 0 else "failed")}
    return facts


def exec_facts(container: dict[str, Any], begun: float, ended: float) -> dict[str, Any]:
    """A model run exec'd in ``container`` (its facts, :func:`container_facts`) from ``begun`` to ``ended``
    (epoch s): the container's requests over the run's wall time, counted for the model only."""
    return {"workload": f"exec/docker/{container['workload'].split('/', 1)[1]}/{uuid.uuid4().hex[:8]}",
            "object": "exec", "within": container["workload"], "name": container.get("name"), "namespace": "docker",
            "tenant": None, "requests": dict(container.get("requests") or {}), "started": begun, "ended": ended,
            "released": ended, "attempts": 1}


STATS_INTERVAL_S: float | None = 1.0
"""Seconds between two stats samples of a model run's container; None: not sampled (the bench's baseline)."""
STATS_SOURCE = ("Docker Engine stats API (GET /containers/{id}/stats, one-shot): the container's cgroup, "
                "memory working set = usage − inactive_file")


def working_set_bytes(stats: dict[str, Any]) -> float | None:
    """The memory working set (bytes) of one stats document: ``memory_stats.usage`` less the inactive file
    pages (``stats.inactive_file`` on cgroup v2, ``stats.total_inactive_file`` on cgroup v1). None when the
    usage or the inactive file pages are absent (e.g. a stopped container's empty ``memory_stats``)."""
    mem = stats.get("memory_stats") or {}
    inner = mem.get("stats") or {}
    usage = mem.get("usage")
    inactive = inner.get("total_inactive_file", inner.get("inactive_file"))
    if not isinstance(usage, (int, float)) or not isinstance(inactive, (int, float)):
        return None
    return max(0.0, float(usage) - float(inactive))


def cpu_ns(stats: dict[str, Any]) -> tuple[float | None, int | None]:
    """(``cpu_stats.cpu_usage.total_usage`` ns, ``cpu_stats.online_cpus``) of one stats document (None: absent)."""
    cpu = stats.get("cpu_stats") or {}
    total = (cpu.get("cpu_usage") or {}).get("total_usage")
    online = cpu.get("online_cpus")
    return (float(total) if isinstance(total, (int, float)) else None,
            int(online) if isinstance(online, int) and online > 0 else None)


class StatsSampling:
    """The stats sampling of one model run in container ``cid`` (named ``name``) through ``stats``
    (``APIClient.stats``; a client of its own: the sampling thread calls it while the run streams on
    another). :attr:`source` goes to :func:`~pytest_hetero.probes.usage.sampling`; the engine sets
    :attr:`during` while the model run's exec is under way. :meth:`run_time` then gives the run's
    ``memory_peak_mib`` (the highest working-set sample taken during the exec: the samples that bracket it,
    taken before it started and after it ended, hold the idle container, not the model) and ``cpu_s``
    (the container's CPU time between the bracketing first and last sample: the run's, the idle main
    process adding next to nothing)."""

    def __init__(self, stats: Callable[..., Any], cid: str, name: str) -> None:
        self.stats, self.cid, self.name = stats, cid, name
        self.first: tuple[float, float] | None = None  # (monotonic s, cpu ns) of the first sample
        self.last: tuple[float, float] | None = None
        self.peak: float | None = None
        self.count = self.count_during = 0
        self.during = False
        self.missed: list[str] = []
        self.source = Source("docker-stats", f"container {name}'s cgroup during this model run (every process in "
                                             "the container: the exec'd model run and the container's idle main "
                                             f"process), read through the {STATS_SOURCE}; CPU % of the "
                                             "container's online CPUs",
                             {"container": {"name": name, "memory_total_mib": None}}, self._read)

    def _read(self) -> Reading:
        at, during = time.monotonic(), self.during
        doc = self.stats(self.cid, stream=False, one_shot=True)
        if not isinstance(doc, dict):
            raise ValueError(f"stats answered a {type(doc).__name__}, not a JSON object")
        ws, (ns, online) = working_set_bytes(doc), cpu_ns(doc)
        if ws is None and len(self.missed) < 5:
            self.missed.append("memory_stats has no usage or inactive file pages (container not running?)")
        util = None
        if ns is not None:
            if self.last is not None and at > self.last[0] and online:
                util = round(max(0.0, ns - self.last[1]) / 1e9 / (at - self.last[0]) / online * 100.0, 1)
            self.first = self.first or (at, ns)
            self.last = (at, ns)
        if ws is not None and during:
            self.peak = ws if self.peak is None else max(self.peak, ws)
            self.count_during += 1
        self.count += 1
        return {"container": (None if ws is None else round(ws / 2**20, 1), util)}

    def run_time(self, errors: list[str], interval_s: float, run_s: float) -> dict[str, Any]:
        """``{"memory_peak_mib", "cpu_s"}`` (:func:`~pytest_hetero.probes.usage.measured`); ``errors``: the
        sampler's (why a sample could not be taken), named when nothing was measured; ``interval_s`` and
        ``run_s`` (the exec's wall time) explain a run too short to be sampled during it."""
        why = "; ".join([*errors, *self.missed][:3]) or "no stats sample was taken"
        peak = None if self.peak is None else self.peak / 2**20
        no_peak = why if errors or self.missed else (
            f"no stats sample fell during the {run_s:.2f} s run (one every {interval_s:g} s); the samples before "
            "and after it hold the idle container, not the model")
        cpu = None
        if self.first is not None and self.last is not None and self.count >= 2:
            cpu = (self.last[1] - self.first[1]) / 1e9
        return {"memory_peak_mib": measured("memory_peak_mib", peak, f"{STATS_SOURCE}: highest of the "
                                            f"{self.count_during} sample(s) of container {self.name} taken during "
                                            "the run", no_peak),
                "cpu_s": measured("cpu_s", cpu, f"{STATS_SOURCE}: cpu_stats.cpu_usage.total_usage, last − first "
                                                f"of {self.count} sample(s) of container {self.name}",
                                  why if self.count >= 2 else f"fewer than 2 stats samples ({why})")}
