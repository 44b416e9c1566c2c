"""Scheduling and discovery verdicts on the real plane: exact normalised reasons, counts and owners.

One matrix per test carries several resources (pools of this session only, by node selector);
the workloads are submitted concurrently (``--hetero-parallel``) and judged independently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from kubekit import kube_matrix
from support import clear_reports, evidence_of

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def items(ev: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """nodeid without the matrix prefix → item evidence."""
    return {i["nodeid"].split("::", 1)[1]: i for i in ev["items"]}


def data(item: dict[str, Any], kind: str) -> dict[str, Any]:
    """The data of the item's (last) record of ``kind``."""
    found: list[dict[str, Any]] = [r["data"] for r in item["records"] if r["kind"] == kind]
    return found[-1]


def run(
    pytester: pytest.Pytester,
    cluster: Cluster,
    run_id: str,
    resources: list[dict[str, Any]],
    *args: str,
    namespace: str | None = None,
    select: str = "discovery or scheduling",
    **kw: Any,
) -> dict[str, dict[str, Any]]:
    pytester.makefile(
        ".matrix.yaml", k=kube_matrix(cluster.suffix, namespace or cluster.namespace, resources, **kw)
    )
    clear_reports(pytester)
    pytester.runpytest(
        "-p", "no:cacheprovider", "--hetero-run-id", run_id, "--hetero-parallel", "4", "-k", select, *args
    )
    return items(evidence_of(pytester))


GPU1 = {"nvidia.com/gpu": "1"}


def test_placement_verdicts(pytester: pytest.Pytester, cluster: Cluster, run_id: str) -> None:
    got = run(
        pytester,
        cluster,
        run_id,
        [
            {
                "name": "gpu-ok",
                "type": "gpu",
                "vendor": "nvidia",
                "requests": GPU1,
                "pool": "gpu",
                "expect": {"devices": 8, "product": "H100"},
            },
            {
                "name": "gpu-too-many",
                "type": "gpu",
                "vendor": "nvidia",
                "requests": {"nvidia.com/gpu": "9"},
                "pool": "gpu",
            },
            {"name": "tainted", "type": "gpu", "vendor": "nvidia", "requests": GPU1, "pool": "tainted"},
            {
                "name": "tolerated",
                "type": "gpu",
                "vendor": "nvidia",
                "requests": GPU1,
                "pool": "tainted",
                "tolerations": [
                    {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"}
                ],
            },
        ],
    )
    ok = got["gpu-ok::py::scheduling"]
    assert ok["status"] == "passed"
    placed = data(ok, "scheduling.placed")
    assert placed["node"] == cluster.nodes["gpu"][0]
    assert placed["requested"] == {"requests": GPU1, "limits": GPU1}
    assert placed["allocated"]["resources"] == {"requests": GPU1, "limits": GPU1}
    assert placed["allocated"]["node_allocatable"]["nvidia.com/gpu"] == "8"
    assert got["tolerated::py::scheduling"]["status"] == "passed"
    assert data(got["tolerated::py::scheduling"], "scheduling.placed")["node"] == cluster.nodes["tainted"][0]

    many = got["gpu-too-many::py::scheduling"]
    assert (many["status"], many["failure"]["category"], many["failure"]["owner"]) == (
        "failed",
        "insufficient_resource",
        "infrastructure",
    )
    reasons = data(many, "scheduling.pending")["reasons"]
    insufficient = [r for r in reasons if r["code"] == "insufficient_resource"]
    assert [(r["resource"], r["nodes"], r["source"]) for r in insufficient] == [
        ("nvidia.com/gpu", 1, "scheduler")
    ]
    total = insufficient[0]["total_nodes"]
    # every other node of the shared plane is excluded by the selector or by its taints: counts add up
    assert sum(r["nodes"] for r in reasons if not r["preemption"]) == total
    assert {r["code"] for r in reasons if not r["preemption"]} <= {
        "insufficient_resource",
        "node_selector_mismatch",
        "untolerated_taint",
    }

    # discovery already names the pool's taint the resource does not tolerate (the pool's policy and the
    # resource's tolerations disagree: platform's); its scheduling item is blocked by it
    seen = got["tainted::discovery"]
    assert (seen["failure"]["category"], seen["failure"]["owner"]) == ("untolerated_taint", "platform")
    [diff] = data(seen, "discovery.snapshot")["differences"]
    assert (diff["node"], diff["field"], diff["observed"]) == (
        cluster.nodes["tainted"][0], "taints[dedicated]", "dedicated=training:NoSchedule")
    assert got["tainted::py::scheduling"]["status"] == "blocked"
    taint = run(pytester, cluster, run_id, [{"name": "tainted", "type": "gpu", "vendor": "nvidia", "requests": GPU1,
                                             "pool": "tainted"}], select="scheduling")["tainted::py::scheduling"]
    # the same fact has the same owner in discovery and scheduling (it was "matrix-author" here, not a team)
    assert (taint["failure"]["category"], taint["failure"]["owner"]) == ("untolerated_taint", "platform")
    [t] = [r for r in data(taint, "scheduling.pending")["reasons"] if r["code"] == "untolerated_taint"]
    # 1.34 does not name the taint; the backend names the pool node's (the other counted node is NotReady)
    assert (t["taint"], t["detail"]) == ("dedicated=training:NoSchedule", {"taint_from": "pool nodes"})
    assert t["nodes"] >= 1

    # the pending verdict is kept in evidence although the pod is gone
    assert data(many, "scheduling.pending")["conditions"][0][0]["reason"] == "Unschedulable"


def test_selector_that_matches_no_node(pytester: pytest.Pytester, cluster: Cluster, run_id: str) -> None:
    got = run(
        pytester,
        cluster,
        run_id,
        [
            {
                "name": "nomatch",
                "type": "cpu",
                "requests": {"cpu": "1"},
                "pool": "cpu",
                "node_selector": {"hetero-test.zone": "nowhere"},
            }
        ],
        select="nomatch",
    )
    assert got["nomatch::discovery"]["failure"]["category"] == "no_nodes"
    assert got["nomatch::py::scheduling"]["status"] == "blocked"
    got = run(
        pytester,
        cluster,
        run_id,
        [
            {
                "name": "nomatch",
                "type": "cpu",
                "requests": {"cpu": "1"},
                "pool": "cpu",
                "node_selector": {"hetero-test.zone": "nowhere"},
            }
        ],
        select="scheduling",
    )
    none = got["nomatch::py::scheduling"]
    assert (none["failure"]["category"], none["failure"]["owner"]) == (
        "node_selector_mismatch",
        "platform",
    )
    # tainted nodes report their taint first (TaintToleration filters before NodeAffinity); all add up
    reasons = [r for r in data(none, "scheduling.pending")["reasons"] if not r["preemption"]]
    assert {r["code"] for r in reasons} <= {"node_selector_mismatch", "untolerated_taint"}
    assert (
        sum(r["nodes"] for r in reasons) == reasons[0]["total_nodes"] >= sum(map(len, cluster.nodes.values()))
    )


def test_discovery_differences(pytester: pytest.Pytester, cluster: Cluster, run_id: str) -> None:
    got = run(
        pytester,
        cluster,
        run_id,
        [
            {"name": "notready", "type": "gpu", "vendor": "nvidia", "requests": GPU1, "pool": "notready"},
            {
                "name": "mig",
                "type": "gpu",
                "vendor": "nvidia",
                "requests": {"nvidia.com/mig-1g.10gb": "1"},
                "pool": "mig",
                "expect": {"devices": 7, "product": "A100"},
            },
            {
                "name": "ascend",
                "type": "npu",
                "vendor": "huawei",
                "requests": {"huawei.com/Ascend910": "1"},
                "pool": "ascend",
                "expect": {"devices": 8, "labels": {"accelerator": "huawei-Ascend910"}},
            },
            {"name": "degraded", "type": "gpu", "vendor": "nvidia", "requests": GPU1, "pool": "degraded"},
            {
                "name": "hami",
                "type": "gpu",
                "vendor": "nvidia",
                "requests": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000"},
                "pool": "hami",
                "expect": {"devices": 4, "labels": {"gpu": "on"}},
            },
            {
                "name": "ascend-on-cpu",
                "type": "npu",
                "vendor": "huawei",
                "requests": {"huawei.com/Ascend910": "1"},
                "pool": "cpu",
            },
        ],
    )
    nr = got["notready::discovery"]
    assert (nr["status"], nr["failure"]["category"], nr["failure"]["owner"]) == (
        "failed",
        "node_not_ready",
        "infrastructure",
    )
    snap = data(nr, "discovery.snapshot")
    assert [
        (d["node"], d["code"], d["field"], d["expected"], d["observed"]) for d in snap["differences"]
    ] == [(cluster.nodes["notready"][0], "node_not_ready", "Ready", "True", "False")]
    assert snap["resource_version"] and snap["taken_at"]
    mig = got["mig::discovery"]
    assert mig["failure"]["category"] == "label_contract_broken"
    assert [(d["field"], d["observed"]) for d in data(mig, "discovery.snapshot")["differences"]] == [
        ("labels[nvidia.com/gpu.product]", "NVIDIA-H100-80GB-HBM3")
    ]
    assert got["ascend::discovery"]["status"] == "passed"
    assert data(got["ascend::discovery"], "discovery.snapshot")["nodes"][0]["capacity"] == {
        "huawei.com/Ascend910": "8"
    }
    degraded = got["degraded::discovery"]
    assert (degraded["failure"]["category"], degraded["failure"]["owner"]) == (
        "allocatable_below_capacity",
        "infrastructure",
    )
    differences = data(degraded, "discovery.snapshot")["differences"]
    assert [(d["field"], d["expected"], d["observed"]) for d in differences] == [
        ("allocatable[nvidia.com/gpu]", "8", "7")
    ]
    assert got["hami::discovery"]["status"] == "passed"
    assert data(got["hami::discovery"], "discovery.snapshot")["nodes"][0]["allocatable"] == {
        "nvidia.com/gpu": "4",
        "nvidia.com/gpumem": "81920",
    }
    bad = got["ascend-on-cpu::discovery"]
    assert bad["failure"]["category"] == "resource_not_advertised"
    assert sorted((d["node"], d["code"]) for d in data(bad, "discovery.snapshot")["differences"]) == sorted(
        [(n, "resource_not_advertised") for n in cluster.nodes["cpu"]]
        + [(n, "label_contract_broken") for n in cluster.nodes["cpu"]]
    )


def test_quota_exceeded_is_the_apiservers_403(
    pytester: pytest.Pytester, cluster: Cluster, run_id: str
) -> None:
    ns = cluster.new_namespace("hetero-quota")
    cluster.core.create_namespaced_resource_quota(
        ns, {"metadata": {"name": "gpu-quota"}, "spec": {"hard": {"requests.nvidia.com/gpu": "1"}}}  # type: ignore[arg-type]  # a manifest dict, sent as it is
    )
    got = run(
        pytester,
        cluster,
        run_id,
        [
            {
                "name": "two",
                "type": "gpu",
                "vendor": "nvidia",
                "requests": {"nvidia.com/gpu": "2"},
                "pool": "gpu",
            }
        ],
        namespace=ns,
    )
    item = got["two::py::scheduling"]
    assert (item["status"], item["failure"]["category"], item["failure"]["owner"]) == (
        "failed",
        "quota_exceeded",
        "platform",
    )
    pending = data(item, "scheduling.pending")
    assert pending["refused_by"] == "apiserver"
    [r] = pending["reasons"]
    assert (r["source"], r["resource"], r["quantities"]) == (
        "admission",
        "nvidia.com/gpu",
        {"requested": "2", "used": "0", "limited": "1"},
    )
    assert r["detail"]["quota"] == "gpu-quota"
