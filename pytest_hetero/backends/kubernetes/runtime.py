"""Run-time evidence of a model run exec'd in the workload pod, taken inside the pod.

The run is started by the gate's wrapper (:mod:`pytest_hetero.probes.podwrap`, its text run by the image's
``{python}`` as ``python -I -S -c``; the engine-neutral parts are :mod:`pytest_hetero.probes.inworkload`): it
forks the model run, reaps it with ``wait4`` and samples the container's own
cgroup meanwhile (read inside the pod: ``/sys/fs/cgroup`` is the container's cgroup there). The wrapper
writes ``.rusage`` and ``.samples`` in the run dir; :func:`evidence` reads them back (one ``cat`` by exec)
and :mod:`pytest_hetero.probes.inworkload` turns them into ``model.run_time`` and ``model.usage``, as the local
and Docker engines record them.

An image without the interpreter runs the model unwrapped: both then say why (never 0).
"""

from __future__ import annotations

from kubernetes import client

from pytest_hetero.backends.kubernetes import podexec as kube_exec
from pytest_hetero.probes.inworkload import (
    DEVICE_FIELDS as DEVICE_FIELDS,
)
from pytest_hetero.probes.inworkload import (
    DEVICE_TOOLS as DEVICE_TOOLS,
)
from pytest_hetero.probes.inworkload import (
    FORKER as FORKER,
)
from pytest_hetero.probes.inworkload import (
    NO_WRAPPER as NO_WRAPPER,
)
from pytest_hetero.probes.inworkload import (
    SAMPLE_INTERVAL_S as SAMPLE_INTERVAL_S,
)
from pytest_hetero.probes.inworkload import (
    SOURCE as SOURCE,
)
from pytest_hetero.probes.inworkload import (
    WRAPPER as WRAPPER,
)
from pytest_hetero.probes.inworkload import (
    add_devices as add_devices,
)
from pytest_hetero.probes.inworkload import (
    add_npu_devices as add_npu_devices,
)
from pytest_hetero.probes.inworkload import (
    dump_script as dump_script,
)
from pytest_hetero.probes.inworkload import (
    parse_dump as parse_dump,
)
from pytest_hetero.probes.inworkload import (
    read_back as read_back,
)
from pytest_hetero.probes.inworkload import (
    wrapped as wrapped,
)
from pytest_hetero.probes.usage import Measured, UsageRecord


def evidence(core: client.CoreV1Api, namespace: str, pod: str, run_dir: str, run_s: float,
             dumped: dict[str, str] | None = None) -> tuple[UsageRecord, dict[str, Measured]]:
    """(``model.usage``, ``model.run_time`` values) of the run in ``run_dir`` of ``pod`` (``run_s``: the
    exec's wall time, seconds), from ``dumped`` (:func:`parse_dump` of an exec that already read them: the
    engine's exit-status check) or else read by one exec. Never raises: what cannot be read is unavailable
    with why."""
    if dumped:
        return read_back(dumped, None, run_s, pod)
    try:
        done = kube_exec.run(core, namespace, pod, "workload", ["/bin/sh", "-c", dump_script(run_dir)], 30)
    except Exception as exc:  # noqa: BLE001 - evidence, never a verdict: unreadable says why
        return read_back({}, f"its files could not be read from pod {pod}: {type(exc).__name__}: {exc}", run_s, pod)
    if done.exit_code != 0:
        return read_back({}, f"its run dir could not be read in pod {pod} (exit {done.exit_code})", run_s, pod)
    return read_back(parse_dump(done.stdout), None, run_s, pod)
