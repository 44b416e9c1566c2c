"""Inventory and placement on a Docker host: what the engine offers, and what it stores for a request.

Scheduling on one Docker host proves that the engine accepts the translated request: a
*placement probe* container (an empty image, labelled like every object of the run) is created
with the resource's ``HostConfig`` and started. runc sets up the cgroup limits and device nodes
and then fails to exec the probe's absent program — that exact failure means the engine and
runtime accepted everything before it. Queues, quotas and priority classes do not exist on a
Docker host; that part is recorded as not proven. What the requested and allocated limits mean
for the claim is judged by :mod:`pytest_hetero.layers.scheduling`.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import tarfile
import time
from pathlib import Path

import docker.errors

from pytest_hetero.backends.docker import client as run
from pytest_hetero.backends.docker import usage as docker_usage
from pytest_hetero.backends.docker.api import inspect_container
from pytest_hetero.backends.docker.errors import outcome
from pytest_hetero.backends.docker.session import DockerSession
from pytest_hetero.backends.docker.translate import ASCEND_CONTROL_DEVICES, DockerTarget, EngineRequest, translate
from pytest_hetero.backends.host import host_view
from pytest_hetero.backends.protocol import (
    ActionFailed,
    EngineFacts,
    EngineView,
    Inventory,
    Placement,
    Step,
    UsageFacts,
)

PROBE_PROGRAM = "/hetero-placement-probe"
"""Absent from the empty probe image: runc's ``exec: "/hetero-placement-probe": stat …`` is the success signal."""
DEVICE_GLOBS: dict[str, tuple[str, ...]] = {
    "nvidia": ("nvidia[0-9]*", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"),
    "ascend": ("davinci[0-9]*", *(Path(p).name for p in ASCEND_CONTROL_DEVICES)),
    "cpu": (),
}
REMOTE_HOST = ("the engine is remote; this process cannot probe its host (the startup payload probes inside the "
               "container)")


def device_nodes(vendor: str, dev: Path = Path("/dev")) -> list[str]:
    """Host device nodes of ``vendor`` (``/dev/nvidia0``…, ``/dev/davinci0``…), sorted."""
    return sorted(str(p) for g in DEVICE_GLOBS.get(vendor, ()) for p in dev.glob(g))


def inventory(step: Step, session: DockerSession) -> Inventory:
    """The engine's facts (version, runtimes, capacity, device nodes of a local host), the resource's
    request in engine terms, and (engine on this host) the host's device probe."""
    session.api  # noqa: B018 - connects and reads version/info
    engine = session.engine
    res, local = step.resource, session.local
    vendor = res.probe_vendor
    nodes = device_nodes(vendor) if local else []
    runtimes = sorted(engine.runtimes)
    facts: EngineFacts = {"server_version": engine.version, "api_version": engine.api_version,
             "os": engine.os, "kernel": engine.kernel, "arch": engine.arch,
             "runtimes": runtimes, "default_runtime": engine.default_runtime,
             "nvidia_runtime": "nvidia" in runtimes, "ascend_runtime": "ascend" in runtimes,
             "ncpu": engine.ncpu, "mem_total_mib": (engine.mem_total or 0) // 2**20,
             "cgroup_version": engine.cgroup_version, "cgroup_driver": engine.cgroup_driver,
             "storage_driver": engine.storage_driver, "engine_host_local": local,
             "device_nodes": nodes if local else None}
    hook = local and bool(shutil.which("nvidia-container-runtime-hook"))
    view = EngineView(facts=facts, runtimes=runtimes, gpu_runtime="nvidia" in runtimes or hook,
                      device_nodes=nodes if local else None, cpus=engine.ncpu, memory_bytes=engine.mem_total,
                      local=local)
    try:
        request = translate(res, session.conf, host_visible=local)
        view.requested_cpus = request.nano_cpus / 1e9 if request.nano_cpus else None
        view.requested_memory_bytes = request.mem_limit
    except ValueError as exc:
        view.request_error = str(exc)
    if local:
        return Inventory(engine=view, host=host_view(res))
    return Inventory(engine=view, host_not_probed=REMOTE_HOST)


def translate_or_fail(step: Step, target: DockerTarget, local: bool) -> EngineRequest:
    """:func:`translate` with a malformed request turned into ActionFailed (``bad_request``, platform)."""
    try:
        return translate(step.resource, target, host_visible=local)
    except ValueError as exc:
        raise ActionFailed(f"resource {step.resource.name}: {exc}", "bad_request") from None


def _not_proven(ctx: Step, request: EngineRequest) -> None:
    res = ctx.resource
    declared = ([f"queue '{res.queue}'"] if res.queue else []) + \
        ([f"priority_class '{res.priority_class}'"] if res.priority_class else [])
    reason = "a Docker host has no queues, quotas or priority classes; admission and quota are not proven here"
    if declared:
        reason += f"; the resource declares {' and '.join(declared)}, which this backend neither enforces nor proves"
    ctx.record("scope.not_proven", layer="scheduling", part="queue/quota", reason=reason,
               queue=res.queue, priority_class=res.priority_class)
    ignored = {k: v for k, v in (("node_selector", res.node_selector), ("tolerations", list(res.tolerations))) if v}
    if ignored or request.untranslated:
        ctx.record("scope.not_proven", layer="scheduling", part="placement keys",
                   reason="one Docker host: node selectors and tolerations select nothing; untranslated requests "
                   "are not enforced", ignored=ignored, untranslated=request.untranslated)


def probe_image(session: DockerSession) -> str:
    """The empty placement-probe image of this session (``docker import`` of an empty tar), created once."""
    if session.probe_image is None:
        buf = io.BytesIO()
        tarfile.open(fileobj=buf, mode="w").close()
        marks = run.labels(session.settings.run_id, session.owner, "placement-probe")
        answer = session.api.import_image_from_data(
            buf.getvalue(), changes=[f"LABEL {k}={json.dumps(v)}" for k, v in marks.items()])
        session.probe_image = str(json.loads(answer.strip().splitlines()[-1])["status"])
    return session.probe_image


def place(ctx: Step, session: DockerSession) -> Placement:
    """Create + start the placement probe with the translated request; record the translation, the
    scope not proven and ``scheduling.allocation`` (requested vs allocated).

    Returns a Placement whose ``requested`` holds the limits the engine must store (``NanoCpus``,
    ``Memory``, ``CpusetCpus``) and ``allocated`` what it stored; ``untranslatable`` /
    ``short_devices`` say why no probe was created. Raises ActionFailed ``bad_request`` (platform)
    and engine refusals classified by :mod:`.errors`.
    """
    res = ctx.resource
    request = translate_or_fail(ctx, session.conf, session.local)
    ctx.record("scheduling.translation", requested={"requests": res.requests, "limits": res.limits},
               engine=request.to_dict())
    _not_proven(ctx, request)
    if res.type != "cpu" and not request.device_count:
        return Placement(placed=False, untranslatable=(
            f"resource {res.name} ({res.type}) requests {sorted(res.requests)}: no accelerator the Docker backend "
            "can translate (nvidia.com/gpu, huawei.com/Ascend*)"))
    if request.devices and len(request.device_ids) < request.device_count:
        return Placement(placed=False, short_devices=(
            f"{request.device_count} Ascend devices requested, the engine host has {len(request.device_ids)} "
            f"(/dev/davinci{{{','.join(request.device_ids)}}})"))
    api = session.api
    marks = run.labels(session.settings.run_id, session.owner, "placement-probe", matrix=ctx.matrix.name,
                       resource=res.name)
    mounts = [docker.types.Mount(m["target"], m["source"], type="bind", read_only=True) for m in request.mounts]
    host_config = api.create_host_config(**request.host_config(), network_mode="none", mounts=mounts)
    what = f"placement probe for {res.name}"
    try:
        cid = api.create_container(probe_image(session), command=[PROBE_PROGRAM], labels=marks,
                                   environment=request.environment, host_config=host_config)["Id"]
    except docker.errors.APIError as exc:
        raise outcome(exc, f"{what}: engine refused the request", phase="start") from None
    try:
        got = inspect_container(api, cid).host_config.allocated
        try:
            api.start(cid)
            started = "started"
        except docker.errors.APIError as exc:
            text = " ".join(str(exc.explanation or exc).split())
            if not re.search(rf'exec: "?{re.escape(PROBE_PROGRAM)}"?: .*no such file', text):
                raise outcome(exc, f"{what}: runtime refused the container", phase="start") from None
            started = "runtime set up cgroups and devices; exec of the absent probe program failed as intended"
        ctx.record("scheduling.allocation", container=cid, requested=request.to_dict(), allocated=got,
                   runtime_outcome=started, devices_assigned=request.device_ids or None,
                   note="NVIDIA device UUIDs are assigned by the runtime hook at start; the startup payload "
                   "lists them" if request.device_requests else None)
    finally:
        facts = _probe_usage(api, cid)
    return Placement(placed=True, requested={"NanoCpus": request.nano_cpus or 0, "Memory": request.mem_limit or 0,
                                             "CpusetCpus": request.cpuset_cpus or ""}, allocated=got, usage=facts)


def _probe_usage(api: docker.APIClient, cid: str) -> UsageFacts:
    """Remove the placement probe ``cid``; return its usage facts (:mod:`.usage`; ``released`` when the
    engine confirmed the removal, epoch s), or {} when it could not be inspected."""
    try:
        facts = docker_usage.container_facts(inspect_container(api, cid), "completed")
    except docker.errors.APIError:
        facts = UsageFacts()
    try:
        api.remove_container(cid, force=True)
    except docker.errors.APIError:
        return facts
    if facts:
        facts["released"] = time.time()
    return facts
