"""A task type's job on Kubernetes: an indexed Job with a headless Service, admitted by Kueue as one Workload.

For a ``spec.task_queues`` rule (:mod:`pytest_hetero.matrix.taskqueues`) :func:`place_job` creates

* a headless Service (``clusterIP: None``, ``publishNotReadyAddresses``) selecting the job's pods by
  :data:`GANG`, port :data:`PORT` (``rdzv``): the name the pods' DNS records hang on
  (``<job>-<index>.<service>.<namespace>.svc``, each pod's ``subdomain`` is the Service);
* a suspended ``batch/v1`` Job, ``completionMode: Indexed``, ``parallelism = completions = workers``,
  labelled ``kueue.x-k8s.io/queue-name: <queue>``: Kueue makes ONE Workload of its pod set (count =
  workers) and unsuspends the Job only when the quota of every pod is reserved (all or nothing: no pod
  exists before admission). Each pod asks for the resource's requests and idles (:data:`~.scheduling.KEEP_ALIVE`).

It waits up to the request's ``wait_s`` for the Workload's ``Admitted`` condition, then for every pod to
run; with several pods, :func:`rendezvous` has each pod reach every other one. A Workload never admitted is
explained by :func:`~.scheduling.explain_pending` from the Workload and the events of the Job and the
Workload (Kueue's own words). Facts only (:class:`~pytest_hetero.backends.protocol.JobPlacement`);
the verdict is :mod:`pytest_hetero.layers.taskqueue`'s.
"""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypedDict

from kubernetes import client

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import podexec, queues
from pytest_hetero.backends.kubernetes import scheduling as ks
from pytest_hetero.backends.kubernetes import usage as kube_usage
from pytest_hetero.backends.kubernetes.manifests import (
    EndpointSliceList,
    JobManifest,
    ObjectMeta,
    PodList,
    ServedPod,
    ServedWorkload,
    ServiceManifest,
)
from pytest_hetero.backends.kubernetes.objects import Pod, parse_pod, parse_slice
from pytest_hetero.backends.labels import LABEL
from pytest_hetero.backends.protocol import (
    ActionFailed,
    GangPod,
    JobAdmission,
    JobPlacement,
    JobRequest,
    RendezvousAnswer,
    Step,
    WorkloadSeen,
)
from pytest_hetero.pending import summarise

if TYPE_CHECKING:
    from pytest_hetero.backends.kubernetes.session import KubeSession

PORT = 29500
"""Rendezvous port of the job's pods (``torch.distributed``'s default ``MASTER_PORT``)."""
GANG = LABEL + "gang"
"""Label on the pods of one job: the headless Service's selector."""
INDEX = "batch.kubernetes.io/job-completion-index"
"""Annotation (and label) the Job controller puts on each pod of an Indexed Job: its index."""
ANSWER = "/tmp/hetero-rendezvous.json"
"""Where the rendezvous check also writes its answer in the pod (read when the exec stream returned none)."""
POLL_S = 0.5
"""Seconds between two reads while waiting for admission, pods and endpoints."""

RENDEZVOUS = r"""
import json, os, socket, sys, threading, time
me = int(os.environ["JOB_COMPLETION_INDEX"])
port, peers = int(sys.argv[1]), {int(k): v for k, v in json.loads(sys.argv[2]).items() if int(k) != me}
end = time.monotonic() + float(sys.argv[3])
heard, reached, errors, done = set(), {}, {}, threading.Event()
srv = socket.socket(socket.AF_INET6 if ":" in "".join(peers.values()) else socket.AF_INET)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("", port)); srv.listen(64); srv.settimeout(0.2)
def serve():
    while time.monotonic() < end and not (done.is_set() and heard >= set(peers)):
        try:
            conn, _ = srv.accept()
        except OSError:
            continue
        with conn:
            try:
                conn.settimeout(2)
                got = conn.recv(64).decode().split()
                if len(got) == 2 and got[0] == "hello":
                    heard.add(int(got[1])); conn.sendall(("ack %d\n" % me).encode())
            except (OSError, ValueError):
                pass
server = threading.Thread(target=serve, daemon=True); server.start()
for j, addr in sorted(peers.items()):
    while j not in reached and time.monotonic() < end:
        t0 = time.perf_counter()
        try:
            with socket.create_connection((addr, port), timeout=1) as conn:
                conn.sendall(("hello %d\n" % me).encode()); conn.settimeout(2)
                got = conn.recv(64).decode().split()
            if got[:1] == ["ack"] and got[1:2] == [str(j)]:
                reached[j] = round((time.perf_counter() - t0) * 1000, 3)
            else:
                errors[j] = "%s:%d answered %r, not 'ack %d'" % (addr, port, " ".join(got), j); break
        except OSError as exc:
            errors[j] = "%s:%d: %s" % (addr, port, exc); time.sleep(0.2)
done.set(); server.join(max(0.0, end - time.monotonic()))
ok = set(reached) == set(peers) and heard >= set(peers)
answer = json.dumps({"index": me, "host": socket.gethostname(), "reached_ms": {str(k): v for k, v in reached.items()},
                     "heard": sorted(heard), "errors": {str(k): v for k, v in errors.items() if k not in reached},
                     "ok": ok})
with open(sys.argv[4], "w") as fh:
    fh.write(answer + "\n")
print(answer, flush=True)
sys.exit(0 if ok else 1)
"""
"""The pods' check among themselves (Python 3 standard library): each listens on the port, connects to every
peer's address, says ``hello <index>`` and expects ``ack <peer index>``; done when it reached and heard every
peer. argv: port, ``{"index": address}``, seconds, answer file; prints (and writes) one JSON line; exit 0 when
complete."""


def names(session: KubeSession, step: Step, task_type: str) -> tuple[str, str]:
    """``(job, probe)``: the Job's (and Service's) name, new for every call, at most 52 characters so that a
    pod hostname ``<job>-<index>`` stays a DNS label; and the probe label of its pods."""
    tail = f"{uuid.uuid4().hex[:5]}-{session.owner[:6]}"  # each submission its own (a repeated item too)
    return (f"{kc.dns_name('hetero', task_type, step.resource.name, limit=39)}-{tail}",
            f"{kc.dns_name(step.resource.name, step.image.name, task_type, limit=50)}-{tail}")


def manifests(session: KubeSession, step: Step, request: JobRequest, name: str, probe: str
              ) -> tuple[ServiceManifest, JobManifest]:
    """``(service, job)`` manifests of the task type's job; see the module docstring."""
    labels = kc.labels(session.settings.run_id, session.owner, "workload", matrix=step.matrix.name,
                       resource=step.resource.name, image=step.image.name, probe=probe,
                       task_type=request.task_type)
    notes = kc.created_annotations()
    pull = session.conf.image_pull_policy or "IfNotPresent"
    spec = ks.pod_spec(step.resource, step.image.reference, restart="Never", pull_policy=pull)
    spec["subdomain"] = name
    if request.priority_class:
        spec["priorityClassName"] = request.priority_class
    else:
        spec.pop("priorityClassName", None)
    meta: ObjectMeta = {"name": name, "namespace": session.namespace, "labels": dict(labels),
                        "annotations": dict(notes)}
    service: ServiceManifest = {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {
        "clusterIP": "None", "publishNotReadyAddresses": True, "selector": {GANG: name},
        "ports": [{"name": "rdzv", "port": PORT, "targetPort": PORT}]}}
    job: JobManifest = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {**meta, "labels": {**labels, ks.KUEUE_QUEUE: request.queue or "default"}},
           "spec": {"completionMode": "Indexed", "completions": request.workers, "parallelism": request.workers,
                    "backoffLimit": 0, "suspend": True, "ttlSecondsAfterFinished": 3600,
                    "template": {"metadata": {"labels": {**labels, GANG: name}, "annotations": dict(notes)},
                                 "spec": spec}}}
    return service, job


def place_job(session: KubeSession, step: Step, request: JobRequest) -> JobPlacement:
    """Create the job's Service and Job, wait for Kueue's admission, the pods and their rendezvous (up to
    ``request.wait_s`` seconds in all, the rendezvous with its own bound); record ``scheduling.submitted``.

    Raises ActionFailed ``api_not_served`` when the apiserver serves no Kueue API, and the
    :func:`~.client.api_outcome` of a refused create.
    """
    served = session.served()
    version = served.version(queues.KUEUE)
    if version is None:
        raise ActionFailed(f"a {request.task_type} job goes through Kueue: {served.describe(queues.KUEUE)}",
                           "api_not_served")
    name, probe = names(session, step, request.task_type)
    service, job = manifests(session, step, request, name, probe)
    ns = session.namespace
    try:
        client.CoreV1Api(session.api).create_namespaced_service(ns, service, _request_timeout=30)  # type: ignore[arg-type]
        made: Any = client.BatchV1Api(session.api).create_namespaced_job(ns, job, _request_timeout=30)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - translated
        raise kc.api_outcome(exc, f"create the Service and indexed Job {name} in namespace {ns}") from None
    submitted = time.time()
    step.record("scheduling.submitted", submit_as="indexed-job", name=name, service=name, namespace=ns,
                task_type=request.task_type, workers=request.workers, queue=request.queue,
                manifest=job, service_manifest=service, submitted_at_epoch_s=submitted)
    deadline = time.monotonic() + request.wait_s
    workload, read_error = wait_admitted(session, str(made.metadata.uid), deadline)
    out = JobPlacement(admitted=False, workers=request.workers, service=name)
    if workload is None or not queues.parse_workload(workload).holds("Admitted"):
        out.waited_s = time.time() - submitted
        out.pods = pod_facts(list_pods(session, name))
        explain(session, out, name, workload, [], f"indexed Job {name} ({request.workers} pods) not admitted by "
                f"Kueue within {request.wait_s:g} s" + (f" (its Workload could not be read: {read_error})"
                                                       if read_error and workload is None else ""))
        return out
    out.admitted = True
    priority = priority_of(queues.parse_workload(workload))
    admission: JobAdmission = {**queues.kueue_admission(session.api, version, workload, submitted), **priority}
    out.admission = admission
    out.waited_s = time.time() - submitted
    pods = wait_running(session, name, request.workers, deadline)
    out.pods = pod_facts(pods)
    out.usage = [kube_usage.pod_facts(session, parse_pod(p), submitted) for p in pods]
    running = [p for p in out.pods if p["phase"] == "Running" and p["ip"]]
    out.placed = len([p for p in out.pods if p["node"]])
    if len(running) < request.workers:
        waiting = [p for p in pods if not parse_pod(p).ip]
        explain(session, out, name, None, waiting, f"indexed Job {name} admitted, but {len(running)} of "
                f"{request.workers} pods running within {request.wait_s:g} s")
        return out
    if request.workers > 1:
        peers = endpoint_addresses(session, name, request.workers, deadline)
        for pod in out.pods:
            pod["endpoint"] = peers.get(pod["index"]) if pod["index"] is not None else None
        if len(peers) < request.workers:  # a pod the Service does not list cannot be found by its peers
            out.rendezvous = [{"index": p["index"], "pod": p["name"], "ok": False, "error": (
                f"headless Service {name} lists {len(peers)} of {request.workers} pods (EndpointSlices: indexes "
                f"{sorted(peers)})")} for p in out.pods]
        else:
            out.rendezvous = rendezvous(session, out.pods, {i: a["ip"] for i, a in peers.items()},
                                        max(10.0, deadline - time.monotonic()))
    out.message = f"indexed Job {name}: {request.workers} pods admitted as one Workload and running"
    return out


class Priority(TypedDict):
    """A Workload's priority as the admission facts keep it (see :func:`priority_of`)."""

    priority_class: str | None
    priority_class_kind: str | None
    priority: int | None


def priority_of(workload: queues.Workload) -> Priority:
    """``{"priority_class", "priority_class_kind", "priority"}`` of a Workload: ``spec.priorityClassRef``
    (``kueue.x-k8s.io/v1beta2``: ``{group, kind, name}``, kind ``PriorityClass`` or ``WorkloadPriorityClass``)
    or ``spec.priorityClassName``/``priorityClassSource`` (v1beta1); ``spec.priority`` (the number)."""
    if workload.priority_ref is not None:
        name, kind = workload.priority_ref
        return {"priority_class": name, "priority_class_kind": kind, "priority": workload.priority}
    return {"priority_class": workload.priority_class_name, "priority_class_kind": workload.priority_class_source,
            "priority": workload.priority}


def wait_admitted(session: KubeSession, uid: str, deadline: float) -> tuple[ServedWorkload | None, str | None]:
    """``(workload, error)``: the Job's Workload (``kueue.x-k8s.io/job-uid`` label, in the version discovery
    chose) once Admitted, or as last read at ``deadline`` (None: Kueue made none, or it could not be read:
    ``error`` is then the last read's failure)."""
    last: ServedWorkload | None = None
    while True:
        found, error = queues.read_objects(session.api, session.served(), queues.KUEUE, "workloads",
                                           session.namespace, label_selector=f"{queues.JOB_UID}={uid}")
        last = found[0] if found else last
        if last is not None and queues.parse_workload(last).holds("Admitted"):
            return last, None
        if time.monotonic() >= deadline:
            return last, error
        time.sleep(POLL_S)


def list_pods(session: KubeSession, name: str) -> list[ServedPod]:
    """The job's pods (JSON dicts), in index order; [] when they cannot be listed."""
    try:
        resp: Any = session.core.list_namespaced_pod(session.namespace, label_selector=f"{GANG}={name}",
                                                     _preload_content=False, _request_timeout=kc.API_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - the caller waits or explains with what it has
        return []
    listed: PodList = json.loads(resp.data)
    live = [(pod, raw) for pod, raw in ((parse_pod(raw), raw) for raw in listed["items"])
            if not pod.deleting_since]
    return [raw for _, raw in sorted(live, key=lambda seen: completion_index(seen[0]) or 0)]


def completion_index(pod: Pod) -> int | None:
    """The pod's completion index (annotation :data:`INDEX`, which the Job controller sets on every pod of an
    Indexed Job); None without it. Raises ValueError when it is not an integer."""
    index = pod.annotations.get(INDEX)
    return int(index) if index is not None else None


def wait_running(session: KubeSession, name: str, workers: int, deadline: float) -> list[ServedPod]:
    """The job's pods once ``workers`` of them run with an address, or as last listed at ``deadline``."""
    while True:
        pods = list_pods(session, name)
        up = [p for p in map(parse_pod, pods) if p.phase == "Running" and p.ip]
        if len(up) >= workers or time.monotonic() >= deadline:
            return pods
        time.sleep(POLL_S)


def pod_facts(pods: list[ServedPod]) -> list[GangPod]:
    """``[{"index", "name", "node", "ip", "phase", "hostname", "subdomain"}]`` of ``pods``."""
    out: list[GangPod] = []
    for p in map(parse_pod, pods):
        out.append({"index": completion_index(p), "name": p.name,
                    "node": p.node_name or None, "ip": p.ip, "phase": p.phase,
                    "hostname": p.hostname, "subdomain": p.subdomain})
    return out


class PeerAddress(TypedDict):
    """Where a gang pod is reached: its ``ip``, ``hostname`` and ``dns_name`` as cluster DNS serves them."""

    ip: str
    hostname: str
    dns_name: str


def endpoint_addresses(session: KubeSession, service: str, workers: int, deadline: float) -> dict[int, PeerAddress]:
    """Index → ``{"ip", "hostname", "dns_name"}`` of the headless Service's EndpointSlices (what cluster DNS
    serves for ``<hostname>.<service>.<namespace>.svc``), once ``workers`` addresses are listed or at
    ``deadline`` (at least 10 s from now); the index is read from the hostname ``<job>-<index>``."""
    end = max(deadline, time.monotonic() + 10)
    found: dict[int, PeerAddress] = {}
    while True:
        try:
            slices: Any = client.DiscoveryV1Api(session.api).list_namespaced_endpoint_slice(
                session.namespace, label_selector=f"kubernetes.io/service-name={service}",
                _preload_content=False, _request_timeout=kc.API_TIMEOUT_S)
            found_slices: EndpointSliceList = json.loads(slices.data)
            items = [parse_slice(i) for i in found_slices["items"]]
        except Exception:  # noqa: BLE001 - waited for again; what is found by the deadline is used
            items = []
        for eps in items:
            for ep in eps.endpoints:
                host = str(ep.hostname or "")
                tail = host.rsplit("-", 1)[-1]
                if ep.addresses and tail.isdigit():
                    found[int(tail)] = {"ip": ep.addresses[0], "hostname": host,
                                        "dns_name": f"{host}.{service}.{session.namespace}.svc"}
        if len(found) >= workers or time.monotonic() >= end:
            return found
        time.sleep(POLL_S)


class PeerAnswer(TypedDict):
    """The line :data:`RENDEZVOUS` prints (every field always written): its ``index``, ``host``, ``reached_ms``
    (peer index → ms), ``heard`` (peer indexes), ``errors`` (peer index → why) and ``ok``."""

    index: int
    host: str
    reached_ms: dict[str, float]
    heard: list[int]
    errors: dict[str, str]
    ok: bool


def parse_answer(line: str) -> PeerAnswer:
    """The :class:`PeerAnswer` of one line :data:`RENDEZVOUS` printed; ValueError for one that is not its JSON
    object (another program's output, a line cut short)."""
    raw: object = json.loads(line)
    if not isinstance(raw, dict) or not PeerAnswer.__required_keys__ <= set(raw):
        raise ValueError(f"not the rendezvous check's answer: {line[:200]!r}")
    return {"index": raw["index"], "host": raw["host"], "reached_ms": raw["reached_ms"], "heard": raw["heard"],
            "errors": raw["errors"], "ok": raw["ok"]}


def rendezvous(session: KubeSession, pods: list[GangPod], peers: dict[int, str], timeout_s: float
               ) -> list[RendezvousAnswer]:
    """Have every pod of ``pods`` (:func:`pod_facts`) reach every other one at the addresses ``peers``
    (index → address, from the headless Service's EndpointSlices) and be reached by it, all at once
    (:data:`RENDEZVOUS`, exec'd in each pod's ``workload`` container, bounded by ``timeout_s`` seconds,
    at most 60). One answer per pod: ``{"index", "pod", "ok", "reached_ms", "heard", "errors", "error",
    "exit_code"}``. The communication check of a training job may replace this one function."""
    python = session.conf.python
    bound = min(60.0, timeout_s)
    argv = [python, "-c", RENDEZVOUS, str(PORT), json.dumps({str(k): v for k, v in peers.items()}), str(bound),
            ANSWER]

    def one(pod: GangPod) -> RendezvousAnswer:
        answer: RendezvousAnswer = {"index": pod["index"], "pod": pod["name"], "ok": False, "error": None}
        try:
            done = podexec.run(session.core, session.namespace, pod["name"], "workload", argv, bound + 15)
        except Exception as exc:  # noqa: BLE001 - kept as this pod's answer
            answer["error"] = kc.api_outcome(exc, f"exec the rendezvous in pod {pod['name']}").message
            return answer
        answer["exit_code"] = done.exit_code
        text = done.stdout.strip()
        if not text and done.exit_code is not None:  # the exec stream lost it: read what the check wrote
            again = podexec.run(session.core, session.namespace, pod["name"], "workload", ["cat", ANSWER], 30)
            text, answer["answer_from"] = again.stdout.strip(), ANSWER
        try:
            said = parse_answer(text.splitlines()[-1])
        except (ValueError, IndexError):
            answer["error"] = (f"no answer (exit {done.exit_code} after {done.duration_s:.1f} s, exec status "
                               f"{done.status[:300]!r}, streams {done.streams}, argv {argv[:2]!r}, "
                               f"peers {argv[4]}): {done.stderr.strip()[-500:]}")
            return answer
        answer["index"], answer["host"], answer["ok"] = said["index"], said["host"], said["ok"]
        answer["reached_ms"], answer["heard"], answer["errors"] = said["reached_ms"], said["heard"], said["errors"]
        if said["index"] != pod["index"]:
            answer["ok"] = False
            answer["error"] = f"JOB_COMPLETION_INDEX {said['index']} in pod of index {pod['index']}"
        elif not said["ok"]:
            answer["error"] = "; ".join(f"peer {k}: {v}" for k, v in said["errors"].items()) or (
                f"heard {said['heard']} of {sorted(k for k in peers if k != pod['index'])}")
        return answer

    with ThreadPoolExecutor(max(1, len(pods)), thread_name_prefix="hetero-rdzv") as pool:
        return list(pool.map(one, pods))


def explain(session: KubeSession, out: JobPlacement, name: str, workload: ServedWorkload | None,
            pods: list[ServedPod], what: str) -> None:
    """Fill ``out``'s reasons, decisive reason and message from the Workload, the unplaced ``pods`` and the
    events of the Job, the Workload and those pods (:func:`.scheduling.explain_pending`)."""
    api, ns = session.api, session.namespace
    events = ks.events_for(api, ns, name)
    seen = queues.parse_workload(workload) if workload is not None else None
    if seen is not None:
        events += ks.events_for(api, ns, str(seen.name))
    events += [e for p in pods for e in ks.events_for(api, ns, p["metadata"]["name"])]
    reasons = ks.explain_pending(pods, events, [workload] if workload else [], None)
    decisive = ks.primary(reasons)
    out.reasons = [r.to_dict() for r in reasons]
    out.decisive = decisive.to_dict() if decisive else None
    if workload is not None and seen is not None:
        refused: WorkloadSeen = {"workload": seen.name, "local_queue": seen.queue_name,
                                 "conditions": seen.served_conditions}
        out.admission = refused
    out.message = f"{what}: {summarise(reasons, facts_only=True)}" if reasons else (
        f"{what} and nothing explains why" + ("" if workload else "; Kueue created no Workload for it"))
