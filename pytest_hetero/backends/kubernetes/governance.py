"""Governance probes on Kubernetes: the attempts of a probe, made as a tenant, observed by the gate.

Each kind's attempts (roles in brackets; the layer :mod:`pytest_hetero.layers.governance` judges them):

* ``tenant-isolation`` (as A, target B): create a Pod in B's namespace [``submit-into-target``]; list
  B's pods [``list-target-pods``]; when B has a Kueue queue and Kueue is served: list B's Workloads
  [``list-target-workloads``] and submit a Kueue Job in A's own namespace naming B's LocalQueue
  [``submit-to-target-queue``] (Kueue must leave it inadmissible; not attempted, outcome
  ``not-attempted``, when A has a LocalQueue of that name: it would only prove A's own queue); when B
  names its ``cluster_queue``, each LocalQueue of A's namespace pointing at it is used once
  [``submit-via-target-cluster-queue``] (Kueue's namespaceSelector must refuse it);
* ``quota`` (as A): a workload requesting ``above`` [``above``], then one requesting ``within``
  [``within``], each submitted the way the target submits (``pod``: ResourceQuota admission answers;
  ``kueue-job``: the tenant's LocalQueue, Kueue answers);
* ``maintenance`` (as A or the gate): one Pod per node of the resource's pool that is cordoned, NotReady
  or carries a NoSchedule/NoExecute taint the resource does not tolerate, pinned to that node by node
  affinity on ``metadata.name`` [``node``] (the scheduler must leave it Unschedulable); none such:
  nothing attempted (``skipped`` says so);
* ``device-isolation`` (as A or the gate): a Pod on the resource's pool with the resource's requests
  minus every accelerator (cpu/memory only) runs :data:`LOOK` once [``no-request``]; its log (read by
  the observer) lists the accelerator device nodes it sees and the visible-devices variables set in it
  (facts ``device_nodes``, ``visible_env``); a pod requesting N devices seeing exactly N is the
  startup layer's claim (``startup.devices``);
* ``preemption`` (as A or the gate; kube-scheduler priority on the pod path): a Pod of PriorityClass
  ``low`` with the resource's requests [``low``], placed; one of ``high`` [``high``], watched until
  placed, and whether the scheduler evicted the low one for it (facts ``victim``: its DisruptionTarget
  condition and ``Preempted`` events); a second ``low`` Pod [``waiter``], which must wait. The pool must
  hold one such workload only (a small dedicated pool) or nothing is preempted;
* ``attribution`` (as A): the accounts of A's namespace and queues are read [``before``], a workload
  with the resource's requests is placed [``workload``], the accounts are read until they rise
  [``during``], the workload is deleted and they are read until they return [``after``]; the layer
  compares the rise with the requests.

Every object is created with the tenant's token alone (:mod:`.tenancy`), labelled with the run id and
the engine's owner token (so ``hetero cleanup`` and :meth:`KubernetesBackend.close` find a leftover),
deleted by the observer and waited for; the cleanup records are part of the report.
``network-isolation`` and ``data-isolation`` are in :mod:`.boundaries`.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from typing import Any, Literal, overload

from pytest_hetero.backends.kubernetes import accounts, boundaries, inventory, queues, tenancy
from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import scheduling as ks
from pytest_hetero.backends.kubernetes.manifests import ObjectList, PodManifest, ServedWorkload, Workload
from pytest_hetero.backends.kubernetes.objects import parse_event, parse_pod
from pytest_hetero.backends.kubernetes.session import KubeSession
from pytest_hetero.backends.nodefit import blockers
from pytest_hetero.backends.protocol import (
    Account,
    Attempt,
    AttemptFacts,
    AttributionUsage,
    GovernanceReport,
    NodeFacts,
    ProbeLedger,
    ProbeWorkload,
    Step,
    VictimFacts,
)
from pytest_hetero.matrix.model import GovernanceProbe, Resource, Tenant

LOOK = ("for f in /dev/nvidia* /dev/davinci* /dev/dri/* /dev/accel/* /dev/kfd; do [ -e \"$f\" ] && "
        "echo \"DEV $f\"; done; env | grep -E '^[A-Z_]*VISIBLE_DEVICES=' | sed 's/^/ENV /'; echo END")
"""Shell script of the device-isolation pod: ``DEV <path>`` per accelerator device node, ``ENV
<NAME=value>`` per ``*VISIBLE_DEVICES`` variable, ``END`` (so a truncated log is recognised)."""
SETTLE_S = 60.0
"""Seconds the accounts may take to follow a placement or a deletion (quota controller, Kueue)."""


@dataclasses.dataclass
class _Probe:
    """One probe's run: session, step, identity, what it created, its attempts."""

    session: KubeSession
    step: Step
    probe: GovernanceProbe
    identity: tenancy.Identity
    created: tenancy.Created = dataclasses.field(default_factory=tenancy.Created)
    attempts: list[Attempt] = dataclasses.field(default_factory=list)
    usage: AttributionUsage | None = None

    @property
    def timeout_s(self) -> float:
        return self.probe.timeout_s or self.step.timeout_s

    @overload
    def body(self, role: str, namespace: str, resource: Resource, submit_as: Literal["pod"]) -> PodManifest: ...
    @overload
    def body(self, role: str, namespace: str, resource: Resource, submit_as: str) -> Workload: ...
    def body(self, role: str, namespace: str, resource: Resource, submit_as: str) -> Workload:
        """The manifest of a probe workload (``submit_as`` ``pod`` or ``kueue-job``)."""
        s = self.session
        name = kc.dns_name("hetero-gov", self.probe.name, role, uuid.uuid4().hex[:5])
        labels = kc.labels(s.settings.run_id, s.owner, "governance", matrix=self.step.matrix.name,
                           resource=resource.name, probe=name)
        image = self.step.matrix.image(self.probe.image) if self.probe.image else self.step.matrix.images[0]
        return ks.manifest(submit_as, name, namespace, labels, resource, image.reference, None,
                           kc.created_annotations())

    def submit(self, role: str, body: Workload, want: str = "placed", patient: bool = False) -> Attempt:
        """Create ``body`` as the tenant and watch it (as the observer) until placed or pending."""
        meta = body["metadata"]
        action = f"create {body['kind']} {meta['name']} in namespace {meta['namespace']}"
        queue = meta["labels"].get(ks.KUEUE_QUEUE)
        if queue:
            action += f" on queue {queue}"
        error = tenancy.create(self.identity, body, self.created)
        if error is not None:
            return tenancy.refused(role, action, self.identity, error)
        s = self.session
        outcome, pods, loads, waited = tenancy.observe(s.api, s.served(), body, self.timeout_s, want, patient)
        seen = [parse_pod(p) for p in pods]
        node = next((p.node_name for p in seen if p.node_name), None)
        facts: AttemptFacts = {"node": node, "pods": [p.name for p in seen],
                               "workloads": [w["metadata"]["name"] for w in loads], "requests": requests_of(body)}
        if outcome == "pending":
            reasons, words = tenancy.pending_reasons(self.session.api, pods, loads, meta["namespace"], meta["name"])
            return Attempt(role, action, self.identity.subject, "pending", reasons, words, waited, facts)
        facts["placed_at"] = time.time()
        return Attempt(role, action, self.identity.subject, outcome, [], "", waited, facts)

    def read(self, role: str, action: str, call: Any) -> Attempt:
        """A read made as the tenant: ``allowed`` with what it returned, or ``refused`` with why."""
        try:
            found = call()
        except Exception as exc:  # noqa: BLE001 - the refusal is the probe's answer
            return tenancy.refused(role, action, self.identity, exc)
        return Attempt(role, action, self.identity.subject, "allowed", facts={"returned": found})


def requests_of(body: Workload) -> dict[str, str]:
    """The container requests (quantity strings) of a Pod or Job manifest."""
    return dict(ks.requests_of(body) or {})


def _tenant(step: Step, name: str | None) -> Tenant | None:
    return step.matrix.tenant(name) if name else None


def govern(session: KubeSession, step: Step, probe: GovernanceProbe) -> GovernanceReport:
    """Carry out ``probe`` (see the module docstring) and remove what it created. Raises ActionFailed
    ``tenant_unusable`` when the tenant's token cannot be had, the :func:`~.client.api_outcome` of a
    call that did not get an answer."""
    tenant = _tenant(step, probe.acting_as)
    identity = tenancy.act_as(session.api, tenant, session.namespace)
    run = _Probe(session, step, probe, identity)
    try:
        skipped = {"tenant-isolation": _isolation, "quota": _quota, "attribution": _attribution,
                   "maintenance": _maintenance, "device-isolation": _device_isolation,
                   "preemption": _preemption, "network-isolation": boundaries.network,
                   "data-isolation": boundaries.data}[probe.kind](run, tenant)
    finally:
        records, left = tenancy.delete_all(session.api, run.created)
    costs = ledger(run.attempts, time.time())
    if probe.kind == "attribution" and run.usage:
        _after(run, tenant)
    return GovernanceReport(identity=identity.to_dict(), observer=tenancy.who_am_i(session.api)[0],
                            attempts=run.attempts, usage=run.usage, cleanup=records, leftovers=left,
                            skipped=skipped or "", ledger=costs)


def ledger(attempts: list[Attempt], gone_at: float) -> ProbeLedger:
    """What a probe cost, from its attempts and ``gone_at`` (epoch seconds: its objects confirmed gone):
    ``resource_seconds`` ``{namespace: {resource: request × seconds held}}`` of every workload placed
    (held from placement until ``gone_at``: an upper bound, deletion included), ``workloads`` (role,
    namespace, requests, held_s, and its usage facts: ``workload`` id, ``object``, ``name``, ``placed`` and
    ``released`` epoch seconds, ``outcome``), ``waste``: ``attempts``, ``refused`` (refused or left pending: work
    the cluster turned away), ``waited_s`` (seconds spent waiting for placement or a verdict)."""
    from kubernetes.utils import parse_quantity

    held: dict[str, dict[str, float]] = {}
    workloads: list[ProbeWorkload] = []
    for a in attempts:
        if "placed_at" not in a.facts:
            continue
        placed = float(a.facts.pop("placed_at"))
        seconds = max(0.0, gone_at - placed)
        ns = a.action.split(" in namespace ")[-1].split(" ")[0]
        kind, name = (a.action.split(" ") + ["", ""])[1:3]
        requests = a.facts.get("requests")
        for res, qty in (requests or {}).items():
            per = held.setdefault(ns, {})
            per[res] = round(per.get(res, 0.0) + float(parse_quantity(qty)) * seconds, 3)  # type: ignore[no-untyped-call]
        workloads.append({"role": a.role, "namespace": ns,
                          "requests": None if requests is None else {k: v for k, v in requests.items()},
                          "held_s": round(seconds, 3), "workload": f"{kind.lower()}/{ns}/{name}",
                          "object": kind.lower(), "name": name, "placed": placed, "released": gone_at,
                          "outcome": a.outcome})
    return {"resource_seconds": held, "workloads": workloads,
            "waste": {"attempts": len(attempts), "refused": sum(a.outcome in ("refused", "pending") for a in attempts),
                      "waited_s": round(sum(a.waited_s for a in attempts), 3)}}


def in_maintenance(node: NodeFacts, resource: Resource) -> list[str]:
    """Why ``node`` (facts of :func:`.inventory.node_facts`) must receive no workload of ``resource``
    (:func:`pytest_hetero.backends.nodefit.blockers`: not Ready, cordoned, untolerated taints); [] when it may."""
    return blockers(node, resource.tolerations)


def _maintenance(run: _Probe, tenant: Tenant | None) -> str:
    res = run.step.resource
    pool = inventory.pool(run.step, run.session.api)
    ns = run.identity.namespace
    nodes = [(n["name"], in_maintenance(n, res)) for n in pool.nodes]
    for name, why in [(n, w) for n, w in nodes if w]:
        body = run.body("node", ns, res, "pod")
        body["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}]}}}
        attempt = run.submit("node", body)
        attempt.facts["target_node"], attempt.facts["maintenance"] = name, why
        run.attempts.append(attempt)
    if not run.attempts:
        return (f"no node of the pool ({len(nodes)} matching {pool.selector or 'the requested resources'}) is "
                "cordoned, NotReady or tainted against the resource: nothing to refuse")
    return ""


def _device_isolation(run: _Probe, tenant: Tenant | None) -> None:
    res = run.step.resource
    basic = {k: v for k, v in res.requests.items() if k not in res.device_resources}
    plain = dataclasses.replace(res, requests=basic or {"cpu": "10m"},
                                limits={k: v for k, v in res.limits.items() if k not in res.device_resources})
    body = run.body("no-request", run.identity.namespace, plain, "pod")
    body["spec"]["restartPolicy"] = "Never"
    body["spec"]["containers"][0]["command"] = ["/bin/sh", "-c", LOOK]
    attempt = run.submit("no-request", body, want="completed")
    if attempt.outcome == "completed":
        from kubernetes import client

        from pytest_hetero.backends.kubernetes.startup import read_logs

        core = client.CoreV1Api(run.session.api)
        log = read_logs(core, run.identity.namespace, body["metadata"]["name"])
        lines = log.splitlines()
        attempt.facts.update({"device_nodes": [x[4:] for x in lines if x.startswith("DEV ")],
                              "visible_env": dict(x[4:].split("=", 1) for x in lines if x.startswith("ENV ")),
                              "log_complete": "END" in lines, "log": log[-4000:]})
    run.attempts.append(attempt)


def _victim(run: _Probe, body: PodManifest, wait_s: float) -> VictimFacts:
    """What became of the low-priority pod once the high one was placed: ``evicted`` (deletion requested
    or gone), its ``DisruptionTarget`` condition, its ``Preempted`` events (the scheduler's words)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core, meta = client.CoreV1Api(run.session.api), body["metadata"]
    deadline = time.monotonic() + wait_s
    pod: Any = None
    while True:
        try:
            pod = core.read_namespaced_pod(meta["name"], meta["namespace"], _request_timeout=kc.API_TIMEOUT_S)
        except ApiException as exc:
            if exc.status != 404:
                raise
            pod = None
        if pod is None or pod.metadata.deletion_timestamp is not None or time.monotonic() >= deadline:
            break
        time.sleep(tenancy.POLL_S)
    conditions = [c for c in (pod.status.conditions or []) if c.type == "DisruptionTarget"] if pod else []
    events = [e for e in map(parse_event, ks.events_for(run.session.api, meta["namespace"], meta["name"]))
              if e.reason == "Preempted"]
    return {"pod": meta["name"], "evicted": pod is None or pod.metadata.deletion_timestamp is not None,
            "disruption": [{"reason": c.reason, "message": c.message} for c in conditions],
            "events": [str(e.message) for e in events]}


def _preemption(run: _Probe, tenant: Tenant | None) -> None:
    res, ns = run.step.resource, run.identity.namespace
    low_class, high_class = str(run.probe.low), str(run.probe.high)
    low = run.body("low", ns, dataclasses.replace(res, priority_class=low_class), "pod")
    run.attempts.append(run.submit("low", low))
    if run.attempts[-1].outcome != "placed":
        return
    high = run.body("high", ns, dataclasses.replace(res, priority_class=high_class), "pod")
    attempt = run.submit("high", high, patient=True)
    attempt.facts["victim"] = _victim(run, low, 0 if attempt.outcome == "placed" else 5.0)
    run.attempts.append(attempt)
    waiter = run.body("waiter", ns, dataclasses.replace(res, priority_class=low_class), "pod")
    run.attempts.append(run.submit("waiter", waiter))


def _isolation(run: _Probe, tenant: Tenant | None) -> None:
    target = _tenant(run.step, run.probe.target)
    assert tenant is not None and target is not None  # the matrix requires both  # noqa: S101
    res = run.step.resource
    body = run.body("into-target", target.namespace, res, "pod")
    run.attempts.append(run.submit("submit-into-target", body))
    from kubernetes import client

    core = client.CoreV1Api(run.identity.api)
    run.attempts.append(run.read("list-target-pods", f"list pods in namespace {target.namespace}", lambda: [
        str(p.metadata and p.metadata.name)
        for p in core.list_namespaced_pod(target.namespace, _request_timeout=kc.API_TIMEOUT_S).items]))
    version = run.session.served().version(queues.KUEUE)
    if target.queue and version:
        custom = client.CustomObjectsApi(run.identity.api)
        run.attempts.append(run.read(
            "list-target-workloads", f"list workloads.kueue.x-k8s.io/{version} in namespace {target.namespace}",
            lambda: [w["metadata"]["name"] for w in _items(custom.list_namespaced_custom_object(
                queues.KUEUE[0], version, target.namespace, "workloads", _request_timeout=kc.API_TIMEOUT_S))]))
        if target.queue == tenant.queue:  # the name is A's own LocalQueue: the attempt would prove nothing
            run.attempts.append(Attempt("submit-to-target-queue", f"submit to LocalQueue {target.queue} from "
                                        f"namespace {tenant.namespace}", run.identity.subject, "not-attempted",
                                        message=f"tenant {tenant.name} has a LocalQueue of the same name"))
            return
        foreign = dataclasses.replace(res, queue=target.queue)
        run.attempts.append(run.submit("submit-to-target-queue",
                                       run.body("target-queue", tenant.namespace, foreign, "kueue-job")))
    if target.cluster_queue and version:
        _through_target_cluster_queue(run, tenant, target)


def _through_target_cluster_queue(run: _Probe, tenant: Tenant, target: Tenant) -> None:
    """Every LocalQueue of A's namespace that points at B's ClusterQueue (a platform misconfiguration, or
    a deliberate shared queue) is used once as A [``submit-via-target-cluster-queue``]: Kueue must keep
    B's ClusterQueue to B's namespaces (its namespaceSelector)."""
    found, error = queues.read_objects(run.session.api, run.session.served(), queues.KUEUE, "localqueues",
                                       tenant.namespace)
    if error:
        run.attempts.append(Attempt("submit-via-target-cluster-queue", f"list LocalQueues in {tenant.namespace}",
                                    run.identity.subject, "not-attempted", message=error))
        return
    for lq in map(queues.parse_local_queue, found):
        if lq.cluster_queue == target.cluster_queue:
            via = dataclasses.replace(run.step.resource, queue=lq.name)
            run.attempts.append(run.submit("submit-via-target-cluster-queue",
                                           run.body("target-cq", tenant.namespace, via, "kueue-job")))


def _items(found: Any) -> list[ServedWorkload]:
    """The ``items`` of a Workload list (``kueue.x-k8s.io``) as served."""
    listed: ObjectList[ServedWorkload] = found
    return list(listed["items"])


def _submit_as(run: _Probe, tenant: Tenant | None) -> str:
    return "kueue-job" if run.session.submit_as == "kueue-job" and tenant is not None and tenant.queue else "pod"


def _requesting(res: Resource, requests: dict[str, str], tenant: Tenant | None) -> Resource:
    basic = {k: v for k, v in requests.items() if k in ("cpu", "memory")}
    limits = {**{k: str(v) for k, v in res.limits.items() if k not in basic}, **basic}
    return dataclasses.replace(res, requests=dict(requests), limits=limits,
                               queue=(tenant.queue if tenant and tenant.queue else res.queue))


def _quota(run: _Probe, tenant: Tenant | None) -> None:
    res, ns = run.step.resource, run.identity.namespace
    how = _submit_as(run, tenant)
    above = run.body("above", ns, _requesting(res, run.probe.above, tenant), how)
    run.attempts.append(run.submit("above", above))
    tenancy.delete_all(run.session.api, tenancy.Created([o for o in run.created.objects
                                                         if o[2] == above["metadata"]["name"]]))
    if run.probe.within:
        within = run.body("within", ns, _requesting(res, run.probe.within, tenant), how)
        run.attempts.append(run.submit("within", within))


def _reader(run: _Probe, tenant: Tenant | None) -> Callable[[], dict[str, Account]]:
    """Reads the accounts the probe workload passes through: the namespace's ResourceQuotas, and the
    tenant's Kueue queues only when it is submitted through them (``kueue-job``)."""
    queued = tenant if _submit_as(run, tenant) == "kueue-job" else None
    return lambda: accounts.read(run.session.api, run.session.served(), queued, run.identity.namespace)


def _attribution(run: _Probe, tenant: Tenant | None) -> None:
    read = _reader(run, tenant)
    before = read()
    res = run.step.resource
    body = run.body("workload", run.identity.namespace, _requesting(res, dict(res.requests), tenant),
                    _submit_as(run, tenant))
    requested = requests_of(body)
    attempt = run.submit("workload", body)
    run.attempts.append(attempt)
    ns = run.identity.namespace
    if attempt.outcome != "placed":
        run.usage = {"namespace": ns, "requested": requested, "before": before, "placed": False, "during": {},
                     "after": {}}
        return
    watched = [k for k, v in before.items() if accounts.tracks(v, requested)]
    during, waited = accounts.settle(read, lambda got: all(_used(got).get(k) != _used(before).get(k)
                                                           for k in watched), SETTLE_S)
    run.usage = {"namespace": ns, "requested": requested, "before": before, "placed": True, "during": during,
                 "during_waited_s": round(waited, 3)}


def _after(run: _Probe, tenant: Tenant | None) -> None:
    """Read the accounts after cleanup until they equal ``before`` (at most :data:`SETTLE_S` seconds)."""
    usage = run.usage
    if usage is None or not usage["placed"]:
        return
    before = usage["before"]
    after, waited = accounts.settle(_reader(run, tenant), lambda got: _used(got) == _used(before), SETTLE_S)
    usage["after"], usage["after_waited_s"] = after, round(waited, 3)


def _used(read: dict[str, Account]) -> dict[str, object]:
    """The parts of an account read that follow usage (ResourceQuota used, queue usage/reservation; None
    for what an unreadable queue cannot say)."""
    return {k: _following(v) for k, v in read.items()}


def _following(account: Account) -> object:
    if "used" in account:
        return account["used"]
    if "error" in account:
        return {"usage": None, "reservation": None}
    return {"usage": account["usage"], "reservation": account["reservation"]}
