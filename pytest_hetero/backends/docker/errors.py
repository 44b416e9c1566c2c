"""Classify Docker Engine failures into engine faults: category and readable message.

The patterns are the engine's own error texts (dockerd 20.10–27, runc 1.1, containerd 1.6/1.7),
e.g. ``Unknown runtime specified nvidia`` or ``could not select device driver "" with
capabilities: [[gpu]]``. Categories are facts; who owns each is the failure table's decision
(:mod:`pytest_hetero.judge.failures`), the same for every engine.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import docker.errors

from pytest_hetero.backends.docker.api import ContainerState, container_state
from pytest_hetero.backends.docker.client import oom_kills
from pytest_hetero.backends.protocol import ActionFailed, EngineFault, EngineUnavailable

if TYPE_CHECKING:
    from pytest_hetero.backends.docker.session import DockerWorkload
    from pytest_hetero.backends.protocol import ExecResult, RunFailure, Step

Phase = Literal["start", "run"]
"""What the engine was doing: starting the image (``start``: the gate's own commands) or running the
model's entrypoint (``run``)."""
SETTLE_S = 2.0
"""Seconds to wait for the engine to record a container's death after an exec ended with 137."""


@dataclass(frozen=True)
class Rule:
    """``pattern`` (regular expression, searched case-insensitively) → ``category``; ``exec_missing``
    marks the rule of a program the runtime cannot execute, whose category depends on the phase
    (:func:`classify`)."""

    pattern: str
    category: str
    exec_missing: bool = False


RULES: tuple[Rule, ...] = (
    Rule(r"pull access denied|unauthorized|denied: |authentication required", "pull_denied"),
    Rule(r"manifest unknown|manifest for .* not found|no such image|repository does not exist|"
         r"not found: manifest", "image_not_found"),
    Rule(r"dial tcp|no such host|i/o timeout|connection refused|tls: |x509: |TLS handshake",
         "registry_unreachable"),
    Rule(r"unknown runtime specified", "runtime_missing"),
    Rule(r"could not select device driver", "device_driver_missing"),
    Rule(r"error gathering device information|no such device", "device_missing"),
    Rule(r"requested cpus are not available|range of cpus is from|minimum memory limit|"
         r"invalid value .* for cpuset", "resource_rejected"),
    Rule(r"bind source path does not exist|invalid mount config", "mount_failed"),
    Rule(r"exec: .*(no such file or directory|not found)|executable file not found|"
         r"exec format error|permission denied", "entrypoint_missing", exec_missing=True),
    Rule(r"oci runtime|runc |shim task|nvidia-container-cli", "oci_runtime_error"),
)
"""First match wins; order puts the specific texts before the generic OCI runtime wrapper."""


def explanation(exc: BaseException) -> str:
    """The engine's own message of a docker SDK error (``explanation``), else ``str(exc)``, one line."""
    text = getattr(exc, "explanation", None) or str(exc)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return " ".join(str(text).split())


def classify(text: str, *, phase: Phase, interpreter: str = "") -> str | None:
    """The category of an engine error text, or None when no rule matches. A program the runtime
    cannot execute is ``interpreter_missing`` while starting the image (the gate's shell) or when it is
    the target's ``interpreter`` (``{python}``: an image defect), else ``entrypoint_missing`` (the
    model's own program)."""
    for rule in RULES:
        if re.search(rule.pattern, text, re.IGNORECASE):
            if rule.exec_missing and (phase == "start" or (interpreter and _names(text, interpreter))):
                return "interpreter_missing"
            return rule.category
    return None


def _names(text: str, program: str) -> bool:
    """True when ``text`` names ``program`` as the thing that could not be executed."""
    return re.search(rf"(^|[\s\"'/:]){re.escape(program)}([\s\"':]|$)", text) is not None


def outcome(exc: BaseException, what: str, *, phase: Phase, interpreter: str = "") -> EngineFault:
    """Turn a docker SDK exception raised while doing ``what`` into ActionFailed (known failure)
    or EngineUnavailable (``engine_error``: an engine answer no rule explains, or no answer at all)."""
    return outcome_of_text(explanation(exc), what, phase=phase, interpreter=interpreter)


def outcome_of_text(text: str, what: str, *, phase: Phase, interpreter: str = "") -> EngineFault:
    """:func:`outcome` for an engine error text (e.g. an ``error`` entry of a pull's progress stream)."""
    category = classify(text, phase=phase, interpreter=interpreter)
    if category is None:
        return EngineUnavailable(f"{what}: the Docker engine answered: {text}", "engine_error")
    return ActionFailed(f"{what}: {text}", category)


def run_failure(api: Any, ctx: Step, workload: DockerWorkload, result: ExecResult,
                interpreter: str = "python3") -> RunFailure | None:
    """Classify a finished model exec (``api``: a ``docker.APIClient``) the exit code alone does not explain:
    ``oom_killed``, ``container_stopped_by_run`` (PID 1 exited 0 through its trap, i.e. the run signalled it;
    ``workload["stopped_by_run"]`` is set so the next run gets a new container), ``container_killed``,
    ``interpreter_missing`` (the target's ``interpreter`` is not in the image), ``entrypoint_missing``
    (another program of the entrypoint); else None.

    After an exit 137 that is no OOM kill, the container's state is polled for up to
    :data:`SETTLE_S` seconds: the engine records a killed container's exit after the exec ends.
    """
    state = _state(api, workload)
    if state.running and result.exit_code == 137 and not result.timed_out:
        kills = oom_kills(api, workload["id"])
        if kills is not None and kills > workload["oom_kills"]:
            workload["oom_kills"] = kills
            return {"category": "oom_killed",
                    "message": f"model run OOM-killed (exit 137, cgroup oom_kill count {kills}) under the "
                               f"container memory limit of {workload['limit_bytes']} bytes "
                               f"({ctx.resource.name})"}
        deadline = time.monotonic() + SETTLE_S
        while state.running and time.monotonic() < deadline:
            time.sleep(0.05)
            state = _state(api, workload)
    if not state.running and state.exit_code == 0 and not state.oom_killed:
        workload["stopped_by_run"] = f"model {ctx.model.name} on dataset {ctx.dataset.name}"
        return {"category": "container_stopped_by_run",
                "message": f"the model run stopped container {workload['name']}: its PID 1 exited 0 through its "
                           "TERM/INT trap, which only a signal sent from inside the container does during a run "
                           f"(the run ended with exit {result.exit_code}); the next model run gets a new container"}
    if not state.running:
        oom = ", OOMKilled" if state.oom_killed else ""
        return {"category": "container_killed",
                "message": f"container {workload['name']} stopped during the model run (status "
                           f"{state.status}, exit {state.exit_code}{oom}); the run ended with "
                           f"exit {result.exit_code}"}
    missing = re.search(r"exec: (.*): (not found|Permission denied)", result.stderr)
    if result.exit_code in (126, 127) and missing:
        program = missing.group(1).strip()
        which = "interpreter" if program == interpreter else "entrypoint program"
        return {"category": "interpreter_missing" if program == interpreter else "entrypoint_missing",
                "message": f"{which} {program} {missing.group(2).lower()} in image "
                           f"{ctx.image.reference} (exit {result.exit_code})"}
    return None

def stopped_after_run(api: Any, ctx: Step, workload: DockerWorkload, result: ExecResult) -> RunFailure | None:
    """``container_stopped_by_run`` for a model run whose container's PID 1 stopped *after* its exec returned,
    e.g. a child it left behind sent ``kill -TERM 1`` an instant later; None when the container still runs.

    Called once the reset after the run has ended (:func:`.client.reset`: every process but PID 1 killed), so
    nothing of this run can act any more and nothing of the next has started: a container found stopped
    now, with exit 0 (PID 1's TERM/INT trap) and no OOM kill, was stopped by this run. ``workload
    ["stopped_by_run"]`` is set so the next run gets a new container and is judged on its own. The caller
    rules out an engine outage first (``outage.raise_if_stopped_by_outage``)."""
    state = _state(api, workload)
    if state.running or state.status == "removed" or state.exit_code != 0 or state.oom_killed:
        return None
    workload["stopped_by_run"] = f"model {ctx.model.name} on dataset {ctx.dataset.name}"
    return {"category": "container_stopped_by_run",
            "message": f"the model run stopped container {workload['name']} after its exec returned (exit "
                       f"{result.exit_code}): PID 1 exited 0 through its TERM/INT trap before the reset that "
                       "followed the run had killed what the run left running; the next model run gets a new "
                       "container"}


def _state(api: Any, workload: DockerWorkload) -> ContainerState:
    try:
        return container_state(api, workload["id"])
    except docker.errors.NotFound:
        return ContainerState.parse({"Running": False, "Status": "removed"})
