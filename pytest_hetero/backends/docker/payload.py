"""Device initialisation inside the workload container: run the probes' payload, judge it.

The payload (:mod:`pytest_hetero.probes.payload`, POSIX sh; python3 adds the framework view)
runs with ``docker exec`` in the resource × image container. Its findings (device node, driver
library, runtime, framework) fail startup with their owner; so does the model runtime the
matrix's models need (``runtime: onnxruntime`` → ONNX Runtime with the resource's execution
provider) when the image lacks it.
"""

from __future__ import annotations

from typing import Any

import docker
import docker.errors

from pytest_hetero.backends.protocol import EXECUTION_PROVIDERS
from pytest_hetero.errors import ParseError
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerFailed
from pytest_hetero.probes.payload import PayloadReport, assess, parse_payload_output, payload_script

CATEGORY = {"device-node": "device_missing", "visibility": "device_not_visible", "driver-library": "driver_missing",
            "runtime": "runtime_broken", "framework": "framework_without_accelerator", "payload": "payload_failed"}
"""Payload finding category → startup failure category."""


def run_payload(api: docker.APIClient, cid: str, timeout_s: float) -> tuple[int | None, str, str]:
    """Exec the payload (``/bin/sh -c <payload.sh>``); return ``(exit code, stdout, stderr)``.

    ``HETERO_TIMEOUT`` bounds each tool the payload runs (seconds). Raises docker.errors.APIError.
    """
    ex = api.exec_create(cid, ["/bin/sh", "-c", payload_script()],
                         environment={"HETERO_TIMEOUT": str(max(1, int(timeout_s // 4)))})
    out, err = api.exec_start(ex["Id"], demux=True)
    code = api.exec_inspect(ex["Id"]).get("ExitCode")
    return code, (out or b"").decode("utf-8", "replace"), (err or b"").decode("utf-8", "replace")


def framework_gaps(ctx: LayerContext, report: PayloadReport) -> list[tuple[str, str]]:
    """What the matrix's models need from the image that it lacks: ``[(category, message)]``."""
    if not any(m.runtime == "onnxruntime" for m in ctx.matrix.models):
        return []
    wanted = EXECUTION_PROVIDERS[ctx.resource.type]
    python = report.python or {}
    if not python.get("present"):
        return [("framework_missing", (f"image {ctx.image.reference} has no python3/python; the models need "
                 f"ONNX Runtime ({python.get('error')})"))]
    ort = report.framework("onnxruntime")
    if not ort.get("available"):
        return [("framework_missing", (f"ONNX Runtime not importable in image {ctx.image.reference}: "
                 f"{ort.get('error') or python.get('error')}"))]
    if wanted not in (ort.get("providers") or []):
        return [("framework_without_accelerator", (f"{wanted} not available in the image's ONNX Runtime "
                 f"{ort.get('version')} (has {', '.join(ort.get('providers') or [])})"))]
    return []


def device_init(ctx: LayerContext, api: docker.APIClient, workload: dict[str, Any], image_owner: str) -> None:
    """Run and judge the payload; record ``startup.device_init``; LayerFailed on the first finding.

    Raises LayerFailed: ``payload_failed`` (no readable output: the image has no ``/bin/sh`` or
    the payload died), a :data:`CATEGORY` value with the finding's owner, ``framework_missing``
    / ``framework_without_accelerator`` (owner algorithm). LayerBroken when the exec is refused.
    """
    try:
        code, out, err = run_payload(api, workload["id"], ctx.timeout_s)
    except docker.errors.APIError as exc:
        raise LayerBroken(f"cannot exec the device payload in {workload['name']}: {exc}", "engine_error") from None
    art = ctx.artifact("payload.txt", out + ("\n--- stderr ---\n" + err if err else ""))
    try:
        report = parse_payload_output(out)
    except ParseError as exc:
        ctx.record("startup.device_init", exit_code=code, artifact=art.path, report=None, findings=[])
        raise LayerFailed(f"device payload in {workload['name']} gave no report (exit {code}): {exc.message}; "
                          f"stderr: {err.strip()[-200:]}", "payload_failed", image_owner) from None
    findings = [f.to_dict() for f in assess(report, ctx.resource.type)]
    gaps = framework_gaps(ctx, report)
    data = report.to_dict()
    data.pop("raw", None)
    ort = report.framework("onnxruntime")
    ctx.record("startup.device_init", exit_code=code, artifact=art.path, shell_only=not (report.python or {}).get(
        "present"), wanted_provider=EXECUTION_PROVIDERS[ctx.resource.type], providers=ort.get("providers"),
        findings=findings, framework_gaps=[{"category": c, "message": m} for c, m in gaps], report=data)
    if findings:
        first = findings[0]
        more = f" (+{len(findings) - 1} more findings)" if len(findings) > 1 else ""
        raise LayerFailed(f"device initialisation in {workload['name']}: {first['message']}{more}",
                          CATEGORY.get(first["category"], first["category"]), first["owner"])
    if gaps:
        raise LayerFailed(gaps[0][1], gaps[0][0], "algorithm")
