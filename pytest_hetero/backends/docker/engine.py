"""Docker backend: validates one Docker host (GPU, NPU or CPU) by running the layers inside the real image.

Target keys (``spec.target``): ``docker_host`` (``unix://…``/``tcp://…``; else ``DOCKER_HOST``),
``tls`` (see :func:`~pytest_hetero.backends.docker.client.connection`), ``pull_policy``
(``never`` | ``if-not-present`` (default) | ``always``), ``image_owner`` (read by the judge,
never by the engine), ``network`` (default ``none``), ``python`` (``{python}`` inside
the image, default ``python3``), ``device_ids`` / ``cpuset`` (``{resource: …}`` pinning).

Inventory and placement live in :mod:`~pytest_hetero.backends.docker.place`; this module starts
one container per resource × image and runs commands (the device payload, every model × dataset)
in it with ``docker exec``. The container's root file system is read-only (writable: the tmpfs
:data:`~.client.WORK_TMPFS`, ``/dev/shm``, ``/dev``) and after every run :func:`~.client.reset` kills every
process but PID 1 and empties the writable folders, so no run can leave state (a ``.pth`` file, a
process) that changes the next model's result; each model run records this as ``isolation``.
Verdicts are the layers'. Everything created is labelled with the run id and removed by
:meth:`DockerBackend.close` unless ``--hetero-keep``.
"""

from __future__ import annotations

import functools
import sys
import time
import uuid
from contextlib import suppress
from typing import Any, TypedDict

import docker
import docker.errors

from pytest_hetero.backends.docker import client as run
from pytest_hetero.backends.docker import devices as docker_devices
from pytest_hetero.backends.docker import jobs as docker_jobs
from pytest_hetero.backends.docker import outage, place
from pytest_hetero.backends.docker import spread as docker_spread
from pytest_hetero.backends.docker import usage as docker_usage
from pytest_hetero.backends.docker.api import (
    ContainerState,
    ImageInspect,
    Listed,
    container_state,
    exec_inspect,
    inspect_container,
    inspect_image,
    pull_errors,
)
from pytest_hetero.backends.docker.client import BindMount
from pytest_hetero.backends.docker.errors import SETTLE_S, outcome, outcome_of_text, run_failure, stopped_after_run
from pytest_hetero.backends.docker.session import DockerSession, DockerWorkload
from pytest_hetero.backends.docker.translate import EngineRequest
from pytest_hetero.backends.jobs import Job, JobSpec, RankExit
from pytest_hetero.backends.labels import LABEL, OWNER
from pytest_hetero.backends.protocol import (
    EXECUTION_PROVIDERS,
    ActionFailed,
    Backend,
    EngineFault,
    EngineUnavailable,
    ExecResult,
    ImageIdentity,
    Inventory,
    Placement,
    Started,
    Step,
    UsageFacts,
    render_entrypoint,
)
from pytest_hetero.backends.slots import HostLease, spread_facts
from pytest_hetero.backends.spread import Concurrency, Deferred, Plan, wanted
from pytest_hetero.matrix.model import Matrix, Model
from pytest_hetero.probes.usage import RUN_TIME_UNITS, measured, unavailable
from pytest_hetero.settings import Settings
from pytest_hetero.truth.view import model_input, model_inputs
from pytest_hetero.truth.withhold import CodeView, WithholdError, model_code, record_of

NOT_SAMPLED = "stats sampling turned off (docker usage STATS_INTERVAL_S is None)"

PULL_POLICIES = ("never", "if-not-present", "always")



def code_of(matrix: Matrix, model: Model) -> CodeView:
    """The model's code folder as the container gets it: without the truth files of the matrix's datasets and their
    copies (:func:`~pytest_hetero.truth.withhold.model_code`). Raises ActionFailed ``inputs_copy_failed``."""
    try:
        return model_code(matrix, model)
    except WithholdError as exc:
        raise ActionFailed(exc.message, "inputs_copy_failed") from None

class StartedHere(TypedDict):
    """A model run's ``details["image"]`` when its container had to be started for it (no startup item did): the
    image as :meth:`DockerBackend.identify` resolved it."""

    digest: str | None
    known: list[str]
    what: str


USER_CHECK_SETTLE_S = 2.0
"""Seconds a failed start-as-the-image's-user check waits for the container's own stop to show (OOM at start)."""

class DockerBackend(Backend):
    """A Docker Engine reached through the ``docker`` SDK; see the module docstring for target keys."""

    name = "docker"

    def __init__(self, target: dict[str, Any], settings: Settings) -> None:
        super().__init__(target, settings)
        self.session = DockerSession.open(target, settings)

    def fingerprint(self) -> dict[str, Any]:
        """Engine identity (``info.ID``/name), host, versions (engine, API, kernel, OS) and image digests."""
        s = self.session
        engine = s.engine
        return {"backend": self.name, "identity": engine.id or s.engine_url,
                "nodes": [engine.name] if engine.name else [],
                "versions": {"engine": engine.version, "api": engine.api_version, "kernel": engine.kernel,
                             "os": engine.os},
                "images": dict(s.digests)}

    @outage.engine_guarded
    def inventory(self, step: Step) -> Inventory:
        """Engine version and runtimes, capacity, host device nodes and host probe (engine on this host)."""
        return place.inventory(step, self.session)

    @outage.engine_guarded
    def place(self, step: Step) -> Placement:
        """Have the engine accept the translated request on a placement probe (see :func:`.place.place`)."""
        return place.place(step, self.session)

    @outage.engine_guarded
    def identify(self, step: Step) -> ImageIdentity:
        """Find or pull ``step.image.reference`` per ``pull_policy``; record ``startup.image``.

        Raises ActionFailed ``bad_target`` (an unknown pull policy), ``image_not_found`` and the pull
        refusals of :mod:`.errors` (the target's image owner).
        """
        s = self.session
        ref, policy = step.image.reference, s.pull_policy
        if policy not in PULL_POLICIES:
            raise ActionFailed(f"target.pull_policy {policy!r} is not one of {', '.join(PULL_POLICIES)}",
                               "bad_target")
        found = self._inspect_image(ref)
        pulled = False
        if policy == "always" or (found is None and policy == "if-not-present"):
            try:
                errors = pull_errors(s.api, ref)
            except docker.errors.APIError as exc:
                raise outcome(exc, f"pulling image {ref}", phase="start") from None
            if errors:
                raise outcome_of_text(errors[-1], f"pulling image {ref}", phase="start")
            found, pulled = self._inspect_image(ref), True
        if found is None:
            why = "pull_policy never" if policy == "never" else "the pull reported success"
            raise ActionFailed(f"image {ref} is not in the engine ({why}); no such image",
                               "image_not_found")
        digests = [d.split("@", 1)[1] for d in found.repo_digests]
        digest = digests[0] if digests else found.id
        s.digests[step.image.name] = digest
        s.image_ids[step.image.name] = found.id
        step.record("startup.image", image=step.image.name, reference=ref, pull_policy=policy, pulled=pulled,
                    id=found.id, digest=digest, repo_digests=digests, declared_digest=step.image.digest,
                    created=found.created, size_bytes=found.size)
        return ImageIdentity(digest=digest, known=(found.id, *digests), what=f"image {ref}", handle=found.id)

    def _inspect_image(self, ref: str) -> ImageInspect | None:
        s = self.session
        try:
            return inspect_image(s.api, ref)
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError as exc:
            raise outcome(exc, f"inspecting image {ref}", phase="start") from None

    @outage.engine_guarded
    def start(self, step: Step) -> Started:
        """Start the resource × image container (the image as :meth:`identify` resolved it)."""
        image_id = self._image_id(step)
        key = (step.resource.name, step.image.name)
        try:
            workload = self.launch(step, str(image_id))
        except EngineFault as fault:  # a container that was created and did not run held its place meanwhile
            if not fault.usage and key in self.session.workloads:
                fault.usage = self._usage(self.session.workloads[key], "failed")
            raise
        return Started(name=workload["name"], handle=workload,
                       usage=self._usage(workload))

    def _image_id(self, step: Step) -> object:
        """The id of ``step``'s image as this session resolved it, or as :meth:`identify` resolves it now."""
        return self.session.image_ids.get(step.image.name) or self.identify(step).handle

    def _usage(self, workload: DockerWorkload, outcome: str | None = None) -> UsageFacts:
        """The container's usage facts (:func:`.usage.container_facts`), kept on ``workload`` for its
        model runs; what was last known when the engine cannot be asked."""
        try:
            workload["usage"] = docker_usage.container_facts(inspect_container(self.session.api, workload["id"]),
                                                             outcome)
        except docker.errors.APIError:
            pass
        known: UsageFacts = workload["usage"] or UsageFacts()
        return known.copy()

    @outage.engine_guarded
    def run(self, started: Started, argv: list[str], timeout_s: float, env: dict[str, str] | None = None
            ) -> ExecResult:
        """``docker exec`` of ``argv`` in the started container (stdout/stderr demultiplexed).
        Raises ActionFailed when the container stopped before or while ``argv`` ran (``startup_oom_killed``,
        ``container_exited``, …: :meth:`ensure_running`), else EngineUnavailable (``engine_error``) when the
        engine refuses the exec.
        The container counts as used: the next model run resets it first."""
        s = self.session
        workload: DockerWorkload = started.handle
        workload["dirty"] = True
        begin = time.perf_counter()
        try:
            ex = s.api.exec_create(workload["id"], argv, environment=env or {},
                                   user=workload["user"] or run.model_user(None))
            out, err = s.api.exec_start(ex["Id"], demux=True)
            code = exec_inspect(s.api, ex["Id"]).exit_code
        except docker.errors.APIError as exc:
            # the container stopped under the startup checks (e.g. OOM-killed just after it started): that
            # fact, not the engine's refusal to exec into a stopped container; model code never runs here
            try:
                stopped = self._stopped(workload, "before the startup checks could run in it", "startup")
            except docker.errors.APIError:  # the engine itself does not answer: its refusal below says so
                stopped = None
            if stopped is not None:
                raise stopped from None
            raise EngineUnavailable(f"cannot exec {argv[0]} in {workload['name']}: {exc}", "engine_error") from None
        if code != 0:  # a check that failed in a container that stopped meanwhile: the stop is the fact
            try:
                stopped = self._stopped(workload, f"while {argv[0]} ran in it (exit {code})", "startup")
            except docker.errors.APIError:
                stopped = None
            if stopped is not None:
                raise stopped
        return ExecResult(argv=argv, exit_code=code, duration_s=time.perf_counter() - begin,
                          stdout=(out or b"").decode("utf-8", "replace"),
                          stderr=(err or b"").decode("utf-8", "replace"), outputs=None)

    def _reset(self, workload: DockerWorkload) -> str:
        """Return the container to its started state (:func:`.client.reset`); "" when clean, else why not.

        A failure leaves ``workload["dirty"]`` set, so the next model run resets before it starts.
        """
        try:
            why = run.reset(self.session.api, workload["id"], workload["dev"] or [],
                            workload["user"] or run.GATE_USER)
        except docker.errors.APIError as exc:
            why = f"the engine refused the reset exec: {exc}"
        workload["dirty"] = bool(why)
        return why

    def logs(self, started: Started) -> str:
        """The container's output so far (stdout and stderr)."""
        cid = started.handle["id"]
        return str(self.session.api.logs(cid, stdout=True, stderr=True).decode("utf-8", "replace"))

    def launch(self, ctx: Step, image_id: str, alone: docker_spread.Slot | None = None) -> DockerWorkload:
        """Create and start the resource × image container; record it; return its workload dict.

        A previous container for the same key (a repeated startup) is removed first. ``alone``: the container of
        one model run instead (:mod:`.spread`), pinned to that device slot, named and labelled per run, not kept
        as the resource × image container, with that run's model, code and dataset mounted and no other's.
        Raises ActionFailed classified by :mod:`.errors` (start refused, exited, OOM-killed).
        """
        s = self.session
        key = (ctx.resource.name, ctx.image.name)
        if key in s.workloads and alone is None:
            self._remove(s.workloads.pop(key)["id"])
        target = s.conf if alone is None else docker_spread.pinned(alone, s.conf, ctx.resource.name)
        request = place.translate_or_fail(ctx, target, s.local)
        m = ctx.matrix
        # without the truth files they may hold; a run's own container sees its own model, code and dataset only
        # (the other runs' inputs are not its to read: isolation between model runs)
        chosen = m.models if alone is None else [ctx.model]
        models = [(x.name, x.path, code_of(m, x).path) for x in chosen]
        mounts = run.input_mounts(models, model_inputs(m.datasets if alone is None else [ctx.dataset])) \
            + request.mounts
        name, labels = self._marks(ctx, alone is not None)
        try:
            image_user = inspect_image(s.api, image_id).user
        except docker.errors.APIError as exc:
            raise outcome(exc, f"inspecting image {image_id}", phase="start") from None
        user = run.model_user(image_user)
        keeper = run.keeper_user(user)
        host_config = run.confined_host_config(
            s.api, request.host_config(), s.conf.network,
            [docker.types.Mount(x["target"], x["source"], type="bind", read_only=x["read_only"]) for x in mounts])
        try:
            try:
                cid = s.api.create_container(image_id, command=run.KEEP_ALIVE, name=name, labels=labels,
                                             environment=request.environment, host_config=host_config,
                                             user=keeper)["Id"]
            except docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: the name is taken (another pytest-xdist worker of this run)
                    raise
                name = f"{name}-{s.owner[:6]}"
                cid = s.api.create_container(image_id, command=run.KEEP_ALIVE, name=name, labels=labels,
                                             environment=request.environment, host_config=host_config,
                                             user=keeper)["Id"]
        except docker.errors.APIError as exc:
            raise outcome(exc, f"creating container {name}", phase="start") from None
        # a fresh container's cgroup has counted no OOM kill yet; read again only after an exit 137
        workload: DockerWorkload = {"id": cid, "name": name, "labels": labels, "oom_kills": 0, "dirty": False,
                                    "user": user, "limit_bytes": request.mem_limit,
                                    "started_monotonic": time.monotonic(), "stopped_by_run": None, "usage": None,
                                    "dev": None, "created_at": None}
        self._keep(key, workload, alone is not None)
        if alone is None:
            return self._started(ctx, workload, image_id, mounts, request, keeper, alone)
        try:  # a model run's own container: nothing keeps it once its start failed (its run reports why)
            return self._started(ctx, workload, image_id, mounts, request, keeper, alone)
        except BaseException:
            with suppress(docker.errors.DockerException):
                self._remove(cid)
            raise

    def _started(self, ctx: Step, workload: DockerWorkload, image_id: str, mounts: list[BindMount],
                 request: EngineRequest, keeper: str, alone: docker_spread.Slot | None) -> DockerWorkload:
        """Start the created container of :meth:`launch`, record it, check it runs and that a process starts as the
        run's user; return ``workload``. Raises ActionFailed classified by :mod:`.errors`."""
        s = self.session
        cid, name, labels, user = workload["id"], workload["name"], workload["labels"], workload["user"]
        try:
            s.api.start(cid)
        except docker.errors.APIError as exc:
            raise outcome(exc, f"starting container {name} from {ctx.image.reference}",
                          phase="start") from None
        state = inspect_container(s.api, cid)
        ctx.record("startup.container", id=cid, name=name, labels=labels, command=run.KEEP_ALIVE,
                   pid_1_user=keeper, run_user=user, cap_drop=list(run.CAP_DROP),
                   security_opt=list(run.SECURITY_OPT), pids_limit=run.PIDS_LIMIT, root_filesystem="read-only",
                   tmpfs=dict(run.WORK_TMPFS),
                   mounts=mounts, environment=request.environment, state=state.state.document,
                   allocated=state.host_config.allocated)
        self.ensure_running(ctx, workload, "after start")
        if alone is not None and (image_id, user) in s.user_started:
            return workload  # a process started as this user in a container of this image already: the same answer
        try:
            said = run.user_check(s.api, cid, user)
        except docker.errors.APIError as exc:
            raise outcome(exc, f"starting a process as {user} in container {name}", phase="start") from None
        if said:  # what starting the container itself said before PID 1 ran as another user
            # unless the container itself stopped meanwhile (an image whose shell is OOM-killed at once: its
            # PID 1 dies a moment after the check's exec did): that stop is the fact, as ensure_running says
            settle = time.monotonic() + USER_CHECK_SETTLE_S
            while (stopped := self._stopped(workload, "after start", "startup", ctx)) is None \
                    and time.monotonic() < settle:
                time.sleep(0.2)
            if stopped is not None:
                raise stopped
            raise ActionFailed(f"container {name} from {ctx.image.reference}: no process can start as the image's "
                               f"user {user!r}: {said}", "oci_runtime_error")
        s.user_started.add((image_id, user))
        return workload

    def _keep(self, key: tuple[str, str], workload: DockerWorkload, alone: bool) -> None:
        """Keep a created container as the resource × image's; a model run's own container (``alone``) is kept
        by its run, and removed at once when the gate is stopping (its close may have listed the run's containers
        before this one was created). Raises ActionFailed ``harness`` then."""
        s = self.session
        if not alone:
            s.workloads[key] = workload
            return
        workload["created_at"] = time.time()
        if s.spread.stop.is_set():
            self._remove(workload["id"])
            raise ActionFailed(f"the gate stopped while container {workload['name']} was created", "harness")

    def _marks(self, ctx: Step, alone: bool) -> tuple[str, dict[str, str]]:
        """Name and labels of the resource × image container, or (``alone``) of one model run's own container."""
        s, m = self.session, ctx.matrix
        key = (ctx.resource.name, ctx.image.name)
        if alone:
            return (run.safe_name("hetero", s.settings.run_id, *key, "run", uuid.uuid4().hex[:8]),
                    run.labels(s.settings.run_id, s.owner, "model-run", matrix=m.name, resource=key[0], image=key[1],
                               model=ctx.model.name, dataset=ctx.dataset.name))
        return (run.safe_name("hetero", s.settings.run_id, *key),
                run.labels(s.settings.run_id, s.owner, "workload", matrix=m.name, resource=key[0], image=key[1]))

    def ensure_running(self, ctx: Step, workload: DockerWorkload, when: str) -> None:
        """ActionFailed when the container is no longer running: ``oom_killed`` (exit 137 with
        OOMKilled; ``startup_oom_killed`` in startup), ``container_exited`` (non-zero exit; logs kept as
        artifact)."""
        fault = self._stopped(workload, when, ctx.layer, ctx)
        if fault is not None:
            raise fault

    def _stopped(self, workload: DockerWorkload, when: str, layer: str, ctx: Step | None = None
                 ) -> ActionFailed | None:
        """The fault of a container that is no longer running (see :meth:`ensure_running`), None while it
        runs; its logs become the ``container.log`` artifact of ``ctx`` when given."""
        s = self.session
        try:
            state = container_state(s.api, workload["id"])
        except docker.errors.NotFound:
            return ActionFailed(f"container {workload['name']} disappeared {when}", "container_removed")
        if state.running:
            return None
        outage.raise_if_stopped_by_outage(s, workload, state, when)
        logs = s.api.logs(workload["id"], stdout=True, stderr=True).decode("utf-8", "replace")
        if ctx is not None:
            ctx.artifact("container.log", logs)
        code = state.exit_code
        if state.oom_killed:
            return ActionFailed(f"container {workload['name']} was OOM-killed {when} (exit {code}, OOMKilled "
                                f"true, memory limit {workload['limit_bytes']} bytes)",
                                "startup_oom_killed" if layer == "startup" else "oom_killed")
        return ActionFailed(f"container {workload['name']} exited {when} with {code} ({state.status}"
                            f"{', ' + state.error if state.error else ''}): "
                            f"{(logs.strip().splitlines() or ['(no output)'])[-1][:200]}",
                            "container_killed" if code in (137, 143) else "container_exited")

    @outage.engine_guarded
    def execute(self, ctx: Step) -> ExecResult:
        """Run the entrypoint inside the resource × image container (``docker exec``) with the layer timeout;
        with ``model_runs: per-run``, in a container of its own pinned to a device slot, the runs of the model
        items after it launched ahead (:meth:`_run_alone`, :mod:`.spread`).

        The container is reset (:func:`.client.reset`) before the run when an earlier run left it used, and
        after it (once the outputs are copied out); ``details["isolation"]`` records both
        (:data:`.client.RESET_FACTS` plus ``reset_before``/``reset_after``). The container is sampled through
        the engine's stats API meanwhile (every :data:`.usage.STATS_INTERVAL_S`): ``details["usage"]`` the
        working-set and CPU series, ``details["run_time"]`` the run's peak working set and CPU-seconds
        (:class:`.usage.StatsSampling`).

        Once the reset after the run has ended (nothing of the run is left to act), a container found stopped
        with exit 0 is this run's doing: ``container_stopped_by_run`` (:func:`.errors.stopped_after_run`), even
        when a child it left stopped PID 1 after the exec had returned.

        Raises ActionFailed: ``entrypoint_missing`` / ``oom_killed`` (algorithm),
        ``container_killed`` (infrastructure, the container died during the run), ``container_not_reset``
        (platform: what an earlier run left in the container could not be removed).
        """
        if wanted(ctx):
            return self.session.spread.execute(ctx, functools.partial(self._plan, ctx))
        s = self.session
        key = (ctx.resource.name, ctx.image.name)
        workload = s.workloads.get(key)
        started_here: StartedHere | None = None
        note = "no container from a startup item in this session; started here"
        if workload is not None and not workload["stopped_by_run"] and workload["dev"] is not None:
            self._note_stopped_by_run(workload)
        if workload is not None and workload["stopped_by_run"]:  # that run's failure, not this one's
            note = f"the container was stopped by an earlier run ({workload['stopped_by_run']}); started again here"
            self._remove(workload["id"])
            s.workloads.pop(key, None)
            workload = None
        if workload is None:
            ctx.record("model.container", note=note)
            identity = self.identify(ctx)
            workload = self.launch(ctx, str(identity.handle))
            started_here = {"digest": identity.digest, "known": list(identity.known), "what": identity.what}
        self.ensure_running(ctx, workload, "before the model run")
        if workload["dev"] is None:  # before any model ran in it: what the reset keeps of /dev
            workload["dev"] = run.dev_baseline(s.api, workload["id"], workload["user"] or run.GATE_USER)
        reset_before = workload["dirty"]
        if reset_before and (why := self._reset(workload)):
            raise ActionFailed(f"container {workload['name']} could not be returned to its started state before "
                               f"the model run: {why}", "container_not_reset")
        return self._run_in(ctx, workload, started_here, reset_before)[0]

    def _run_in(self, ctx: Step, workload: DockerWorkload, started_here: StartedHere | None,
                reset_before: bool | None) -> tuple[ExecResult, tuple[float | None, float | None]]:
        """The model run in ``workload``'s running container (see :meth:`execute`); ``reset_before`` None: the
        container is the run's own (:meth:`_run_alone`), neither reset before nor after. Returns the result and the
        exec's window, epoch s (``details["workload"]``'s ``started``/``ended``; None when its container's facts
        could not be read)."""
        s = self.session
        model, dataset = ctx.model, ctx.dataset
        code = code_of(ctx.matrix, model)
        paths = run.container_paths(model.name, model.path, code.path, dataset.name, model_input(dataset))
        run_dir = f"/tmp/hetero-run/{run.safe_name(model.name, dataset.name)}-{uuid.uuid4().hex[:8]}"
        provider = EXECUTION_PROVIDERS[ctx.resource.type]
        values = {"python": s.conf.python, **paths,
                  "outputs": f"{run_dir}/outputs.json", "provider": provider}
        argv = render_entrypoint(model.entrypoint, values)
        user = workload["user"] or run.model_user(None)
        tool = docker_devices.tool_of(ctx.resource.type)  # GPU/NPU rows: the devices, sampled inside the container
        refused = docker_devices.start(s.api, workload["id"], user, values["python"], run_dir, tool,
                                       ctx.timeout_s) if tool else ""
        begun = time.time()
        try:
            result, stats = self._exec_sampled(workload, argv, run_dir, {"HETERO_EXECUTION_PROVIDER": provider},
                                               f"/hetero/code/{model.name}", ctx.timeout_s, user)
        except docker.errors.APIError as exc:
            self.ensure_running(ctx, workload, "before the model run")
            raise outcome(exc, f"exec in {workload['name']}", phase="run", interpreter=values["python"]) from None
        result.details.update(container=workload["name"], container_id=workload["id"], run_dir=run_dir,
                              **({"truth_withheld": w} if (w := record_of(ctx.matrix, code)) else {}))
        result.details["usage"], result.details["run_time"] = (stats.result(), stats.run_time(result.duration_s)) \
            if stats else (unavailable(NOT_SAMPLED), {name: measured(name, None, docker_usage.STATS_SOURCE,
                                                                     NOT_SAMPLED) for name in RUN_TIME_UNITS})
        if tool:
            docker_devices.finish(s.api, workload["id"], user, run_dir, result.details["usage"], tool, refused)
        container = workload["usage"] or self._usage(workload)
        window: tuple[float | None, float | None] = (None, None)
        if container:
            ended = time.time()
            window = (begun, ended)
            result.details["workload"] = docker_usage.exec_facts(container, begun, ended)
        if started_here is not None:
            result.details["image"] = started_here
            result.details["workload_started"] = dict(container)
        result.failure = run_failure(s.api, ctx, workload, result, values["python"])
        self._finish_run(ctx, workload, result, values["outputs"], reset_before)
        return result, window

    def _plan(self, ctx: Step, concurrency: Concurrency) -> Plan:
        """How the per-run model runs of ``ctx``'s resource × image go (:mod:`.spread`): the resource's device
        slots, at most ``concurrency`` runs at once, one per slot. The resource × image container (its startup
        is proven) is removed first, so what it holds serves the runs. Raises ActionFailed ``bad_request`` for a
        malformed request, ``target.cpuset`` or ``target.device_ids`` (:func:`~pytest_hetero.backends.slots.slots_of`:
        an entry that is not one device index, a device or CPU listed twice, a list too short for one slot)."""
        s, res = self.session, ctx.resource
        s.api  # noqa: B018 - connects and reads info: the engine's CPUs
        try:
            found = docker_spread.slots_of({**res.requests, **res.limits}, s.conf.device_ids.get(res.name),
                                           s.conf.cpuset.get(res.name),
                                           s.engine.ncpu, docker_spread.host_devices(s.local))
        except ValueError as exc:
            raise ActionFailed(f"resource {res.name}: {exc}", "bad_request") from None
        try:  # the engine's CPUs and devices, which every gate process using it (xdist workers) carves slots from
            lease = HostLease("host" if s.local else f"docker-{s.engine.id or s.engine.name or 'engine'}")
        except (ValueError, OSError) as exc:
            raise ActionFailed(f"resource {res.name}: {exc}", "configuration") from None
        shared = s.workloads.pop((res.name, ctx.image.name), None)
        if shared is not None:
            self._remove(shared["id"])
        slots = docker_spread.Slots(found, lease, stopped=s.spread.stop.is_set)
        return Plan(run=functools.partial(self._run_alone, slots), unexpected=self._unexpected,
                    width=docker_spread.width(concurrency, found), noun="container",
                    facts={"concurrency_setting": concurrency, "slots": [x.to_dict() for x in found],
                           "startup_container_removed": shared["name"] if shared else None})

    def _unexpected(self, exc: Exception, ctx: Deferred) -> EngineFault:
        """Any other exception of a per-run model run, translated: an engine that went away
        (:func:`.outage.engine_lost`), else the engine's answer (:func:`.errors.outcome`)."""
        if isinstance(exc, (run.EngineLost, *run.CONNECTION_LOST)):
            return outage.engine_lost(self.session, ctx, exc, "a model run in a container of its own")
        return outcome(exc, f"the model run of {'::'.join(ctx.planned.parts)} in a container of its own",
                       phase="run")

    def _run_alone(self, slots: docker_spread.Slots, ctx: Deferred, width: int, queued: float) -> ExecResult:
        """One model run (in a helper thread) in a container of its own pinned to a free slot of ``slots`` (waited
        for), removed after the run; the result with ``details["spread"]`` (see :mod:`.spread`). Raises what
        :meth:`identify`, :meth:`launch` and the run raise."""
        s = self.session
        slot, waited = slots.take()
        got = time.time()
        workload: DockerWorkload | None = None
        try:
            started_here: StartedHere | None = None
            image_id = s.image_ids.get(ctx.image.name)
            if image_id is None:  # no startup item identified the image in this session: this item checks it
                identity = self.identify(ctx)
                image_id = str(identity.handle)
                started_here = {"digest": identity.digest, "known": list(identity.known), "what": identity.what}
            workload = self.launch(ctx, image_id, alone=slot)
            running = time.time()
            result, ran = self._run_in(ctx, workload, started_here, None)
            result.details["isolation"] = docker_spread.isolation(slot, s.conf.network, width)
            facts = self._usage(workload, "completed" if result.exit_code == 0 else "failed")
        finally:
            removed: float | None = time.time()
            not_removed = None
            if workload is not None:
                try:
                    self._remove(workload["id"])
                except docker.errors.DockerException as exc:  # left to the engine's close (owner label)
                    removed, not_removed = None, f"{type(exc).__name__}: {exc}"[:300]
            if not_removed is None:
                slots.give(slot)
            else:  # still there, with whatever the run left running in it, on the slot's CPUs or devices
                slots.retire(slot, f"the container {workload['name'] if workload else '?'} of an earlier model run "
                                   f"on slot {slot.kind} {','.join(slot.ids) or '-'} could not be removed "
                                   f"({not_removed}): it may still run there")
        result.details.pop("workload_started", None)  # the run's container is its workload, counted once
        if facts:
            facts["released"] = removed
            result.details["workload"] = facts
        result.details["spread"] = {"container": workload["name"], "container_id": workload["id"], **spread_facts(
            slot, width, queued, got, waited, workload["created_at"], running, ran, removed)}
        if not_removed is not None:
            result.details["spread"]["not_removed"] = not_removed
        return result

    def _finish_run(self, ctx: Step, workload: DockerWorkload, result: ExecResult, outputs: str,
                    reset_before: bool | None) -> None:
        """After a model exec: read its outputs (unless the container died), reset the container, record
        ``details["isolation"]``, then judge a container found stopped once the reset has ended (nothing of the
        run is left to act): ``container_stopped_by_run`` (:func:`.errors.stopped_after_run`), even when a child
        the run left stopped PID 1 after the exec returned or while its outputs were read."""
        s = self.session
        if result.failure is None or result.failure["category"] not in ("container_killed",
                                                                        "container_stopped_by_run"):
            try:
                result.outputs = run.read_outputs(s.api, workload["id"], outputs, run.MAX_OUTPUTS_BYTES,
                                                workload["user"] or run.GATE_USER)
            except run.OutputsRefused as exc:
                result.failure = {"category": exc.category, "message": exc.message}
            except docker.errors.APIError:
                if self._still_running(workload):
                    raise
                # the container stopped while its outputs were read (the reader exec was killed with it)
        if reset_before is not None:  # the run's own container (None) is removed after it: _run_alone says so
            why = self._reset(workload)
            result.details["isolation"] = {**run.RESET_FACTS, "confined": True, "reset_before": reset_before,
                                           "reset_after": "done" if not why else f"failed: {why}"}
        if result.failure is None or result.failure["category"] not in ("container_killed",
                                                                        "container_stopped_by_run"):
            state = self._state(workload)
            if not state.running:
                outage.raise_if_stopped_by_outage(s, workload, state, "after the model run")
                late = stopped_after_run(s.api, ctx, workload, result)
                if late is not None:
                    result.failure, result.outputs = late, None

    def _state(self, workload: DockerWorkload) -> ContainerState:
        """The container's engine ``State``; a removed one counts as running (the next run's
        :meth:`ensure_running` says it was removed)."""
        try:
            return container_state(self.session.api, workload["id"])
        except docker.errors.NotFound:
            return ContainerState.parse({"Running": True})

    def _still_running(self, workload: DockerWorkload) -> bool:
        """True when the container runs :data:`.errors.SETTLE_S` seconds from now (a container being stopped
        kills its execs before the engine records it stopped); False as soon as it is found stopped."""
        deadline = time.monotonic() + SETTLE_S
        while self._state(workload).running:
            if time.monotonic() >= deadline:
                return True
            time.sleep(0.05)
        return False

    def _note_stopped_by_run(self, workload: DockerWorkload) -> None:
        """Mark ``stopped_by_run`` a container a model run stopped just after it ended (exit 0, not OOM).
        A container an engine outage stopped since it started is not a run's doing: EngineUnavailable
        (``engine_restarted``, :func:`.outage.raise_if_stopped_by_outage`)."""
        s = self.session
        state = container_state(s.api, workload["id"])
        if state.running:
            return
        outage.raise_if_stopped_by_outage(s, workload, state, "before the model run")
        if state.exit_code == 0 and not state.oom_killed:
            workload["stopped_by_run"] = "a model run that ended as it stopped it"

    def _exec_sampled(self, workload: DockerWorkload, argv: list[str], run_dir: str, env: dict[str, str],
                      workdir: str, timeout_s: float, user: str
                      ) -> tuple[ExecResult, docker_usage.StatsSampling | None]:
        """:func:`.client.run_exec` of ``argv`` in ``workload``'s container with its stats stream read meanwhile
        (:class:`.usage.StatsSampling`, marked ``during`` the exec; None when sampling is off). Raises as
        run_exec does."""
        s = self.session
        stats = docker_usage.StatsSampling(docker_usage.stream_opener(s.stats_api), workload["id"], workload["name"],
                                           docker_usage.STATS_INTERVAL_S) if docker_usage.STATS_INTERVAL_S else None
        if stats:
            stats.start()
            stats.during = True
        try:
            return run.run_exec(s.api, s.long_api, workload["id"], argv, run_dir, env, workdir, timeout_s,
                                user), stats
        finally:
            if stats:
                stats.during = False
                stats.stop()

    def _remove(self, cid: str) -> None:
        s = self.session
        try:
            s.api.remove_container(cid, force=True, v=True)
        except docker.errors.NotFound:
            pass

    # -- jobs of several ranks: one container per rank on a network of the job's own (.jobs) ----------------
    @outage.engine_guarded
    def start_job(self, step: Step, spec: JobSpec) -> Job:
        """One container per rank of ``spec`` from the image as :meth:`identify` resolved it (:mod:`.jobs`)."""
        image_id = self._image_id(step)
        return docker_jobs.start(self.session, step, spec, str(image_id), self.session.conf.python)

    def job_logs(self, job: Job, rank: int) -> str:
        """Rank ``rank``'s stdout so far."""
        return docker_jobs.logs(self.session, job, rank)

    def job_running(self, job: Job) -> list[int]:
        """The ranks whose containers are running."""
        return docker_jobs.running(self.session, job)

    def kill_rank(self, job: Job, rank: int) -> None:
        """SIGKILL rank ``rank``'s container."""
        docker_jobs.kill(self.session, job, rank)

    def wait_job(self, job: Job, timeout_s: float, settle_s: float = 10.0) -> list[RankExit]:
        """Every rank's exit (:func:`.jobs.wait`)."""
        return docker_jobs.wait(self.session, job, timeout_s, settle_s)

    def remove_job(self, job: Job) -> None:
        """Remove the rank containers and the job's network."""
        docker_jobs.remove(self.session, job)

    def close(self) -> None:
        """Remove every container and image this backend created (found by its owner label), or,
        with ``--hetero-keep``, print how to reach them. Never raises."""
        s = self.session
        s.spread.shutdown()  # before the listing: a run container created meanwhile removes itself (.launch)
        if s._api is None and not s.interruptions:
            return
        try:
            api = s.api  # reconnects after an engine outage
            for image in api.images(all=True, filters={"label": f"{OWNER}={s.owner}"}):
                api.remove_image(image["Id"], force=True)
            found = [Listed.parse(c, "container")
                     for c in api.containers(all=True, filters={"label": f"{OWNER}={s.owner}"})]
            if s.settings.keep:
                prefix = "" if s.local else f"DOCKER_HOST={s.engine_url} "  # a remote engine's URL is always set
                for c in found:
                    sys.stderr.write(f"pytest-hetero: kept container {c.name} "
                                     f"({c.labels.get(LABEL + 'resource')} × "
                                     f"{c.labels.get(LABEL + 'image')}): {prefix}docker exec -it "
                                     f"{c.name} /bin/sh; remove with: hetero cleanup "
                                     f"--run-id {s.settings.run_id}\n")
                return
            for c in found:
                self._remove(c.id)
        except (docker.errors.DockerException, EngineUnavailable, *run.CONNECTION_LOST) as exc:
            sys.stderr.write(f"pytest-hetero: docker cleanup of run {s.settings.run_id} incomplete: {exc}; "
                             f"run: hetero cleanup --run-id {s.settings.run_id}\n")
        finally:
            s.drop_clients()

