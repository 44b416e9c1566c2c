"""Benchmark: the serving load generator must not be the bottleneck.

Starts a real MLServer (digits 2.0.0, scikit-learn runtime, Open Inference Protocol) on loopback,
then at concurrency 1, 8 and 32 sends the same pre-encoded requests (one digits sample each)
through the plugin (:func:`pytest_hetero.serving.load.run_levels`) and through a plain
asyncio + httpx client in the same process, ``--rounds`` times, alternating which goes first.
Prints the best round's throughput (successful requests/s) of each and their ratio, plus the
medians; exits 1 when a best-round ratio is below ``--floor`` (default 0.9). Best rounds, as
``timeit`` takes the minimum: other work on the machine only ever lowers a round's throughput.

Usage: ``python bench/bench_serving_load.py [--requests 400] [--rounds 5]`` (one to two minutes
on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from serving.servers import MLSERVER_PINS, build_digits_models, ensure_venv, start_mlserver

from pytest_hetero.matrix.model import Serving
from pytest_hetero.serving.load import run_levels
from pytest_hetero.serving.oip import OpenInferenceProtocol
from pytest_hetero.serving.protocol import PreparedRequest, read_samples

HEADERS = {"Content-Type": "application/json"}


async def plain(base: str, requests: list[PreparedRequest], concurrency: int, count: int) -> float:
    """A plain httpx.AsyncClient with ``concurrency`` workers sending ``count`` requests; requests/s."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    urls = [base + r.path for r in requests]
    sent = 0
    async with httpx.AsyncClient(headers=HEADERS, timeout=10.0, limits=limits) as client:
        async def worker() -> None:
            nonlocal sent
            while sent < count:
                k = sent % len(requests)
                sent += 1
                response = await client.post(urls[k], content=requests[k].body)
                response.raise_for_status()

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return count / (time.perf_counter() - start)


def plugin(base: str, requests: list[PreparedRequest], concurrency: int, count: int) -> float:
    """The plugin's load generator on the same requests; its measured successful requests/s."""
    (level,) = run_levels(base, requests, [concurrency], count, 120.0, HEADERS, 10.0)
    ok = sum(1 for r in level.responses if r.status == 200)
    if ok != count:
        raise RuntimeError(f"{count - ok} requests failed at concurrency {concurrency}")
    return ok / level.wall_s


def main() -> int:
    """Run the comparison; print one line per concurrency level and the verdict."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400, help="requests per round and level")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--floor", type=float, default=0.9)
    args = parser.parse_args()
    # the matrix is written to a temporary folder and names the repository's digits case: allow it
    os.environ["HETERO_ALLOW_PATHS"] = os.pathsep.join(
        p for p in (os.environ.get("HETERO_ALLOW_PATHS", ""), str(REPO / "cases")) if p)
    python = ensure_venv("mlserver-venv", MLSERVER_PINS)
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as tmp:
        models = build_digits_models(python, Path(tmp) / "build")
        server = start_mlserver(python, models["2.0.0"], Path(tmp) / "server")
        try:
            proto = OpenInferenceProtocol(Serving("oip", "digits", "2.0.0", endpoint=server.url))
            data = REPO / "cases" / "digits" / "data" / "digits-test-1.0.0.csv"
            requests = proto.prepare(read_samples(data), 1)
            plugin(server.url, requests, 8, 200)  # warm both sides up
            worst = float("inf")
            for concurrency in (1, 8, 32):
                ours, theirs = [], []
                for round_ in range(args.rounds):
                    if round_ % 2:  # alternate who goes first: neither always meets a cold server
                        ours.append(plugin(server.url, requests, concurrency, args.requests))
                    theirs.append(asyncio.run(plain(server.url, requests, concurrency, args.requests)))
                    if not round_ % 2:
                        ours.append(plugin(server.url, requests, concurrency, args.requests))
                ratio = max(ours) / max(theirs)
                worst = min(worst, ratio)
                mine, plain_ = statistics.median(ours), statistics.median(theirs)
                print(f"concurrency {concurrency:>2}: plugin {max(ours):8.1f} req/s, plain httpx "
                      f"{max(theirs):8.1f} req/s, ratio {ratio:.3f} (medians {mine:.1f} / {plain_:.1f}, "
                      f"ratio {mine / plain_:.3f})", flush=True)
        finally:
            server.stop()
    verdict = "PASS" if worst >= args.floor else "FAIL"
    print(f"{verdict}: lowest ratio {worst:.3f} (floor {args.floor})")
    return 0 if worst >= args.floor else 1


if __name__ == "__main__":
    sys.exit(main())
