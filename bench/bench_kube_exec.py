"""One exec into a pod: the gate's CPU per exec against the official client's ``kubernetes.stream.stream`` (issue 32).

A model run on Kubernetes is execs into its pod (on a run's own pod: two, the run with its inputs and the exit-status
check with its outputs), and an exec was most of a run's gate CPU. On the project's KWOK plane (``eval "$(bash
tests/infra/kubeplane.sh env)"`` first; the plane is never started or changed here): one KWOK node and a namespace
with a ClusterExec (:func:`bench.bench_node_coverage.kwok_pool`), one Running pod, then ``--execs`` sequential
execs of ``sh -c 'echo ok'`` each way, the exit code and stdout checked:

- **gate**: :func:`pytest_hetero.backends.kubernetes.podexec.run` (one TLS context per client configuration, the
  apiserver's TLS session resumed, the handshake's answer read ahead, messages read by channel);
- **plain**: the official client's way, ``kubernetes.stream.stream(core.connect_get_namespaced_pod_exec, …,
  _preload_content=False)``, read until the stream closes (``WSClient.run_forever``), its ``returncode``.

Both in this process, interleaved rounds (``--rounds``, which goes first alternating); the measure is this process's
CPU time (user + system, ``time.process_time``) per exec, and the wall time per exec beside it (the exec runs on this
host, under KWOK: the wall depends on the machine's load). Medians with the spread (min-max) and the ratio gate /
plain. Usage: ``python bench/bench_kube_exec.py [--execs 200] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from kubernetes import client, config
from kubernetes.stream import stream

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_node_coverage import kwok_pool  # noqa: E402 - the repository root is on the path
from pytest_hetero.backends.kubernetes import podexec  # noqa: E402 - the repository root is on the path

ARGV = ["/bin/sh", "-c", "echo ok"]


def running_pod(core: client.CoreV1Api, namespace: str, tag: str) -> str:
    """A pod on the bench's KWOK node, Running (KWOK stages; 60 s at most); its name."""
    name = f"execbench-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_pod(namespace, {  # type: ignore[arg-type]  # a manifest dict
        "metadata": {"name": name},
        "spec": {"nodeSelector": {"hetero-bench": tag}, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "workload", "image": "python:3.11", "command": ["sleep", "infinity"]}]}})
    deadline = time.monotonic() + 60
    while getattr(core.read_namespaced_pod(name, namespace).status, "phase", None) != "Running":
        if time.monotonic() > deadline:
            raise RuntimeError(f"pod {name} not Running after 60 s")
        time.sleep(0.2)
    return name


def gate_exec(core: client.CoreV1Api, namespace: str, pod: str) -> None:
    """One exec the gate's way; raises AssertionError when its answer is not ``ok`` with exit 0."""
    done = podexec.run(core, namespace, pod, "workload", ARGV, 30)
    assert (done.exit_code, done.stdout) == (0, "ok\n"), done


def plain_exec(core: client.CoreV1Api, namespace: str, pod: str) -> None:
    """One exec the official client's way (``kubernetes.stream.stream``); raises AssertionError as :func:`gate_exec`."""
    ws = stream(core.connect_get_namespaced_pod_exec, pod, namespace, container="workload", command=ARGV,
                stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
    ws.run_forever(timeout=30)
    out = ws.read_stdout() if ws.peek_stdout() else ""
    code = ws.returncode
    ws.close()
    assert (code, out) == (0, "ok\n"), (code, out)


def measure(way: Callable[[client.CoreV1Api, str, str], None], core: client.CoreV1Api, namespace: str, pod: str,
            execs: int) -> tuple[float, float]:
    """(CPU ms, wall ms) per exec of ``execs`` sequential execs ``way``."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(execs):
        way(core, namespace, pod)
    return (time.process_time() - cpu) * 1000 / execs, (time.perf_counter() - wall) * 1000 / execs


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print each round and the medians with their spread."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--execs", type=int, default=200, help="execs per way and round (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    args = parser.parse_args(argv)
    ways = {"gate": gate_exec, "plain": plain_exec}
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    with kwok_pool(parser, "hetero-benchexec", 1) as (kubeconfig, tag, namespace):
        core = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))  # type: ignore[no-untyped-call]
        pod = running_pod(core, namespace, tag)
        for way in ways.values():  # warm: imports, the first full TLS handshake
            measure(way, core, namespace, pod, 5)
        for r in range(args.rounds):
            order = list(ways) if r % 2 == 0 else list(reversed(ways))
            for name in order:
                got[name].append(measure(ways[name], core, namespace, pod, args.execs))
            print(f"round {r + 1}: " + ", ".join(f"{name} {got[name][-1][0]:.2f} ms CPU ({got[name][-1][1]:.1f} ms "
                                                 "wall) per exec" for name in ways), flush=True)

    def med(name: str, i: int) -> str:
        values = [g[i] for g in got[name]]
        return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

    ratio = statistics.median(g[0] for g in got["gate"]) / statistics.median(g[0] for g in got["plain"])
    print(f"{args.execs} execs x {args.rounds} rounds: gate {med('gate', 0)} ms CPU per exec, plain "
          f"kubernetes.stream {med('plain', 0)} ms; ratio gate/plain {ratio:.2f}; wall per exec gate {med('gate', 1)} "
          f"ms, plain {med('plain', 1)} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
