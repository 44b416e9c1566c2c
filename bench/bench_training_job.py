"""Cost of the gate's communication check on the Docker backend against the same all-reduce run plainly.

Gate: ``python -m pytest m.matrix.yaml -k communication`` as a fresh process, timed whole (interpreter, plugin,
collection, the job: network + two confined rank containers running the gate's all-reduce program through jax's
gloo, every rank read, the gate's busbw arithmetic, removal, the evidence bundle).

Plain: in this process, with the docker SDK: create a bridge network, start the same two containers from the same
image with the same program and environment, wait for both, read their logs, remove them and the network. It
leaves out what only the gate does (the matrix, confinement options, the verdict, the bundle).

One warm-up of each, then ``--rounds`` interleaved rounds; prints each round, the medians with their spread
(min–max) and ``ratio gate/plain``. Needs a Docker engine with ``pytest-hetero/py311-jax:1``
(tests/docker/trainkit.py builds it) and the digits case.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "docker")]

import docker  # noqa: E402

from pytest_hetero.probes.jobs import ALLREDUCE, text  # noqa: E402

IMAGE = "pytest-hetero/py311-jax:1"
ENV = {"HETERO_WORLD_SIZE": "2", "HETERO_RENDEZVOUS_PORT": "29500", "HETERO_SIZES": "4096,262144",
       "HETERO_ITERATIONS": "3", "HETERO_WARMUP": "1", "HETERO_FRAMEWORK": "auto", "HETERO_RENDEZVOUS_TIMEOUT_S": "20"}


def gate_once(folder: Path) -> float:
    """One gate command, timed whole (seconds)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "m.matrix.yaml", "-q", "-p", "no:cacheprovider", "-p",
                    "no:randomly", "-k", "communication"], cwd=folder, check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONPATH": str(REPO), "HETERO_ALLOW_PATHS": str(REPO / "cases")})
    return time.perf_counter() - start


def plain_once(api: docker.APIClient, program: Path) -> float:
    """The same two-rank all-reduce with plain docker SDK calls (seconds)."""
    start = time.perf_counter()
    net = f"plain-{os.urandom(4).hex()}"
    api.create_network(net, driver="bridge")
    ids = []
    try:
        for rank in range(2):
            hc = api.create_host_config(network_mode=net, binds={str(program): {"bind": "/job", "mode": "ro"}})
            cid = api.create_container(IMAGE, command=["python3", f"/job/{ALLREDUCE}"], name=f"{net}-r{rank}",
                                       host_config=hc, environment={**ENV, "HETERO_RANK": str(rank),
                                                                    "HETERO_RENDEZVOUS_ADDR": f"{net}-r0"})["Id"]
            ids.append(cid)
            api.start(cid)
        for cid in ids:
            assert api.wait(cid)["StatusCode"] == 0
            assert b'"event": "result"' in api.logs(cid)
    finally:
        for cid in ids:
            api.remove_container(cid, force=True)
        api.remove_network(net)
    return time.perf_counter() - start


def main() -> int:
    """Run the rounds; print each, the medians with spread and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from dockerkit import docker_matrix

    api = docker.APIClient(timeout=120)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        doc = json.loads(docker_matrix(image=IMAGE))
        doc["spec"]["models"][0].update(task_type="training", training={"communication": {
            "sizes": [4096, 262144], "iterations": 3, "rendezvous_timeout": "20s"}})
        (folder / "m.matrix.yaml").write_text(json.dumps(doc))
        program = folder / "prog"
        program.mkdir()
        (program / ALLREDUCE).write_bytes(text(ALLREDUCE))
        gate_once(folder), plain_once(api, program)  # warm-up
        gates, plains = [], []
        for n in range(args.rounds):
            gates.append(gate_once(folder))
            plains.append(plain_once(api, program))
            print(f"round {n + 1}: gate {gates[-1]:.2f} s, plain {plains[-1]:.2f} s")
    g, p = statistics.median(gates), statistics.median(plains)
    print(f"gate median {g:.2f} s ({min(gates):.2f}–{max(gates):.2f}); plain median {p:.2f} s "
          f"({min(plains):.2f}–{max(plains):.2f})")
    print(f"ratio gate/plain = {g / p:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
