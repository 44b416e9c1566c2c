"""Kubernetes backend: validates a cluster's pools through the path a user's workload takes.

Target keys (``spec.target``): ``context``, ``namespace``, ``kubeconfig`` (see
:mod:`~pytest_hetero.backends.kubernetes.client`; ``--hetero-kube-context``/``--hetero-kube-namespace``
override), ``submit_as`` (``pod`` | ``job`` | ``kueue-job`` | ``volcano-job``, see
:mod:`~pytest_hetero.backends.kubernetes.scheduling`), ``pull_policy`` (``never`` → ``Never``,
``always`` → ``Always``, else ``IfNotPresent``), ``image_owner`` (read by the judge alone),
``python`` (``{python}`` in the pod, default ``python3``), ``unschedulable_grace_s`` (seconds a pod
may stay Unschedulable before the verdict is final; default 0: the scheduler's first verdict),
``cleanup_wait_s`` (seconds :meth:`KubernetesBackend.close` waits for deleted objects to be gone before it
reports them as leftovers; default 30).

One workload pod per resource × image: placement submits it and waits (on one pod watch) until it
is placed (:mod:`~pytest_hetero.backends.kubernetes.submit`); start waits until its container runs
(:mod:`~pytest_hetero.backends.kubernetes.startup`); commands (the device payload) and model runs exec
into it (:mod:`~pytest_hetero.backends.kubernetes.run`); with ``model_runs: per-run`` each model run is a Pod
of its own, up to the resource's concurrency at once (:mod:`~pytest_hetero.backends.kubernetes.spread`).
The modules share one
:class:`~pytest_hetero.backends.kubernetes.session.KubeSession`; verdicts are the layers'. With
``--hetero-parallel N`` > 1 the first
scheduling item submits every resource × image workload of its matrix, N at a time, so the
scheduler places them concurrently. Everything
created carries ``pytest-hetero.run-id``/``pytest-hetero.owner`` and is deleted by :meth:`close`
(session end, Ctrl-C, SIGTERM) unless ``--hetero-keep``; ``hetero cleanup --backend kubernetes``
removes leftovers.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from typing import Any

from pytest_hetero.backends.jobs import Job, JobSpec, RankExit
from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import inventory, startup, submit
from pytest_hetero.backends.kubernetes import podexec as kube_exec
from pytest_hetero.backends.kubernetes import run as kube_model
from pytest_hetero.backends.kubernetes import serving as kube_serving
from pytest_hetero.backends.kubernetes import usage as kube_usage
from pytest_hetero.backends.kubernetes.session import KubeSession
from pytest_hetero.backends.labels import OWNER
from pytest_hetero.backends.protocol import (
    ActionFailed,
    Backend,
    EngineFault,
    ExecResult,
    GovernanceReport,
    Inventory,
    JobPlacement,
    JobRequest,
    Leftover,
    Measure,
    Placement,
    ReserveReport,
    ServingPod,
    ServingRequest,
    Started,
    Step,
    SwitchFacts,
)
from pytest_hetero.matrix.model import GovernanceProbe
from pytest_hetero.settings import Settings


class KubernetesBackend(Backend):
    """A cluster reached with the official ``kubernetes`` client; see the module docstring for target keys."""

    name = "kubernetes"
    scheduling_per_image = True

    def __init__(self, target: dict[str, Any], settings: Settings) -> None:
        super().__init__(target, settings)
        self.session = KubeSession(target, settings)

    def fingerprint(self) -> dict[str, Any]:
        """Apiserver host and context, nodes seen (``simulated_nodes``: those of them KWOK simulates; the
        others have a real kubelet), server version, image digests reported by nodes."""
        s = self.session
        host = s.api.configuration.host if s.connected else None
        return {
            "backend": self.name,
            "identity": f"{host} (context {s.context}, namespace {s.namespace})",
            "nodes": sorted(s.seen_nodes),
            "simulated_nodes": sorted(n for n in s.seen_nodes if s.simulated(n)),
            "versions": {"server": s.server.git_version if s.server else None,
                         "platform": s.server.platform if s.server else None},
            "images": dict(s.digests),
        }

    def inventory(self, step: Step) -> Inventory:
        """The nodes of the resource's pool as the apiserver lists them (see :mod:`.inventory`)."""
        s = self.session
        pool = inventory.pool(step, s.api)
        for facts in pool.nodes:
            s.listed(facts.copy())
            s.seen_nodes.add(facts["name"])
        return Inventory(pool=pool)

    def place(self, step: Step) -> Placement:
        """Submit (or find the prefetched) workload and wait until it is placed: the pod's placement
        (``scheduling.placed`` recorded), or why not (``scheduling.pending`` recorded)."""
        s = self.session
        s.pods()
        submit.prefetch(s, step)
        key = (step.resource.name, step.image.name)
        try:
            placed = submit.place(s, step, step.timeout_s)
        except EngineFault as fault:  # the create was refused: what it asked for, and that it got nothing
            fault.usage = fault.usage or kube_usage.workload_facts(s, s.workloads.get(key), outcome="refused")
            raise
        if isinstance(placed, Placement):
            placed.usage = kube_usage.workload_facts(s, s.workloads[key], outcome="refused")
            return placed
        return Placement(placed=True, usage=kube_usage.workload_facts(s, s.workloads[key], placed))

    def place_job(self, step: Step, request: JobRequest) -> JobPlacement:
        """A task type's job: an indexed Job with a headless Service, admitted by Kueue as one Workload;
        its admission, pods and rendezvous (see :mod:`.gang`)."""
        from pytest_hetero.backends.kubernetes import gang

        return gang.place_job(self.session, step, request)

    # -- jobs of several ranks: an indexed Job with a headless Service, one pod per rank (.jobs) ------------
    def start_job(self, step: Step, spec: JobSpec) -> Job:
        """The training checks' job: the gang job's manifests with the gate's programs, through Kueue when the
        matrix names a queue (see :func:`.jobs.start`)."""
        from pytest_hetero.backends.kubernetes import jobs as kube_jobs

        return kube_jobs.start(self.session, step, spec, self._python)

    def job_logs(self, job: Job, rank: int) -> str:
        """Rank ``rank``'s log so far (stdout and stderr: one log on Kubernetes)."""
        from pytest_hetero.backends.kubernetes import jobs as kube_jobs

        return kube_jobs.logs(self.session, job, rank)

    def job_running(self, job: Job) -> list[int]:
        """The ranks whose container runs."""
        from pytest_hetero.backends.kubernetes import jobs as kube_jobs

        return kube_jobs.running(self.session, job)

    def kill_rank(self, job: Job, rank: int) -> None:
        """SIGKILL rank ``rank``'s program in its pod."""
        from pytest_hetero.backends.kubernetes import jobs as kube_jobs

        kube_jobs.kill(self.session, job, rank, self._python)

    def wait_job(self, job: Job, timeout_s: float, settle_s: float = 10.0) -> list[RankExit]:
        """Every rank's exit (:func:`.jobs.wait`)."""
        from pytest_hetero.backends.kubernetes import jobs as kube_jobs

        return kube_jobs.wait(self.session, job, timeout_s, settle_s, self._python)

    def remove_job(self, job: Job) -> None:
        """Delete the job's Job, pods, Service and ConfigMap."""
        from pytest_hetero.backends.kubernetes import jobs as kube_jobs

        kube_jobs.remove(self.session, job)

    @property
    def _python(self) -> str:
        return self.session.conf.python

    def start(self, step: Step) -> Started:
        """Wait until the workload container runs, or say why not (see :func:`.startup.start`); the
        workload's usage facts (:mod:`.usage`) ride on the Started, or on the fault when it did not start."""
        s = self.session
        key = (step.resource.name, step.image.name)
        try:
            started = startup.start(s, step)
        except EngineFault as fault:
            if not fault.usage and key in s.workloads:
                fault.usage = kube_usage.workload_facts(s, s.workloads[key], outcome="failed")
            raise
        started.usage = kube_usage.workload_facts(s, s.workloads[key])
        return started

    def start_on(self, step: Step, nodes: list[str]) -> list[Started | EngineFault]:
        """Node coverage: one workload per node, pinned by a node affinity on ``metadata.name`` (as the
        DaemonSet controller pins its pods) and placed by the scheduler; all are created first, so they are
        placed and started together, then each is waited for (:func:`.submit.place`, :func:`.startup.start`)
        up to the layer timeout. One Started or EngineFault per node, in order; each node's records
        (``scheduling.submitted``/``placed``/``pending``, ``startup.pod``/``failed``) name it."""
        s = self.session
        s.pods()
        res, img = step.resource.name, step.image.name
        for node in nodes:
            try:
                submit.submit(s, step.matrix, res, img, node)
            except EngineFault:  # kept on the workload's record: place() raises it for its node
                pass
        out: list[Started | EngineFault] = []
        for node in nodes:
            key = submit.workload_key(res, img, node)
            try:
                placed = submit.place(s, step, step.timeout_s, node)
                if isinstance(placed, Placement):
                    code = placed.decisive["code"] if placed.decisive else None
                    raise ActionFailed(placed.message, code or "scheduling_timeout")
                started = startup.start(s, step, node)
                started.usage = kube_usage.workload_facts(s, s.workloads[key])
                out.append(started)
            except EngineFault as fault:
                if not fault.usage and key in s.workloads:
                    fault.usage = kube_usage.workload_facts(s, s.workloads[key], outcome="failed")
                out.append(fault)
        return out

    def run(self, started: Started, argv: list[str], timeout_s: float, env: dict[str, str] | None = None
            ) -> ExecResult:
        """Exec ``argv`` in the started pod's ``workload`` container through the apiserver; ``env`` is set
        by a ``/bin/sh`` wrapper (exec has no environment of its own). Raises the
        :func:`~.client.api_outcome` of a refused exec, and ActionFailed when the container stopped or
        restarted before or while ``argv`` ran (:func:`.startup.stopped`: ``startup_oom_killed``, …)."""
        s = self.session
        if env:
            exports = "".join(f"{k}={_sh_quote(v)}; export {k}\n" for k, v in env.items())
            argv = ["/bin/sh", "-c", exports + 'exec "$@"', "sh", *argv]
        begin = time.perf_counter()
        try:
            done = kube_exec.run(s.core, s.namespace, str(started.handle), "workload", argv, timeout_s)
        except Exception as exc:  # noqa: BLE001 - translated
            fault = startup.stopped(s, str(started.handle), f"before {argv[0]} could run in it", 2.0)
            raise (fault or kc.api_outcome(exc, f"exec {argv[0]} in pod {started.handle}")) from None
        if done.exit_code != 0 and not done.timed_out:
            # a check that gave no exit status, or failed, in a container that stopped meanwhile (an image
            # OOM-killed just after it was seen running): the stop is the fact, as on Docker; after no status
            # or a signal's exit (>= 128) the kubelet is given a moment to report the stop
            fault = startup.stopped(s, str(started.handle), f"while {argv[0]} ran in it (exit {done.exit_code})",
                                    startup.STOP_SETTLE_S if done.exit_code is None or done.exit_code >= 128
                                    else 0.0)
            if fault is not None:
                raise fault
        return ExecResult(argv=argv, exit_code=done.exit_code, duration_s=time.perf_counter() - begin,
                          stdout=done.stdout, stderr=done.stderr, outputs=None, timed_out=done.timed_out)

    def logs(self, started: Started) -> str:
        """The workload container's log (the last 2,000 lines), or why there is none."""
        return startup.read_logs(self.session.core, self.session.namespace, str(started.handle))

    def execute(self, step: Step) -> ExecResult:
        """Copy inputs into the workload pod (once), exec the entrypoint with the layer timeout, read outputs.

        See :func:`.run.execute` for the result's details and the faults it raises. With ``model_runs: per-run``
        the run gets a Pod of its own, and the runs of the model items after it are launched ahead, up to the
        resource's concurrency (see :mod:`.spread`).
        """
        from pytest_hetero.backends.kubernetes import spread
        from pytest_hetero.backends.spread import wanted

        if wanted(step):
            return spread.execute(self.session, step)
        return kube_model.execute(self.session, step)

    def serving_endpoint(self, step: Step, request: ServingRequest) -> str:
        """Deploy ``request.deploy`` (a Deployment + Service of ``step.image``, once) and wait until ready;
        the ready pod's ``http://IP:PORT`` from the Service's EndpointSlice (see :mod:`.serving`)."""
        return kube_serving.endpoint(self.session, step, request)

    def serving_pods(self, step: Step, request: ServingRequest) -> list[ServingPod]:
        """The Deployment's current pods: node, resources, image digest, version (see :func:`.serving.pods`)."""
        return kube_serving.pods(self.session, request)

    def serving_switch(self, step: Step, request: ServingRequest, version: str) -> SwitchFacts:
        """Roll the Deployment to ``version`` (rollout undo semantics) and wait (see :func:`.serving.switch`)."""
        facts = kube_serving.switch(self.session, step, request, version)
        step.record("serving.k8s.rollout", version=version, **facts)
        return facts

    def govern(self, step: Step, probe: GovernanceProbe) -> GovernanceReport:
        """Carry out a governance probe as its tenant and remove what it created (see :mod:`.governance`)."""
        from pytest_hetero.backends.kubernetes import governance

        return governance.govern(self.session, step, probe)

    def reserve_inference(self, step: Step, probe: GovernanceProbe, request: ServingRequest,
                          measure: Measure) -> ReserveReport:
        """A serving Deployment loaded while a training burst fills its pool (see :mod:`.reserved`)."""
        from pytest_hetero.backends.kubernetes import reserved

        return reserved.probe(self.session, step, probe, request, measure)

    def close(self) -> list[Leftover]:
        """Stop the watch; delete everything this backend created (by owner label) unless ``--hetero-keep``,
        and wait until it is gone (``target.cleanup_wait_s``, default 30 s); return what is left (see
        :func:`.cleanup.delete_owned`: a refused deletion, a finalizer that never clears).

        Runs with SIGINT/SIGTERM held off (main thread) so a second Ctrl-C or a SIGTERM cannot cut the
        deletion short; they are restored afterwards.
        """
        held: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                held[sig] = signal.signal(sig, signal.SIG_IGN)
        try:
            return self._close()
        finally:
            for sig, handler in held.items():
                signal.signal(sig, handler)

    def _close(self) -> list[Leftover]:
        s = self.session
        from pytest_hetero.backends.kubernetes import spread

        spread.shutdown(s)
        kube_model.kill_running(s)  # what helper threads still run (a smoke run after Ctrl-C), before deletion
        s.pool.shutdown(wait=True, cancel_futures=True)
        if s.watch is not None:
            s.watch.stop()
        if s.node_feed is not None:
            s.node_feed.stop()
        if not s.connected:
            return []
        from pytest_hetero.backends.kubernetes.cleanup import CLEANUP_WAIT_S, delete_owned

        if s.settings.keep:
            for w in s.workloads.values():
                sys.stderr.write(
                    f"pytest-hetero: kept {w.kind} {w.name} in namespace {s.namespace}; "
                    f"remove with: hetero cleanup --backend kubernetes --run-id {s.settings.run_id}\n"
                )
            for namespace, name in s.serving:
                sys.stderr.write(
                    f"pytest-hetero: kept serving Deployment/Service {name} in namespace {namespace}; "
                    f"remove with: hetero cleanup --backend kubernetes --run-id {s.settings.run_id}\n"
                )
            return []
        for w in s.workloads.values():
            if not w.inputs or w.pod is None:
                continue
            # on a KWOK node the copy lives on the host, not in the pod; a lost node gets 5 s to answer
            rm = ["rm", "-rf", w.inputs]
            if w.node_lost:
                kube_exec.try_run(s.core, s.namespace, w.pod, rm, 5)
                continue
            try:
                kube_exec.run(s.core, s.namespace, w.pod, "workload", rm, 30)
            except Exception:  # noqa: BLE001, S110 - the pod may be gone already
                pass
        wait_s = CLEANUP_WAIT_S if s.conf.cleanup_wait_s is None else s.conf.cleanup_wait_s
        left = []
        for namespace in sorted({s.namespace} | kube_serving.namespaces(s)):
            left += delete_owned(s.api, namespace, f"{OWNER}={s.owner}", s.settings.parallel, wait_s)
        return left


def _sh_quote(value: str) -> str:
    """``value`` single-quoted for POSIX sh."""
    return "'" + value.replace("'", "'\\''") + "'"
