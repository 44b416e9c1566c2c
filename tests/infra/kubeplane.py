"""Python handle on the local Kubernetes control plane run by ``kubeplane.sh``.

The plane is real etcd + kube-apiserver + kube-controller-manager +
kube-scheduler built from the Go module proxy, with KWOK simulating nodes.
See ``tests/infra/README.md`` for versions, ports and timings.

Typical use in a test module::

    from infra.kubeplane import ensure_plane  # or load by path
    kubeconfig = ensure_plane()               # Path to an admin kubeconfig
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).with_name("kubeplane.sh")

#: Annotation that makes KWOK manage a Node (heartbeats, pod lifecycle,
#: exec/logs). Nodes without it are ignored by KWOK.
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")

#: Cold builds take tens of minutes on 2 cores; warm starts a few seconds.
DEFAULT_BUILD_TIMEOUT_S = 3600.0
DEFAULT_START_TIMEOUT_S = 300.0


class PlaneUnavailable(RuntimeError):
    """The plane cannot be built here (no Go toolchain and no cached binaries)."""


class PlaneFailed(RuntimeError):
    """``kubeplane.sh`` exited non-zero; the message carries its output tail."""


def go_binary() -> str | None:
    """Return the path of a usable ``go`` binary, or None when there is none.

    ``$GO``, when set, is authoritative (``GO=none`` means "no Go"); otherwise
    looks at ``PATH``, then ``/usr/local/go/bin/go``.
    """
    if "GO" in os.environ:
        go = os.environ["GO"]
        return go if go and os.access(go, os.X_OK) else None
    for cand in (shutil.which("go"), "/usr/local/go/bin/go"):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def _run(sub: str, timeout_s: float) -> str:
    """Run ``kubeplane.sh SUB``; return stdout.

    Raises:
        PlaneFailed: non-zero exit or timeout (message holds the last 4000
            characters of stdout+stderr).
    """
    env = dict(os.environ)
    go = go_binary()
    if go:
        env["GO"] = go
    try:
        proc = subprocess.run(
            ["bash", str(SCRIPT), sub], env=env, capture_output=True,
            text=True, timeout=timeout_s, check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise PlaneFailed(f"kubeplane.sh {sub} timed out after {timeout_s:.0f}s") from exc
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-4000:]
        raise PlaneFailed(f"kubeplane.sh {sub} exited {proc.returncode}:\n{tail}")
    return proc.stdout


def binaries_cached() -> bool:
    """True when all five binaries are already in the cache (no Go needed)."""
    bindir = Path(_run("bindir", 30).strip())
    names = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
    return all(os.access(bindir / n, os.X_OK) for n in names)


def kubeconfig_path() -> Path:
    """Admin kubeconfig path (``$HETERO_KUBE_STATE/admin.kubeconfig``).

    The file exists only while/after the plane has been started; it embeds a
    client certificate in group ``system:masters``.
    """
    line = _run("env", 30).strip()  # "export KUBECONFIG=/path"
    return Path(line.split("=", 1)[1])


def ensure_plane(build_timeout_s: float = DEFAULT_BUILD_TIMEOUT_S,
                 start_timeout_s: float = DEFAULT_START_TIMEOUT_S) -> Path:
    """Build (if needed) and start (if not running) the plane.

    Idempotent: with cached binaries and a healthy plane this takes well under
    a second. Timeouts are in seconds.

    Returns:
        Path to the admin kubeconfig.

    Raises:
        PlaneUnavailable: Go is missing and nothing is cached.
        PlaneFailed: the build or start failed or timed out.
    """
    if go_binary() is None and not binaries_cached():
        raise PlaneUnavailable("Go toolchain not found (needed once to build the Kubernetes plane)")
    _run("build", build_timeout_s)
    _run("start", start_timeout_s)
    return kubeconfig_path()


def stop_plane() -> None:
    """Stop all components (logs stay in the state dir). Safe when not running."""
    _run("stop", 120)
