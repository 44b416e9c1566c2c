"""``hetero doctor [MATRIX…]`` on this real machine: what each matrix's engines need, each missing piece with its
fix, exit 1 when something required is missing. Faults are real: a PATH without bubblewrap, a Docker socket
nobody listens on, a kubeconfig whose apiserver does not answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import docker
import docker.utils
import pytest
from smallcase import matrix, write_case
from support import REPO

IN_CI = os.environ.get("CI", "").lower() == "true"


def doctor(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "pytest_hetero.cli", "doctor", *args], capture_output=True,
                          text=True, cwd=cwd, env=full, timeout=120)


def small(tmp_path: Path, backend: str = "local", types: tuple[str, ...] = ("cpu",), **target: object) -> Path:
    write_case(tmp_path / "case")
    doc = json.loads(matrix(tmp_path / "case", "case"))
    doc["spec"]["target"] = {"backend": backend, **target}
    requests = {"cpu": {"cpu": 1}, "gpu": {"nvidia.com/gpu": 1}, "npu": {"huawei.com/Ascend910": 1}}
    doc["spec"]["resources"] = [{"name": f"r-{t}", "type": t, "requests": requests[t]} for t in types]
    doc["spec"]["images"][0]["for"] = list(types)
    path = tmp_path / f"{backend}.matrix.yaml"
    path.write_text(json.dumps(doc))
    return path


def test_a_cpu_matrix_on_this_machine_needs_nothing_more(tmp_path: Path) -> None:
    done = doctor(str(small(tmp_path)))
    assert done.stdout.splitlines()[0] == f"ok      bubblewrap (sandbox of the code under test): " \
                                          f"{shutil.which('bwrap')} creates its namespaces"
    assert (done.returncode, done.stdout.splitlines()[-1]) == (0, f"nothing missing for {tmp_path}/local.matrix.yaml")


def test_the_example_matrix_needs_nvidia_smi_for_its_gpu_row() -> None:
    if shutil.which("nvidia-smi"):
        pytest.fail("this test expects a host without an NVIDIA driver, as the example's failing GPU row does")
    done = doctor("matrices/example-cpu.matrix.yaml")
    lines = done.stdout.splitlines()
    assert lines[1:3] == ["MISSING nvidia-smi (NVIDIA devices on this host): nvidia-smi is not on PATH",
                          "        fix: install the NVIDIA driver (nvidia-smi comes with it)"]
    assert (done.returncode, lines[-1]) == (1, "1 missing")


def test_without_bubblewrap_the_fix_is_named(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    done = doctor(str(small(tmp_path)), env={"PATH": str(empty)})
    assert done.stdout.splitlines()[:2] == ["MISSING bubblewrap (sandbox of the code under test): bwrap is not on PATH",
                                            "        fix: apt-get install bubblewrap"]
    assert done.returncode == 1


def test_a_docker_engine_nobody_answers(tmp_path: Path) -> None:
    sock = tmp_path / "nobody.sock"
    done = doctor(str(small(tmp_path, "docker", docker_host=f"unix://{sock}")))
    lines = done.stdout.splitlines()
    engine = next(i for i, line in enumerate(lines) if "Docker engine" in line)
    assert lines[engine].startswith(f"MISSING Docker engine: no answer from unix://{sock}: ")
    assert lines[engine + 1].startswith("        fix: start dockerd (apt-get install docker.io; systemctl start docker)")
    assert done.returncode == 1


def test_the_real_engine_without_an_nvidia_runtime(tmp_path: Path) -> None:
    try:
        info = docker.APIClient(timeout=10, **docker.utils.kwargs_from_env()).info()
    except Exception as exc:  # noqa: BLE001
        if IN_CI:
            pytest.fail(f"CI=true: no Docker engine answers ({exc}); tests/run.sh starts one")
        pytest.skip(f"no Docker engine answers: {exc}")
    runtimes = sorted(info.get("Runtimes") or {})
    if "nvidia" in runtimes:
        pytest.fail("this engine has the NVIDIA runtime: the test expects the test rig's engine without it")
    done = doctor(str(small(tmp_path, "docker", ("cpu", "gpu"))))
    lines = done.stdout.splitlines()
    assert f"ok      Docker engine: {info['ServerVersion']}; runtimes: {', '.join(runtimes)}" in lines
    assert f"MISSING NVIDIA container runtime: runtime 'nvidia' not among {', '.join(runtimes)}" in lines
    assert not any("Ascend container runtime" in line for line in lines)  # no npu resource: not asked
    assert (done.returncode, lines[-1]) == (1, "1 missing")


def test_a_kube_context_whose_apiserver_does_not_answer(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "gone", "cluster": {"server": "https://127.0.0.1:9"}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u", "namespace": "gate"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    done = doctor(str(small(tmp_path, "kubernetes")), env={"KUBECONFIG": str(kubeconfig)})
    lines = done.stdout.splitlines()
    assert "ok      Kubernetes context: gone (namespace gate)" in lines
    apiserver = next(i for i, line in enumerate(lines) if "Kubernetes apiserver" in line)
    assert lines[apiserver].startswith("MISSING Kubernetes apiserver: no answer: ")
    assert lines[apiserver + 1] == "        fix: check the kubeconfig's server address, the network and the credentials"
    assert done.returncode == 1


def test_a_matrix_that_does_not_load_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.matrix.yaml"
    bad.write_text("apiVersion: pytest-hetero/v1\nkind: Matrix\n")
    done = doctor(str(bad))
    assert done.returncode == 2 and done.stderr.startswith(f"hetero doctor: 3 problems in {bad}:\n")
    assert f"{bad}:2:7: field 'kind': 'ValidationMatrix' was expected" in done.stderr


def test_the_engine_answer_is_read_as_its_declared_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """check_docker reads ServerVersion and Runtimes of the engine's GET /info (doctor._EngineInfo): an answer
    without them reads ``?`` and no runtime; extra fields are ignored."""
    from pytest_hetero.cli.doctor import check_docker

    answers: list[dict[str, object]] = [{"ServerVersion": "27.5.1", "Runtimes": {"runc": {}, "nvidia": {}},
                                         "Driver": "overlay2"}, {"Runtimes": None}]

    class Engine:
        def __init__(self, **_: object) -> None:
            pass

        def info(self) -> dict[str, object]:
            return answers.pop(0)

    monkeypatch.setattr(docker, "APIClient", Engine)
    assert [(c.status, c.what, c.detail) for c in check_docker({}, {"gpu"})] == [
        ("ok", "Docker engine", "27.5.1; runtimes: nvidia, runc"),
        ("ok", "NVIDIA container runtime", "runtime 'nvidia' registered")]
    assert [(c.status, c.detail) for c in check_docker({}, {"cpu"})] == [("ok", "?; runtimes: none")]
