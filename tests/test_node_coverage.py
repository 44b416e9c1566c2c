"""Node coverage (issue 32): the ``coverage`` setting, its items, and a status that covers exactly what ran
node by node (levels per node, unvalidated nodes named, publish plans per node). The engine side runs on the
KWOK plane in tests/kubernetes/test_kube_coverage.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from support import matrix_text

from pytest_hetero.backends.protocol import NodeFacts
from pytest_hetero.errors import MatrixError
from pytest_hetero.layers.nodes import choose, unschedulable_reason
from pytest_hetero.matrix.expand import expand
from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.matrix.model import Coverage, Matrix
from pytest_hetero.status.compute import pool_status
from pytest_hetero.status.publish import left_as_is, parse_now, publish_plan

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import ItemDict, PoolStatus

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def matrix(tmp_path: Path, coverage: Any) -> Matrix:
    resource: dict[str, Any] = {"name": "cpu", "type": "cpu", "requests": {"cpu": 1}}
    if coverage is not None:
        resource["coverage"] = coverage
    (tmp_path / "c.matrix.yaml").write_text(matrix_text(resources=[resource], backend="kubernetes", name="c"))
    return load_matrix(tmp_path / "c.matrix.yaml")


@pytest.mark.parametrize(("value", "want"), [(None, Coverage("one")), ("every", Coverage("every")),
                                             ({"sample": 3}, Coverage("sample", count=3)),
                                             ({"share": 0.25}, Coverage("share", share=0.25))])
def test_coverage_setting_is_read(tmp_path: Path, value: Any, want: Coverage) -> None:
    assert matrix(tmp_path, value).resources[0].coverage == want


@pytest.mark.parametrize("value", ["all", {"sample": 0}, {"share": 0}, {"share": 1.5}, {"sample": 2, "share": 0.5}])
def test_a_bad_coverage_is_named(tmp_path: Path, value: Any) -> None:
    with pytest.raises(MatrixError) as err:
        matrix(tmp_path, value)
    assert "coverage" in err.value.render()


def test_how_many_nodes_each_setting_exercises_and_the_sample_is_seeded() -> None:
    names = [f"n{i}" for i in range(10)]
    assert [Coverage(m).how_many(10) for m in ("one", "every")] == [1, 10]
    assert (Coverage("sample", count=3).how_many(10), Coverage("sample", count=30).how_many(10)) == (3, 10)
    assert [Coverage("share", share=s).how_many(10) for s in (0.25, 0.01, 1.0)] == [3, 1, 10]
    assert Coverage("every").how_many(0) == 0 and choose(Coverage("every"), [], "s") == []
    first = choose(Coverage("sample", count=4), names, "run-1/cpu")
    assert len(first) == 4 and set(first) <= set(names) and first == sorted(first)
    assert choose(Coverage("sample", count=4), list(reversed(names)), "run-1/cpu") == first  # the seed decides
    draws = {tuple(choose(Coverage("sample", count=4), names, f"run-{i}/cpu")) for i in range(20)}
    assert len(draws) > 1  # another run draws other nodes


def test_unschedulable_nodes_are_named_with_why() -> None:
    from pytest_hetero.matrix.model import Resource

    res = Resource("g", "gpu", "nvidia", {"nvidia.com/gpu": "1"},
                   tolerations=({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},))
    ok: NodeFacts = {"name": "a", "resource_version": None, "ready": "True", "ready_reason": None,
                     "ready_message": None, "conditions": [], "unschedulable": False,
                     "taints": [{"key": "gpu", "effect": "NoSchedule"}, {"key": "x", "effect": "PreferNoSchedule"}],
                     "labels": {}, "capacity": {}, "allocatable": {}, "simulated": False}
    assert unschedulable_reason(res, ok) is None
    assert unschedulable_reason(res, {**ok, "ready": "False", "ready_reason": "KubeletNotReady"}) == \
        "not Ready (KubeletNotReady)"
    assert unschedulable_reason(res, {**ok, "unschedulable": True}) == "cordoned (spec.unschedulable: true)"
    assert unschedulable_reason(res, {**ok, "taints": [{"key": "d", "value": "t", "effect": "NoExecute"}]}) == \
        "untolerated taint d=t:NoExecute"


def test_node_coverage_item_depends_on_scheduling_not_on_startup(tmp_path: Path) -> None:
    plan = expand(matrix(tmp_path, "every"), scheduling_per_image=True)
    ids = {i.id: i for i in plan.items}
    cover = ids["cpu::py::nodes::startup"]
    assert (cover.layer, cover.keys["coverage"], cover.depends_on) == ("startup", "every", ("cpu", "py", "scheduling"))
    assert ids["cpu::py::digits-logreg@digits-test::model"].depends_on == ("cpu", "py", "startup")
    assert "cpu::py::nodes::startup" not in {i.id for i in expand(matrix(tmp_path, None), scheduling_per_image=True)
                                             .items}


def rec(kind: str, **data: Any) -> dict[str, Any]:
    return {"kind": kind, "at": "2026-12-02T10:00:00Z", "data": data}


def item(layer: str, status: str, *records: dict[str, Any], **keys: str) -> ItemDict:
    base = {"resource": "cpu", **({"image": "py"} if layer != "discovery" else {})}
    if layer in ("model", "business"):
        base.update(model="digits-logreg", dataset="digits-test")
    return cast("ItemDict", {"layer": layer, "status": status, "keys": {**base, **keys}, "records": list(records)})


POOL = ["n1", "n2", "n3", "n4"]


def run_items(coverage: bool, failed: str | None = None) -> list[ItemDict]:
    """A 4-node pool's items: the workload on n1 (startup, model, business passed); with ``coverage`` a
    node-coverage item over every node, ``failed`` failing its payload there."""
    out = [item("discovery", "passed", rec("discovery.snapshot", nodes=[{"name": n} for n in POOL])),
           item("scheduling", "passed", rec("scheduling.placed", node="n1", pod="w")),
           item("startup", "passed", rec("startup.pod", node="n1", pod="w")),
           item("model", "passed", rec("model.run", node="n1", exit_code=0)),
           item("business", "passed")]
    if coverage:
        nodes = [rec("startup.coverage", coverage="every", pool=POOL, schedulable=POOL, chosen=POOL, not_exercised=[])]
        for n in POOL:
            nodes += [rec("scheduling.placed", node=n, pod=f"p-{n}"),
                      rec("startup.node", node=n, outcome="failed" if n == failed else "passed",
                          proven=["scheduling"] if n == failed else ["scheduling", "startup"])]
        out.append(item("startup", "failed" if failed else "passed", *nodes, coverage="every"))
    return out


def levels(pool: PoolStatus) -> dict[str, str]:
    return {e["node"]: e["task_types"]["batch-inference"]["level"] for e in pool["node_status"]}


def test_every_node_has_its_own_level_and_a_failed_node_fails_alone(tmp_path: Path) -> None:
    m = matrix(tmp_path, "every")
    [pool] = pool_status(m, run_items(True), "2026-12-02T10:00:00Z")
    assert (pool["nodes"], pool["unvalidated"], pool["model_runs_on"]) == (POOL, [], ["n1"])
    # the models ran on n1 only: the other nodes are proven to startup
    assert levels(pool) == {"n1": "business", "n2": "startup", "n3": "startup", "n4": "startup"}
    n2 = pool["node_status"][1]["task_types"]["batch-inference"]["layers"]
    assert (n2["startup"], n2["model"], n2["business"]) == ("passed", "not_run", "not_run")
    [pool] = pool_status(m, run_items(True, failed="n3"), "2026-12-02T10:00:00Z")
    assert pool["task_types"]["batch-inference"]["level"] == "scheduling"  # the pool as a whole: a node failed
    assert levels(pool) == {"n1": "business", "n2": "startup", "n3": "scheduling", "n4": "startup"}


def test_coverage_one_exercises_one_node_and_names_the_others_unvalidated(tmp_path: Path) -> None:
    [pool] = pool_status(matrix(tmp_path, None), run_items(False), "2026-12-02T10:00:00Z")
    assert (pool["nodes"], levels(pool), pool["coverage"]) == (["n1"], {"n1": "business"}, "one")
    assert [(u["node"], u["status"]) for u in pool["unvalidated"]] == [(n, "unvalidated") for n in POOL[1:]]
    assert pool["unvalidated"][0]["reason"] == "not exercised: coverage one ran the pool's workload on n1 only"


def test_publish_plan_labels_each_exercised_node_at_its_level_and_leaves_the_others(tmp_path: Path) -> None:
    [pool] = pool_status(matrix(tmp_path, "every"), run_items(True, failed="n3"), "2026-12-02T10:00:00Z")
    plan = publish_plan([pool], "ab" * 32, parse_now("2026-12-02T11:00:00Z"), "d/unvalidated")
    key = f"validation.{pool['domain']}/batch-inference"
    got = {e["node"]: (e["labels"][key], e["conditions"][0]["status"], e["taint"]) for e in plan}
    assert got == {"n1": ("business", "True", "remove"), "n2": ("startup", "False", "add"),
                   "n3": ("scheduling", "False", "add"), "n4": ("startup", "False", "add")}
    [one] = pool_status(matrix(tmp_path, None), run_items(False), "2026-12-02T10:00:00Z")
    plan = publish_plan([one], "ab" * 32, parse_now("2026-12-02T11:00:00Z"))
    assert [e["node"] for e in plan] == ["n1"]
    assert [e["node"] for e in left_as_is([one], plan)] == ["n2", "n3", "n4"]
    # a bundle written before node status: every node at the pool's level, as before
    old = cast("PoolStatus", {k: v for k, v in one.items() if k not in ("node_status", "unvalidated")})
    assert publish_plan([old], "ab" * 32, parse_now("2026-12-02T11:00:00Z"))[0]["labels"][key] == "business"


def test_a_node_in_two_pools_gets_one_condition_per_task_type_at_the_lower_level(tmp_path: Path) -> None:
    """Two pools of one bundle hold node n1 (two resource shapes on the same nodes): one label and one condition of
    each type, at the lowest level its pools reached on it, expiring with the first; the message names both pools
    (the plan had two conditions of the same type and the last pool's label)."""
    [good] = pool_status(matrix(tmp_path, "every"), run_items(True, failed="n3"), "2026-12-02T10:00:00Z")
    other = cast("PoolStatus", {**good, "pool": "second", "expires_at": "2026-12-02T12:00:00Z",
                                "node_status": [{**e, "task_types": {t: {**v, "level": "startup"}
                                                                     for t, v in e["task_types"].items()}}
                                                for e in good["node_status"]]})
    key = f"validation.{good['domain']}/batch-inference"
    for pools in ([good, other], [other, good]):
        [n1] = [e for e in publish_plan(pools, "ab" * 32, parse_now("2026-12-02T11:00:00Z")) if e["node"] == "n1"]
        [condition] = n1["conditions"]
        assert (n1["labels"][key], condition["type"], condition["status"]) == ("startup", key, "False")
        assert n1["annotations"][key + ".expires-at"] == min(good["expires_at"], "2026-12-02T12:00:00Z")
        assert f"on pool {good['matrix']}/{good['pool']}" in condition["message"]
        assert f"on pool {good['matrix']}/second" in condition["message"]


def test_catalog_lists_node_levels_and_unvalidated_nodes(tmp_path: Path) -> None:
    from pytest_hetero.evidence.views import BundleStatus
    from pytest_hetero.reporting.catalog import catalog_rows, catalog_text

    [pool] = pool_status(matrix(tmp_path, None), run_items(False), "2026-12-02T10:00:00Z")
    status: BundleStatus = {"bundle": tmp_path, "digest": "cd" * 32, "verification": "verified",
                            "validation": {"pools": [pool]}, "vsas": [], "run": {}, "untested": {}}
    [row] = catalog_rows([status], parse_now("2026-12-02T11:00:00Z"))
    assert (row["nodes"], row["node_levels"], [u["node"] for u in row["unvalidated"]]) == (
        ["n1"], {"n1": {"batch-inference": "business"}}, ["n2", "n3", "n4"])
    text = catalog_text([row])
    assert "unvalidated in c/cpu (not exercised by this run, coverage one):" in text
    assert "- n2: not exercised: coverage one ran the pool's workload on n1 only" in text
    assert json.dumps(row)  # JSON-ready


def test_catalog_reads_node_entries_that_lack_their_levels_or_reason(tmp_path: Path) -> None:
    """A status read with --allow-unsigned is whatever its statement says: a node_status entry without
    ``task_types`` lists the node with no levels, an unvalidated entry without ``reason`` a reason of None, as the
    catalogue read them before the subscripts (a KeyError there)."""
    from typing import cast

    from pytest_hetero.evidence.document import NodeStatus, UnvalidatedNode
    from pytest_hetero.evidence.views import BundleStatus
    from pytest_hetero.reporting.catalog import catalog_rows, catalog_text

    [pool] = pool_status(matrix(tmp_path, None), run_items(False), "2026-12-02T10:00:00Z")
    pool["node_status"] = [cast(NodeStatus, {"node": "n1"})]
    pool["unvalidated"] = [cast(UnvalidatedNode, {"node": "n2"})]
    status: BundleStatus = {"bundle": tmp_path, "digest": "cd" * 32, "verification": "unsigned",
                            "validation": {"pools": [pool]}, "vsas": [], "run": {}, "untested": {}}
    [row] = catalog_rows([status], parse_now("2026-12-02T11:00:00Z"))
    assert (row["node_levels"], row["unvalidated"]) == ({"n1": {}}, [{"node": "n2", "reason": None}])
    assert "- n2: None" in catalog_text([row])


def smoke_items(outcomes: dict[str, str]) -> list[ItemDict]:
    """:func:`run_items` with a node-coverage item whose smoke model run ended ``outcomes[node]`` on each node
    (``passed``: model proven there; ``failed``: the node failed on its smoke run, startup still proven)."""
    out = run_items(False)
    nodes = [rec("startup.coverage", coverage="every", pool=POOL, schedulable=POOL, chosen=POOL, not_exercised=[])]
    for n in POOL:
        ok = outcomes[n] == "passed"
        smoke = {"model": "digits-logreg", "dataset": "digits-test", "outcome": outcomes[n],
                 "category": None if ok else "nonzero_exit"}
        nodes += [rec("scheduling.placed", node=n, pod=f"p-{n}"),
                  rec("model.run", node=n, exit_code=0 if ok else 1),
                  rec("startup.node", node=n, outcome=outcomes[n], category=smoke["category"],
                      proven=["scheduling", "startup", "model"] if ok else ["scheduling", "startup"], smoke=smoke)]
    ok_all = all(o == "passed" for o in outcomes.values())
    out.append(item("startup", "passed" if ok_all else "failed", *nodes, coverage="every"))
    return out


def test_a_smoke_run_on_a_node_proves_the_model_there_and_a_failed_one_fails_that_node_only(tmp_path: Path) -> None:
    m = matrix(tmp_path, "every")
    [pool] = pool_status(m, smoke_items(dict.fromkeys(POOL, "passed")), "2026-12-02T10:00:00Z")
    assert pool["model_runs_on"] == POOL
    # business (acceptance) is judged on the model item's node only: the others reach model
    assert levels(pool) == {"n1": "business", "n2": "model", "n3": "model", "n4": "model"}
    n2 = pool["node_status"][1]["task_types"]["batch-inference"]["layers"]
    assert (n2["startup"], n2["model"], n2["business"]) == ("passed", "passed", "not_run")
    [pool] = pool_status(m, smoke_items({**dict.fromkeys(POOL, "passed"), "n3": "failed"}), "2026-12-02T10:00:00Z")
    assert levels(pool) == {"n1": "business", "n2": "model", "n3": "startup", "n4": "model"}
    n3 = pool["node_status"][2]["task_types"]["batch-inference"]["layers"]
    assert (n3["startup"], n3["model"]) == ("passed", "failed")
    plan = publish_plan([pool], "ab" * 32, parse_now("2026-12-02T11:00:00Z"), "d/unvalidated")
    key = f"validation.{pool['domain']}/batch-inference"
    assert {e["node"]: e["labels"][key] for e in plan} == {"n1": "business", "n2": "model", "n3": "startup",
                                                            "n4": "model"}


def test_the_smoke_combination_is_the_plans_first_model_item_of_the_resource_and_image(tmp_path: Path) -> None:
    from pytest_hetero.layers.nodes import smoke_combo

    class Ctx:  # what smoke_combo reads of a LayerContext
        def __init__(self, m: Matrix) -> None:
            self.matrix, self.backend = m, type("B", (), {"scheduling_per_image": True})()
            self.planned = next(i for i in expand(m, scheduling_per_image=True).items if "coverage" in i.keys)

    combo = smoke_combo(Ctx(matrix(tmp_path, "every")))  # type: ignore[arg-type]
    assert combo is not None and (combo.layer, combo.keys) == (
        "model", {"resource": "cpu", "image": "py", "model": "digits-logreg", "dataset": "digits-test"})
    doc = json.loads(matrix_text(resources=[{"name": "cpu", "type": "cpu", "requests": {"cpu": 1},
                                             "coverage": "every"}], backend="kubernetes", name="c",
                                 exclude=[{"model": "digits-logreg", "reason": "not on this pool"}]))
    (tmp_path / "x.matrix.yaml").write_text(json.dumps(doc))
    assert smoke_combo(Ctx(load_matrix(tmp_path / "x.matrix.yaml"))) is None  # type: ignore[arg-type]


def test_node_parallel_comes_from_the_option_else_the_ini_and_must_be_at_least_one(tmp_path: Path) -> None:
    from pytest_hetero.errors import SettingsError
    from pytest_hetero.settings import INI, build_settings

    defaults = {name: default for name, _, default in INI}

    def built(flag: Any, ini: Any = None) -> int:
        def option(name: str) -> Any:
            return flag if name == "--hetero-node-parallel" else [] if name in (
                "--hetero-matrix", "--hetero-affected") else None
        return build_settings(option, lambda n: ini if n == "hetero_node_parallel" and ini is not None
                              else defaults[n], tmp_path, None, "r1").node_parallel

    assert (built(None), built(3), built(None, "12")) == (8, 3, 12)
    with pytest.raises(SettingsError, match="--hetero-node-parallel must be ≥ 1, got 0"):  # named as given
        built(0)
    with pytest.raises(SettingsError, match="ini hetero_node_parallel must be ≥ 1, got 0"):
        built(None, "0")


def test_a_node_discovery_failed_on_that_nothing_ran_on_is_withdrawn_not_left_as_is(tmp_path: Path) -> None:
    """Discovery failed on n4 only (node-level coverage: the higher layers went on on n1–n3), and nothing ran on n4
    (cordoned, or a sample that did not choose it): its status is ``none`` like a failed node that ran something, so
    ``hetero publish`` removes its level label and sets its condition False, never leaving an earlier bundle's
    ``True`` on a node this run found degraded."""
    m = matrix(tmp_path, {"sample": 1})
    scoped = rec("discovery.nodes", coverage="sample 1", failed={"n4": ["allocatable_below_capacity"]},
                 passed=["n1", "n2", "n3"])
    items = run_items(False)
    items[0] = item("discovery", "failed", rec("discovery.snapshot", nodes=[{"name": n} for n in POOL]), scoped)
    items.append(item("startup", "passed", rec("startup.coverage", coverage="sample 1", pool=POOL, schedulable=POOL,
                                                chosen=["n1"], not_exercised=[]),
                      rec("scheduling.placed", node="n1", pod="p-n1"),
                      rec("startup.node", node="n1", outcome="passed", proven=["scheduling", "startup"]),
                      coverage="sample 1"))
    [pool] = pool_status(m, items, "2026-12-02T10:00:00Z")
    assert levels(pool) == {"n1": "business", "n4": "none"}
    n4 = pool["node_status"][1]["task_types"]["batch-inference"]["layers"]
    assert (n4["discovery"], n4["scheduling"], n4["startup"]) == ("failed", "not_run", "not_run")
    assert [(u["node"], u["reason"]) for u in pool["unvalidated"]] == [
        (n, "not exercised: coverage sample 1 ran the pool's workload on n1 only") for n in ("n2", "n3")]
    plan = publish_plan([pool], "ab" * 32, parse_now("2026-12-02T11:00:00Z"))
    key = f"validation.{pool['domain']}/batch-inference"
    got = {e["node"]: (e["labels"][key], e["conditions"][0]["status"]) for e in plan}
    assert got == {"n1": ("business", "True"), "n4": (None, "False")}
    assert [e["node"] for e in left_as_is([pool], plan)] == ["n2", "n3"]


def test_a_node_that_joined_after_discovery_is_not_proven_by_discovery(tmp_path: Path) -> None:
    """n5 joined the pool after discovery listed it (an autoscaler, a node back from repair): the node-coverage item
    lists the pool again and exercises it, but discovery never read it (its conditions, allocatable against capacity,
    labels). Its discovery is ``not_run``, so its level is ``none`` and ``hetero publish`` sets no level label on it,
    whatever ran there; before, it took the pool's discovery pass and was published at ``startup``."""
    late = [*POOL, "n5"]
    nodes = [rec("startup.coverage", coverage="every", pool=late, schedulable=late, chosen=late, not_exercised=[])]
    for n in late:
        nodes += [rec("scheduling.placed", node=n, pod=f"p-{n}"),
                  rec("startup.node", node=n, outcome="passed", proven=["scheduling", "startup"])]
    items = [*run_items(False), item("startup", "passed", *nodes, coverage="every")]
    [pool] = pool_status(matrix(tmp_path, "every"), items, "2026-12-02T10:00:00Z")
    assert levels(pool) == {"n1": "business", "n2": "startup", "n3": "startup", "n4": "startup", "n5": "none"}
    n5 = pool["node_status"][4]["task_types"]["batch-inference"]["layers"]
    assert (n5["discovery"], n5["startup"]) == ("not_run", "passed")
    plan = publish_plan([pool], "ab" * 32, parse_now("2026-12-02T11:00:00Z"))
    key = f"validation.{pool['domain']}/batch-inference"
    assert {e["node"]: e["labels"][key] for e in plan}["n5"] is None


def test_each_pinned_workload_gets_an_inputs_folder_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Node coverage starts one pinned pod per node and checks them concurrently; each smoke run copies the inputs into
    its pod. On a KWOK node every pod's exec runs on the one KWOK host, so pods sharing the run's folder
    ``/tmp/hetero-<owner>`` (the shared workload's) untarred into the same host folder at once: ``tar: … Cannot open:
    File exists``, a node failed ``inputs_copy_failed`` with nothing wrong on it (seen on the KWOK plane, 1 node of 3).
    Each pinned workload now has a root of its own (removed at close, as every workload's inputs are)."""
    import threading
    from types import SimpleNamespace

    from pytest_hetero.backends.kubernetes import submit

    monkeypatch.setattr(submit, "create", lambda session, matrix, res, img, workload: workload)
    session = SimpleNamespace(lock=threading.Lock(), workloads={}, owner="0123456789ab", submit_as="pod")
    shared = submit.submit(session, None, "cpu", "py")  # type: ignore[arg-type]  # what submit reads of a session
    pinned = [submit.submit(session, None, "cpu", "py", n) for n in ("n1", "n2")]  # type: ignore[arg-type]
    roots = [w.root or "/tmp/hetero-0123456789ab" for w in (shared, *pinned)]  # run.execute's default
    assert shared.root is None and len(set(roots)) == 3
    assert all(r.startswith("/tmp/hetero-0123456789ab-") for r in roots[1:])


def test_nodes_a_coverage_item_never_chose_say_it_did_not_run(tmp_path: Path) -> None:
    """``coverage: every`` whose node-coverage item did not run (deselected with ``-k``, blocked by a failed
    scheduling item, or failed before it chose its nodes): the pool's other nodes were listed as ``not exercised:
    coverage every ran the pool's workload on n1 only``, as if every node had been asked for and only n1 had run.
    The reason now says that the node-coverage item chose no node."""
    [pool] = pool_status(matrix(tmp_path, "every"), run_items(False), "2026-12-02T10:00:00Z")
    reasons = {u["node"]: u["reason"] for u in pool["unvalidated"]}
    assert reasons == dict.fromkeys(["n2", "n3", "n4"], "not exercised: the node-coverage item (coverage every) "
                                    "chose no node (not run, blocked, or stopped before choosing); the pool's "
                                    "workload ran on n1 only")


def test_catalog_says_a_kubernetes_pool_that_exercised_no_node_exercised_none(tmp_path: Path) -> None:
    """A Kubernetes pool whose discovery failed pool-wide (coverage one, a cordoned node) ran nothing: no node was
    exercised, its listed nodes are unvalidated. The catalogue's nodes column read ``this host`` (the words for an
    engine without nodes, the local host), as if the pool were this machine; it now reads ``none exercised``."""
    from pytest_hetero.evidence.views import BundleStatus
    from pytest_hetero.reporting.catalog import catalog_rows, catalog_text

    items = [item("discovery", "failed", rec("discovery.snapshot", nodes=[{"name": n} for n in POOL])),
             item("scheduling", "blocked"), item("startup", "blocked"), item("model", "blocked"),
             item("business", "blocked")]
    [pool] = pool_status(matrix(tmp_path, None), items, "2026-12-02T10:00:00Z")
    assert (pool["nodes"], len(pool["unvalidated"])) == ([], 4)
    status: BundleStatus = {"bundle": tmp_path, "digest": "cd" * 32, "verification": "verified",
                            "validation": {"pools": [pool]}, "vsas": [], "run": {}, "untested": {}}
    [row] = catalog_rows([status], parse_now("2026-12-02T11:00:00Z"))
    line = catalog_text([row]).splitlines()[2]
    assert line.startswith("| c/cpu | cpu/") and "| none exercised |" in line and "this host" not in line


def test_an_older_bundle_does_not_overwrite_a_later_runs_status_on_a_node(tmp_path: Path) -> None:
    """Monday's run validated n1; Tuesday's found n1 broken and ``hetero publish`` withdrew it (label removed,
    condition False). Publishing Monday's bundle again (still signed, not expired: a re-run CI job, a hostile replay)
    wrote ``business`` and ``True`` back on n1, and nothing noticed. Each key's ``.verified-at`` annotation now
    carries the run's end; a node whose annotation is later than the plan's keeps the later status."""
    from pytest_hetero.status.publish import NodeSeen, keep_latest

    [pool] = pool_status(matrix(tmp_path, None), run_items(False), "2026-12-02T10:00:00Z")
    plan = publish_plan([pool], "ab" * 32, parse_now("2026-12-02T11:00:00Z"))
    key = f"validation.{pool['domain']}/batch-inference"
    assert plan[0]["annotations"][key + ".verified-at"] == pool["verified_at"]

    def node(verified: str | None) -> NodeSeen:
        return {"name": "n1", "labels": {}, "taints": [], "conditions": [],
                "annotations": {key + ".verified-at": verified} if verified else {}}

    kept, later = keep_latest(plan, [node("2026-12-03T10:00:00Z")])  # Tuesday's run published it
    assert kept == [] and later == [{"node": "n1", "key": key, "published": "2026-12-03T10:00:00Z",
                                     "ours": pool["verified_at"]}]
    for earlier in (node("2026-12-01T10:00:00Z"), node(pool["verified_at"]), node(None), node("not a time")):
        assert keep_latest(plan, [earlier]) == (plan, [])  # an earlier (or the same) run's, none, unreadable
    assert keep_latest(plan, []) == (plan, [])  # a node the cluster does not list: apply_plan says it is gone


def test_a_node_created_since_the_run_began_is_not_published(tmp_path: Path) -> None:
    """The run exercised n1; n1 was then deleted and created again under the same name (a replaced machine, an
    autoscaler reusing a name). Publishing the bundle wrote the run's level on the new machine, which ran nothing.
    A node whose creation time is after the signed run's start is now left out (``replaced``); one created before
    it, one whose creation time is unknown, or a bundle without a start keep the plan."""
    from pytest_hetero.status.publish import NodeSeen, not_replaced

    [pool] = pool_status(matrix(tmp_path, None), run_items(False), "2026-12-02T10:00:00Z")
    plan = publish_plan([pool], "ab" * 32, parse_now("2026-12-02T11:00:00Z"))
    assert [e["node"] for e in plan] == ["n1"]

    def node(created: str | None) -> NodeSeen:
        seen: NodeSeen = {"name": "n1", "labels": {}, "taints": [], "conditions": [], "annotations": {}}
        if created is not None:
            seen["created"] = created
        return seen

    started = "2026-12-02T09:00:00Z"
    kept, replaced = not_replaced(plan, [node("2026-12-02T09:30:00+00:00")], started)
    assert kept == [] and replaced == [{"node": "n1", "created": "2026-12-02T09:30:00+00:00", "run_started": started}]
    for same in (node("2026-11-30T08:00:00+00:00"), node(None), node("not a time")):
        assert not_replaced(plan, [same], started) == (plan, [])
    assert not_replaced(plan, [node("2026-12-02T09:30:00+00:00")], None) == (plan, [])
    assert not_replaced(plan, [node("2026-12-02T09:30:00+00:00")], "garbage") == (plan, [])
    assert not_replaced(plan, [], started) == (plan, [])


def test_a_node_of_another_uid_is_not_published_whatever_the_clocks_say(tmp_path: Path) -> None:
    """The run's discovery read n1 as machine u-1; n1 was then deleted and created again under the same name (u-2).
    Before, only its creationTimestamp against the run's start told it: a bundle that states no start, or a gate clock
    ahead of the apiserver's, wrote the run's level on the new machine. The uid discovery read is now in
    ``node_status`` and publish leaves out a node whose uid is another, whatever the times say."""
    from pytest_hetero.status.publish import NodeSeen, node_uids, not_replaced

    items = run_items(False)
    items[0] = item("discovery", "passed", rec("discovery.snapshot", nodes=[{"name": n, "uid": f"u-{n}"} for n in POOL]))
    [pool] = pool_status(matrix(tmp_path, None), items, "2026-12-02T10:00:00Z")
    assert [(e["node"], e.get("uid")) for e in pool["node_status"]] == [("n1", "u-n1")]
    plan = publish_plan([pool], "ab" * 32, parse_now("2026-12-02T11:00:00Z"))

    def node(uid: str | None, created: str = "2026-11-30T08:00:00+00:00") -> NodeSeen:
        seen: NodeSeen = {"name": "n1", "labels": {}, "taints": [], "conditions": [], "annotations": {},
                          "created": created}
        if uid is not None:
            seen["uid"] = uid
        return seen

    uids = node_uids([pool])
    assert uids == {"n1": {"u-n1"}}
    for started in ("2026-12-02T09:00:00Z", None):  # created long before the run began, or a bundle with no start
        kept, replaced = not_replaced(plan, [node("u-new")], started, uids)
        assert kept == [] and replaced == [{"node": "n1", "uid": "u-new", "run_uid": "u-n1"}]
        assert not_replaced(plan, [node("u-n1")], started, uids) == (plan, [])  # the machine that ran
    assert not_replaced(plan, [node(None)], None, uids) == (plan, [])  # the cluster names no uid: the times decide
    # a bundle written before uids were recorded: the creation time still tells
    late = node("u-new", "2026-12-02T09:30:00+00:00")
    assert not_replaced(plan, [late], "2026-12-02T09:00:00Z", {})[1] == [
        {"node": "n1", "created": "2026-12-02T09:30:00+00:00", "run_started": "2026-12-02T09:00:00Z"}]
    # a second pool's discovery read n1 as another machine: no one machine was read under the name
    assert not_replaced(plan, [node("u-n1")], None, {"n1": {"u-n1", "u-other"}})[0] == []


def test_the_machine_the_run_read_is_published_whatever_the_clocks_say(tmp_path: Path) -> None:
    """n1 now has the uid the run's discovery read: the machine the run exercised. Its creationTimestamp was still held
    against the run's start, so an apiserver clock ahead of the gate's (a node an autoscaler made just before the run)
    left the very machine the run read out as 'created since the run began'. The uid tells it, whatever the clocks
    say, both ways; the times decide only where no uid is recorded or read."""
    from pytest_hetero.status.publish import NodeSeen, node_uids, not_replaced

    items = run_items(False)
    items[0] = item("discovery", "passed", rec("discovery.snapshot", nodes=[{"name": n, "uid": f"u-{n}"} for n in POOL]))
    [pool] = pool_status(matrix(tmp_path, None), items, "2026-12-02T10:00:00Z")
    plan = publish_plan([pool], "ab" * 32, parse_now("2026-12-02T11:00:00Z"))
    ahead: NodeSeen = {"name": "n1", "labels": {}, "taints": [], "conditions": [], "annotations": {},
                       "created": "2026-12-02T09:00:05+00:00", "uid": "u-n1"}  # the apiserver's clock 10 s ahead
    assert not_replaced(plan, [ahead], "2026-12-02T09:00:00Z", node_uids([pool])) == (plan, [])
    assert not_replaced(plan, [ahead], "2026-12-02T09:00:00Z", {})[0] == []  # no uid recorded: the times decide


def test_a_node_listed_under_two_uids_has_no_discovery_of_its_own(tmp_path: Path) -> None:
    """Two discovery snapshots of the pool read n1 as two machines (replaced while the pool was read): no one machine
    was read under the name, so its discovery is not_run there, its level none and its status names no uid."""
    items = run_items(False)
    items[0] = item("discovery", "passed",
                    rec("discovery.snapshot", nodes=[{"name": n, "uid": f"u-{n}"} for n in POOL]),
                    rec("discovery.snapshot", nodes=[{"name": "n1", "uid": "u-again"}]))
    [pool] = pool_status(matrix(tmp_path, None), items, "2026-12-02T10:00:00Z")
    [n1] = pool["node_status"]
    assert "uid" not in n1 and n1["task_types"]["batch-inference"]["layers"]["discovery"] == "not_run"
    assert levels(pool) == {"n1": "none"}


def test_the_pinned_workloads_of_a_large_pool_have_names_of_their_own() -> None:
    """A node-coverage workload pinned to a node was named from 20 bits of a digest of resource/image/node: of 5,000
    nodes named gpu-node-NNNN, six pairs shared a Pod name (and, on a KWOK host, an inputs folder), e.g. gpu-node-0603
    and gpu-node-1869, so one node's pinned Pod could not be created beside the other's. Now 40 bits; every name is
    still a DNS-1123 label and a label value (at most 63 characters)."""
    from pytest_hetero.backends.kubernetes.submit import workload_names

    owner = "0123456789abcdef"
    names = [workload_names("gpu-a-very-long-resource-name-for-the-pool", "py-current-image-name",
                            f"gpu-node-{i:04d}", owner) for i in range(1, 5001)]
    assert len({n[0] for n in names}) == len({n[1] for n in names}) == len({n[2] for n in names}) == 5000
    assert all(len(probe) <= 63 and len(name) <= 63 for probe, name, _ in names)
    assert workload_names("gpu", "py", "gpu-node-0603", owner)[1] != workload_names("gpu", "py", "gpu-node-1869",
                                                                                    owner)[1]
    assert workload_names("gpu", "py", None, owner)[2] is None  # the shared workload's folder is the session's
