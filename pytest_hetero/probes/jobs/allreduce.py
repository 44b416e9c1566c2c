"""All-reduce benchmark of the gate's communication check, run once per rank inside the job's workloads.

Environment (set by the gate): ``HETERO_RANK``, ``HETERO_WORLD_SIZE``, ``HETERO_RENDEZVOUS_ADDR``,
``HETERO_RENDEZVOUS_PORT`` (rank 0 listens there), ``HETERO_RENDEZVOUS_TIMEOUT_S``, ``HETERO_SIZES``
(comma-separated message sizes in bytes), ``HETERO_ITERATIONS``, ``HETERO_WARMUP``, ``HETERO_FRAMEWORK``
(``auto``: torch when the image has it, else jax; or ``torch`` / ``jax``), ``HETERO_BACKEND`` (torch only:
``gloo``/``nccl``/``hccl``; empty: nccl with CUDA, hccl with torch_npu, else gloo).

Each rank contributes ``rank + 1`` from each of its devices (float32) and reduces with SUM. It prints one JSON
line ``{"event": "result", ...}`` as its last stdout line: ``framework``, ``backend``, ``rank``, ``world_size``,
``devices`` (in the collective), ``contributed`` (this rank's share of the expected sum), ``init_s`` and
``sizes``: ``[{"bytes", "elements", "iterations", "median_s", "min_s", "max_s", "first", "last"}]``: the timed
iterations and the median, fastest and slowest of their seconds, and the first and last elements after a fresh
reduction. The line's size is bounded by the number of sizes, not of iterations (100,000 raw times per size made a
multi-megabyte line that a log reader or the kubelet's log rotation could cut). It computes no bandwidth and
judges nothing: the gate does.
A failure is the framework's own exception text on stderr and a non-zero exit.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict


class JoinFacts(TypedDict):
    """What joining the collective tells of it (the result line's fields): the ``framework`` and its version, the
    collective ``backend``, the ``devices`` in the collective, this rank's ``contributed`` share of the expected
    sum, and ``init_s`` (seconds the join took)."""

    framework: str
    backend: str
    devices: int
    contributed: int
    init_s: float


if TYPE_CHECKING:  # an alias for annotations only: the image's interpreter may be older than the gate's
    Run = Callable[[int], tuple[list[float], float, float]]
    """``run(elements)``: the all-reduce of ``elements`` float32 timed per iteration, and the first and last
    elements of a fresh reduction."""


def _env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def _torch(rank: int, world: int, addr: str, port: int, timeout_s: float) -> tuple[JoinFacts, Run]:
    """Join the torch.distributed process group; return (facts, run(elements) -> (seconds list, first, last))."""
    import datetime

    import torch  # type: ignore[import-not-found,unused-ignore]
    import torch.distributed as dist  # type: ignore[import-not-found,unused-ignore]

    backend = _env("HETERO_BACKEND")
    npu = False
    try:
        import torch_npu  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
        npu = True
    except ImportError:
        pass
    if not backend:
        backend = "nccl" if torch.cuda.is_available() else "hccl" if npu else "gloo"
    local = int(_env("LOCAL_RANK", "0"))
    if backend == "nccl":
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        sync: Callable[[], None] = torch.cuda.synchronize
    elif backend == "hccl":
        device = torch.device("npu", local)
        torch.npu.set_device(device)
        sync = torch.npu.synchronize
    else:
        device = torch.device("cpu")
        sync = lambda: None  # noqa: E731
    t0 = time.perf_counter()
    dist.init_process_group(backend, init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    facts: JoinFacts = {"framework": f"torch {torch.__version__}", "backend": backend, "devices": world,
                        "contributed": rank + 1, "init_s": time.perf_counter() - t0}
    iters, warmup = int(_env("HETERO_ITERATIONS", "5")), int(_env("HETERO_WARMUP", "1"))

    def run(elements: int) -> tuple[list[float], float, float]:
        x = torch.full((elements,), float(rank + 1), dtype=torch.float32, device=device)
        for _ in range(warmup):
            dist.all_reduce(x)
        sync()
        times = []
        for _ in range(iters):
            start = time.perf_counter()
            dist.all_reduce(x)
            sync()
            times.append(time.perf_counter() - start)
        x.fill_(float(rank + 1))
        dist.all_reduce(x)
        sync()
        return times, float(x[0].item()), float(x[-1].item())

    return facts, run


def _jax(rank: int, world: int, addr: str, port: int, timeout_s: float) -> tuple[JoinFacts, Run]:
    """Join jax.distributed (gloo collectives on CPU); return (facts, run) like :func:`_torch`."""
    import jax  # type: ignore[import-not-found,unused-ignore]
    import numpy as np  # type: ignore[import-not-found,unused-ignore]
    from jax.sharding import Mesh, NamedSharding  # type: ignore[import-not-found,unused-ignore]
    from jax.sharding import PartitionSpec as P  # type: ignore[import-not-found,unused-ignore]

    try:
        from jax import shard_map  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        from jax.experimental.shard_map import shard_map  # type: ignore[import-not-found,unused-ignore]
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    t0 = time.perf_counter()
    jax.distributed.initialize(coordinator_address=f"{addr}:{port}", num_processes=world, process_id=rank,
                               initialization_timeout=max(1, int(timeout_s)))
    devices = jax.devices()
    mesh = Mesh(np.array(devices), ("x",))
    local_n = jax.local_device_count()
    platform = devices[0].platform
    backend = "gloo" if platform == "cpu" else "nccl" if platform == "gpu" else platform
    facts: JoinFacts = {"framework": f"jax {jax.__version__}", "backend": backend, "devices": len(devices),
             "contributed": (rank + 1) * local_n, "init_s": time.perf_counter() - t0}
    reduce = jax.jit(shard_map(lambda a: jax.lax.psum(a, "x"), mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    iters, warmup = int(_env("HETERO_ITERATIONS", "5")), int(_env("HETERO_WARMUP", "1"))
    sharding = NamedSharding(mesh, P("x"))

    def run(elements: int) -> tuple[list[float], float, float]:
        local = np.full((local_n, elements), float(rank + 1), dtype=np.float32)
        x = jax.make_array_from_process_local_data(sharding, local)
        out = reduce(x)
        out.block_until_ready()  # compiles once per shape, outside the timed loop
        for _ in range(max(0, warmup - 1)):
            reduce(x).block_until_ready()
        times = []
        for _ in range(iters):
            start = time.perf_counter()
            out = reduce(x)
            out.block_until_ready()
            times.append(time.perf_counter() - start)
        mine = np.asarray(out.addressable_data(0))
        return times, float(mine[0, 0]), float(mine[0, -1])

    return facts, run


def main() -> int:
    """Join the collective, time the all-reduce at each size, print the result line; 0, or raise."""
    rank, world = int(_env("HETERO_RANK")), int(_env("HETERO_WORLD_SIZE"))
    addr, port = _env("HETERO_RENDEZVOUS_ADDR"), int(_env("HETERO_RENDEZVOUS_PORT"))
    timeout_s = float(_env("HETERO_RENDEZVOUS_TIMEOUT_S", "60"))
    sizes = [int(s) for s in _env("HETERO_SIZES", "4096").split(",") if s]
    framework = _env("HETERO_FRAMEWORK", "auto")
    join = None
    if framework in ("auto", "torch"):
        try:
            import torch  # type: ignore[import-not-found,unused-ignore]  # noqa: F401

            join = _torch
        except ImportError:
            if framework == "torch":
                raise
    if join is None and framework in ("auto", "jax"):
        try:
            import jax  # type: ignore[import-not-found,unused-ignore]  # noqa: F401

            join = _jax
        except ImportError:
            if framework == "jax":
                raise
    if join is None:
        print("hetero-collective: no collective framework in the image (neither torch nor jax imports)",
              file=sys.stderr)
        return 3
    print(json.dumps({"event": "joining", "rank": rank, "world_size": world}), flush=True)
    facts, run = join(rank, world, addr, port, timeout_s)
    print(json.dumps({"event": "joined", "rank": rank, **facts}), flush=True)
    measured = []
    for size in sizes:
        elements = max(1, size // 4)
        times, first, last = run(elements)
        ordered = sorted(times)
        half = len(ordered) // 2
        median = ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2
        measured.append({"bytes": elements * 4, "elements": elements, "iterations": len(ordered),
                         "median_s": median, "min_s": ordered[0], "max_s": ordered[-1], "first": first,
                         "last": last})
    print(json.dumps({"event": "result", "rank": rank, "world_size": world, **facts, "sizes": measured}),
          flush=True)
    sys.stdout.flush()
    os._exit(0)  # a framework's atexit shutdown may wait on peers that already left: the result is written


if __name__ == "__main__":
    sys.exit(main())
