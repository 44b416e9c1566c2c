"""Concurrent load against a service: per-request latency, time to first byte, throughput, errors.

One asyncio event loop and one ``httpx.AsyncClient`` per concurrency level (connection pool of
exactly ``concurrency`` connections), ``concurrency`` workers taking the next request from a shared
counter, cycling through the prepared requests. A level ends after ``count`` requests or at
``deadline_s`` (seconds after the level started), whichever comes first, so every run is bounded.
The hot loop does the least possible (two clock reads and an append per request); parsing and
statistics happen afterwards, so the load generator is not the bottleneck (see
``bench/bench_serving_load.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

import httpx

from pytest_hetero.matrix.acceptance import percentile
from pytest_hetero.serving.protocol import PreparedRequest

TRANSPORT_ERROR = 0
"""``status`` of a request that got no HTTP answer (refused, reset, timed out)."""

Progress = Callable[[str], None]
"""Receives one human-readable progress line (about once a second while a level runs)."""


@dataclass
class Response:
    """One request: which prepared ``request`` it was, HTTP ``status`` (0: transport error),
    ``latency_s`` (send to last byte, seconds), ``ttfb_s`` (to the first body byte, streaming
    requests only), the raw ``body`` and the transport ``error`` text."""

    request: int
    status: int
    latency_s: float
    ttfb_s: float | None
    body: bytes
    error: str | None = None


@dataclass
class LevelResult:
    """All responses of one concurrency level, in completion order, and its wall time (seconds)."""

    concurrency: int
    responses: list[Response]
    wall_s: float


async def run_level(client: httpx.AsyncClient, base: str, requests: list[PreparedRequest], concurrency: int,
                    count: int | None, deadline_s: float, progress: Progress | None = None,
                    tick_s: float = 1.0) -> LevelResult:
    """Send ``count`` requests (None: until the deadline) with ``concurrency`` in flight.

    ``base`` is the endpoint URL (no trailing ``/``). Never raises for HTTP or transport failures:
    they are recorded as responses.
    """
    urls = [base + r.path for r in requests]
    total = len(requests)
    responses: list[Response] = []
    next_index = 0
    started = time.perf_counter()
    stop_at = started + deadline_s

    async def worker() -> None:
        nonlocal next_index
        while (count is None or next_index < count) and time.perf_counter() < stop_at:
            k = next_index % total
            next_index += 1
            req = requests[k]
            t0 = time.perf_counter()
            try:
                if req.stream:
                    ttfb: float | None = None
                    chunks: list[bytes] = []
                    async with client.stream("POST", urls[k], content=req.body) as r:
                        async for chunk in r.aiter_bytes():
                            if ttfb is None:
                                ttfb = time.perf_counter() - t0
                            chunks.append(chunk)
                    responses.append(Response(k, r.status_code, time.perf_counter() - t0, ttfb,
                                              b"".join(chunks)))
                else:
                    r = await client.post(urls[k], content=req.body)
                    responses.append(Response(k, r.status_code, time.perf_counter() - t0, None, r.content))
            except httpx.HTTPError as exc:
                responses.append(Response(k, TRANSPORT_ERROR, time.perf_counter() - t0, None, b"",
                                          f"{type(exc).__name__}: {exc}"))

    async def ticker() -> None:
        while True:
            await asyncio.sleep(tick_s)
            if progress is not None:
                elapsed = time.perf_counter() - started
                errors = sum(1 for r in responses if not 200 <= r.status < 300)
                goal = f"/{count}" if count is not None else f" in {deadline_s:g} s"
                progress(f"concurrency {concurrency}: {len(responses)}{goal} requests, "
                         f"{len(responses) / elapsed:.1f} req/s, {errors} errors")

    tick = asyncio.ensure_future(ticker())
    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        tick.cancel()
    wall = time.perf_counter() - started
    if progress is not None:
        errors = sum(1 for r in responses if not 200 <= r.status < 300)
        progress(f"concurrency {concurrency}: done, {len(responses)} requests in {wall:.2f} s, "
                 f"{len(responses) / wall:.1f} req/s, {errors} errors")
    return LevelResult(concurrency, responses, wall)


def run_levels(base: str, requests: list[PreparedRequest], levels: list[int], count: int | None,
               deadline_s: float, headers: dict[str, str], request_timeout_s: float,
               progress: Progress | None = None) -> list[LevelResult]:
    """Run each concurrency level in turn in a fresh event loop (this function blocks).

    ``deadline_s`` bounds each level; ``request_timeout_s`` bounds each request (seconds).
    """
    async def main() -> list[LevelResult]:
        results = []
        for concurrency in levels:
            limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
            async with httpx.AsyncClient(headers=headers, timeout=request_timeout_s, limits=limits) as client:
                results.append(await run_level(client, base, requests, concurrency, count, deadline_s,
                                               progress))
        return results

    return asyncio.run(main())


class Percentiles(TypedDict):
    """Latency percentiles of one level (ms, 3 decimals): p50, p90, p95, p99, max and mean."""

    p50: float
    p90: float
    p95: float
    p99: float
    max: float
    mean: float


class LevelSummary(TypedDict):
    """:func:`summarise`: the statistics of one concurrency level (every key written)."""

    concurrency: int
    requests: int
    ok: int
    errors: int
    error_rate: float
    status_counts: dict[str, int]
    wall_s: float
    requests_per_s: float
    samples_per_s: float
    latency_ms: Percentiles | None
    ttfb_ms: Percentiles | None
    latencies_ms: list[float]


def _pcts(values_ms: list[float]) -> Percentiles | None:
    if not values_ms:
        return None
    return {"p50": round(percentile(values_ms, 50), 3), "p90": round(percentile(values_ms, 90), 3),
            "p95": round(percentile(values_ms, 95), 3), "p99": round(percentile(values_ms, 99), 3),
            "max": round(max(values_ms), 3), "mean": round(sum(values_ms) / len(values_ms), 3)}


def summarise(level: LevelResult, requests: list[PreparedRequest]) -> LevelSummary:
    """Statistics of one level as plain data.

    ``{"concurrency", "requests", "ok", "errors", "error_rate" (0–1), "status_counts" ({"200": n,
    "transport": n}), "wall_s", "requests_per_s" (successful requests), "samples_per_s" (samples
    they answered),
    "latency_ms" ({p50, p90, p95, p99, max, mean} of successful requests), "ttfb_ms" (same, streaming
    only, or None), "latencies_ms" ([float], successful requests, for percentile rules)}``.
    """
    ok = [r for r in level.responses if 200 <= r.status < 300]
    statuses = Counter("transport" if r.status == TRANSPORT_ERROR else str(r.status) for r in level.responses)
    latencies = [round(r.latency_s * 1000.0, 3) for r in ok]
    ttfb = [r.ttfb_s * 1000.0 for r in ok if r.ttfb_s is not None]
    n = len(level.responses)
    wall = max(level.wall_s, 1e-9)
    return {
        "concurrency": level.concurrency, "requests": n, "ok": len(ok), "errors": n - len(ok),
        "error_rate": round((n - len(ok)) / n, 6) if n else 1.0,
        "status_counts": dict(sorted(statuses.items())),
        "wall_s": round(level.wall_s, 4), "requests_per_s": round(len(ok) / wall, 3),
        "samples_per_s": round(sum(len(requests[r.request].samples) for r in ok) / wall, 3),
        "latency_ms": _pcts(latencies), "ttfb_ms": _pcts(ttfb), "latencies_ms": latencies,
    }
