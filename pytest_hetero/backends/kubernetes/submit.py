"""Submission of the resource × image workload and the wait until the scheduler places it.

The manifest comes from :func:`kube_scheduling.manifest` (``submit_as`` pod, Job, Kueue or Volcano
Job) with the target's ``pull_policy`` (``never`` → ``Never``, ``always`` → ``Always``, else
``IfNotPresent``); an apiserver refusal is kept on the workload record for the item that owns it.
With ``--hetero-parallel N`` > 1 :func:`prefetch` submits every resource × image workload of a
matrix, N at a time. :func:`place` waits on the run's pod watch; ``unschedulable_grace_s``
(seconds) lets a pod stay Unschedulable that long before the verdict is final.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import placement as kp
from pytest_hetero.backends.kubernetes import scheduling as ks
from pytest_hetero.layers.base import LayerContext, LayerFailed
from pytest_hetero.matrix.model import Matrix

if TYPE_CHECKING:
    from pytest_hetero.backends.kubernetes.engine import KubernetesBackend

PULL = {"never": "Never", "always": "Always", "if-not-present": "IfNotPresent"}


def create(
    backend: KubernetesBackend, matrix: Matrix, resource: str, image: str, workload: dict[str, Any]
) -> dict[str, Any]:
    """Build the workload's manifest and create it; return ``workload`` with ``body`` and
    ``submitted_at`` (epoch seconds) added.

    Raises LayerFailed ``bad_target`` (platform) when the manifest cannot be built, and the
    :func:`kube_client.api_outcome` of a refused create; either is also kept in ``workload["error"]``.
    """
    probe = workload["probe"]
    res, img = matrix.resource(resource), matrix.image(image)
    labels = kc.labels(
        backend.settings.run_id,
        backend.owner,
        "workload",
        matrix=matrix.name,
        resource=resource,
        image=image,
        probe=probe,
    )
    try:
        body = ks.manifest(
            backend.submit_as,
            workload["name"],
            backend.namespace,
            labels,
            res,
            img.reference,
            PULL.get(str(backend.target.get("pull_policy", ""))),
            kc.created_annotations(),
        )
    except ValueError as exc:
        workload["error"] = LayerFailed(str(exc), "bad_target", "platform")
        raise workload["error"] from None
    workload["body"] = body
    workload["submitted_at"] = time.time()
    try:
        ks.create(backend.api, body)
    except Exception as exc:  # noqa: BLE001 - translated, kept for the item that owns it
        workload["error"] = kc.api_outcome(
            exc, f"create {body['kind']} {workload['name']} in namespace {backend.namespace}"
        )
        raise workload["error"] from None
    return workload


def prefetch(backend: KubernetesBackend, ctx: LayerContext) -> None:
    """With ``--hetero-parallel`` > 1, submit every resource × image workload of the item's matrix (not
    excluded, image for the resource's type) on the backend's pool, once per matrix; else nothing.
    """
    if backend.settings.parallel < 2 or ctx.matrix.sha256 in backend.prefetched:
        return
    backend.prefetched.add(ctx.matrix.sha256)
    m = ctx.matrix
    keys = [
        (r.name, i.name)
        for r in m.resources
        for i in m.images
        if r.type in i.for_types
        and not any(x.matches({"resource": r.name, "image": i.name}) for x in m.exclude)
    ]
    for r, i in keys:  # each item waits for its own creation only (place)
        backend.pool.submit(backend.submit, m, r, i)


def place(backend: KubernetesBackend, ctx: LayerContext, timeout_s: float) -> dict[str, Any]:
    """Submit and wait up to ``timeout_s`` seconds for the current item's workload; record
    ``scheduling.submitted`` and ``scheduling.placed``; return its scheduled pod (JSON dict).

    Raises the workload's creation error (after recording ``scheduling.pending``), else the
    LayerFailed of :func:`kube_placement.unscheduled` when the pod is not placed.
    """
    start = time.perf_counter()
    workload = backend.submit(ctx.matrix, ctx.resource.name, ctx.image.name)
    workload["created"].wait(timeout_s)
    if workload["error"] is not None:
        reasons = getattr(workload["error"], "reasons", [])
        ctx.record(
            "scheduling.pending",
            object=workload["name"],
            submit_as=workload["kind"],
            refused_by="apiserver",
            reasons=reasons,
            message=workload["error"].message,
        )
        raise workload["error"]
    ctx.record(
        "scheduling.submitted",
        submit_as=workload["kind"],
        name=workload["name"],
        namespace=backend.namespace,
        manifest=workload["body"],
        submitted_at_epoch_s=workload["submitted_at"],
    )
    grace = float(backend.target.get("unschedulable_grace_s", 0))
    first_refusal: list[float] = []

    def done(pods: list[dict[str, Any]]) -> Any:
        if ks.scheduled(pods):
            return ks.scheduled(pods)
        if ks.unschedulable(pods):
            first_refusal[:] = first_refusal or [time.monotonic()]
            return "unschedulable" if time.monotonic() - first_refusal[0] >= grace else None
        return None

    found = backend.pods().wait(workload["probe"], done, timeout_s)
    if isinstance(found, dict):
        kp.record_placed(backend, ctx, workload, found, time.perf_counter() - start)
        return found
    raise kp.unscheduled(backend, ctx, workload, timeout_s if found is None else None)
