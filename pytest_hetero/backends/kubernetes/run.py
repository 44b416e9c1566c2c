"""Model runs in the resource × image workload pod: copy inputs in, exec the entrypoint, read outputs.

Every model file, model code and dataset file of the matrix is copied into the pod once (a tar
unpacked by ``tar -x`` from exec stdin, under ``/tmp/hetero-<owner>``); each model × dataset run
then execs the rendered entrypoint in its own run directory with the layer timeout, and its
outputs file is read back with ``cat``, as the bytes of the exec's stdout (up to :data:`MAX_OUTPUTS_BYTES`, checked
against the file's size). On a KWOK-simulated node the exec runs on the KWOK host,
not in the image, and the result says so (``simulated: true``).
"""

from __future__ import annotations

import io
import re
import shlex
import tarfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict

from kubernetes import client

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import nodes as kube_node
from pytest_hetero.backends.kubernetes import podexec as kube_exec
from pytest_hetero.backends.kubernetes import runtime, startup
from pytest_hetero.backends.kubernetes import usage as kube_usage
from pytest_hetero.backends.kubernetes.objects import parse_pod
from pytest_hetero.backends.kubernetes.submit import workload_key
from pytest_hetero.backends.protocol import (
    EXECUTION_PROVIDERS,
    ActionFailed,
    EngineUnavailable,
    ExecResult,
    RunFailure,
    Step,
    render_entrypoint,
)
from pytest_hetero.evidence.model import utc_now
from pytest_hetero.matrix.model import Matrix, Model
from pytest_hetero.truth.view import model_input, model_inputs
from pytest_hetero.truth.withhold import CodeView, WithholdError, model_code, record_of

if TYPE_CHECKING:
    from pytest_hetero.backends.kubernetes.session import KubeSession, WorkloadRecord


def input_tar(matrix: Matrix, only: tuple[str, str] | None = None) -> bytes:
    """A tar of every model file, model code and dataset file, laid out as in :func:`input_paths`: each code folder
    without the truth files of the matrix's datasets and their copies (:func:`code_of`), each dataset as the model
    sees it (:func:`~pytest_hetero.truth.view.model_inputs`); ``only`` (model name, dataset name): that model's
    files and code and that dataset alone (a model run's own pod: it sees its inputs, not the other runs', and the
    tar no longer grows with the matrix: N runs copied N × the whole matrix). Raises ActionFailed
    ``inputs_copy_failed`` when a code folder cannot be searched or copied."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for m in matrix.models:
            if only is not None and m.name != only[0]:
                continue
            if m.path.is_file():
                tar.add(str(m.path), arcname=f"models/{m.name}/{m.path.name}")
            code = code_of(matrix, m).path
            tar.add(
                str(code),
                arcname=f"code/{m.name}" + ("" if code.is_dir() else f"/{code.name}"),
                filter=lambda t: None if "__pycache__" in t.name else t,
            )
        for name, path in model_inputs(matrix.datasets):  # the truth column removed where it is inline
            if only is None or name == only[1]:
                tar.add(str(path), arcname=f"datasets/{name}/{path.name}")
    return buf.getvalue()


def code_of(matrix: Matrix, model: Model) -> CodeView:
    """The model's code folder as the pod gets it (:func:`~pytest_hetero.truth.withhold.model_code`). Raises
    ActionFailed ``inputs_copy_failed``."""
    try:
        return model_code(matrix, model)
    except WithholdError as exc:
        raise ActionFailed(exc.message, "inputs_copy_failed") from None


def input_paths(
    root: str, model: str, model_path: Path, code: Path, dataset: str, dataset_path: Path
) -> dict[str, str]:
    """In-pod paths ``{"model", "code", "dataset"}`` under ``root`` (where :func:`input_tar` was unpacked)."""
    return {
        "model": f"{root}/models/{model}/{model_path.name}",
        "code": f"{root}/code/{model}" + ("" if code.is_dir() else f"/{code.name}"),
        "dataset": f"{root}/datasets/{dataset}/{dataset_path.name}",
    }


def copy_inputs(core: client.CoreV1Api, namespace: str, pod: str, matrix: Matrix, root: str, timeout_s: float) -> None:
    """Unpack :func:`input_tar` at ``root`` in the pod (``tar -x`` from exec stdin); a model run's own pod gets its
    inputs with its run instead (:func:`run_model`'s ``inputs``).

    Raises ActionFailed ``inputs_copy_failed`` (platform) when tar fails (no ``tar`` in the image).
    """
    done = kube_exec.run(
        core,
        namespace,
        pod,
        "workload",
        ["/bin/sh", "-c", f"mkdir -p {shlex.quote(root)} && tar -x -f - -C {shlex.quote(root)}"],
        timeout_s,
        stdin=input_tar(matrix),
    )
    if done.exit_code != 0:
        raise copy_failed(pod, root, f"exit {done.exit_code}", done)


def copy_failed(pod: str, root: str, how: str, done: kube_exec.ExecOutcome) -> ActionFailed:
    """ActionFailed ``inputs_copy_failed`` (platform): the inputs were not unpacked at ``root`` in ``pod`` (``how``:
    ``exit N``, ``timed out``), with the tail of the exec's stderr, else of its Status."""
    return ActionFailed(f"copying model/dataset inputs into {pod}:{root} failed ({how}): "
                        f"{done.stderr.strip()[-300:] or done.status[-300:]}", "inputs_copy_failed")


def run_model(
    core: client.CoreV1Api,
    namespace: str,
    pod: str,
    argv: list[str],
    run_dir: str,
    workdir: str,
    env: dict[str, str],
    timeout_s: float,
    stop: kube_exec.Stop | None = None,
    python: str | None = None,
    devices: str = "-",
    inputs: tuple[str, bytes] | None = None,
) -> kube_exec.ExecOutcome:
    """Run ``argv`` in ``workdir`` with ``env``; kill its process (pid file in ``run_dir``) at ``timeout_s``.
    Its exit status is also written to ``run_dir/.rc`` (read back by :func:`exit_confirmed`). With
    ``python`` (the image's interpreter) the run is started by the gate's wrapper, which measures it
    (:func:`.runtime.wrapped`, with the device tool ``devices``; read back by :func:`.runtime.evidence`).

    When ``stop`` is set first the outcome is ``abandoned`` and the process is left running: the caller
    decides whether its node can still be reached (:func:`kill_run`). When the run is interrupted (Ctrl-C,
    SIGTERM: KeyboardInterrupt) the process is killed too, best effort within 5 s, and the interruption goes on:
    deleting the pod ends it on a kubelet, but an exec can outlive its pod (KWOK's ClusterExec runs it on
    the host), and the model must not go on running after the gate stopped.

    ``inputs`` (root, :func:`input_tar`'s bytes): a model run's own pod gets its inputs in the same exec, one exec
    less per run (:func:`inputs_prelude`): the tar unpacked at root from stdin, the container's environment printed on
    stderr before a marker line of this exec, then the run; the outcome's ``prelude`` is that environment, None when
    the unpacking failed (the run never started; its exit status is tar's).
    """
    script = run_script(argv, run_dir, workdir, env, python, devices, made=inputs is not None)
    marker = None
    if inputs is not None:
        marker = f"=== {uuid.uuid4().hex}\n"
        script = inputs_prelude(inputs[0], marker, run_dir) + script
    try:
        done = kube_exec.run(core, namespace, pod, "workload", ["/bin/sh", "-c", script], timeout_s, stop=stop,
                             stdin=inputs[1] if inputs is not None else None,
                             prelude=marker.encode() if marker is not None else None)
    except KeyboardInterrupt:
        kill_run(core, namespace, pod, run_dir, 5)
        raise
    if done.timed_out:
        kill_run(core, namespace, pod, run_dir, 30)
    return done


def inputs_prelude(root: str, marker: str, run_dir: str) -> str:
    """The start of a model run's script that unpacks its inputs first (:func:`run_model`'s ``inputs``): the script's
    own pid written to ``run_dir/.pid`` (until the run's replaces it: a :func:`kill_run` while the inputs unpack
    kills the script, so the run never starts; an exec outlives the gate's giving up, and KWOK's is fed its whole
    stdin after the gate closed the connection), the tar on stdin unpacked at ``root`` (when that fails, the script
    exits with mkdir's or tar's status, its message on stderr; tar's warnings on success are dropped, so nothing but
    the environment comes before the marker), the container's environment printed on stderr (nothing when ``env``
    cannot), then ``marker`` (a line) on stderr; the run's own script follows. The run starts after the marker is
    written (its stdin is not the tar: a background job's is /dev/null)."""
    rt, rd = shlex.quote(root), shlex.quote(run_dir)
    return (f"mkdir -p {rt} {rd} || exit; echo $$ > {rd}/.pid || exit; "
            f"e=$(tar -x -f - -C {rt} 2>&1 >/dev/null) || {{ rc=$?; printf '%s\\n' \"$e\" >&2; "
            f"exit $rc; }}; {{ env 2>/dev/null || true; }} >&2; "
            f"printf '%s\\n' {shlex.quote(marker.rstrip(chr(10)))} >&2; ")


def run_script(argv: list[str], run_dir: str, workdir: str, env: dict[str, str], python: str | None,
               devices: str = "-", made: bool = False) -> str:
    """The ``/bin/sh -c`` script of :func:`run_model`: runs ``argv`` in the background (under the gate's
    wrapper with ``python``, :func:`.runtime.wrapped`), its pid in ``run_dir/.pid``, its exit status in
    ``run_dir/.rc`` and as the script's own. It creates ``run_dir`` first unless ``made`` (an
    :func:`inputs_prelude` before it did: one process less per run)."""
    exports = "".join(f"{k}={shlex.quote(v)}; export {k}; " for k, v in env.items())
    rd = shlex.quote(run_dir)
    return (
        ("" if made else f"mkdir -p {rd} && ") + f"cd {shlex.quote(workdir)} && {exports}"
        f"{{ {runtime.wrapped(python, run_dir, argv, devices=devices) if python else shlex.join(argv)} & }} && "
        f"echo $! > {rd}/.pid && wait $!; rc=$?; echo $rc > {rd}/.rc; exit $rc"
    )


def kill_run(core: client.CoreV1Api, namespace: str, pod: str, run_dir: str, wait_s: float) -> bool:
    """``kill -9`` the run's process (pid file in ``run_dir``) by exec; True when the exec answered within
    ``wait_s`` seconds (:func:`kube_exec.try_run`: a NotReady node's kubelet may never answer)."""
    return kube_exec.try_run(core, namespace, pod, kill_run_script(run_dir), wait_s)


def kill_running(session: KubeSession, wait_s: float = 5.0) -> None:
    """Kill every model run whose exec is still in flight (``session.running``: those of helper threads, a node's
    smoke run or a per-run Pod's, which a Ctrl-C does not reach), each by :func:`kill_run` in a thread of its own, at
    most ``wait_s`` seconds each. The engine's close calls it before it deletes the pods: an exec can outlive its pod
    (KWOK runs it on the host), and a thread waiting on it would hold the gate's exit until the model ended."""
    with session.lock:
        running = list(session.running.items())
    if not running:
        return
    with ThreadPoolExecutor(min(16, len(running)), thread_name_prefix="hetero-kill") as pool:
        for run_dir, pod in running:
            pool.submit(kill_run, session.core, session.namespace, pod, run_dir, wait_s)


def kill_run_script(run_dir: str) -> list[str]:
    """The argv :func:`kill_run` execs: ``kill -9`` of the pid in ``run_dir/.pid`` (the run's; while a run's own
    inputs unpack, the exec's script's: :func:`inputs_prelude`)."""
    return ["/bin/sh", "-c", f"kill -9 $(cat {shlex.quote(run_dir)}/.pid) 2>/dev/null"]


MAX_OUTPUTS_BYTES = 64 * 1024 * 1024
"""Largest outputs file read back from a pod (bytes; held in memory, twice while it is joined); a larger one fails
``outputs_too_large``. The exec's stdout cap for this read, not the 16 MiB of a model's log
(:data:`~pytest_hetero.backends.streams.STREAM_CAP_BYTES`), which kept the head and tail of a larger file only."""
TOO_LARGE_EXIT = 42
"""Exit code of :func:`read_outputs`' script when the file is larger than the limit (its size on stderr)."""


CHANGED_EXIT = 43
"""Exit code of :func:`read_outputs`' script when the file's size or change time (``stat -c %z``: nanoseconds with
GNU coreutils; a file's ctime cannot be set back by its writer) after the copy differs from before it."""


def outputs_script(path: str, size_to: str = " >&2", announce: bool = False) -> str:
    """The shell script reading the outputs file ``path``: exit 1 when it does not exist, exit
    :data:`TOO_LARGE_EXIT` with its size printed (``size_to``: a redirection, stderr by default) when it has more than
    :data:`MAX_OUTPUTS_BYTES` bytes (measured with ``wc -c`` before anything is copied), else its bytes on stdout
    (``announce``: after its size on stderr, which the reader checks what arrived against; then exit
    :data:`CHANGED_EXIT` when the file's size or change time after the copy is not what it was before: a process
    wrote it meanwhile)."""
    quoted = shlex.quote(path)
    stamp = f"$(stat -c %z {quoted} 2>/dev/null)"
    return (f"[ -f {quoted} ] || exit 1; {f'c={stamp}; ' if announce else ''}n=$(wc -c < {quoted}); "
            f"if [ \"$n\" -gt {MAX_OUTPUTS_BYTES} ]; "
            f"then echo \"$n\"{size_to}; exit {TOO_LARGE_EXIT}; fi; {'echo $n >&2; ' if announce else ''}"
            f"cat {quoted}" + (f" || exit; [ \"$(wc -c < {quoted})\" = \"$n\" ] && [ \"{stamp}\" = \"$c\" ] || "
                               f"exit {CHANGED_EXIT}" if announce else ""))


def outputs_of(status: int | None, printed: bytes, path: str) -> bytes | None:
    """The outputs of :func:`outputs_script`'s run (``status``: its exit status; ``printed``: the bytes it printed,
    the size when too large): the bytes on exit 0, else None. Raises ActionFailed ``outputs_too_large``
    (algorithm)."""
    if status == TOO_LARGE_EXIT:
        raise ActionFailed(f"entrypoint wrote a {printed.decode('utf-8', 'replace').strip()}-byte outputs file "
                           f"({path}), more than the {MAX_OUTPUTS_BYTES} bytes read back", "outputs_too_large")
    return printed if status == 0 else None


def read_outputs(core: client.CoreV1Api, namespace: str, pod: str, path: str, remove: str | None = None
                 ) -> bytes | None:
    """The outputs file's bytes (``cat`` by exec: the exec's stdout bytes, up to :data:`MAX_OUTPUTS_BYTES` held), or
    None when it does not exist; ``remove``: a folder the same exec then deletes, whatever it read (a per-run pod's
    inputs on a KWOK host: one exec less per run; removed by an exec of its own, best effort, when that exec gave no
    exit status).

    Raises ActionFailed ``outputs_too_large`` (algorithm) when it has more than :data:`MAX_OUTPUTS_BYTES`
    bytes (measured with ``wc -c`` in the pod before anything is copied; or more came while it was copied),
    ActionFailed ``outputs_changed`` (algorithm) when the file's size or change time after the copy differs from before
    it, or more bytes arrived than were counted (a process the run left wrote it: :func:`outputs_script`), and
    EngineUnavailable ``exec_stream_lost`` (infrastructure) when fewer bytes of an unchanged file arrived than
    ``wc -c`` counted: the apiserver's exec stream can close with the process before it delivered the end of stdout
    (kubernetes/kubernetes#124571), and a cut file must not be judged as the model's outputs.
    """
    script = outputs_script(path, announce=True)
    if remove is not None:
        script = f"( {script} ); rc=$?; rm -rf {shlex.quote(remove)}; exit $rc"
    done = kube_exec.run(core, namespace, pod, "workload", ["/bin/sh", "-c", script], 60,
                         stdout_cap=MAX_OUTPUTS_BYTES, raw_stdout=True)
    if remove is not None and done.exit_code is None:
        kube_exec.try_run(core, namespace, pod, ["rm", "-rf", remove], 5)
    counted = done.stderr.strip().partition("\n")[0].strip()
    arrived = len(done.stdout_bytes) if done.stdout_bytes is not None else None
    if done.exit_code == CHANGED_EXIT or (arrived is not None and counted.isdigit() and arrived > int(counted)):
        raise ActionFailed(f"the outputs file {path} of the model run in pod {pod} changed while the gate read it "
                           f"after the run's end ({arrived} bytes arrived of the {counted or 'unknown number of'} "
                           "bytes wc -c counted): a process the run left still writes it", "outputs_changed")
    if done.exit_code != 0:
        return outputs_of(done.exit_code, done.stderr.encode("utf-8", "replace"), path)
    if done.stdout_bytes is None:
        raise ActionFailed(f"entrypoint wrote more than {MAX_OUTPUTS_BYTES} bytes of outputs ({path}): the file grew "
                           "while it was read", "outputs_too_large")
    if counted != str(arrived):
        raise EngineUnavailable(
            f"reading the outputs file {path} of the model run in pod {pod}: {arrived} bytes arrived "
            f"of the {counted or 'unknown number of'} bytes wc -c counted, the file unchanged: the exec stream ended "
            "before the rest came", "exec_stream_lost")
    return outputs_of(0, done.stdout_bytes, path)


INLINE_OUTPUTS_BYTES = 1024 * 1024
"""Largest outputs file the exit-status check reads in its own exec (bytes; it has 15 s): a larger one is read by an
exec of its own (:func:`read_outputs`, 60 s), as every outputs file was before."""


@dataclass(frozen=True)
class AnyOf:
    """Set when any of ``events`` is: a run's stop (:func:`run_model`) when its node turns NotReady or the gate stops
    its runs."""

    events: tuple[threading.Event, ...]

    def is_set(self) -> bool:
        """Whether one of the events is set."""
        return any(e.is_set() for e in self.events)


@dataclass
class Readback:
    """What the exit-status check (:func:`exit_confirmed`) also reads in its exec, so a run takes one exec less: the
    outputs file at ``path`` (``read``: its :func:`outputs_script` exit status and bytes once read, None until then),
    and the folder ``remove`` it deletes once the status is confirmed (a per-run pod's inputs on a KWOK host;
    ``removed`` once that exec ended with a status)."""

    path: str
    remove: str | None = None
    read: tuple[int | None, bytes] | None = None
    removed: bool = False


def execute(session: KubeSession, ctx: Step, given: WorkloadRecord | None = None,
            isolation: Isolation | None = None, halt: threading.Event | None = None) -> ExecResult:
    """Copy inputs into the item's workload pod (once; starting it first when no startup item did),
    exec the rendered entrypoint with the layer timeout (seconds), read the outputs file. ``given``: a started
    workload record of the caller's to run in instead (a model run's own pod, :mod:`.spread`), whose
    ``isolation`` then replaces the shared pod's (its ``root``, when set, is where the inputs go). ``halt``: set when
    the gate stops (a run in a helper thread, which Ctrl-C does not reach): the run's process is killed at once and
    the run ends with ActionFailed ``harness``.

    The pod's node is checked first and watched during the run (:mod:`.nodes`): a run whose node
    turns NotReady is abandoned at once; its result then carries ``failure`` (status ``error``,
    ``node_not_ready``, owner ``infrastructure``).

    Raises ActionFailed ``bad_entrypoint`` (algorithm) on an unknown placeholder, ``inputs_copy_failed``
    (:func:`copy_inputs`), EngineUnavailable ``node_not_ready`` (:func:`.nodes.ensure_ready`), a refused or
    broken exec translated by :func:`.client.api_outcome`, and whatever :func:`.startup.start` raises.
    """
    workload, started_here = (given, None) if given is not None else _workload(session, ctx)
    pod, root = workload.started_pod(), workload.root or f"/tmp/hetero-{session.owner}"
    node = node_of(session, workload)
    kube_node.ensure_ready(session, ctx, workload, node)
    inputs: tuple[str, bytes] | None = None
    if given is not None and not workload.inputs:  # a run's own pod: its inputs come with the run's exec
        inputs = (root, input_tar(ctx.matrix, (ctx.model.name, ctx.dataset.name)))
        workload.inputs = root  # from here on the pod may hold them: the caller removes them on a KWOK host
    else:
        _ensure_inputs(session, ctx, workload, root)
    m, d = ctx.model, ctx.dataset
    code = code_of(ctx.matrix, m)
    paths = input_paths(root, m.name, m.path, code.path, d.name, model_input(d))
    run_dir = f"{root}/runs/{kc.dns_name(m.name, d.name)}-{uuid.uuid4().hex[:8]}"
    provider = EXECUTION_PROVIDERS[ctx.resource.type]
    values = {"python": session.conf.python, **paths,
              "outputs": f"{run_dir}/outputs.json", "provider": provider}
    argv = render_entrypoint(m.entrypoint, values)
    simulated = session.simulated(node)
    begun = time.time()
    dumped: dict[str, str] = {}  # the wrapper's files, when the exit-status check read them too
    # a per-run pod on a KWOK node: its inputs on the host go with the exec reading the outputs (else the caller
    # removes them)
    readback = Readback(values["outputs"],
                        root if given is not None and simulated and workload.inputs == root else None)
    done, failure = _run_watched(session, ctx, workload, node, argv, run_dir, f"{root}/code/{m.name}",
                                 {"HETERO_EXECUTION_PROVIDER": provider}, None if simulated else values["python"],
                                 runtime.DEVICE_TOOLS.get(ctx.resource.type, "-"), dumped, readback, inputs, halt)
    if inputs is not None:
        workload.env = done.prelude or ""
    if readback.removed:
        workload.inputs = None
    ran = kube_usage.exec_facts(session, workload, begun, time.time())
    sampled, run_time = runtime.evidence(session.core, session.namespace, pod, run_dir, done.duration_s, dumped) \
        if not (done.abandoned or simulated) else runtime.read_back(
            {}, "the run ran on the KWOK host (simulated node), not in the image" if simulated else
            "the run was abandoned when its node turned NotReady", done.duration_s, pod)
    if failure is None and done.exit_code == OOM_EXIT:
        failure = oom_failure(session, workload, str(ctx.resource.limits.get("memory", "none")))
    outputs = None
    if not (done.timed_out or failure):
        remove = None if readback.removed else readback.remove
        try:
            outputs = outputs_of(*readback.read, readback.path) if readback.read is not None else \
                read_outputs(session.core, session.namespace, pod, values["outputs"], remove)
        except ActionFailed as exc:
            failure = {"category": exc.category, "message": exc.message}
        except EngineUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - translated (e.g. the pod was deleted during the run)
            raise kc.api_outcome(exc, f"read the outputs of the model run in pod {pod}") from None
        if remove is not None:  # removed by that exec
            workload.inputs = None
    return ExecResult(
        argv=argv, exit_code=done.exit_code, duration_s=done.duration_s, stdout=done.stdout,
        stderr=done.stderr, timed_out=done.timed_out, outputs=outputs, failure=failure,
        details={
            "pod": pod,
            "namespace": session.namespace,
            "run_dir": run_dir,
            "simulated": simulated,
            "ran_on": "the KWOK host (simulated node)" if simulated else f"pod {pod}",
            "node": node or None,
            "abandoned": done.abandoned,
            "isolation": dict(isolation or (SHARED_POD if ctx.pinned_node is None else PINNED_POD)),
            "workload": ran,
            **({"truth_withheld": withheld} if (withheld := record_of(ctx.matrix, code, KUBE_HOW)) else {}),
            "usage": sampled,
            "run_time": run_time,
            **done.streams,
            **({"image": started_here, "workload_started": kube_usage.workload_facts(session, workload)}
               if started_here is not None else {}),
        },
    )


KUBE_HOW = "left out of the copy of the code folder unpacked in the pod"
"""``how`` of this engine's ``model.truth_withheld`` record (on a KWOK-simulated node the run executes on the KWOK
host itself, where nothing is withheld: its result says ``simulated``)."""

class Isolation(TypedDict):
    """A model run's ``isolation`` on this engine: the ``mechanism``, whether the run was ``confined``, whether its
    place was ``shared_between_runs``; why not isolated (``reason``) or what was proven (``models_isolation``)."""

    mechanism: str
    confined: bool
    shared_between_runs: bool
    reason: NotRequired[str]
    models_isolation: NotRequired[str]


SHARED_POD: Isolation = {
    "mechanism": "kubernetes pod; every model × dataset run of a resource × image is an exec in its workload pod",
    "confined": True, "shared_between_runs": True,
    "reason": "the workload pod's file system and processes are not reset between model runs",
}
"""A model run's ``isolation`` on this engine: models are not isolated from each other (the model layer
names this as not proven, and the verdict cannot be ``pass``)."""
PINNED_POD: Isolation = {
    "mechanism": "kubernetes pod pinned to one node by node coverage; its smoke model run is the only model run in it",
    "confined": True, "shared_between_runs": False,
}
"""``isolation`` of a node-coverage smoke run: the pinned pod holds no other model run."""
OOM_EXIT = 137
"""Exit status of a process killed by SIGKILL (128 + 9), as the kernel's OOM killer leaves it."""
OOM_COUNTERS = "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null"
"""The container's own memory cgroup, read inside it: cgroup v2 ``memory.events`` and v1
``memory.oom_control`` both carry an ``oom_kill N`` line (kernel 4.13+)."""


def oom_kills(core: client.CoreV1Api, namespace: str, pod: str) -> int | None:
    """The workload container's cgroup ``oom_kill`` counter (read by exec), or None when unreadable."""
    try:
        done = kube_exec.run(core, namespace, pod, "workload", ["/bin/sh", "-c", OOM_COUNTERS], 30)
    except Exception:  # noqa: BLE001 - the counter is evidence, not a verdict: unreadable is None
        return None
    found = re.search(r"^oom_kill (\d+)", done.stdout, re.MULTILINE)
    return int(found.group(1)) if found else None


def oom_failure(session: KubeSession, workload: WorkloadRecord, limit: str) -> RunFailure | None:
    """The ExecResult ``failure`` of a run that ended with exit 137 because the kernel's OOM killer
    killed it under the container's memory limit: ``oom_killed`` (algorithm: the model needs more
    memory than the resource's memory ``limit``, quoted); None when the cgroup's ``oom_kill`` counter did not grow
    (another SIGKILL) or cannot be read."""
    kills = oom_kills(session.core, session.namespace, workload.started_pod())
    if kills is None or kills <= workload.oom_kills:
        return None
    workload.oom_kills = kills
    return {"category": "oom_killed",
            "message": f"model run OOM-killed (exit {OOM_EXIT}, container cgroup oom_kill count {kills}) under "
                       f"the container's memory limit {limit}: the model needs more memory than the resource allows"}


class StartedImage(TypedDict):
    """The image identity a model item that had to start its workload itself keeps (``details["image"]``, which the
    model layer checks): the ``digest`` evidence names, every digest it is ``known`` by, and ``what`` names it."""

    digest: str | None
    known: list[str]
    what: str


def _workload(session: KubeSession, ctx: Step) -> tuple[WorkloadRecord, StartedImage | None]:
    """The item's started workload (``ctx.pinned_node``: the one :meth:`start_on` started on that node); started
    here when no startup item did (then also the image identity the model layer checks, :class:`StartedImage`)."""
    key = workload_key(ctx.resource.name, ctx.image.name, ctx.pinned_node)
    workload = session.workloads.get(key)
    if workload is not None and workload.pod is not None:
        return workload, None
    if ctx.pinned_node is not None:  # node coverage starts its pinned workloads first: none is a harness bug
        raise RuntimeError(f"no started workload pinned to node {ctx.pinned_node} for {key[0]} x {key[1]}")
    ctx.record("model.note", message="no started workload from a startup item in this session; started here")
    identity = startup.start(session, ctx).identity
    started_here: StartedImage | None = None if identity is None else {
        "digest": identity.digest, "known": list(identity.known), "what": identity.what}
    return session.workloads[key], started_here


def _ensure_inputs(session: KubeSession, ctx: Step, workload: WorkloadRecord, root: str) -> None:
    """Copy the matrix's inputs into the workload pod under ``root`` once per workload."""
    if workload.inputs:
        return
    try:
        copy_inputs(session.core, session.namespace, workload.started_pod(), ctx.matrix, root, ctx.timeout_s)
    except ActionFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - translated
        raise kc.api_outcome(exc, f"copy the inputs into pod {workload.pod}") from None
    workload.inputs = root


def _run_watched(
    session: KubeSession, ctx: Step, workload: WorkloadRecord, node: str, argv: list[str], run_dir: str,
    workdir: str, env: dict[str, str], python: str | None = None, devices: str = "-",
    dumped: dict[str, str] | None = None, readback: Readback | None = None,
    inputs: tuple[str, bytes] | None = None,
    halt: threading.Event | None = None,
) -> tuple[kube_exec.ExecOutcome, RunFailure | None]:
    """Run ``argv`` in the workload pod while watching ``node`` ("" = unknown, not watched); the run's
    outcome and, when the node turned NotReady, the abandoned run's ``failure`` dict. ``dumped`` receives
    the wrapper's evidence files and ``readback`` the outputs when the exit-status check read them
    (:func:`exit_confirmed`); ``inputs``: unpacked by the same exec first (:func:`run_model`). Raises ActionFailed
    ``inputs_copy_failed`` when they were not unpacked (the exec ended, or timed out, before the run began), and
    ActionFailed ``harness`` when ``halt`` was set during the run (the gate stopped; the run's process killed). An exec
    that ended without a status the pod confirms (:func:`exit_confirmed`) waits for the run's end (:func:`_run_end`,
    :func:`_settle`: ActionFailed ``run_status_unreadable``, EngineUnavailable ``exec_stream_lost``)."""
    pod = workload.started_pod()
    watch = session.node_watch().watch(node) if node else None
    started_at, started = utc_now(), time.perf_counter()
    stop = AnyOf(tuple(e for e in (watch.turned if watch else None, halt) if e is not None))
    with session.lock:
        session.running[run_dir] = pod  # killed at close if still in flight (a helper thread's run: kill_running)
    try:
        done = run_model(session.core, session.namespace, pod, argv, run_dir, workdir, env, ctx.timeout_s,
                         stop=stop if stop.events else None, python=python, devices=devices, inputs=inputs)
    except ActionFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - a dying node often breaks the exec stream first
        if watch is None or not watch.turned.wait(NODE_VERDICT_WAIT_S):
            raise kc.api_outcome(exc, f"exec the model entrypoint in pod {pod}") from None
        done = kube_exec.ExecOutcome(None, "", "", time.perf_counter() - started, False, "", abandoned=True)
    else:
        if inputs is not None and done.prelude is None and (done.status or done.timed_out) and not done.abandoned:
            raise copy_failed(pod, inputs[0], "timed out" if done.timed_out else f"exit {done.exit_code}", done)
        if watch is not None and (broken_stream(done)
                                  or not exit_confirmed(session.core, session.namespace, pod, run_dir, done, dumped,
                                                                readback)):
            # the kubelet's end of the stream went away without an exit status: a stopped kubelet looks
            # like this until the node lifecycle controller's grace period has passed; a kubelet that came back, or
            # an apiserver that lost the stream, leaves the run going: its status file says when it ends
            _settle(session, done, pod, node, run_dir,
                    _run_end(session.core, session.namespace, pod, run_dir, watch.turned, halt,
                             started + ctx.timeout_s))
    finally:
        with session.lock:
            session.running.pop(run_dir, None)
        if watch is not None:
            watch.stop()
    if done.abandoned and halt is not None and halt.is_set():
        # the gate stopped: an exec can outlive its pod (KWOK runs it on the host), so the process is killed before
        # the pod is deleted, and the thread waiting on it ends now rather than when the model ends by itself
        kill_run(session.core, session.namespace, pod, run_dir, 5)
        raise ActionFailed(f"the gate stopped while the model ran in pod {pod}: its process was killed", "harness")
    if not (done.abandoned and watch is not None):
        return done, None
    killed = kill_run(session.core, session.namespace, pod, run_dir, 5)
    return done, kube_node.abandoned(session, ctx, workload, watch, started_at, done.duration_s, killed)


def _settle(session: KubeSession, done: kube_exec.ExecOutcome, pod: str, node: str, run_dir: str,
            end: int | str | None) -> None:
    """Set ``done`` from :func:`_run_end`'s ``end``: abandoned (None: the node turned NotReady, or the gate stopped),
    the status the run's file gave (an int), timed out (``"unended"``: the pod answered all along and the run gave no
    status in its timeout; its process killed). Raises EngineUnavailable ``exec_stream_lost`` when the pod did not
    answer (``"lost"``) while the node stayed Ready."""
    if end is None:
        done.abandoned = True
    elif isinstance(end, int):
        done.exit_code, done.status = end, f"exit status {end}, read from the run's status file"
    elif end == "unended":
        kill_run(session.core, session.namespace, pod, run_dir, 30)
        done.exit_code, done.timed_out = None, True
    else:
        raise EngineUnavailable(
            f"the exec stream of the model run in pod {pod} on node {node} ended after {done.duration_s:.1f} s "
            f"without an exit status the pod confirms, the pod did not answer, and the node stayed Ready for "
            f"{NODE_VERDICT_WAIT_S:g} s: the apiserver lost the kubelet's stream", "exec_stream_lost")


def _run_end(core: client.CoreV1Api, namespace: str, pod: str, run_dir: str, turned: threading.Event,
             halt: threading.Event | None, deadline: float) -> int | str | None:
    """Wait for the end of a run whose exec stream ended without an exit status the pod confirms: read its status file
    (:func:`status_file`) every :data:`RUN_END_POLL_S` seconds until it holds a status (returned), its node turns
    NotReady or the gate stops (``turned`` / ``halt``: None returned), or ``deadline`` (``time.perf_counter()``: the
    run's start plus its timeout; at least :data:`NODE_VERDICT_WAIT_S` from now) passes: ``"unended"`` when the pod
    answered and the run gave no status (it outran its timeout, or deleted its own status file), ``"lost"`` when the
    pod did not answer. Raises ActionFailed ``pod_deleted`` and ``run_status_unreadable`` (:func:`status_file`)."""
    until = max(deadline, time.perf_counter() + NODE_VERDICT_WAIT_S)
    while True:
        if turned.wait(RUN_END_POLL_S) or (halt is not None and halt.is_set()):
            return None
        said = status_file(core, namespace, pod, run_dir)
        if isinstance(said, int):
            return said
        if time.perf_counter() >= until:
            return "unended" if said == "none" else "lost"


def status_file(core: client.CoreV1Api, namespace: str, pod: str, run_dir: str) -> int | str:
    """The exit status in the run's ``.rc`` file (:func:`run_model`'s wrapper writes it when the run ends): the status,
    ``"none"`` while there is none (no file, or an empty one), ``"lost"`` when the pod did not answer. Raises
    ActionFailed ``pod_deleted`` when the pod is gone, and ``run_status_unreadable`` when the file holds no status
    (:func:`said_status`)."""
    try:
        read = kube_exec.run(core, namespace, pod, "workload", ["/bin/sh", "-c", status_script(run_dir)], 15)
    except Exception as exc:  # noqa: BLE001 - no answer from the pod is what this read tells
        outcome = kc.api_outcome(exc, f"read the exit status of the model run in pod {pod}")
        if outcome.category == "pod_deleted":
            raise outcome from None
        return "lost"
    said = checked_status(read, read.stdout.partition("\n")[0], run_dir)
    return "lost" if said is None else said


def checked_status(read: kube_exec.ExecOutcome, line: str, run_dir: str) -> int | str | None:
    """The status of the check ``read`` whose first line is ``line`` (:func:`said_status`); None when the pod did not
    answer it (:func:`answered`). Raises ActionFailed ``run_status_unreadable`` when the file holds no status, or when
    the pod answered the check without its line (:func:`check_ended`)."""
    said = said_status(line, run_dir)
    if said is None and answered(read):
        raise check_ended(read, run_dir)
    return said


def answered(read: kube_exec.ExecOutcome) -> bool:
    """Did the pod say how a check's exec ended: an exit status (the process ended, killed or not), rather than not
    answering (no Status, a Status without an exit code, or the check timed out)? A Status without an exit code is
    also what the apiserver sends when it cannot reach a stopped kubelet: taking it for the pod's word made a node
    stopped mid-run the model's failure (``run_status_unreadable``) instead of ``node_not_ready``."""
    return read.exit_code is not None and not read.timed_out and not read.abandoned


def check_ended(read: kube_exec.ExecOutcome, run_dir: str) -> ActionFailed:
    """ActionFailed ``run_status_unreadable`` (algorithm) for a check of the run's status file (:func:`status_script`)
    that the pod answered (:func:`answered`) without the check's line: it was ended in the pod (killed, or its open of
    the file held), and only the run's processes share the pod with the gate's checks. Taking it for a pod that did not
    answer let a model that exits 0 with bad outputs, leaving a process that ends each check, have its run blamed on a
    lost exec stream (``exec_stream_lost``, infrastructure)."""
    return ActionFailed(f"the check of the model run's status file {run_dir}/.rc ended (exit status {read.exit_code}) "
                        "without printing its line, though the pod answered: a process in the pod ended it, and only "
                        "the run's processes share the pod with the gate's checks", "run_status_unreadable")


def status_script(run_dir: str) -> str:
    """Shell that prints one line ``rc <status>`` from ``run_dir/.rc`` (its first 32 bytes left in ``$v`` for the
    rest of the script; empty without the file, whatever the container's environment set): those bytes when they are
    digits and ``-`` only (trailing newlines dropped), ``rc ?`` when they hold anything else (nothing in the file can
    read as another line or a token), ``rc `` for an empty file, ``rc none`` without one (:func:`said_status` reads
    it). One process (``head``) besides the shell's builtins."""
    rc = f"{shlex.quote(run_dir)}/.rc"
    return (f"v=; if [ -f {rc} ]; then v=$(head -c 32 {rc}); case \"$v\" in *[!0-9-]*) echo 'rc ?';; "
            f"*) printf 'rc %s\\n' \"$v\";; esac; else echo 'rc none'; fi")


def said_status(line: str, run_dir: str) -> int | str | None:
    """The status of :func:`status_script`'s ``line``: its integer, ``"none"`` (no file, or empty), None when the line
    is not one (the script did not run). Raises ActionFailed ``run_status_unreadable`` when the file holds something
    else: only the gate's wrapper writes there besides the run, and it writes an integer."""
    if not line.startswith("rc "):
        return None
    value = line[3:]
    if value in ("none", ""):
        return "none"
    if re.fullmatch(r"-?\d{1,9}", value):
        return int(value)
    raise ActionFailed(f"the model run's status file {run_dir}/.rc holds no exit status"
                       f"{'' if value == '?' else f' ({value!r})'}: the gate's wrapper writes the run's status there "
                       "when it ends, and only the run itself can write there besides", "run_status_unreadable")


RUN_END_POLL_S = 2.0
"""Seconds between reads of a run's status file while :func:`_run_end` waits for its end."""
NODE_VERDICT_WAIT_S = 90.0
"""Seconds a model run whose exec stream broke waits for its node's verdict: the node lifecycle
controller marks a node whose kubelet stopped posting status ``Unknown`` after its grace period
(``--node-monitor-grace-period``: 40 s by default, 20 s on the test plane)."""


def broken_stream(done: kube_exec.ExecOutcome) -> bool:
    """An exec that ended neither with an exit status nor by timeout or abandonment: its stream broke."""
    return not (done.status or done.timed_out or done.abandoned)


def exit_confirmed(core: client.CoreV1Api, namespace: str, pod: str, run_dir: str,
                   done: kube_exec.ExecOutcome, dumped: dict[str, str] | None = None,
                   readback: Readback | None = None) -> bool:
    """Is the exit status the exec reported the run's own? The apiserver's stream translator reports ``Success`` when
    the kubelet's end of the stream closes, also when the kubelet died mid-run, so a 0 is checked against the run's
    ``.rc`` file (written by :func:`run_model`'s wrapper when the run ends; :func:`status_script`): the same 0
    confirms it; another integer is the run's status (``done.exit_code`` set to it: the run, or the run's wrapper,
    says it did not end well); no file, or an empty one, does not confirm it (False: the run may still be going). A
    non-zero status comes from the kubelet alone, so it stands whatever the file says: the file is writable by the
    run, which must not turn its own failure into a lost stream, an infrastructure error. True when there is nothing
    to confirm (no exit status, timed out, abandoned); False when the pod does not answer. Raises ActionFailed
    ``pod_deleted`` when the pod is gone (deleted during the run), and ``run_status_unreadable`` when a reported 0
    meets a file holding no status (:func:`said_status`) or a check the pod answered without its line
    (:func:`check_ended`). The same exec prints the wrapper's evidence files
    (:func:`.runtime.dump_script`): into ``dumped`` when given (one exec less per run); with ``readback``, it then
    reads the outputs file when it has at most :data:`INLINE_OUTPUTS_BYTES` bytes (:func:`outputs_script`, between a
    line with a token of this exec and one with the token and its exit status) and, the file holding the reported
    status, deletes ``readback.remove``: one exec less per run. What it read is kept only when both lines came and its
    stdout was not capped (else the outputs are read as before, :func:`read_outputs`); the folder counts as removed
    once that exec also ended with a status (else the caller removes it as before)."""
    if done.exit_code is None or done.timed_out or done.abandoned:
        return True
    script = f"{status_script(run_dir)}; {runtime.dump_script(run_dir)}"
    token = uuid.uuid4().hex
    if readback is not None:
        path = shlex.quote(readback.path)
        script = (f"{status_script(run_dir)}; ( {runtime.dump_script(run_dir)} ); printf '\\n=== {token}\\n'; "
                  f"if [ -f {path} ] && [ \"$(wc -c < {path})\" -gt {INLINE_OUTPUTS_BYTES} ]; then rc=-; "
                  f"else ( {outputs_script(readback.path, '')} ); rc=$?; fi; printf '\\n=== {token} %s\\n' \"$rc\"")
        if readback.remove is not None:
            # v: the status file's first 32 bytes, as status_script read them in this shell (not a second read)
            script += (f"; [ \"$rc\" != - ] && [ \"$v\" = {done.exit_code} ] && "
                       f"rm -rf {shlex.quote(readback.remove)}; exit 0")
    try:
        read = kube_exec.run(core, namespace, pod, "workload", ["/bin/sh", "-c", script], 15,
                             raw_stdout=readback is not None)
    except Exception as exc:  # noqa: BLE001 - no answer from the pod is exactly what this check looks for
        outcome = kc.api_outcome(exc, f"read the exit status of the model run in pod {pod}")
        if outcome.category == "pod_deleted":
            raise outcome from None
        return done.exit_code != 0
    stdout = read.stdout
    if readback is not None and read.stdout_bytes is None:  # capped: the dump's part as text, no outputs kept
        stdout = stdout.partition(f"\n=== {token}\n")[0]
    elif readback is not None and read.stdout_bytes is not None:  # the outputs as the bytes the file holds
        before, mark, tail = read.stdout_bytes.partition(f"\n=== {token}\n".encode())
        printed, end, status = tail.rpartition(f"\n=== {token} ".encode())
        stdout = before.decode("utf-8", "replace")
        if mark and end and status.strip().isdigit():
            readback.read = (int(status.strip()), printed)
            readback.removed = readback.remove is not None and read.exit_code is not None and \
                stdout.partition("\n")[0] == f"rc {done.exit_code}"
    line, _, rest = stdout.partition("\n")
    if dumped is not None and rest.strip():
        dumped.update(runtime.parse_dump(rest))
    if done.exit_code != 0:
        return True  # the kubelet's own word: the run ended so
    said = checked_status(read, line, run_dir)
    if isinstance(said, int):
        done.exit_code = said
        return True
    return False


def node_of(session: KubeSession, workload: WorkloadRecord) -> str:
    """Name of the node the workload's pod runs on, as the run's pod watch saw it ("" when unknown)."""
    pods = session.watch.by_key(workload.probe) if session.watch else []
    return next((parse_pod(p).node_name for p in pods), "")
