"""The resource's node pool as the apiserver reports it (the Kubernetes engine's inventory verb).

Nodes are those matching the resource's ``node_selector`` (all nodes when it has none, narrowed
to nodes advertising a requested extended resource). Per node: Ready condition, every other
condition (kubelet pressure conditions, and those node-problem-detector or a device health agent
set, e.g. ``GPUMissing``), whether it is cordoned (``spec.unschedulable``), taints, labels, capacity
and allocatable of every requested resource name, what the pods bound to it request of each
(``requested_by_pods``, base units, :mod:`.capacity`; None when pods could not be listed, the reason in the
snapshot's ``capacity_view``), whether KWOK simulates it. What that means for the claim is judged by
:mod:`pytest_hetero.layers.discovery`.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from pytest_hetero.backends.kubernetes.capacity import requested_on
from pytest_hetero.backends.kubernetes.client import api_outcome
from pytest_hetero.backends.kubernetes.manifests import NodeList
from pytest_hetero.backends.kubernetes.objects import Node, find, parse_node
from pytest_hetero.backends.protocol import NodeFacts, NodePool, PoolSnapshot, Step
from pytest_hetero.evidence.model import utc_now


def node_facts(node: Node, names: list[str]) -> NodeFacts:
    """What evidence keeps of one node (:func:`~.objects.parse_node` of the API's JSON): see the module
    docstring; ``conditions`` lists every condition but Ready as ``{"type", "status", "reason", "message",
    "lastTransitionTime"}`` (Kubernetes ``NodeCondition`` fields)."""
    ready = find(node.conditions, "Ready")
    return {
        "name": node.name,
        "uid": node.uid,
        "resource_version": node.resource_version,
        "ready": "Unknown" if ready is None or ready.status is None else ready.status,
        "ready_reason": ready.reason if ready else None,
        "ready_message": ready.message if ready else None,
        "conditions": [c.fields() for c in node.conditions if c.type != "Ready"],
        "unschedulable": node.unschedulable,
        "taints": node.taints,
        "labels": node.labels,
        "capacity": {n: node.capacity.get(n) for n in names},
        "allocatable": {n: node.allocatable.get(n) for n in names},
        "simulated": node.simulated,
    }


def pool(step: Step, api: client.ApiClient, exclude: frozenset[tuple[str, str]] = frozenset(),
         also: tuple[str, ...] = ()) -> NodePool:
    """List the resource's nodes (one LIST, bounded by the layer timeout); their facts and how they
    were read (the ``(namespace, name)`` pods of ``exclude`` not counted in what the nodes' pods request; ``also``:
    resource names read besides the resource's requests, e.g. ``pods``, which counts each pod as 1).
    Raises the :func:`~.client.api_outcome` of a refused or failed list (``forbidden_rbac`` without ``list
    nodes``; EngineUnavailable when the apiserver fails)."""
    resource = step.resource
    names = list(resource.requests) + [n for n in also if n not in resource.requests]
    wants = {"cpu": "min_cpus" in resource.expect,
             "memory": bool({"min_memory_mib", "min_memory_total_mib"} & set(resource.expect))}
    facts_of = names + [n for n, wanted in wants.items() if wanted and resource.type == "cpu" and n not in names]
    selector = ",".join(f"{k}={v}" for k, v in sorted(resource.node_selector.items()))
    try:
        resp: Any = client.CoreV1Api(api).list_node(
            label_selector=selector or None, _preload_content=False, _request_timeout=step.timeout_s
        )
    except Exception as exc:  # noqa: BLE001 - translated
        raise api_outcome(exc, "list nodes") from None
    body: NodeList = json.loads(resp.data)
    facts = [node_facts(parse_node(n), facts_of) for n in body["items"]]
    wanted = resource.device_resources
    if wanted and not selector:
        facts = [f for f in facts if any(f["capacity"].get(w) for w in wanted)]
    snapshot: PoolSnapshot = {"source": "kubernetes", "resource_version": body["metadata"]["resourceVersion"],
                "taken_at": utc_now(), "label_selector": selector, "requested": names}
    held, pods, why = requested_on(api, [f["name"] for f in facts], names, step.timeout_s, exclude)
    for f in facts:
        f["requested_by_pods"] = None if why else held.get(f["name"], {})
    snapshot["capacity_view"] = {"pods_counted": pods, "unavailable": why,
                                 "rule": "effective requests of the pods bound to each node and not ended"}
    return NodePool(nodes=facts, snapshot=snapshot, selector=selector, wanted=wanted)
