"""Deleting what the Kubernetes backend created: at session end (by owner label) and ``hetero cleanup``.

Kinds: Pods (grace period 0), batch/v1 Jobs (background propagation: their pods go too),
Volcano Jobs (when the CRD exists), and the serving objects (:mod:`.serving`): Deployments (foreground
propagation: the Deployment stays until its ReplicaSets and pods are gone, so a pod that will not go
shows as the Deployment lingering), Services and Secrets. ``hetero cleanup --backend kubernetes`` selects by the same
``pytest-hetero.run-id`` label and ``pytest-hetero.created-at`` annotation (else
``creationTimestamp``) as the Docker cleaner; ``--kube-context``/``--kube-namespace`` choose where.
Without ``--kube-namespace`` every namespace is searched (a run's namespace comes from its matrix,
not from the kubeconfig context), or, when a cluster-wide list is forbidden, the context's namespace.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import client
from kubernetes.client import BatchV1Api, CoreV1Api, CustomObjectsApi  # noqa: F401 - loaded now, not mid-cleanup
from kubernetes.client.exceptions import ApiException

from pytest_hetero.backends.kubernetes.client import connect
from pytest_hetero.backends.kubernetes.manifests import Listed, ObjectList
from pytest_hetero.backends.kubernetes.objects import Meta, parse_meta, parse_status
from pytest_hetero.backends.labels import CREATED_AT, RUN_ID, CleanupEntry
from pytest_hetero.backends.protocol import EngineFault, Leftover
from pytest_hetero.evidence.usage import epoch

VOLCANO = ("batch.volcano.sh", "v1alpha1", "jobs")


def owned(
    api: client.ApiClient, namespace: str | None, selector: str
) -> Iterator[tuple[str, Meta, Callable[[], Any]]]:
    """``(kind, metadata, delete())`` of every pod, Job, serving object (:func:`_serving_objects`)
    and Volcano Job matching ``selector`` in ``namespace`` (None: all namespaces). Raises ApiException
    when pods or Jobs cannot be listed."""
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    pods = (
        core.list_pod_for_all_namespaces(label_selector=selector)
        if namespace is None
        else core.list_namespaced_pod(namespace, label_selector=selector)
    )
    jobs = (
        batch.list_job_for_all_namespaces(label_selector=selector)
        if namespace is None
        else batch.list_namespaced_job(namespace, label_selector=selector)
    )
    for job in jobs.items:
        meta = parse_meta(api.sanitize_for_serialization(job.metadata))  # type: ignore[no-untyped-call]
        yield (
            "job",
            meta,
            lambda m=meta: batch.delete_namespaced_job(  # type: ignore[misc]
                m.name, m.namespace, propagation_policy="Background", grace_period_seconds=0
            ),
        )
    for pod in pods.items:
        meta = parse_meta(api.sanitize_for_serialization(pod.metadata))  # type: ignore[no-untyped-call]
        yield (
            "pod",
            meta,
            lambda m=meta: core.delete_namespaced_pod(m.name, m.namespace, grace_period_seconds=0),  # type: ignore[misc]
        )
    yield from _serving_objects(api, namespace, selector)
    custom = client.CustomObjectsApi(api)
    try:
        found: Any = (
            custom.list_cluster_custom_object(*VOLCANO, label_selector=selector)
            if namespace is None
            else custom.list_namespaced_custom_object(
                VOLCANO[0], VOLCANO[1], namespace, VOLCANO[2], label_selector=selector
            )
        )
    except ApiException:
        found = {"items": []}
    vcjobs: ObjectList[Listed] = found
    assert isinstance(vcjobs, dict)
    for obj in vcjobs["items"]:
        meta = parse_meta(obj["metadata"])
        yield (
            "volcano-job",
            meta,
            lambda m=meta: custom.delete_namespaced_custom_object(  # type: ignore[misc]
                VOLCANO[0], VOLCANO[1], m.namespace, VOLCANO[2], m.name
            ),
        )


def _serving_objects(
    api: client.ApiClient, namespace: str | None, selector: str
) -> Iterator[tuple[str, Meta, Callable[[], Any]]]:
    """``(kind, metadata, delete())`` of the Deployments, Services and Secrets matching ``selector``.
    A kind the caller may not list (HTTP 403: a Role without serving) is skipped: the run could not
    have created it either. Raises ApiException otherwise."""
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    kinds: list[tuple[str, Callable[..., Any], Callable[..., Any], Callable[..., Any]]] = [
        ("deployment", apps.list_deployment_for_all_namespaces, apps.list_namespaced_deployment,
         lambda m: apps.delete_namespaced_deployment(m.name, m.namespace, propagation_policy="Foreground")),
        ("service", core.list_service_for_all_namespaces, core.list_namespaced_service,
         lambda m: core.delete_namespaced_service(m.name, m.namespace)),
        ("secret", core.list_secret_for_all_namespaces, core.list_namespaced_secret,
         lambda m: core.delete_namespaced_secret(m.name, m.namespace)),
        ("configmap", core.list_config_map_for_all_namespaces, core.list_namespaced_config_map,  # training jobs
         lambda m: core.delete_namespaced_config_map(m.name, m.namespace)),
    ]
    for kind, list_all, list_in, delete in kinds:
        try:
            found = (list_all(label_selector=selector) if namespace is None
                     else list_in(namespace, label_selector=selector))
        except ApiException as exc:
            if exc.status == 403:
                continue
            raise
        for obj in found.items:
            meta = parse_meta(api.sanitize_for_serialization(obj.metadata))  # type: ignore[no-untyped-call]
            yield kind, meta, _bound(delete, meta)


def _bound(delete: Callable[[Meta], Any], meta: Meta) -> Callable[[], Any]:
    """``delete`` of the object ``meta`` as a call without arguments."""
    return lambda: delete(meta)


CLEANUP_WAIT_S = 30.0
"""Seconds :func:`delete_owned` waits for deleted objects to be gone (``target.cleanup_wait_s``)."""


def delete_owned(api: client.ApiClient, namespace: str, selector: str, workers: int = 1,
                 wait_s: float = CLEANUP_WAIT_S) -> list[Leftover]:
    """Delete everything matching ``selector`` in ``namespace`` with ``workers`` concurrent requests,
    then wait up to ``wait_s`` seconds until it is gone; return what is left. Never raises.

    A leftover is an object whose deletion the apiserver refused (its answer is the reason), one still
    present when the wait ends (``deletionTimestamp`` and ``finalizers`` in its detail: a finalizer
    that never clears), or, when the objects cannot even be listed, the selector itself. Each is also
    written to stderr with the ``hetero cleanup`` command that removes it.
    """
    from concurrent.futures import ThreadPoolExecutor

    left: list[Leftover] = []
    remove = f"hetero cleanup --backend kubernetes --kube-namespace {namespace}"

    def one(entry: tuple[str, Meta, Callable[[], Any]]) -> None:
        kind, meta, delete = entry
        try:
            delete()
        except ApiException as exc:
            if exc.status != 404:
                left.append(Leftover(kind, meta.name, f"delete refused: HTTP {exc.status}: {_message(exc)}",
                                     namespace, {"status": exc.status}, remove))

    try:
        with ThreadPoolExecutor(max(1, workers)) as pool:
            list(pool.map(one, list(owned(api, namespace, selector))))
        refused = {(x.kind, x.name) for x in left}
        left += lingering(api, namespace, selector, wait_s, refused, remove)
    except Exception as exc:  # noqa: BLE001 - reported as a leftover, never raised from close()
        left.append(Leftover("objects", selector, f"cannot be listed or deleted: {type(exc).__name__}: {exc}",
                             namespace, {}, remove))
    if left:
        import sys

        sys.stderr.write(f"pytest-hetero: kubernetes cleanup incomplete in {namespace}: "
                         + "; ".join(f"{x.kind} {x.name}: {x.reason}" for x in left) + f"; run: {remove}\n")
    return left


def lingering(api: client.ApiClient, namespace: str, selector: str, wait_s: float,
              known: set[tuple[str, str]], remove: str) -> list[Leftover]:
    """Objects matching ``selector`` still present ``wait_s`` seconds after their deletion (polled
    every 0.5 s), except ``known`` ``(kind, name)`` pairs; each with its ``deletionTimestamp`` and
    ``finalizers``. Raises ApiException when they cannot be listed."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        still = [(k, m) for k, m, _ in owned(api, namespace, selector) if (k, m.name) not in known]
        if not still or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    return [Leftover(kind, meta.name, (
        f"still present {wait_s:g} s after deletion"
        + (f": finalizers {', '.join(meta.finalizers)} never cleared" if meta.finalizers else "")),
        namespace, {"deletionTimestamp": str(meta.deleting_since or ""),
                    "finalizers": list(meta.finalizers)}, remove)
        for kind, meta in still]


def _message(exc: ApiException) -> str:
    """The ``message`` of an API Status body, else the reason."""
    status = parse_status(exc.body)
    return str((status.message if status is not None else None) or exc.reason)


def cleanup(args: argparse.Namespace) -> list[CleanupEntry]:
    """Remove (or list) the pods, Jobs and serving objects (Deployments, Services, Secrets) of
    pytest-hetero runs selected by ``args``
    (see :mod:`pytest_hetero.backends.labels`).

    With ``--backend all`` and no Kubernetes configuration at all (no ``KUBECONFIG``, no
    ``~/.kube/config``, not in a pod) returns [] instead. Raises CleanupError when the cluster
    cannot be reached or the objects cannot be listed.
    """
    import time

    from pytest_hetero.backends.labels import CleanupError, selected

    configured = (
        os.environ.get("KUBECONFIG")
        or os.path.exists(os.path.expanduser("~/.kube/config"))
        or os.environ.get("KUBERNETES_SERVICE_HOST")
        or args.kube_context
    )
    if getattr(args, "backend", "all") == "all" and not configured:
        return []  # no cluster configured here: nothing of ours can exist (``--backend all`` stays quiet)
    try:
        api, namespace, _ = connect({}, args.kube_context)
    except EngineFault as exc:
        raise CleanupError(exc.message) from None
    ns = None if args.kube_namespace in (None, "all") else args.kube_namespace
    selector = RUN_ID if args.run_id is None else f"{RUN_ID}={args.run_id}"
    now = time.time()
    out: list[CleanupEntry] = []
    try:
        try:
            found = list(owned(api, ns, selector))
        except ApiException as exc:
            if args.kube_namespace is not None or exc.status != 403:
                raise
            # no cluster-wide list (least-privilege Role): the context's namespace is all we may see
            import sys

            sys.stderr.write(
                f"hetero cleanup: kubernetes: may not list across namespaces (HTTP 403); searched only "
                f"namespace {namespace} (name others with --kube-namespace NS)\n"
            )
            ns = namespace
            found = list(owned(api, ns, selector))
    except Exception as exc:  # noqa: BLE001 - unreachable or forbidden: exit code 2
        raise CleanupError(f"Kubernetes objects not listable in {ns or 'all namespaces'}: {exc}") from None
    for kind, meta, delete in found:
        labels = {**meta.labels, **meta.annotations}
        match, age = selected(labels, epoch(meta.created), args, now)
        if not match:
            continue
        entry: CleanupEntry = {
            "backend": "kubernetes",
            "kind": kind,
            "name": f"{meta.namespace}/{meta.name}",
            "run_id": labels.get(RUN_ID),
            "created_at": labels.get(CREATED_AT),
            "age_s": None if age is None else round(age, 1),
            "removed": False,
            "error": None,
        }
        if not args.dry_run:
            try:
                delete()
                entry["removed"] = True
            except ApiException as exc:
                entry["removed"] = exc.status == 404
                entry["error"] = None if exc.status == 404 else f"HTTP {exc.status}: {exc.reason}"
        out.append(entry)
    return out
