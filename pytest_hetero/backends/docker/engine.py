"""Docker backend: validates one Docker host (GPU, NPU or CPU) by running the layers inside the real image.

Target keys (``spec.target``): ``docker_host`` (``unix://…``/``tcp://…``; else ``DOCKER_HOST``),
``tls`` (see :func:`~pytest_hetero.backends.docker.client.connection`), ``pull_policy``
(``never`` | ``if-not-present`` (default) | ``always``), ``image_owner`` (team owning image
problems, default ``platform``), ``network`` (default ``none``), ``python`` (``{python}`` inside
the image, default ``python3``), ``device_ids`` / ``cpuset`` (``{resource: …}`` pinning).

Discovery and scheduling live in :mod:`~pytest_hetero.backends.docker.place`; this module starts
one container per resource × image (startup) and runs every model × dataset in it with
``docker exec`` (model). Everything created is labelled with the run id and removed by
:meth:`DockerBackend.close` unless ``--hetero-keep``.
"""

from __future__ import annotations

import sys
import time
import uuid
from typing import Any

import docker
import docker.errors

from pytest_hetero.backends.docker import outage
from pytest_hetero.backends.docker import place
from pytest_hetero.backends.docker import client as run
from pytest_hetero.backends.protocol import EXECUTION_PROVIDERS, Backend, ExecResult, render_entrypoint
from pytest_hetero.backends.docker.errors import IMAGE_OWNER_DEFAULT, outcome, outcome_of_text, run_failure
from pytest_hetero.backends.docker.translate import EngineRequest
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerFailed
from pytest_hetero.layers.startup import verify_inputs
from pytest_hetero.settings import Settings

PULL_POLICIES = ("never", "if-not-present", "always")


class DockerBackend(Backend):
    """A Docker Engine reached through the ``docker`` SDK; see the module docstring for target keys."""

    name = "docker"

    def __init__(self, target: dict[str, Any], settings: Settings) -> None:
        super().__init__(target, settings)
        try:
            self.conn = run.connection(target)
            self.conn_error = ""
        except docker.errors.DockerException as exc:
            self.conn, self.conn_error = {"base_url": target.get("docker_host")}, str(exc)
        self.local = run.engine_is_local(self.conn)
        self.owner = uuid.uuid4().hex[:12]
        self.image_owner = str(target.get("image_owner", IMAGE_OWNER_DEFAULT))
        self.pull_policy = str(target.get("pull_policy", "if-not-present"))
        self._api: docker.APIClient | None = None
        self._long: docker.APIClient | None = None
        self.engine: dict[str, Any] = {}
        self.workloads: dict[tuple[str, str], dict[str, Any]] = {}
        self.digests: dict[str, str] = {}
        self.probe_image: str | None = None
        self.interruptions: list[outage.Interruption] = []

    @property
    def api(self) -> docker.APIClient:
        """Low-level client (calls bounded by :data:`~pytest_hetero.backends.docker.client.API_TIMEOUT_S`).

        Raises LayerBroken (``engine_unreachable``) when the engine does not answer, LayerFailed
        (``bad_target``, platform) when the target's TLS files are unusable.
        """
        if self.conn_error:
            raise LayerFailed(f"target.tls: {self.conn_error}", "bad_target", "platform")
        if self._api is None:
            try:
                api = run.make_client(self.conn, run.API_TIMEOUT_S)
                api.ping()
            except (docker.errors.DockerException, *run.CONNECTION_LOST) as exc:
                gone = next((o for o in reversed(self.interruptions) if o.back_at is None), None)
                since = f" (gone since {gone.lost_at}, during {gone.what})" if gone else ""
                raise LayerBroken(f"Docker engine at {self.conn.get('base_url', 'DOCKER_HOST')} does not "
                                  f"answer{since}: {exc}", "engine_unreachable", "infrastructure") from None
            self._api = api
            self._long = run.make_client(self.conn, None)
            self.engine = {"version": api.version(), "info": api.info()}
        return self._api

    def drop_clients(self) -> None:
        """Forget the engine clients (after an outage); the next :attr:`api` use reconnects."""
        for client in (self._api, self._long):
            if client is not None:
                client.close()
        self._api = self._long = None

    def fingerprint(self) -> dict[str, Any]:
        """Engine identity (``info.ID``/name), host, versions (engine, API, kernel, OS) and image digests."""
        version, info = self.engine.get("version", {}), self.engine.get("info", {})
        return {"backend": self.name, "identity": info.get("ID") or self.conn.get("base_url", "DOCKER_HOST"),
                "nodes": [info["Name"]] if info.get("Name") else [],
                "versions": {"engine": version.get("Version"), "api": version.get("ApiVersion"),
                             "kernel": version.get("KernelVersion"), "os": info.get("OperatingSystem")},
                "images": dict(self.digests)}

    @outage.engine_guarded
    def discover(self, ctx: LayerContext) -> None:
        """Engine version and runtimes, host device nodes, host probe; can the engine satisfy the request?"""
        self.api  # noqa: B018 - connects and reads version/info
        place.discover(ctx, self.engine, self.local)

    @outage.engine_guarded
    def schedule(self, ctx: LayerContext) -> None:
        """Translate the request and have the engine accept it on a placement probe; record requested vs allocated."""
        place.schedule(ctx, self)

    def translate(self, ctx: LayerContext) -> EngineRequest:
        """The resource's request in engine terms; LayerFailed (``bad_request``, platform) when malformed."""
        return place.translate_or_fail(ctx, self.target, self.local)

    @outage.engine_guarded
    def start(self, ctx: LayerContext) -> None:
        """Resolve the image, verify inputs, start the resource × image container, run the device payload."""
        image_id = self.resolve_image(ctx)
        verify_inputs(ctx)
        workload = self.launch(ctx, image_id)
        from pytest_hetero.backends.docker.payload import device_init

        device_init(ctx, self.api, workload, self.image_owner)
        logs = self.api.logs(workload["id"], stdout=True, stderr=True).decode("utf-8", "replace")
        ctx.artifact("container.log", logs)

    def resolve_image(self, ctx: LayerContext) -> str:
        """Find or pull ``ctx.image.reference`` per ``pull_policy``; record and check its digest; return its id."""
        ref, policy = ctx.image.reference, self.pull_policy
        if policy not in PULL_POLICIES:
            raise LayerFailed(f"target.pull_policy {policy!r} is not one of {', '.join(PULL_POLICIES)}",
                              "bad_target", "platform")
        found = self._inspect_image(ref)
        pulled = False
        if policy == "always" or (found is None and policy == "if-not-present"):
            try:
                errors = [str(p["error"]) for p in self.api.pull(ref, stream=True, decode=True) if p.get("error")]
            except docker.errors.APIError as exc:
                raise outcome(exc, f"pulling image {ref}", phase_owner=self.image_owner,
                              image_owner=self.image_owner) from None
            if errors:
                raise outcome_of_text(errors[-1], f"pulling image {ref}", phase_owner=self.image_owner,
                                      image_owner=self.image_owner)
            found, pulled = self._inspect_image(ref), True
        if found is None:
            why = "pull_policy never" if policy == "never" else "the pull reported success"
            raise LayerFailed(f"image {ref} is not in the engine ({why}); no such image",
                              "image_not_found", self.image_owner)
        digests = [d.split("@", 1)[1] for d in found.get("RepoDigests") or []]
        digest = digests[0] if digests else found["Id"]
        self.digests[ctx.image.name] = digest
        ctx.record("startup.image", image=ctx.image.name, reference=ref, pull_policy=policy, pulled=pulled,
                   id=found["Id"], digest=digest, repo_digests=digests, declared_digest=ctx.image.digest,
                   created=found.get("Created"), size_bytes=found.get("Size"))
        declared = ctx.image.digest
        if declared and declared.split(":")[-1] not in {d.split(":")[-1] for d in [found["Id"], *digests]}:
            raise LayerFailed(f"image {ref} has digest {digest}, the matrix declares sha256:{declared.split(':')[-1]}",
                              "image_digest_mismatch", self.image_owner)
        return str(found["Id"])

    def _inspect_image(self, ref: str) -> dict[str, Any] | None:
        try:
            return dict(self.api.inspect_image(ref))
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError as exc:
            raise outcome(exc, f"inspecting image {ref}", phase_owner=self.image_owner,
                          image_owner=self.image_owner) from None

    def launch(self, ctx: LayerContext, image_id: str) -> dict[str, Any]:
        """Create and start the resource × image container; record it; return its workload dict.

        A previous container for the same key (a repeated startup) is removed first. Raises
        LayerFailed classified by :mod:`docker_errors` (start refused, exited, OOM-killed).
        """
        key = (ctx.resource.name, ctx.image.name)
        if key in self.workloads:
            self._remove(self.workloads.pop(key)["id"])
        request = self.translate(ctx)
        m = ctx.matrix
        models = [(x.name, x.path, x.code or m.path.parent) for x in m.models]
        mounts = run.input_mounts(models, [(d.name, d.path) for d in m.datasets]) + request.mounts
        name = run.safe_name("hetero", self.settings.run_id, *key)
        labels = run.labels(self.settings.run_id, self.owner, "workload", matrix=m.name, resource=key[0],
                            image=key[1])
        host_config = self.api.create_host_config(
            **request.host_config(), network_mode=str(self.target.get("network", "none")),
            mounts=[docker.types.Mount(x["target"], x["source"], type="bind", read_only=x["read_only"])
                    for x in mounts])
        try:
            try:
                cid = self.api.create_container(image_id, command=run.KEEP_ALIVE, name=name, labels=labels,
                                                environment=request.environment, host_config=host_config)["Id"]
            except docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: the name is taken (another pytest-xdist worker of this run)
                    raise
                name = f"{name}-{self.owner[:6]}"
                cid = self.api.create_container(image_id, command=run.KEEP_ALIVE, name=name, labels=labels,
                                                environment=request.environment, host_config=host_config)["Id"]
        except docker.errors.APIError as exc:
            raise outcome(exc, f"creating container {name}", phase_owner=self.image_owner,
                          image_owner=self.image_owner) from None
        # a fresh container's cgroup has counted no OOM kill yet; read again only after an exit 137
        workload = {"id": cid, "name": name, "labels": labels, "oom_kills": 0,
                    "limit_bytes": request.mem_limit, "started_monotonic": time.monotonic()}
        self.workloads[key] = workload
        try:
            self.api.start(cid)
        except docker.errors.APIError as exc:
            raise outcome(exc, f"starting container {name} from {ctx.image.reference}",
                          phase_owner=self.image_owner, image_owner=self.image_owner) from None
        state = self.api.inspect_container(cid)
        ctx.record("startup.container", id=cid, name=name, labels=labels, command=run.KEEP_ALIVE,
                   mounts=mounts, environment=request.environment, state=state["State"],
                   allocated=place.allocated(state["HostConfig"]))
        self.ensure_running(ctx, workload, "after start")
        return workload

    def ensure_running(self, ctx: LayerContext, workload: dict[str, Any], when: str) -> None:
        """LayerFailed when the container is no longer running: ``oom_killed`` (exit 137 with
        OOMKilled), ``container_exited`` (non-zero exit; logs kept as artifact)."""
        try:
            state = self.api.inspect_container(workload["id"])["State"]
        except docker.errors.NotFound:
            raise LayerFailed(f"container {workload['name']} disappeared {when}", "container_removed",
                              "infrastructure") from None
        if state.get("Running"):
            return
        outage.raise_if_stopped_by_outage(self, workload, state, when)
        logs = self.api.logs(workload["id"], stdout=True, stderr=True).decode("utf-8", "replace")
        ctx.artifact("container.log", logs)
        code = state.get("ExitCode")
        if state.get("OOMKilled"):
            raise LayerFailed(f"container {workload['name']} was OOM-killed {when} (exit {code}, OOMKilled "
                              f"true, memory limit {workload.get('limit_bytes')} bytes)", "oom_killed", "platform")
        raise LayerFailed(f"container {workload['name']} exited {when} with {code} ({state.get('Status')}"
                          f"{', ' + state['Error'] if state.get('Error') else ''}): "
                          f"{(logs.strip().splitlines() or ['(no output)'])[-1][:200]}", "container_exited",
                          "infrastructure" if code in (137, 143) else "platform")

    @outage.engine_guarded
    def execute(self, ctx: LayerContext) -> ExecResult:
        """Run the entrypoint inside the resource × image container (``docker exec``) with the layer timeout.

        Raises LayerFailed: ``entrypoint_missing`` / ``oom_killed`` (algorithm),
        ``container_killed`` (infrastructure, the container died during the run).
        """
        key = (ctx.resource.name, ctx.image.name)
        workload = self.workloads.get(key)
        if workload is None:
            ctx.record("model.container", note="no container from a startup item in this session; started here")
            workload = self.launch(ctx, self.resolve_image(ctx))
        self.ensure_running(ctx, workload, "before the model run")
        model, dataset = ctx.model, ctx.dataset
        paths = run.container_paths(model.name, model.path, model.code or ctx.matrix.path.parent,
                                    dataset.name, dataset.path)
        run_dir = f"/tmp/hetero-run/{run.safe_name(model.name, dataset.name)}-{uuid.uuid4().hex[:8]}"
        provider = EXECUTION_PROVIDERS[ctx.resource.type]
        values = {"python": str(self.target.get("python", "python3")), **paths,
                  "outputs": f"{run_dir}/outputs.json", "provider": provider}
        try:
            argv = render_entrypoint(model.entrypoint, values)
        except (KeyError, ValueError) as exc:
            raise LayerFailed(f"entrypoint has an unknown placeholder {exc}", "bad_entrypoint", "algorithm") from None
        try:
            result = run.run_exec(self.api, self._long or self.api, workload["id"], argv, run_dir,
                                  {"HETERO_EXECUTION_PROVIDER": provider}, f"/hetero/code/{model.name}",
                                  ctx.timeout_s)
        except docker.errors.APIError as exc:
            self.ensure_running(ctx, workload, "before the model run")
            raise outcome(exc, f"exec in {workload['name']}", phase_owner="algorithm") from None
        result.details.update(container=workload["name"], container_id=workload["id"], run_dir=run_dir)
        result.failure = run_failure(self.api, ctx, workload, result)
        if result.failure is None or result.failure["category"] != "container_killed":
            try:
                result.outputs = run.read_file(self.api, workload["id"], values["outputs"], run.MAX_OUTPUTS_BYTES)
            except run.OutputsTooLarge as exc:
                result.failure = {"category": "outputs_too_large", "owner": "algorithm",
                                  "message": f"entrypoint wrote a {exc.size}-byte outputs file "
                                             f"({values['outputs']}), more than the {run.MAX_OUTPUTS_BYTES} "
                                             f"bytes read back"}
        return result

    def _remove(self, cid: str) -> None:
        try:
            self.api.remove_container(cid, force=True, v=True)
        except docker.errors.NotFound:
            pass

    def close(self) -> None:
        """Remove every container and image this backend created (found by its owner label), or,
        with ``--hetero-keep``, print how to reach them. Never raises."""
        if self._api is None and not self.interruptions:
            return
        try:
            api = self.api  # reconnects after an engine outage
            for image in api.images(all=True, filters={"label": f"{run.OWNER}={self.owner}"}):
                api.remove_image(image["Id"], force=True)
            found = api.containers(all=True, filters={"label": f"{run.OWNER}={self.owner}"})
            if self.settings.keep:
                prefix = "" if self.local else f"DOCKER_HOST={self.conn.get('base_url')} "
                for c in found:
                    sys.stderr.write(f"pytest-hetero: kept container {c['Names'][0].lstrip('/')} "
                                     f"({c['Labels'].get(run.LABEL + 'resource')} × "
                                     f"{c['Labels'].get(run.LABEL + 'image')}): {prefix}docker exec -it "
                                     f"{c['Names'][0].lstrip('/')} /bin/sh; remove with: hetero cleanup "
                                     f"--run-id {self.settings.run_id}\n")
                return
            for c in found:
                self._remove(c["Id"])
        except (docker.errors.DockerException, LayerBroken, *run.CONNECTION_LOST) as exc:
            sys.stderr.write(f"pytest-hetero: docker cleanup of run {self.settings.run_id} incomplete: {exc}; "
                             f"run: hetero cleanup --run-id {self.settings.run_id}\n")
        finally:
            self.drop_clients()

