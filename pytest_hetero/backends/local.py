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

from pytest_hetero.backends.protocol import EXECUTION_PROVIDERS, Backend, ExecResult, render_entrypoint
from pytest_hetero.backends.host import discover_host
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerFailed
from pytest_hetero.layers.startup import verify_inputs
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

    def discover(self, ctx: LayerContext) -> None:
        """Probe this host for the resource's vendor; see :func:`discover_host`."""
        discover_host(ctx)

    def interpreter(self, ctx: LayerContext) -> Path:
        """Resolve the image reference to a Python executable; LayerFailed when it does not exist."""
        ref = ctx.image.reference
        if ref == "python:current":
            return Path(sys.executable)
        if ref.startswith("python:"):
            path = Path(ref.split(":", 1)[1])
        elif ref.startswith("venv:"):
            path = (ctx.matrix.path.parent / ref.split(":", 1)[1]).resolve() / "bin" / "python"
        else:
            raise LayerFailed(f"image reference {ref!r} is not a Python environment; the local backend "
                              "takes python:current, python:/path/to/python or venv:PATH",
                              "image_not_found", "platform")
        if not path.exists():
            raise LayerFailed(f"Python environment {ref!r} not found at {path}", "image_not_found", "platform")
        return path

    def start(self, ctx: LayerContext) -> None:
        """Record interpreter and distributions digest, check the execution provider, verify inputs."""
        python = self.interpreter(ctx)
        try:
            proc = subprocess.run([str(python), "-c", ENV_SNIPPET], capture_output=True, text=True,
                                  timeout=ctx.timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise LayerFailed(f"interpreter {python} did not answer within {ctx.timeout_s:g} s",
                              "start_timeout") from None
        except OSError as exc:
            raise LayerFailed(f"cannot run {python}: {exc.strerror}", "entrypoint_missing") from None
        if proc.returncode != 0:
            raise LayerFailed(f"interpreter {python} failed: {proc.stderr.strip()[-300:]}", "start_failed")
        env = json.loads(proc.stdout)
        digest = "sha256:" + env["distributions_sha256"]
        self._images[ctx.image.name] = digest
        ctx.record("startup.environment", image=ctx.image.name, reference=ctx.image.reference,
                   digest=digest, declared_digest=ctx.image.digest, **env)
        if ctx.image.digest and ctx.image.digest.split(":")[-1] != env["distributions_sha256"]:
            raise LayerFailed(f"environment digest {digest} differs from the declared {ctx.image.digest}",
                              "image_digest_mismatch", "platform")
        wanted = EXECUTION_PROVIDERS[ctx.resource.type]
        providers = env.get("providers")
        if providers is None:
            raise LayerFailed(f"ONNX Runtime not importable in {python}: {env.get('onnxruntime_error')}",
                              "framework_missing", "algorithm")
        ctx.record("startup.device_init", framework="onnxruntime", wanted_provider=wanted,
                   providers=providers, ok=wanted in providers)
        if wanted not in providers:
            raise LayerFailed(f"{wanted} not available in this environment's ONNX Runtime "
                              f"(has {', '.join(providers)}): framework build without the accelerator",
                              "framework_without_accelerator", "algorithm")
        verify_inputs(ctx)

    def execute(self, ctx: LayerContext) -> ExecResult:
        """Run the entrypoint as a subprocess (cwd: matrix folder) with the layer timeout."""
        python = self.interpreter(ctx)
        model = ctx.model
        with tempfile.TemporaryDirectory(prefix="hetero-run-") as tmp:
            outputs = Path(tmp) / "outputs.json"
            values = {"python": str(python), "code": str(model.code or ctx.matrix.path.parent),
                      "model": str(model.path), "dataset": str(ctx.dataset.path),
                      "outputs": str(outputs), "provider": EXECUTION_PROVIDERS[ctx.resource.type]}
            try:
                argv = render_entrypoint(model.entrypoint, values)
            except (KeyError, ValueError) as exc:
                raise LayerFailed(f"entrypoint has an unknown placeholder {exc}", "bad_entrypoint",
                                  "algorithm") from None
            env = {**os.environ, "HETERO_EXECUTION_PROVIDER": values["provider"]}
            result = run_measured(argv, Path(tmp), env, ctx.matrix.path.parent, ctx.timeout_s)
            if outputs.is_file():
                result.outputs = outputs.read_bytes()
            return result


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGKILL it when pytest dies (even by SIGKILL)."""
    parent_death_signal(signal.SIGKILL)


def run_measured(argv: list[str], tmp: Path, env: dict[str, str], cwd: Path, timeout_s: float) -> ExecResult:
    """Run ``argv``; return its ExecResult with peak RSS (MiB, from wait4) and wall duration (s).

    The process group is killed at ``timeout_s``. Raises LayerFailed when the program cannot
    be started (missing entrypoint), LayerBroken on other OS errors.
    """
    out_path, err_path = tmp / "stdout", tmp / "stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=cwd, start_new_session=True,
                                    preexec_fn=_die_with_parent)  # noqa: PLW1509 - only prctl(PDEATHSIG), async-signal-safe
        except FileNotFoundError:
            raise LayerFailed(f"entrypoint program not found: {argv[0]}", "entrypoint_missing",
                              "algorithm") from None
        except OSError as exc:
            raise LayerBroken(f"cannot start {argv[0]}: {exc.strerror}", "spawn_failed") from None
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
