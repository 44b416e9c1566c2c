"""Harness overhead of the Docker backend per resource × image, on the real engine.

Plugin: ``pytest matrices/example-docker.matrix.yaml -k "startup or model or business"`` in this
process; timed from the start of the run-test loop to the end of the backend's close (container
removed), so collection and report writing (per run, not per resource × image) are left out.
Direct: the same container run/exec sequence with the docker SDK in this process: inspect the
image, create + start the container with the same limits and read-only mounts, exec the same
device payload, exec the same model command, copy ``outputs.json`` out, remove the container.

Rounds alternate plugin and direct after one warm-up of each; medians are compared.
Prints one line per round and ``ratio plugin/direct = X.XX (target <= 1.15)``; exits 1 above
the target. Needs a Docker engine with ``pytest-hetero/py311-onnx:1`` (tests/infra/docker-engine.sh images).
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import docker
import docker.types
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loop_timer import LoopTimer

from pytest_hetero.backends.docker import client as docker_run
from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.probes.payload import payload_script

MATRIX = ROOT / "matrices" / "example-docker.matrix.yaml"
TARGET = 1.15


def plugin_once(report_dir: Path) -> float:
    """One plugin run of the startup, model and business items; returns seconds (raises on failure)."""
    timer = LoopTimer()
    code = pytest.main([str(MATRIX), "-q", "-p", "no:cacheprovider", "-k", "startup or model or business",
                        "--hetero-report-dir", str(report_dir), "-W", "ignore::pytest.PytestAssertRewriteWarning"],
                       plugins=[timer])
    if code != 0:
        raise SystemExit(f"plugin run failed (exit {code})")
    return timer.seconds


def direct_once(api: docker.APIClient) -> float:
    """The same container run/exec sequence with the docker SDK only; returns seconds."""
    matrix = load_matrix(MATRIX)
    image, model, data = matrix.images[0], matrix.models[0], matrix.datasets[0]
    code = model.code or MATRIX.parent
    mounts = [docker.types.Mount(m["target"], m["source"], type="bind", read_only=True)
              for m in docker_run.input_mounts([(model.name, model.path, code)], [(data.name, data.path)])]
    memory = 512 * 2**20  # the example's cpu-2c limits: cpu 2, memory 512Mi
    start = time.perf_counter()
    api.inspect_image(image.reference)
    host = api.create_host_config(nano_cpus=2 * 10**9, mem_limit=memory, memswap_limit=memory,
                                  network_mode="none", mounts=mounts)
    cid = api.create_container(image.reference, command=docker_run.KEEP_ALIVE, host_config=host,
                               labels={docker_run.RUN_ID: "bench-direct"})["Id"]
    try:
        api.start(cid)
        api.exec_start(api.exec_create(cid, ["/bin/sh", "-c", payload_script()])["Id"])
        paths = docker_run.container_paths(model.name, model.path, code, data.name, data.path)
        argv = ["python3", f"{paths['code']}/infer.py", "--model", paths["model"], "--data", paths["dataset"],
                "--out", "/tmp/outputs.json", "--provider", "CPUExecutionProvider"]
        ex = api.exec_create(cid, argv, workdir=paths["code"])
        api.exec_start(ex["Id"], demux=True)
        if api.exec_inspect(ex["Id"])["ExitCode"] != 0:
            raise SystemExit("direct model run failed")
        stream, _ = api.get_archive(cid, "/tmp/outputs.json")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.next()
            assert member is not None and tar.extractfile(member) is not None
    finally:
        api.remove_container(cid, force=True, v=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 0 when the median ratio is within :data:`TARGET`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds of each (default 5)")
    args = parser.parse_args(argv)
    api = docker.APIClient(**{**docker.utils.kwargs_from_env(), "timeout": 120})
    plugin_s: list[float] = []
    direct_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="hetero-bench-") as tmp:
        plugin_once(Path(tmp))
        direct_once(api)
        for i in range(args.rounds):
            plugin_s.append(plugin_once(Path(tmp)))
            direct_s.append(direct_once(api))
            print(f"round {i + 1}: plugin {plugin_s[-1]:.3f} s  direct {direct_s[-1]:.3f} s", flush=True)
    ratio = statistics.median(plugin_s) / statistics.median(direct_s)
    print("resource x image: cpu-2c x py311-onnx (startup + model + business)")
    print(f"median plugin {statistics.median(plugin_s):.3f} s, direct {statistics.median(direct_s):.3f} s")
    print(f"ratio plugin/direct = {ratio:.2f} (target <= {TARGET})")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
