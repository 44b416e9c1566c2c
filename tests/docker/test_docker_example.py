"""matrices/example-docker.matrix.yaml end to end on the real engine (a pytest subprocess, as CI runs it),
plus backend selection and connection."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dockerkit import (
    COMBO,
    ONNX_IMAGE,
    REPO,
    docker_matrix,
    evidence,
    failure,
    items,
    leftovers,
    record,
    statuses,
)

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def test_example_docker_matrix_end_to_end(tmp_path: Path, run_id: str, engine: Any) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "matrices/example-docker.matrix.yaml", "-p", "no:cacheprovider",
         "--hetero-run-id", run_id, "--hetero-report-dir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ev = json.loads((tmp_path / run_id / "evidence.json").read_text())
    combo = f"cpu-2c::py311-onnx::{COMBO}"
    assert statuses(ev) == {"cpu-2c::discovery": "passed", "cpu-2c::scheduling": "passed",
                            "cpu-2c::py311-onnx::startup": "passed", f"{combo}::model": "passed",
                            f"{combo}::business": "passed"}
    it = items(ev)
    engine_facts = record(it["cpu-2c::discovery"], "discovery.engine")
    assert engine_facts["server_version"] == engine.version()["Version"]
    assert engine_facts["runtimes"] == sorted(engine.info()["Runtimes"])
    assert record(it["cpu-2c::discovery"], "discovery.engine_can_satisfy") == {"resource": "cpu-2c", "ok": True,
                                                                               "gaps": []}
    alloc = record(it["cpu-2c::scheduling"], "scheduling.allocation")
    assert {k: alloc["allocated"][k] for k in ("NanoCpus", "Memory", "MemorySwap")} == {
        "NanoCpus": 2_000_000_000, "Memory": 536870912, "MemorySwap": 536870912}
    assert alloc["runtime_outcome"] == ("runtime set up cgroups and devices; exec of the absent probe program "
                                        "failed as intended")
    assert record(it["cpu-2c::scheduling"], "scope.not_proven") == {
        "layer": "scheduling", "part": "queue/quota", "queue": None, "priority_class": None,
        "reason": "a Docker host has no queues, quotas or priority classes; admission and quota are not proven here"}
    container = record(it["cpu-2c::py311-onnx::startup"], "startup.container")
    assert container["name"] == f"hetero-{run_id}-cpu-2c-py311-onnx"
    assert {k: v for k, v in container["labels"].items() if k != "pytest-hetero.created-at"
            and k != "pytest-hetero.owner"} == {
        "pytest-hetero.run-id": run_id, "pytest-hetero.role": "workload", "pytest-hetero.matrix": "example-docker",
        "pytest-hetero.resource": "cpu-2c", "pytest-hetero.image": "py311-onnx"}
    assert sorted((m["target"], m["read_only"]) for m in container["mounts"]) == [
        ("/hetero/code/digits-logreg", True), ("/hetero/datasets/digits-test/digits-test-1.0.0.csv", True),
        ("/hetero/models/digits-logreg/digits-logreg-1.0.0.onnx", True)]
    image = record(it["cpu-2c::py311-onnx::startup"], "startup.image")
    assert (image["reference"], image["pulled"], image["digest"]) == (
        ONNX_IMAGE, False, engine.inspect_image(ONNX_IMAGE)["Id"])
    init = record(it["cpu-2c::py311-onnx::startup"], "startup.device_init")
    assert (init["findings"], init["wanted_provider"], "CPUExecutionProvider" in init["providers"]) == (
        [], "CPUExecutionProvider", True)
    run = record(it[f"{combo}::model"], "model.run")
    assert (run["exit_code"], run["container_id"]) == (0, container["id"])
    assert run["argv"][:2] == ["python3", "/hetero/code/digits-logreg/infer.py"]
    assert run["stdout"]["text"] == "360 samples, provider CPUExecutionProvider\n"
    rules = record(it[f"{combo}::business"], "business.rules")["results"]
    assert [(r["name"], r["verdict"]) for r in rules] == [  # cases/digits/acceptance.yaml, in its order
        ("accuracy-floor", "pass"), ("macro-f1-floor", "pass"), ("golden-samples", "pass"),
        ("per-sample-time", "pass"), ("mean-confidence", "pass"), ("latency-p95", "pass")]
    assert leftovers(engine, run_id) == []


def test_backend_selected_on_the_command_line(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    """A matrix that says ``backend: local`` runs in the container with ``--hetero-backend docker``."""
    text = json.loads(docker_matrix())
    text["spec"]["target"] = {"backend": "local"}
    pytester.makefile(".matrix.yaml", d=json.dumps(text))
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "--hetero-backend", "docker")
    result.assert_outcomes(passed=5)
    model = items(evidence(pytester))[f"cpu::img::{COMBO}::model"]
    assert record(model, "model.run")["container"] == f"hetero-{run_id}-cpu-img"
    assert leftovers(engine, run_id) == []


def test_unreachable_engine_is_an_error_not_a_failure(pytester: pytest.Pytester, run_id: str,
                                                     tmp_path: Path) -> None:
    sock = tmp_path / "none.sock"
    pytester.makefile(".matrix.yaml", d=docker_matrix(target={"docker_host": f"unix://{sock}"}))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id)
    ev = evidence(pytester)
    assert statuses(ev)["cpu::discovery"] == "error"
    status, category, owner, message = failure(items(ev)["cpu::discovery"])
    assert (status, category, owner) == ("error", "engine_unreachable", "infrastructure")
    assert message.startswith(f"Docker engine at unix://{sock} does not answer: ")


def test_docker_host_from_the_environment(pytester: pytest.Pytester, run_id: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``DOCKER_HOST`` is honoured when the matrix names no engine (here: the real local socket)."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/docker.sock")
    pytester.makefile(".matrix.yaml", d=docker_matrix())
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "discovery")
    ev = evidence(pytester)
    assert statuses(ev)["cpu::discovery"] == "passed"
    assert record(items(ev)["cpu::discovery"], "discovery.engine")["engine_host_local"] is True
