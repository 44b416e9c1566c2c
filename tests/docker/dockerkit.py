"""Helpers of the Docker-backend tests: the infra module, matrices on the digits case, evidence readers."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import ctrl_c_reaches

docker = pytest.importorskip("docker", reason="docker SDK (pip install docker>=7) is required")

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
RUN_LABEL = "pytest-hetero.run-id"
IN_CI = os.environ.get("CI", "").lower() == "true"


def _engine_module() -> Any:
    path = TESTS / "infra" / "docker_engine.py"
    spec = importlib.util.spec_from_file_location("hetero_tests_docker_engine", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


infra = _engine_module()
ONNX_IMAGE: str = infra.ONNX_IMAGE
SHELL_IMAGE: str = infra.SHELL_IMAGE


engine_answers = infra.engine_answers


def leftovers(api: Any, run_id: str) -> list[str]:
    """Names of containers, plus ids of images and volumes, still labelled with ``run_id``."""
    flt = {"label": f"{RUN_LABEL}={run_id}"}
    names = [c["Names"][0] for c in api.containers(all=True, filters=flt)]
    names += [i["Id"] for i in api.images(all=True, filters=flt)]
    names += [v["Name"] for v in api.volumes(filters=flt).get("Volumes") or []]
    return names


@pytest.fixture(scope="session")
def engine() -> Iterator[Any]:
    """A ``docker.APIClient`` to a live engine holding ``ONNX_IMAGE`` and ``SHELL_IMAGE``."""
    if not engine_answers() and not (hasattr(os, "geteuid") and os.geteuid() == 0):
        reason = "no Docker engine answers and not root, so tests/infra/docker-engine.sh cannot start one"
        if IN_CI:
            pytest.fail(f"CI=true: {reason}")
        pytest.skip(reason)
    infra.ensure_docker()
    infra.ensure_images()
    api = docker.APIClient(**{**docker.utils.kwargs_from_env(), "timeout": 120})
    yield api
    api.close()


@pytest.fixture
def run_id(engine: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh run id for one test; whatever still carries it afterwards is removed (and the test
    that left it is told: leftovers are a failure of the backend's cleanup, asserted in the tests)."""
    value = "t" + os.urandom(5).hex()
    yield value
    for name in leftovers(engine, value):
        try:
            if name.startswith("sha256:"):
                engine.remove_image(name, force=True)
            elif name.startswith("/"):
                engine.remove_container(name, force=True, v=True)
            else:
                engine.remove_volume(name, force=True)
        except docker.errors.NotFound:
            pass


DIGITS = REPO / "cases" / "digits"
MODEL_SHA = "d2230a9096140b09d443879ca3b0d7cb0021917896a8f462f79806de1109b523"
DATA_SHA = "3678e2fa8f107ffa5d8518cc07a46b9e4ce67e89d65b2f88e4c391638d965bfb"
COMBO = "digits-logreg@digits-test"
CPU = {"name": "cpu", "type": "cpu", "requests": {"cpu": 1, "memory": "512Mi"}}
ENTRYPOINT = ["{python}", "{code}/infer.py", "--model", "{model}", "--data", "{dataset}", "--out", "{outputs}",
              "--provider", "{provider}"]


def docker_matrix(*, resources: list[dict[str, Any]] | None = None, image: str = ONNX_IMAGE,
                  entrypoint: list[str] | None = None, model_sha: str = MODEL_SHA, runtime: str = "onnxruntime",
                  target: dict[str, Any] | None = None, layers: dict[str, Any] | None = None,
                  datasets: int = 1, name: str = "d", acceptance: Path | None = None) -> str:
    """A docker-backend ValidationMatrix on the real digits case (absolute paths), as JSON text.

    ``datasets`` > 1 adds copies of the digits dataset under other names (same file), so one
    container serves several model × dataset items.
    """
    ds: list[dict[str, Any]] = [{"name": f"digits-test{'' if i == 0 else i}", "version": "1.0.0",
           "uri": str(DIGITS / "data" / "digits-test-1.0.0.csv"), "sha256": DATA_SHA,
           "acceptance": str(acceptance or DIGITS / "acceptance.yaml")} for i in range(datasets)]
    if acceptance is None:  # the digits rules judge gate-computed metrics: the label column is the truth
        for d in ds:
            d["truth"] = {"task": "classification", "target": "label", "id": "index"}
    spec = {
        "target": {"backend": "docker", "pull_policy": "never", **(target or {})},
        "layers": layers or {"startup": {"timeout": "60s"}, "model": {"timeout": "60s"}},
        "resources": resources or [CPU],
        "images": [{"name": "img", "reference": image, "for": ["cpu", "gpu", "npu"]}],
        "models": [{"name": "digits-logreg", "version": "1.0.0", "uri": str(DIGITS / "model" /
                    "digits-logreg-1.0.0.onnx"), "sha256": model_sha, "code": str(DIGITS), "runtime": runtime,
                    "entrypoint": entrypoint or ENTRYPOINT}],
        "datasets": ds,
    }
    doc = {"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": name}, "spec": spec}
    return json.dumps(doc, indent=2)


def evidence(pytester: pytest.Pytester) -> dict[str, Any]:
    """The evidence.json of the single bundle a pytester run wrote under ``reports/``."""
    bundles = sorted((pytester.path / "reports").iterdir())
    assert len(bundles) == 1, bundles
    return dict(json.loads((bundles[0] / "evidence.json").read_text()))


def items(ev: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Reported items by nodeid without the matrix-file prefix."""
    return {i["nodeid"].split("::", 1)[1]: i for i in ev["items"]}


def statuses(ev: dict[str, Any]) -> dict[str, str]:
    """nodeid (without the matrix-file prefix) → status, over reported and untested items."""
    out = {i["nodeid"].split("::", 1)[1]: i["status"] for i in ev["untested"]["items"]}
    out.update({k: v["status"] for k, v in items(ev).items()})
    return out


def record(item: dict[str, Any], kind: str) -> dict[str, Any]:
    """The data of the first record of ``kind`` on an item (KeyError naming the kinds present)."""
    for r in item["records"]:
        if r["kind"] == kind:
            return dict(r["data"])
    raise KeyError(f"{kind} not in {[r['kind'] for r in item['records']]}")


def failure(item: dict[str, Any]) -> tuple[str, str, str, str]:
    """``(status, category, owner, message)`` of an item."""
    f = item["failure"] or {}
    return item["status"], f.get("category", ""), f.get("owner", ""), f.get("message", "")


def interrupted(cwd: Path, argv: list[str], ready: Callable[[], bool], sig: int, wait_s: float = 90.0
                ) -> tuple[int, str]:
    """Run ``python -m pytest ARGV`` in ``cwd`` as a real process that a Ctrl-C reaches, poll ``ready()`` every
    0.2 s until it is true (AssertionError when ``wait_s`` seconds pass or the process ends first), then send it
    ``sig``; its exit status and output (stdout and stderr). The process is killed if it outlives the test."""
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *argv], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            preexec_fn=ctrl_c_reaches)
    try:
        deadline = time.monotonic() + wait_s
        while not ready():
            assert time.monotonic() < deadline and proc.poll() is None, "the gate never got where it was awaited"
            time.sleep(0.2)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out
