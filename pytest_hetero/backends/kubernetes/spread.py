"""Model runs spread over the pool's capacity: each model run a Pod of its own (``resources[].model_runs: per-run``).

With ``per-run`` (``--hetero-model-runs`` overrides the matrix, ini ``hetero_model_runs`` is the default) every model ×
dataset run of a resource × image is a workload of its own, built as the resource × image workload is
(:func:`.scheduling.manifest`: the resource's requests, nodeSelector, tolerations, priority class; a Job through
Kueue with ``submit_as: kueue-job``), placed by the real scheduler, and deleted once its run is read back. Each
Pod carries ``activeDeadlineSeconds`` (placement + run timeout + :data:`DEADLINE_MARGIN_S`), so a gate killed
with SIGKILL leaves no run going past it; Ctrl-C and SIGTERM reach :func:`shutdown` through the engine's close,
which stops the runs in flight (each kills its process first: on a KWOK node the exec outlives its Pod) and then
deletes every object the run created (what it cannot delete is reported as leftovers).

How a run goes (:func:`one_run`, in a thread of the group's pool): create the Pod, wait on the run's pod watch
until its container runs (placement and start, up to the model timeout; a Pod that will not start fails with
the category :func:`.startup.startup_failed` gives it), then run the model in it exactly as in the shared pod
(:func:`.run.execute`: inputs copied in, the entrypoint under the gate's wrapper, node watched, outputs read
back), read the devices the device plugin handed it (every ``*_VISIBLE_DEVICES`` variable in the container's
environment, printed on stderr by the run's exec before the run began, after it unpacked the run's inputs: one exec
for both, :func:`.run.run_model`'s ``inputs``), and delete the Pod (and forget it in the pod watch).

**Concurrency and joining** are the engine-neutral :class:`~pytest_hetero.backends.spread.Spread`'s: the first
model item of a resource × image launches the runs of itself and of the model items after it, at most
``concurrency`` (``--hetero-concurrency`` > ``resources[].concurrency`` > ini ``hetero_concurrency``, default 4)
Pods at once; each model item joins its own run's result when it arrives. ``concurrency: free`` is counted from the
pool when the first run is planned (:func:`free_capacity`: what the Ready, schedulable, tolerated nodes' allocatable
leaves beside their pods' requests, per node, recorded as ``model.spread``'s ``free_capacity``).

**The startup workload** (the resource × image pod the startup item proved) is deleted when the first run is
launched, so the devices it held serve the model runs; when no startup item started one, each run's own Pod gives
the image digest the model layer checks.

Evidence per run (``details["spread"]``): the Pod, the node it ran on, the devices it was handed, when it was
created, running, run, deleted (epoch seconds), how long it waited for a slot and for the scheduler, the
concurrency. ``details["isolation"]`` says the run had its pod to itself (isolation between model runs proven);
on a KWOK-simulated node the run executed on the KWOK host, and isolation is stated not proven.
"""

from __future__ import annotations

import functools
import re
import time
import uuid
import weakref
from typing import TYPE_CHECKING

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import inventory, startup
from pytest_hetero.backends.kubernetes import podexec as kube_exec
from pytest_hetero.backends.kubernetes import run as kube_model
from pytest_hetero.backends.kubernetes import scheduling as ks
from pytest_hetero.backends.kubernetes import usage as kube_usage
from pytest_hetero.backends.kubernetes.capacity import FreeCapacity, free_runs
from pytest_hetero.backends.kubernetes.governance import in_maintenance
from pytest_hetero.backends.kubernetes.manifests import ServedPod, Workload
from pytest_hetero.backends.kubernetes.objects import parse_pod, unseen_pod
from pytest_hetero.backends.kubernetes.session import WorkloadRecord
from pytest_hetero.backends.kubernetes.submit import workload_key
from pytest_hetero.backends.protocol import ActionFailed, EngineFault, ExecResult, Step, UsageFacts
from pytest_hetero.backends.spread import Concurrency, Deferred, Plan, Spread

if TYPE_CHECKING:
    from pytest_hetero.backends.kubernetes.session import KubeSession

PER_RUN_POD: kube_model.Isolation = {
    "mechanism": "kubernetes pod of its own per model run, placed by the scheduler with the resource's requests "
                 "and deleted after the run",
    "confined": True, "shared_between_runs": False,
    "models_isolation": "proven: no other model run used this run's pod (file system, processes, devices); not "
                        "covered: the network, where run Pods at once share the pod network and one can reach "
                        "another's listening ports unless a NetworkPolicy of the namespace stops it",
}
"""``isolation`` of a per-run model run on a node with a kubelet: what is proven, and what it does not cover (the pod
network; Docker's per-run containers on a shared network are not proven at all: :func:`..docker.spread.isolation`)."""
PER_RUN_SIMULATED: kube_model.Isolation = {
    "mechanism": "kubernetes pod of its own per model run on a KWOK-simulated node",
    "confined": True, "shared_between_runs": True,
    "reason": "the run executed on the KWOK host (simulated node), where every run shares one file system",
}
"""``isolation`` of a per-run model run on a KWOK node: not proven (the exec ran on the simulator's host)."""
DEADLINE_MARGIN_S = 60.0
"""Seconds added to a run Pod's placement + run timeouts for its ``activeDeadlineSeconds``."""
VISIBLE = re.compile(r"^([A-Z0-9_]*VISIBLE_DEVICES)=(.*)$", re.MULTILINE)
"""Environment variables through which device plugins hand a container its devices."""


_SPREADS: weakref.WeakKeyDictionary[KubeSession, Spread] = weakref.WeakKeyDictionary()


def execute(session: KubeSession, step: Step) -> ExecResult:
    """The item's model run in a Pod of its own (see the module docstring); on the group's first item, the runs of
    the model items after it are launched too. Raises what the run raised (an EngineFault: the Pod refused, not
    started, the exec broken), after writing the run's records into ``step``."""
    with session.lock:
        spread = _SPREADS.setdefault(session, Spread())

    def plan(concurrency: Concurrency) -> Plan:
        released = release_shared(session, step)
        facts: dict[str, object] = {"startup_workload_released": released, "concurrency_setting": concurrency}
        if concurrency == "free":
            found = free_capacity(session, step, released)
            facts["free_capacity"], width = found, found["width"]
        else:
            width = concurrency
        return Plan(run=functools.partial(one_run, session), unexpected=_unexpected, width=width, noun="Pod",
                    facts=facts)

    return spread.execute(step, plan)


def free_capacity(session: KubeSession, step: Step, released: str | None) -> FreeCapacity:
    """``concurrency: free`` on this pool now (:func:`.capacity.free_runs`): the resource's nodes listed again
    (:func:`.inventory.pool`), the startup pod the gate has just deleted (``released``) not counted, a node taking
    no run for what :func:`.governance.in_maintenance` names. Raises the :func:`~.client.api_outcome` of a refused
    or failed node list; pods that cannot be listed leave every node at 0 (one run at a time, said so)."""
    exclude = frozenset({(session.namespace, released)}) if released else frozenset()
    found = inventory.pool(step, session.api, exclude, also=("pods",))
    return free_runs(found.nodes, step.resource.requests, lambda node: in_maintenance(node, step.resource),
                     found.snapshot["capacity_view"]["unavailable"])


def _unexpected(exc: Exception, step: Deferred) -> EngineFault:
    """Any other exception of a run, translated (:func:`.client.api_outcome`)."""
    return kc.api_outcome(exc, f"run the model of {'::'.join(step.planned.parts)} in a pod of its own")


def release_shared(session: KubeSession, step: Step) -> str | None:
    """Delete the started resource × image workload's pod (its startup is proven), so the devices it holds serve
    the model runs; the pod's name, or None when no startup item started one in this session."""
    workload = session.workloads.get(workload_key(step.resource.name, step.image.name))
    if workload is None or workload.pod is None or workload.released:
        return None
    _delete(session, workload.body, workload.name, workload.pod)
    workload.released = time.time()
    return workload.pod


def one_run(session: KubeSession, step: Deferred, width: int, queued: float) -> ExecResult:
    """Create the run's Pod, wait until it runs, run the model in it (:func:`.run.execute`), delete it; the
    result with ``details["spread"]`` (see the module docstring). Raises what placement, startup or the run raise
    (a run the gate stops before it begins is refused by :class:`~pytest_hetero.backends.spread.Group`)."""
    begun = time.time()
    workload = create(session, step)
    name = node = ""
    try:
        found = session.pods().wait(workload.probe, startup.waiter(), step.timeout_s)
        pods = session.pods().by_key(workload.probe)
        pod: ServedPod = found[1] if found else (pods[-1] if pods else unseen_pod(workload.name))
        name = str(pod["metadata"]["name"])
        seen = parse_pod(pod)
        if found is None or found[0] == "failed":
            step.record("model.run_pod", pod=name, node=seen.node_name or None, phase=seen.phase)
            startup.startup_failed(session, step, pod, found is None)
        running = time.time()
        node = seen.node_name
        workload.pod = name
        simulated = session.simulated(node)
        spread = _SPREADS.get(session)
        result = kube_model.execute(session, step, given=workload,
                                    isolation=PER_RUN_SIMULATED if simulated else PER_RUN_POD,
                                    halt=spread.stop if spread is not None else None)
        devices, workload.env = visible_devices(workload.env or ""), None
        ran: UsageFacts = result.details["workload"]  # the exec's own times (.run.execute keeps .usage.exec_facts)
        ident = startup.image_identity(seen)
        shared = session.workloads.get(workload_key(step.resource.name, step.image.name))
        if shared is None or shared.pod is None:
            result.details["image"] = {"digest": ident["digest"], "known": [ident["digest"] or ""],
                                       "what": f"image {step.image.reference}"}
        facts = kube_usage.workload_facts(session, workload, outcome="completed" if result.exit_code == 0 else "failed")
    finally:
        inputs, workload.inputs = workload.inputs, None
        if inputs and workload.root and session.simulated(node):
            # on a KWOK node the copy is on the host (each run has a root of its own there): removed with the run
            kube_exec.try_run(session.core, session.namespace, name, ["rm", "-rf", workload.root], 5)
        deleted = _delete(session, workload.body, workload.name, workload.pod)
        if session.watch is not None:
            session.watch.forget(workload.probe)  # read for the last time above: thousands of runs keep none
    facts["released"] = deleted
    result.details["workload"] = facts
    result.details["spread"] = {
        "pod": name, "node": node or None, "devices": devices, "concurrency": width,
        "queued_at": queued, "created_at": begun, "running_at": running,
        "run_started_at": ran["started"], "run_ended_at": ran["ended"], "deleted_at": deleted,
        "waited_for_slot_s": round(begun - queued, 3), "waited_for_pod_s": round(running - begun, 3),
    }
    return result


def create(session: KubeSession, step: Step) -> WorkloadRecord:
    """Create the run's workload (a Pod, or the Job ``submit_as`` names) with ``activeDeadlineSeconds``; its record
    (``probe``, ``name``, ``kind``, ``body``, ``submitted_at``), shaped as :func:`.submit.submit`'s. Raises
    ActionFailed ``bad_target`` when the manifest cannot be built, the translated refusal of the create."""
    res, img = step.resource, step.image
    # 40 random bits: thousands of run Pods at once never share a name, nor (on a KWOK host) an inputs folder
    tail = f"{uuid.uuid4().hex[:10]}-{session.owner[:6]}"
    probe = f"{kc.dns_name('run', res.name, step.model.name, step.dataset.name, limit=45)}-{tail}"
    labels = kc.labels(session.settings.run_id, session.owner, "workload", matrix=step.matrix.name,
                       resource=res.name, image=img.name, probe=probe)
    try:
        body = ks.manifest(session.submit_as, probe, session.namespace, labels, res, img.reference,
                           session.conf.image_pull_policy, kc.created_annotations())
    except ValueError as exc:
        raise ActionFailed(str(exc), "bad_target") from None
    deadline = int(2 * step.timeout_s + DEADLINE_MARGIN_S)
    if body["kind"] == "Pod":
        body["spec"]["activeDeadlineSeconds"] = deadline
    elif body["apiVersion"] == "batch/v1":
        body["spec"]["activeDeadlineSeconds"] = deadline
        body["spec"]["template"]["spec"]["activeDeadlineSeconds"] = deadline
    workload = WorkloadRecord(probe=probe, name=probe, kind=session.submit_as, error=None, node=None, body=body,
                              submitted_at=time.time(), root=f"/tmp/hetero-{session.owner}-{tail[:10]}")
    try:
        ks.create(session.api, body)
    except Exception as exc:  # noqa: BLE001 - translated
        raise kc.api_outcome(exc, f"create {body['kind']} {probe} in namespace {session.namespace}") from None
    return workload


def visible_devices(env: str) -> dict[str, str]:
    """Every ``*_VISIBLE_DEVICES`` variable of a container environment as ``env`` prints it (what the device plugin
    handed the run's container, printed by the run's exec before the run began: :func:`.run.inputs_prelude`); empty when
    there is none or it could not be read."""
    return dict(VISIBLE.findall(env))


def _delete(session: KubeSession, body: Workload | None, name: str, pod: str | None) -> float:
    """Delete the run's object (``body`` None: a pod; grace 0; a Job with its pods; :func:`.client.raw_request`),
    never raising; epoch seconds of the request."""
    when = time.time()
    ns = session.namespace
    try:
        if body is None or body["kind"] == "Pod":
            kc.raw_request(session.api, "DELETE", f"/api/v1/namespaces/{ns}/pods/{pod or name}",
                           query=[("gracePeriodSeconds", "0")], timeout_s=30)
        elif body["apiVersion"] == "batch/v1":
            kc.raw_request(session.api, "DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/{name}",
                           query=[("gracePeriodSeconds", "0"), ("propagationPolicy", "Background")], timeout_s=30)
    except Exception:  # noqa: BLE001, S110 - gone already, or left to the engine's close (owner label)
        pass
    return when


RUNS_END_S = 15.0
"""Seconds :func:`shutdown` waits for the runs in flight to end once stopped (each kills its process by an exec of
at most 5 s, then removes its inputs and deletes its Pod)."""


def shutdown(session: KubeSession) -> None:
    """Stop the runs: queued ones are cancelled; each running one kills its process (its exec sees the spread's stop
    within 0.5 s: :func:`.run.execute`'s ``halt``) while its Pod is still there, since on a KWOK node the exec runs on
    the host and outlives the Pod. Waits up to :data:`RUNS_END_S` for them, so close deletes what is left after."""
    spread = _SPREADS.get(session)
    if spread is not None:
        spread.shutdown()
        spread.wait(RUNS_END_S)
