"""Container startup failures and kubelet rejections -> reasons (kubelet 1.18-1.34 wording).

Reads container states as ``kubectl describe pod`` and ``status.containerStatuses`` show them
(``reason``, ``message``, ``exit_code``) and pod-level kubelet rejections (``status.reason``
``OutOf<resource>`` with ``Node didn't have enough resource: <r>, requested: <q>, used: <q>, capacity:
<q>``; ``UnexpectedAdmissionError`` with ``Allocate failed due to ...``).

Codes: ``image_pull_failed`` (ErrImagePull, ImagePullBackOff, InvalidImageName; ``cause`` from
:func:`pull_category`), ``container_config_error`` (CreateContainerConfigError), ``container_start_error``
(CreateContainerError, RunContainerError, StartError, ContainerCannotRun; ``cause`` ``command_not_found``
when the container's program is not in the image), ``device_runtime_error``
(nvidia-container-cli / driver rpc errors, ``could not select device driver``, unknown runtime),
``crash_loop``, ``oom_killed``, ``container_exit_nonzero``, ``insufficient_resource`` and
``device_allocation_failed`` from the kubelet.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import msgspec

from pytest_hetero.declared import as_written
from pytest_hetero.pending.model import Reason, make_reason

_DEVICE_RUNTIME = re.compile(
    r"nvidia-container-cli|driver rpc error|could not select device driver|unknown runtime|"
    r"no runtime for \S+ is configured|runtimeclass\S* \"?[\w.-]+\"? not found|nvidia-container-runtime|"
    r"ascend-docker|libnvidia-ml\.so|failed to initialize nvml|dcmi",
    re.IGNORECASE,
)
_CUDA_REQUIREMENT = re.compile(r"requirement error: unsatisfied condition: cuda\s*(?P<req>[<>=!]{1,2}\s*[\d.]+)",
                               re.IGNORECASE)
"""nvidia-container-cli's ``NVIDIA_REQUIRE_CUDA`` check: the image needs a newer CUDA than the node's driver
supports, the same driver/runtime pairing the CUDA runtime reports as ``cudaErrorInsufficientDriver``."""
_NETWORK = re.compile(
    r"i/o timeout|connection refused|dial tcp|tls handshake|no such host|toomanyrequests|"
    r"context deadline exceeded|network is unreachable",
    re.IGNORECASE,
)
_NOT_FOUND = re.compile(
    r"not found|manifest unknown|does not exist|invalid reference format|InvalidImageName", re.IGNORECASE
)
_AUTH = re.compile(r"unauthorized|authentication required|access denied|403 forbidden|denied:", re.IGNORECASE)
PULL = {"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "RegistryUnavailable"}
START = {
    "CreateContainerError",
    "RunContainerError",
    "StartError",
    "ContainerCannotRun",
    "PreStartHookError",
    "PostStartHookError",
}


def pull_category(message: str) -> str:
    """The failure category of an image pull the kubelet reported (``message``: its words): the same
    categories the Docker engine's pull errors get (:data:`pytest_hetero.backends.docker.errors.RULES`),
    so the failure table gives one owner for one fact: ``registry_unreachable`` (network),
    ``image_not_found``, ``pull_denied`` (registry auth), else ``image_pull_failed``."""
    if _NETWORK.search(message):
        return "registry_unreachable"
    if _NOT_FOUND.search(message):
        return "image_not_found"
    if _AUTH.search(message):
        return "pull_denied"
    return "image_pull_failed"


def classify_startup(
    reason: str, message: str = "", *, exit_code: str | None = None, container: str | None = None
) -> Reason | None:
    """One container state (``reason``, ``message``, ``exit_code``) -> a startup reason, or None.

    None for states that are not failures (``Running``, ``ContainerCreating``, exit 0 ``Completed``).
    """
    message = re.sub(r"\s+", " ", message).strip()
    text = message or reason
    detail = {"container": container} if container else {}
    if exit_code is not None:
        detail["exit_code"] = exit_code
    if _DEVICE_RUNTIME.search(message) and reason not in PULL:
        required = _CUDA_REQUIREMENT.search(message)
        if required:  # one fact, one owner: the category the CUDA runtime's own wording of it gets
            return make_reason("kubelet", "device_runtime_error", text, cause="cuda_environment_error",
                               detail={**detail, "state_reason": reason,
                                       "requires_cuda": re.sub(r"\s+", "", required.group("req"))})
        return make_reason("kubelet", "device_runtime_error", text, detail={**detail, "state_reason": reason})
    if reason in PULL or "pull" in reason.lower() and "image" in message.lower():
        return make_reason(
            "kubelet", "image_pull_failed", text, cause=pull_category(text + " " + reason), detail=detail
        )
    if reason == "CreateContainerConfigError":
        return make_reason("kubelet", "container_config_error", text, detail=detail)
    if reason in START:
        missing = re.search(r"executable file not found|no such file or directory", message)
        return make_reason("kubelet", "container_start_error", text,
                           cause="command_not_found" if missing else None, detail={**detail, "state_reason": reason})
    if reason == "OOMKilled":
        return make_reason("kubelet", "oom_killed", text, detail=detail)
    if reason == "CrashLoopBackOff":
        return make_reason("kubelet", "crash_loop", text, detail=detail)
    if exit_code not in (None, "", "0"):
        return make_reason("kubelet", "container_exit_nonzero", text, detail=detail)
    return None


@dataclass
class ContainerState:
    """One state of a container (its current one or its last termination), as ``kubectl describe pod`` prints it
    (a ``State:``/``Last State:`` block) or a Pod's ``status.containerStatuses[]`` serves it (core/v1
    ``ContainerState``): the block's ``phase`` (``Waiting``, ``Terminated``… as printed), the ``reason``, the
    ``message`` and the ``exit_code`` (``Exit Code``/``exitCode`` as text), each None until read."""

    phase: str | None = None
    reason: str | None = None
    message: str | None = None
    exit_code: str | None = None

    def known(self) -> bool:
        """True when any field of the state was read (a ``Last State:`` block, a waiting/terminated state)."""
        return any(value is not None for value in (self.phase, self.reason, self.message, self.exit_code))


def container_reasons(
    container: str | None, state: ContainerState, last: ContainerState, *, image: str | None = None
) -> list[Reason]:
    """Reasons from a container's current and last state (its reason, message and exit code).

    ``image`` (as the Pod spec or status names it) is recorded in each reason's ``detail``.

    A ``crash_loop`` names the last termination as its ``cause`` when that is known (its owner is then the
    cause's), and the cause itself is reported too (e.g. ``device_runtime_error`` behind a CrashLoopBackOff).
    """
    now = classify_startup(state.reason or "", state.message or "", exit_code=state.exit_code, container=container)
    before = (
        classify_startup(last.reason or "", last.message or "", exit_code=last.exit_code, container=container)
        if last.known()
        else None
    )
    out: list[Reason] = []
    if now is not None:
        if now.code == "crash_loop" and before is not None:
            now = make_reason(
                "kubelet",
                "crash_loop",
                now.message,
                cause=before.cause or before.code,
                detail={**now.detail, "last_state_reason": last.reason or ""},
            )
        out.append(now)
    if before is not None and (now is None or now.code == "crash_loop"):
        out.append(before)
    if image:
        out = [replace(r, detail={**r.detail, "image": image}) for r in out]
    return out


def kubelet_admission(reason: str, message: str) -> Reason | None:
    """Pod-level kubelet rejections -> a reason, or None.

    ``OutOf<resource>`` (``Node didn't have enough resource: <r>, requested: <q>, used: <q>, capacity:
    <q>``), ``UnexpectedAdmissionError`` (``Allocate failed due to requested number of devices
    unavailable for <r>. Requested: <n>, Available: <m>, which is unexpected``), ``NodeAffinity``
    (``Pod Predicate NodeAffinity failed``) and ``Evicted`` (``The node was low on resource: <r>``).
    """
    detail = {"pod_reason": reason}
    text = message or reason
    if reason.startswith("OutOf"):
        m = re.search(r"resource: ([^,\s]+), requested: (\S+?), used: (\S+?), capacity: (\S+)", message)
        quantities = {"requested": m.group(2), "used": m.group(3), "capacity": m.group(4)} if m else {}
        return make_reason(
            "kubelet",
            "insufficient_resource",
            text,
            resource=reason[5:],
            quantities=quantities,
            detail=detail,
        )
    if reason == "UnexpectedAdmissionError" or "allocate failed" in message.lower():
        m = re.search(
            r"unavailable for ([^\s.]+(?:\.[^\s.]+)*?)\.?\s*Requested:\s*(\d+),\s*Available:\s*(\d+)", message
        )
        if m:
            quantities = {"requested": m.group(2), "available": m.group(3)}
            return make_reason(
                "kubelet",
                "device_allocation_failed",
                text,
                resource=m.group(1),
                quantities=quantities,
                detail=detail,
            )
        return make_reason("kubelet", "device_allocation_failed", text, detail=detail)
    if reason == "NodeAffinity":
        return make_reason("kubelet", "node_affinity_mismatch", text, detail=detail)
    if reason == "Evicted":
        m = re.search(r"low on resource: ([\w./-]+)", message)
        return make_reason(
            "kubelet", "node_pressure", text, resource=m.group(1).rstrip(".") if m else None, detail=detail
        )
    return None


def container_state(entry: Mapping[str, Any]) -> ContainerState:
    """One container state of a Pod's ``status.containerStatuses[]`` (``state`` or ``lastState``, core/v1
    ``ContainerState``: ``{"waiting": {...}}`` or ``{"terminated": {...}}``) -> its ``reason`` and ``message``
    ("" when absent) plus the ``exit_code`` (``exitCode`` as text) of a terminated container; nothing known
    when the container is running or the state is empty. Never raises."""
    found = as_written(entry, _StateFields)
    for kind, part in (("waiting", found.waiting), ("terminated", found.terminated)):
        if isinstance(part, Mapping):
            state = as_written(part, _StateDetail)
            return ContainerState(reason=str(state.reason), message=str(state.message),
                                  exit_code=str(state.exitCode) if kind == "terminated"
                                  and state.exitCode is not msgspec.UNSET else None)
    return ContainerState()


class _StateFields(msgspec.Struct, frozen=True, kw_only=True):
    """A pasted core/v1 ``ContainerState``: its ``waiting`` and ``terminated`` parts as written (None when absent;
    :func:`container_state` reads a part only when it is a mapping)."""

    waiting: object = None
    terminated: object = None


class _StateDetail(msgspec.Struct, frozen=True, kw_only=True):
    """A ``ContainerStateWaiting`` or ``ContainerStateTerminated`` as pasted: ``reason`` and ``message`` as written
    ("" when absent), ``exitCode`` as written (UNSET when absent: a null one reads as written)."""

    reason: object = ""
    message: object = ""
    exitCode: object = msgspec.UNSET  # noqa: N815 - core/v1's field name
