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
import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from kubernetes import client

from pytest_hetero.backends.kubernetes.manifests import PodList
from pytest_hetero.backends.kubernetes.objects import Pod, parse_pod
from pytest_hetero.matrix.quantity import quantity_or_none

if TYPE_CHECKING:
    from pytest_hetero.backends.protocol import NodeFacts

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
                 timeout_s: float, exclude: frozenset[tuple[str, str]] = frozenset()
                 ) -> tuple[dict[str, dict[str, float]], int, str | None]:
    """Per node of ``nodes``: the summed effective requests of ``names`` of the pods bound to it and not
    ended (but the ``(namespace, name)`` pods of ``exclude``: the gate's own pod it has just deleted); the number
    of such pods; and None, or why nothing could be read (the LIST refused or failed: e.g. the gate's identity
    may not list pods in every namespace). Never raises for an API answer."""
    wanted, names = set(nodes), list(names)
    try:
        resp: Any = client.CoreV1Api(api).list_pod_for_all_namespaces(
            field_selector=",".join(f"status.phase!={p}" for p in ENDED), _preload_content=False,
            _request_timeout=timeout_s)
        body: PodList = json.loads(resp.data)
    except client.ApiException as exc:
        return {}, 0, f"list pods in all namespaces: HTTP {exc.status} {exc.reason}"
    except Exception as exc:  # noqa: BLE001 - any transport failure loses the view, not the discovery
        return {}, 0, f"list pods in all namespaces: {type(exc).__name__}: {str(exc)[:200]}"
    out: dict[str, dict[str, float]] = {n: {} for n in wanted}
    counted = 0
    for pod in (parse_pod(item) for item in body["items"]):
        node = pod.node_name
        if node not in wanted or pod.phase in ENDED or (pod.namespace, pod.name) in exclude:
            continue
        counted += 1
        for name, value in pod_requests(pod, names).items():
            out[node][name] = out[node].get(name, 0.0) + value
        if "pods" in names:  # the kubelet's pod capacity: every pod bound takes one
            out[node]["pods"] = out[node].get("pods", 0.0) + 1
    return out, counted, None


FREE_MAX = 1000
"""Most model runs at once that ``concurrency: free`` gives: the schema's bound on a ``concurrency`` set as a number
(``free`` never asks for more than a number could). What a run in flight holds in the gate is a thread and its exec
websocket (the pod and node watches are the session's, shared), so the bound is the process's, not the cluster's:
:func:`free_cap`."""
FDS_PER_RUN = 2
"""File descriptors a model run in flight may hold in the gate: its exec websocket, and an API connection at times."""
FDS_KEPT = 128
"""File descriptors :func:`free_cap` leaves to the rest of the gate (watches, the API pool, journal, reports)."""


def free_cap() -> int:
    """The most runs ``concurrency: free`` takes in this process: :data:`FREE_MAX`, fewer where the open-file limit
    (``RLIMIT_NOFILE``, soft) would not hold :data:`FDS_PER_RUN` descriptors per run beside :data:`FDS_KEPT`: at
    least 1. (A soft limit of 1,024 gives 448; 20,000 gives 1,000.)"""
    try:
        import resource  # noqa: PLC0415 - POSIX only

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, ValueError, OSError):
        return FREE_MAX
    if soft == resource.RLIM_INFINITY:
        return FREE_MAX
    return max(1, min(FREE_MAX, (soft - FDS_KEPT) // FDS_PER_RUN))


class NodeFit(TypedDict):
    """How many run Pods one node of the pool takes now (``fits``), or why none (``why``: not Ready, cordoned, an
    untolerated taint, its pods not counted), and the resource name that bounds it (``bound_by``)."""

    fits: int
    why: NotRequired[str]
    bound_by: NotRequired[str]


class FreeCapacity(TypedDict):
    """``model.spread``'s ``free_capacity`` (``concurrency: free``): the ``rule``, each pool node's :class:`NodeFit`,
    their ``total``, the width taken (``width``: the total, at least 1, at most :func:`free_cap`), and why the
    pool's pods could not be counted (``unavailable``; None when they were)."""

    rule: str
    nodes: dict[str, NodeFit]
    total: int
    width: int
    unavailable: str | None


def free_runs(nodes: Iterable[NodeFacts], requests: Mapping[str, str | int | float],
              unfit: Callable[[NodeFacts], list[str]], unavailable: str | None, cap: int | None = None
              ) -> FreeCapacity:
    """How many Pods asking for ``requests`` (the resource's, quantity strings) the pool's ``nodes`` (facts of
    :func:`.inventory.node_facts`, with ``requested_by_pods``) take now: per node, the least over the requested
    names and ``pods`` (one per run, against the node's pod capacity when its facts hold it) of ⌊(allocatable −
    requested by its pods) ÷ request⌋, 0 for a node ``unfit`` names a reason for (not Ready, cordoned, an
    untolerated taint) or whose pods were not counted. A node with nothing to bound it, and the width, are bounded by
    ``cap`` (default :func:`free_cap`). Pure but for that default: the scheduler's arithmetic on the facts given, no
    API call."""
    cap = free_cap() if cap is None else cap
    asked = {n: q for n, q in ((n, quantity_or_none(v)) for n, v in requests.items()) if q and q > 0}
    asked.setdefault("pods", 1.0)  # each run is one pod: a node's pod capacity bounds it too
    fits: dict[str, NodeFit] = {}
    for node in nodes:
        why = unfit(node)
        held = node.get("requested_by_pods")
        if why or held is None:
            fits[node["name"]] = {"fits": 0, "why": "; ".join(why) if why else "its pods could not be counted"}
            continue
        room = {n: ((quantity_or_none(node["allocatable"].get(n)) or 0.0) - held.get(n, 0.0)) / q
                for n, q in asked.items() if n != "pods" or n in node["allocatable"]}
        if not room:  # a request of nothing on a node that says nothing of its pod capacity
            fits[node["name"]] = {"fits": cap, "bound_by": "no request (at most the cap)"}
            continue
        name = min(room, key=lambda n: room[n])
        fits[node["name"]] = {"fits": max(0, math.floor(room[name] + 1e-9)), "bound_by": name}
    total = sum(f["fits"] for f in fits.values())
    return {"rule": "per Ready, schedulable, tolerated node: the least over the requested resources of "
                    "floor((allocatable - requested by its pods) / the run's request); the width is the sum, at "
                    f"least 1, at most {cap}",
            "nodes": fits, "total": total, "width": max(1, min(total, cap)), "unavailable": unavailable}
