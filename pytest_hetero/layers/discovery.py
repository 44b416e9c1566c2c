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

Which ``expect`` key applies to which resource type and engine is :data:`EXPECT_RULES`: a key an
engine cannot judge for the type is rejected before anything runs (:func:`expect_problems`, used by
collection and ``hetero lint``). A CPU host is judged on usable CPUs and memory, its CPU model and what
the resource requests (:func:`cpu_differences`). Resources of one type that resolve to the same host
or nodes are recorded as one pool (``discovery.shared_pool``, not proven separate).

Every failure here is owned by infrastructure, except an untolerated taint that is not the node
lifecycle's own (``node.kubernetes.io/*``): the pool's taint policy and the resource's tolerations
disagree, which is the platform's to settle. The snapshot of what was seen is recorded before
judging, with every named difference and its owner.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, TypedDict

from pytest_hetero.backends.protocol import EngineView, HostView, NodeFacts, NodePool
from pytest_hetero.errors import Location, MatrixError
from pytest_hetero.evidence.records import (
    ENGINE_CAN_SATISFY,
    HOST_PROBE,
    NODE_SCOPE,
    NOT_PROVEN,
    SHARED_POOL,
    EngineCanSatisfyData,
    HostProbeData,
    NodeScopeData,
    NotProvenData,
    SharedPoolData,
)
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerFailed
from pytest_hetero.matrix.document import TargetDoc
from pytest_hetero.matrix.model import Matrix, Resource
from pytest_hetero.matrix.quantity import quantity_or_none
from pytest_hetero.matrix.tolerations import BLOCKING_EFFECTS, taint_text, tolerates
from pytest_hetero.status.compute import is_status_key

if TYPE_CHECKING:
    from pytest_hetero.probes.compare import DifferenceDict, ExpectationFields

VENDOR_LABELS: dict[str, tuple[str, ...]] = {
    "nvidia": ("nvidia.com/gpu.product",),
    "ascend": ("accelerator",),
    "huawei": ("accelerator",),
}
"""Labels a device node of the vendor must carry (NVIDIA GPU Feature Discovery; Ascend device plugin)."""


def check(ctx: LayerContext) -> None:
    """Ask the engine what it sees of ``ctx.resource``, record it, and judge it.

    Raises LayerFailed naming every difference (category of the first); differences of several
    categories are each kept as a cause with its own owner (the failure table's).
    """
    seen = ctx.backend.inventory(ctx)
    problems: list[tuple[str, str]] = []
    if seen.engine is not None:
        problems += _judge_engine(ctx, seen.engine)
    if seen.host is not None:
        problems += _judge_host(ctx, seen.host)
    elif seen.host_not_probed:
        ctx.write(HOST_PROBE, HostProbeData(skipped=True, reason=seen.host_not_probed))
    found: list[NodeDifference] = []
    if seen.pool is not None:
        pooled, found = _judge_pool(ctx, seen.pool)
        problems += pooled
    record_shared_pool(ctx, seen.pool)
    if seen.pool is None:
        record_unread_labels(ctx)
    if problems and seen.pool is not None and len(problems) == len(found):
        _node_scoped(ctx, seen.pool, found)
    if problems:
        raise LayerFailed("; ".join(message for _, message in problems), problems[0][0], causes=_causes(problems))


def _causes(problems: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """``(category, messages joined)`` per category of ``problems`` (``(category, message)``, in order), when there is
    more than one category (each cause keeps its own owner); () for one."""
    by_code: dict[str, list[str]] = {}
    for code, message in problems:
        by_code.setdefault(code, []).append(message)
    return tuple((c, "; ".join(m)) for c, m in by_code.items()) if len(by_code) > 1 else ()


class CpuDifference(TypedDict):
    """One difference of a CPU host against its resource (:func:`cpu_differences`)."""

    field: str
    expected: str
    observed: str | int | float | None
    message: str


class NodeDifference(TypedDict):
    """One difference of a node against its resource (:func:`node_differences`,
    :func:`node_health_differences`): ``code`` is the failure category, ``field`` what was read."""

    node: str
    code: str
    field: str
    expected: str | int | float | bool | None
    observed: str | int | float | bool | None
    message: str


def expectation(resource: Resource) -> ExpectationFields:
    """A matrix resource's ``expect`` as the probe comparator's Expectation mapping
    (:class:`pytest_hetero.probes.compare.Expectation`): ``resource``, ``count``, ``product``,
    ``min_memory_mib``, ``driver_version``, ``cuda_version``, ``cann_version``, ``mig_profiles``."""
    exp = resource.expect
    names = resource.device_resources
    out: ExpectationFields = {"resource": names[0] if names else resource.type}
    if "devices" in exp:
        out["count"] = exp["devices"]
    if "product" in exp:
        out["product"] = exp["product"]
    if "min_memory_mib" in exp:
        out["min_memory_mib"] = exp["min_memory_mib"]
    if "driver" in exp:
        out["driver_version"] = exp["driver"]
    if "cuda" in exp:
        out["cuda_version"] = exp["cuda"]
    if "cann" in exp:
        out["cann_version"] = exp["cann"]
    if "mig_profile" in exp:
        out["mig_profiles"] = (exp["mig_profile"],)
    return out


EXPECT_RULES: dict[str, tuple[tuple[str, ...], str, dict[str, str]]] = {
    "devices": (("gpu", "npu"), "counts accelerator devices, and a CPU resource has none (use min_cpus)", {}),
    "product": (("gpu", "npu", "cpu"), "", {
        "kubernetes": "CPU model: no standard node label names it on kubernetes (use labels: {…} for a label "
                      "your nodes carry)"}),
    "min_memory_mib": (("gpu", "npu", "cpu"), "", {}),
    "min_memory_total_mib": (("cpu",), "is the usable memory of a CPU resource (use min_memory_mib for device "
                                       "memory)", {}),
    "min_cpus": (("cpu",), "applies to CPU resources (a GPU/NPU resource asks for CPUs in requests: {cpu: N})", {}),
    "driver": (("gpu", "npu"), "compares an accelerator driver, and a CPU resource has none", {}),
    "cuda": (("gpu",), "is the CUDA version of NVIDIA GPUs", {}),
    "cann": (("npu",), "is the CANN version of Ascend NPUs", {}),
    "mig_profile": (("gpu",), "names NVIDIA MIG partitions", {}),
    "labels": (("gpu", "npu", "cpu"), "", {
        "local": "node labels exist on kubernetes nodes; the local backend validates this host, which has none",
        "docker": "node labels exist on kubernetes nodes; a Docker engine has none the gate could check"}),
}
"""``expect`` key → (resource types it applies to, why not for the other types, {backend: why that engine
cannot check it}). Where a key applies, discovery judges it on every engine: a host probe (local, a local
Docker engine), an engine's capacity (Docker), node facts (Kubernetes); device memory, driver, CUDA, CANN
and MIG of an engine whose host this process cannot probe are judged inside the workload at startup."""


def expect_problems(matrix: Matrix, backend: str) -> list[MatrixError]:
    """One MatrixError per ``expect`` key that ``backend`` cannot check for its resource's type (see
    :data:`EXPECT_RULES`), naming the matrix file, the resource's line, the field and why."""
    out = []
    for i, resource in enumerate(matrix.resources):
        for key in resource.expect:
            types, not_type, not_backend = EXPECT_RULES.get(key, ((), "is unknown", {}))
            if resource.type not in types:
                why = f"expect.{key} {not_type}; resource '{resource.name}' is a {resource.type}"
            elif backend in not_backend and (key != "product" or resource.type == "cpu"):
                why = f"expect.{key} cannot be checked on the {backend} backend: {not_backend[backend]}"
            else:
                continue
            out.append(MatrixError(why, Location(str(matrix.path), resource.line, 0,
                                                 f"spec.resources[{i}:{resource.name}].expect.{key}"),
                                   f"remove expect.{key} from this resource, or move the resource to a backend "
                                   "that checks it"))
    return out


LOCAL_ONLY_REFERENCES = ("python:current", "python:/", "venv:")
"""Image reference prefixes only the local engine takes (a Python environment, not an OCI image;
``python:3.11`` is Docker Hub's python image and stays valid)."""
OCI_BACKENDS = ("docker", "kubernetes")
"""Built-in backends whose images are OCI image references."""


def image_problems(matrix: Matrix, backend: str) -> list[MatrixError]:
    """One MatrixError per image whose reference ``backend`` cannot run: a local-only Python environment
    (:data:`LOCAL_ONLY_REFERENCES`: ``python:current``, ``python:/path``, ``venv:PATH``) on an OCI backend
    (:data:`OCI_BACKENDS`), naming the matrix file, the image's line, the field and the fix. Other backends:
    none."""
    if backend not in OCI_BACKENDS:
        return []
    out = []
    for i, image in enumerate(matrix.images):
        if image.reference.startswith(LOCAL_ONLY_REFERENCES):
            out.append(MatrixError(
                f"image '{image.name}' reference '{image.reference}' is a Python environment of the local backend; "
                f"the {backend} backend runs OCI images",
                Location(str(matrix.path), image.line, 0, f"spec.images[{i}:{image.name}].reference"),
                "give an OCI image reference (e.g. pytest-hetero/py311-onnx:1, or docker.io/library/python:<tag> "
                "for Docker Hub's python), or run this matrix on the local backend (spec.target.backend: local, "
                "without --hetero-backend)"))
    return out


def requested(resource: Resource, name: str) -> float | None:
    """The resource's limit (else request) of ``name`` (``cpu`` in cores, ``memory`` in bytes); None if absent."""
    merged = {**resource.requests, **resource.limits}
    return quantity_or_none(merged.get(name))


def host_differences(resource: Resource, view: HostView) -> list[DifferenceDict] | list[CpuDifference]:
    """Named differences between a host probe and the resource's ``expect`` (and what it requests):
    the comparator's for device vendors, :func:`cpu_differences` for CPU."""
    if view.vendor != "cpu":
        from pytest_hetero.probes.compare import compare

        return [d.to_dict() for d in compare(view.devices, expectation(resource))]
    return cpu_differences(resource, view)


def cpu_differences(resource: Resource, view: HostView) -> list[CpuDifference]:
    """A CPU host against the resource: usable CPUs (cgroup limit, else logical CPUs) against
    ``min_cpus`` and the requested cpu; usable memory (MiB: cgroup limit, else total) against
    ``min_memory_mib`` / ``min_memory_total_mib`` and the requested memory; the CPU model against
    ``product`` (a regular expression). Each difference ``{"field", "expected", "observed", "message"}``."""
    expect, extra = resource.expect, view.devices.extra or {}
    out: list[CpuDifference] = []
    cpus = extra.get("cpu_limit_cores") or extra.get("logical_cpus")
    mem = extra.get("memory_effective_mib") or extra.get("memory_total_mib")
    model = str(extra.get("model") or next((d.name for d in view.devices.devices if d.name), "") or "")

    def add(field: str, expected: str, observed: Any, message: str) -> None:
        out.append({"field": field, "expected": expected, "observed": observed, "message": message})

    if "min_cpus" in expect and (cpus is None or float(cpus) < float(expect["min_cpus"])):
        add("cpus", f">= {expect['min_cpus']}", cpus,
            f"{cpus} usable CPUs, matrix expects at least {expect['min_cpus']}")
    for key in ("min_memory_mib", "min_memory_total_mib"):
        if key in expect and (mem is None or int(mem) < int(expect[key])):
            add("memory", f">= {expect[key]} MiB", mem, f"{mem} MiB usable memory, matrix expects {expect[key]} MiB")
    if "product" in expect and not re.search(str(expect["product"]), model):
        add("product", expect["product"], model or None,
            f"CPU model {model or '(unknown)'!r} does not match {expect['product']!r}")
    cores, memory = requested(resource, "cpu"), requested(resource, "memory")
    if cores is not None and cpus is not None and cores > float(cpus):
        add("requests.cpu", f"<= {cpus}", cores, f"requests cpu {cores:g}, this host has {cpus} usable CPUs")
    if memory is not None and mem is not None and memory > int(mem) * 2**20:
        add("requests.memory", f"<= {mem} MiB", round(memory / 2**20),
            f"requests memory {round(memory / 2**20)} MiB, this host has {mem} MiB usable")
    return out


def record_unread_labels(ctx: LayerContext) -> None:
    """On an engine without nodes (local host, Docker host), record the resource's ``node_selector`` and
    ``tolerations`` as not proven (``scope.not_proven`` part ``node labels``): they choose Kubernetes nodes
    by their labels and taints, and a host has neither to check, so a pass of discovery here says nothing of
    them. Nothing is recorded when the resource declares neither."""
    res = ctx.resource
    if not res.node_selector and not res.tolerations:
        return
    declared = ([f"node_selector {', '.join(f'{k}={v}' for k, v in sorted(res.node_selector.items()))}"]
                if res.node_selector else []) + ([f"{len(res.tolerations)} toleration(s)"] if res.tolerations else [])
    ctx.record("scope.not_proven", layer="discovery", part="node labels",
               reason=f"the {ctx.backend.name} engine has no nodes: the resource's {' and '.join(declared)} "
                      "(how a Kubernetes pool is chosen) is not checked on this host",
               node_selector=dict(res.node_selector), tolerations=len(res.tolerations))


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
        return [("expectation_mismatch", "; ".join(d["message"] for d in differences))]
    return []


_POOLS = "discovery.pools"
"""Key in the run's handoff mapping: resource name → its pool, as JSON (nodes seen by this process)."""


def record_shared_pool(ctx: LayerContext, pool: NodePool | None) -> None:
    """Say so when this resource resolves to the same place as another resource of its type: on a host
    engine (local, Docker) every resource is the engine's one host; on a node pool, another resource
    this process saw with the same nodes. Records ``discovery.shared_pool`` and a ``scope.not_proven``
    entry (they are one pool, not two); not a failure."""
    resource = ctx.resource
    same_type = [r.name for r in ctx.matrix.resources if r.type == resource.type and r.name != resource.name]
    if not same_type:
        return
    if pool is None:
        where = f"host {ctx.backend.fingerprint().get('identity') or 'of this engine'}"
        shared = same_type
    else:
        nodes = sorted(f["name"] for f in pool.nodes)
        seen: dict[str, list[str]] = json.loads(ctx.handoff.get(_POOLS, b"{}"))
        seen[f"{ctx.matrix.name}/{resource.name}"] = nodes
        ctx.handoff[_POOLS] = json.dumps(seen).encode()
        shared = [name for name in same_type if nodes and seen.get(f"{ctx.matrix.name}/{name}") == nodes]
        where = f"nodes {', '.join(nodes)}"
    if not shared:
        return
    ctx.write(SHARED_POOL, SharedPoolData(resources=[resource.name, *shared], where=where))
    ctx.write(NOT_PROVEN, NotProvenData(layer="discovery", part="separate pools",
                                        reason=f"{', '.join([resource.name, *shared])} resolve to the same {where}: "
                                               f"one pool, not {len(shared) + 1}"))


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
    expect = resource.expect if resource.type == "cpu" else {}
    if "min_cpus" in expect and view.cpus is not None and view.cpus < float(expect["min_cpus"]):
        gaps.append(("expectation_mismatch", f"the engine has {view.cpus:g} CPUs, matrix expects at least "
                     f"{expect['min_cpus']}"))
    for key in ("min_memory_mib", "min_memory_total_mib"):
        if key in expect and view.memory_bytes is not None and view.memory_bytes < int(expect[key]) * 2**20:
            gaps.append(("expectation_mismatch", f"the engine has {view.memory_bytes // 2**20} MiB memory, "
                         f"matrix expects {expect[key]} MiB"))
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
    ctx.write(ENGINE_CAN_SATISFY, EngineCanSatisfyData(resource=ctx.resource.name, ok=not gaps,
                                                       gaps=[{"category": c, "message": m} for c, m in gaps]))
    return gaps


def node_differences(resource: Resource, facts: NodeFacts) -> list[NodeDifference]:
    """Named differences of one node (facts as :class:`~pytest_hetero.backends.protocol.NodePool`
    holds them) against the resource: each ``{"node", "code", "field", "expected", "observed", "message"}``."""
    node = facts["name"]
    out: list[NodeDifference] = []

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
    _node_cpu(resource, facts, add)
    labels = facts["labels"]
    for key in VENDOR_LABELS.get(resource.vendor.lower(), ()) if resource.type != "cpu" else ():
        if key not in labels:
            add("label_contract_broken", f"labels[{key}]", "present", None, f"label {key} missing")
        elif key.endswith("product") and "product" in resource.expect and not re.search(
                str(resource.expect["product"]), labels[key]):
            add("label_contract_broken", f"labels[{key}]", resource.expect["product"], labels[key],
                f"{key}={labels[key]} does not match {resource.expect['product']!r}")
    for key, value in (resource.expect.get("labels") or {}).items():
        found = labels.get(key)  # None: the node lacks the label
        if found != value:
            add("label_contract_broken", f"labels[{key}]", value, found,
                f"label {key}={found!r}, matrix expects {value!r}")
    return out


def _node_cpu(resource: Resource, facts: NodeFacts, add: Any) -> None:
    """A CPU resource's ``min_cpus`` and ``min_memory_mib``/``min_memory_total_mib`` against the node's
    allocatable cpu and memory."""
    if resource.type != "cpu":
        return
    exp = resource.expect
    for wanted, name, unit in ((exp.get("min_cpus"), "cpu", 1.0), (exp.get("min_memory_mib"), "memory", 2.0**20),
                               (exp.get("min_memory_total_mib"), "memory", 2.0**20)):
        if wanted is None:  # the matrix does not ask for it
            continue
        raw = facts["allocatable"].get(name)  # the requested resource names only: cpu/memory may be absent
        have = quantity_or_none(raw)
        if have is None or have < float(wanted) * unit:
            shown = f"{wanted}{' MiB' if unit > 1 else ''}"
            add("expectation_mismatch", f"allocatable[{name}]", f">= {shown}", raw,
                f"allocatable {name} {raw or 'absent'}, matrix expects at least {shown}")


PROBLEM_CONDITIONS_KEY = "node_problem_conditions"
"""``spec.target`` key: the node condition types judged as problems when ``True`` (default: every
condition type but ``Ready``)."""
LIFECYCLE_TAINTS = "node.kubernetes.io/"
"""Prefix of the taints Kubernetes' node lifecycle sets itself (not-ready, unreachable, unschedulable,
pressure): infrastructure's, like the conditions behind them."""


def judged_conditions(target: TargetDoc) -> tuple[str, ...] | None:
    """The condition types ``spec.target.node_problem_conditions`` names (None: every type but Ready).

    Raises LayerBroken ``configuration`` when the key is not a list of condition type names."""
    value = target.get(PROBLEM_CONDITIONS_KEY)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise LayerBroken(f"spec.target.{PROBLEM_CONDITIONS_KEY} must be a list of node condition types "
                          f"(e.g. [GPUMissing, XIDErrors]), not {value!r}", "configuration")
    return tuple(value)


def node_health_differences(resource: Resource, facts: NodeFacts,
                            judged: tuple[str, ...] | None = None) -> list[NodeDifference]:
    """Named differences of one node's health beyond Ready (facts as ``NodePool.nodes`` holds them):
    cordoned, NoSchedule/NoExecute taints ``resource`` does not tolerate, problem conditions set True
    (``judged``: the condition types to judge, None: all but Ready and the validation status the gate
    publishes, ``validation.<domain>/<task type>``, whose True means validated:
    :func:`pytest_hetero.status.compute.is_status_key`). Each ``{"node", "code", "field",
    "expected", "observed", "message"}`` (owners are the failure table's); a lifecycle taint standing for a cordon or a
    NotReady node already named is not named twice."""
    node = facts["name"]
    out: list[NodeDifference] = []
    if facts["unschedulable"]:
        out.append({"node": node, "code": "node_unschedulable", "field": "spec.unschedulable", "expected": False,
                    "observed": True,
                    "message": f"node {node}: cordoned (spec.unschedulable: true): no new pod lands there"})
    said = {"node.kubernetes.io/unschedulable"} if facts["unschedulable"] else set()
    if facts["ready"] != "True":
        said |= {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
    for taint in facts["taints"]:
        if (taint["effect"] not in BLOCKING_EFFECTS or taint["key"] in said
                or any(tolerates(t, taint) for t in resource.tolerations)):
            continue
        lifecycle = str(taint["key"]).startswith(LIFECYCLE_TAINTS)
        out.append({"node": node, "code": "lifecycle_taint" if lifecycle else "untolerated_taint",
                    "field": f"taints[{taint['key']}]", "expected": "tolerated", "observed": taint_text(taint),
                    "message": f"node {node}: taint {taint_text(taint)} is not tolerated by resource "
                               f"{resource.name} (add a toleration, or pick another pool)"})
    for cond in facts.get("conditions") or []:
        kind = str(cond["type"])
        if cond["status"] != "True" or (judged is not None and kind not in judged):
            continue
        if judged is None and is_status_key(kind):  # the gate's own published status: True means validated
            continue
        why = ": ".join(str(text) for text in (cond["reason"], cond["message"]) if text)
        out.append({"node": node, "code": "node_condition", "field": f"conditions[{kind}]", "expected": "False",
                    "observed": "True",
                    "message": f"node {node}: condition {kind}=True" + (f" ({why})" if why else "")})
    return out


def _node_scoped(ctx: LayerContext, pool: NodePool, found: list[NodeDifference]) -> None:
    """With node-level coverage (``coverage`` not ``one``), differences found on some nodes of the pool only fail
    discovery on those nodes: raise LayerFailed naming them (the category of the first difference, each category a
    cause), after recording ``discovery.nodes`` (the failed nodes with their categories, the passed ones), on which
    the pool's higher layers go on. Returns (the caller raises for the whole pool) when coverage is ``one`` or
    every node has a difference."""
    coverage = ctx.resource.coverage
    if coverage.describe() == "one":
        return
    failed: dict[str, list[str]] = {}
    for d in found:
        failed.setdefault(d["node"], [])
        if d["code"] not in failed[d["node"]]:
            failed[d["node"]].append(d["code"])
    passed = [f["name"] for f in pool.nodes if f["name"] not in failed]
    if not passed:
        return
    ctx.write(NODE_SCOPE, NodeScopeData(coverage=coverage.describe(), failed=failed, passed=passed))
    raise LayerFailed(f"discovery failed on {len(failed)} of {len(pool.nodes)} node(s) of pool {ctx.resource.name} "
                      f"({', '.join(sorted(failed))}; coverage {coverage.describe()}: the higher layers go on on the "
                      f"other {len(passed)}, and no status of this run validates a failed node): "
                      + "; ".join(d["message"] for d in found), found[0]["code"],
                      causes=_causes([(d["code"], d["message"]) for d in found]), nodes=tuple(sorted(failed)))


def _judge_pool(ctx: LayerContext, pool: NodePool) -> tuple[list[tuple[str, str]], list[NodeDifference]]:
    """Record ``discovery.snapshot`` of a node pool; ``([], [])``, ``no_nodes``, or every difference:
    ``([(code, message)], differences)``."""
    resource = ctx.resource
    judged = judged_conditions(ctx.matrix.target)
    found = [d for f in pool.nodes
             for d in node_differences(resource, f) + node_health_differences(resource, f, judged)]
    ctx.record("discovery.snapshot", **pool.snapshot, expected=dict(resource.expect), nodes=pool.nodes,
               differences=found, simulated_nodes=[f["name"] for f in pool.nodes if f["simulated"]],
               judged_conditions=list(judged) if judged is not None else "all but Ready")
    if not pool.nodes:
        how = f"label selector {pool.selector}" if pool.selector else f"capacity of {', '.join(pool.wanted)}"
        return [("no_nodes", f"no node matches {how}")], []
    return [(d["code"], d["message"]) for d in found], found
