"""What the Docker backend does when the engine goes away during a run (daemon restarted, socket gone).

A restarting ``dockerd`` stops every container (unless ``live-restore``), drops open connections
(a model run's ``docker exec`` stream just ends early) and forgets its exec instances. The
backend turns this into evidence instead of a harness traceback:

- the item that was talking to the engine waits for it to answer again, for at most
  ``target.engine_wait_s`` seconds (default :data:`ENGINE_WAIT_S`), pinging with exponential
  backoff, then ends ``error`` with category ``engine_restarted`` (it came back) or
  ``engine_unreachable`` (it did not), owner ``infrastructure``, and an ``engine.interruption``
  record (when it was lost, when it answered again, the container's state afterwards);
- later model runs for a container the restart stopped end ``error`` (``engine_restarted``)
  at once, naming the interruption, instead of being blamed on the image;
- items of other resource × image pairs run normally once the engine answers again, and
  :meth:`DockerBackend.close` removes what the run created (the restart leaves stopped
  containers behind, not removed ones).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, TypeVar

import docker
import docker.errors

from pytest_hetero.backends.docker import client as run
from pytest_hetero.backends.docker.api import ContainerState
from pytest_hetero.backends.docker.api import container_state as api_container_state
from pytest_hetero.backends.docker.client import CONNECTION_LOST, EngineLost
from pytest_hetero.backends.docker.session import DockerSession, DockerWorkload, Interruption
from pytest_hetero.backends.protocol import EngineUnavailable, Step
from pytest_hetero.evidence.model import utc_now

ENGINE_WAIT_S = 60.0
"""Default seconds to wait for a lost engine to answer again (``target.engine_wait_s``)."""
FIRST_PING_S = 0.2
"""First pause between pings of a lost engine; doubles up to :data:`MAX_PING_S`."""
MAX_PING_S = 2.0

Verb = TypeVar("Verb", bound=Callable[..., Any])


def engine_guarded(verb: Verb) -> Verb:
    """Wrap an engine verb ``verb(self, step, …)`` (``self.session`` a DockerSession) so an engine that
    goes away mid-step raises EngineUnavailable with the outage as reason (:func:`engine_lost`)."""

    @functools.wraps(verb)
    def guarded(self: Any, step: Step, *args: Any) -> Any:
        try:
            return verb(self, step, *args)
        except (run.EngineLost, *run.CONNECTION_LOST) as exc:
            raise engine_lost(self.session, step, exc, f"the {step.planned.layer} step") from None

    return guarded  # type: ignore[return-value]


def wait_for_engine(conn: run.ClientOptions, wait_s: float) -> float | None:
    """Ping the engine at ``conn`` (:func:`~pytest_hetero.backends.docker.client.connection` kwargs)
    until it answers or ``wait_s`` seconds pass; return the seconds waited, or None. Never raises."""
    start = time.monotonic()
    pause = FIRST_PING_S
    while True:
        try:
            client = run.make_client(conn, 5.0)
            try:
                if client.ping():
                    return time.monotonic() - start
            finally:
                client.close()
        except (docker.errors.DockerException, *CONNECTION_LOST, OSError):
            pass
        left = wait_s - (time.monotonic() - start)
        if left <= 0:
            return None
        time.sleep(min(pause, left))
        pause = min(pause * 2, MAX_PING_S)


def describe_error(exc: BaseException) -> str:
    """A one-line reason from a connection error or :class:`EngineLost` (no urllib3 object reprs)."""
    if isinstance(exc, EngineLost):
        return exc.error
    text = " ".join(str(exc).split())
    if "Connection refused" in text or "No such file or directory" in text:
        return "connection refused (the engine's socket is closed or gone)"
    if "Connection aborted" in text or "RemoteDisconnected" in text or "reset by peer" in text:
        return "connection dropped by the engine"
    return f"{type(exc).__name__}: {text[:200]}"


def engine_lost(session: DockerSession, ctx: Step, exc: BaseException, what: str) -> EngineUnavailable:
    """Record an engine outage seen by ``session`` during ``what`` and return the EngineUnavailable to
    raise: ``engine_restarted`` or ``engine_unreachable``, owner ``infrastructure``.

    Waits up to ``target.engine_wait_s`` seconds for the engine; keeps a model run's partial
    stdout/stderr as artifacts; reads the resource × image container's state once it answers.
    """
    error = describe_error(exc)
    if isinstance(exc, EngineLost):
        what = exc.what
        if exc.partial is not None:
            ctx.artifact("model.stdout.partial", exc.partial.stdout)
            ctx.artifact("model.stderr.partial", exc.partial.stderr)
    outage = Interruption(lost_at=utc_now(), what=what, error=error)
    session.interruptions.append(outage)
    session.drop_clients()
    wait_s = session.conf.engine_wait_s
    waited = wait_for_engine(session.conn, ENGINE_WAIT_S if wait_s is None else wait_s)
    state: ContainerState | None = None
    # discovery and scheduling steps are keyed by resource only: they have no container of their own
    image = ctx.planned.keys.get("image")
    workload = session.workloads.get((ctx.resource.name, image)) if image is not None else None
    if waited is not None:
        outage.back_at, outage.waited_s = utc_now(), round(waited, 3)
        if workload is not None:
            state = container_state(session, workload)
    ctx.record("engine.interruption", lost_at=outage.lost_at, back_at=outage.back_at, waited_s=outage.waited_s,
               during=what, error=error, engine=session.engine_url,
               container=workload["name"] if workload else None,
               container_state=state.document if state is not None else None)
    message = outage.describe()
    if state is not None and workload is not None:
        message += (f"; container {workload['name']} is now {state.status} (exit {state.exit_code}, "
                    f"finished {state.finished_at})")
    if waited is None:
        return EngineUnavailable(message, "engine_unreachable")
    return EngineUnavailable(message, "engine_restarted")


def container_state(session: DockerSession, workload: DockerWorkload) -> ContainerState | None:
    """``State`` of the workload's container after an outage (``{"Status": "removed"}`` when gone), or None
    when the engine cannot say."""
    try:
        return api_container_state(session.api, workload["id"])
    except docker.errors.NotFound:
        return ContainerState.parse({"Status": "removed", "Running": False})
    except (docker.errors.DockerException, *CONNECTION_LOST):
        return None


def raise_if_stopped_by_outage(session: DockerSession, workload: DockerWorkload, state: ContainerState,
                               when: str) -> None:
    """Raise EngineUnavailable (``engine_restarted``, infrastructure) when the workload's container, found
    not running (``state``: its engine ``State``), has seen an engine outage since it started."""
    started = workload["started_monotonic"]
    lost = next((o for o in session.interruptions if o.monotonic >= started), None)
    if lost is not None:
        raise EngineUnavailable(f"container {workload['name']} was stopped {when}: {lost.describe()} "
                          f"(status {state.status}, exit {state.exit_code}, finished "
                          f"{state.finished_at})", "engine_restarted")
