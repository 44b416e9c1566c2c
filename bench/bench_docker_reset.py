"""Cost of isolating model runs on Docker: the reset between runs against a fresh container per run.

Both return a workload container to a state no earlier model run can influence, on the real engine:

- reset: what the gate does (``backends/docker/client.py`` ``reset``): one ``docker exec`` of the reset
  script (kill every process but PID 1, empty ``/tmp``, ``/dev/shm``, ``/dev/mqueue``, remove every ``/dev``
  entry not in the baseline, ``ipcrm``) in the running container, after a model run that left a process,
  a ``/dev`` folder, link and queue behind;
- fresh: remove that container and create + start a new one with the same configuration (read-only root,
  ``/tmp`` tmpfs, the resource's CPU and memory limits), until it runs.

Rounds alternate (after one warm-up of each); prints each round, the medians with their spread and
``ratio fresh/reset = X.XX``. Needs a Docker engine with ``pytest-hetero/py311-onnx:1``
(tests/infra/docker-engine.sh images). ``--rounds N`` (default 9).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import docker
import docker.utils

from pytest_hetero.backends.docker import client as run

IMAGE = "pytest-hetero/py311-onnx:1"
DIRTY = ("sleep 300 & mkdir -p /dev/left && ln -sf /tmp/x /dev/left-link && echo > /dev/mqueue/left "
         "&& echo x > /tmp/left && echo x > /dev/shm/left")
"""What a model run leaves behind before each measured step."""


def container(api: Any) -> str:
    config = api.create_host_config(read_only=True, tmpfs=dict(run.WORK_TMPFS), nano_cpus=1_000_000_000,
                                    mem_limit=256 << 20)
    cid: str = api.create_container(IMAGE, run.KEEP_ALIVE, host_config=config,
                                    labels={"pytest-hetero.bench": "reset"})["Id"]
    api.start(cid)
    while not api.inspect_container(cid)["State"]["Running"]:
        time.sleep(0.01)
    return cid


def dirty(api: Any, cid: str) -> None:
    ex = api.exec_create(cid, ["/bin/sh", "-c", DIRTY])
    api.exec_start(ex["Id"], detach=True)
    time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    api = docker.APIClient(timeout=120, **docker.utils.kwargs_from_env())
    cid = container(api)
    baseline = run.dev_baseline(api, cid)
    resets: list[float] = []
    freshes: list[float] = []
    try:
        for i in range(args.rounds + 1):
            dirty(api, cid)
            start = time.perf_counter()
            why = run.reset(api, cid, baseline)
            took_reset = time.perf_counter() - start
            if why:
                print(f"reset failed: {why}", file=sys.stderr)
                return 1
            dirty(api, cid)
            start = time.perf_counter()
            api.remove_container(cid, force=True, v=True)
            cid = container(api)
            took_fresh = time.perf_counter() - start
            if i == 0:
                continue  # warm-up
            resets.append(took_reset)
            freshes.append(took_fresh)
            print(f"round {i}: reset {took_reset * 1000:.0f} ms, fresh container {took_fresh * 1000:.0f} ms")
    finally:
        api.remove_container(cid, force=True, v=True)
    r, f = statistics.median(resets), statistics.median(freshes)
    print(f"reset median {r * 1000:.0f} ms ({min(resets) * 1000:.0f}-{max(resets) * 1000:.0f}); fresh container "
          f"median {f * 1000:.0f} ms ({min(freshes) * 1000:.0f}-{max(freshes) * 1000:.0f})")
    print(f"ratio fresh/reset = {f / r:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
