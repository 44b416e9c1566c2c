"""Cost of sampling a Docker model run through the engine's stats API, on the real engine.

One container (``pytest-hetero/py311-onnx:1``, the example's cpu-2c limits: 2 CPUs, 512 MiB, no network,
the digits case mounted read-only as the gate mounts it) serves every round. A round runs the model the
way the gate's Docker engine does (:func:`pytest_hetero.backends.docker.client.run_exec`: the exec
wrapper, streams captured) and times its wall clock, three ways, interleaved:

- ``plain``: the exec alone (the baseline);
- ``stats 1 s``: with :class:`~pytest_hetero.backends.docker.usage.StatsSampling` around it, as the engine
  does: the engine's stats stream read on a thread of its own, one document per 1 s tick (Docker's stats
  collector interval: the API offers no faster series, so there is no 100 ms variant).

Two workloads: ``digits`` (the real digits model run, ~0.6 s: shorter than a tick) and ``hold`` (the
digits run after 3 s of a pure-Python loop, so samples fall during it; the count printed shows they were
taken). Prints each median with its spread and ``ratio stats/plain``; exits 1 when the 1 s ratio of a
workload is above :data:`TARGET`. Needs the image (tests/infra/docker-engine.sh images).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import docker
import docker.types

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_hetero.backends.docker import client as docker_run  # noqa: E402
from pytest_hetero.backends.docker.usage import StatsSampling, stream_opener
from pytest_hetero.backends.labels import RUN_ID
from pytest_hetero.matrix.load import load_matrix

MATRIX = ROOT / "matrices" / "example-docker.matrix.yaml"
TARGET = 1.02
"""Most the model run's wall time may grow with 1 s stats sampling (issue 33)."""
HOLD = "import time; end = time.perf_counter() + 3.0\nwhile time.perf_counter() < end: sum(range(1000))\n"


def main() -> int:
    """Run the rounds (``--rounds``, default 7) and print the medians and ratios; 1 when a ratio misses."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    api = docker_run.make_client(docker_run.connection({}), docker_run.API_TIMEOUT_S)
    long_api = docker_run.make_client({**docker_run.connection({}), "version": api.api_version}, None)
    stats_api = docker_run.make_client({**docker_run.connection({}), "version": api.api_version},
                                       docker_run.API_TIMEOUT_S)
    matrix = load_matrix(MATRIX)
    image, model, data = matrix.images[0], matrix.models[0], matrix.datasets[0]
    code = model.code or MATRIX.parent
    mounts = [docker.types.Mount(m["target"], m["source"], type="bind", read_only=True)
              for m in docker_run.input_mounts([(model.name, model.path, code)], [(data.name, data.path)])]
    host = api.create_host_config(nano_cpus=2 * 10**9, mem_limit=512 * 2**20, memswap_limit=512 * 2**20,
                                  network_mode="none", mounts=mounts)
    name = f"hetero-bench-stats-{uuid.uuid4().hex[:8]}"
    cid = api.create_container(image.reference, command=docker_run.KEEP_ALIVE, host_config=host, name=name,
                               labels={RUN_ID: "bench-stats"})["Id"]
    paths = docker_run.container_paths(model.name, model.path, code, data.name, data.path)
    digits = ["python3", f"{paths['code']}/infer.py", "--model", paths["model"], "--data", paths["dataset"],
              "--out", "/tmp/hetero-run/bench/outputs.json", "--provider", "CPUExecutionProvider"]
    workloads = {"digits": digits, "hold": ["python3", "-c", HOLD + "import runpy, sys; sys.argv = sys.argv[1:]; "
                                                                   "runpy.run_path(sys.argv[0], run_name='__main__')",
                                            *digits[1:]]}

    def exec_once(argv: list[str]) -> float:
        result = docker_run.run_exec(api, long_api, cid, argv, "/tmp/hetero-run/bench", {}, paths["code"], 120)
        if result.exit_code != 0:
            raise SystemExit(f"model run failed ({result.exit_code}): {result.stderr[-2000:]}")
        return result.duration_s

    def sampled(argv: list[str]) -> float:
        stats = StatsSampling(stream_opener(stats_api), cid, name)
        start = time.perf_counter()
        stats.start()
        stats.during = True
        exec_once(argv)
        stats.during = False
        stats.stop()
        seconds = time.perf_counter() - start
        counts.append(stats.result()["samples"])
        return seconds

    def plain(argv: list[str]) -> float:
        start = time.perf_counter()
        exec_once(argv)
        return time.perf_counter() - start

    ways: dict[str, Callable[[list[str]], float]] = {"plain": plain, "stats 1 s": sampled}
    missed = False
    counts: list[int] = []
    try:
        api.start(cid)
        for workload, argv in workloads.items():
            times: dict[str, list[float]] = {way: [] for way in ways}
            counts.clear()
            for warm in ways.values():  # warm-up: page cache, the engine's exec path
                warm(argv)
            for r in range(args.rounds):
                for way, run in ways.items():
                    times[way].append(run(argv))
                print(f"{workload} round {r + 1}: " + ", ".join(f"{w} {t[-1]:.3f} s" for w, t in times.items()))
            base = statistics.median(times["plain"])
            for way, values in times.items():
                ratio = statistics.median(values) / base
                print(f"{workload} {way}: median {statistics.median(values):.3f} s "
                      f"({min(values):.3f}–{max(values):.3f}), ratio {way}/plain = {ratio:.3f}"
                      + (f" (target <= {TARGET})" if way == "stats 1 s" else ""))
                missed |= way == "stats 1 s" and ratio > TARGET
            print(f"{workload}: stats samples per run {sorted(counts)}")
    finally:
        api.remove_container(cid, force=True, v=True)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
