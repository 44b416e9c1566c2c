"""Device values of a model run judged by acceptance rules on the real node (issue 33): the gate's wrapper samples
the GPU (``nvidia-smi --query-gpu``) and the NPU (``npu-smi info -t usages``) allocated to the workload pod by the
real kubelet and the test device plugin; ``gpu_memory_peak_mib`` and ``device_utilisation_mean`` are judged
like ``memory_peak_mib``, with the tool named as their source.

STAND-IN: ``accel-standin:4``'s ``nvidia-smi`` and ``npu-smi`` answer with the values this test's model writes
(tests/kubernetes/realimages.py); no GPU or NPU is read. What is proven: the in-pod path, the allocation filter,
the values' derivation and provenance, a rule passing and one failing.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
import realimages
from realkit import COMBO, GPU, NPU, controls, data, real_matrix, run
from support import evidence_of

if TYPE_CHECKING:
    from conftest import RealNodeCluster

pytestmark = pytest.mark.usefixtures("outside_inputs")

IMAGE = "pytest-hetero/accel-standin:4"


@pytest.fixture
def ns(realnode: RealNodeCluster) -> Iterator[str]:
    realimages.ensure(realnode.info.containerd_socket, IMAGE)
    name = realnode.new_namespace("devrules")
    yield name
    # the devices go back to the node only once the run's pods are gone (not when deletion starts): wait, so
    # the next test on this shared node (4 stand-in GPUs, 4 NPUs) is not refused for want of one
    deadline = time.monotonic() + 60
    while realnode.core.list_namespaced_pod(name).items and time.monotonic() < deadline:
        time.sleep(0.5)
    realnode.core.delete_namespace(name)


def test_device_memory_and_utilisation_rules_pass_and_fail_on_the_allocated_devices(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str
) -> None:
    run_id = "t" + uuid.uuid4().hex[:10]
    rules = pytester.path / "rules.yaml"
    rules.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                     "  - {name: device-memory, metric: gpu_memory_peak_mib, op: '<=', value: 30000}\n"
                     "  - {name: device-busy, metric: device_utilisation_mean, op: '>=', value: 0.9}\n")
    gpu = {"name": "gpu", "type": "gpu", "vendor": "nvidia", "requests": {GPU: "1"}}
    npu = {"name": "npu", "type": "npu", "vendor": "huawei", "requests": {NPU: "1"}}
    doc = json.loads(real_matrix(realnode.info, ns, [gpu, npu],
                                 images=[{"name": "sa", "reference": IMAGE, "for": ["gpu", "npu"]}]))
    doc["spec"]["models"][0]["entrypoint"][1:1] = ["-c", realimages.SET_DEVICES]
    doc["spec"]["datasets"][0]["acceptance"] = str(rules)
    doc["spec"]["datasets"][0].pop("truth", None)
    with controls(realnode.info, exclusive=False):
        got = run(pytester, json.dumps(doc), run_id, "-k", "model or business")
    expected = {"gpu": ("nvidia-smi", 20480.0, 0.75, "GPU-00000000-0000-4000-8000-"),
                "npu": ("npu-smi", 16384.0, 0.7, "npu")}
    for row, (tool, peak, mean, prefix) in expected.items():
        model = got[f"{row}::sa::{COMBO}::model"]
        assert model["status"] == "passed", model.get("failure")
        sampled, values = data(model, "model.usage"), data(model, "model.run_time")["values"]
        container, device = sampled["devices"]  # the container's cgroup, then the one device allocated
        assert container["id"] == "container" and device["id"].startswith(prefix) and device["source"] == tool
        assert sampled["device_sampling"]["available"] and sampled["device_sampling"]["errors"] == []
        assert device["series"]["memory_used_mib"][-1] == peak  # the first sample may be [N/A]: None, never 0
        assert values["gpu_memory_peak_mib"]["value"] == peak
        assert values["device_utilisation_mean"]["value"] == mean
        assert values["gpu_memory_peak_mib"]["source"].startswith(
            f"{tool}: highest device memory used in any sample of device(s) {device['id']} ")
        business = got[f"{row}::sa::{COMBO}::business"]
        results: list[dict[str, Any]] = data(business, "business.rules")["results"]
        assert [(r["name"], r["verdict"], r["observed"]) for r in results] == [
            ("device-memory", "pass", peak), ("device-busy", "fail", mean)]
        assert results[1]["provenance"] == {"source": "measured_in_workload", "unit": "ratio",
                                            "by": f"the gate: {values['device_utilisation_mean']['source']}"}
        assert business["failure"]["category"] == "acceptance_failed"
    # queue and placement times per pool, from the real kubelet's pod conditions (1 s resolution)
    pools = evidence_of(pytester)["usage"]["queue"]["pools"]
    for row in ("gpu", "npu"):
        wait, start = pools[row]["wait_s"], pools[row]["start_s"]
        assert wait["count"] >= 1 and 0 <= wait["p50"] <= wait["p95"] <= wait["max"] < 60
        assert start["count"] >= 1 and 0 <= start["p50"] <= start["max"] < 60
        assert pools[row]["simulated"] == 0
    left: list[Any] = realnode.core.list_namespaced_pod(ns, label_selector=f"pytest-hetero.run-id={run_id}").items
    assert not [p.metadata.name for p in left if p.metadata.deletion_timestamp is None]
