"""Queue and placement times of the gate's workloads, per pool, from the usage ledger's facts (issue 33).

Each workload the engines reported (:data:`~pytest_hetero.backends.protocol.USAGE_FACTS`, folded by
:func:`pytest_hetero.evidence.usage.ledger`) carries epoch times: ``submitted`` (the create call, else the
object's creation time), ``placed`` (Kubernetes: the pod's ``PodScheduled`` condition turning True; Docker: the
container's start), ``started`` (the workload container's ``startedAt``) and ``ended``. Per workload:

- ``wait_s`` = placed − submitted (how long it waited for a node: a queue, quota, capacity);
- ``start_s`` = started − placed (image, volumes, container start on the node);
- ``run_s`` = ended − started.

A pool is the matrix resource the reporting item is keyed by (the second part of its node id,
``<matrix file>::<resource>::…``), the pool of devices a row asks for. Per pool: how many workloads had
each span, and its p50 / p95 / max (nearest-rank percentiles, seconds). Model runs exec'd inside a pod
(``object: exec``) are not workloads of their own here. A missing time leaves that span out (counted in
``unknown``), never 0. Kubernetes times are truncated to the second (``metav1.Time``) while ``submitted`` is
the gate's own clock: a pod placed within the second it was submitted shows ``placed`` up to 1 s before
``submitted``; such a span (at most :data:`RESOLUTION_S` below 0) is 0, its lower bound; one further below is
unknown (clocks that disagree). On KWOK nodes the times are the simulator's (``simulated`` counts them).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

if TYPE_CHECKING:
    from pytest_hetero.evidence.usage import Times, Workload

RESOLUTION_S = 1.0
"""The coarsest time resolution of the facts (Kubernetes ``metav1.Time``: whole seconds, truncated)."""
Span = Literal["wait_s", "start_s", "run_s"]
"""A span's name: how long a workload waited for a node, took to start, ran."""
SPANS: tuple[Span, ...] = ("wait_s", "start_s", "run_s")
"""The spans, in the order a pool lists them (:func:`spans_of` says what each is from and to)."""


def spans_of(times: Times) -> dict[Span, tuple[float | None, float | None]]:
    """Each span's (from, to) epoch times of a workload's ``times``: wait = submitted → placed, start = placed →
    started, run = started → ended (None: not known)."""
    return {"wait_s": (times.submitted, times.placed), "start_s": (times.placed, times.started),
            "run_s": (times.started, times.ended)}


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile (0 < p ≤ 100) of ``values`` (not empty): the smallest value with at
    least p % of the values at or below it. Raises ValueError on an empty list."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100.0 * len(ordered)) - 1)]


def pool_of(nodeid: Any) -> str:
    """The matrix resource of an item's node id (``file::resource::…``); ``(unknown)`` when it has none."""
    parts = str(nodeid or "").split("::")
    return parts[1] if len(parts) > 1 and parts[1] else "(unknown)"


class SpanStats(TypedDict):
    """One span's spread over a pool's workloads (seconds): how many had it, p50, p95, max."""

    count: int
    p50: float
    p95: float
    max: float


class PoolQueue(TypedDict):
    """One pool's queue and placement times: workloads, how many ran on simulated nodes, how many lacked each
    span (``unknown``), and each span's :class:`SpanStats` when any workload had it."""

    workloads: int
    simulated: int
    unknown: dict[str, int]
    wait_s: NotRequired[SpanStats]
    start_s: NotRequired[SpanStats]
    run_s: NotRequired[SpanStats]


class QueueSection(TypedDict):
    """The usage ledger's ``queue``: units, how it was computed, and each pool's :class:`PoolQueue`."""

    units: str
    method: str
    pools: dict[str, PoolQueue]


def queue_times(workloads: dict[str, Workload]) -> QueueSection:
    """``{"units": "seconds", "method", "pools": {pool: {"workloads", "simulated", "unknown": {span: n},
    <span>: {"count", "p50", "p95", "max"}}}}`` of the ledger's folded ``workloads`` (key → workload). Never
    raises on a bad record: a time that is not one leaves its span out."""
    spans: dict[str, dict[Span, list[float]]] = {}
    pools: dict[str, PoolQueue] = {}
    for workload in workloads.values():
        w = workload.facts
        if w.object == "exec":
            continue
        pool = pool_of(workload.nodeid)
        entry = pools.setdefault(pool, {"workloads": 0, "simulated": 0, "unknown": dict.fromkeys(SPANS, 0)})
        entry["workloads"] += 1
        entry["simulated"] += w.simulated
        per = spans.setdefault(pool, {name: [] for name in SPANS})
        for name, (a, b) in spans_of(w.times).items():
            if a is None or b is None or b < a - RESOLUTION_S:
                entry["unknown"][name] += 1
            else:
                per[name].append(max(0.0, b - a))
    for pool, per in spans.items():
        for name, values in per.items():
            if values:
                stats: SpanStats = {"count": len(values), "p50": round(percentile(values, 50), 3),
                                    "p95": round(percentile(values, 95), 3), "max": round(max(values), 3)}
                pools[pool][name] = stats
    return {"units": "seconds", "method": "nearest-rank percentiles per pool (the matrix resource of the "
            "item that reported the workload); wait = placed − submitted, start = started − placed, "
            "run = ended − started", "pools": pools}

