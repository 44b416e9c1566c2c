"""Kubernetes backend: validates a cluster's pools through the path a user's workload takes.

Target keys (``spec.target``): ``context``, ``namespace``, ``kubeconfig`` (see
:mod:`~pytest_hetero.backends.kubernetes.client`; ``--hetero-kube-context``/``--hetero-kube-namespace``
override), ``submit_as`` (``pod`` | ``job`` | ``kueue-job`` | ``volcano-job``, see
:mod:`~pytest_hetero.backends.kubernetes.scheduling`), ``pull_policy`` (``never`` → ``Never``,
``always`` → ``Always``, else ``IfNotPresent``), ``image_owner`` (default ``platform``),
``python`` (``{python}`` in the pod, default ``python3``), ``unschedulable_grace_s`` (seconds a pod
may stay Unschedulable before the verdict is final; default 0: the scheduler's first verdict).

One workload pod per resource × image: scheduling submits it and waits (on one pod watch) until it
is placed (:mod:`~pytest_hetero.backends.kubernetes.submit`); startup waits until its container runs and
runs the device payload by exec (:mod:`~pytest_hetero.backends.kubernetes.startup`); model runs exec into
it (:mod:`~pytest_hetero.backends.kubernetes.run`). With ``--hetero-parallel N`` > 1 the first
scheduling item submits every resource × image workload of its matrix, N at a time, so the
scheduler places them concurrently. Everything
created carries ``pytest-hetero.run-id``/``pytest-hetero.owner`` and is deleted by :meth:`close`
(session end, Ctrl-C, SIGTERM) unless ``--hetero-keep``; ``hetero cleanup --backend kubernetes``
removes leftovers.
"""

from __future__ import annotations

import hashlib
import signal
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import inventory as kube_discovery
from pytest_hetero.backends.kubernetes import podexec as kube_exec
from pytest_hetero.backends.kubernetes import run as kube_model
from pytest_hetero.backends.kubernetes import startup as kube_startup
from pytest_hetero.backends.kubernetes import submit as kube_submit
from pytest_hetero.backends.protocol import Backend, ExecResult
from pytest_hetero.backends.kubernetes.watch import PodWatch
from pytest_hetero.layers.base import LayerContext
from pytest_hetero.matrix.model import Matrix
from pytest_hetero.settings import Settings


class KubernetesBackend(Backend):
    """A cluster reached with the official ``kubernetes`` client; see the module docstring for target keys."""

    name = "kubernetes"
    scheduling_per_image = True

    def __init__(self, target: dict[str, Any], settings: Settings) -> None:
        super().__init__(target, settings)
        self.owner = uuid.uuid4().hex[:10]
        self.context = settings.kube_context or target.get("context")
        self.submit_as = str(target.get("submit_as", "pod"))
        self.image_owner = str(target.get("image_owner", "platform"))
        self._api: client.ApiClient | None = None
        self.namespace = ""
        self.server: dict[str, Any] = {}
        self.watch: PodWatch | None = None
        self.workloads: dict[tuple[str, str], dict[str, Any]] = {}
        self.nodes: dict[str, dict[str, Any]] = {}
        self.seen_nodes: set[str] = set()
        """Nodes discovery listed or a workload was placed on (the fingerprint's ``nodes``)."""
        self.digests: dict[str, str] = {}
        self.lock = threading.Lock()
        self.pool = ThreadPoolExecutor(max(1, settings.parallel), thread_name_prefix="hetero-kube")
        self.prefetched: set[str] = set()

    @property
    def api(self) -> client.ApiClient:
        """The ApiClient (connects on first use; LayerFailed ``bad_target`` without configuration)."""
        with self.lock:
            if self._api is None:
                api, namespace, context = kc.connect(self.target, self.context)
                self.namespace = self.settings.kube_namespace or self.target.get("namespace") or namespace
                self.context = self.context or context
                try:
                    self.server = client.VersionApi(api).get_code(_request_timeout=kc.API_TIMEOUT_S).to_dict()
                except Exception as exc:  # noqa: BLE001 - translated
                    raise kc.api_outcome(exc, f"reach the apiserver of context {self.context}") from None
                self._api = api
            return self._api

    @property
    def core(self) -> client.CoreV1Api:
        """CoreV1Api on :attr:`api`."""
        return client.CoreV1Api(self.api)

    def pods(self) -> PodWatch:
        """The run's pod watch, started on first use (LayerFailed ``forbidden_rbac`` without list/watch pods)."""
        api = self.api
        with self.lock:
            if self.watch is None:
                watch = PodWatch(api, self.namespace, f"{kc.OWNER}={self.owner}")
                try:
                    watch.start()
                except Exception as exc:  # noqa: BLE001 - translated
                    raise kc.api_outcome(exc, f"list pods in namespace {self.namespace}") from None
                self.watch = watch
            return self.watch

    def fingerprint(self) -> dict[str, Any]:
        """Apiserver host and context, nodes seen, server version, image digests reported by nodes."""
        host = self._api.configuration.host if self._api is not None else None
        return {
            "backend": self.name,
            "identity": f"{host} (context {self.context}, namespace {self.namespace})",
            "nodes": sorted(self.seen_nodes),
            "versions": {"server": self.server.get("git_version"), "platform": self.server.get("platform")},
            "images": dict(self.digests),
        }

    def discover(self, ctx: LayerContext) -> None:
        """Nodes of the resource's pool against the matrix (see :mod:`kube_discovery`)."""
        for facts in kube_discovery.discover(ctx, self.api):
            self.nodes[facts["name"]] = facts
            self.seen_nodes.add(facts["name"])

    def submit(self, matrix: Matrix, resource: str, image: str) -> dict[str, Any]:
        """Create the resource × image workload (once); return its record. Raises LayerFailed/LayerBroken."""
        key = (resource, image)
        with self.lock:
            if key in self.workloads:
                return self.workloads[key]
            # a digest of the key keeps truncated names of long resource/image names apart
            tail = f"{hashlib.sha1(f'{resource}/{image}'.encode()).hexdigest()[:5]}-{self.owner[:6]}"
            probe = f"{kc.dns_name(resource, image, limit=50)}-{tail}"
            workload: dict[str, Any] = {
                "probe": probe,
                "name": f"{kc.dns_name('hetero', resource, image, limit=50)}-{tail}",
                "kind": self.submit_as,
                "error": None,
                "created": threading.Event(),
            }
            self.workloads[key] = workload
        try:
            return kube_submit.create(self, matrix, resource, image, workload)
        finally:
            workload["created"].set()

    def schedule(self, ctx: LayerContext) -> None:
        """Submit (or find the prefetched) workload, wait until placed; record requested vs allocated.

        Raises LayerFailed with the decisive normalised reason's code and owner (all reasons in
        ``scheduling.pending``); ``scheduling_timeout`` (platform) when nothing explains the wait.
        """
        self.pods()
        kube_submit.prefetch(self, ctx)
        self.place(ctx, ctx.timeout_s)

    def place(self, ctx: LayerContext, timeout_s: float) -> dict[str, Any]:
        """Submit and wait for the current item's workload; return its scheduled pod (JSON dict).

        See :func:`kube_submit.place` for the records and the errors it raises.
        """
        return kube_submit.place(self, ctx, timeout_s)

    def start(self, ctx: LayerContext) -> None:
        """Wait until the workload container runs (or say why not), record image digest, logs, run the payload.

        See :func:`kube_startup.start` for the records and the LayerFailed codes it raises.
        """
        kube_startup.start(self, ctx)

    def execute(self, ctx: LayerContext) -> ExecResult:
        """Copy inputs into the workload pod (once), exec the entrypoint with the layer timeout, read outputs.

        See :func:`kube_model.execute` for the result's details and the LayerFailed codes it raises.
        """
        return kube_model.execute(self, ctx)

    def close(self) -> None:
        """Stop the watch; delete everything this backend created (by owner label) unless ``--hetero-keep``.

        Runs with SIGINT/SIGTERM held off (main thread) so a second Ctrl-C or a SIGTERM cannot cut the
        deletion short; they are restored afterwards.
        """
        held: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                held[sig] = signal.signal(sig, signal.SIG_IGN)
        try:
            self._close()
        finally:
            for sig, handler in held.items():
                signal.signal(sig, handler)

    def _close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        if self.watch is not None:
            self.watch.stop()
        if self._api is None:
            return
        from pytest_hetero.backends.kubernetes.cleanup import delete_owned

        if self.settings.keep:
            for w in self.workloads.values():
                sys.stderr.write(
                    f"pytest-hetero: kept {w['kind']} {w['name']} in namespace {self.namespace}; "
                    f"remove with: hetero cleanup --backend kubernetes --run-id {self.settings.run_id}\n"
                )
            return
        for w in self.workloads.values():
            if not w.get("inputs"):
                continue
            # on a KWOK node the copy lives on the host, not in the pod; a lost node gets 5 s to answer
            rm = ["rm", "-rf", w["inputs"]]
            if w.get("node_lost"):
                kube_exec.try_run(self.core, self.namespace, w["pod"], rm, 5)
                continue
            try:
                kube_exec.run(self.core, self.namespace, w["pod"], "workload", rm, 30)
            except Exception:  # noqa: BLE001, S110 - the pod may be gone already
                pass
        delete_owned(self._api, self.namespace, f"{kc.OWNER}={self.owner}", self.settings.parallel)
