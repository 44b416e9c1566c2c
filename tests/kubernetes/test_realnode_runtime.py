"""Run-time evidence of a model run on the real node (issue 33): the gate's wrapper runs the model inside the
workload pod (kubelet v1.34.4 + containerd, cgroup v1 here), takes its process tree's ``wait4`` rusage and
samples the container's own cgroup; acceptance rules on ``memory_peak_mib`` judge the wrapper's figure as
they judge Docker's. An image without the interpreter for the wrapper says why, never 0.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
import realimages
from realkit import COMBO, GPU, STANDIN, controls, data, real_matrix, run

from pytest_hetero.probes.usage import IN_WORKLOAD

if TYPE_CHECKING:
    from conftest import RealNodeCluster

# the matrices name the repository's digits case (outside each test's temporary folder) by absolute path,
# which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

NO_PYTHON = "pytest-hetero/no-python:1"
SMI_STANDIN = "pytest-hetero/accel-standin:3"
CPU = {"name": "cpu", "type": "cpu", "requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
HOLD = ("import runpy, sys, time; held = bytearray(160 * 2**20); held[::4096] = b'x' * (160 * 256); time.sleep(2.5); "
        "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
"""The digits model, after holding 160 MiB of its own (touched pages) for 2.5 s: longer than the 1 s interval."""


@pytest.fixture(scope="module")
def ns(realnode: RealNodeCluster) -> Iterator[str]:
    """This module's namespace on the real node's plane; the shell-only and stand-in images imported into its
    containerd (the Python image is the node's own, imported when it was set up)."""
    for image in (NO_PYTHON, STANDIN, SMI_STANDIN):
        realimages.ensure(realnode.info.containerd_socket, image)
    name = realnode.new_namespace("runtime")
    yield name
    realnode.core.delete_namespace(name)


@pytest.fixture
def run_id(realnode: RealNodeCluster, ns: str) -> Iterator[str]:
    """A fresh run id; afterwards no pod of it may be left (cleanup is under test)."""
    value = "t" + uuid.uuid4().hex[:10]
    yield value
    left: list[Any] = realnode.core.list_namespaced_pod(ns, label_selector=f"pytest-hetero.run-id={value}").items
    alive = [p.metadata.name for p in left if p.metadata.deletion_timestamp is None]
    assert not alive, f"pods of run {value} left behind: {alive}"


def test_model_run_in_the_pod_is_measured_inside_it_and_judged_on_its_peak(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    rules = pytester.path / "rules.yaml"
    rules.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                     "  - {name: memory-roomy, metric: memory_peak_mib, op: '<=', value: 512}\n"
                     "  - {name: memory-tight, metric: memory_peak_mib, op: '<=', value: 100}\n")
    doc = json.loads(real_matrix(realnode.info, ns, [CPU]))
    doc["spec"]["models"][0]["entrypoint"][1:1] = ["-c", HOLD]
    doc["spec"]["datasets"][0]["acceptance"] = str(rules)
    doc["spec"]["datasets"][0].pop("truth", None)
    got = run(pytester, json.dumps(doc), run_id)
    model = got[f"cpu::py::{COMBO}::model"]
    assert model["status"] == "passed", model.get("failure")
    pod = data(model, "model.run")["pod"]
    sampled, values = data(model, "model.usage"), data(model, "model.run_time")["values"]
    assert (sampled["source"], sampled["available"], sampled["interval_s"], sampled["errors"]) == \
        ("pod-cgroup", True, 1.0, [])
    # this node is cgroup v1: the container's own memory and cpuacct cgroups, as containerd mounts them in it
    assert sampled["scope"].startswith(f"the cgroup of pod {pod}'s workload container, read inside it "
                                       "(/sys/fs/cgroup/memory/memory.usage_in_bytes, /sys/fs/cgroup/cpuacct/")
    assert sampled["samples"] >= 3  # one at the start, one per second of the 2.5 s+ run, one at its end
    (dev,) = sampled["devices"]
    assert dev["id"] == "container" and dev["name"] == f"{pod}/workload"
    series = dev["series"]
    assert series["t_s"] == sorted(series["t_s"]) and series["t_s"][-1] >= 2.5
    assert all(m is not None and 0 < m < 1024 for m in series["memory_used_mib"])  # under the 1Gi limit: never 0
    assert max(series["memory_used_mib"]) > 160  # the 160 MiB held (working set: page cache left out)
    assert series["utilisation_pct"][0] is None  # no CPU delta before the second sample: not read, never 0
    peak = values["memory_peak_mib"]
    # the model's own peak RSS (wait4 of its process tree in the pod): the 160 MiB held + the interpreter
    assert 160 < peak["value"] < 512 and peak["measured_by"] == IN_WORKLOAD
    assert peak["source"] == ("wait4 rusage ru_maxrss of the model run's process tree (peak RSS of its largest "
                              "process), taken inside the pod by the gate's wrapper")
    assert 0 < values["cpu_s"]["value"] < 60 and "unavailable" not in values["cpu_s"]
    results = data(got[f"cpu::py::{COMBO}::business"], "business.rules")["results"]
    assert [(r["name"], r["verdict"]) for r in results] == [("memory-roomy", "pass"), ("memory-tight", "fail")]
    for r in results:
        assert r["observed"] == peak["value"] and r["provenance"] == {"source": "measured_in_workload", "unit": "MiB",
                                                                      "by": f"the gate: {peak['source']}"}
    assert got[f"cpu::py::{COMBO}::business"]["failure"]["category"] == "acceptance_failed"


def test_an_image_without_the_wrappers_interpreter_says_why_never_zero(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    doc = json.loads(real_matrix(realnode.info, ns, [CPU], framework=False,
                                 images=[{"name": "sh", "reference": NO_PYTHON, "for": ["cpu"]}]))
    doc["spec"]["models"][0]["entrypoint"] = ["/bin/sh", "-c", "echo ran"]
    got = run(pytester, json.dumps(doc), run_id, "-k", "model")  # its startup item would refuse the image
    model = got[f"cpu::sh::{COMBO}::model"]
    assert data(model, "model.run")["exit_code"] == 0  # the model ran, unwrapped
    why = "the image has no python3 to run the gate's in-pod wrapper (rusage and cgroup samples)"
    sampled, values = data(model, "model.usage"), data(model, "model.run_time")["values"]
    assert (sampled["available"], sampled["unavailable"], sampled["samples"]) == (False, why, 0)
    for name in ("memory_peak_mib", "cpu_s"):
        assert (values[name]["value"], values[name]["unavailable"]) == (None, why)


SET_GPU = ("import os, sys, time\n"
           "uuids = [u for u in os.environ['NVIDIA_VISIBLE_DEVICES'].split(',') if u.startswith('GPU-')]\n"
           "open('/tmp/hetero-standin-smi', 'w').write(''.join(u + ' 20480 75\\n' for u in uuids))\n"
           "dev = os.path.join(os.path.dirname(sys.argv[1]), '.devices')\n"
           "def lines():\n"
           "    try:\n"
           "        return open(dev).read().count(chr(10))\n"
           "    except OSError:\n"
           "        return 0\n"
           "end, cap = time.monotonic() + 2.5, time.monotonic() + 60\n"
           "while time.monotonic() < end or (lines() < 4 and time.monotonic() < cap):\n"
           "    time.sleep(0.05)\n")
"""A model run (``{python} -c SET_GPU {outputs}``) that sets the stand-in nvidia-smi's answer for its GPUs (20480 MiB
used, 75 %) and holds it 2.5 s, and on until the pod wrapper's device sampler (``.devices`` in the run dir beside
``{outputs}``: a header, then a line per sample) wrote 3 samples, 60 s at most: the sampler runs ``nvidia-smi`` once a
second, and on a loaded node fewer than 3 may fall in a fixed 2.5 s."""


def test_gpu_devices_are_sampled_inside_the_pod_with_nvidia_smi_or_say_why(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    """STAND-IN: accel-standin:3's ``nvidia-smi`` answers with the values this test's model writes (no GPU is
    read); accel-standin:2 has only the device plugin's replay, which refuses ``--query-gpu``."""
    gpu = {"name": "gpu", "type": "gpu", "vendor": "nvidia", "requests": {GPU: "1"}}
    images = [{"name": "smi", "reference": SMI_STANDIN, "for": ["gpu"]},
              {"name": "replay", "reference": STANDIN, "for": ["gpu"]}]
    doc = json.loads(real_matrix(realnode.info, ns, [gpu], images=images, framework=False))
    doc["spec"]["models"][0]["entrypoint"] = ["{python}", "-c", SET_GPU, "{outputs}"]
    with controls(realnode.info, exclusive=False):
        got = run(pytester, json.dumps(doc), run_id, "-k", "model")
    model = got[f"gpu::smi::{COMBO}::model"]
    assert data(model, "model.run")["exit_code"] == 0
    sampled = data(model, "model.usage")
    assert sampled["source"] == "pod-cgroup" and sampled["available"]
    container, device = sampled["devices"]
    assert container["id"] == "container"
    assert device["id"].startswith("GPU-00000000-0000-4000-8000-") and device["source"] == "nvidia-smi"
    assert (device["name"], device["memory_total_mib"]) == ("NVIDIA H100 80GB HBM3 (stand-in)", 81559.0)
    sampling = sampled["device_sampling"]
    assert (sampling["source"], sampling["available"], sampling["interval_s"], sampling["errors"]) == \
        ("nvidia-smi", True, 1.0, [])
    assert sampling["scope"].startswith("nvidia-smi --query-gpu inside the container, every 1 s: the devices "
                                        f"allocated to it (NVIDIA_VISIBLE_DEVICES={device['id']})")
    series = device["series"]
    assert sampling["samples"] == len(series["t_s"]) >= 3
    # the first sample may come before the model wrote its values: [N/A] then, None, never 0
    assert set(series["memory_used_mib"]) <= {None, 20480.0} and series["memory_used_mib"][-1] == 20480.0
    assert set(series["utilisation_pct"]) <= {None, 75.0} and series["utilisation_pct"][-1] == 75.0
    assert (device["memory_high_water_mib"], device["utilisation_max_pct"]) == (20480.0, 75.0)
    # the plugin's replay answers no query: each sample's refusal is kept, nothing is made up
    replay = data(got[f"gpu::replay::{COMBO}::model"], "model.usage")
    assert [d["id"] for d in replay["devices"]] == ["container"]
    refused = replay["device_sampling"]
    assert (refused["available"], refused["samples"]) == (False, 0)
    assert refused["unavailable"].startswith("no sample could be read: nvidia-smi exited 2: nvidia-smi (replay): only "
                                             "the plain 'nvidia-smi' output was recorded; got: --query-gpu=")
