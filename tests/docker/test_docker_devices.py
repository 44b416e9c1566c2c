"""Device series of a model run on the real Docker engine, sampled inside its container (issue 33), and the
acceptance rules on them: ``gpu_memory_peak_mib`` passes and ``device_utilisation_mean`` fails; an image without
the device tool says so, and the rules on it are not evaluable (never judged on 0).

STAND-IN: this engine has no GPU and no NPU (a ``nvidia.com/gpu`` or Ascend request cannot start a container
here), so the rows are typed ``gpu``/``npu`` with CPU requests only, and the test image carries the real node
image's stand-in ``nvidia-smi``/``npu-smi`` (tests/kubernetes/realimages.py) with ``NVIDIA_VISIBLE_DEVICES`` /
``ASCEND_VISIBLE_DEVICES`` set as the NVIDIA container toolkit / Ascend Docker runtime set them. What is proven:
the engine's second exec that samples with the tool, the read-back, the values, their source and the rules.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dockerkit import COMBO, ONNX_IMAGE, SHELL_IMAGE, docker_matrix, evidence, items, leftovers

from pytest_hetero.probes.usage import IN_WORKLOAD

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kubernetes"))
import realimages  # noqa: E402

pytestmark = pytest.mark.usefixtures("outside_inputs")

GPU_ID = "GPU-00000000-0000-4000-8000-0000000000d0"

HOLD = "time.sleep(2.5)\n"
assert HOLD in realimages.SET_DEVICES
# entrypoint arguments are expanded by the gate ({python}, {out}): the code holds no literal brace, hence chr(125)
SET_DEVICES_SAMPLED = realimages.SET_DEVICES.replace(HOLD, (
    "import json\n"
    "samples = os.path.dirname(sys.argv[sys.argv.index('--out') + 1]) + '-devices/.devices'\n"
    "def lines():\n"
    "    try:\n"
    "        text = open(samples).read()\n"
    "    except OSError:\n"
    "        return 0\n"
    "    head = text.split('\\n', 1)[0]\n"
    "    if head.endswith(chr(125)) and json.loads(head).get('path') is None:\n"
    "        return 1 << 30\n"
    "    return text.count('\\n')\n"
    "wanted = 1 + 3 * max(1, len(gpus))\n"
    "end, cap = time.monotonic() + 2.5, time.monotonic() + 60\n"
    "while time.monotonic() < end or (lines() < wanted and time.monotonic() < cap):\n"
    "    time.sleep(0.05)\n"))
"""The stand-ins' answers held 2.5 s as :data:`realimages.SET_DEVICES` holds them, and on until the engine's device
sampler (``<run dir>-devices/.devices`` beside the outputs' run dir: a header, then a line per sample, ``nvidia-smi
-lms`` a line per GPU) wrote 3 samples, 60 s at most; not when the header says the image has no tool. The sampler
samples once a second, when its tool answers: on a loaded machine fewer than 3 may fall in a fixed 2.5 s."""


@pytest.fixture
def standin_image(run_id: str) -> Iterator[str]:
    """The ONNX test image with the stand-in tools and the runtimes' device variables; removed afterwards."""
    tag = f"pytest-hetero-test/devices-standin:{run_id}"
    with tempfile.TemporaryDirectory(prefix="hetero-image-") as tmp:
        root = Path(tmp)
        (root / "Dockerfile").write_text(
            f"FROM {ONNX_IMAGE}\nCOPY nvidia-smi npu-smi /usr/local/bin/\n"
            f"ENV NVIDIA_VISIBLE_DEVICES={GPU_ID} ASCEND_VISIBLE_DEVICES=3\n")
        for name, text in (("nvidia-smi", realimages.STANDIN_SMI_LMS), ("npu-smi", realimages.STANDIN_NPU_SMI)):
            (root / name).write_text(text)
            (root / name).chmod(0o755)
        subprocess.run(["docker", "build", "-q", "--network", "none", "-t", tag, str(root)], capture_output=True,
                       timeout=300, check=True)
    yield tag
    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=120, check=False)


def _data(item: dict[str, Any], kind: str) -> dict[str, Any]:
    return dict(next(r["data"] for r in reversed(item["records"]) if r["kind"] == kind))


def test_device_rules_pass_and_fail_on_the_containers_devices_and_a_missing_tool_says_why(
    pytester: pytest.Pytester, run_id: str, engine: Any, standin_image: str
) -> None:
    rules = pytester.path / "rules.yaml"
    rules.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                     "  - {name: device-memory, metric: gpu_memory_peak_mib, op: '<=', value: 30000}\n"
                     "  - {name: device-busy, metric: device_utilisation_mean, op: '>=', value: 0.9}\n")
    cpu_only = {"cpu": 1, "memory": "512Mi"}
    doc = json.loads(docker_matrix(acceptance=rules, resources=[
        {"name": "gpu", "type": "gpu", "vendor": "nvidia", "requests": cpu_only},
        {"name": "npu", "type": "npu", "vendor": "huawei", "requests": cpu_only}]))
    doc["spec"]["images"] = [{"name": "sa", "reference": standin_image, "for": ["gpu", "npu"]},
                             {"name": "plain", "reference": ONNX_IMAGE, "for": ["gpu"]}]
    doc["spec"]["models"][0]["entrypoint"][1:1] = ["-c", SET_DEVICES_SAMPLED]
    pytester.makefile(".matrix.yaml", d=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "model or business")
    it = items(evidence(pytester))
    for row, (tool, peak, mean, device_id) in {"gpu": ("nvidia-smi", 20480.0, 0.75, GPU_ID),
                                               "npu": ("npu-smi", 16384.0, 0.7, "npu3")}.items():
        model = it[f"{row}::sa::{COMBO}::model"]
        assert model["status"] == "passed", model.get("failure")
        sampled, values = _data(model, "model.usage"), _data(model, "model.run_time")["values"]
        assert sampled["source"] == "docker-stats"
        container, device = sampled["devices"]  # the container's stats series, then the device in it
        assert (device["id"], device["source"]) == (device_id, tool)
        sampling = sampled["device_sampling"]
        assert (sampling["source"], sampling["available"], sampling["interval_s"], sampling["errors"]) == \
            (tool, True, 1.0, [])
        assert sampling["samples"] >= 3 and device["series"]["memory_used_mib"][-1] == peak
        assert (values["gpu_memory_peak_mib"]["value"], values["device_utilisation_mean"]["value"]) == (peak, mean)
        results = _data(it[f"{row}::sa::{COMBO}::business"], "business.rules")["results"]
        assert [(r["name"], r["verdict"], r["observed"]) for r in results] == [
            ("device-memory", "pass", peak), ("device-busy", "fail", mean)]
        assert results[0]["provenance"] == {"source": "measured_in_workload", "unit": "MiB",
                                            "by": f"the gate: {values['gpu_memory_peak_mib']['source']}"}
    plain = it[f"gpu::plain::{COMBO}::model"]
    assert plain["status"] == "passed", plain.get("failure")
    sampling = _data(plain, "model.usage")["device_sampling"]
    assert (sampling["available"], sampling["unavailable"]) == (False, "nvidia-smi is not on PATH in the container")
    values = _data(plain, "model.run_time")["values"]
    assert values["gpu_memory_peak_mib"] == {
        "value": None, "unit": "MiB", "source": "the docker engine's device sampling", "measured_by": IN_WORKLOAD,
        "in_workload": True,
        "unavailable": "nvidia-smi: nvidia-smi is not on PATH in the container"}
    results = _data(it[f"gpu::plain::{COMBO}::business"], "business.rules")["results"]
    assert [r["verdict"] for r in results] == ["not_evaluable", "not_evaluable"]
    assert leftovers(engine, run_id) == []


def test_an_image_without_the_interpreter_for_the_sampler_says_why(pytester: pytest.Pytester, run_id: str,
                                                                   engine: Any) -> None:
    """A shell-only image on a GPU row: the model runs; the device sampler cannot, and says so (never 0)."""
    doc = json.loads(docker_matrix(resources=[{"name": "gpu", "type": "gpu", "vendor": "nvidia",
                                               "requests": {"cpu": 1, "memory": "256Mi"}}],
                                   image=SHELL_IMAGE, entrypoint=["/bin/sh", "-c", "sleep 1.2"], runtime=""))
    doc["spec"]["models"][0].pop("runtime", None)
    pytester.makefile(".matrix.yaml", d=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "model")
    model = items(evidence(pytester))[f"gpu::img::{COMBO}::model"]
    assert _data(model, "model.run")["exit_code"] == 0
    sampling = _data(model, "model.usage")["device_sampling"]
    why = "the image has no python3 to run the gate's device sampler"
    assert (sampling["source"], sampling["available"], sampling["unavailable"]) == ("nvidia-smi", False, why)
    values = _data(model, "model.run_time")["values"]
    for name in ("gpu_memory_peak_mib", "device_utilisation_mean"):
        assert (values[name]["value"], values[name]["unavailable"]) == (None, f"nvidia-smi: {why}")
    assert leftovers(engine, run_id) == []
