"""Discovery on Kubernetes: the resource's node pool as the apiserver reports it, against the matrix.

Nodes are those matching the resource's ``node_selector`` (all nodes when it has none, narrowed
to nodes advertising a requested extended resource). Per node: Ready condition, taints, labels,
capacity and allocatable of every requested resource name. Named differences (each
``{"node", "code", "field", "expected", "observed", "message"}``):

* ``node_not_ready`` — Ready condition not True (reason/message of the condition kept);
* ``resource_not_advertised`` — capacity lacks a requested extended resource;
* ``allocatable_below_capacity`` — allocatable < capacity (devices withheld or unhealthy);
* ``label_contract_broken`` — a vendor label missing (NVIDIA GFD ``nvidia.com/gpu.product``,
  Ascend ``accelerator``), ``expect.product`` not matching it, or an ``expect.labels`` entry absent;
* ``expectation_mismatch`` — ``expect.devices`` ≠ the node's capacity of the device resource.

The snapshot (node list resourceVersion, UTC timestamp, per-node facts) is recorded before judging.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kubernetes import client

from pytest_hetero.backends.kubernetes.client import api_outcome
from pytest_hetero.evidence.model import utc_now
from pytest_hetero.layers.base import LayerContext, LayerFailed
from pytest_hetero.matrix.model import Resource

BASIC = ("cpu", "memory", "ephemeral-storage", "pods")
VENDOR_LABELS: dict[str, tuple[str, ...]] = {
    "nvidia": ("nvidia.com/gpu.product",),
    "ascend": ("accelerator",),
    "huawei": ("accelerator",),
}
"""Labels a device node of the vendor must carry (NVIDIA GPU Feature Discovery; Ascend device plugin)."""


def device_resources(resource: Resource) -> list[str]:
    """Requested extended resource names (e.g. ``nvidia.com/gpu``), in request order."""
    return [k for k in resource.requests if k not in BASIC and not k.startswith("hugepages-")]


def quantity(value: str | None) -> float | None:
    """A Kubernetes quantity as a number (``"8"`` → 8, ``"500m"`` → 0.5, ``"1Ki"`` → 1024); None when absent."""
    if value is None:
        return None
    from kubernetes.utils.quantity import parse_quantity

    return float(parse_quantity(value))  # type: ignore[no-untyped-call]


def node_facts(node: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """What evidence keeps of one node (JSON dict from the API)."""
    meta, status = node["metadata"], node.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    cap, alloc = status.get("capacity") or {}, status.get("allocatable") or {}
    return {
        "name": meta["name"],
        "resource_version": meta.get("resourceVersion"),
        "ready": (ready or {}).get("status", "Unknown"),
        "ready_reason": (ready or {}).get("reason"),
        "ready_message": (ready or {}).get("message"),
        "unschedulable": bool((node.get("spec") or {}).get("unschedulable")),
        "taints": (node.get("spec") or {}).get("taints") or [],
        "labels": meta.get("labels") or {},
        "capacity": {n: cap.get(n) for n in names},
        "allocatable": {n: alloc.get(n) for n in names},
        "simulated": (meta.get("annotations") or {}).get("kwok.x-k8s.io/node") == "fake",
    }


def differences(resource: Resource, facts: dict[str, Any]) -> list[dict[str, Any]]:
    """Named differences of one node against the resource (see the module docstring)."""
    node, out = facts["name"], []

    def add(code: str, field: str, expected: Any, observed: Any, message: str) -> None:
        out.append(
            {
                "node": node,
                "code": code,
                "field": field,
                "expected": expected,
                "observed": observed,
                "message": f"node {node}: {message}",
            }
        )

    if facts["ready"] != "True":
        add(
            "node_not_ready",
            "Ready",
            "True",
            facts["ready"],
            f"not Ready (Ready={facts['ready']}, {facts['ready_reason'] or 'no reason'}"
            f"{': ' + facts['ready_message'] if facts['ready_message'] else ''})",
        )
    for name in device_resources(resource):
        cap, alloc = quantity(facts["capacity"][name]), quantity(facts["allocatable"][name])
        if not cap:
            add(
                "resource_not_advertised",
                f"capacity[{name}]",
                "> 0",
                facts["capacity"][name],
                f"does not advertise {name} (capacity {facts['capacity'][name] or 'absent'})",
            )
            continue
        if alloc is None or alloc < cap:
            add(
                "allocatable_below_capacity",
                f"allocatable[{name}]",
                facts["capacity"][name],
                facts["allocatable"][name],
                f"allocatable {name} {facts['allocatable'][name]} < capacity {facts['capacity'][name]}",
            )
        devices = resource.expect.get("devices")
        if devices is not None and name == device_resources(resource)[0] and cap != float(devices):
            add(
                "expectation_mismatch",
                f"capacity[{name}]",
                devices,
                facts["capacity"][name],
                f"capacity {name} {facts['capacity'][name]}, matrix expects {devices}",
            )
    labels = facts["labels"]
    for key in VENDOR_LABELS.get(resource.vendor.lower(), ()) if resource.type != "cpu" else ():
        if key not in labels:
            add("label_contract_broken", f"labels[{key}]", "present", None, f"label {key} missing")
        elif (
            key.endswith("product")
            and "product" in resource.expect
            and not re.search(str(resource.expect["product"]), labels[key])
        ):
            add(
                "label_contract_broken",
                f"labels[{key}]",
                resource.expect["product"],
                labels[key],
                f"{key}={labels[key]} does not match {resource.expect['product']!r}",
            )
    for key, value in (resource.expect.get("labels") or {}).items():
        if labels.get(key) != value:
            add(
                "label_contract_broken",
                f"labels[{key}]",
                value,
                labels.get(key),
                f"label {key}={labels.get(key)!r}, matrix expects {value!r}",
            )
    return out


def discover(ctx: LayerContext, api: client.ApiClient) -> list[dict[str, Any]]:
    """List the resource's nodes, record ``discovery.snapshot``; return the per-node facts.

    Raises LayerFailed (owner infrastructure): ``no_nodes`` when nothing matches, else the code
    of the first difference (message lists them all); LayerFailed ``forbidden_rbac`` without
    ``list nodes``; LayerBroken when the apiserver fails.
    """
    resource = ctx.resource
    names = list(resource.requests)
    selector = ",".join(f"{k}={v}" for k, v in sorted(resource.node_selector.items()))
    try:
        resp: Any = client.CoreV1Api(api).list_node(
            label_selector=selector or None, _preload_content=False, _request_timeout=ctx.timeout_s
        )
    except Exception as exc:  # noqa: BLE001 - translated
        raise api_outcome(exc, "list nodes") from None
    body = json.loads(resp.data)
    facts = [node_facts(n, names) for n in body.get("items") or []]
    wanted = device_resources(resource)
    if wanted and not selector:
        facts = [f for f in facts if any(f["capacity"].get(w) for w in wanted)]
    found = [d for f in facts for d in differences(resource, f)]
    ctx.record(
        "discovery.snapshot",
        source="kubernetes",
        resource_version=body["metadata"].get("resourceVersion"),
        taken_at=utc_now(),
        label_selector=selector,
        requested=names,
        expected=dict(resource.expect),
        nodes=facts,
        differences=found,
        simulated_nodes=[f["name"] for f in facts if f["simulated"]],
    )
    if not facts:
        how = f"label selector {selector}" if selector else f"capacity of {', '.join(wanted)}"
        raise LayerFailed(f"no node matches {how}", "no_nodes", "infrastructure")
    if found:
        raise LayerFailed("; ".join(d["message"] for d in found), found[0]["code"], "infrastructure")
    return facts
