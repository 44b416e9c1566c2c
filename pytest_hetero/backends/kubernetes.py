"""Kubernetes backend: validates a cluster's pools through the path a user's workload takes.

Target keys (``spec.target``): ``context``, ``namespace``, ``kubeconfig`` (see
:mod:`~pytest_hetero.backends.kube_client`; ``--hetero-kube-context``/``--hetero-kube-namespace``
override), ``submit_as`` (``pod`` | ``job`` | ``kueue-job`` | ``volcano-job``, see
:mod:`~pytest_hetero.backends.kube_scheduling`), ``pull_policy`` (``never`` → ``Never``,
``always`` → ``Always``, else ``IfNotPresent``), ``image_owner`` (default ``platform``),
``python`` (``{python}`` in the pod, default ``python3``), ``unschedulable_grace_s`` (seconds a pod
may stay Unschedulable before the verdict is final; default 0: the scheduler's first verdict).

One workload pod per resource × image: scheduling submits it and waits (on one pod watch) until it
is placed; startup waits until its container runs and runs the device payload by exec; model runs
exec into it. With ``--hetero-parallel N`` > 1 the first scheduling item submits every resource ×
image workload of its matrix, N at a time, so the scheduler places them concurrently. Everything
created carries ``pytest-hetero.run-id``/``pytest-hetero.owner`` and is deleted by :meth:`close`
(session end, Ctrl-C, SIGTERM) unless ``--hetero-keep``; ``hetero cleanup --backend kubernetes``
removes leftovers.
"""

from __future__ import annotations

import hashlib
import signal
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client

from pytest_hetero.backends import kube_client as kc
from pytest_hetero.backends import kube_discovery, kube_exec
from pytest_hetero.backends import kube_placement as kp
from pytest_hetero.backends import kube_scheduling as ks
from pytest_hetero.backends import kube_workload as kw
from pytest_hetero.backends.base import EXECUTION_PROVIDERS, Backend, ExecResult, render_entrypoint
from pytest_hetero.backends.kube_watch import PodWatch
from pytest_hetero.layers.base import LayerContext, LayerFailed
from pytest_hetero.layers.startup import verify_inputs
from pytest_hetero.matrix.model import Matrix
from pytest_hetero.pending import summarise
from pytest_hetero.settings import Settings

PULL = {"never": "Never", "always": "Always", "if-not-present": "IfNotPresent"}


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
            return self._create(matrix, resource, image, workload)
        finally:
            workload["created"].set()

    def _create(self, matrix: Matrix, resource: str, image: str, workload: dict[str, Any]) -> dict[str, Any]:
        probe = workload["probe"]
        res, img = matrix.resource(resource), matrix.image(image)
        labels = kc.labels(
            self.settings.run_id,
            self.owner,
            "workload",
            matrix=matrix.name,
            resource=resource,
            image=image,
            probe=probe,
        )
        try:
            body = ks.manifest(
                self.submit_as,
                workload["name"],
                self.namespace,
                labels,
                res,
                img.reference,
                PULL.get(str(self.target.get("pull_policy", ""))),
                kc.created_annotations(),
            )
        except ValueError as exc:
            workload["error"] = LayerFailed(str(exc), "bad_target", "platform")
            raise workload["error"] from None
        workload["body"] = body
        workload["submitted_at"] = time.time()
        try:
            ks.create(self.api, body)
        except Exception as exc:  # noqa: BLE001 - translated, kept for the item that owns it
            workload["error"] = kc.api_outcome(
                exc, f"create {body['kind']} {workload['name']} in namespace {self.namespace}"
            )
            raise workload["error"] from None
        return workload

    def _prefetch(self, ctx: LayerContext) -> None:
        if self.settings.parallel < 2 or ctx.matrix.sha256 in self.prefetched:
            return
        self.prefetched.add(ctx.matrix.sha256)
        m = ctx.matrix
        keys = [
            (r.name, i.name)
            for r in m.resources
            for i in m.images
            if r.type in i.for_types
            and not any(x.matches({"resource": r.name, "image": i.name}) for x in m.exclude)
        ]
        for r, i in keys:  # each item waits for its own creation only (place)
            self.pool.submit(self.submit, m, r, i)

    def schedule(self, ctx: LayerContext) -> None:
        """Submit (or find the prefetched) workload, wait until placed; record requested vs allocated.

        Raises LayerFailed with the decisive normalised reason's code and owner (all reasons in
        ``scheduling.pending``); ``scheduling_timeout`` (platform) when nothing explains the wait.
        """
        self.pods()
        self._prefetch(ctx)
        self.place(ctx, ctx.timeout_s)

    def place(self, ctx: LayerContext, timeout_s: float) -> dict[str, Any]:
        """Submit and wait for the current item's workload; return its scheduled pod (JSON dict)."""
        start = time.perf_counter()
        workload = self.submit(ctx.matrix, ctx.resource.name, ctx.image.name)
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
            namespace=self.namespace,
            manifest=workload["body"],
            submitted_at_epoch_s=workload["submitted_at"],
        )
        grace = float(self.target.get("unschedulable_grace_s", 0))
        first_refusal: list[float] = []

        def done(pods: list[dict[str, Any]]) -> Any:
            if ks.scheduled(pods):
                return ks.scheduled(pods)
            if ks.unschedulable(pods):
                first_refusal[:] = first_refusal or [time.monotonic()]
                return "unschedulable" if time.monotonic() - first_refusal[0] >= grace else None
            return None

        found = self.pods().wait(workload["probe"], done, timeout_s)
        if isinstance(found, dict):
            kp.record_placed(self, ctx, workload, found, time.perf_counter() - start)
            return found
        raise kp.unscheduled(self, ctx, workload, timeout_s if found is None else None)

    def start(self, ctx: LayerContext) -> None:
        """Wait until the workload container runs (or say why not), record image digest, logs, run the payload."""
        verify_inputs(ctx)
        key = (ctx.resource.name, ctx.image.name)
        workload = self.workloads.get(key)
        if workload is None or "pod" not in workload:
            ctx.record("startup.note", message="no placed workload from a scheduling item; submitted here")
            self.pods()
            self.place(ctx, ctx.timeout_s)
            workload = self.workloads[key]
        found = self.pods().wait(workload["probe"], kw.verdict, ctx.timeout_s)
        pods = self.pods().by_key(workload["probe"])
        pod = found[1] if found else (pods[-1] if pods else {"metadata": {"name": workload.get("pod", "")}})
        name = str(pod["metadata"]["name"])
        node = self.nodes.get((pod.get("spec") or {}).get("nodeName", ""), {})
        simulated = bool(node.get("simulated"))
        ident = kw.image_identity(pod)
        if ident["digest"]:
            self.digests[ctx.image.name] = ident["digest"]
        ctx.record(
            "startup.pod",
            pod=name,
            node=node.get("name"),
            phase=(pod.get("status") or {}).get("phase"),
            container_statuses=(pod.get("status") or {}).get("containerStatuses"),
            **ident,
            declared_digest=ctx.image.digest,
        )
        if simulated:
            ctx.record(
                "startup.simulation",
                node=node.get("name"),
                simulated=[
                    "container state (KWOK stage)",
                    "image pull (none)",
                    "exec (runs on the KWOK host, not in the image)",
                ],
                real=["apiserver admission", "scheduler placement", "pod status/events", "exec/log API path"],
            )
        if found is None or found[0] == "failed":
            self._startup_failed(ctx, pod, found is None)
        declared = ctx.image.digest
        if declared and (ident["digest"] or "").split(":")[-1] != declared.split(":")[-1]:
            raise LayerFailed(
                f"image {ctx.image.reference} runs as {ident['digest'] or 'an unreported digest'}, the "
                f"matrix declares sha256:{declared.split(':')[-1]}",
                "image_digest_mismatch",
                self.image_owner,
            )
        try:
            kw.device_init(ctx, self.core, self.namespace, name, node, self.image_owner)
        except LayerFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - translated
            raise kc.api_outcome(exc, f"exec the device payload in pod {name}") from None
        ctx.artifact("container.log", kw.read_logs(self.core, self.namespace, name))

    def _startup_failed(self, ctx: LayerContext, pod: dict[str, Any], timed_out: bool) -> None:
        name = pod["metadata"]["name"]
        events = ks.events_for(self.api, self.namespace, name)
        reasons = ks.explain_pending([pod], events, [], None)
        restarted = any(
            e.get("restartCount") for e in (pod.get("status") or {}).get("containerStatuses") or []
        )
        ctx.artifact("container.log", kw.read_logs(self.core, self.namespace, name, previous=restarted))
        ctx.record(
            "startup.failed",
            pod=name,
            timed_out=timed_out,
            reasons=[r.to_dict() for r in reasons],
            events=[{k: e.get(k) for k in ("type", "reason", "message", "count")} for e in events],
        )
        phase = (pod.get("status") or {}).get("phase")
        if not reasons and phase in ("Succeeded", "Failed"):
            raise LayerFailed(
                f"pod {name} ended ({phase}) instead of idling for the layers after it (a Job's pod "
                "completed? on KWOK the pod-complete stage ends Job pods at once)",
                "container_exited",
                "platform",
            )
        if not reasons:
            raise LayerFailed(
                f"pod {name} not running after {ctx.timeout_s:g} s (phase {phase})",
                "startup_timeout",
                "platform",
            )
        first = reasons[0]
        raise LayerFailed(f"pod {name} did not start: {summarise(reasons)}", first.code, first.owner)

    def execute(self, ctx: LayerContext) -> ExecResult:
        """Copy inputs into the workload pod (once), exec the entrypoint with the layer timeout, read outputs."""
        key = (ctx.resource.name, ctx.image.name)
        workload = self.workloads.get(key)
        if workload is None or "pod" not in workload:
            ctx.record(
                "model.note", message="no started workload from a startup item in this session; started here"
            )
            self.start(ctx)
            workload = self.workloads[key]
        pod, root = workload["pod"], f"/tmp/hetero-{self.owner}"
        if not workload.get("inputs"):
            kw.copy_inputs(self.core, self.namespace, pod, ctx.matrix, root, ctx.timeout_s)
            workload["inputs"] = root
        m, d = ctx.model, ctx.dataset
        paths = kw.input_paths(root, m.name, m.path, m.code or ctx.matrix.path.parent, d.name, d.path)
        run_dir = f"{root}/runs/{kc.dns_name(m.name, d.name)}-{uuid.uuid4().hex[:8]}"
        provider = EXECUTION_PROVIDERS[ctx.resource.type]
        values = {
            "python": str(self.target.get("python", "python3")),
            **paths,
            "outputs": f"{run_dir}/outputs.json",
            "provider": provider,
        }
        try:
            argv = render_entrypoint(m.entrypoint, values)
        except (KeyError, ValueError) as exc:
            raise LayerFailed(
                f"entrypoint has an unknown placeholder {exc}", "bad_entrypoint", "algorithm"
            ) from None
        done = kw.run_model(
            self.core,
            self.namespace,
            pod,
            argv,
            run_dir,
            f"{root}/code/{m.name}",
            {"HETERO_EXECUTION_PROVIDER": provider},
            ctx.timeout_s,
        )
        simulated = bool(self.nodes.get(self._node_of(workload), {}).get("simulated"))
        return ExecResult(
            argv=argv,
            exit_code=done.exit_code,
            duration_s=done.duration_s,
            stdout=done.stdout,
            stderr=done.stderr,
            timed_out=done.timed_out,
            outputs=None
            if done.timed_out
            else kw.read_outputs(self.core, self.namespace, pod, values["outputs"]),
            details={
                "pod": pod,
                "namespace": self.namespace,
                "run_dir": run_dir,
                "simulated": simulated,
                "ran_on": "the KWOK host (simulated node)" if simulated else f"pod {pod}",
            },
        )

    def _node_of(self, workload: dict[str, Any]) -> str:
        pods = self.watch.by_key(workload["probe"]) if self.watch else []
        return next(((p.get("spec") or {}).get("nodeName", "") for p in pods), "")

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
        from pytest_hetero.backends.kube_cleanup import delete_owned

        if self.settings.keep:
            for w in self.workloads.values():
                sys.stderr.write(
                    f"pytest-hetero: kept {w['kind']} {w['name']} in namespace {self.namespace}; "
                    f"remove with: hetero cleanup --backend kubernetes --run-id {self.settings.run_id}\n"
                )
            return
        for w in self.workloads.values():
            if w.get("inputs"):  # on a KWOK node the copy lives on the host, not in the pod
                try:
                    kube_exec.run(
                        self.core, self.namespace, w["pod"], "workload", ["rm", "-rf", w["inputs"]], 30
                    )
                except Exception:  # noqa: BLE001, S110 - the pod may be gone already
                    pass
        delete_owned(self._api, self.namespace, f"{kc.OWNER}={self.owner}", self.settings.parallel)
