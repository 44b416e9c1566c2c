"""The model server image of the serving tests on the real node: real MLServer serving the digits case.

``pytest-hetero/mlserver-digits:1`` is built offline from the Docker engine's
``pytest-hetero/py311-onnx:1`` (Debian bookworm, Python 3.11; tests/infra/docker-engine.sh images)
and imported into the real node's own containerd the way ``tests/infra/realnode.sh`` imports the test
images (``docker save | ctr -n k8s.io images import``, labelled ``hetero.key=<recipe key>``, pinned so the
kubelet's image GC keeps it). It holds:

- MLServer with its scikit-learn runtime (:data:`servers.MLSERVER_PINS`, the same pins as the local
  serving tests), installed from PyPI wheels for CPython 3.11 manylinux into ``/opt/mlserver/site``
  (``PYTHONPATH``) on the build host, so the build itself needs no network;
- both versions of the digits service, built inside the image by ``cases/digits/serving/build.py``
  (scikit-learn 1.6.1 writes the pickles it loads): ``/opt/models/digits-1.0.0`` and ``digits-2.0.0``;
- ``/opt/models/digits-2.0.1``: a mislabelled release (a copy of 1.0.0, whose settings say 1.0.0), so a
  Deployment asked for 2.0.1 serves a model reporting 1.0.0 (``wrong_model_version``);
- ``/opt/hetero-serving/serve [VERSION [PORT]]`` (the image's command): the serving container contract
  of the Kubernetes engine (:mod:`pytest_hetero.backends.kubernetes.serving`): MLServer serving
  ``digits-VERSION`` (default ``$HETERO_SERVING_VERSION``) and, when ``$HETERO_SERVING_TOKEN`` is set,
  the bearer-token gate of the local tests (tests/serving/authproxy.py) in front of it on
  ``0.0.0.0:PORT`` (default ``$HETERO_SERVING_PORT``, else 8080) with ``/v2/health/`` open for the
  kubelet's readiness probe; MLServer then listens on the pod's loopback only. A version the image
  does not hold exits 2 with the versions it has.

The recipe key hashes the Dockerfile, the files copied in and the pins; it does not track the
versions pip resolves for unpinned dependencies (delete the image to refresh them).

By hand: ``python tests/kubernetes/servingimage.py`` (root, real node started) builds and imports it.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests"))
from serving.servers import MLSERVER_PINS  # noqa: E402 - tests/ on the path first

IMAGE = "pytest-hetero/mlserver-digits:1"
BASE = "pytest-hetero/py311-onnx:1"
SITE = "/opt/mlserver/site"

SERVE = """#!/bin/sh
# serve [VERSION [PORT]]: MLServer serving the digits model VERSION (default $HETERO_SERVING_VERSION) on PORT
# (default $HETERO_SERVING_PORT, else 8080); behind the bearer-token gate on 0.0.0.0:PORT when
# $HETERO_SERVING_TOKEN is set (MLServer then on 127.0.0.1:8081), else on 0.0.0.0:PORT.
set -eu
version=${1:-${HETERO_SERVING_VERSION:?usage: serve VERSION [PORT], or set HETERO_SERVING_VERSION}}
port=${2:-${HETERO_SERVING_PORT:-8080}}
model=/opt/models/digits-$version
if [ ! -d "$model" ]; then
    echo "serve: this image holds no digits model $version (it has: $(ls /opt/models | tr '\\n' ' '))" >&2
    exit 2
fi
mkdir -p /tmp/models
ln -sfn "$model" /tmp/models/digits
export MLSERVER_PARALLEL_WORKERS=0 MLSERVER_DEBUG=false MLSERVER_GRPC_PORT=8085 MLSERVER_METRICS_PORT=8086
if [ -n "${HETERO_SERVING_TOKEN:-}" ]; then
    MLSERVER_HOST=127.0.0.1 MLSERVER_HTTP_PORT=8081 mlserver start /tmp/models &
    HETERO_GATE_TOKEN=$HETERO_SERVING_TOKEN exec python3 /opt/hetero-serving/authproxy.py \\
        --upstream http://127.0.0.1:8081 --port "$port" --host 0.0.0.0 --open /v2/health/
fi
MLSERVER_HOST=0.0.0.0 MLSERVER_HTTP_PORT=$port exec mlserver start /tmp/models
"""

MLSERVER = """#!/usr/bin/python3
import sys
from mlserver.cli import main
sys.exit(main())
"""

DOCKERFILE = f"""FROM {BASE}
COPY site/ {SITE}/
COPY mlserver /usr/local/bin/mlserver
COPY hetero-serving/ /opt/hetero-serving/
ENV PYTHONPATH={SITE}
RUN python3 /opt/hetero-serving/build.py /opt/models && python3 -c "import mlserver_sklearn" \\
    && cp -r /opt/models/digits-1.0.0 /opt/models/digits-2.0.1
CMD ["/opt/hetero-serving/serve"]
"""


def files() -> dict[str, str]:
    """Build-context files (relative path → text), besides the pip-installed ``site/``."""
    return {
        "mlserver": MLSERVER,
        "hetero-serving/serve": SERVE,
        "hetero-serving/authproxy.py": (REPO / "tests" / "serving" / "authproxy.py").read_text(),
        "hetero-serving/build.py": (REPO / "cases" / "digits" / "serving" / "build.py").read_text(),
    }


def recipe_key() -> str:
    """First 12 hex digits of the sha256 of the Dockerfile, the context files and the pins."""
    text = DOCKERFILE + "".join(f"\0{k}\0{v}" for k, v in sorted(files().items())) + "\0".join(MLSERVER_PINS)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _run(*argv: str, data: bytes | None = None, timeout: float = 900) -> str:
    done = subprocess.run(list(argv), input=data, capture_output=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} … exited {done.returncode}: {done.stderr.decode()[-3000:]}")
    return done.stdout.decode()


def _key_in_containerd(socket: Path) -> str:
    out = _run("ctr", "--address", str(socket), "-n", "k8s.io", "images", "ls", f"name==docker.io/{IMAGE}")
    for line in out.splitlines()[1:]:
        for label in line.split()[-1].split(","):
            if label.startswith("hetero.key="):
                return label.split("=", 1)[1]
    return ""


def _key_in_docker() -> str:
    done = subprocess.run(["docker", "image", "inspect", "-f", '{{ index .Config.Labels "hetero.key" }}', IMAGE],
                          capture_output=True, text=True, timeout=60, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def build(key: str) -> None:
    """Build the image in the Docker engine (label ``hetero.key=key``): wheels from PyPI into the context,
    then ``docker build --network none``. Raises RuntimeError with the failing step's output."""
    with tempfile.TemporaryDirectory(prefix="hetero-serving-image-") as tmp:
        root = Path(tmp)
        _run(sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--disable-pip-version-check",
             "--target", str(root / "site"), "--python-version", "3.11", "--implementation", "cp",
             "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
             "--platform", "manylinux2014_x86_64", "--only-binary=:all:", *MLSERVER_PINS)
        (root / "Dockerfile").write_text(DOCKERFILE + f'LABEL hetero.key="{key}"\n')
        for rel, text in files().items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
            (root / rel).chmod(0o755 if text.startswith("#!") else 0o644)  # COPY keeps the mode
        _run("docker", "build", "-q", "--network", "none", "-t", IMAGE, str(root))


LOCK = Path("/tmp/hetero-serving-image.lock")
"""Held while the image is checked, built and imported: pytest-xdist workers and parallel sessions on
this machine share the Docker engine and the node's containerd."""


def ensure(socket: Path) -> str:
    """Build the image when its recipe changed and import it into the containerd at ``socket``; return its
    reference. Raises RuntimeError (docker, pip or ctr output attached) when a step fails, naming
    ``tests/infra/docker-engine.sh images`` when the base image is missing."""
    import fcntl

    with open(LOCK, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            return _ensure(socket)
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _ensure(socket: Path) -> str:
    key = recipe_key()
    if _key_in_containerd(socket) == key:
        return IMAGE
    if _key_in_docker() != key:
        base = subprocess.run(["docker", "image", "inspect", BASE], capture_output=True, timeout=60, check=False)
        if base.returncode != 0:
            raise RuntimeError(f"base image {BASE} is not in the Docker engine: run tests/infra/docker-engine.sh images")
        build(key)
    image = subprocess.run(["docker", "save", IMAGE], capture_output=True, timeout=600, check=True).stdout
    ctr = ("ctr", "--address", str(socket), "-n", "k8s.io", "images")
    _run(*ctr, "import", "--snapshotter", "overlayfs", "-", data=image)
    _run(*ctr, "label", f"docker.io/{IMAGE}", f"hetero.key={key}", "io.cri-containerd.pinned=pinned")
    return IMAGE


if __name__ == "__main__":
    import os

    print(ensure(Path(os.environ.get("HETERO_REALNODE_CONTAINERD", "/tmp/hetero-realnode/containerd/containerd.sock"))))
