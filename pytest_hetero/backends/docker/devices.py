"""Device series of a Docker model run, sampled inside its container (issue 33).

On a GPU or NPU row the engine starts, beside the model's exec, a second exec in the same container: the
gate's in-workload wrapper (:mod:`pytest_hetero.probes.podwrap`, the Kubernetes engine's too, run by the image's
``{python}`` as ``python -I -S -c``) with a child that only waits, so the wrapper samples the devices the
container sees with the device tool (``nvidia-smi --query-gpu … --format=csv,noheader,nounits``, or
``npu-smi info -t usages|memory -i N`` for each NPU of ``ASCEND_VISIBLE_DEVICES``) every interval, into its
own folder beside the run dir. When the model's exec has ended, one exec stops it (a ``.stop`` file the
child waits for) and reads the samples back; :func:`pytest_hetero.probes.inworkload.add_devices`
turns them into the devices of ``model.usage`` and ``device_sampling``, as on Kubernetes. Only the devices
allocated to the container count (the UUIDs of its ``NVIDIA_VISIBLE_DEVICES`` when it lists them, the ids of
``ASCEND_VISIBLE_DEVICES``). A missing tool or interpreter is stated, never 0.

The sampler runs in the container's cgroup: the container's stats series (:mod:`.usage`) counts it too.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import docker

from pytest_hetero.backends.docker.api import exec_inspect
from pytest_hetero.probes import inworkload as runtime

if TYPE_CHECKING:
    from pytest_hetero.probes.usage import UsageRecord

WAIT_STEP_S = 0.5
"""Seconds between two looks of the sampler's child for the ``.stop`` file."""


def tool_of(resource_type: str) -> str | None:
    """The device tool sampled on a row of ``resource_type`` (``nvidia-smi``, ``npu-smi``), None for none
    (:data:`~pytest_hetero.probes.inworkload.DEVICE_TOOLS`, the Kubernetes engine's table too)."""
    if resource_type not in ("gpu", "npu"):
        return None
    return runtime.DEVICE_TOOLS.get(resource_type)


def folder(run_dir: str) -> str:
    """The sampler's folder of the run whose run dir is ``run_dir``."""
    return f"{run_dir}-devices"


def start(api: docker.APIClient, cid: str, user: str, python: str, run_dir: str, tool: str,
          timeout_s: float, interval_s: float | None = None) -> str:
    """Start the device sampler of the run ``run_dir`` in container ``cid`` as ``user``, detached (``tool``:
    ``nvidia-smi`` or ``npu-smi``; it stops by itself after ``timeout_s`` + 30 s at the latest); return "" or why
    it could not start. Never raises."""
    where = folder(run_dir)
    steps = int((timeout_s + 30.0) / WAIT_STEP_S) + 1
    child = ["/bin/sh", "-c", f"i=0; while [ ! -e {shlex.quote(where)}/.stop ] && [ $i -lt {steps} ]; do "
                              f"sleep {WAIT_STEP_S:g}; i=$((i + 1)); done"]
    script = f"mkdir -p {shlex.quote(where)} && {runtime.wrapped(python, where, child, interval_s, tool)}"
    try:
        ex = api.exec_create(cid, ["/bin/sh", "-c", script], user=user)
        api.exec_start(ex["Id"], detach=True)
    except docker.errors.APIError as exc:
        return f"the engine refused the sampler's exec: {exc.explanation or exc}"
    return ""


def finish(api: docker.APIClient, cid: str, user: str, run_dir: str, usage: UsageRecord, tool: str,
           refused: str = "") -> None:
    """Stop the sampler of the run ``run_dir`` and add what it sampled to ``usage`` (the run's ``model.usage``
    record): its devices and ``device_sampling`` (why none, when ``refused`` (:func:`start`'s answer) or the
    samples cannot be read, or the image has no interpreter for the sampler). Never raises."""
    where = folder(run_dir)
    why = refused
    files: dict[str, str] = {}
    if not why:
        script = f"touch {shlex.quote(where)}/.stop 2>/dev/null; {runtime.dump_script(where)}"
        try:
            ex = api.exec_create(cid, ["/bin/sh", "-c", script], user=user)
            out = (api.exec_start(ex["Id"]) or b"").decode("utf-8", "replace")
            code = exec_inspect(api, ex["Id"]).exit_code
            files = runtime.parse_dump(out) if code == 0 else {}
            why = "" if code == 0 else f"its folder could not be read (exit {code})"
        except docker.errors.APIError as exc:
            why = f"its samples could not be read: {exc.explanation or exc}"
    found = runtime.RunDirFiles.of(files)
    nowrap = found.no_wrapper.strip()
    if nowrap:
        why = f"the image has no {nowrap} to run the gate's device sampler"
    if why or not found.devices.strip():
        usage["device_sampling"] = {"source": tool, "scope": "", "interval_s": None, "available": False,
                                    "unavailable": why or f"the device sampler wrote no {tool} samples",
                                    "samples": 0, "errors": []}
        return
    runtime.add_devices(usage, found.devices)
