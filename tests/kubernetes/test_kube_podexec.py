"""Exec into a pod on the KWOK plane while other calls use the backend's shared ApiClient.

``kubernetes.stream.stream`` swaps ``call_api`` on the ApiClient of the API object it is given while it opens
the exec websocket; a REST call made on that same client meanwhile (a pending reason read, a
``--hetero-parallel`` submit, another node's exec) is then sent as a websocket request and fails or returns
no model object. :func:`pytest_hetero.backends.kubernetes.podexec.run` opens each exec on its own ApiClient:
the shared client's answers stay normal however many execs run at once.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import TYPE_CHECKING

from kubernetes import client

from pytest_hetero.backends.kubernetes import podexec

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster


def running_pod(cluster: Cluster, namespace: str) -> str:
    """A pod on this session's first ``cpu`` KWOK node, Running (KWOK stages); its name."""
    name = f"exec-{uuid.uuid4().hex[:6]}"
    cluster.core.create_namespaced_pod(namespace, {
        "metadata": {"name": name},
        "spec": {"nodeName": cluster.nodes["cpu"][0], "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "workload", "image": "python:3.11", "command": ["sleep", "infinity"]}]}})  # type: ignore[arg-type]  # a manifest dict
    deadline = time.monotonic() + 60
    while getattr(cluster.core.read_namespaced_pod(name, namespace).status, "phase", None) != "Running":
        assert time.monotonic() < deadline, f"pod {name} not Running after 60 s"
        time.sleep(0.2)
    return name


def test_rest_calls_on_the_shared_client_stay_normal_while_execs_run(cluster: Cluster) -> None:
    namespace = cluster.new_namespace("hetero-exec")
    shared = client.ApiClient(cluster.api.configuration)
    core = client.CoreV1Api(shared)
    pod = running_pod(cluster, namespace)
    stop = threading.Event()
    answers: list[object] = []
    errors: list[str] = []

    def reads() -> None:  # a pending-reason read, over and over, on the shared client
        while not stop.is_set():
            try:
                answers.append(core.read_namespaced_pod(pod, namespace))
            except Exception as exc:  # noqa: BLE001 - what the race produces is the finding
                errors.append(f"{type(exc).__name__}: {exc}"[:200])

    outcomes: list[podexec.ExecOutcome] = []

    def execs() -> None:
        for i in range(10):
            outcomes.append(podexec.run(core, namespace, pod, "workload", ["/bin/sh", "-c", f"echo {i}"], 30))

    reader = threading.Thread(target=reads, daemon=True)
    runners = [threading.Thread(target=execs, daemon=True) for _ in range(4)]
    reader.start()
    for t in runners:
        t.start()
    for t in runners:
        t.join(120)
    stop.set()
    reader.join(30)
    try:
        assert not reader.is_alive() and not any(t.is_alive() for t in runners), "a call hung"
        odd = [type(a).__name__ for a in answers if not isinstance(a, client.V1Pod)]
        assert (errors[:3], odd[:3]) == ([], []), f"{len(errors)} errors, {len(odd)} odd answers of {len(answers)}"
        assert len(answers) > 10
        assert sorted((o.exit_code, o.stdout) for o in outcomes) == sorted((0, f"{i}\n") for i in range(10)
                                                                            for _ in range(4))
        assert shared.call_api == client.ApiClient.call_api.__get__(shared)  # never left swapped
    finally:
        cluster.core.delete_namespace(namespace)
