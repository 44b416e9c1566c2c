"""Every ``expect`` key the matrix schema accepts is judged by discovery on every engine, or rejected by
``hetero lint`` and collection for that resource type and backend with the reason; what a resource
requests beyond what the host has is a finding; resources that resolve to one host are reported as one pool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import evidence_of, matrix_text

from pytest_hetero.backends.protocol import EngineView, NodeFacts
from pytest_hetero.cli import main
from pytest_hetero.layers.discovery import engine_gaps, node_differences
from pytest_hetero.matrix.model import Resource

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def cpu(**expect: Any) -> dict[str, Any]:
    return {"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}, "expect": expect}


def test_lint_and_collection_reject_keys_the_backend_cannot_check_for_the_type(
        tmp_path: Path, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """On the local backend expect: {devices: 8, driver: '>=999', labels: {pool: highmem}} on a CPU resource
    passed discovery with differences: [] (only min_cpus and min_memory_total_mib were read)."""
    text = matrix_text(resources=[cpu(min_cpus=1, devices=8, driver=">=999", labels={"pool": "highmem"})])
    path = tmp_path / "m.matrix.yaml"
    path.write_text(text)
    assert main(["lint", str(path)]) == 1
    out = capsys.readouterr().out
    where = "field 'spec.resources[0:cpu-host].expect"
    assert f"{where}.devices': expect.devices counts accelerator devices, and a CPU resource has none (use " \
           "min_cpus); resource 'cpu-host' is a cpu" in out
    assert f"{where}.driver': expect.driver compares an accelerator driver, and a CPU resource has none" in out
    assert f"{where}.labels': expect.labels cannot be checked on the local backend: node labels exist on " \
           "kubernetes nodes" in out
    assert "3 problems in" in out
    pytester.makefile(".matrix.yaml", m=text)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error stops the run before anything runs
    result.stdout.fnmatch_lines(["3 problems in *m.matrix.yaml:", "*expect.devices counts accelerator devices*"])


@pytest.mark.parametrize("backend", ["docker", "kubernetes"])
def test_the_same_keys_are_checked_per_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               backend: str) -> None:
    gpu = {"name": "gpu", "type": "gpu", "vendor": "nvidia", "requests": {"nvidia.com/gpu": 1},
           "expect": {"devices": 1, "product": "H100", "min_memory_mib": 80000, "driver": ">=535", "cuda": ">=12",
                      "mig_profile": "1g.10gb", "labels": {"pool": "a"}, "min_cpus": 4}}
    path = tmp_path / "m.matrix.yaml"
    path.write_text(matrix_text(resources=[gpu, cpu(product="EPYC")], backend=backend))
    assert main(["lint", str(path)]) == 1
    out = capsys.readouterr().out
    rejected = sorted(line.split("expect.", 1)[1].split("'", 1)[0] for line in out.splitlines() if "expect." in line
                      and line.startswith(str(path)))
    assert rejected == (["labels", "min_cpus"] if backend == "docker" else ["min_cpus", "product"])


def test_local_discovery_judges_every_key_and_what_is_requested(pytester: pytest.Pytester) -> None:
    """min_memory_mib, product and requests: {memory: …} above what the host has were never compared."""
    resource = cpu(min_cpus=1, min_memory_mib=10**9, product="^NoSuchCPU$")
    resource["requests"] = {"cpu": 1, "memory": "100Ti"}
    pytester.makefile(".matrix.yaml", m=matrix_text(resources=[resource]))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, skipped=4)
    [discovery] = [i for i in evidence_of(pytester)["items"] if i["layer"] == "discovery"]
    snapshot = next(r["data"] for r in discovery["records"] if r["kind"] == "discovery.snapshot")
    assert [d["field"] for d in snapshot["differences"]] == ["memory", "product", "requests.memory"]
    assert discovery["failure"]["category"] == "expectation_mismatch"
    message = discovery["failure"]["message"]
    assert "MiB usable memory, matrix expects 1000000000 MiB" in message
    assert "does not match '^NoSuchCPU$'" in message
    assert "requests memory 104857600 MiB, this host has" in message


def test_two_resources_on_one_host_are_reported_as_one_pool(pytester: pytest.Pytester) -> None:
    doc = json.loads(matrix_text(resources=[cpu(min_cpus=1), {**cpu(min_cpus=1), "name": "cpu-big"}]))
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "discovery")
    result.assert_outcomes(passed=2)
    ev = evidence_of(pytester)
    shared = {i["keys"]["resource"]: next(r["data"] for r in i["records"] if r["kind"] == "discovery.shared_pool")
              for i in ev["items"]}
    assert shared["cpu-host"]["resources"] == ["cpu-host", "cpu-big"]
    assert shared["cpu-host"]["where"].startswith("host ")
    parts = {(n["nodeid"].split("::")[1], n["part"]) for n in ev["untested"]["not_proven"]}
    assert parts == {("cpu-host", "separate pools"), ("cpu-big", "separate pools")}


def test_engine_and_node_pool_judge_cpu_expectations() -> None:
    """A remote Docker engine (no host probe) and Kubernetes nodes compare min_cpus and memory too."""
    resource = Resource(name="c", type="cpu", vendor="any", requests={"cpu": "1"},
                        expect={"min_cpus": 8, "min_memory_mib": 65536})
    view = EngineView(facts={}, runtimes=["runc"], gpu_runtime=False, device_nodes=None, cpus=4.0,
                      memory_bytes=16 * 2**30, local=False)
    assert engine_gaps(resource, view) == [
        ("expectation_mismatch", "the engine has 4 CPUs, matrix expects at least 8"),
        ("expectation_mismatch", "the engine has 16384 MiB memory, matrix expects 65536 MiB")]
    facts: NodeFacts = {"name": "n1", "resource_version": None, "ready": "True", "ready_reason": None,
                        "ready_message": None, "conditions": [], "unschedulable": False, "taints": [], "labels": {},
                        "capacity": {"cpu": "16", "memory": "32Gi"}, "allocatable": {"cpu": "15500m", "memory": "30Gi"},
                        "simulated": False}
    found = node_differences(resource, facts)
    assert [(d["field"], d["observed"]) for d in found] == [("allocatable[memory]", "30Gi")]
    assert found[0]["message"] == "node n1: allocatable memory 30Gi, matrix expects at least 65536 MiB"
