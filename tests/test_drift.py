"""The drift mapping: each kind of cluster change → the items it can affect (pure logic over two snapshots in
the shape of backends/kubernetes/snapshot.py, exercised against the real cluster in
tests/kubernetes/test_kube_drift.py), and the change record's parsing and intended vs observed impact."""

from __future__ import annotations

import copy
import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from support import matrix_text

from pytest_hetero.errors import SettingsError
from pytest_hetero.matrix.expand import expand
from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.status.drift import affected_items, diff_snapshots, impact, observed_by_resource, parse_change

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def node(pool: str, gpus: str | None = None, **labels: str) -> dict[str, Any]:
    alloc = {"cpu": "8", **({"nvidia.com/gpu": gpus} if gpus else {})}
    return {"labels": {"pool": pool, **labels}, "taints": [], "conditions": {"Ready": "True"}, "allocatable": alloc,
            "unschedulable": False}


BASE: dict[str, Any] = {
    "nodes": {"g1": node("gpu", "8", **{"nvidia.com/cuda.driver.major": "550"}), "c1": node("cpu")},
    "daemonsets": {}, "runtimeclasses": {}, "priorityclasses": {"high": {"value": 1000}},
    "kueue": {"resourceflavors": {}, "clusterqueues": {"cq": {"x": 1}}, "localqueues": {"t/lq-gpu": {"x": 1}}},
    "volcano": {"queues": {"served": False}}, "resourcequotas": {}, "limitranges": {},
}


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Any, Any]:
    resources = [{"name": "gpu", "type": "gpu", "vendor": "nvidia", "requests": {"nvidia.com/gpu": 1},
                  "node_selector": {"pool": "gpu"}, "queue": "lq-gpu", "priority_class": "high"},
                 {"name": "cpu", "type": "cpu", "requests": {"cpu": 1}, "node_selector": {"pool": "cpu"}}]
    (tmp_path / "d.matrix.yaml").write_text(matrix_text(resources=resources, name="d"))
    matrix = load_matrix(tmp_path / "d.matrix.yaml")
    return matrix, expand(matrix)


def hits_after(setup: tuple[Any, Any], change: Any) -> dict[str, set[str]]:
    """{resource: layers hit} after applying ``change`` to a copy of BASE."""
    matrix, plan = setup
    new = copy.deepcopy(BASE)
    change(new)
    found = affected_items(diff_snapshots(BASE, new), matrix, plan, BASE, new)
    by_id = plan.by_id()
    out: dict[str, set[str]] = {}
    for item_id in found:
        out.setdefault(by_id[item_id].keys["resource"], set()).add(by_id[item_id].layer)
    return out


EARLY, LATE = {"discovery", "scheduling"}, {"startup", "model", "business"}


@pytest.mark.parametrize(("name", "change", "expected"), [
    ("nothing", lambda s: None, {}),
    ("driver label", lambda s: s["nodes"]["g1"]["labels"].update({"nvidia.com/cuda.driver.major": "560"}),
     {"gpu": LATE}),
    ("selector label leaves", lambda s: s["nodes"]["g1"]["labels"].update(pool="other"), {"gpu": EARLY | LATE}),
    ("taint", lambda s: s["nodes"]["g1"].update(taints=["m=:NoSchedule"]), {"gpu": EARLY}),
    ("condition", lambda s: s["nodes"]["c1"]["conditions"].update(Ready="False"), {"cpu": EARLY}),
    ("device allocatable", lambda s: s["nodes"]["g1"]["allocatable"].update({"nvidia.com/gpu": "7"}),
     {"gpu": EARLY | LATE}),
    ("node added to a pool", lambda s: s["nodes"].update(g2=node("gpu", "8")), {"gpu": EARLY | LATE}),
    ("priority class", lambda s: s["priorityclasses"]["high"].update(value=10), {"gpu": {"scheduling"}}),
    ("other priority class", lambda s: s["priorityclasses"].update(low={"value": 1}), {}),
    ("local queue", lambda s: s["kueue"]["localqueues"]["t/lq-gpu"].update(x=2), {"gpu": {"scheduling"}}),
    ("cluster queue", lambda s: s["kueue"]["clusterqueues"]["cq"].update(x=2), {"gpu": {"scheduling"}}),
    ("device plugin", lambda s: s["daemonsets"].update({"kube-system/nvidia-device-plugin": {"images": ["i:2"]}}),
     {"gpu": LATE}),
    ("runtime class", lambda s: s["runtimeclasses"].update(nvidia={"handler": "nvidia"}),
     {"gpu": {"startup"}, "cpu": {"startup"}}),
    ("quota", lambda s: s["resourcequotas"].update({"t/q": {"hard": {"cpu": "4"}}}),
     {"gpu": {"scheduling"}, "cpu": {"scheduling"}}),
])
def test_each_change_kind_maps_to_its_items(setup: tuple[Any, Any], name: str, change: Any,
                                            expected: dict[str, set[str]]) -> None:
    assert hits_after(setup, change) == expected, name


def test_changes_are_listed_with_old_and_new() -> None:
    new = copy.deepcopy(BASE)
    new["nodes"]["g1"]["labels"]["nvidia.com/cuda.driver.major"] = "560"
    del new["nodes"]["c1"]
    new["volcano"]["queues"] = {"default": {"weight": 1}}
    assert diff_snapshots(BASE, new) == [
        {"kind": "node", "name": "c1", "field": "node", "old": "present", "new": None},
        {"kind": "node", "name": "g1", "field": "labels.nvidia.com/cuda.driver.major", "old": "550", "new": "560"},
        {"kind": "volcano.queues", "name": "*", "field": "listing", "old": "not served", "new": "listed"},
    ]


def test_change_record_inline_file_and_errors(tmp_path: Path, setup: tuple[Any, Any]) -> None:
    assert parse_change("operator=alice; ticket=OPS-1; reason=driver 560; intended=gpu, cpu") == {
        "operator": "alice", "ticket": "OPS-1", "reason": "driver 560", "intended": ["gpu", "cpu"]}
    (tmp_path / "c.yaml").write_text(json.dumps({"operator": "bob", "intended": ["gpu"]}))
    assert parse_change(f"@{tmp_path / 'c.yaml'}")["intended"] == ["gpu"]
    with pytest.raises(SettingsError, match="unknown key"):
        parse_change("operator=a; owner=b")
    with pytest.raises(SettingsError, match="is not key=value"):
        parse_change("just words")
    (tmp_path / "c.yaml").write_text("intended: [gpu, 7]\n")
    with pytest.raises(SettingsError, match=r"intended must be a list of resource names .*at `\$\.intended\[1\]`"):
        parse_change(f"@{tmp_path / 'c.yaml'}")
    # an empty text is no list of names either (it read as none before the record's shape was declared)
    (tmp_path / "c.yaml").write_text("intended: ''\n")
    with pytest.raises(SettingsError, match="intended must be a list of resource names"):
        parse_change(f"@{tmp_path / 'c.yaml'}")
    (tmp_path / "c.yaml").write_text("intended: null\nticket: 2026-12-01\n")
    assert parse_change(f"@{tmp_path / 'c.yaml'}") == {"operator": None, "ticket": datetime.date(2026, 12, 1),
                                                      "reason": None, "intended": []}
    _, plan = setup
    observed = observed_by_resource({"gpu::py::startup": "changed: x"}, plan)
    record = impact(parse_change("intended=cpu"), observed)
    assert (record["observed"], record["unintended"], record["not_observed"]) == (["gpu"], ["gpu"], ["cpu"])
    assert impact(parse_change("intended=cpu"), None)["observed"] is None


def test_snapshot_without_a_kubernetes_matrix_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", s=matrix_text(name="s"))
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-snapshot")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--hetero-snapshot records the cluster of kubernetes matrices, and none is collected" in \
        "\n".join(result.errlines)


def test_a_snapshot_section_of_another_type_is_named_by_its_path() -> None:
    """The snapshot's declared sections (status/snapshots.py): a scheduler's key or ``nodes`` that is no object is
    refused naming it (a snapshot's writer never writes one); a lister's marker or an absent section reads as
    listed-nothing, as before."""
    import msgspec

    from pytest_hetero.status.snapshots import ClusterSnapshot

    with pytest.raises(msgspec.ValidationError, match=r"at `\$\.kueue`"):
        ClusterSnapshot.parse({"kueue": "v1beta2"})
    with pytest.raises(msgspec.ValidationError, match=r"at `\$\.nodes`"):
        ClusterSnapshot.parse({"nodes": ["gpu-1"]})
    marked = ClusterSnapshot.parse({"kueue": {"served": False}, "nodes": {"gpu-1": {"taints": []}, "gone": None}})
    assert marked.sections["kueue.localqueues"] is None and marked.cluster_queues == {}
    assert (marked.nodes["gpu-1"].labels, marked.nodes["gpu-1"].taints, marked.nodes["gone"].present) == (None, [], False)


def test_a_baseline_snapshot_is_read_from_the_cluster_section_as_the_gate_writes_it() -> None:
    """status.drift.baseline_snapshot: the matrix's snapshot (a new mapping), None without one; a cluster section of
    another shape is refused naming the field (a KeyError or AttributeError before)."""
    from pytest_hetero.status.drift import baseline_snapshot

    snap: dict[str, Any] = {"nodes": {}}
    evidence: Any = {"items": [], "cluster": {"snapshots": [
        {"matrix": "a", "taken_at": "2026-12-04T00:00:00Z", "sha256": "0" * 64, "snapshot": snap}]}}
    found = baseline_snapshot(evidence, "a")
    assert found == snap and found is not snap
    none: Any = {"items": []}
    assert baseline_snapshot(evidence, "b") is None and baseline_snapshot(none, "a") is None
    evidence["cluster"]["snapshots"][0].pop("snapshot")
    with pytest.raises(SettingsError, match=r"not the gate's: .*`snapshot` - at `\$\.cluster\.snapshots\[0\]`"):
        baseline_snapshot(evidence, "a")
