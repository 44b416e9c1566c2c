"""Overhead of the whole gate command on the Docker backend against the plain container sequence, on the real engine.

Gate: ``python -m pytest matrices/example-docker.matrix.yaml -k "startup or model or business"`` as
a fresh process, timed whole: interpreter start, plugin and engine client import, collection, the
items (one container per resource × image, device payload, model exec, outputs copied out),
container removal, and the whole bundle (journal, evidence.json, renderings, manifest, statement).

Plain: ``python bench/bench_docker_overhead.py --plain-once`` as a fresh process, timed whole:
interpreter start, docker SDK import, then the same sequence with the SDK: inspect the image,
create + start the container with the same limits and read-only mounts, exec the same device
payload, exec the same model command, copy ``outputs.json`` out, remove the container, and write
the outputs to a file. It leaves out what only the gate does: the matrix (YAML, schema, plan),
the per-layer verdicts and the evidence bundle; that is the overhead measured.

Rounds alternate gate and plain (interleaved) after one warm-up of each. Prints each round, the
medians with their spread (min–max) and ``ratio gate/plain = X.XX (target <= 1.15)``; exits 1 above
the target. Needs a Docker engine with ``pytest-hetero/py311-onnx:1`` (tests/infra/docker-engine.sh images).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import docker
import docker.types

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_hetero.backends.docker import client as docker_run
from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.probes.payload import payload_script

MATRIX = ROOT / "matrices" / "example-docker.matrix.yaml"
TARGET = 1.15


def gate_once(report_dir: Path) -> float:
    """One whole gate command (startup, model and business items); returns wall seconds (raises on failure)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", str(MATRIX), "-q", "-p", "no:cacheprovider",
                           "-k", "startup or model or business", "--hetero-report-dir", str(report_dir)],
                          cwd=ROOT, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"gate run failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}")
    return seconds


def plain_once(out: Path) -> float:
    """One whole plain process (this script with ``--plain-once``); returns wall seconds."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--plain-once", str(out)], capture_output=True, text=True,
                          check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"plain run failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds


def direct_once(api: docker.APIClient, out: Path) -> float:
    """The same container run/exec sequence with the docker SDK only, outputs written to ``out``; returns seconds."""
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
            fh = tar.extractfile(member) if member is not None else None
            assert fh is not None
            out.write_bytes(fh.read())
    finally:
        api.remove_container(cid, force=True, v=True)
    return time.perf_counter() - start


def spread(values: list[float]) -> str:
    """``median s (min–max)``."""
    return f"{statistics.median(values):.3f} s ({min(values):.3f}–{max(values):.3f})"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 0 when the median ratio is within :data:`TARGET`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds of each (default 5)")
    parser.add_argument("--plain-once", metavar="OUT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.plain_once:
        api = docker.APIClient(**{**docker.utils.kwargs_from_env(), "timeout": 120})
        direct_once(api, Path(args.plain_once))
        return 0
    gate_s: list[float] = []
    plain_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="hetero-bench-") as tmp:
        gate_once(Path(tmp) / "reports")
        plain_once(Path(tmp) / "outputs.json")
        for i in range(args.rounds):
            gate_s.append(gate_once(Path(tmp) / "reports"))
            plain_s.append(plain_once(Path(tmp) / "outputs.json"))
            print(f"round {i + 1}: gate {gate_s[-1]:.3f} s  plain {plain_s[-1]:.3f} s", flush=True)
    ratio = statistics.median(gate_s) / statistics.median(plain_s)
    print("resource x image: cpu-2c x py311-onnx (startup + model + business), whole processes")
    print(f"gate  {spread(gate_s)}")
    print(f"plain {spread(plain_s)}")
    print(f"ratio gate/plain = {ratio:.2f} (target <= {TARGET})")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
