"""A reserved-inference burst window in which the serving pods were never listed proves no floor: the watcher
(the real :class:`~pytest_hetero.backends.kubernetes.reserved.Watcher`, here against an apiserver address that
refuses connections, as an apiserver that is down or overloaded does) records its error and no readiness, and
the verdict is error ``probe_not_run`` naming the window and the error, never a floor that held."""

from __future__ import annotations

import dataclasses
import time

import pytest
from kubernetes import client

from pytest_hetero.backends.kubernetes.reserved import Watcher
from pytest_hetero.backends.protocol import ReserveBurst, ReserveReport, ReserveServing, ReserveWindow
from pytest_hetero.layers.base import LayerBroken, LayerFailed
from pytest_hetero.layers.reserved import judge
from pytest_hetero.matrix.model import GovernanceProbe, Reserve

RESERVE = Reserve(model="m", replicas=2, min_ready=2, burst={"priority_class": "training", "pods": 4}, p95_ms=100.0,
                  window_s=2.0, duration_s=20.0)
"""A probe's reserve as the matrix loads it (floor: every replica)."""


def _closed_port_api() -> client.ApiClient:
    conf = client.Configuration()
    conf.host = "http://127.0.0.1:9"  # discard port: nothing listens, the connection is refused at once
    conf.retries = 0
    return client.ApiClient(conf)


def _serving(watch_errors: list[str]) -> ReserveServing:
    """The serving part of a report as the engine writes it (a Deployment without a PriorityClass)."""
    return {"deployment": "x", "namespace": "ns", "replicas": 2, "min_ready": 2, "priority_class": None,
            "image": "img", "identity": "tenant", "watch_errors": watch_errors}


def _burst() -> ReserveBurst:
    """The burst part of a report as the engine writes it: 2 pods placed, one of them asked to preempt."""
    return {"priority_class": {"name": "training", "value": 100, "preemption_policy": "PreemptLowerPriority",
                               "global_default": False}, "requested": 4, "requests": {"cpu": "1"}, "refused": [],
            "placed": 2, "asked_to_preempt": True}


def test_a_burst_window_without_a_listing_of_the_serving_pods_is_not_a_floor_that_held() -> None:
    watcher = Watcher(_closed_port_api(), "ns", {"serving": "app=x", "burst": "probe=x-burst"})
    start = time.time()
    watcher.poll()
    watcher.poll()
    end = time.time()
    assert watcher.ready == [] and len(watcher.errors) == 1, watcher.errors
    window: ReserveWindow = {
        "phase": "burst", "from_s": 0.0, "to_s": round(end - start, 3), "endpoints": ["x-1"],
        "ready_min": watcher.ready_min(start, end), "requests": 12, "ok": 12, "errors": 0, "error_rate": 0.0,
        "status_counts": {"200": 12}, "p50_ms": 5.0, "p95_ms": 5.0, "max_ms": 5.0, "first_error": None,
        "unserved": False}
    assert window["ready_min"] is None
    report = ReserveReport(serving=_serving(watcher.errors), burst=_burst(), windows=[window])
    probe = GovernanceProbe("floor", "reserved-inference", "pool", reserve=RESERVE)
    with pytest.raises(LayerBroken) as info:
        judge(None, probe, report)  # type: ignore[arg-type]  # judge reads only the probe and the report
    assert info.value.category == "probe_not_run"
    assert str(info.value).startswith(
        f"the serving pods were not listed during 1 of 1 burst window(s) (first 0.0–{window['to_s']} s), so the "
        "floor of 2 Ready replicas was not observed; the watcher's errors: MaxRetryError")


def test_a_long_burst_window_without_a_listing_is_unobserved_even_without_a_watch_error() -> None:
    """No error noted, yet a 2 s window with no listing (a watcher starved or stopped): unobserved; a last window
    of 0.5 s between two listings 0.5 s apart is not held against the probe."""
    probe = GovernanceProbe("floor", "reserved-inference", "pool", reserve=RESERVE)

    def window(start: float, end: float, ready: int | None) -> ReserveWindow:
        return {"phase": "burst", "from_s": start, "to_s": end, "endpoints": ["x-1"], "ready_min": ready,
                "requests": 10, "ok": 10, "errors": 0, "error_rate": 0.0, "status_counts": {"200": 10},
                "p50_ms": 5.0, "p95_ms": 5.0, "max_ms": 5.0, "first_error": None, "unserved": False}

    def report(*windows: ReserveWindow) -> ReserveReport:
        return ReserveReport(serving=_serving([]), burst=_burst(), windows=list(windows))

    judge(None, probe, report(window(0.0, 2.0, 2), window(2.0, 2.5, None)))  # type: ignore[arg-type]
    with pytest.raises(LayerBroken) as info:
        judge(None, probe, report(window(0.0, 2.0, 2), window(2.0, 4.0, None)))  # type: ignore[arg-type]
    assert str(info.value) == ("the serving pods were not listed during 1 of 2 burst window(s) (first 2.0–4.0 s), so "
                               "the floor of 2 Ready replicas was not observed; the watcher's errors: none")


def test_a_burst_window_where_nothing_succeeded_is_not_within_the_latency_bound() -> None:
    """``max_error_rate: 1`` (the schema's maximum) lets every request of a window fail; its p95 is then not
    measured (None) and was skipped, so a service that answered nothing during the burst passed the bound."""
    probe = GovernanceProbe("floor", "reserved-inference", "pool", reserve=dataclasses.replace(
        RESERVE, max_error_rate=1.0))
    window: ReserveWindow = {"phase": "burst", "from_s": 0.0, "to_s": 2.0, "endpoints": ["x-1", "x-2"], "ready_min": 2,
                             "requests": 4, "ok": 0, "errors": 4, "error_rate": 1.0, "status_counts": {"503": 4},
                             "p50_ms": None, "p95_ms": None, "max_ms": None, "first_error": "HTTP 503",
                             "unserved": False}
    report = ReserveReport(serving=_serving([]), burst=_burst(), windows=[window])
    with pytest.raises(LayerFailed) as info:
        judge(None, probe, report)  # type: ignore[arg-type]  # judge reads only the probe and the report
    assert info.value.category == "serving_latency_breached"
    assert str(info.value) == ("window 0.0–2.0 s of the burst: no request succeeded (4 of 4 failed; HTTP 503), so its "
                               "p95 is not within the bound 100 ms: it was not measured")
