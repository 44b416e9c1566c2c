"""Real-engine tests for the Docker test infrastructure (tests/infra/docker-engine.sh).

Everything here talks to a live dockerd through the ``docker`` SDK; nothing is mocked. The engine
and the offline images are provided by ``tests/infra/docker_engine.py`` (root can start/build them).
Skipped only when no engine answers and we are not root (so we cannot start one); with ``CI=true``
that situation is a failure instead, so CI can never silently skip the Docker layer.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

docker = pytest.importorskip("docker", reason="docker SDK (pip install docker>=7) is required")


def _load_engine_module() -> Any:
    path = Path(__file__).resolve().parent / "infra" / "docker_engine.py"
    spec = importlib.util.spec_from_file_location("hetero_tests_docker_engine", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


engine = _load_engine_module()

LABEL = "org.pytest-hetero.test"
IN_CI = os.environ.get("CI", "").lower() == "true"




@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """A docker SDK client to a live engine that holds the test images."""
    if not engine.engine_answers():
        is_root = hasattr(os, "geteuid") and os.geteuid() == 0
        if not is_root:
            reason = "no Docker engine answers and not root, so tests/infra/docker-engine.sh cannot start one"
            if IN_CI:
                pytest.fail(f"CI=true: {reason}")
            pytest.skip(reason)
    # Root (or an engine already up): make sure engine + images exist; errors here are failures.
    engine.ensure_docker()
    ids = engine.ensure_images()
    c = docker.from_env(timeout=120)
    c.hetero_image_ids = ids
    yield c
    c.close()


@pytest.fixture
def label_value(client: Any) -> Iterator[str]:
    """A unique label value; every container carrying it is force-removed after the test."""
    value = uuid.uuid4().hex
    yield value
    for ct in client.containers.list(all=True, filters={"label": f"{LABEL}={value}"}):
        ct.remove(force=True)


def test_engine_answers(client: Any) -> None:
    assert client.ping() is True
    version = client.version()
    assert version["Version"]
    assert version["ApiVersion"]
    info = client.info()
    assert info["Driver"]  # overlay2 (preferred) or vfs when started by docker-engine.sh


def test_images_present_with_reported_ids(client: Any) -> None:
    for name, image_id in client.hetero_image_ids.items():
        image = client.images.get(name)
        assert image.id == image_id
        assert image.labels.get("org.pytest-hetero.image-key")


def test_onnx_image_runs_onnxruntime_on_cpu(client: Any, label_value: str) -> None:
    out = client.containers.run(
        engine.ONNX_IMAGE,
        ["python3", "-c", "import onnxruntime as o; print(o.__version__, o.get_available_providers())"],
        remove=True,
        network_mode="none",
        labels={LABEL: label_value},
    ).decode()
    assert "CPUExecutionProvider" in out
    assert out.split()[0] == os.environ.get("HETERO_ORT_VERSION", "1.23.2")


def test_onnx_image_runs_a_real_model(client: Any, label_value: str) -> None:
    """Build a tiny Add model on the host, run it inside the image, check the numbers."""
    onnx = pytest.importorskip("onnx", reason="onnx (host side) builds the test model")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "y"], ["z"])],
        "add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [3])],
    )
    # onnxruntime 1.23 in the image loads IR <= 11 / opset <= 23; the host's onnx defaults are newer.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    code = (
        "import base64, sys, numpy as np, onnxruntime as o\n"
        "s = o.InferenceSession(base64.b64decode(sys.argv[1]), providers=['CPUExecutionProvider'])\n"
        "x = np.array([1, 2, 3], np.float32)\n"
        "print(s.get_providers()[0], s.run(None, {'x': x, 'y': x * 10})[0].tolist())\n"
    )
    out = client.containers.run(
        engine.ONNX_IMAGE,
        ["python3", "-c", code, base64.b64encode(model.SerializeToString()).decode()],
        remove=True,
        network_mode="none",
        user="65534:65534",
        labels={LABEL: label_value},
    ).decode()
    assert out.strip() == "CPUExecutionProvider [11.0, 22.0, 33.0]"


def test_shell_only_image_has_sh_and_no_python(client: Any, label_value: str) -> None:
    ct = client.containers.run(
        engine.SHELL_IMAGE,
        ["/bin/sh", "-c", "test -x /bin/sh && echo sh-present; python3 -c 1"],
        detach=True,
        network_mode="none",
        labels={LABEL: label_value},
    )
    result = ct.wait(timeout=60)
    logs = ct.logs(stdout=True, stderr=True).decode()
    assert result["StatusCode"] == 127, logs
    assert "sh-present" in logs
    assert "python3: not found" in logs


def test_missing_executable_fails_at_start_and_leaves_a_created_container(client: Any, label_value: str) -> None:
    """Exec'ing a binary the image lacks is an APIError at *start*, not an exit code; the
    container stays behind in 'created' state even with remove=True (the SDK never reaches its
    remove step), so backends must label and clean up."""
    with pytest.raises(docker.errors.APIError, match="executable file not found"):
        client.containers.run(
            engine.SHELL_IMAGE, ["python3", "-c", "1"], remove=True, network_mode="none",
            labels={LABEL: label_value},
        )
    left = client.containers.list(all=True, filters={"label": f"{LABEL}={label_value}"})
    assert [c.status for c in left] == ["created"]


def test_label_filter_lists_and_removes_container(client: Any, label_value: str) -> None:
    other = uuid.uuid4().hex
    ct = client.containers.run(
        engine.SHELL_IMAGE, ["sleep", "300"], detach=True, network_mode="none",
        labels={LABEL: label_value, "org.pytest-hetero.role": "probe"},
    )
    try:
        listed = client.containers.list(filters={"label": f"{LABEL}={label_value}"})
        assert [c.id for c in listed] == [ct.id]
        assert listed[0].status == "running"
        assert listed[0].labels["org.pytest-hetero.role"] == "probe"
        assert client.containers.list(all=True, filters={"label": f"{LABEL}={other}"}) == []
    finally:
        ct.remove(force=True)
    assert client.containers.list(all=True, filters={"label": f"{LABEL}={label_value}"}) == []
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(ct.id)


def test_memory_limit_oom_kills_container(client: Any, label_value: str) -> None:
    """--memory 64m (no swap here) kills a process that touches 200 MB: exit 137, OOMKilled."""
    ct = client.containers.run(
        engine.ONNX_IMAGE,
        ["python3", "-c", "b = bytearray(200 * 1024 * 1024)\nprint('survived')"],
        detach=True,
        mem_limit="64m",
        memswap_limit="64m",
        network_mode="none",
        labels={LABEL: label_value},
    )
    result = ct.wait(timeout=120)
    ct.reload()
    assert result["StatusCode"] == 137
    assert ct.attrs["State"]["OOMKilled"] is True
    assert b"survived" not in ct.logs()


def test_device_passthrough_of_existing_node(client: Any, label_value: str) -> None:
    out = client.containers.run(
        engine.SHELL_IMAGE, ["sh", "-c", "test -c /dev/hetero0 && echo char-device"],
        devices=["/dev/null:/dev/hetero0:rwm"], remove=True, network_mode="none",
        labels={LABEL: label_value},
    ).decode()
    assert out.strip() == "char-device"


def test_unknown_nvidia_runtime_is_rejected_at_create(client: Any, label_value: str) -> None:
    if "nvidia" in client.info().get("Runtimes", {}):
        pytest.skip("this engine has an nvidia runtime; the CPU-only rejection path does not apply")
    with pytest.raises(docker.errors.APIError, match="Unknown runtime specified nvidia") as err:
        client.containers.run(
            engine.SHELL_IMAGE, ["true"], runtime="nvidia", remove=True, network_mode="none",
            labels={LABEL: label_value},
        )
    assert err.value.response.status_code == 400
    # Rejected at create: nothing is left behind.
    assert client.containers.list(all=True, filters={"label": f"{LABEL}={label_value}"}) == []
