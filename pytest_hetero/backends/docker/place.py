"""Discovery and scheduling on a Docker host: what the engine offers, and whether it accepts the request.

Scheduling on one Docker host proves that the engine accepts the translated request: a
*placement probe* container (an empty image, labelled like every object of the run) is created
with the resource's ``HostConfig`` and started. runc sets up the cgroup limits and device nodes
and then fails to exec the probe's absent program — that exact failure means the engine and
runtime accepted everything before it. Queues, quotas and priority classes do not exist on a
Docker host; that part is recorded as not proven.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker.errors

from pytest_hetero.backends.docker import client as run
from pytest_hetero.backends.docker.errors import outcome
from pytest_hetero.backends.docker.translate import ASCEND_CONTROL_DEVICES, EngineRequest, translate
from pytest_hetero.backends.host import discover_host, vendor_of
from pytest_hetero.layers.base import LayerContext, LayerFailed

if TYPE_CHECKING:
    from pytest_hetero.backends.docker.engine import DockerBackend

PROBE_PROGRAM = "/hetero-placement-probe"
"""Absent from the empty probe image: runc's ``exec: "/hetero-placement-probe": stat …`` is the success signal."""
DEVICE_GLOBS: dict[str, tuple[str, ...]] = {
    "nvidia": ("nvidia[0-9]*", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"),
    "ascend": ("davinci[0-9]*", *(Path(p).name for p in ASCEND_CONTROL_DEVICES)),
    "cpu": (),
}
ALLOCATED_FIELDS = ("NanoCpus", "CpusetCpus", "Memory", "MemorySwap", "Devices", "DeviceRequests", "Runtime")


def device_nodes(vendor: str, dev: Path = Path("/dev")) -> list[str]:
    """Host device nodes of ``vendor`` (``/dev/nvidia0``…, ``/dev/davinci0``…), sorted."""
    return sorted(str(p) for g in DEVICE_GLOBS.get(vendor, ()) for p in dev.glob(g))


def engine_gaps(ctx: LayerContext, info: dict[str, Any], nodes: list[str], local: bool) -> list[tuple[str, str]]:
    """Why the engine cannot satisfy ``ctx.resource`` at all: ``[(category, message)]`` (empty: it can)."""
    res, gaps = ctx.resource, []
    vendor = vendor_of(res.type, res.vendor)
    runtimes = sorted(info.get("Runtimes") or {})
    if vendor == "nvidia" and "nvidia" not in runtimes and not (local and shutil.which("nvidia-container-runtime-hook")):
        gaps.append(("runtime_missing", (f"no NVIDIA runtime on the engine (runtimes: {', '.join(runtimes)}; no "
                     "nvidia-container-runtime-hook): GPU device requests cannot be satisfied; install the "
                     "NVIDIA Container Toolkit")))
    if vendor == "ascend" and local and not any("davinci" in n and n[-1].isdecimal() for n in nodes):
        gaps.append(("device_missing", "no /dev/davinci<N> device nodes on the engine host"))
    merged = {**res.requests, **res.limits}
    try:
        request = translate(res, ctx.matrix.target, host_visible=local)
    except ValueError as exc:
        return [*gaps, ("bad_request", str(exc))]
    ncpu, mem = info.get("NCPU"), info.get("MemTotal")
    if request.nano_cpus and ncpu and request.nano_cpus > ncpu * 10**9:
        gaps.append(("insufficient_capacity", f"cpu {merged.get('cpu')} requested, the engine has {ncpu} CPUs"))
    if request.mem_limit and mem and request.mem_limit > mem:
        gaps.append(("insufficient_capacity", (f"memory {merged.get('memory')} requested, the engine has "
                     f"{mem // 2**20} MiB")))
    return gaps


def discover(ctx: LayerContext, engine: dict[str, Any], local: bool) -> None:
    """Record engine facts, device nodes and (local engines) the host probe; LayerFailed (infrastructure) on gaps."""
    version, info = engine["version"], engine["info"]
    res = ctx.resource
    vendor = vendor_of(res.type, res.vendor)
    nodes = device_nodes(vendor) if local else []
    runtimes = sorted(info.get("Runtimes") or {})
    ctx.record("discovery.engine", server_version=version.get("Version"), api_version=version.get("ApiVersion"),
               os=info.get("OperatingSystem"), kernel=version.get("KernelVersion"), arch=version.get("Arch"),
               runtimes=runtimes, default_runtime=info.get("DefaultRuntime"),
               nvidia_runtime="nvidia" in runtimes, ascend_runtime="ascend" in runtimes,
               ncpu=info.get("NCPU"), mem_total_mib=(info.get("MemTotal") or 0) // 2**20,
               cgroup_version=info.get("CgroupVersion"), cgroup_driver=info.get("CgroupDriver"),
               storage_driver=info.get("Driver"), engine_host_local=local,
               device_nodes=nodes if local else None)
    gaps = engine_gaps(ctx, info, nodes, local)
    ctx.record("discovery.engine_can_satisfy", resource=res.name, ok=not gaps,
               gaps=[{"category": c, "message": m} for c, m in gaps])
    host_failure: LayerFailed | None = None
    if local:
        try:
            discover_host(ctx)
        except LayerFailed as exc:
            host_failure = exc
    else:
        ctx.record("discovery.host_probe", skipped=True, reason="the engine is remote; this process cannot "
                   "probe its host (the startup payload probes inside the container)")
    messages = [m for _, m in gaps] + ([host_failure.message] if host_failure else [])
    if messages:
        category = gaps[0][0] if gaps else host_failure.category  # type: ignore[union-attr]
        raise LayerFailed("; ".join(messages), category, "infrastructure")


def translate_or_fail(ctx: LayerContext, target: dict[str, Any], local: bool) -> EngineRequest:
    """:func:`translate` with a malformed request turned into LayerFailed (``bad_request``, platform)."""
    try:
        return translate(ctx.resource, target, host_visible=local)
    except ValueError as exc:
        raise LayerFailed(f"resource {ctx.resource.name}: {exc}", "bad_request", "platform") from None


def allocated(host_config: dict[str, Any]) -> dict[str, Any]:
    """The limits and devices the engine stored for a container (``HostConfig`` subset, engine JSON)."""
    return {k: host_config.get(k) for k in ALLOCATED_FIELDS}


def _not_proven(ctx: LayerContext, request: EngineRequest) -> None:
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


def probe_image(backend: DockerBackend) -> str:
    """The empty placement-probe image of this backend (``docker import`` of an empty tar), created once."""
    if backend.probe_image is None:
        buf = io.BytesIO()
        tarfile.open(fileobj=buf, mode="w").close()
        marks = run.labels(backend.settings.run_id, backend.owner, "placement-probe")
        answer = backend.api.import_image_from_data(
            buf.getvalue(), changes=[f"LABEL {k}={json.dumps(v)}" for k, v in marks.items()])
        backend.probe_image = str(json.loads(answer.strip().splitlines()[-1])["status"])
    return backend.probe_image


def schedule(ctx: LayerContext, backend: DockerBackend) -> None:
    """Create + start the placement probe with the translated request; record requested vs allocated.

    Raises LayerFailed: ``bad_request``, ``request_untranslatable`` (an accelerator resource with no
    device translated), ``insufficient_devices``, engine refusals classified by :mod:`docker_errors`,
    ``allocation_mismatch`` (the engine stored other limits than asked).
    """
    res = ctx.resource
    request = translate_or_fail(ctx, backend.target, backend.local)
    ctx.record("scheduling.translation", requested={"requests": res.requests, "limits": res.limits},
               engine=request.to_dict())
    _not_proven(ctx, request)
    if res.type != "cpu" and not request.device_count:
        raise LayerFailed(f"resource {res.name} ({res.type}) requests {sorted(res.requests)}: no accelerator the "
                          "Docker backend can translate (nvidia.com/gpu, huawei.com/Ascend*)",
                          "request_untranslatable", "platform")
    if request.devices and len(request.device_ids) < request.device_count:
        raise LayerFailed(f"{request.device_count} Ascend devices requested, the engine host has "
                          f"{len(request.device_ids)} (/dev/davinci{{{','.join(request.device_ids)}}})",
                          "insufficient_devices", "infrastructure")
    api = backend.api
    marks = run.labels(backend.settings.run_id, backend.owner, "placement-probe", matrix=ctx.matrix.name,
                       resource=res.name)
    mounts = [docker.types.Mount(m["target"], m["source"], type="bind", read_only=True) for m in request.mounts]
    host_config = api.create_host_config(**request.host_config(), network_mode="none", mounts=mounts)
    what = f"placement probe for {res.name}"
    try:
        cid = api.create_container(probe_image(backend), command=[PROBE_PROGRAM], labels=marks,
                                   environment=request.environment, host_config=host_config)["Id"]
    except docker.errors.APIError as exc:
        raise outcome(exc, f"{what}: engine refused the request", phase_owner="platform") from None
    try:
        state = api.inspect_container(cid)
        got = allocated(state["HostConfig"])
        try:
            api.start(cid)
            started = "started"
        except docker.errors.APIError as exc:
            text = " ".join(str(exc.explanation or exc).split())
            if not re.search(rf'exec: "?{re.escape(PROBE_PROGRAM)}"?: .*no such file', text):
                raise outcome(exc, f"{what}: runtime refused the container", phase_owner="platform") from None
            started = "runtime set up cgroups and devices; exec of the absent probe program failed as intended"
        ctx.record("scheduling.allocation", container=cid, requested=request.to_dict(), allocated=got,
                   runtime_outcome=started, devices_assigned=request.device_ids or None,
                   note="NVIDIA device UUIDs are assigned by the runtime hook at start; the startup payload "
                   "lists them" if request.device_requests else None)
    finally:
        try:
            api.remove_container(cid, force=True)
        except docker.errors.APIError:
            pass
    expected = {"NanoCpus": request.nano_cpus or 0, "Memory": request.mem_limit or 0,
                "CpusetCpus": request.cpuset_cpus or ""}
    wrong = {k: (v, got[k]) for k, v in expected.items() if (got[k] or type(v)()) != v}
    if wrong:
        raise LayerFailed("engine stored other limits than requested: " + ", ".join(
            f"{k} requested {a!r}, allocated {b!r}" for k, (a, b) in wrong.items()), "allocation_mismatch", "platform")
