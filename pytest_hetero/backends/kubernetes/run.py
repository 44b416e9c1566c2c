"""Model runs in the resource × image workload pod: copy inputs in, exec the entrypoint, read outputs.

Every model file, model code and dataset file of the matrix is copied into the pod once (a tar
unpacked by ``tar -x`` from exec stdin, under ``/tmp/hetero-<owner>``); each model × dataset run
then execs the rendered entrypoint in its own run directory with the layer timeout, and its
outputs file is read back with ``cat``. On a KWOK-simulated node the exec runs on the KWOK host,
not in the image, and the result says so (``simulated: true``).
"""

from __future__ import annotations

import io
import shlex
import tarfile
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubernetes import client

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import nodes as kube_node
from pytest_hetero.backends.kubernetes import podexec as kube_exec
from pytest_hetero.backends.kubernetes import startup
from pytest_hetero.backends.protocol import (
    EXECUTION_PROVIDERS,
    ActionFailed,
    ExecResult,
    Step,
    render_entrypoint,
)
from pytest_hetero.evidence.model import utc_now
from pytest_hetero.matrix.model import Matrix

if TYPE_CHECKING:
    from pytest_hetero.backends.kubernetes.session import KubeSession


def input_tar(matrix: Matrix) -> bytes:
    """A tar of every model file, model code and dataset file, laid out as in :func:`input_paths`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for m in matrix.models:
            if m.path.is_file():
                tar.add(str(m.path), arcname=f"models/{m.name}/{m.path.name}")
            code = m.code or matrix.path.parent
            tar.add(
                str(code),
                arcname=f"code/{m.name}" + ("" if code.is_dir() else f"/{code.name}"),
                filter=lambda t: None if "__pycache__" in t.name else t,
            )
        for d in matrix.datasets:
            tar.add(str(d.path), arcname=f"datasets/{d.name}/{d.path.name}")
    return buf.getvalue()


def input_paths(
    root: str, model: str, model_path: Path, code: Path, dataset: str, dataset_path: Path
) -> dict[str, str]:
    """In-pod paths ``{"model", "code", "dataset"}`` under ``root`` (where :func:`input_tar` was unpacked)."""
    return {
        "model": f"{root}/models/{model}/{model_path.name}",
        "code": f"{root}/code/{model}" + ("" if code.is_dir() else f"/{code.name}"),
        "dataset": f"{root}/datasets/{dataset}/{dataset_path.name}",
    }


def copy_inputs(
    core: client.CoreV1Api, namespace: str, pod: str, matrix: Matrix, root: str, timeout_s: float
) -> None:
    """Unpack :func:`input_tar` at ``root`` in the pod (``tar -x`` from exec stdin).

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
        raise ActionFailed(
            f"copying model/dataset inputs into {pod}:{root} failed (exit {done.exit_code}): "
            f"{done.stderr.strip()[-300:] or done.status[-300:]}",
            "inputs_copy_failed",
            "platform",
        )


def run_model(
    core: client.CoreV1Api,
    namespace: str,
    pod: str,
    argv: list[str],
    run_dir: str,
    workdir: str,
    env: dict[str, str],
    timeout_s: float,
    stop: threading.Event | None = None,
) -> kube_exec.ExecOutcome:
    """Run ``argv`` in ``workdir`` with ``env``; kill its process (pid file in ``run_dir``) at ``timeout_s``.

    When ``stop`` is set first the outcome is ``abandoned`` and the process is left running: the caller
    decides whether its node can still be reached (:func:`kill_run`).
    """
    exports = "".join(f"{k}={shlex.quote(v)}; export {k}; " for k, v in env.items())
    script = (
        f"mkdir -p {shlex.quote(run_dir)} && cd {shlex.quote(workdir)} && echo $$ > "
        f"{shlex.quote(run_dir)}/.pid && {exports}exec {shlex.join(argv)}"
    )
    done = kube_exec.run(core, namespace, pod, "workload", ["/bin/sh", "-c", script], timeout_s, stop=stop)
    if done.timed_out:
        kill_run(core, namespace, pod, run_dir, 30)
    return done


def kill_run(core: client.CoreV1Api, namespace: str, pod: str, run_dir: str, wait_s: float) -> bool:
    """``kill -9`` the run's process (pid file in ``run_dir``) by exec; True when the exec answered within
    ``wait_s`` seconds (:func:`kube_exec.try_run`: a NotReady node's kubelet may never answer)."""
    argv = ["/bin/sh", "-c", f"kill -9 $(cat {shlex.quote(run_dir)}/.pid) 2>/dev/null"]
    return kube_exec.try_run(core, namespace, pod, argv, wait_s)


MAX_OUTPUTS_BYTES = 64 * 1024 * 1024
"""Largest outputs file read back from a pod (bytes); a larger one fails ``outputs_too_large``."""
TOO_LARGE_EXIT = 42
"""Exit code of :func:`read_outputs`' script when the file is larger than the limit (its size on stderr)."""


def read_outputs(core: client.CoreV1Api, namespace: str, pod: str, path: str) -> bytes | None:
    """The outputs file's bytes (``cat`` by exec), or None when it does not exist.

    Raises ActionFailed ``outputs_too_large`` (algorithm) when it has more than :data:`MAX_OUTPUTS_BYTES`
    bytes (measured with ``wc -c`` in the pod before anything is copied).
    """
    quoted = shlex.quote(path)
    script = (f"[ -f {quoted} ] || exit 1; n=$(wc -c < {quoted}); "
              f"if [ \"$n\" -gt {MAX_OUTPUTS_BYTES} ]; then echo \"$n\" >&2; exit {TOO_LARGE_EXIT}; fi; cat {quoted}")
    done = kube_exec.run(core, namespace, pod, "workload", ["/bin/sh", "-c", script], 60)
    if done.exit_code == TOO_LARGE_EXIT:
        raise ActionFailed(f"entrypoint wrote a {done.stderr.strip()}-byte outputs file ({path}), more than the "
                          f"{MAX_OUTPUTS_BYTES} bytes read back", "outputs_too_large", "algorithm")
    return done.stdout.encode("utf-8", "surrogateescape") if done.exit_code == 0 else None


def execute(session: KubeSession, ctx: Step) -> ExecResult:
    """Copy inputs into the item's workload pod (once; starting it first when no startup item did),
    exec the rendered entrypoint with the layer timeout (seconds), read the outputs file.

    The pod's node is checked first and watched during the run (:mod:`.nodes`): a run whose node
    turns NotReady is abandoned at once; its result then carries ``failure`` (status ``error``,
    ``node_not_ready``, owner ``infrastructure``).

    Raises ActionFailed ``bad_entrypoint`` (algorithm) on an unknown placeholder, ``inputs_copy_failed``
    (:func:`copy_inputs`), EngineUnavailable ``node_not_ready`` (:func:`.nodes.ensure_ready`), a refused or
    broken exec translated by :func:`.client.api_outcome`, and whatever :func:`.startup.start` raises.
    """
    workload, started_here = _workload(session, ctx)
    pod, root = workload["pod"], f"/tmp/hetero-{session.owner}"
    node = node_of(session, workload)
    kube_node.ensure_ready(session, ctx, workload, node)
    _ensure_inputs(session, ctx, workload, root)
    m, d = ctx.model, ctx.dataset
    paths = input_paths(root, m.name, m.path, m.code or ctx.matrix.path.parent, d.name, d.path)
    run_dir = f"{root}/runs/{kc.dns_name(m.name, d.name)}-{uuid.uuid4().hex[:8]}"
    provider = EXECUTION_PROVIDERS[ctx.resource.type]
    values = {"python": str(session.target.get("python", "python3")), **paths,
              "outputs": f"{run_dir}/outputs.json", "provider": provider}
    argv = render_entrypoint(m.entrypoint, values)
    done, failure = _run_watched(session, ctx, workload, node, argv, run_dir, f"{root}/code/{m.name}",
                                 {"HETERO_EXECUTION_PROVIDER": provider})
    outputs = None
    if not (done.timed_out or failure):
        try:
            outputs = read_outputs(session.core, session.namespace, pod, values["outputs"])
        except ActionFailed as exc:
            failure = {"category": exc.category, "owner": exc.owner or "algorithm", "message": exc.message}
        except Exception as exc:  # noqa: BLE001 - translated (e.g. the pod was deleted during the run)
            raise kc.api_outcome(exc, f"read the outputs of the model run in pod {pod}") from None
    simulated = bool(session.nodes.get(node, {}).get("simulated"))
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
            **done.streams,
            **({"image": started_here} if started_here is not None else {}),
        },
    )


def _workload(session: KubeSession, ctx: Step) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The item's started workload; started here when no startup item did (then also the image
    identity the model layer checks: ``{"digest", "known", "what", "owner"}``)."""
    key = (ctx.resource.name, ctx.image.name)
    workload = session.workloads.get(key)
    if workload is not None and "pod" in workload:
        return workload, None
    ctx.record("model.note", message="no started workload from a startup item in this session; started here")
    identity = startup.start(session, ctx).identity
    started_here = None if identity is None else {
        "digest": identity.digest, "known": list(identity.known), "what": identity.what, "owner": identity.owner}
    return session.workloads[key], started_here


def _ensure_inputs(session: KubeSession, ctx: Step, workload: dict[str, Any], root: str) -> None:
    """Copy the matrix's inputs into the workload pod under ``root`` once per workload."""
    if workload.get("inputs"):
        return
    try:
        copy_inputs(session.core, session.namespace, workload["pod"], ctx.matrix, root, ctx.timeout_s)
    except ActionFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - translated
        raise kc.api_outcome(exc, f"copy the inputs into pod {workload['pod']}") from None
    workload["inputs"] = root


def _run_watched(
    session: KubeSession, ctx: Step, workload: dict[str, Any], node: str, argv: list[str], run_dir: str,
    workdir: str, env: dict[str, str],
) -> tuple[kube_exec.ExecOutcome, dict[str, str] | None]:
    """Run ``argv`` in the workload pod while watching ``node`` ("" = unknown, not watched); the run's
    outcome and, when the node turned NotReady, the abandoned run's ``failure`` dict."""
    pod = workload["pod"]
    watch = kube_node.NodeWatch(session.api, node).start() if node else None
    started_at, started = utc_now(), time.perf_counter()
    try:
        done = run_model(session.core, session.namespace, pod, argv, run_dir, workdir, env, ctx.timeout_s,
                         stop=watch.turned if watch else None)
    except ActionFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - a dying node often breaks the exec stream first
        if watch is None or not watch.turned.wait(2):
            raise kc.api_outcome(exc, f"exec the model entrypoint in pod {pod}") from None
        done = kube_exec.ExecOutcome(None, "", "", time.perf_counter() - started, False, "", abandoned=True)
    finally:
        if watch is not None:
            watch.stop()
    if not (done.abandoned and watch is not None):
        return done, None
    killed = kill_run(session.core, session.namespace, pod, run_dir, 5)
    return done, kube_node.abandoned(session, ctx, workload, watch, started_at, done.duration_s, killed)


def node_of(session: KubeSession, workload: dict[str, Any]) -> str:
    """Name of the node the workload's pod runs on, as the run's pod watch saw it ("" when unknown)."""
    pods = session.watch.by_key(workload["probe"]) if session.watch else []
    return next(((p.get("spec") or {}).get("nodeName", "") for p in pods), "")
