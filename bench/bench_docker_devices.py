"""Cost of sampling a Docker model run's devices inside its container (issue 33), on the real engine.

One container serves every round: the Docker test image (``pytest-hetero/py311-onnx:1``) plus the STAND-IN
``nvidia-smi`` of the real node's ``accel-standin:4`` (tests/kubernetes/realimages.py: a shell script looping
with ``-lms``, not NVIDIA's tool) and ``NVIDIA_VISIBLE_DEVICES`` set, the example's cpu-2c limits, ``/tmp`` a
tmpfs, the digits case mounted read-only. A round runs the model as the gate's Docker engine does
(:func:`pytest_hetero.backends.docker.client.run_exec`) and times its wall clock, two ways, interleaved:

- ``plain``: the exec alone (the baseline: a CPU row);
- ``devices 1 s``: as on a GPU row: :func:`pytest_hetero.backends.docker.devices.start` (a detached exec of the
  wrapper sampling ``nvidia-smi`` every 1 s), the exec, then :func:`~pytest_hetero.backends.docker.devices.finish`
  (one exec stopping it and reading the samples back, parsed).

Workloads: ``digits`` (the digits run, well under a second) and ``hold`` (3 s of a pure-Python loop, then the
digits run). Prints each median with its spread and ``ratio devices/plain``; exits 1 when ``hold``'s ratio is
above :data:`TARGET`. Needs the engine and the image (tests/infra/docker-engine.sh images).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import docker
import docker.types

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "kubernetes"))

import realimages  # noqa: E402

from pytest_hetero.backends.docker import client as docker_run  # noqa: E402
from pytest_hetero.backends.docker import devices  # noqa: E402
from pytest_hetero.backends.labels import RUN_ID  # noqa: E402
from pytest_hetero.matrix.load import load_matrix  # noqa: E402
from pytest_hetero.probes.usage import unavailable  # noqa: E402

MATRIX = ROOT / "matrices" / "example-docker.matrix.yaml"
TARGET = 1.02
"""Most the model run's wall time may grow with 1 s device sampling (issue 33)."""
HOLD = "import time; end = time.perf_counter() + 3.0\nwhile time.perf_counter() < end: sum(range(1000))\n"


def build(base: str, tag: str) -> None:
    """Build ``tag``: ``base`` plus the stand-in ``nvidia-smi`` and ``NVIDIA_VISIBLE_DEVICES`` (offline)."""
    with tempfile.TemporaryDirectory(prefix="hetero-bench-") as tmp:
        root = Path(tmp)
        (root / "Dockerfile").write_text(f"FROM {base}\nCOPY nvidia-smi /usr/local/bin/\n"
                                         "ENV NVIDIA_VISIBLE_DEVICES=GPU-00000000-0000-4000-8000-0000000000be\n")
        (root / "nvidia-smi").write_text(realimages.STANDIN_SMI_LMS)
        (root / "nvidia-smi").chmod(0o755)
        subprocess.run(["docker", "build", "-q", "--network", "none", "-t", tag, str(root)], capture_output=True,
                       timeout=300, check=True)


def main() -> int:
    """Run the rounds (``--rounds``, default 7) and print the medians and ratios; 1 when the target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    api = docker_run.make_client(docker_run.connection({}), docker_run.API_TIMEOUT_S)
    long_api = docker_run.make_client({**docker_run.connection({}), "version": api.api_version}, None)
    matrix = load_matrix(MATRIX)
    image, model, data = matrix.images[0], matrix.models[0], matrix.datasets[0]
    tag = f"hetero-bench/devices-standin:{uuid.uuid4().hex[:8]}"
    build(image.reference, tag)
    code = model.code or MATRIX.parent
    mounts = [docker.types.Mount(m["target"], m["source"], type="bind", read_only=True)
              for m in docker_run.input_mounts([(model.name, model.path, code)], [(data.name, data.path)])]
    host = api.create_host_config(nano_cpus=2 * 10**9, mem_limit=512 * 2**20, memswap_limit=512 * 2**20,
                                  network_mode="none", mounts=mounts, tmpfs={"/tmp": "rw,exec,mode=1777"})
    cid = api.create_container(tag, command=docker_run.KEEP_ALIVE, host_config=host,
                               name=f"hetero-bench-devices-{uuid.uuid4().hex[:8]}",
                               labels={RUN_ID: "bench-devices"})["Id"]
    paths = docker_run.container_paths(model.name, model.path, code, data.name, data.path)
    digits = ["python3", f"{paths['code']}/infer.py", "--model", paths["model"], "--data", paths["dataset"],
              "--out", "/tmp/outputs.json", "--provider", "CPUExecutionProvider"]
    workloads = {"digits": digits, "hold": ["python3", "-c", HOLD + "import runpy, sys; sys.argv = sys.argv[1:]; "
                                                                   "runpy.run_path(sys.argv[0], run_name='__main__')",
                                            *digits[1:]]}
    samples: list[int] = []

    def exec_once(argv: list[str], run_dir: str) -> None:
        result = docker_run.run_exec(api, long_api, cid, argv, run_dir, {}, paths["code"], 120)
        if result.exit_code != 0:
            raise SystemExit(f"model run failed ({result.exit_code}): {result.stderr[-2000:]}")

    def plain(argv: list[str]) -> float:
        start = time.perf_counter()
        exec_once(argv, f"/tmp/hetero-run/{uuid.uuid4().hex[:8]}")
        return time.perf_counter() - start

    def sampled(argv: list[str]) -> float:
        run_dir = f"/tmp/hetero-run/{uuid.uuid4().hex[:8]}"
        start = time.perf_counter()
        refused = devices.start(api, cid, "0:0", "python3", run_dir, "nvidia-smi", 120)
        exec_once(argv, run_dir)
        usage = unavailable("the container's cgroup is not sampled here: only its devices")
        devices.finish(api, cid, "0:0", run_dir, usage, "nvidia-smi", refused)
        seconds = time.perf_counter() - start
        if not usage["device_sampling"]["available"]:
            raise SystemExit(f"no device samples: {usage['device_sampling']}")
        samples.append(usage["device_sampling"]["samples"])
        return seconds

    ways: dict[str, Callable[[list[str]], float]] = {"plain": plain, "devices 1 s": sampled}
    missed = False
    try:
        api.start(cid)
        for workload, argv in workloads.items():
            times: dict[str, list[float]] = {way: [] for way in ways}
            for warm in ways.values():  # warm-up: page cache, the engine's exec path
                warm(argv)
            samples.clear()
            for r in range(args.rounds):
                order = list(ways.items()) if r % 2 == 0 else list(reversed(ways.items()))
                for way, run in order:
                    times[way].append(run(argv))
                print(f"{workload} round {r + 1}: " + ", ".join(f"{w} {t[-1]:.3f} s" for w, t in times.items()),
                      flush=True)
            base = statistics.median(times["plain"])
            for way, values in times.items():
                ratio = statistics.median(values) / base
                print(f"{workload} {way}: median {statistics.median(values):.3f} s "
                      f"({min(values):.3f}-{max(values):.3f}), ratio {way}/plain = {ratio:.3f}"
                      + (f" (target <= {TARGET})" if way != "plain" else ""))
                missed |= workload == "hold" and way != "plain" and ratio > TARGET
            print(f"{workload}: device samples per run {sorted(samples)}")
    finally:
        api.remove_container(cid, force=True, v=True)
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=120, check=False)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
