"""``spec.governance``: tenants and probes load into the model and expand to scheduling items; every key a
probe's kind does not use, every unknown name and every self-probe is an error naming file, line, field
and the fix; an engine without tenants answers not applicable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import evidence_of, matrix_text, statuses

from pytest_hetero.errors import MatrixInvalid
from pytest_hetero.layers.attempts import AttemptRead
from pytest_hetero.layers.governance import breaches
from pytest_hetero.matrix import load_matrix
from pytest_hetero.matrix.expand import expand

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

REPO = Path(__file__).resolve().parents[1]
TENANTS = [{"name": "a", "namespace": "team-a", "service_account": "runner", "queue": "lq",
            "cluster_queue": "cq-a"},
           {"name": "b", "namespace": "team-b", "service_account": "runner"}]


def write(tmp_path: Path, probes: list[dict[str, Any]], tenants: list[dict[str, Any]] | None = None,
          backend: str = "local") -> Path:
    path = tmp_path / "g.matrix.yaml"
    path.write_text(matrix_text(backend=backend, extra_spec={"governance": {
        "tenants": TENANTS if tenants is None else tenants, "probes": probes}}))
    return path


def problems(tmp_path: Path, probes: list[dict[str, Any]], tenants: list[dict[str, Any]] | None = None
             ) -> list[tuple[str, str, str]]:
    with pytest.raises(MatrixInvalid) as info:
        load_matrix(write(tmp_path, probes, tenants))
    return [(p.location.field or "", p.message, p.hint) for p in info.value.problems]


def test_tenants_and_probes_load_and_expand_to_scheduling_items(tmp_path: Path) -> None:
    probes: list[dict[str, Any]] = [{"name": "a-not-b", "kind": "tenant-isolation", "resource": "cpu-host", "as": "a", "target": "b",
               "expect": {"reasons": ["forbidden_rbac"]}, "timeout": "20s"},
              {"name": "a-quota", "kind": "quota", "resource": "cpu-host", "as": "a", "above": {"cpu": 9},
               "within": {"cpu": "500m"}},
              {"name": "gate-usage", "kind": "attribution", "resource": "cpu-host"}]
    matrix = load_matrix(write(tmp_path, probes))
    a = matrix.tenant("a")
    assert (a.namespace, a.queue, a.cluster_queue, a.subject) == ("team-a", "lq", "cq-a",
                                                                  "system:serviceaccount:team-a:runner")
    iso, quota, usage = matrix.probes
    assert (iso.acting_as, iso.target, iso.reasons, iso.timeout_s) == ("a", "b", ("forbidden_rbac",), 20.0)
    assert (quota.above, quota.within) == ({"cpu": "9"}, {"cpu": "500m"})
    assert (usage.kind, usage.acting_as, usage.reasons) == ("attribution", None, ())
    items = [i for i in expand(matrix, scheduling_per_image=True).items if "probe" in i.keys]
    assert [(i.layer, i.parts, i.depends_on) for i in items] == [
        ("scheduling", ("cpu-host", "governance", p.name, "scheduling"), None) for p in matrix.probes]


def test_a_key_the_kind_does_not_use_is_an_error_not_ignored(tmp_path: Path) -> None:
    got = problems(tmp_path, [{"name": "p", "kind": "attribution", "resource": "cpu-host", "above": {"cpu": 2}}])
    assert got == [("spec.governance.probes[0:p].above", "a attribution probe does not take 'above'",
                    "attribution takes as, image besides name, kind and resource")]


def test_missing_keys_unknown_names_and_self_probes_are_named(tmp_path: Path) -> None:
    got = problems(tmp_path, [{"name": "p", "kind": "tenant-isolation", "resource": "cpu-hots", "as": "a",
                               "target": "a"},
                              {"name": "q", "kind": "quota", "resource": "cpu-host", "as": "c"},
                              {"name": "q", "kind": "tenant-isolation", "resource": "cpu-host", "as": "a"}])
    assert ("spec.governance.probes[0:p].resource", "probe 'p' names unknown resource 'cpu-hots'",
            "did you mean 'cpu-host'?") in got
    assert ("spec.governance.probes[0:p].target", "probe 'p' probes tenant 'a' as itself",
            "tenant isolation is one tenant refused what belongs to another: name two tenants") in got
    assert ("spec.governance.probes[1:q]", "a quota probe needs 'above'",
            "above: a request beyond the tenant's quota, e.g. {nvidia.com/gpu: 3}") in got
    assert ("spec.governance.probes[1:q].as", "probe 'q' names unknown tenant 'c'", "known tenants: a, b") in got
    assert ("spec.governance.probes[2:q].name", "duplicate probe name 'q'", "give each probe a unique name") in got
    assert ("spec.governance.probes[2:q]", "a tenant-isolation probe needs 'target'",
            "target: the tenant whose namespace and queue the attempt must not reach") in got


def test_an_unknown_kind_is_refused_by_the_schema(tmp_path: Path) -> None:
    got = problems(tmp_path, [{"name": "p", "kind": "priority", "resource": "cpu-host"}])
    assert len(got) == 1 and got[0][0] == "spec.governance.probes[0:p].kind", got


def test_preemption_needs_both_priority_classes(tmp_path: Path) -> None:
    got = problems(tmp_path, [{"name": "p", "kind": "preemption", "resource": "cpu-host", "high": "urgent"}])
    assert got == [("spec.governance.probes[0:p]", "a preemption probe needs 'low'",
                    "low: the PriorityClass of the workload that must be preempted (and of the one that waits)")]


def test_duplicate_tenant_and_reserved_image_name(tmp_path: Path) -> None:
    path = tmp_path / "g.matrix.yaml"
    doc = json.loads(matrix_text(images=[{"name": "governance", "reference": "python:current"}],
                                 extra_spec={"governance": {"tenants": [TENANTS[0], TENANTS[0]]}}))
    path.write_text(json.dumps(doc))
    with pytest.raises(MatrixInvalid) as info:
        load_matrix(path)
    got = [(p.location.field, p.message) for p in info.value.problems]
    assert ("spec.images[0:governance].name", "image name 'governance' is reserved") in got
    assert ("spec.governance.tenants[1:a].name", "duplicate tenant name 'a'") in got


def test_the_local_engine_has_no_tenants_so_a_probe_is_not_applicable(pytester: pytest.Pytester) -> None:
    path = write(pytester.path, [{"name": "usage", "kind": "attribution", "resource": "cpu-host"}])
    pytester.runpytest("-p", "no:cacheprovider", "-k", "governance", str(path))
    evidence = evidence_of(pytester)
    assert statuses(evidence)["cpu-host::governance::usage::scheduling"] == "not_applicable"
    [item] = [i for i in evidence["items"] if "governance" in i["nodeid"]]
    assert "the local backend has no tenants, quotas or queues to probe" in json.dumps(item)


def test_the_example_governance_matrix_loads() -> None:
    matrix = load_matrix(REPO / "matrices" / "example-governance.matrix.yaml")
    assert {p.kind for p in matrix.probes} == {"tenant-isolation", "quota", "attribution", "maintenance",
                                               "device-isolation", "preemption"}
    assert all(p.acting_as for p in matrix.probes)


def test_a_visible_devices_variable_grants_devices_unless_it_names_none() -> None:
    """The judgment of the device-isolation pod's findings (the real pod is in test_realnode_governance);
    values a cluster here cannot be made to inject are checked on the function itself."""
    facts = AttemptRead(device_nodes=["/dev/nvidia0"], visible_env={
        "NVIDIA_VISIBLE_DEVICES": "void", "CUDA_VISIBLE_DEVICES": "", "ASCEND_VISIBLE_DEVICES": "0,1",
        "HIP_VISIBLE_DEVICES": "-1", "ROCR_VISIBLE_DEVICES": "none"})
    assert breaches(facts) == ["/dev/nvidia0", "ASCEND_VISIBLE_DEVICES=0,1"]
    assert breaches(AttemptRead(device_nodes=[], visible_env={"NVIDIA_VISIBLE_DEVICES": "all"})) == [
        "NVIDIA_VISIBLE_DEVICES=all"]
