"""Startup and model execution in the resource × image workload pod.

Startup waits (on the pod watch) until the workload container runs, or a container state says it
will not: waiting ``ErrImagePull``/``ImagePullBackOff``/``InvalidImageName``/
``CreateContainerConfigError``/``CreateContainerError``/``RunContainerError``/``CrashLoopBackOff``,
terminated (``OOMKilled``, exit codes), or a kubelet rejection (pod ``Failed``). Reasons are
normalised by :func:`pytest_hetero.pending.explain`; the pod status, its events and logs are kept.
Then the device-initialisation payload runs through ``pods/exec``.

On a KWOK-simulated node (annotation ``kwok.x-k8s.io/node: fake``) container states come from KWOK
stages, no image is pulled, and exec runs on the KWOK host, not in the image: evidence says so in
``startup.simulation`` and every exec record carries ``simulated: true``.
"""

from __future__ import annotations

import io
import shlex
import tarfile
from pathlib import Path
from typing import Any

from kubernetes import client

from pytest_hetero.backends import kube_exec
from pytest_hetero.backends.docker_payload import CATEGORY, framework_gaps
from pytest_hetero.errors import ParseError
from pytest_hetero.layers.base import LayerContext, LayerFailed
from pytest_hetero.matrix.model import Matrix, Resource
from pytest_hetero.probes.payload import (
    PayloadReport,
    assess,
    parse_payload_output,
    payload_script,
    tool_inventory,
)

STUCK = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
        "ErrImageNeverPull",
    }
)
"""Waiting reasons after which the container will not start by itself."""


def verdict(pods: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    """``("running", pod)``, ``("failed", pod)`` or None (still starting) for the workload's pods."""
    for pod in pods:
        if pod.get("deleted"):
            continue
        status = pod.get("status") or {}
        statuses = status.get("containerStatuses") or []
        if status.get("phase") in ("Failed", "Succeeded"):
            return "failed", pod
        for entry in statuses:
            state = entry.get("state") or {}
            if (state.get("waiting") or {}).get("reason") in STUCK or "terminated" in state:
                return "failed", pod
        if (
            status.get("phase") == "Running"
            and statuses
            and all("running" in (e.get("state") or {}) for e in statuses)
        ):
            return "running", pod
    return None


def image_identity(pod: dict[str, Any]) -> dict[str, Any]:
    """``{"image", "image_id", "digest"}`` of the workload container as the node reports it."""
    entry: dict[str, Any] = next(iter((pod.get("status") or {}).get("containerStatuses") or []), {})
    image_id = str(entry.get("imageID") or "")
    return {
        "image": entry.get("image"),
        "image_id": image_id or None,
        "digest": image_id.split("@", 1)[1] if "@" in image_id else (image_id or None),
    }


def read_logs(core: client.CoreV1Api, namespace: str, pod: str, previous: bool = False) -> str:
    """Container log text, or a line saying why there is none (never raises)."""
    try:
        return str(
            core.read_namespaced_pod_log(
                pod, namespace, container="workload", previous=previous, tail_lines=2000, _request_timeout=30
            )
        )
    except Exception as exc:  # noqa: BLE001 - logs are evidence, not a verdict
        return f"(logs unavailable: {getattr(exc, 'status', '')} {getattr(exc, 'reason', exc)})"


def device_init(
    ctx: LayerContext,
    core: client.CoreV1Api,
    namespace: str,
    pod: str,
    node: dict[str, Any],
    image_owner: str,
) -> PayloadReport:
    """Run and judge the payload by exec; record ``startup.device_init``; compare the in-pod device
    inventory (:func:`inventory_check`); return the payload report. ``node`` is the node's facts.

    Raises LayerFailed like :func:`pytest_hetero.backends.docker_payload.device_init`
    (``payload_failed``, a finding's category and owner, ``framework_missing``),
    ``device_inventory_mismatch`` (infrastructure) on an inventory difference, and ApiException
    when the exec is refused.
    """
    simulated = bool(node.get("simulated"))
    timeout = str(max(1, int(ctx.timeout_s // 4)))
    done = kube_exec.run(
        core,
        namespace,
        pod,
        "workload",
        ["/bin/sh", "-c", f"HETERO_TIMEOUT={timeout}; export HETERO_TIMEOUT\n" + payload_script()],
        ctx.timeout_s,
    )
    art = ctx.artifact(
        "payload.txt", done.stdout + ("\n--- stderr ---\n" + done.stderr if done.stderr else "")
    )
    where = "the KWOK host (simulated node: not inside the image)" if simulated else f"pod {pod}"
    try:
        report = parse_payload_output(done.stdout)
    except ParseError as exc:
        ctx.record(
            "startup.device_init",
            exit_code=done.exit_code,
            artifact=art.path,
            ran_on=where,
            simulated=simulated,
            report=None,
            findings=[],
        )
        raise LayerFailed(
            f"device payload in {pod} gave no report (exit {done.exit_code}): {exc.message}; "
            f"stderr: {done.stderr.strip()[-200:]}",
            "payload_failed",
            image_owner,
        ) from None
    findings = [f.to_dict() for f in assess(report, ctx.resource.type)]
    gaps = framework_gaps(ctx, report)
    data = report.to_dict()
    data.pop("raw", None)
    ctx.record(
        "startup.device_init",
        exit_code=done.exit_code,
        artifact=art.path,
        ran_on=where,
        simulated=simulated,
        findings=findings,
        framework_gaps=[{"category": c, "message": m} for c, m in gaps],
        report=data,
    )
    if findings:
        first = findings[0]
        raise LayerFailed(
            f"device initialisation in {pod} (ran on {where}): {first['message']}",
            CATEGORY.get(first["category"], first["category"]),
            first["owner"],
        )
    if gaps:
        raise LayerFailed(gaps[0][1], gaps[0][0], "algorithm")
    checked = inventory_check(ctx.resource, report, node)
    if checked is not None:
        ctx.record("startup.inventory", **checked)
    differences = (checked or {}).get("differences") or []
    if differences:
        raise LayerFailed(
            f"device inventory in {pod} (ran on {where}): " + "; ".join(d["message"] for d in differences),
            "device_inventory_mismatch",
            "infrastructure",
        )
    return report


def inventory_check(resource: Resource, report: PayloadReport, node: dict[str, Any]) -> dict[str, Any] | None:
    """Compare the device inventory the payload read in the pod (``nvidia-smi``/``npu-smi``) with what
    the pod was allocated and the matrix expects; return the ``startup.inventory`` record data
    (``differences``: ``[{"category", "message", "expected", "actual", "device", "owner"}]``, see
    :mod:`pytest_hetero.probes.compare`), or None when there is nothing to compare (CPU resource,
    image without the vendor tool: the payload findings already say what is missing).

    Expected in the pod: as many devices (MIG: matching instances) as the request of the resource's
    first device resource, and ``expect``'s product/memory/driver/CUDA/CANN. ``node`` (node facts)
    gives the advertised capacity/allocatable, recorded beside it.
    """
    from pytest_hetero.backends.host_discovery import expectation, vendor_of
    from pytest_hetero.backends.kube_discovery import device_resources, quantity
    from pytest_hetero.probes.compare import compare

    vendor = vendor_of(resource.type, resource.vendor)
    names = device_resources(resource)
    inventory = tool_inventory(report, vendor) if vendor != "cpu" and names else None
    if inventory is None:
        return None
    exp = expectation(resource)
    exp["resource"] = names[0]
    exp["count"] = int(quantity(resource.requests[names[0]]) or 0)
    return {
        "node": node.get("name"),
        "source": inventory.source,
        "resource": names[0],
        "allocated": exp["count"],
        "devices_seen": len(inventory.devices),
        "node_capacity": (node.get("capacity") or {}).get(names[0]),
        "node_allocatable": (node.get("allocatable") or {}).get(names[0]),
        "expected": exp,
        "differences": [d.to_dict() for d in compare(inventory, exp)],
    }


def input_tar(matrix: Matrix) -> bytes:
    """A tar of every model file, model code and dataset file, laid out as in :func:`input_paths`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for m in matrix.models:
            if m.path.is_file():
                tar.add(str(m.path), arcname=f"models/{m.name}/{m.path.name}")
            code = m.code or matrix.path.parent
            tar.add(
                str(code),
                arcname=f"code/{m.name}" + ("" if code.is_dir() else f"/{code.name}"),
                filter=lambda t: None if "__pycache__" in t.name else t,
            )
        for d in matrix.datasets:
            tar.add(str(d.path), arcname=f"datasets/{d.name}/{d.path.name}")
    return buf.getvalue()


def input_paths(
    root: str, model: str, model_path: Path, code: Path, dataset: str, dataset_path: Path
) -> dict[str, str]:
    """In-pod paths ``{"model", "code", "dataset"}`` under ``root`` (where :func:`input_tar` was unpacked)."""
    return {
        "model": f"{root}/models/{model}/{model_path.name}",
        "code": f"{root}/code/{model}" + ("" if code.is_dir() else f"/{code.name}"),
        "dataset": f"{root}/datasets/{dataset}/{dataset_path.name}",
    }


def copy_inputs(
    core: client.CoreV1Api, namespace: str, pod: str, matrix: Matrix, root: str, timeout_s: float
) -> None:
    """Unpack :func:`input_tar` at ``root`` in the pod (``tar -x`` from exec stdin).

    Raises LayerFailed ``inputs_copy_failed`` (platform) when tar fails (no ``tar`` in the image).
    """
    done = kube_exec.run(
        core,
        namespace,
        pod,
        "workload",
        ["/bin/sh", "-c", f"mkdir -p {shlex.quote(root)} && tar -x -f - -C {shlex.quote(root)}"],
        timeout_s,
        stdin=input_tar(matrix),
    )
    if done.exit_code != 0:
        raise LayerFailed(
            f"copying model/dataset inputs into {pod}:{root} failed (exit {done.exit_code}): "
            f"{done.stderr.strip()[-300:] or done.status[-300:]}",
            "inputs_copy_failed",
            "platform",
        )


def run_model(
    core: client.CoreV1Api,
    namespace: str,
    pod: str,
    argv: list[str],
    run_dir: str,
    workdir: str,
    env: dict[str, str],
    timeout_s: float,
) -> kube_exec.ExecOutcome:
    """Run ``argv`` in ``workdir`` with ``env``; kill its process (pid file in ``run_dir``) at ``timeout_s``."""
    exports = "".join(f"{k}={shlex.quote(v)}; export {k}; " for k, v in env.items())
    script = (
        f"mkdir -p {shlex.quote(run_dir)} && cd {shlex.quote(workdir)} && echo $$ > "
        f"{shlex.quote(run_dir)}/.pid && {exports}exec {shlex.join(argv)}"
    )
    done = kube_exec.run(core, namespace, pod, "workload", ["/bin/sh", "-c", script], timeout_s)
    if done.timed_out:
        kube_exec.run(
            core,
            namespace,
            pod,
            "workload",
            ["/bin/sh", "-c", f"kill -9 $(cat {shlex.quote(run_dir)}/.pid) 2>/dev/null"],
            30,
        )
    return done


def read_outputs(core: client.CoreV1Api, namespace: str, pod: str, path: str) -> bytes | None:
    """The outputs file's bytes (``cat`` by exec), or None when it does not exist."""
    done = kube_exec.run(core, namespace, pod, "workload", ["/bin/sh", "-c", f"cat {shlex.quote(path)}"], 60)
    return done.stdout.encode("utf-8") if done.exit_code == 0 else None
