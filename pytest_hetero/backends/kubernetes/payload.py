"""Device initialisation in the workload pod: run the probes' payload by exec, judge it, compare inventories.

The payload (:mod:`pytest_hetero.probes.payload`) runs through ``pods/exec`` in the resource ×
image workload pod and is judged like the Docker backend's
(:func:`pytest_hetero.backends.docker.payload.device_init`). The device inventory the payload
read in the pod is then compared with what the pod was allocated and the matrix expects
(:func:`inventory_check`). On a KWOK-simulated node the exec runs on the KWOK host, not in the
image, and every record says so (``simulated: true``).
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from pytest_hetero.backends.kubernetes import podexec as kube_exec
from pytest_hetero.backends.docker.payload import CATEGORY, framework_gaps
from pytest_hetero.errors import ParseError
from pytest_hetero.layers.base import LayerContext, LayerFailed
from pytest_hetero.matrix.model import Resource
from pytest_hetero.probes.payload import (
    PayloadReport,
    assess,
    parse_payload_output,
    payload_script,
    tool_inventory,
)


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

    Raises LayerFailed like :func:`pytest_hetero.backends.docker.payload.device_init`
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
    from pytest_hetero.backends.host import expectation, vendor_of
    from pytest_hetero.backends.kubernetes.inventory import device_resources, quantity
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
