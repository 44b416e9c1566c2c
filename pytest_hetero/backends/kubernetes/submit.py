"""Submission of the resource × image workload and the wait until the scheduler places it.

The manifest comes from :func:`kube_scheduling.manifest` (``submit_as`` pod, Job, Kueue or Volcano
Job) with the target's ``pull_policy`` (``never`` → ``Never``, ``always`` → ``Always``, else
``IfNotPresent``); an apiserver refusal is kept on the workload record for the item that owns it.
With ``--hetero-parallel N`` > 1 :func:`prefetch` submits every resource × image workload of a
matrix, N at a time. :func:`place` waits on the run's pod watch; ``unschedulable_grace_s``
(seconds) lets a pod stay Unschedulable that long before the verdict is final.
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import placement as kp
from pytest_hetero.backends.kubernetes import scheduling as ks
from pytest_hetero.backends.kubernetes.manifests import ServedPod
from pytest_hetero.backends.kubernetes.session import WorkloadRecord
from pytest_hetero.backends.protocol import ActionFailed, Placement, Step
from pytest_hetero.matrix.model import Matrix

if TYPE_CHECKING:
    from pytest_hetero.backends.kubernetes.session import KubeSession

def workload_key(resource: str, image: str, node: str | None = None) -> tuple[str, ...]:
    """The key of a workload in ``session.workloads``: (resource, image), plus the node it is pinned to."""
    return (resource, image) if node is None else (resource, image, node)


def workload_names(resource: str, image: str, node: str | None, owner: str) -> tuple[str, str, str | None]:
    """(probe label, object name, inputs root) of the resource × image workload, pinned to ``node`` when given, of the
    gate ``owner``. A digest of the key keeps truncated names of long resource/image names apart, and the pinned
    workloads of a pool's nodes apart: 40 bits (20 gave six pairs of 5,000 nodes named ``gpu-node-NNNN`` one name). A
    pinned workload's inputs go to a folder of its own (None: the shared workload's ``/tmp/hetero-<owner>``): on KWOK
    nodes every pod's exec runs on one host, where the pinned pods, checked at once, would untar into one folder."""
    seed = f"{resource}/{image}" + (f"/{node}" if node is not None else "")
    tail = f"{hashlib.sha1(seed.encode()).hexdigest()[:10]}-{owner[:6]}"
    return (f"{kc.dns_name(resource, image, limit=45)}-{tail}",
            f"{kc.dns_name('hetero', resource, image, limit=45)}-{tail}",
            None if node is None else f"/tmp/hetero-{owner}-{tail[:10]}")


def submit(session: KubeSession, matrix: Matrix, resource: str, image: str, node: str | None = None
           ) -> WorkloadRecord:
    """Create the resource × image workload once (later calls get the same record); return its record.
    ``node``: a workload of its own pinned to that node (node coverage), placed by the scheduler all the same.
    Raises ActionFailed/EngineUnavailable (also kept on the record, for the item that owns it)."""
    key = workload_key(resource, image, node)
    with session.lock:
        if key in session.workloads:
            return session.workloads[key]
        probe, name, root = workload_names(resource, image, node, session.owner)
        workload = WorkloadRecord(probe=probe, name=name, kind=session.submit_as, error=None, node=node, root=root)
        session.workloads[key] = workload
    try:
        return create(session, matrix, resource, image, workload)
    finally:
        workload.created.set()


def create(
    session: KubeSession, matrix: Matrix, resource: str, image: str, workload: WorkloadRecord
) -> WorkloadRecord:
    """Build the workload's manifest and create it; return ``workload`` with ``body`` and
    ``submitted_at`` (epoch seconds) added.

    Raises ActionFailed ``bad_target`` (platform) when the manifest cannot be built, and the
    :func:`kube_client.api_outcome` of a refused create; either is also kept in ``workload.error``.
    """
    probe = workload.probe
    res, img = matrix.resource(resource), matrix.image(image)
    notes = kc.created_annotations()
    if workload.node:
        notes[ks.PINNED] = str(workload.node)
    labels = kc.labels(
        session.settings.run_id,
        session.owner,
        "workload",
        matrix=matrix.name,
        resource=resource,
        image=image,
        probe=probe,
    )
    try:
        body = ks.manifest(
            session.submit_as,
            workload.name,
            session.namespace,
            labels,
            res,
            img.reference,
            session.conf.image_pull_policy,
            notes,
            pinned_to=workload.node,
        )
    except ValueError as exc:
        refused = ActionFailed(str(exc), "bad_target")
        workload.error = refused
        raise refused from None
    workload.body = body
    workload.submitted_at = time.time()
    try:
        ks.create(session.api, body)
    except Exception as exc:  # noqa: BLE001 - translated, kept for the item that owns it
        fault = kc.api_outcome(exc, f"create {body['kind']} {workload.name} in namespace {session.namespace}")
        workload.error = fault
        raise fault from None
    return workload


def prefetch(session: KubeSession, ctx: Step) -> None:
    """With ``--hetero-parallel`` > 1, submit every resource × image workload of the item's matrix (not
    excluded, image for the resource's type) on the backend's pool, once per matrix; else nothing.
    """
    if session.settings.parallel < 2 or ctx.matrix.sha256 in session.prefetched:
        return
    session.prefetched.add(ctx.matrix.sha256)
    m = ctx.matrix
    keys = [
        (r.name, i.name)
        for r in m.resources
        for i in m.images
        if r.type in i.for_types
        and not any(x.matches({"resource": r.name, "image": i.name}) for x in m.exclude)
    ]
    for r, i in keys:  # each item waits for its own creation only (place)
        session.pool.submit(submit, session, m, r, i)


def place(session: KubeSession, ctx: Step, timeout_s: float, node: str | None = None) -> ServedPod | Placement:
    """Submit and wait up to ``timeout_s`` seconds for the current item's workload (``node``: the one
    pinned to that node); record ``scheduling.submitted`` and ``scheduling.placed``; return its scheduled
    pod (JSON dict), or the Placement of :func:`.placement.unscheduled` (not placed, with the reasons)
    when it is not placed.

    Raises the workload's creation error (after recording ``scheduling.pending``).
    """
    start = time.perf_counter()
    workload = submit(session, ctx.matrix, ctx.resource.name, ctx.image.name, node)
    workload.created.wait(timeout_s)
    if workload.error is not None:
        reasons = getattr(workload.error, "reasons", [])
        ctx.record(
            "scheduling.pending",
            object=workload.name,
            submit_as=workload.kind,
            refused_by="apiserver",
            pinned_to=node,
            reasons=reasons,
            message=workload.error.message,
        )
        raise workload.error
    ctx.record(
        "scheduling.submitted",
        submit_as=workload.kind,
        name=workload.name,
        namespace=session.namespace,
        pinned_to=node,
        manifest=workload.body,
        submitted_at_epoch_s=workload.submitted_at,
    )
    grace = session.conf.unschedulable_grace_s
    first_refusal: list[float] = []

    def done(pods: list[ServedPod]) -> ServedPod | str | None:
        if ks.scheduled(pods):
            return ks.scheduled(pods)
        if ks.unschedulable(pods):
            first_refusal[:] = first_refusal or [time.monotonic()]
            return "unschedulable" if time.monotonic() - first_refusal[0] >= grace else None
        return None

    found: ServedPod | str | None = session.pods().wait(workload.probe, done, timeout_s)
    if found is None or isinstance(found, str):
        return kp.unscheduled(session, ctx, workload, timeout_s if found is None else None)
    kp.record_placed(session, ctx, workload, found, time.perf_counter() - start)
    return found
