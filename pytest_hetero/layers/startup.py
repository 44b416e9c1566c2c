"""Startup layer: the image starts on the target; mounts, runtime, driver and device initialise inside it.

One sequence for every engine, one verdict per rule:

1. the engine resolves the image (:meth:`~pytest_hetero.backends.protocol.Backend.identify`); its
   digest must be the matrix's (``image_digest_mismatch``, the target's image owner); an engine
   without containers (local) reports the interpreter's framework view instead of a device payload,
   judged here (``framework_missing`` / ``framework_without_accelerator``, algorithm);
2. the engine starts the image (:meth:`~pytest_hetero.backends.protocol.Backend.start`); an image
   only identified once running (Kubernetes) is checked then;
3. inside a container the device payload (:mod:`pytest_hetero.probes.payload`) runs through the
   engine's run verb and is judged by :func:`judge_payload`: the devices the container sees against
   those allocated (:func:`visible_devices`: more than allocated is ``devices_over_allocated``,
   fewer ``device_missing``, both infrastructure), its findings (device node, driver library,
   runtime, framework) with their owner, the framework the models need, and the vendor tool's
   device inventory against the allocation and ``expect`` (``device_inventory_mismatch``);
4. served models must answer as the declared version (:func:`pytest_hetero.layers.serving.startup`).

The model and dataset files are not startup's: each model item verifies the two it uses
(:func:`verify_inputs`, called by :mod:`pytest_hetero.layers.execution`), so one wrong file fails the
combinations that use it, owned by whoever owns the file, and blocks nothing else.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from pytest_hetero.backends.protocol import EXECUTION_PROVIDERS, ImageIdentity, InterpreterView, Started, StartedOn
from pytest_hetero.errors import ParseError
from pytest_hetero.evidence.records import NOT_PROVEN, NotProvenData
from pytest_hetero.layers import usage
from pytest_hetero.layers.base import LayerContext, LayerFailed
from pytest_hetero.layers.discovery import expectation
from pytest_hetero.matrix.model import Resource
from pytest_hetero.matrix.quantity import quantity_or_none
from pytest_hetero.matrix.references import file_sha256
from pytest_hetero.probes.payload import (
    PayloadReport,
    assess,
    parse_payload_output,
    payload_script,
    tool_inventory,
)
from pytest_hetero.probes.payload_rules import listed_devices

if TYPE_CHECKING:
    from pytest_hetero.probes.compare import DifferenceDict, ExpectationFields


DEVICE_EXPECT = frozenset({"devices", "product", "min_memory_mib", "driver", "cuda", "cann", "mig_profile"})
"""``expect`` keys the device inventory inside the workload is compared against."""
def check(ctx: LayerContext) -> None:
    """Identify and start the image through the engine, judge what it reports (see the module
    docstring); then, when the matrix serves models, prove each inference service is ready, reports
    the declared version and enforces its authentication. A node-coverage item (keyed by ``coverage``)
    runs the same check on each chosen node of the pool instead (:mod:`pytest_hetero.layers.nodes`)."""
    if "coverage" in ctx.planned.keys:
        from pytest_hetero.layers import nodes

        nodes.check(ctx)
        return
    engine = ctx.backend
    identity = engine.identify(ctx)
    if identity is not None:
        judge_digest(ctx, identity)
        if identity.environment is not None:
            judge_environment(ctx, identity.environment)
    started = engine.start(ctx)
    usage.record(ctx, started.usage)
    if started.identity is not None:
        judge_digest(ctx, started.identity)
    if identity is None or identity.environment is None:
        timeout = str(max(1, int(ctx.timeout_s // 4)))
        done = engine.run(started, ["/bin/sh", "-c", payload_script()], ctx.timeout_s, {"HETERO_TIMEOUT": timeout})
        judge_payload(ctx, started, done.exit_code, done.stdout, done.stderr)
    logs = engine.logs(started)
    if logs is not None:
        ctx.artifact("container.log", logs)
    if any(model.serving is not None for model in ctx.matrix.models):
        from pytest_hetero.layers.serving import startup

        startup(ctx)


def judge_digest(ctx: LayerContext, identity: ImageIdentity) -> None:
    """LayerFailed ``image_digest_mismatch`` (the image's owner) when the matrix declares a digest the
    image does not answer to (any of its ids/repo digests, algorithm prefix ignored)."""
    declared = ctx.image.digest
    if not declared:
        return
    wanted = declared.split(":")[-1]
    if wanted not in {d.split(":")[-1] for d in identity.known if d}:
        raise LayerFailed(f"{identity.what} has digest {identity.digest or 'an unreported digest'}, the matrix "
                          f"declares sha256:{wanted}", "image_digest_mismatch")


FRAMEWORK_RUNTIMES: tuple[str, ...] = ("onnxruntime",)
"""``models[].runtime`` values startup checks in the environment or image (ONNX Runtime with the
resource's execution provider); any other value is recorded, and requires nothing here."""


def framework_models(ctx: LayerContext) -> list[str]:
    """Names of the matrix's models that declare ``runtime: onnxruntime`` (what startup must find)."""
    return [m.name for m in ctx.matrix.models if m.runtime in FRAMEWORK_RUNTIMES]


def judge_environment(ctx: LayerContext, env: InterpreterView) -> None:
    """Judge an interpreter's framework view (engines without containers): when a model declares
    ``runtime: onnxruntime``, ONNX Runtime must be importable with the resource's execution provider.
    Records ``startup.device_init``; LayerFailed (algorithm). Without such a model nothing is required,
    and on an accelerator the device initialisation is recorded as not proven."""
    wanted = EXECUTION_PROVIDERS[ctx.resource.type]
    providers = env["providers"]
    needing = framework_models(ctx)
    if not needing:
        ctx.record("startup.device_init", framework=None, wanted_provider=wanted, providers=providers, ok=True,
                   reason="no model declares runtime: onnxruntime; the environment only has to start")
        if ctx.resource.type != "cpu":
            ctx.write(NOT_PROVEN, NotProvenData(
                layer="startup", part="device initialisation",
                reason=f"no model declares a runtime startup can check (runtime: onnxruntime), so {wanted} in the "
                       "environment was not checked"))
        return
    if providers is None:
        raise LayerFailed(f"ONNX Runtime not importable in {env['python']}: {env['onnxruntime_error']} "
                          f"(models with runtime: onnxruntime: {', '.join(needing)})", "framework_missing")
    ctx.record("startup.device_init", framework="onnxruntime", wanted_provider=wanted,
               providers=providers, ok=wanted in providers, models=needing)
    if wanted not in providers:
        raise LayerFailed(f"{wanted} not available in this environment's ONNX Runtime "
                          f"(has {', '.join(providers)}): framework build without the accelerator",
                          "framework_without_accelerator")


def interpreter_models(ctx: LayerContext) -> list[str]:
    """Names of the matrix's models whose entrypoint runs the image's interpreter (``{python}``)."""
    return [m.name for m in ctx.matrix.models if any("{python}" in part for part in m.entrypoint)]


def framework_gaps(ctx: LayerContext, report: PayloadReport) -> list[tuple[str, str]]:
    """What the matrix's models need from the image that it lacks: ``[(category, message)]``; first the
    interpreter their entrypoints run (``interpreter_missing``: an image defect, caught here rather than
    by every model run), then the framework."""
    python = report.interpreter()
    needing = interpreter_models(ctx)
    if needing and not python.present:
        return [("interpreter_missing", (f"image {ctx.image.reference} has no python3/python; the entrypoints of "
                                         f"{', '.join(needing)} run {{python}} ({python.error})"))]
    if not framework_models(ctx):
        return []
    wanted = EXECUTION_PROVIDERS[ctx.resource.type]
    if not python.present:
        return [("framework_missing", (f"image {ctx.image.reference} has no python3/python; the models need "
                 f"ONNX Runtime ({python.error})"))]
    ort = report.framework("onnxruntime")
    if not ort.available:
        return [("framework_missing", (f"ONNX Runtime not importable in image {ctx.image.reference}: "
                 f"{ort.error or python.error}"))]
    if wanted not in (ort.providers or []):
        return [("framework_without_accelerator", (f"{wanted} not available in the image's ONNX Runtime "
                 f"{ort.version} (has {', '.join(ort.providers or [])})"))]
    return []


def judge_payload(ctx: LayerContext, started: Started, exit_code: int | None, stdout: str, stderr: str,
                  artifact: str = "payload.txt") -> None:
    """Judge the device payload's output from inside ``started``: record ``startup.device_init`` (and
    ``startup.inventory`` when the image has the vendor tool); LayerFailed on the first finding.

    Raises LayerFailed: ``payload_failed`` (no readable output: no ``/bin/sh`` or the payload died;
    the image's owner), the finding's failure category (:data:`pytest_hetero.probes.payload.FAILURE`),
    ``framework_missing`` /
    ``framework_without_accelerator`` (algorithm), ``device_inventory_mismatch`` (infrastructure:
    the devices visible are not those allocated and expected, e.g. more than were allocated).
    ``artifact`` names the payload's output artifact (one per node in a node-coverage item).
    """
    art = ctx.artifact(artifact, stdout + ("\n--- stderr ---\n" + stderr if stderr else ""))
    where = f" (ran on {started.where})" if started.where else ""
    placement = {"ran_on": started.where or f"container {started.name}", "simulated": started.simulated,
                 "node": started.node.name if started.node else None}
    try:
        report = parse_payload_output(stdout)
    except ParseError as exc:
        ctx.record("startup.device_init", exit_code=exit_code, artifact=art.path, report=None, findings=[],
                   **placement)
        raise LayerFailed(f"device payload in {started.name} gave no report (exit {exit_code}): {exc.message}; "
                          f"stderr: {stderr.strip()[-200:]}", "payload_failed") from None
    findings = [f.to_dict() for f in assess(report, ctx.resource.type)]
    gaps = framework_gaps(ctx, report)
    data = report.to_dict()
    data.pop("raw", None)
    ort = report.framework("onnxruntime")
    ctx.record("startup.device_init", exit_code=exit_code, artifact=art.path,
               shell_only=not report.interpreter().present,
               wanted_provider=EXECUTION_PROVIDERS[ctx.resource.type], providers=ort.providers,
               findings=findings, framework_gaps=[{"category": c, "message": m} for c, m in gaps], report=data,
               **placement)
    devices = visible_devices(ctx.resource, report)
    if devices is not None:
        ctx.record("startup.devices", **devices)
        if devices["verdict"] == "over_allocated":
            raise LayerFailed(f"device isolation in {started.name}{where}: {devices['message']}",
                              "devices_over_allocated")
    if findings:
        first = findings[0]
        more = f" (+{len(findings) - 1} more findings)" if len(findings) > 1 else ""
        raise LayerFailed(f"device initialisation in {started.name}{where}: {first['message']}{more}",
                          first["failure"])
    if devices is not None and devices["verdict"] == "missing":
        raise LayerFailed(f"device initialisation in {started.name}{where}: {devices['message']}",
                          "device_missing")
    if gaps:
        raise LayerFailed(gaps[0][1], gaps[0][0])
    checked = inventory_check(ctx.resource, report, started.node)
    if checked is not None:
        ctx.record("startup.inventory", **checked)
    else:
        unchecked = sorted(set(ctx.resource.expect) & DEVICE_EXPECT) if ctx.resource.type != "cpu" else []
        if unchecked:
            ctx.write(NOT_PROVEN, NotProvenData(
                layer="startup", part=", ".join(f"expect.{k}" for k in unchecked),
                reason="the image has no vendor tool (nvidia-smi / npu-smi) to read the devices with, so these "
                       "expectations were not compared inside the workload"))
    differences = checked["differences"] if checked is not None else []
    if differences:
        raise LayerFailed(f"device inventory in {started.name}{where}: "
                          + "; ".join(d["message"] for d in differences), "device_inventory_mismatch")


DEVICE_NODES = {"nvidia": (re.compile(r"/dev/nvidia\d+"), "NVIDIA_VISIBLE_DEVICES"),
                "ascend": (re.compile(r"/dev/davinci\d+"), "ASCEND_VISIBLE_DEVICES")}
"""Per vendor: the per-device node a runtime injects (not the control nodes), and the variable the
device plugin sets to the devices it allocated."""


class DeviceVisibility(TypedDict):
    """The ``startup.devices`` record data (:func:`visible_devices`, every key written): the device ``resource``
    named, how many were ``allocated`` and are ``visible``, the per-device ``device_nodes`` seen, the visibility
    variable (``visibility_variable``) and its value as set (``visibility_value``; None: unset), the devices it
    lists (``listed``; None: all or none said), the ``verdict`` (``ok``, ``over_allocated``, ``missing``) and a
    one-line ``message``."""

    resource: str
    allocated: int
    visible: int
    device_nodes: list[str]
    visibility_variable: str
    visibility_value: str | None
    listed: int | None
    verdict: str
    message: str


class InventoryCheck(TypedDict):
    """The ``startup.inventory`` record data (:func:`inventory_check`, every key written): the ``node`` (None
    without nodes), the inventory's ``source``, the device ``resource``, the devices ``allocated`` and
    ``devices_seen``, the node's advertised ``node_capacity``/``node_allocatable`` of that resource (None where not
    listed), the ``expected`` fields compared and the ``differences`` found."""

    node: str | None
    source: str
    resource: str
    allocated: int
    devices_seen: int
    node_capacity: str | None
    node_allocatable: str | None
    expected: ExpectationFields
    differences: list[DifferenceDict]


def visible_devices(resource: Resource, report: PayloadReport) -> DeviceVisibility | None:
    """The devices the container sees against those allocated to it: the ``startup.devices`` record
    data, or None for a resource whose vendor has no per-device nodes (CPU).

    Allocated is the request of the resource's first device resource (0 when it requests none).
    Visible is the larger of the per-device nodes (``/dev/nvidia<N>``, ``/dev/davinci<N>``) and the
    devices the visibility variable lists. ``verdict``: ``over_allocated`` when more are visible than
    allocated (the device plugin or runtime handed devices the scheduler never accounted for: another
    workload's, an isolation breach), ``missing`` when fewer device nodes than allocated, else ``ok``;
    ``message`` says it in one line.
    """
    vendor = resource.probe_vendor
    if vendor not in DEVICE_NODES:
        return None
    pattern, variable = DEVICE_NODES[vendor]
    names = resource.device_resources
    what = names[0] if names else f"{vendor} device"
    allocated = int(quantity_or_none(resource.requests[names[0]]) or 0) if names else 0
    nodes = sorted(n for n in report.device_nodes if pattern.fullmatch(n))
    env = report.env.get(variable)
    listed = listed_devices(env)
    visible = max(len(nodes), listed or 0)
    seen = f"{', '.join(nodes) or 'no device node'}; {variable}={env!r}"
    verdict, message = "ok", f"{visible} {what} visible ({seen}), {allocated} allocated"
    if visible > allocated:
        verdict = "over_allocated"
        message = (f"the container sees {visible} {what} ({seen}) but {allocated} "
                   f"{'was' if allocated == 1 else 'were'} allocated: the device plugin or runtime handed it "
                   "devices the scheduler did not account for")
    elif len(nodes) < allocated:
        verdict = "missing"
        message = f"{allocated} {what} allocated but {len(nodes)} device node(s) in the container ({seen})"
    return {"resource": what, "allocated": allocated, "visible": visible, "device_nodes": nodes,
            "visibility_variable": variable, "visibility_value": env, "listed": listed, "verdict": verdict,
            "message": message}


def inventory_check(resource: Resource, report: PayloadReport, node: StartedOn | None) -> InventoryCheck | None:
    """Compare the device inventory the payload read inside the workload (``nvidia-smi``/``npu-smi``)
    with what was allocated and the matrix expects; the ``startup.inventory`` record data
    (``differences``: ``[{"category", "message", "expected", "actual", "device"}]``, see
    :mod:`pytest_hetero.probes.compare`), or None when there is nothing to compare (CPU resource,
    image without the vendor tool: the payload findings already say what is missing).

    Expected inside: as many devices (MIG: matching instances) as the request of the resource's
    first device resource, and ``expect``'s product/memory/driver/CUDA/CANN. ``node`` (None without nodes) gives
    the advertised capacity/allocatable (None where not listed), recorded beside it.
    """
    from pytest_hetero.probes.compare import compare

    vendor = resource.probe_vendor
    names = resource.device_resources
    inventory = tool_inventory(report, vendor) if vendor != "cpu" and names else None
    if inventory is None:
        return None
    facts = node.facts if node else None
    exp = expectation(resource)
    exp["resource"] = names[0]
    exp["count"] = int(quantity_or_none(resource.requests[names[0]]) or 0)
    return {
        "node": node.name if node else None,
        "source": inventory.source,
        "resource": names[0],
        "allocated": exp["count"],
        "devices_seen": len(inventory.devices),
        "node_capacity": facts["capacity"].get(names[0]) if facts else None,
        "node_allocatable": facts["allocatable"].get(names[0]) if facts else None,
        "expected": exp,
        "differences": [d.to_dict() for d in compare(inventory, exp)],
    }


def verify_digest(ctx: LayerContext, what: str, name: str, version: str, path: Path, expected: str) -> None:
    """Check ``path`` exists with sha256 ``expected``; record it; LayerFailed (owner algorithm) otherwise.

    ``what`` is ``model`` or ``dataset``; the failure names both digests.
    """
    if not path.is_file():
        ctx.record("artifact.digest", what=what, name=name, version=version, path=str(path),
                   expected=expected, observed=None)
        raise LayerFailed(f"{what} {name}@{version} not found at {path}", "file_missing")
    observed = file_sha256(path)
    ctx.record("artifact.digest", what=what, name=name, version=version, path=str(path),
               expected=expected, observed=observed, size=path.stat().st_size)
    if observed != expected:
        raise LayerFailed(f"{what} {name}@{version} sha256 mismatch: matrix declares {expected}, "
                          f"file {path} has {observed}", "digest_mismatch")


def verify_inputs(ctx: LayerContext) -> None:
    """Verify the model and the dataset of this model item (declared sha256 vs file), model first.

    Raises LayerFailed (``file_missing`` / ``digest_mismatch``, owner algorithm: the files and their
    declared digests are the model's and data's owners') naming both digests. A served model without
    a declared file (empty sha256) has no file to verify; its service proves its version at startup
    instead (:func:`pytest_hetero.layers.serving.startup`).
    """
    model, dataset = ctx.model, ctx.dataset
    if model.sha256:
        verify_digest(ctx, "model", model.name, model.version, model.path, model.sha256)
    verify_digest(ctx, "dataset", dataset.name, dataset.version, dataset.path, dataset.sha256)
