"""Python handle on the real node (``realnode.sh``) and the real Kueue (``kueue.sh``) on its plane.

The real node is a kubelet + containerd + CNI + the test device plugin on a kubeplane.sh plane of
its own (state ``$HETERO_REALNODE_STATE/plane``, default ``/tmp/hetero-realnode/plane``), so the
KWOK plane other tests use never sees it. See ``tests/infra/README.md`` ("Real node").

Typical use::

    node = ensure_realnode()          # RealNode(kubeconfig=..., node="hetero-realnode", ...)
    kueue = ensure_kueue()            # Kueue(version="v0.19.2", webhook_url=...)
    node.control("nvidia.com/gpu", "unhealthy").write_text("3\\n")   # device 3 Unhealthy

Every call is serialised with ``flock`` by the scripts, so pytest-xdist workers may all call it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REALNODE_SH = HERE / "realnode.sh"
KUEUE_SH = HERE / "kueue.sh"

#: Cold builds: kubelet ~2 min in the plane's Go build cache, ~8 min alone; Kueue ~10 min.
DEFAULT_BUILD_TIMEOUT_S = 3600.0
DEFAULT_START_TIMEOUT_S = 600.0


class RealNodeUnavailable(RuntimeError):
    """The real node cannot run here: not root, or no Go toolchain and nothing cached."""


class RealNodeFailed(RuntimeError):
    """``realnode.sh`` / ``kueue.sh`` exited non-zero; the message carries its output tail."""


@dataclass(frozen=True)
class RealNode:
    """What a test needs to place pods on the real node and drive its fake devices.

    Attributes:
        kubeconfig: admin kubeconfig of the real node's own plane (``system:masters``).
        node: the Node name (``hetero-realnode`` unless ``HETERO_REALNODE_NAME``).
        taint: the taint it registers with, ``{"key", "value", "effect"}`` (NoSchedule).
        toleration: the matching pod toleration.
        node_selector: a nodeSelector that lands a pod there (``hetero-test/real-node: "true"``).
        containerd_socket: its containerd's socket (``ctr --address``; never the Docker engine's).
        device_plugin_state: the test device plugin's state dir (``control/``, ``dev/``,
            ``allocations.jsonl``).
        gpus / npus: device counts the plugin registers (``nvidia.com/gpu``, ``huawei.com/Ascend910``).
    """

    kubeconfig: Path
    node: str
    taint: dict[str, str]
    toleration: dict[str, str]
    node_selector: dict[str, str]
    containerd_socket: Path
    device_plugin_state: Path
    gpus: int
    npus: int

    def control(self, resource: str, name: str) -> Path:
        """Path of a device-plugin control file (``unhealthy``, ``allocate-error``,
        ``extra-devices``, ``missing-driver``) for ``resource`` (e.g. ``nvidia.com/gpu``).

        The plugin polls it every 300 ms; remove the file to undo.
        """
        return self.device_plugin_state / "control" / resource.replace("/", "_") / name


@dataclass(frozen=True)
class Kueue:
    """The running Kueue: ``version`` (e.g. ``v0.19.2``), its ``feature_gates`` (name -> on) and
    its loopback ``webhook_url``."""

    version: str
    feature_gates: dict[str, bool]
    webhook_url: str


def _go_available() -> bool:
    if "GO" in os.environ:
        go = os.environ["GO"]
        return bool(go) and os.access(go, os.X_OK)
    return any(c and os.access(c, os.X_OK) for c in (shutil.which("go"), "/usr/local/go/bin/go"))


def _run(script: Path, *args: str, timeout_s: float) -> str:
    try:
        proc = subprocess.run(["bash", str(script), *args], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise RealNodeFailed(f"{script.name} {' '.join(args)} timed out after {timeout_s:.0f}s") from exc
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-4000:]
        raise RealNodeFailed(f"{script.name} {' '.join(args)} exited {proc.returncode}:\n{tail}")
    return proc.stdout


def _env() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in _run(REALNODE_SH, "env", timeout_s=30).splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        out[key] = value
    return out


def _check_available() -> None:
    if os.geteuid() != 0:
        raise RealNodeUnavailable("the real node needs root (kubelet, containerd, mknod, CNI)")
    cache = Path(os.environ.get("HETERO_CACHE", Path.home() / ".cache/pytest-hetero"))
    if not _go_available() and not any((cache / "realnode").glob("kubelet-*/kubelet")):
        raise RealNodeUnavailable("Go toolchain not found and no cached kubelet (needed once to build)")


def ensure_realnode(build_timeout_s: float = DEFAULT_BUILD_TIMEOUT_S,
                    start_timeout_s: float = DEFAULT_START_TIMEOUT_S) -> RealNode:
    """Build (if needed) and start (if not healthy) the plane, containerd, kubelet and device plugin.

    Idempotent; about a second when everything is up. Restarts only what is down (e.g. after
    :func:`stop_kubelet`).

    Raises:
        RealNodeUnavailable: not root, or Go missing with nothing cached.
        RealNodeFailed: a build or start step failed or timed out.
    """
    _check_available()
    _run(REALNODE_SH, "build", timeout_s=build_timeout_s)
    _run(REALNODE_SH, "start", timeout_s=start_timeout_s)
    env = _env()
    key, _, rest = env["HETERO_REALNODE_TAINT"].partition("=")
    value, _, effect = rest.partition(":")
    return RealNode(
        kubeconfig=Path(env["KUBECONFIG"]),
        node=env["HETERO_REALNODE_NODE"],
        taint={"key": key, "value": value, "effect": effect},
        toleration={"key": key, "operator": "Equal", "value": value, "effect": effect},
        node_selector={key: value},
        containerd_socket=Path(env["HETERO_REALNODE_CONTAINERD"]),
        device_plugin_state=Path(env["HETERO_REALNODE_DEVICEPLUGIN"]),
        gpus=int(env["HETERO_REALNODE_GPUS"]),
        npus=int(env["HETERO_REALNODE_NPUS"]),
    )


def ensure_kueue(build_timeout_s: float = DEFAULT_BUILD_TIMEOUT_S,
                 start_timeout_s: float = DEFAULT_START_TIMEOUT_S) -> Kueue:
    """Ensure the real node's plane (see :func:`ensure_realnode`), then build and start Kueue.

    Raises the same errors as :func:`ensure_realnode`.
    """
    ensure_realnode(build_timeout_s, start_timeout_s)
    _run(KUEUE_SH, "build", timeout_s=build_timeout_s)
    _run(KUEUE_SH, "start", timeout_s=start_timeout_s)
    version = _run(KUEUE_SH, "version", timeout_s=30).strip()
    status = _run(KUEUE_SH, "status", timeout_s=30)
    found = re.search(r"feature gates (\S*), webhooks (\S+)", status)
    if not found:
        raise RealNodeFailed(f"kueue.sh status said: {status!r}")
    gates = (g.partition("=") for g in found.group(1).split(",") if g)
    return Kueue(version=version, feature_gates={k: v == "true" for k, _, v in gates},
                 webhook_url=found.group(2))


def stop_kubelet() -> None:
    """Stop only the kubelet (the node turns NotReady after the real node plane's 12 s grace period (realnode.sh));
    :func:`ensure_realnode` starts it again."""
    _run(REALNODE_SH, "stop-kubelet", timeout_s=120)


def stop_realnode() -> None:
    """Stop Kueue, the node's pods, device plugin, kubelet, containerd and the plane; unmount the
    kubelet's root dir. Safe when nothing runs."""
    _run(REALNODE_SH, "stop", timeout_s=300)
