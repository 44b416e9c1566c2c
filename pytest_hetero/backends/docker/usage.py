"""Usage facts of the gate's Docker containers (:data:`~pytest_hetero.backends.protocol.USAGE_FACTS`),
from ``GET /containers/{id}/json`` (Docker Engine API, ContainerInspectResponse): ``Created`` (submitted and
placed: a single engine places a container when it creates it), ``State.StartedAt``/``FinishedAt``
(RFC 3339 with nanoseconds; ``0001-01-01T00:00:00Z`` when not yet), ``RestartCount``; requests from
``HostConfig.NanoCpus`` (cpu cores) and ``Memory`` (bytes; 0: no limit, left out). Device requests
(GPUs) are not counted. Namespace ``docker``. Facts only."""

from __future__ import annotations

import uuid
from typing import Any

from pytest_hetero.evidence.usage import epoch


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
