"""Python entry points to ``tests/infra/docker-engine.sh``: a real Docker engine and the offline test images.

Used by the Docker-backend tests (and anything else that needs a live engine)::

    from docker_engine import ensure_docker, ensure_images, ONNX_IMAGE, SHELL_IMAGE
    ensure_docker()            # engine answers `docker info` afterwards
    ids = ensure_images()      # {"pytest-hetero/py311-onnx:1": "sha256:...", ...}

Both call the shell script (bash) in a subprocess. Starting an engine or building images needs root
(apt-get, dockerd, debootstrap); when an engine already answers and has the images, nothing needs
root and both calls return in well under a second. See ``tests/infra/README-docker.md``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().with_name("docker-engine.sh")

ONNX_IMAGE = "pytest-hetero/py311-onnx:1"
"""Debian bookworm minbase, python3.11, python3-numpy 1.24.2, onnxruntime 1.23.2 (CPU)."""

SHELL_IMAGE = "pytest-hetero/shell-only:1"
"""busybox-static 1.35 only: /bin/sh and applets, no python."""

ENSURE_TIMEOUT_S = 300.0
"""Default bound for :func:`ensure_docker`: apt-get install of docker.io (~10 s here) + dockerd start."""

IMAGES_TIMEOUT_S = 1200.0
"""Default bound for :func:`ensure_images`: a cold build takes ~80 s here (debootstrap dominates)."""


class DockerEngineError(RuntimeError):
    """The script failed or timed out; the message carries the tail of its progress log."""


def _run(subcommand: str, timeout: float) -> str:
    """Run ``docker-engine.sh SUBCOMMAND``; return its stdout.

    The script runs in its own session; on timeout the whole process group (bash, debootstrap,
    pip, docker import) gets SIGTERM, then SIGKILL after 15 s. A dockerd it already started is in
    a session of its own, keeps running, and is reused by the next call.

    Raises:
        DockerEngineError: bash is missing, the script exits non-zero, or it runs longer than
            ``timeout`` seconds.
    """
    bash = shutil.which("bash")
    if bash is None:
        raise DockerEngineError("bash not found on PATH; docker-engine.sh needs it")
    proc = subprocess.Popen(
        [bash, str(SCRIPT), subcommand],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        raise DockerEngineError(
            f"{SCRIPT.name} {subcommand} did not finish within {timeout:g}s (killed); last output:\n"
            f"{_tail(err)}"
        ) from None
    if proc.returncode != 0:
        raise DockerEngineError(f"{SCRIPT.name} {subcommand} exited {proc.returncode}:\n{_tail(err)}")
    return out


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    for sig, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def ensure_docker(timeout: float = ENSURE_TIMEOUT_S) -> None:
    """Make sure a Docker engine answers ``docker info``.

    Does nothing when one already answers. Otherwise (root only) installs Debian's ``docker.io``
    if missing and starts ``dockerd`` in the background (overlay2 where it works, else vfs; log
    and pid under ``$HETERO_DOCKER_STATE``, default ``/tmp/hetero-docker``), waiting at most
    ``$HETERO_DOCKER_WAIT`` (default 60) seconds for it to answer.

    Args:
        timeout: seconds the whole script may take (default :data:`ENSURE_TIMEOUT_S`, 300).

    Raises:
        DockerEngineError: not root and no engine; apt-get failed; dockerd exited or did not answer
            in time; or the script exceeded ``timeout`` seconds.
    """
    _run("ensure", timeout)


def ensure_images(timeout: float = IMAGES_TIMEOUT_S) -> dict[str, str]:
    """Make sure the engine runs and holds the test images; return ``{image name: image id}``.

    Calls :func:`ensure_docker`'s logic first. An image already in the engine with the current
    recipe key (label ``org.pytest-hetero.image-key``) is left alone; otherwise it is imported from
    the cached rootfs tarball ``$HETERO_CACHE/images/<name>-<key>.tar`` (default cache
    ``~/.cache/pytest-hetero``), building that tarball first if missing (root; needs Debian apt and
    PyPI). Each newly imported image is verified by running it.

    Image ids change whenever an image is re-imported (``docker import`` records a timestamp), so
    refer to images by name, or use the returned ids within one session only.

    Args:
        timeout: seconds the whole script may take (default :data:`IMAGES_TIMEOUT_S`, 1200).

    Returns:
        Mapping of image name (:data:`ONNX_IMAGE`, :data:`SHELL_IMAGE`) to its ``sha256:`` image id.

    Raises:
        DockerEngineError: as :func:`ensure_docker`, or a build/import/verification failed, or the
            script's output lacked an image line.
    """
    out = _run("images", timeout)
    ids: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "hetero-image":
            ids[parts[1]] = parts[2]
    missing = {ONNX_IMAGE, SHELL_IMAGE} - ids.keys()
    if missing:
        raise DockerEngineError(f"{SCRIPT.name} images did not report {sorted(missing)}; stdout:\n{out}")
    return ids


def engine_answers() -> bool:
    """True when a Docker engine answers a ping through the docker SDK (10 s timeout); False when
    none answers or the SDK is missing. Never raises."""
    try:
        import docker
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=10)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except docker.errors.DockerException:
        return False
