"""Local backend: validates this host. An "image" is a Python environment.

Image references: ``python:current`` (the interpreter running pytest), ``python:/abs/python``
(another interpreter), ``venv:PATH`` (a virtual environment, relative to the matrix file).
Scheduling is not applicable here (nothing places work on a single host). Target keys (``spec.target``) read
with ``model_runs: per-run`` (:mod:`.spread`): ``device_ids`` / ``cpuset`` (``{resource: …}``: the device indices
and CPUs the runs are pinned to).
"""

from __future__ import annotations

import errno
import functools
import os
import platform
import resource
import select
import selectors
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import msgspec

from pytest_hetero.backends.host import host_view
from pytest_hetero.backends.local import spread as local_spread
from pytest_hetero.backends.protocol import (
    EXECUTION_PROVIDERS,
    ActionFailed,
    Backend,
    EngineFault,
    EngineUnavailable,
    ExecResult,
    ImageIdentity,
    Inventory,
    Leftover,
    Started,
    Step,
    UsageFacts,
    render_entrypoint,
)
from pytest_hetero.backends.sandbox import (
    SECCOMP_FD,
    Confinement,
    ConfinementFacts,
    Launch,
    Sandbox,
    SandboxRefused,
    child_environment,
    remove_tree,
)
from pytest_hetero.backends.sandbox.zygote import Zygote, ZygoteFailed, args_pipe, run_root
from pytest_hetero.backends.slots import HostLease, Slots, spread_facts, width
from pytest_hetero.backends.spread import Concurrency, Deferred, Plan, Spread, wanted
from pytest_hetero.backends.streams import MAX_OUTPUTS_BYTES, CappedStream
from pytest_hetero.declared import resolve
from pytest_hetero.probes.usage import peak_rss, rusage_run_time, sampling
from pytest_hetero.truth.view import model_input
from pytest_hetero.truth.withhold import WithholdError, answer_files, find_in

ENV_SNIPPET = r"""
import json, sys, hashlib
from importlib import metadata
dists = sorted({f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions() if d.metadata['Name']})
out = {"python": sys.version.split()[0], "executable": sys.executable, "distributions": len(dists),
       "distributions_sha256": hashlib.sha256("\n".join(dists).encode()).hexdigest()}
try:
    import onnxruntime as ort
    out["onnxruntime"] = ort.__version__
    out["providers"] = ort.get_available_providers()
except Exception as exc:
    out["onnxruntime_error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


class InterpreterAnswer(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What :data:`ENV_SNIPPET` prints (JSON): the interpreter's ``python`` version and ``executable``, its
    ``distributions`` count and ``distributions_sha256``; ``onnxruntime`` and ``providers`` when ONNX Runtime
    imports, else ``onnxruntime_error`` (None: not in the answer, and left out of ``msgspec.to_builtins``)."""

    python: str
    executable: str
    distributions: int
    distributions_sha256: str
    onnxruntime: str | None = None
    providers: list[str] | None = None
    onnxruntime_error: str | None = None


@dataclass(frozen=True)
class ProcessRun:
    """The model process one :meth:`LocalBackend.run_model` ran, as the per-run model runs read it
    (:meth:`LocalBackend._run_alone`): its usage ``facts`` (``details["workload"]``, :func:`process_usage`) with
    their ``workload`` id, ``started``/``ended`` (epoch s) and ``cpu_s`` (its tree's CPU-seconds; None: not
    measured), and
    how it was confined (``confinement``: ``details["isolation"]``)."""

    facts: UsageFacts
    workload: str
    started: float
    ended: float
    cpu_s: float | None
    confinement: ConfinementFacts


class LocalBackend(Backend):
    """The host pytest runs on; see module docstring for image references."""

    name = "local"

    def __init__(self, target: dict[str, Any], settings: Any) -> None:
        super().__init__(target, settings)
        self._images: dict[str, str] = {}
        self._environments: dict[Path, InterpreterAnswer] = {}
        self._env_paths: dict[Path, list[Path]] = {}
        key = settings.sign_key if settings is not None and isinstance(settings.sign_key, Path) else None
        # the key and its folder (the folder is masked only where it holds no input: the key file still is)
        self.sandbox = Sandbox([settings.report_dir, *((key, key.parent) if key else ())] if settings is not None
                               else [])
        self.spread = Spread()
        """The per-run model runs of this session (``model_runs: per-run``, :mod:`.spread`)."""
        self.running = local_spread.Running()
        """Those of them in flight, killed at :meth:`close`."""
        sweep_run_folders()

    def close(self) -> list[Leftover]:
        """Stop the per-run model runs (those queued cancelled, those running killed with their process trees,
        then waited for up to :data:`RUNS_END_S`), then end the session's sandboxes (:meth:`Sandbox.close`); a
        sandbox that had to be killed, or a run still going, is a leftover."""
        self.spread.shutdown()
        self.running.stop()
        left = self.spread.wait(RUNS_END_S)
        out = [Leftover(kind="process", name="per-run model run", reason=f"{left} per-run model run(s) did not end "
                        f"within {RUNS_END_S:g} s of being killed", remove="they die with pytest (bubblewrap's "
                        "parent-death signal); else kill -9 the bwrap processes of this pytest")] if left else []
        return out + [Leftover(kind="process", name="bubblewrap sandbox", reason=why,
                               remove="kill -9 the pid named in the reason (it also dies with pytest)")
                      for why in self.sandbox.close()]

    def fingerprint(self) -> dict[str, Any]:
        """Host name, OS/kernel, Python, and the environment digests seen by startup."""
        return {"backend": self.name, "identity": socket.gethostname(), "nodes": [socket.gethostname()],
                "versions": {"kernel": platform.release(), "os": platform.platform(),
                             "python": platform.python_version()},
                "images": dict(self._images)}

    def inventory(self, step: Step) -> Inventory:
        """This host's devices from the resource's vendor probe."""
        return Inventory(host=host_view(step.resource))

    def interpreter(self, step: Step) -> Path:
        """Resolve the image reference to a Python executable; ActionFailed when it does not exist."""
        ref = step.image.reference
        if ref == "python:current":
            return Path(sys.executable)
        if ref.startswith("python:"):
            path = Path(ref.split(":", 1)[1])
        elif ref.startswith("venv:"):
            path = (step.matrix.path.parent / ref.split(":", 1)[1]).resolve() / "bin" / "python"
        else:
            raise ActionFailed(f"image reference {ref!r} is not a Python environment; the local backend "
                               "takes python:current, python:/path/to/python or venv:PATH",
                               "image_not_found")
        if not path.exists():
            raise ActionFailed(f"Python environment {ref!r} not found at {path}", "image_not_found")
        return path

    def identify(self, step: Step) -> ImageIdentity:
        """Ask the interpreter (confined, like a model run) for its version, distributions digest and ONNX
        Runtime providers, once per interpreter per session; record ``startup.environment``. The
        environment digest (sha256 of its sorted ``name==version`` list) identifies the "image"; the
        framework view comes back as ``environment``."""
        python = self.interpreter(step)
        env = self._environments.get(python)
        if env is None:
            env = self._environments[python] = self._ask(python, step)
        digest = "sha256:" + env.distributions_sha256
        self._images[step.image.name] = digest
        step.record("startup.environment", image=step.image.name, reference=step.image.reference,
                    digest=digest, declared_digest=step.image.digest, **msgspec.to_builtins(env))
        return ImageIdentity(digest=digest, known=(digest,), what=f"environment {python}",
                             environment={"python": str(python), "providers": env.providers,
                                          "onnxruntime_error": env.onnxruntime_error})

    def _ask(self, python: Path, step: Step) -> InterpreterAnswer:
        """Run :data:`ENV_SNIPPET` in ``python``; its answer. Raises ActionFailed when it does not answer."""
        argv = [str(python), "-c", ENV_SNIPPET]
        with run_folder() as tmp:
            env = child_environment({}, tmp, passed=self.sandbox.passed)
            try:
                check_program(argv, env)
            except ActionFailed:
                raise ActionFailed(f"cannot run the interpreter {python}", "interpreter_missing") from None
            _, proc = run_confined(self.sandbox, argv, cwd=tmp, run_dir=tmp, env=env, inputs=self._paths_of(python),
                                   timeout_s=step.timeout_s)
        if proc.failure is not None:
            raise EngineUnavailable(proc.failure["message"], proc.failure["category"])
        if proc.timed_out:
            raise ActionFailed(f"interpreter {python} did not answer within {step.timeout_s:g} s", "start_timeout")
        if proc.exit_code != 0:
            raise ActionFailed(f"interpreter {python} failed: {proc.stderr.strip()[-300:]}", "start_failed")
        try:  # the image's interpreter answers: as untrusted as any output of the code under test
            return msgspec.json.decode(proc.stdout, type=InterpreterAnswer)
        except msgspec.ValidationError as error:
            raise ActionFailed(f"interpreter {python} answered an environment of another shape (answer: {error}): "
                               f"{proc.stdout.strip()[-300:]}", "start_failed") from None
        except msgspec.DecodeError:
            raise ActionFailed(f"interpreter {python} answered no environment: {proc.stdout.strip()[-300:]}",
                               "start_failed") from None

    def _paths_of(self, python: Path) -> list[Path]:
        """:func:`environment_paths` of ``python``, looked up once per session."""
        if python not in self._env_paths:
            self._env_paths[python] = environment_paths(python)
        return self._env_paths[python]

    def start(self, step: Step) -> Started:
        """Nothing to start: the interpreter runs each model as a child process."""
        return Started(name=str(self.interpreter(step)), where="this host")

    def execute(self, step: Step) -> ExecResult:
        """Run the entrypoint confined (:meth:`run_model`); with ``model_runs: per-run``, in a sandbox of its own
        pinned to a device slot, the runs of the model items after it launched ahead (:meth:`_run_alone`,
        :mod:`.spread`)."""
        if wanted(step):
            return self.spread.execute(step, functools.partial(self._plan, step))
        return self.run_model(step)[0]

    def _plan(self, step: Step, concurrency: Concurrency) -> Plan:
        """How the per-run model runs of ``step``'s resource × image go (:mod:`.spread`): the resource's device
        slots on this host, at most ``concurrency`` runs at once, one per slot. Raises ActionFailed
        ``bad_request`` for a malformed request, ``target.cpuset`` or ``target.device_ids``."""
        res = step.resource
        try:
            found = local_spread.local_slots(res, self.target)
        except ValueError as exc:
            raise ActionFailed(f"resource {res.name}: {exc}", "bad_request") from None
        try:  # this host's CPUs and devices, which every gate process here (pytest-xdist workers) carves its slots from
            lease = HostLease("host")
        except (ValueError, OSError) as exc:
            raise ActionFailed(f"resource {res.name}: {exc}", "configuration") from None
        slots = Slots(found, lease, stopped=lambda: self.running.stopped)
        return Plan(run=functools.partial(self._run_alone, slots), unexpected=self._unexpected,
                    width=width(concurrency, found), noun="sandbox",
                    facts={"concurrency_setting": concurrency, "slots": [x.to_dict() for x in found]})

    @staticmethod
    def _unexpected(exc: Exception, step: Deferred) -> EngineFault:
        """Any other exception of a per-run model run: a bug of the gate (``harness``), as it is in shared mode."""
        return ActionFailed(f"{type(exc).__name__}: {exc} (the model run of {'::'.join(step.planned.parts)} in a "
                            "sandbox of its own)", "harness")

    def _run_alone(self, slots: Slots, step: Deferred, width: int, queued: float) -> ExecResult:
        """One model run (in a helper thread) in a sandbox of its own pinned to a free slot of ``slots`` (waited
        for); the result with ``details["spread"]`` and the per-run ``details["isolation"]`` (see :mod:`.spread`),
        both with ``pinning`` when a CPU-pinned run used more CPU time than its slot could give
        (:func:`.spread.pin_kept`: it widened its affinity).
        Raises what :meth:`run_model` raises, and ActionFailed ``harness`` when the gate stopped meanwhile."""
        slot, waited = slots.take()
        got = time.time()
        try:
            if self.running.stopped:
                raise ActionFailed("the gate stopped before this model run's sandbox was started", "harness")
            run = local_spread.pin(slot, step.resource, width)
            result, ran = self.run_model(step, run)
        finally:
            ended = time.time()
            slots.give(slot)
        result.details["isolation"] = local_spread.isolation(ran.confinement, run, step.model.network)
        started = ran.started  # a local process is created and running at its own start
        result.details["spread"] = {"process": ran.workload, **spread_facts(
            slot, width, queued, got, waited, started, started, (ran.started, ran.ended), ended)}
        unkept = local_spread.pin_kept(run, ran.cpu_s, result.duration_s)
        if unkept is not None:  # it widened its CPU affinity: the pin did not hold
            result.details["spread"]["pinning"] = unkept
            result.details["isolation"] = local_spread.unkept(result.details["isolation"], unkept)
        return result

    def run_model(self, step: Step, run: local_spread.Pin | None = None) -> tuple[ExecResult, ProcessRun]:
        """Run the entrypoint confined (:mod:`~pytest_hetero.backends.sandbox`; cwd: matrix folder) with the
        layer timeout; how it was confined is ``details["isolation"]`` (``Confinement.facts``); the
        resource type's device or cgroup is sampled meanwhile (``details["usage"]``,
        :mod:`pytest_hetero.probes.usage`; a per-run model run pinned to devices: only its slot's devices); the run's
        own process tree's peak RSS and CPU-seconds (wait4
        rusage) are ``details["run_time"]`` (:func:`~pytest_hetero.probes.usage.rusage_run_time`). Streams
        are kept within
        :data:`~pytest_hetero.backends.streams.STREAM_CAP_BYTES` (full size and sha256 in ``details``);
        an outputs file over :data:`~pytest_hetero.backends.streams.MAX_OUTPUTS_BYTES`, or not a plain
        file, is refused by its metadata without being read (``failure`` ``outputs_too_large`` /
        ``bad_outputs``). ``run``: a per-run model run's pinning (:mod:`.spread`): a sandbox of its own, its
        device variable, its CPU affinity, killed at :meth:`close`; None: the session's sandbox. Returns the
        result and the :class:`ProcessRun` of the process (what ``details`` holds of it, typed)."""
        python = self.interpreter(step)
        model = step.model
        code = model.code or step.matrix.path.parent
        dataset = model_input(step.dataset)  # the truth column removed when it is inline
        with run_folder() as tmp:
            outputs = tmp / "outputs.json"
            values = {"python": str(python), "code": str(code), "model": str(model.path),
                      "dataset": str(dataset), "outputs": str(outputs),
                      "provider": EXECUTION_PROVIDERS[step.resource.type]}
            argv = render_entrypoint(model.entrypoint, values)
            env = child_environment({"HETERO_EXECUTION_PROVIDER": values["provider"], **(run.env if run else {})},
                                    tmp, passed=self.sandbox.passed)
            check_program(argv, env)
            cwd = step.matrix.path.parent
            inputs = [code, model.path, dataset, *self._paths_of(python)]
            withheld = truth_withheld(step, [cwd, code], given=[dataset, model.path])
            begun = time.time()
            with sampling(step.resource.type, devices=local_spread.sampled_devices(run)) as usage:
                launch, result = run_confined(self.sandbox, argv, cwd=cwd, run_dir=tmp, env=env, inputs=inputs,
                                              timeout_s=step.timeout_s, network=model.network,
                                              hide=[Path(w["path"]) for w in withheld],
                                              pinned=None if run is None else (run.cpus, self.running))
            if step.matrix.datasets and answer_files(step.matrix.datasets):
                result.details["truth_withheld"] = {
                    "how": "masked in the sandbox where the run could see them (opening one fails)"
                    if launch.confinement.mechanism == "bubblewrap" else
                    "not withheld: the run was unconfined and could read every file the gate can",
                    "files": withheld}
            cpu_s: float | None = result.details.pop("cpu_s", None)
            result.details["usage"] = usage.result()
            result.details["run_time"] = rusage_run_time(result.peak_rss_mib, cpu_s,
                                                         result.details.get("peak_rss_unmeasured"))
            workload = f"process/{uuid.uuid4().hex[:12]}"
            ended = time.time()
            facts = result.details["workload"] = process_usage(step, workload, begun, ended, cpu_s, result)
            confinement = result.details["isolation"] = launch.confinement.facts()
            ran = ProcessRun(facts=facts, workload=workload, started=begun, ended=ended, cpu_s=cpu_s,
                             confinement=confinement)
            if result.failure is not None:
                return result, ran
            try:
                result.outputs = read_outputs(outputs)
            except OutputsRefused as exc:
                result.failure = {"category": exc.category, "message": exc.message}
            return result, ran


def truth_withheld(step: Step, folders: list[Path], given: list[Path]) -> list[dict[str, str]]:
    """The truth files of the matrix's datasets (:mod:`pytest_hetero.truth.withhold`) and every file with their bytes
    under ``folders`` (the run's working folder and code folder), and each truth file wherever it lies: what the
    sandbox masks (it masks only what the run could otherwise see), less the run's own ``given`` inputs (its model
    and dataset files as the matrix declares them: a dataset file that is another dataset's truth too is this
    run's input). Raises ActionFailed ``sandbox_setup_failed`` when a folder is too large to search."""
    own = {p.resolve() for p in given}
    truths = [t for t in answer_files(step.matrix.datasets) if t.path not in own]
    out: dict[str, dict[str, str]] = {str(t.path): {"path": str(t.path), "sha256": t.sha256, "dataset": t.dataset,
                                                    "why": t.kind} for t in truths}
    for folder in folders:
        try:
            found = find_in(folder, truths)
        except WithholdError as exc:
            raise ActionFailed(exc.message, "sandbox_setup_failed") from None
        for w in found:
            if w.path.resolve() not in own:
                out.setdefault(str(w.path.resolve()), w.record())
    return list(out.values())


def process_usage(step: Step, workload: str, begun: float, ended: float, cpu_s: float | None,
                  result: ExecResult) -> UsageFacts:
    """The usage facts (:data:`~pytest_hetero.backends.protocol.USAGE_FACTS`) of one model process ``workload``
    (``process/<id>``): namespace ``local``, the resource's requests (nothing reserves them on a single host:
    request-seconds are what the run would have asked a scheduler for), started/ended at ``begun``/``ended``
    (epoch s; no placement, so no idle time), ``cpu_s`` the process tree's CPU-seconds (rusage, None: not
    measured), attempts the sandbox starts."""
    return {"workload": workload, "object": "process", "name": " ".join(result.argv[:2]),
            "namespace": "local", "tenant": None, "requests": dict(step.resource.requests),
            "submitted": begun, "started": begun, "ended": ended, "released": ended,
            "attempts": int(result.details.get("sandbox_attempts") or 1),
            "outcome": "completed" if result.exit_code == 0 and not result.timed_out else "failed",
            "cpu_s": cpu_s}


SANDBOX_ATTEMPTS = 2
"""Starts of one run when bubblewrap fails to set the sandbox up (a mount of the host vanished meanwhile)."""


def sandbox_refused(launch: Launch, result: ExecResult) -> bool:
    """True when bwrap itself gave up before starting the run: exit 1 and a single ``bwrap: …`` line on
    stderr, nothing on stdout (what bwrap's ``die_with_error`` writes). A run that prints the same is
    taken at its word: it then fails as infrastructure (an error, never a pass)."""
    if "sandbox_error" in result.details:
        return True
    if launch.confinement.mechanism != "bubblewrap" or result.exit_code != 1 or result.stdout:
        return False
    lines = result.stderr.strip().splitlines()
    return len(lines) == 1 and lines[0].startswith("bwrap: ")


def run_confined(sandbox: Sandbox, argv: list[str], *, cwd: Path, run_dir: Path, env: dict[str, str],
                 inputs: list[Path], timeout_s: float, network: bool = False, hide: list[Path] | None = None,
                 pinned: tuple[frozenset[int] | None, local_spread.Running] | None = None
                 ) -> tuple[Launch, ExecResult]:
    """Prepare ``argv`` with ``sandbox`` and :func:`run_measured` it; when bubblewrap could not set the
    sandbox up (:func:`sandbox_refused`; e.g. ``--ro-bind / /`` met a container's mount that vanished
    while it was copied) start it again, up to :data:`SANDBOX_ATTEMPTS` times. When it never started,
    ``failure`` is ``sandbox_setup_failed`` (owner infrastructure, status error): the code under test
    did not run, so its owner is not blamed. ``details["sandbox_attempts"]`` counts the starts. When no
    unprivileged identity can read an input (:class:`~pytest_hetero.backends.sandbox.SandboxRefused`) the run
    is never started either: ``sandbox_setup_failed`` with the path and the fix. ``network``: the matrix
    grants the run the host's network; ``hide``: files masked where the run could see them (the truth files).
    ``pinned``: a per-run model run's (CPU affinity or None, the runs in flight it is held in while it runs): a
    sandbox of its own (never the session's: ``Sandbox.prepare(alone=True)``), started on those CPUs
    (:func:`run_measured`)."""
    for attempt in range(1, SANDBOX_ATTEMPTS + 1):
        try:
            launch = sandbox.prepare(argv, cwd=cwd, run_dir=run_dir, inputs=inputs, env=env, network=network,
                                     hide=hide or (), alone=pinned is not None)
        except SandboxRefused as exc:
            refused = Launch(argv=list(argv), env=dict(env), confinement=Confinement(
                mechanism="bubblewrap", identity="none: the run was not started", confined=True, reason=str(exc)))
            result = _not_started(argv, str(exc), time.perf_counter())
            result.failure = {"category": "sandbox_setup_failed", "status": "error",
                              "message": f"the entrypoint never ran: {exc}"}
            return refused, result
        result = run_measured(argv, launch, cwd, timeout_s, *(pinned or ()))
        result.details["sandbox_attempts"] = attempt
        if not sandbox_refused(launch, result):
            return launch, result
    result.failure = {"category": "sandbox_setup_failed", "status": "error",
                      "message": f"bubblewrap could not set the sandbox up ({SANDBOX_ATTEMPTS} tries), so the "
                                 f"entrypoint never ran: {result.stderr.strip()[:300]}"}
    return launch, result


class OutputsRefused(Exception):
    """The outputs file was not read: ``category`` ``outputs_too_large`` or ``bad_outputs``, and why."""

    def __init__(self, category: str, message: str) -> None:
        super().__init__(message)
        self.category = category
        self.message = message


def read_outputs(path: Path, max_bytes: int = MAX_OUTPUTS_BYTES) -> bytes | None:
    """The outputs file's bytes; None when it does not exist.

    Opened without following a symbolic link and without blocking (a FIFO), checked by its
    metadata before any byte is read: raises OutputsRefused ``bad_outputs`` when it is not a
    regular file or has other hard links (it could stand for a file the model cannot read), and
    ``outputs_too_large`` when its size (sparse or not) exceeds ``max_bytes``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP and path.is_symlink():  # O_NOFOLLOW's answer for a link
            raise OutputsRefused("bad_outputs", f"outputs file {path.name} is a symbolic link (to "
                                                f"{os.readlink(path)!r}); links are not followed: write the outputs "
                                                "into the file itself") from None
        raise OutputsRefused("bad_outputs", f"outputs file {path.name} cannot be opened as a plain file: "
                                            f"{exc.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # checked before fdopen, which raises IsADirectoryError for a folder
        os.close(fd)
        raise OutputsRefused("bad_outputs", f"outputs file {path.name} is not a regular file")
    with os.fdopen(fd, "rb") as fh:
        if st.st_nlink != 1:
            raise OutputsRefused("bad_outputs", f"outputs file {path.name} has {st.st_nlink} hard links; write "
                                                "a new file")
        if st.st_size > max_bytes:
            raise OutputsRefused("outputs_too_large", f"entrypoint wrote a {st.st_size}-byte outputs file, more "
                                                      f"than the {max_bytes} bytes read back")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise OutputsRefused("outputs_too_large", f"entrypoint wrote more than {max_bytes} bytes of outputs")
    return data


def check_program(argv: list[str], env: dict[str, str]) -> None:
    """Raise ActionFailed ``entrypoint_missing`` (algorithm) when ``argv[0]`` is not an executable file
    (looked up on ``env["PATH"]`` when it has no slash)."""
    program = argv[0] if argv else ""
    found = program if "/" in program else shutil.which(program, path=env.get("PATH", os.defpath))
    if not program or found is None or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise ActionFailed(f"entrypoint program not found: {program}", "entrypoint_missing")


def environment_paths(python: Path) -> list[Path]:
    """Folders a run of ``python`` reads beyond its inputs: its installation prefix (the folder above
    ``bin/``), a virtual environment's base installation (``home`` in ``pyvenv.cfg``), and, for the
    interpreter running pytest, the existing folders on its ``sys.path``."""
    found = [python.parent.parent, python.resolve().parent.parent]
    cfg = python.parent.parent / "pyvenv.cfg"
    if cfg.is_file():
        for line in cfg.read_text("utf-8", "replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                found.append(Path(value.strip()).parent)
    if python == Path(sys.executable):
        found += [Path(sys.prefix), Path(sys.base_prefix), *(Path(p) for p in sys.path if p and os.path.isdir(p))]
    return list(dict.fromkeys(found))


RUN_PREFIX = "hetero-run-"
"""Prefix of a model run's private folder under the system temporary folder: ``hetero-run-<gate pid>-…``."""


@contextmanager
def run_folder() -> Iterator[Path]:
    """A private folder for one run (``tmp/`` inside for ``TMPDIR``) in this process's
    :func:`~pytest_hetero.backends.sandbox.zygote.run_root`, removed afterwards. Both names carry the
    gate's pid so :func:`sweep_run_folders` can remove those a killed gate left behind. What the run left
    there is removed whatever its shape (:func:`~pytest_hetero.backends.sandbox.remove_tree`: any depth, folders
    of mode 0000, links not followed)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-", dir=run_root()))
    try:
        (tmp / "tmp").mkdir()
        yield tmp
    finally:
        remove_tree(tmp)


def sweep_run_folders(root: Path | None = None) -> list[Path]:
    """Remove run folders (under ``root``, default the system temporary folder) whose gate process
    is gone (e.g. pytest was killed with SIGKILL); return those removed."""
    root = Path(tempfile.gettempdir()) if root is None else root
    removed = []
    for folder in root.glob(f"{RUN_PREFIX}*-*"):
        pid = folder.name[len(RUN_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        remove_tree(folder)
        removed.append(folder)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_measured(argv: list[str], launch: Launch, cwd: Path, timeout_s: float, cpus: frozenset[int] | None = None,
                 running: local_spread.Running | None = None) -> ExecResult:
    """Start ``launch`` (see :meth:`Sandbox.prepare`); return its ExecResult: ``argv`` as rendered,
    exit code (None when killed at ``timeout_s``), wall duration (s), peak RSS (MiB, wait4 of the
    launcher and what it reaped: :func:`peak_rss`), CPU-seconds (``details["cpu_s"]``, the same rusage),
    stdout/stderr through pipes, capped (never written to disk).

    The confined run's whole process tree dies with it (its PID namespace); an unconfined one is
    killed as a process group. ``cpus``: the CPU affinity the launcher is started with (its process tree inherits
    it; None: the gate's); ``running``: the runs in flight this one is held in while it runs (killed by
    :meth:`~.spread.Running.stop`). Raises EngineUnavailable when the launcher cannot be started.
    """
    if launch.zygote is not None:
        return _run_forked(argv, launch, cwd, timeout_s, cpus, running)
    seccomp = args_pipe(launch.seccomp)  # bwrap's --seccomp program, when the launch has one
    blob = launch.args.replace(b"\0" + SECCOMP_FD.encode() + b"\0", f"\0{seccomp.read}\0".encode()) \
        if seccomp.read >= 0 else launch.args
    fds = args_pipe(blob)
    command = [str(fds.read) if a == "{fd}" else a for a in launch.argv]
    out, err = CappedStream(), CappedStream()
    inherited_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # what the child's ru_maxrss starts from
    start = time.perf_counter()
    try:
        with local_spread.affinity(cpus):
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=launch.env, cwd=cwd, start_new_session=True,
                                    pass_fds=(*fds.fds, *seccomp.fds))
    except OSError as exc:
        raise EngineUnavailable(f"cannot start {command[0]}: {exc.strerror}", "spawn_failed") from None
    finally:
        for fd in (fds.read, seccomp.read):
            if fd >= 0:
                os.close(fd)
    reaper = _Reaper(proc.pid, timeout_s)
    try:
        with running.hold(reaper) if running is not None else nullcontext():
            _drain(proc, out, err, reaper)
            status, usage = reaper.wait()
    except BaseException:
        # Ctrl-C / SIGTERM reach pytest, not the run's own session: stop it, then go on unwinding
        reaper.kill()
        reaper.wait()
        raise
    finally:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return _ended(argv, status, reaper.fired, start, out, err, usage.ru_maxrss, inherited_kib,
                  usage.ru_utime + usage.ru_stime)


def _ended(argv: list[str], status: int, fired: bool, start: float, out: CappedStream, err: CappedStream,
           maxrss_kib: int, inherited_kib: int, cpu_s: float) -> ExecResult:
    """The ExecResult of a run that ended with wait ``status`` (exit code None when ``fired``: killed at its
    timeout), its streams, peak RSS (:func:`peak_rss`) and CPU-seconds, timed from ``start``."""
    peak, rss_note = peak_rss(maxrss_kib, inherited_kib)
    return ExecResult(argv=argv, exit_code=None if fired else os.waitstatus_to_exitcode(status),
                      duration_s=time.perf_counter() - start, stdout=out.text(), stderr=err.text(), outputs=None,
                      timed_out=fired, peak_rss_mib=peak,
                      details={**out.facts("stdout"), **err.facts("stderr"),
                               **({"peak_rss_unmeasured": rss_note} if rss_note is not None else {}),
                               "cpu_s": round(cpu_s, 4)})


def _run_forked(argv: list[str], launch: Launch, cwd: Path, timeout_s: float, cpus: frozenset[int] | None = None,
                running: local_spread.Running | None = None) -> ExecResult:
    """:func:`run_measured` for a run the session's sandbox forks (``launch.zygote``, started here on first
    use): the same result, with CPU and peak RSS from the supervisor's ``wait4`` of the run. When the
    sandbox cannot start or cannot set the run up, the result says so in ``details["sandbox_error"]``
    (exit 1, the reason on stderr; :func:`sandbox_refused`): the code under test never ran. When the
    sandbox itself ends during the run, ``failure`` is ``sandbox_lost`` (status error),
    never retried: the run may have done part of its work. A sandbox of the run's own (``launch.single``) is
    started on ``cpus`` (its runs inherit them) and closed after the run."""
    zygote = launch.zygote
    assert zygote is not None
    try:
        return _forked_run(argv, launch, zygote, cwd, timeout_s, cpus, running)
    finally:
        if launch.single:
            zygote.close()


def _forked_run(argv: list[str], launch: Launch, zygote: Zygote, cwd: Path, timeout_s: float,
                cpus: frozenset[int] | None, running: local_spread.Running | None) -> ExecResult:
    """:func:`_run_forked`'s run in ``zygote``, held in ``running`` while it runs."""
    start = time.perf_counter()
    try:
        if not zygote.alive():
            with local_spread.affinity(cpus):
                zygote.start()
        run = zygote.submit(launch.argv, launch.env, cwd, launch.fresh, launch.keep, launch.user,
                            launch.limits.facts() if launch.limits is not None else None)
    except ZygoteFailed as exc:
        return _not_started(argv, str(exc), start)
    run.arm(timeout_s)
    out, err = CappedStream(), CappedStream()
    try:
        with running.hold(run) if running is not None else nullcontext():
            _drain_fds((run.stdout, run.stderr), out, err, run)
            answer = run.wait(POLL_S)
    except BaseException:
        run.kill()
        run.wait(POLL_S)
        raise
    finally:
        for fd in (run.stdout, run.stderr):
            os.close(fd)
    if answer.lost:
        return ExecResult(argv=argv, exit_code=None, duration_s=time.perf_counter() - start, stdout=out.text(),
                          stderr=err.text(), outputs=None, details={**out.facts("stdout"), **err.facts("stderr")},
                          failure={"category": "sandbox_lost", "status": "error",
                                   "message": f"the {'run' if launch.single else 'session'}'s sandbox ended during the "
                                              f"run ({answer.error}); the run was killed with it and its result is "
                                              "unknown"})
    if answer.error or answer.status is None:
        return _not_started(argv, answer.error or "no wait status", start)
    return _ended(argv, answer.status, run.fired, start, out, err, answer.maxrss, answer.inherited_kib,
                  answer.utime + answer.stime)


def _not_started(argv: list[str], why: str, start: float) -> ExecResult:
    """The result of a run the sandbox never started (``details["sandbox_error"]``)."""
    return ExecResult(argv=argv, exit_code=1, duration_s=time.perf_counter() - start, stdout="",
                      stderr=f"sandbox: {why}", outputs=None, details={"sandbox_error": why})


class _Reaper:
    """Kills the launched process (its group) at the timeout or on demand, and reaps it exactly once.

    The timeout is a deadline the reading loop checks (:meth:`expire`) at least every
    :data:`POLL_S`, not a timer thread: a thread started per run cost 1-4 ms of each model item on a
    loaded 2-core machine."""

    def __init__(self, pid: int, timeout_s: float) -> None:
        self.pid = pid
        self.fired = False
        self.deadline = time.monotonic() + timeout_s
        self._lock = threading.Lock()
        self._status: tuple[int, Any] | None = None
        try:  # readable when the process exits (Linux ≥ 5.3): a wait with a timeout, without polling
            self._pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._pidfd = None

    def expire(self) -> None:
        """Kill the process group once its deadline has passed (sets :attr:`fired`)."""
        if not self.fired and self._status is None and time.monotonic() >= self.deadline:
            self.fired = True
            self.kill()

    def kill(self) -> None:
        """SIGKILL the launcher's children, then its process group (a no-op once reaped). A child first: a
        bubblewrap's run is PID 1 of its own PID namespace in a session of its own, and once it switched to the
        sandbox user (gate running as root) the kernel refuses bubblewrap's parent-death signal to it (bubblewrap
        keeps no CAP_KILL): killed with its launcher only, it would go on. Killing it ends its whole namespace."""
        with self._lock:
            if self._status is None:
                for child in children(self.pid):
                    with suppress(ProcessLookupError, PermissionError):
                        os.kill(child, signal.SIGKILL)
                with suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.pid, signal.SIGKILL)

    def poll(self) -> bool:
        """True (and reaped) when the process has exited."""
        with self._lock:
            if self._status is None:
                pid, status, usage = os.wait4(self.pid, os.WNOHANG)
                if pid:
                    self._status = (status, usage)
            return self._status is not None

    def wait(self) -> tuple[int, Any]:
        """Block until reaped, killing it at its deadline; return (wait status, rusage). Also kills any
        process left in its group."""
        pause = 0.001
        while not self.poll():
            self.expire()
            left = POLL_S if self.fired else max(0.0, min(POLL_S, self.deadline - time.monotonic()))
            if self._pidfd is not None:
                select.select([self._pidfd], [], [], left)
            else:
                time.sleep(min(left, pause))
                pause = min(pause * 2, POLL_S)
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        assert self._status is not None
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)  # what an unconfined run left in its group
        return self._status


RUNS_END_S = 10.0
"""How long :meth:`LocalBackend.close` waits for killed per-run model runs to end (their folders removed)."""
def children(pid: int) -> list[int]:
    """The pids of process ``pid``'s children (``/proc/PID/task/*/children``, Linux ≥ 3.5 with
    ``CONFIG_PROC_CHILDREN``); ``[]`` when they cannot be read (the process is gone, or the kernel lacks it)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            out += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


DRAIN_AFTER_EXIT_S = 0.2
"""How long output is still read after the run's main process exited (its children may hold the pipes)."""
POLL_S = 0.05
"""Seconds between two checks of a run's exit and deadline while nothing is read from it."""


def _drain(proc: subprocess.Popen[bytes], out: CappedStream, err: CappedStream, reaper: _Reaper) -> None:
    """Read both pipes into the capped streams until both close, or the process exited and
    :data:`DRAIN_AFTER_EXIT_S` passed (children that escaped its group still hold them)."""
    _drain_fds((proc.stdout.fileno(), proc.stderr.fileno()), out, err, reaper)  # type: ignore[union-attr]


class _Watch(Protocol):
    """What :func:`_drain_fds` needs of a run: kill it at its deadline, tell when it has exited."""

    def expire(self) -> None: ...

    def poll(self) -> bool: ...


def _drain_fds(fds: tuple[int, int], out: CappedStream, err: CappedStream, reaper: _Watch) -> None:
    """:func:`_drain` of the stdout and stderr read ends ``fds``."""
    streams = {fds[0]: out, fds[1]: err}
    exited_at: float | None = None
    with selectors.DefaultSelector() as sel:
        for fd in streams:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            reaper.expire()
            for key, _ in sel.select(POLL_S if exited_at is None else DRAIN_AFTER_EXIT_S / 4):
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    streams[int(key.fd)].add(chunk)
                else:
                    sel.unregister(key.fd)
            if exited_at is None:
                if reaper.poll():
                    exited_at = time.perf_counter()
            elif time.perf_counter() - exited_at >= DRAIN_AFTER_EXIT_S:
                return


resolve(__name__)
