"""Discovery layer: nodes/devices are visible, healthy, labelled, and expose the claimed resource.

The engine says what it sees (:meth:`~pytest_hetero.backends.protocol.Backend.inventory`); every
rule that turns that into a verdict lives here, once for every engine:

* a **host** (local backend, a local Docker engine's host): the vendor probe's global errors
  (``driver_missing``), critical devices (``device_unhealthy``), and the probe against ``expect``
  (``expectation_mismatch``; :mod:`pytest_hetero.probes.compare`, CPU: usable CPUs and memory);
* a **container engine**: a GPU runtime for NVIDIA resources (``runtime_missing``), Ascend device
  nodes (``device_missing``), a request the engine can express (``bad_request``) within its CPUs
  and memory (``insufficient_capacity``);
* a **node pool** (Kubernetes): no node matches (``no_nodes``); per node ``node_not_ready``,
  ``resource_not_advertised``, ``allocatable_below_capacity`` (devices a plugin reports Unhealthy),
  ``label_contract_broken`` (vendor labels: NVIDIA GFD ``nvidia.com/gpu.product``, Ascend
  ``accelerator``; ``expect.product``; ``expect.labels``), ``expectation_mismatch`` (``expect.devices``
  ≠ capacity), and the node's health beyond Ready (:func:`node_health_differences`):
  ``node_unschedulable`` (cordoned), ``untolerated_taint`` (a NoSchedule/NoExecute taint the
  resource's tolerations do not tolerate), ``node_condition`` (a problem condition set ``True``:
  the kubelet's pressure conditions, node-problem-detector's, a device health agent's such as
  ``GPUMissing`` / ``XIDErrors``; ``spec.target.node_problem_conditions`` narrows the judged types).

Every failure here is owned by infrastructure, except an untolerated taint that is not the node
lifecycle's own (``node.kubernetes.io/*``): the pool's taint policy and the resource's tolerations
disagree, which is the platform's to settle. The snapshot of what was seen is recorded before
judging, with every named difference and its owner.
"""

from __future__ import annotations

import re
from typing import Any

from pytest_hetero.backends.protocol import EngineView, HostView, NodePool
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerFailed
from pytest_hetero.matrix.model import Resource
from pytest_hetero.matrix.quantity import quantity_or_none
from pytest_hetero.matrix.tolerations import BLOCKING_EFFECTS, taint_text, tolerates

VENDOR_LABELS: dict[str, tuple[str, ...]] = {
    "nvidia": ("nvidia.com/gpu.product",),
    "ascend": ("accelerator",),
    "huawei": ("accelerator",),
}
"""Labels a device node of the vendor must carry (NVIDIA GPU Feature Discovery; Ascend device plugin)."""


def check(ctx: LayerContext) -> None:
    """Ask the engine what it sees of ``ctx.resource``, record it, and judge it.

    Raises LayerFailed naming every difference: a container engine's gaps and its host's failure
    together (category of the first, owner infrastructure), else the pool's first difference (its
    category and owner).
    """
    seen = ctx.backend.inventory(ctx)
    owner = "infrastructure"
    problems: list[tuple[str, str]] = []
    if seen.engine is not None:
        problems += _judge_engine(ctx, seen.engine)
    if seen.host is not None:
        problems += _judge_host(ctx, seen.host)
    elif seen.host_not_probed:
        ctx.record("discovery.host_probe", skipped=True, reason=seen.host_not_probed)
    if seen.pool is not None:
        pool_problems = _judge_pool(ctx, seen.pool)
        if pool_problems and not problems:
            owner = pool_problems[0][2]
        problems += [(code, message) for code, message, _ in pool_problems]
    if problems:
        raise LayerFailed("; ".join(message for _, message in problems), problems[0][0], owner)


def expectation(resource: Resource) -> dict[str, Any]:
    """A matrix resource's ``expect`` as the probe comparator's Expectation mapping
    (:class:`pytest_hetero.probes.compare.Expectation`): ``resource``, ``count``, ``product``,
    ``min_memory_mib``, ``driver_version``, ``cuda_version``, ``cann_version``, ``mig_profiles``."""
    exp = resource.expect
    names = resource.device_resources
    out: dict[str, Any] = {"resource": names[0] if names else resource.type}
    for ours, theirs in (("devices", "count"), ("product", "product"), ("min_memory_mib", "min_memory_mib"),
                         ("driver", "driver_version"), ("cuda", "cuda_version"), ("cann", "cann_version")):
        if ours in exp:
            out[theirs] = exp[ours]
    if "mig_profile" in exp:
        out["mig_profiles"] = (exp["mig_profile"],)
    return out


def host_differences(resource: Resource, view: HostView) -> list[dict[str, Any]]:
    """Named differences between a host probe and the resource's ``expect``: the comparator's for
    device vendors, usable CPUs (``min_cpus``) and memory (``min_memory_total_mib``, MiB) for CPU."""
    if view.vendor != "cpu":
        from pytest_hetero.probes.compare import compare

        return [d.to_dict() for d in compare(view.devices, expectation(resource))]
    expect, extra, out = resource.expect, view.devices.extra or {}, []
    cpus = extra.get("cpu_limit_cores") or extra.get("logical_cpus")
    if "min_cpus" in expect and (cpus is None or float(cpus) < float(expect["min_cpus"])):
        out.append({"field": "cpus", "expected": f">= {expect['min_cpus']}", "observed": cpus,
                    "message": f"{cpus} usable CPUs, matrix expects at least {expect['min_cpus']}"})
    mem = extra.get("memory_effective_mib") or extra.get("memory_total_mib")
    if "min_memory_total_mib" in expect and (mem is None or int(mem) < int(expect["min_memory_total_mib"])):
        out.append({"field": "memory", "expected": f">= {expect['min_memory_total_mib']} MiB", "observed": mem,
                    "message": f"{mem} MiB usable memory, matrix expects {expect['min_memory_total_mib']} MiB"})
    return out


def _judge_host(ctx: LayerContext, view: HostView) -> list[tuple[str, str]]:
    """Record ``discovery.snapshot`` of a host probe (raw output as artifact); its failure, if any."""
    resource, inventory = ctx.resource, view.devices
    raw_path = ctx.artifact(f"probe-{view.vendor}.txt", inventory.raw).path if inventory.raw else None
    differences = host_differences(resource, view)
    ctx.record("discovery.snapshot", vendor=view.vendor, source=inventory.source,
               observed=inventory.to_dict(include_raw=False), expected=dict(resource.expect),
               advertised=None, differences=differences, raw_artifact=raw_path)
    if inventory.global_errors and not inventory.devices:
        return [("driver_missing", f"{view.vendor} discovery on this host: {'; '.join(inventory.global_errors)}")]
    sick = [d for d in inventory.devices if d.health == "critical"]
    if sick:
        return [("device_unhealthy", "unhealthy devices: " + "; ".join(
            f"{d.label}: {', '.join(d.errors) or d.health_raw}" for d in sick))]
    if differences:
        return [("expectation_mismatch", "; ".join(str(d.get("message", d)) for d in differences))]
    return []


def engine_gaps(resource: Resource, view: EngineView) -> list[tuple[str, str]]:
    """Why a container engine cannot satisfy ``resource`` at all: ``[(category, message)]`` (empty: it can)."""
    gaps: list[tuple[str, str]] = []
    vendor = resource.probe_vendor
    if vendor == "nvidia" and not view.gpu_runtime:
        gaps.append(("runtime_missing", (f"no NVIDIA runtime on the engine (runtimes: {', '.join(view.runtimes)}; "
                     "no nvidia-container-runtime-hook): GPU device requests cannot be satisfied; install the "
                     "NVIDIA Container Toolkit")))
    nodes = view.device_nodes
    if vendor == "ascend" and nodes is not None and not any("davinci" in n and n[-1].isdecimal() for n in nodes):
        gaps.append(("device_missing", "no /dev/davinci<N> device nodes on the engine host"))
    if view.request_error is not None:
        return [*gaps, ("bad_request", view.request_error)]
    merged = {**resource.requests, **resource.limits}
    if view.requested_cpus and view.cpus and view.requested_cpus > view.cpus:
        gaps.append(("insufficient_capacity", f"cpu {merged.get('cpu')} requested, the engine has "
                     f"{view.cpus:g} CPUs"))
    if view.requested_memory_bytes and view.memory_bytes and view.requested_memory_bytes > view.memory_bytes:
        gaps.append(("insufficient_capacity", (f"memory {merged.get('memory')} requested, the engine has "
                     f"{view.memory_bytes // 2**20} MiB")))
    return gaps


def _judge_engine(ctx: LayerContext, view: EngineView) -> list[tuple[str, str]]:
    """Record ``discovery.engine`` and ``discovery.engine_can_satisfy``; the engine's gaps."""
    ctx.record("discovery.engine", **view.facts)
    gaps = engine_gaps(ctx.resource, view)
    ctx.record("discovery.engine_can_satisfy", resource=ctx.resource.name, ok=not gaps,
               gaps=[{"category": c, "message": m} for c, m in gaps])
    return gaps


def node_differences(resource: Resource, facts: dict[str, Any]) -> list[dict[str, Any]]:
    """Named differences of one node (facts as :class:`~pytest_hetero.backends.protocol.NodePool`
    holds them) against the resource: each ``{"node", "code", "field", "expected", "observed", "message"}``."""
    node, out = facts["name"], []

    def add(code: str, field: str, expected: Any, observed: Any, message: str) -> None:
        out.append({"node": node, "code": code, "field": field, "expected": expected, "observed": observed,
                    "message": f"node {node}: {message}"})

    if facts["ready"] != "True":
        add("node_not_ready", "Ready", "True", facts["ready"],
            f"not Ready (Ready={facts['ready']}, {facts['ready_reason'] or 'no reason'}"
            f"{': ' + facts['ready_message'] if facts['ready_message'] else ''})")
    names = resource.device_resources
    for name in names:
        cap, alloc = quantity_or_none(facts["capacity"][name]), quantity_or_none(facts["allocatable"][name])
        if not cap:
            add("resource_not_advertised", f"capacity[{name}]", "> 0", facts["capacity"][name],
                f"does not advertise {name} (capacity {facts['capacity'][name] or 'absent'})")
            continue
        if alloc is None or alloc < cap:
            add("allocatable_below_capacity", f"allocatable[{name}]", facts["capacity"][name],
                facts["allocatable"][name],
                f"allocatable {name} {facts['allocatable'][name]} < capacity {facts['capacity'][name]}")
        devices = resource.expect.get("devices")
        if devices is not None and name == names[0] and cap != float(devices):
            add("expectation_mismatch", f"capacity[{name}]", devices, facts["capacity"][name],
                f"capacity {name} {facts['capacity'][name]}, matrix expects {devices}")
    labels = facts["labels"]
    for key in VENDOR_LABELS.get(resource.vendor.lower(), ()) if resource.type != "cpu" else ():
        if key not in labels:
            add("label_contract_broken", f"labels[{key}]", "present", None, f"label {key} missing")
        elif key.endswith("product") and "product" in resource.expect and not re.search(
                str(resource.expect["product"]), labels[key]):
            add("label_contract_broken", f"labels[{key}]", resource.expect["product"], labels[key],
                f"{key}={labels[key]} does not match {resource.expect['product']!r}")
    for key, value in (resource.expect.get("labels") or {}).items():
        if labels.get(key) != value:
            add("label_contract_broken", f"labels[{key}]", value, labels.get(key),
                f"label {key}={labels.get(key)!r}, matrix expects {value!r}")
    return out


PROBLEM_CONDITIONS_KEY = "node_problem_conditions"
"""``spec.target`` key: the node condition types judged as problems when ``True`` (default: every
condition type but ``Ready``)."""
LIFECYCLE_TAINTS = "node.kubernetes.io/"
"""Prefix of the taints Kubernetes' node lifecycle sets itself (not-ready, unreachable, unschedulable,
pressure): infrastructure's, like the conditions behind them."""


def judged_conditions(target: dict[str, Any]) -> tuple[str, ...] | None:
    """The condition types ``spec.target.node_problem_conditions`` names (None: every type but Ready).

    Raises LayerBroken ``configuration`` when the key is not a list of condition type names."""
    value = target.get(PROBLEM_CONDITIONS_KEY)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise LayerBroken(f"spec.target.{PROBLEM_CONDITIONS_KEY} must be a list of node condition types "
                          f"(e.g. [GPUMissing, XIDErrors]), not {value!r}", "configuration")
    return tuple(value)


def node_health_differences(resource: Resource, facts: dict[str, Any],
                            judged: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Named differences of one node's health beyond Ready (facts as ``NodePool.nodes`` holds them):
    cordoned, NoSchedule/NoExecute taints ``resource`` does not tolerate, problem conditions set True
    (``judged``: the condition types to judge, None: all but Ready). Each ``{"node", "code", "field",
    "expected", "observed", "message", "owner"}``; a lifecycle taint standing for a cordon or a
    NotReady node already named is not named twice."""
    node, out = facts["name"], []
    if facts.get("unschedulable"):
        out.append({"node": node, "code": "node_unschedulable", "field": "spec.unschedulable", "expected": False,
                    "observed": True, "owner": "infrastructure",
                    "message": f"node {node}: cordoned (spec.unschedulable: true): no new pod lands there"})
    said = {"node.kubernetes.io/unschedulable"} if facts.get("unschedulable") else set()
    if facts.get("ready") != "True":
        said |= {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
    for taint in facts.get("taints") or []:
        if (taint.get("effect") not in BLOCKING_EFFECTS or taint.get("key") in said
                or any(tolerates(t, taint) for t in resource.tolerations)):
            continue
        owner = "infrastructure" if str(taint.get("key", "")).startswith(LIFECYCLE_TAINTS) else "platform"
        out.append({"node": node, "code": "untolerated_taint", "field": f"taints[{taint.get('key')}]",
                    "expected": "tolerated", "observed": taint_text(taint), "owner": owner,
                    "message": f"node {node}: taint {taint_text(taint)} is not tolerated by resource "
                               f"{resource.name} (add a toleration, or pick another pool)"})
    for cond in facts.get("conditions") or []:
        kind = str(cond.get("type", ""))
        if cond.get("status") != "True" or (judged is not None and kind not in judged):
            continue
        why = ": ".join(str(cond[k]) for k in ("reason", "message") if cond.get(k))
        out.append({"node": node, "code": "node_condition", "field": f"conditions[{kind}]", "expected": "False",
                    "observed": "True", "owner": "infrastructure",
                    "message": f"node {node}: condition {kind}=True" + (f" ({why})" if why else "")})
    return out


def _judge_pool(ctx: LayerContext, pool: NodePool) -> list[tuple[str, str, str]]:
    """Record ``discovery.snapshot`` of a node pool; ``[]``, ``no_nodes``, or the first difference's
    code and owner with every difference's message: ``[(code, message, owner)]``."""
    resource = ctx.resource
    judged = judged_conditions(ctx.matrix.target)
    found = [{"owner": "infrastructure", **d} for f in pool.nodes
             for d in node_differences(resource, f) + node_health_differences(resource, f, judged)]
    ctx.record("discovery.snapshot", **pool.snapshot, expected=dict(resource.expect), nodes=pool.nodes,
               differences=found, simulated_nodes=[f["name"] for f in pool.nodes if f["simulated"]],
               judged_conditions=list(judged) if judged is not None else "all but Ready")
    if not pool.nodes:
        how = f"label selector {pool.selector}" if pool.selector else f"capacity of {', '.join(pool.wanted)}"
        return [("no_nodes", f"no node matches {how}", "infrastructure")]
    if found:
        return [(found[0]["code"], "; ".join(d["message"] for d in found), found[0]["owner"])]
    return []
