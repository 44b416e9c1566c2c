"""Local backend: validates this host. An "image" is a Python environment.

Image references: ``python:current`` (the interpreter running pytest), ``python:/abs/python``
(another interpreter), ``venv:PATH`` (a virtual environment, relative to the matrix file).
Scheduling is not applicable here (nothing places work on a single host).
"""

from __future__ import annotations

import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pytest_hetero.backends.host import host_view
from pytest_hetero.backends.protocol import (
    EXECUTION_PROVIDERS,
    ActionFailed,
    Backend,
    EngineUnavailable,
    ExecResult,
    ImageIdentity,
    Inventory,
    Started,
    Step,
    render_entrypoint,
)
from pytest_hetero.probes.usage import sampling
from pytest_hetero.signals import parent_death_signal

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


class LocalBackend(Backend):
    """The host pytest runs on; see module docstring for image references."""

    name = "local"

    def __init__(self, target: dict[str, Any], settings: Any) -> None:
        super().__init__(target, settings)
        self._images: dict[str, str] = {}

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
                               "image_not_found", "platform")
        if not path.exists():
            raise ActionFailed(f"Python environment {ref!r} not found at {path}", "image_not_found", "platform")
        return path

    def identify(self, step: Step) -> ImageIdentity:
        """Ask the interpreter for its version, distributions digest and ONNX Runtime providers; record
        ``startup.environment``. The environment digest (sha256 of its sorted ``name==version`` list)
        identifies the "image"; the framework view comes back as ``environment``."""
        python = self.interpreter(step)
        try:
            proc = subprocess.run([str(python), "-c", ENV_SNIPPET], capture_output=True, text=True,
                                  timeout=step.timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise ActionFailed(f"interpreter {python} did not answer within {step.timeout_s:g} s",
                               "start_timeout") from None
        except OSError as exc:
            raise ActionFailed(f"cannot run {python}: {exc.strerror}", "entrypoint_missing") from None
        if proc.returncode != 0:
            raise ActionFailed(f"interpreter {python} failed: {proc.stderr.strip()[-300:]}", "start_failed")
        env = json.loads(proc.stdout)
        digest = "sha256:" + env["distributions_sha256"]
        self._images[step.image.name] = digest
        step.record("startup.environment", image=step.image.name, reference=step.image.reference,
                    digest=digest, declared_digest=step.image.digest, **env)
        return ImageIdentity(digest=digest, known=(digest,), what=f"environment {python}", owner="platform",
                             environment={"python": str(python), "providers": env.get("providers"),
                                          "onnxruntime_error": env.get("onnxruntime_error")})

    def start(self, step: Step) -> Started:
        """Nothing to start: the interpreter runs each model as a child process."""
        return Started(name=str(self.interpreter(step)), where="this host")

    def execute(self, step: Step) -> ExecResult:
        """Run the entrypoint as a subprocess (cwd: matrix folder) with the layer timeout; the resource
        type's device or cgroup is sampled meanwhile (``details["usage"]``, :mod:`pytest_hetero.probes.usage`)."""
        python = self.interpreter(step)
        model = step.model
        with tempfile.TemporaryDirectory(prefix="hetero-run-") as tmp:
            outputs = Path(tmp) / "outputs.json"
            values = {"python": str(python), "code": str(model.code or step.matrix.path.parent),
                      "model": str(model.path), "dataset": str(step.dataset.path),
                      "outputs": str(outputs), "provider": EXECUTION_PROVIDERS[step.resource.type]}
            argv = render_entrypoint(model.entrypoint, values)
            env = {**os.environ, "HETERO_EXECUTION_PROVIDER": values["provider"]}
            with sampling(step.resource.type) as usage:
                result = run_measured(argv, Path(tmp), env, step.matrix.path.parent, step.timeout_s)
            result.details["usage"] = usage.result()
            if outputs.is_file():
                result.outputs = outputs.read_bytes()
            return result


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGKILL it when pytest dies (even by SIGKILL)."""
    parent_death_signal(signal.SIGKILL)


def run_measured(argv: list[str], tmp: Path, env: dict[str, str], cwd: Path, timeout_s: float) -> ExecResult:
    """Run ``argv``; return its ExecResult with peak RSS (MiB, from wait4) and wall duration (s).

    The process group is killed at ``timeout_s``. Raises ActionFailed when the program cannot
    be started (missing entrypoint), EngineUnavailable on other OS errors.
    """
    out_path, err_path = tmp / "stdout", tmp / "stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=cwd, start_new_session=True,
                                    preexec_fn=_die_with_parent)  # noqa: PLW1509 - only prctl(PDEATHSIG), async-signal-safe
        except FileNotFoundError:
            raise ActionFailed(f"entrypoint program not found: {argv[0]}", "entrypoint_missing",
                               "algorithm") from None
        except OSError as exc:
            raise EngineUnavailable(f"cannot start {argv[0]}: {exc.strerror}", "spawn_failed") from None
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            try:
                os.killpg(proc.pid, 9)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            # Ctrl-C / SIGTERM reach pytest, not the child's own session: stop the whole group
            timer.cancel()
            kill()
            os.waitpid(proc.pid, 0)
            raise
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        duration = time.perf_counter() - start
    return ExecResult(
        argv=argv, exit_code=None if timed_out.is_set() else proc.returncode, duration_s=duration,
        stdout=out_path.read_text("utf-8", "replace"), stderr=err_path.read_text("utf-8", "replace"),
        outputs=None, timed_out=timed_out.is_set(), peak_rss_mib=round(usage.ru_maxrss / 1024.0, 2))
