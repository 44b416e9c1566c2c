"""Jobs of several ranks on Kubernetes (:mod:`pytest_hetero.backends.jobs`): the training checks' job is the task
type's gang job of :mod:`.gang` (its manifests, reused): a headless Service and an Indexed Job of
``world_size`` completions, one pod per rank, the rank from the completion index; submitted to Kueue (suspended,
``kueue.x-k8s.io/queue-name``) when the matrix names a queue for the model's task type (``spec.task_queues``) or
its resource, else started at once.

To what the gang job is, this adds

* the gate's programs (:attr:`JobSpec.files`) in a ConfigMap mounted read-only at
  :data:`~pytest_hetero.backends.jobs.JOB_DIR`; the volume (:attr:`JobSpec.volume`: a PersistentVolumeClaim
  name) at :data:`~pytest_hetero.backends.jobs.VOLUME_DIR`;
* ``HETERO_RANK``/``RANK`` from the pod's completion index (downward API), the other variables of
  :meth:`JobSpec.rank_env` in the template;
* the rendezvous address: every pod starts the :data:`LAUNCHER` (Python standard library), which waits until the
  gate wrote rank 0's pod IP into :data:`ADDRESS_FILE` (an emptyDir, by exec once every pod runs; JSON
  ``{"addr", "env", "unset"}``: the attempt's own variables over the template's) and then execs the program
  with ``HETERO_RENDEZVOUS_ADDR``/``MASTER_ADDR`` set. The pod IP, not the headless Service's DNS
  name ``<job>-0.<service>``: the name needs cluster DNS, which a cluster may lack (the test node has none),
  while the pod IP is the address the CNI gives and routes; the DNS name is in evidence beside it;
* ``shareProcessNamespace``: the rank's program is then not its PID namespace's init, so the gate's kill
  (:func:`kill`, exec ``kill -9``) is a real SIGKILL and the kubelet reports the runtime's exit code (137);
* ``backoffLimitPerIndex: 0``: a failed rank is not retried and does not make the Job controller delete the
  other ranks' pods (with ``backoffLimit: 0`` it would, and their exits would be lost): the gate stops them
  itself after the settle time, as on Docker;
* the checkpoint job (one with a volume) restarts **in place**: ``backoffLimitPerIndex: 1`` and a
  ``podFailurePolicy`` that fails the index at once on any exit but 137, so the gate's SIGKILL makes the Job
  controller start a new pod of the same index over the same claim; :func:`remove` keeps that Job
  (:data:`KEPT`) and the next attempt's :func:`start` takes the new pod over (it waits in the launcher until the
  gate hands it the address) instead of creating another Job.

Facts only (:class:`~pytest_hetero.backends.jobs.RankExit`): exit codes, the kubelet's ``OOMKilled``, the
container's log (Kubernetes keeps stdout and stderr in one log: ``stdout`` is the whole log, ``stderr`` its
lines that are not the programs' JSON event lines), start and end times. Everything carries the run's owner
labels, so the engine's close and ``hetero cleanup`` remove what :func:`remove` could not.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict

from kubernetes import client

from pytest_hetero.backends.jobs import JOB_DIR, VOLUME_DIR, Job, JobSpec, RankExit
from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import gang, nodes, podexec, queues
from pytest_hetero.backends.kubernetes import usage as kube_usage
from pytest_hetero.backends.kubernetes.manifests import (
    ConfigMapManifest,
    EnvVar,
    EnvVarSource,
    JobManifest,
    ServedPod,
    ServedWorkload,
    ServiceManifest,
    Volume,
    VolumeMount,
)
from pytest_hetero.backends.kubernetes.objects import NO_STATUS, ContainerStatus, Pod, parse_node, parse_pod
from pytest_hetero.backends.labels import LABEL
from pytest_hetero.backends.protocol import (
    ActionFailed,
    GangPod,
    JobAdmission,
    JobPlacement,
    JobRequest,
    Step,
    Unsupported,
)
from pytest_hetero.evidence.usage import epoch

if TYPE_CHECKING:
    from typing import NotRequired

    from pytest_hetero.backends.kubernetes.session import KubeSession
    from pytest_hetero.pending.model import ReasonDict

LAUNCHER = "hetero-launch.py"
"""File name of the launcher in :data:`~pytest_hetero.backends.jobs.JOB_DIR`."""
ADDRESS_DIR = "/hetero-rendezvous"
ADDRESS_FILE = ADDRESS_DIR + "/addr"
"""Where the gate writes rank 0's address in every pod (an emptyDir)."""
LAUNCHER_CODE = r'''"""pytest-hetero job launcher: wait for rank 0's address (the gate writes it), exec the program."""
import json, os, sys, time
path = "/hetero-rendezvous/addr"
end = time.monotonic() + float(os.environ.get("HETERO_ADDRESS_WAIT_S", "600"))
while not os.path.exists(path):
    if time.monotonic() > end:
        print("hetero-launch: the gate never wrote rank 0's address to " + path, file=sys.stderr, flush=True)
        sys.exit(3)
    time.sleep(0.1)
with open(path) as fh:
    given = json.load(fh)
for key in given["unset"]:
    os.environ.pop(key, None)
os.environ.update(given["env"])
os.environ["HETERO_RENDEZVOUS_ADDR"] = os.environ["MASTER_ADDR"] = given["addr"]
os.execvp(sys.argv[1], sys.argv[1:])
'''
WRITE_ADDRESS = ("import os, sys\nopen(sys.argv[1] + '.tmp', 'w').write(sys.argv[2])\n"
                 "os.replace(sys.argv[1] + '.tmp', sys.argv[1])\n")
"""Run by exec in a rank's pod: write argv[2] (a :class:`Handover`'s JSON) to argv[1] atomically."""
KILL = ("import os, sys\nme = os.getpid()\nfor p in os.listdir('/proc'):\n"
        "    if not p.isdigit() or int(p) == me:\n        continue\n"
        "    try:\n        line = open('/proc/%s/cmdline' % p, 'rb').read()\n    except OSError:\n        continue\n"
        "    if sys.argv[1].encode() in line:\n        os.kill(int(p), 9)\n        print(p)\n")
"""Run by exec in a rank's pod: SIGKILL every process whose command line holds argv[1] (the job's folder)."""
LOG_LIMIT = 256 * 1024
"""Bytes of each rank's log kept (the tail)."""
TAIL_LINES = 4000
"""Lines of each rank's log asked of the kubelet (it reads them from the log's end); :data:`LOG_LIMIT` bounds
their bytes."""
POLL_S = 0.5
"""Seconds between two looks at the rank pods while waiting."""
PER_RANK = {"HETERO_RANK", "RANK", "HETERO_RENDEZVOUS_ADDR", "MASTER_ADDR"}
"""Variables of :meth:`JobSpec.rank_env` that differ per rank or come from the launcher."""


def request_of(step: Step, spec: JobSpec) -> JobRequest:
    """The gang :class:`~pytest_hetero.backends.protocol.JobRequest` of ``spec``: the model's task type, its
    ``spec.task_queues`` rule's queue and priority class (else the resource's queue), ``world_size`` workers."""
    task = step.model.task_type  # a TaskType, never empty (the schema enum, or the build's default)
    rule = next((r for r in step.matrix.task_queues if r.task_type == task), None)
    return JobRequest(task_type=task, workers=spec.world_size,
                      queue=(rule.queue if rule else None) or step.resource.queue,
                      priority_class=rule.priority_class if rule else None, wait_s=step.timeout_s)


def manifests(session: KubeSession, step: Step, spec: JobSpec, python: str
              ) -> tuple[str, ConfigMapManifest, ServiceManifest, JobManifest, JobRequest]:
    """``(name, configmap, service, job, request)``: :func:`.gang.manifests` of the job's request with the
    programs, the volume, the launcher, the per-rank environment (module docstring)."""
    request = request_of(step, spec)
    name, probe = gang.names(session, step, f"{spec.name[:5]}{spec.attempt}")
    service, job = gang.manifests(session, step, request, name, probe)
    labels = {**job["metadata"]["labels"], LABEL + "job": spec.name}
    if not request.queue:  # no queue: the Job runs at once, Kueue leaves it alone
        labels.pop("kueue.x-k8s.io/queue-name", None)
        job["spec"]["suspend"] = False
    job["metadata"]["labels"] = labels
    service["spec"]["ports"] = [{"name": "rdzv", "port": spec.port, "targetPort": spec.port}]
    files = {**spec.files, LAUNCHER: LAUNCHER_CODE.encode()}
    configmap: ConfigMapManifest = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {**service["metadata"], "labels": dict(service["metadata"]["labels"])},
                 "binaryData": {k: base64.b64encode(v).decode() for k, v in files.items()}}
    jspec = job["spec"]
    jspec.pop("backoffLimit", None)
    jspec["backoffLimitPerIndex"] = 0
    if spec.volume:  # the checkpoint job: a SIGKILLed rank (137: the gate's kill) is restarted once by the Job
        jspec["backoffLimitPerIndex"] = 1  # controller over the same claim; any other failure ends its index
        jspec["podFailurePolicy"] = {"rules": [{"action": "FailIndex", "onExitCodes": {
            "containerName": "workload", "operator": "NotIn", "values": [137]}}]}
    pod = jspec["template"]["spec"]
    pod["shareProcessNamespace"] = True
    pod["terminationGracePeriodSeconds"] = 1
    jspec["template"]["metadata"]["labels"][LABEL + "job"] = spec.name
    argv = [python if a == "{python}" else a for a in spec.argv]
    index: EnvVarSource = {"fieldRef": {"fieldPath": f"metadata.annotations['{gang.INDEX}']"}}
    env: list[EnvVar] = [{"name": k, "value": v} for k, v in spec.rank_env(0, "").items() if k not in PER_RANK]
    env += [{"name": "HETERO_RANK", "valueFrom": index}, {"name": "RANK", "valueFrom": index}]
    container = pod["containers"][0]
    container["command"] = [python, f"{JOB_DIR}/{LAUNCHER}", *argv]
    container["env"] = env
    container["ports"] = [{"name": "rdzv", "containerPort": spec.port}]
    container["terminationMessagePolicy"] = "FallbackToLogsOnError"
    mounts: list[VolumeMount] = [{"name": "programs", "mountPath": JOB_DIR, "readOnly": True},
              {"name": "rendezvous", "mountPath": ADDRESS_DIR}]
    volumes: list[Volume] = [{"name": "programs", "configMap": {"name": name, "defaultMode": 0o644}},
                                     {"name": "rendezvous", "emptyDir": {"sizeLimit": "1Mi"}}]
    if spec.volume:
        mounts.append({"name": "volume", "mountPath": VOLUME_DIR})
        volumes.append({"name": "volume", "persistentVolumeClaim": {"claimName": spec.volume}})
    container["volumeMounts"] = mounts
    pod["volumes"] = volumes
    return name, configmap, service, job, request


def start(session: KubeSession, step: Step, spec: JobSpec, python: str) -> Job:
    """Create the job's ConfigMap, headless Service and Indexed Job; wait (up to the layer's timeout) for
    Kueue's admission when it is queued and for every rank's pod to run with an address; write rank 0's pod IP
    into every pod; record ``training.k8s.job``. Raises ActionFailed: ``api_not_served`` (a queue named but no
    Kueue API), the decisive Pending reason's category (``scheduling_timeout`` when nothing explains it) when it
    is not admitted or a pod does not run, ``container_exited`` when the address cannot be written; Unsupported
    when the pods landed on a KWOK-simulated node (nothing runs there: the items are not applicable) or the
    volume is a path (no claim named); the
    :func:`~.client.api_outcome` of a refused create. What was created is removed before raising."""
    core = session.core  # connects: the namespace is known from here on
    if spec.volume and "/" in spec.volume:
        raise Unsupported(f"the {spec.name} job's volume {spec.volume} is a folder of the gate's host "
                          "(training.checkpoint.volume absent, or a path): on Kubernetes it must name a "
                          f"PersistentVolumeClaim of namespace {session.namespace}")
    kept = KEPT.pop(_key(session, step, spec), None)
    if kept is not None and spec.attempt > 1:
        return _restarted(session, step, spec, python, kept)
    name, configmap, service, manifest, request = manifests(session, step, spec, python)
    ns = session.namespace
    own = JobHandle(name=name, queue=request.queue, key=_key(session, step, spec), restartable=bool(spec.volume))
    job = Job(spec=spec, ranks=[f"{name}-{r}" for r in range(spec.world_size)], rendezvous_host="",
              where=f"namespace {ns}, indexed Job {name}, headless Service {name}", handle={HANDLE: own})
    if request.queue and session.served().version(queues.KUEUE) is None:
        raise ActionFailed(f"the {spec.name} job goes to LocalQueue {request.queue}: "
                           f"{session.served().describe(queues.KUEUE)}", "api_not_served")
    try:
        core.create_namespaced_config_map(ns, configmap, _request_timeout=30)  # type: ignore[arg-type]
        core.create_namespaced_service(ns, service, _request_timeout=30)  # type: ignore[arg-type]
        made: Any = client.BatchV1Api(session.api).create_namespaced_job(ns, manifest, _request_timeout=30)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - translated
        remove(session, job)
        raise kc.api_outcome(exc, f"create the ConfigMap, Service and indexed Job {name} in namespace {ns}") \
            from None
    submitted = own.submitted = time.time()
    deadline = time.monotonic() + step.timeout_s
    facts: TrainingJobFacts = {"name": name, "namespace": ns, "queue": request.queue, "workers": spec.world_size,
                               "volume_claim": spec.volume, "manifest": manifest, "service_manifest": service}
    try:
        if request.queue:
            workload, error = gang.wait_admitted(session, str(made.metadata.uid), deadline)
            if workload is None or not queues.parse_workload(workload).holds("Admitted"):
                _refuse(session, step, facts, name, workload, [], f"indexed Job {name} ({spec.world_size} pods) "
                        f"not admitted by Kueue within {step.timeout_s:g} s" + (f" ({error})" if error else ""))
            facts["admission"] = {**queues.kueue_admission(session.api, session.served().version(
                queues.KUEUE) or "", workload, submitted), **gang.priority_of(queues.parse_workload(workload))}
        pods = _wait_pods(session, spec, name, deadline)
        seen = facts["pods"] = gang.pod_facts(pods)
        up = {p["index"]: p for p in seen if p["index"] is not None and p["phase"] == "Running" and p["ip"]}
        ended = {p["index"]: p for p in seen if p["index"] is not None and p["phase"] in ("Succeeded", "Failed")}
        if ended and len(up) + len(ended) >= spec.world_size:
            # a rank ended before the rendezvous (its program could not start: no interpreter, …): its exit is
            # the fact, read by wait() like any rank's; the others wait for an address that never comes
            job.ranks = [str((up.get(r) or ended[r])["name"]) for r in range(spec.world_size)]
            facts["ended_before_rendezvous"] = sorted(ended)
            step.record("training.k8s.job", **facts)
            return job
        if len(up) < spec.world_size:
            waiting = [p for p in pods if not (seen_pod := parse_pod(p)).ip or seen_pod.phase != "Running"]
            _refuse(session, step, facts, name, None, waiting, f"indexed Job {name}: {len(up)} of "
                    f"{spec.world_size} pods running within {step.timeout_s:g} s")
        _start_ranks(session, job, up, facts, python)
    except BaseException:
        step.record("training.k8s.job", **facts)
        remove(session, job)
        raise
    step.record("training.k8s.job", **facts)
    return job


def _refuse(session: KubeSession, step: Step, facts: TrainingJobFacts, name: str, workload: ServedWorkload | None,
            pods: list[ServedPod], what: str) -> NoReturn:
    """Raise ActionFailed for a job not admitted or not running: the decisive normalised reason (Kueue's,
    the scheduler's, the kubelet's words, :func:`.gang.explain`)."""
    out = JobPlacement(admitted=workload is not None, service=name)
    gang.explain(session, out, name, workload, pods, what)
    facts["reasons"], facts["decisive"] = out.reasons, out.decisive
    raise ActionFailed(out.message, (out.decisive["code"] if out.decisive else None) or "scheduling_timeout")


def _start_ranks(session: KubeSession, job: Job, up: dict[int, GangPod], facts: TrainingJobFacts, python: str,
                 template: JobSpec | None = None) -> None:
    """Start the job on its running pods ``up`` (rank index → :func:`.gang.pod_facts` entry, every rank present):
    the ranks in index order, rank 0's pod IP as the rendezvous (``facts["rendezvous"]``: that address and the DNS
    name it stands for), handed to every rank (:func:`_hand_over`, ``template`` as there), and the start time.
    Raises what :func:`_hand_over` raises."""
    spec, name = job.spec, _handle(job).name
    job.ranks = [str(up[r]["name"]) for r in range(spec.world_size)]
    job.rendezvous_host = str(up[0]["ip"])
    facts["rendezvous"] = {"address": f"{job.rendezvous_host}:{spec.port}",
                           "dns_name": f"{name}-0.{name}.{session.namespace}.svc:{spec.port}"}
    _hand_over(session, job, python, template)


class Handover(TypedDict):
    """What the gate writes into every rank's pod (:data:`ADDRESS_FILE`, JSON) for :data:`LAUNCHER_CODE`: rank 0's
    ``addr``, the attempt's ``env`` and the template's variables to ``unset`` (every key always written)."""

    addr: str
    env: dict[str, str]
    unset: list[str]


def _hand_over(session: KubeSession, job: Job, python: str, template: JobSpec | None = None) -> None:
    """Write rank 0's address into every rank's pod (the launcher execs the program once it is there), with the
    attempt's own :attr:`JobSpec.env` over the pod template's (``template``: the spec the Job was made from, when
    it is another attempt's; its variables this attempt lacks are unset). Raises ActionFailed
    ``container_exited`` when it cannot be written."""
    given: Handover = {"addr": job.rendezvous_host, "env": dict(job.spec.env),
                       "unset": sorted(set(template.env) - set(job.spec.env)) if template else []}
    for rank, pod in enumerate(job.ranks):
        done = podexec.run(session.core, session.namespace, pod, "workload",
                           [python, "-c", WRITE_ADDRESS, ADDRESS_FILE, json.dumps(given)], 60)
        if done.exit_code != 0:
            raise ActionFailed(f"writing rank 0's address into rank {rank}'s pod {pod}: exit {done.exit_code}"
                               f" {done.stderr.strip()[-300:]}", "container_exited")


class Rendezvous(TypedDict):
    """Where a training job's ranks meet (:class:`TrainingJobFacts` ``rendezvous``): rank 0's pod ``address``
    (``ip:port``) and the cluster DNS name it stands for (``dns_name``)."""

    address: str
    dns_name: str


class TrainingJobFacts(TypedDict):
    """A ``training.k8s.job`` record: the job's ``name``, ``namespace``, LocalQueue (``queue``, None: none),
    ``workers`` and ``volume_claim`` (None: none); a new job's ``manifest`` and ``service_manifest``, an
    attempt the Job controller restarted ``restarted_by`` and the pods it ``replaces``; then as they are known:
    the Workload's ``admission``, the ``pods``, the ranks that ``ended_before_rendezvous``, the
    ``rendezvous``, and for a job refused its normalised ``reasons`` and ``decisive`` one."""

    name: str
    namespace: str
    queue: str | None
    workers: int
    volume_claim: str | None
    manifest: NotRequired[JobManifest]
    service_manifest: NotRequired[ServiceManifest]
    restarted_by: NotRequired[str]
    replaces: NotRequired[list[str]]
    admission: NotRequired[JobAdmission]
    pods: NotRequired[list[GangPod]]
    ended_before_rendezvous: NotRequired[list[int]]
    rendezvous: NotRequired[Rendezvous]
    reasons: NotRequired[list[ReasonDict]]
    decisive: NotRequired[ReasonDict | None]


@dataclass
class JobHandle:
    """What this engine keeps of a job :func:`start` made (the :data:`HANDLE` entry of :attr:`Job.handle`):
    ``name`` (of its Job, headless Service and ConfigMap), ``queue`` (the LocalQueue it was submitted to; None:
    none), ``key`` (its :data:`KEPT` key), ``restartable`` (a checkpoint job: :func:`remove` keeps it when the gate
    killed a rank, for the Job controller to restart), ``submitted`` (epoch seconds of the Job's create call; None
    until it answered)."""

    name: str
    queue: str | None
    key: tuple[str, str, str, str]
    restartable: bool
    submitted: float | None = None


HANDLE = "kubernetes"
"""The key of a job's :class:`JobHandle` in :attr:`Job.handle` (engine-private)."""


def _handle(job: Job) -> JobHandle:
    """The :class:`JobHandle` of ``job`` (one :func:`start` returned)."""
    own: JobHandle = job.handle[HANDLE]
    return own


KEPT: dict[tuple[str, str, str, str], Job] = {}
"""Checkpoint jobs whose rank the gate killed, kept by :func:`remove` for the next attempt: the Job controller
restarts the killed pod (``backoffLimitPerIndex: 1``, only for exit 137) and :func:`start` of the next attempt takes
that pod over. Key: (owner, item, job name, claim)."""


def _key(session: KubeSession, step: Step, spec: JobSpec) -> tuple[str, str, str, str]:
    return session.owner, step.planned.id, spec.name, spec.volume or ""


def _restarted(session: KubeSession, step: Step, spec: JobSpec, python: str, kept: Job) -> Job:
    """Attempt ``spec.attempt`` of a kept job: the pod the Job controller started in place of the killed one (same
    index, same claim), handed rank 0's address (its own); record ``training.k8s.job`` with ``restarted_by``.
    Raises ActionFailed like :func:`start` when no replacement runs within the layer's timeout."""
    own = dataclasses.replace(_handle(kept), restartable=False)
    name, ns = own.name, session.namespace
    job = Job(spec=spec, ranks=[], rendezvous_host="", where=kept.where, handle={HANDLE: own})
    gone = set(kept.ranks)
    facts: TrainingJobFacts = {"name": name, "namespace": ns, "queue": own.queue,
                               "workers": spec.world_size, "volume_claim": spec.volume,
                               "restarted_by": ("the Job controller (backoffLimitPerIndex 1, "
                                                "podFailurePolicy: exit 137)"),
                               "replaces": sorted(gone)}
    deadline = time.monotonic() + step.timeout_s
    try:
        while True:
            pods = [p for p in gang.list_pods(session, name) if parse_pod(p).name not in gone]
            up = {p["index"]: p for p in gang.pod_facts(pods)
                  if p["index"] is not None and p["phase"] == "Running" and p["ip"]}
            if len(up) >= spec.world_size or time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
        facts["pods"] = gang.pod_facts(pods)
        if len(up) < spec.world_size:
            _refuse(session, step, facts, name, None, pods, f"indexed Job {name}: the Job controller restarted "
                    f"{len(up)} of {spec.world_size} killed pods within {step.timeout_s:g} s")
        _start_ranks(session, job, up, facts, python, kept.spec)
    except BaseException:
        step.record("training.k8s.job", **facts)
        remove(session, job)
        raise
    step.record("training.k8s.job", **facts)
    return job


def _wait_pods(session: KubeSession, spec: JobSpec, name: str, deadline: float) -> list[ServedPod]:
    """The job's pods once every rank runs with an address or one ended, or as last listed at ``deadline``.
    Raises Unsupported as soon as a pod is placed on a KWOK-simulated node (no process runs there: KWOK reports
    the pod Running, then Succeeded, and no rank would ever take part)."""
    simulated: dict[str, bool] = {}
    while True:
        pods = gang.list_pods(session, name)
        facts = gang.pod_facts(pods)
        for node in {str(p["node"]) for p in facts if p["node"]} - set(simulated):
            simulated[node] = _simulated(session, node)
        fake = sorted(n for n, yes in simulated.items() if yes)
        if fake:
            raise Unsupported(f"the {spec.name} job's pods landed on KWOK-simulated node(s) {', '.join(fake)}: no "
                              "process runs there, so no rank could take part")
        up = [p for p in facts if p["phase"] == "Running" and p["ip"]]
        if len(up) >= spec.world_size or any(p["phase"] in ("Succeeded", "Failed") for p in facts) \
                or time.monotonic() >= deadline:
            return pods
        time.sleep(POLL_S)


def _simulated(session: KubeSession, node: str) -> bool:
    """The node is simulated by KWOK (:attr:`.objects.Node.simulated`, as :mod:`.inventory` reads it)."""
    if not session.known(node):
        try:
            return parse_node(nodes.read(session.core, node)).simulated
        except Exception:  # noqa: BLE001 - unreadable: treated as real; its pods' exits will say what happened
            return False
    return session.simulated(node)


def _pods(session: KubeSession, job: Job) -> dict[int, Pod]:
    """Rank → the job's pod of that rank (by the names :func:`start` found: a pod the Job controller started in
    place of a killed one belongs to the next attempt)."""
    by_name = {p.name: p for p in map(parse_pod, gang.list_pods(session, _handle(job).name))}
    return {r: by_name[n] for r, n in enumerate(job.ranks) if n in by_name}


def _state(pod: Pod | None) -> ContainerStatus:
    """The workload container's status (its state: running, terminated, waiting); NO_STATUS when none."""
    return next((c for c in (pod.container_statuses if pod else ()) if c.name == "workload"), NO_STATUS)


def logs(session: KubeSession, job: Job, rank: int) -> str:
    """Rank ``rank``'s log so far (stdout and stderr together, its last :data:`LOG_LIMIT` bytes); "" when
    there is none yet."""
    try:
        response = session.core.read_namespaced_pod_log(job.ranks[rank], session.namespace, container="workload",
                                                        tail_lines=TAIL_LINES, _preload_content=False,
                                                        _request_timeout=30)
    except Exception:  # noqa: BLE001 - no log yet (or any more): the caller polls
        return ""
    return tail_text(response, LOG_LIMIT)


def tail_text(response: Any, limit: int) -> str:
    """The last ``limit`` bytes of a streamed HTTP ``response`` (urllib3, ``_preload_content=False``), decoded
    (UTF-8, bad bytes replaced); reads it to its end in 64 KiB chunks, holding at most ``limit`` + 64 KiB, and
    releases the connection. The API's ``limitBytes`` keeps the head of a log, and a rank's result line is its
    last one; ``tailLines`` alone bounds lines, not bytes. "" when the stream breaks."""
    kept = bytearray()
    try:
        for chunk in response.stream(64 * 1024):
            kept += chunk
            if len(kept) > limit:
                del kept[:len(kept) - limit]
    except Exception:  # noqa: BLE001 - a broken stream is no log; the caller polls or records what it has
        return ""
    finally:
        response.release_conn()
    return bytes(kept).decode("utf-8", "replace")


def running(session: KubeSession, job: Job) -> list[int]:
    """The ranks whose workload container runs now."""
    return sorted(r for r, p in _pods(session, job).items() if _state(p).running)


def kill(session: KubeSession, job: Job, rank: int, python: str) -> None:
    """SIGKILL rank ``rank``'s program (an exec of :data:`KILL` in its pod: the process namespace is shared, so
    the program is not its namespace's init); record the gate's kill in ``job.killed``. A rank already
    stopped is left as it is."""
    job.killed.add(rank)
    _signal(session, job, rank, python)


def _signal(session: KubeSession, job: Job, rank: int, python: str) -> None:
    try:
        podexec.run(session.core, session.namespace, job.ranks[rank], "workload",
                    [python, "-c", KILL, JOB_DIR + "/"], 30)
    except Exception:  # noqa: BLE001, S110 - the container may have stopped meanwhile: its exit says so
        pass


def wait(session: KubeSession, job: Job, timeout_s: float, settle_s: float, python: str) -> list[RankExit]:
    """Wait for every rank (see :meth:`~pytest_hetero.backends.protocol.Backend.wait_job`); return their exits."""
    deadline = time.monotonic() + timeout_s
    settle_until: float | None = None
    stopped: set[int] = set()
    timed_out: set[int] = set()
    world = job.spec.world_size
    while True:
        pods = _pods(session, job)
        states = [_state(pods.get(r)) for r in range(world)]
        alive = [r for r, st in enumerate(states) if not st.terminated]
        if not alive:
            break
        failed = [r for r, st in enumerate(states) if st.ended is not None and st.ended.exit_code
                  and r not in job.killed]
        now = time.monotonic()
        if failed and settle_until is None:
            settle_until = now + settle_s
        if (settle_until is not None and now >= settle_until) or now >= deadline:
            for r in alive:
                (stopped if now < deadline else timed_out).add(r)
                _signal(session, job, r, python)
            end = time.monotonic() + 30  # the kubelet reports the stop
            while time.monotonic() < end:
                pods = _pods(session, job)
                if all(_state(pods.get(r)).terminated for r in range(world)):
                    break
                time.sleep(POLL_S)
            break
        time.sleep(POLL_S)
    return [_exit(session, job, r, pods.get(r), stopped=r in stopped, timed_out=r in timed_out) for r in range(world)]


def _exit(session: KubeSession, job: Job, rank: int, pod: Pod | None, *, stopped: bool,
          timed_out: bool) -> RankExit:
    ended = _state(pod).ended
    code = None if timed_out or ended is None else ended.exit_code
    log = logs(session, job, rank)
    errors = "\n".join(x for x in log.splitlines() if not x.startswith('{"event"'))
    usage = kube_usage.pod_facts(session, pod, _handle(job).submitted) if pod else {}
    return RankExit(rank=rank, name=job.ranks[rank], exit_code=code, stdout=log, stderr=errors,
                    signal=(code - 128) if isinstance(code, int) and code > 128 else None,
                    oom_killed=ended is not None and ended.reason == "OOMKilled", killed_by_gate=rank in job.killed,
                    stopped_after_peer=stopped, started=epoch(ended.started_at if ended else None),
                    ended=epoch(ended.finished_at if ended else None), usage=usage)


def remove(session: KubeSession, job: Job) -> None:
    """Delete the Job (its pods with it: background propagation), the Service and the ConfigMap (never the
    volume's claim). Never
    raises: what is left carries the owner label for the engine's close and ``hetero cleanup``. A checkpoint job
    whose rank the gate killed is kept instead (:data:`KEPT`): the Job controller restarts that rank for the
    next attempt."""
    own = _handle(job)
    if job.killed and own.restartable:
        KEPT[own.key] = job
        return
    name, ns = own.name, session.namespace
    deletes: tuple[Callable[[], Any], ...] = (lambda: client.BatchV1Api(session.api).delete_namespaced_job(
                   name, ns, propagation_policy="Background", grace_period_seconds=0, _request_timeout=30),
               lambda: session.core.delete_namespaced_service(name, ns, _request_timeout=30),
               lambda: session.core.delete_namespaced_config_map(name, ns, _request_timeout=30))
    for delete in deletes:
        try:
            delete()
        except Exception:  # noqa: BLE001, S110 - gone already, or left to the engine's close
            pass

