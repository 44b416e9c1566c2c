"""A task type's scheduling item: its job admitted whole, in the queue its rule names, within its wait.

``spec.task_queues`` (:mod:`pytest_hetero.matrix.taskqueues`) binds a task type to a LocalQueue, a
ClusterQueue, a PriorityClass, a maximum wait and the pods of one job. The engine submits the job
(:meth:`~pytest_hetero.backends.protocol.Backend.place_job`: on Kubernetes an indexed Job with a headless
Service through Kueue, one Workload for all its pods) and reports facts; the verdict is written here:

* not admitted → the decisive normalised reason of the queue controller (Kueue's own words, read by
  :mod:`pytest_hetero.pending`), or ``queue_wait_exceeded`` when the rule's ``max_wait`` passed first
  (the reason in the message), or ``scheduling_timeout`` when nothing explains the wait;
* admitted in another LocalQueue / ClusterQueue, or with another priority class, than the rule's →
  ``queue_rule_mismatch``;
* admitted after longer than ``max_wait`` (Workload created → Admitted, its conditions' times) →
  ``queue_wait_exceeded``;
* admitted but not every pod placed → the decisive Pending reason of the pods, else ``scheduling_timeout``;
* pods placed but unable to reach each other → ``gang_rendezvous_failed``.

``scheduling.job`` holds the facts: the Workload and its admission, the wait, each pod's index, node and
address, the headless Service and the rendezvous each pod reported; each pod is a ``usage.workload`` record.
"""

from __future__ import annotations

from pytest_hetero.backends.protocol import JobAdmission, JobPlacement, JobRequest, WorkloadSeen
from pytest_hetero.layers import usage
from pytest_hetero.layers.base import LayerContext, LayerFailed
from pytest_hetero.matrix.taskqueues import TaskQueue


def rule_of(ctx: LayerContext) -> TaskQueue:
    """The ``spec.task_queues`` rule of the item's task type (KeyError: the plan and matrix disagree)."""
    task = ctx.planned.keys["task_type"]
    found = next((r for r in ctx.matrix.task_queues if r.task_type == task), None)
    if found is None:
        raise KeyError(f"no spec.task_queues rule for task type {task!r}")
    return found


def check(ctx: LayerContext) -> None:
    """Submit the task type's job, record ``scheduling.job``, judge it (see the module docstring).
    Raises LayerFailed; an engine without a queue controller raises Unsupported (not applicable)."""
    rule = rule_of(ctx)
    request = JobRequest(task_type=rule.task_type, workers=rule.workers,
                         queue=rule.queue or ctx.resource.queue,
                         priority_class=rule.priority_class or ctx.resource.priority_class, wait_s=ctx.timeout_s)
    ctx.record("scheduling.request", resource=ctx.resource.name, requests=ctx.resource.requests,
               limits=ctx.resource.limits, node_selector=ctx.resource.node_selector,
               tolerations=list(ctx.resource.tolerations), task_type=rule.task_type, workers=rule.workers,
               queue=request.queue, priority_class=request.priority_class, rule={
                   "queue": rule.queue, "cluster_queue": rule.cluster_queue, "priority_class": rule.priority_class,
                   "max_wait_s": rule.max_wait_s, "workers": rule.workers, "line": rule.line})
    job = ctx.backend.place_job(ctx, request)
    for facts in job.usage:  # each pod of the job in the run's usage ledger
        usage.record(ctx, facts)
    ctx.record("scheduling.job", task_type=rule.task_type, workers=job.workers, admitted=job.admitted,
               placed=job.placed, waited_s=round(job.waited_s, 3), admission=job.admission, pods=job.pods,
               service=job.service, rendezvous=job.rendezvous, reasons=job.reasons, message=job.message)
    judge(rule, request, job)


def judge(rule: TaskQueue, request: JobRequest, job: JobPlacement) -> None:
    """Raise LayerFailed with the category the facts of ``job`` give under ``rule`` (nothing when it holds)."""
    bound = rule.max_wait_s
    if not job.admitted:
        why = job.message
        if bound is not None and job.waited_s > bound:
            raise LayerFailed(f"{rule.task_type} job not admitted after {job.waited_s:.1f} s, over its max_wait of "
                              f"{bound:g} s (spec.task_queues line {rule.line}): {why}", "queue_wait_exceeded")
        raise LayerFailed(why, (job.decisive["code"] if job.decisive else None) or "scheduling_timeout")
    wrong = mismatches(rule, request, job.admission)
    if wrong:
        raise LayerFailed(f"{rule.task_type} job admitted against its rule (spec.task_queues line {rule.line}): "
                          + "; ".join(wrong), "queue_rule_mismatch")
    admission = job.admission
    if ("api_version" in admission  # an admitted Workload's facts (JobAdmission: every field written)
            and bound is not None and (wait := admission["wait_s"]) is not None and wait > bound):
        raise LayerFailed(f"{rule.task_type} job waited {wait:g} s from submission to admission (Workload "
                          f"{admission['workload']} conditions), over its max_wait of {bound:g} s "
                          f"(spec.task_queues line {rule.line})", "queue_wait_exceeded")
    if job.placed < job.workers:
        raise LayerFailed(job.message, (job.decisive["code"] if job.decisive else None) or "scheduling_timeout")
    broken = [r for r in job.rendezvous if not r["ok"]]
    if job.workers > 1 and (broken or len(job.rendezvous) < job.workers):
        raise LayerFailed(f"the {job.workers} pods of the {rule.task_type} job did not all reach each other "
                          f"through headless Service {job.service}: " + "; ".join(
                              f"pod {r['index']}: {r['error']}" for r in broken), "gang_rendezvous_failed")


def mismatches(rule: TaskQueue, request: JobRequest, admission: JobAdmission | WorkloadSeen) -> list[str]:
    """What the admitted Workload (``admission``) says against ``rule``: its LocalQueue, ClusterQueue and
    priority class, each where the rule (or, for the queue, the request) names one."""
    out = []
    for what, want, got in (("LocalQueue", request.queue, admission.get("local_queue")),
                            ("ClusterQueue", rule.cluster_queue, admission.get("cluster_queue")),
                            ("priority class", request.priority_class, admission.get("priority_class"))):
        if want is not None and got != want:
            out.append(f"{what} {got!r}, the rule says {want!r}")
    return out
