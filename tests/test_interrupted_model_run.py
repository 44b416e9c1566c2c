"""A Ctrl-C during a model run is the run's interruption, never the model's failure: the model item is
``not_run (interrupted …)``, no item is failed, pytest exits 2 — whoever notices the signal first (the
model process, which a terminal's Ctrl-C also reaches, or the gate), and even when the KeyboardInterrupt
itself is lost inside the engine (raised in a finalizer, Python prints "Exception ignored" and goes on).
Real pytest processes, real signals; the Docker engine's own case is in tests/docker/test_docker_lifecycle.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import DIGITS, MODEL_SHA, ctrl_c_reaches, matrix_text

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

MODEL = "cpu-host::py::quick@digits-test::model"
BUSINESS = "cpu-host::py::quick@digits-test::business"

# the engine notices a real SIGINT and loses the KeyboardInterrupt (as a finalizer running when the handler
# ran does), then runs the model to its end: what the gate then sees is a finished run without outputs
LOSES_THE_INTERRUPT = '''
import os, signal, time
import pytest
from pytest_hetero.backends.local import LocalBackend


class Losing(LocalBackend):
    def execute(self, ctx):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            pass
        return super().execute(ctx)


@pytest.hookimpl(tryfirst=True)
def pytest_hetero_backend(name):
    return Losing if name == "local" else None
'''


def _matrix(tmp_path: Path, entrypoint: list[str]) -> None:
    doc = json.loads(matrix_text(name="intr"))
    doc["spec"]["models"] = [{"name": "quick", "version": "1", "uri": str(DIGITS / "model" / "digits-logreg-1.0.0.onnx"),
                              "sha256": MODEL_SHA, "entrypoint": entrypoint}]
    (tmp_path / "intr.matrix.yaml").write_text(json.dumps(doc))


def _pytest(tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                             "intr.matrix.yaml", "--hetero-run-id", "r1", "--rootdir", str(tmp_path)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            preexec_fn=ctrl_c_reaches)


def _outcome(tmp_path: Path) -> tuple[dict[str, str], dict[str, str], Any]:
    ev = json.loads((tmp_path / "reports" / "r1" / "evidence.json").read_text())
    reported = {i["nodeid"].split("::", 1)[1]: i["status"] for i in ev["items"]}
    untested = {u["nodeid"].split("::", 1)[1]: u["reason"] for u in ev["untested"]["items"]}
    return reported, untested, ev["run"]["interrupted"]


def test_a_lost_keyboard_interrupt_during_the_model_run_still_interrupts_the_run(tmp_path: Path) -> None:
    _matrix(tmp_path, ["{python}", "-c", "pass"])  # exits 0 and writes no outputs
    (tmp_path / "conftest.py").write_text(LOSES_THE_INTERRUPT)
    proc = _pytest(tmp_path)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, out[-3000:]
    reported, untested, interrupted = _outcome(tmp_path)
    assert reported == {"cpu-host::discovery": "passed", "cpu-host::scheduling": "not_applicable",
                        "cpu-host::py::startup": "passed"}
    assert untested == {"cpu-host::scheduling": "not applicable: the local backend cannot prove scheduling",
                        MODEL: "not_run (interrupted before this item finished)",
                        BUSINESS: "not_run (interrupted before this item finished)"}
    assert interrupted is True


def test_ctrl_c_to_the_process_group_while_the_model_runs_interrupts_the_run(tmp_path: Path) -> None:
    """A terminal's Ctrl-C: SIGINT to the whole foreground process group, gate and model alike. The model
    here ends at once with status 0 on SIGINT, so that it races the gate to report a finished run."""
    token = f"hetero-intr-{os.getpid()}-{time.monotonic_ns()}"
    _matrix(tmp_path, ["{python}", "-c", "import signal, sys, time; signal.signal(signal.SIGINT, lambda *a: "
                       f"sys.exit(0)); time.sleep(60)  # {token}"])
    proc = _pytest(tmp_path)
    try:
        deadline = time.monotonic() + 90
        while not _running(token) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)  # past the interpreter's start-up: its SIGINT handler is set
        assert _running(token), "the model run never started"
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 2, out[-3000:]
    reported, untested, interrupted = _outcome(tmp_path)
    assert reported == {"cpu-host::discovery": "passed", "cpu-host::scheduling": "not_applicable",
                        "cpu-host::py::startup": "passed"}
    assert untested == {"cpu-host::scheduling": "not applicable: the local backend cannot prove scheduling",
                        MODEL: "not_run (interrupted before this item finished)",
                        BUSINESS: "not_run (interrupted before this item finished)"}
    assert interrupted is True


def _running(token: str) -> bool:
    import psutil

    for p in psutil.process_iter(["cmdline"]):
        try:
            if token in " ".join(p.info["cmdline"] or []) and "pytest" not in " ".join(p.info["cmdline"] or []):
                return True
        except (psutil.Error, TypeError):
            continue
    return False
