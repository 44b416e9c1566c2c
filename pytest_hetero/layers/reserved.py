"""Reserved capacity for critical inference: a ``reserved-inference`` governance probe, judged in the scheduling layer.

The matrix (``spec.governance.probes[]`` with ``kind: reserved-inference`` and ``reserve``) names a served
model, the serving PriorityClass and replica floor, a training burst (PriorityClass, pods) and the latency
bound. The engine (:meth:`~pytest_hetero.backends.protocol.Backend.reserve_inference`) deploys the model with
that PriorityClass and replicas, loads it in windows before and during the burst through :func:`measure`
(given by this layer: the engines never send inference requests), and reports what it saw
(:class:`~pytest_hetero.backends.protocol.ReserveReport`). The verdict is written here, once for every engine,
in this order:

* a serving pod removed after the burst started (the scheduler's ``Preempted`` event, a DisruptionTarget
  condition, a deletion the probe did not make) or a burst window in which fewer serving pods were Ready than
  the floor (``reserve.min_ready``, default ``replicas``) → ``serving_floor_broken`` (platform: PriorityClasses,
  their values and the pool's reservation are the platform's setup);
* a burst window whose share of failed requests is above ``reserve.max_error_rate`` (default 0; a window with no
  ready endpoint fails all of its requests), with no successful request (even with ``max_error_rate: 1``: no p95
  was measured) or whose p95 latency is above ``reserve.p95_ms`` →
  ``serving_latency_breached`` (platform);
* a burst that never asked to preempt (every burst pod placed, none left Unschedulable, nominated or
  preempting) → error ``preemption_not_exercised``: the pool had room for the burst beside the serving
  replicas, so the reservation was not tested; a burst pod the API refused, or a burst window in which the
  serving pods were never listed (its floor unobserved) → error ``probe_not_run``;
* anything the probe created and could not remove → ``cleanup_incomplete`` (platform).

Records: ``reserve.serving``, ``reserve.burst``, ``reserve.window`` (one per window: phase, endpoints,
``ready_min``, requests, errors, p95), ``reserve.timeline`` (evictions, preemptions, readiness changes, each
with ``at_s`` seconds since the burst started), ``reserve.victims``, ``governance.cleanup``, and one
``usage.workload`` per pod the probe made (the run-wide usage ledger).

What it cannot prove: a window shorter than the kubelet's readiness period can miss a flap; the load comes from
the gate's host to pod IPs (no kube-proxy, no ingress); only the scheduler's priority preemption is exercised
(Kueue or Volcano preemption of admitted workloads is not).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import Counter
from typing import Any

import httpx

from pytest_hetero.backends.protocol import Measure, ReserveReport, WindowStats
from pytest_hetero.layers import usage
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerFailed
from pytest_hetero.layers.serving import protocol_for, serving_request
from pytest_hetero.matrix.acceptance import percentile
from pytest_hetero.matrix.model import GovernanceProbe
from pytest_hetero.serving.load import TRANSPORT_ERROR, run_level
from pytest_hetero.serving.protocol import PreparedRequest, read_samples

UNSEEN_S = 1.0
"""A burst window at least this long (two listings of the watcher, 0.5 s apart) without any listing of the serving
pods is unobserved, not a floor that held (a shorter last window may fall between two listings; any window is
unobserved when the watcher reported errors)."""
TIMELINE_CAP = 2000
"""Timeline entries kept in evidence (the first ones: a burst that churns pods for minutes is cut, and says so)."""


def measure(requests: list[PreparedRequest], headers: dict[str, str], timeout_s: float) -> Measure:
    """The load of one window: one worker per ready endpoint (``run_level`` of :mod:`pytest_hetero.serving.load`,
    concurrency 1 each, cycling through ``requests``) for the window's seconds. Returns ``{"requests", "ok",
    "errors", "error_rate" (0–1; 1.0 when nothing could be sent), "status_counts", "p50_ms", "p95_ms", "max_ms"
    (successful requests; None without any), "first_error", "unserved" (no ready endpoint)}``."""
    def run(bases: list[str], seconds: float) -> WindowStats:
        if not bases:
            time.sleep(seconds)
            return {"requests": 0, "ok": 0, "errors": 0, "error_rate": 1.0, "status_counts": {}, "p50_ms": None,
                    "p95_ms": None, "max_ms": None, "first_error": "no ready endpoint", "unserved": True}

        async def main() -> list[Any]:
            limits = httpx.Limits(max_connections=len(bases), max_keepalive_connections=len(bases))
            async with httpx.AsyncClient(headers=headers, timeout=timeout_s, limits=limits) as http:
                return list(await asyncio.gather(*(run_level(http, b, requests, 1, None, seconds) for b in bases)))

        responses = [r for level in asyncio.run(main()) for r in level.responses]
        ok = [r.latency_s * 1000.0 for r in responses if 200 <= r.status < 300]
        bad = [r for r in responses if not 200 <= r.status < 300]
        n = len(responses)
        return {"requests": n, "ok": len(ok), "errors": len(bad), "error_rate": round(len(bad) / n, 6) if n else 1.0,
                "status_counts": dict(sorted(Counter("transport" if r.status == TRANSPORT_ERROR else str(r.status)
                                                     for r in responses).items())),
                "p50_ms": round(percentile(ok, 50), 3) if ok else None,
                "p95_ms": round(percentile(ok, 95), 3) if ok else None,
                "max_ms": round(max(ok), 3) if ok else None,
                "first_error": (bad[0].error or f"HTTP {bad[0].status}") if bad else None, "unserved": False}

    return run


def check(ctx: LayerContext, probe: GovernanceProbe) -> None:
    """Run ``probe`` through the engine and judge what it reports (see the module docstring). Raises the
    engine's Unsupported (not applicable) where it has no pool priorities, LayerBroken ``bad_dataset`` for
    inputs that cannot be read."""
    r = probe.reserve
    assert r is not None  # the matrix check requires reserve of a reserved-inference probe  # noqa: S101
    model = next(m for m in ctx.matrix.models if m.name == r.model)
    serving = model.serving
    assert serving is not None  # the matrix check requires a served model  # noqa: S101
    dataset = next(d for d in ctx.matrix.datasets if d.name == r.dataset) if r.dataset else ctx.matrix.datasets[0]
    proto = protocol_for(ctx, serving)
    try:
        samples = read_samples(dataset.path)
    except (OSError, ValueError) as exc:
        raise LayerBroken(f"dataset {dataset.name}: {exc}", "bad_dataset") from None
    request = dataclasses.replace(serving_request(ctx, serving, proto), token=None)  # the probe's own Deployment
    load = measure(proto.prepare(samples, 1), {"Content-Type": "application/json"},
                   serving.load.request_timeout_s)
    report = ctx.backend.reserve_inference(ctx, probe, request, load)
    record(ctx, report)
    for facts in report.usage:  # the run-wide ledger counts the probe's pods, as the other probes' workloads
        own = facts.copy()
        role = own.pop("role", None)
        own["tenant"], own["role"] = probe.acting_as, f"governance:{probe.name}:{role}"
        usage.record(ctx, own)
    judge(ctx, probe, report)


def record(ctx: LayerContext, report: ReserveReport) -> None:
    """Write the report's records (see the module docstring)."""
    ctx.record("reserve.serving", **report.serving)
    ctx.record("reserve.burst", **report.burst)
    for window in report.windows:
        ctx.record("reserve.window", **window)
    ctx.record("reserve.timeline", entries=report.timeline[:TIMELINE_CAP],
               cut=max(0, len(report.timeline) - TIMELINE_CAP))
    ctx.record("reserve.victims", victims=report.victims)
    ctx.record("governance.cleanup", objects=report.cleanup, leftovers=[x.to_dict() for x in report.leftovers])


def judge(ctx: LayerContext, probe: GovernanceProbe, report: ReserveReport) -> None:
    """Raise the first thing that went against the reservation (module docstring); return when it held."""
    r = probe.reserve
    assert r is not None  # the matrix check requires reserve of a reserved-inference probe  # noqa: S101
    floor, bound, allowed = r.min_ready, r.p95_ms, r.max_error_rate
    serving_class, burst_class = report.serving["priority_class"], report.burst["priority_class"]
    cls = (serving_class["name"] if serving_class else None) or "no PriorityClass"
    burst_cls = burst_class["name"] if burst_class else None
    during = [w for w in report.windows if w["phase"] == "burst"]
    if report.victims:
        first = report.victims[0]
        raise LayerFailed(
            f"the training burst ({burst_cls}) removed {len(report.victims)} of {r.replicas} serving replica(s) "
            f"of {report.serving['deployment']} ({cls}): " + "; ".join(
                f"{v['pod']} at {v['at_s']} s" + (f" for {v['by']}" if v["by"] else "") for v in report.victims)
            + f" (first seen: {first['evidence'][0]})", "serving_floor_broken")
    low = [(w["ready_min"], w["from_s"]) for w in during if w["ready_min"] is not None and w["ready_min"] < floor]
    if low:
        raise LayerFailed(f"{min(ready for ready, _ in low)} serving replica(s) Ready during the burst, below the "
                          f"floor of {floor} ({cls}; first at {low[0][1]} s)", "serving_floor_broken")
    for w in during:
        if w["error_rate"] > allowed:
            raise LayerFailed(f"window {w['from_s']}–{w['to_s']} s of the burst: {w['errors']} of {w['requests']} "
                              f"requests failed (error rate {w['error_rate']} > {allowed}; "
                              f"{w['first_error'] or 'no answer'})", "serving_latency_breached")
        if not w["ok"]:
            raise LayerFailed(f"window {w['from_s']}–{w['to_s']} s of the burst: no request succeeded "
                              f"({w['errors']} of {w['requests']} failed; {w['first_error'] or 'none sent'}), so "
                              f"its p95 is not within the bound {bound:g} ms: it was not measured",
                              "serving_latency_breached")
        if w["p95_ms"] is not None and w["p95_ms"] > bound:
            raise LayerFailed(f"window {w['from_s']}–{w['to_s']} s of the burst: p95 {w['p95_ms']} ms > the bound "
                              f"{bound:g} ms ({w['ok']} requests)", "serving_latency_breached")
    errors = "; ".join(report.serving.get("watch_errors") or [])
    unseen = [w for w in during if w["ready_min"] is None and (errors or w["to_s"] - w["from_s"] >= UNSEEN_S)]
    if unseen:
        raise LayerBroken(f"the serving pods were not listed during {len(unseen)} of {len(during)} burst window(s) "
                          f"(first {unseen[0]['from_s']}–{unseen[0]['to_s']} s), so the floor of {floor} Ready "
                          f"replicas was not observed; the watcher's errors: {errors or 'none'}", "probe_not_run")
    if report.burst.get("refused"):
        raise LayerBroken(f"the API refused burst pods, so the pool was not filled: {report.burst['refused'][0]}",
                          "probe_not_run")
    if not report.burst.get("asked_to_preempt"):
        raise LayerBroken(f"all {report.burst.get('placed')} burst pods were placed beside the serving replicas "
                          "without asking to preempt: the pool had room, so the reservation was not tested; ask "
                          "for more burst pods (reserve.burst.pods) or point the probe at a smaller pool",
                          "preemption_not_exercised")
    if report.leftovers:
        raise LayerFailed("the probe could not remove what it created: " + "; ".join(
            f"{x.kind} {x.namespace}/{x.name}: {x.reason}" for x in report.leftovers), "cleanup_incomplete")
    if not during:
        raise LayerBroken("no load window ran during the burst (reserve.duration shorter than one window?)",
                          "probe_not_run")
