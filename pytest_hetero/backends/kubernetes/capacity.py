"""What the pods on a pool's nodes request, for the pool's capacity view (allocatable vs requested).

The scheduler's arithmetic, from the objects it reads: a pod counts on the node it is bound to
(``spec.nodeName``) until it ends (phase ``Succeeded``/``Failed``); its request of a resource is
Kubernetes' effective request (k8s.io/component-helpers ``resource.PodRequests``): the larger of the
containers' sum (plus restartable init containers, i.e. sidecars with ``restartPolicy: Always``) and the
largest non-restartable init container (plus the sidecars started before it), plus ``spec.overhead``.
Quantities are parsed by :func:`pytest_hetero.matrix.quantity.quantity` (base units: cores, bytes,
devices). One LIST of pods over all namespaces, bounded by the step's timeout.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from kubernetes import client

from pytest_hetero.backends.kubernetes.objects import Pod, parse_pod
from pytest_hetero.matrix.quantity import quantity_or_none

ENDED = ("Succeeded", "Failed")
"""Pod phases whose requests no longer hold a node's capacity."""


def pod_requests(pod: Pod, names: Iterable[str]) -> dict[str, float]:
    """The effective request of ``pod`` (:func:`~.objects.parse_pod` of a Pod's JSON) for each of ``names``
    (absent or unparsable: 0), in base units; see the module docstring for the rule."""
    wanted = list(names)
    out: dict[str, float] = {}
    for name in wanted:
        running = sum(quantity_or_none(c.requests.get(name)) or 0.0 for c in pod.containers)
        sidecars, init_peak = 0.0, 0.0
        for c in pod.init_containers:
            value = quantity_or_none(c.requests.get(name)) or 0.0
            if c.restart_policy == "Always":
                sidecars += value
            else:
                init_peak = max(init_peak, value + sidecars)
        overhead = quantity_or_none(pod.overhead.get(name)) or 0.0
        total = max(running + sidecars, init_peak) + overhead
        if total:
            out[name] = total
    return out


def requested_on(api: client.ApiClient, nodes: Iterable[str], names: Iterable[str],
                 timeout_s: float) -> tuple[dict[str, dict[str, float]], int, str | None]:
    """Per node of ``nodes``: the summed effective requests of ``names`` of the pods bound to it and not
    ended; the number of such pods; and None, or why nothing could be read (the LIST refused or failed:
    e.g. the gate's identity may not list pods in every namespace). Never raises for an API answer."""
    wanted, names = set(nodes), list(names)
    try:
        resp: Any = client.CoreV1Api(api).list_pod_for_all_namespaces(
            field_selector=",".join(f"status.phase!={p}" for p in ENDED), _preload_content=False,
            _request_timeout=timeout_s)
        body = json.loads(resp.data)
    except client.ApiException as exc:
        return {}, 0, f"list pods in all namespaces: HTTP {exc.status} {exc.reason}"
    except Exception as exc:  # noqa: BLE001 - any transport failure loses the view, not the discovery
        return {}, 0, f"list pods in all namespaces: {type(exc).__name__}: {str(exc)[:200]}"
    out: dict[str, dict[str, float]] = {n: {} for n in wanted}
    counted = 0
    for pod in (parse_pod(item) for item in body.get("items") or []):
        node = pod.node_name
        if node not in wanted or pod.phase in ENDED:
            continue
        counted += 1
        for name, value in pod_requests(pod, names).items():
            out[node][name] = out[node].get(name, 0.0) + value
    return out, counted, None
