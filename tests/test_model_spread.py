"""Model runs spread over the pool (issue 32): the ``model_runs``/``concurrency`` settings, their precedence, and the
model items the pytest glue tells an engine it may start ahead. The engine side runs on the real node in
tests/kubernetes/test_realnode_spread.py."""

from __future__ import annotations

import gc
import json
import threading
import time
import weakref
from pathlib import Path
from typing import Any, cast

import pytest
from support import matrix_text

from pytest_hetero.backends.protocol import ActionFailed, ExecResult, NodeFacts
from pytest_hetero.backends.spread import Concurrency, Deferred, Plan, Spread, ahead, mode, wanted
from pytest_hetero.errors import MatrixError, SettingsError
from pytest_hetero.layers.base import new_state
from pytest_hetero.matrix.expand import expand
from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.matrix.model import Matrix
from pytest_hetero.settings import INI, MAX_CONCURRENCY, Settings, build_settings

pytestmark = pytest.mark.usefixtures("outside_inputs")


def matrix(tmp_path: Path, models: int = 1, **resource: Any) -> Matrix:
    res: dict[str, Any] = {"name": "gpu", "type": "gpu", "requests": {"nvidia.com/gpu": 1}, **resource}
    doc = json.loads(matrix_text(resources=[res], backend="kubernetes", name="s",
                                 images=[{"name": "py", "reference": "pytest-hetero/py311-onnx:1"}]))
    first = doc["spec"]["models"][0]
    doc["spec"]["models"] = [{**first, "name": f"m{i}"} for i in range(1, models + 1)]
    (tmp_path / "s.matrix.yaml").write_text(json.dumps(doc))
    return load_matrix(tmp_path / "s.matrix.yaml")


def settings(tmp_path: Path, flags: dict[str, Any] | None = None, ini: dict[str, str] | None = None) -> Settings:
    defaults = {name: default for name, _, default in INI} | (ini or {})

    def option(name: str) -> Any:
        return (flags or {}).get(name, [] if name in ("--hetero-matrix", "--hetero-affected") else None)

    return build_settings(option, defaults.__getitem__, tmp_path, None, "r1")


def step(m: Matrix, s: Settings, model: str = "m1") -> Deferred:
    [planned] = [p for p in expand(m, scheduling_per_image=True).items
                 if p.layer == "model" and p.keys["model"] == model]
    return Deferred(m, planned, s, 60.0)


def test_the_settings_are_read_from_the_matrix(tmp_path: Path) -> None:
    m = matrix(tmp_path, model_runs="per-run", concurrency=8)
    assert (m.resources[0].model_runs, m.resources[0].concurrency) == ("per-run", 8)
    plain = matrix(tmp_path)
    assert (plain.resources[0].model_runs, plain.resources[0].concurrency) == (None, None)


@pytest.mark.parametrize(("field", "value"), [("model_runs", "per_run"), ("concurrency", 0)])
def test_a_bad_value_is_refused_naming_the_field(tmp_path: Path, field: str, value: Any) -> None:
    with pytest.raises(MatrixError) as err:
        matrix(tmp_path, **{field: value})
    assert field in err.value.render()


def test_the_command_line_beats_the_matrix_which_beats_the_ini(tmp_path: Path) -> None:
    m = matrix(tmp_path, model_runs="per-run", concurrency=8)
    assert mode(step(m, settings(tmp_path))) == ("per-run", 8)
    assert mode(step(m, settings(tmp_path, {"--hetero-model-runs": "shared", "--hetero-concurrency": 2}))) \
        == ("shared", 2)
    plain = matrix(tmp_path)
    assert mode(step(plain, settings(tmp_path))) == ("shared", 4)
    assert mode(step(plain, settings(tmp_path, ini={"hetero_model_runs": "per-run", "hetero_concurrency": "16"}))) \
        == ("per-run", 16)
    assert wanted(step(plain, settings(tmp_path, {"--hetero-model-runs": "per-run"})))
    assert not wanted(step(plain, settings(tmp_path)))


def test_bad_run_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="hetero_model_runs must be shared or per-run"):
        settings(tmp_path, ini={"hetero_model_runs": "parallel"})
    for bad in (0, "2.5", "all"):
        with pytest.raises(SettingsError) as err:
            settings(tmp_path, {"--hetero-concurrency": bad})
        assert str(err.value) == ("--hetero-concurrency must be a whole number of model runs at once (at least 1) or "
                                  f"free, got {bad!r}\n  hint: --hetero-concurrency 8 or --hetero-concurrency free")
    with pytest.raises(SettingsError, match="hetero_concurrency must be a whole number"):
        settings(tmp_path, ini={"hetero_concurrency": "-1"})
    # above the matrix schema's maximum: refused on the command line and in the ini as in the matrix
    schema = json.loads((Path(__file__).parents[1] / "pytest_hetero" / "matrix" / "schema.json").read_text())
    limit = concurrency_int(schema)["maximum"]
    assert limit == MAX_CONCURRENCY == 1000
    assert mode(step(matrix(tmp_path), settings(tmp_path, {"--hetero-model-runs": "per-run",
                                                          "--hetero-concurrency": str(limit)}))) == ("per-run", limit)
    with pytest.raises(SettingsError) as err:
        settings(tmp_path, {"--hetero-concurrency": str(limit + 1)})
    assert str(err.value) == ("--hetero-concurrency must be at most 1000 model runs at once (the matrix schema's "
                              "resources[].concurrency maximum), got 1001\n"
                              "  hint: --hetero-concurrency 8 or --hetero-concurrency free")
    with pytest.raises(SettingsError, match="hetero_concurrency must be at most 1000 model runs at once"):
        settings(tmp_path, ini={"hetero_concurrency": "5000"})
    # a number too large for a float's 53 bits is named as written (it read 'got 100000000000000000000')
    with pytest.raises(SettingsError, match=r"maximum\), got 99999999999999999999\n"):
        settings(tmp_path, {"--hetero-concurrency": "99999999999999999999"})


def walk(node: Any) -> list[dict[str, Any]]:
    """Every JSON object in ``node``, depth first."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found += walk(value)
    elif isinstance(node, list):
        for value in node:
            found += walk(value)
    return found


def concurrency_int(schema: dict[str, Any]) -> dict[str, Any]:
    """The integer branch of the resources' ``concurrency`` (the one ``concurrency`` property that is a oneOf)."""
    [prop] = [n["properties"]["concurrency"] for n in walk(schema)
              if isinstance(n.get("properties"), dict) and "oneOf" in n["properties"].get("concurrency", {})]
    [branch] = [b for b in prop["oneOf"] if b.get("type") == "integer"]
    return cast(dict[str, Any], branch)


def test_free_concurrency_is_a_setting_of_its_own_everywhere(tmp_path: Path) -> None:
    """``free`` from the matrix, the command line or the ini reaches the engine as ``free`` (it counts the runs)."""
    m = matrix(tmp_path, model_runs="per-run", concurrency="free")
    assert m.resources[0].concurrency == "free"
    assert mode(step(m, settings(tmp_path))) == ("per-run", "free")
    assert mode(step(m, settings(tmp_path, {"--hetero-concurrency": "3"}))) == ("per-run", 3)
    plain = matrix(tmp_path, model_runs="per-run")
    assert mode(step(plain, settings(tmp_path, {"--hetero-concurrency": "free"}))) == ("per-run", "free")
    assert mode(step(plain, settings(tmp_path, ini={"hetero_concurrency": "free"}))) == ("per-run", "free")
    with pytest.raises(MatrixError) as err:
        matrix(tmp_path, concurrency="all")
    assert "concurrency" in err.value.render()


def node(name: str, allocatable: dict[str, str], held: dict[str, float] | None, **facts: Any) -> NodeFacts:
    return cast("NodeFacts", {"name": name, "ready": "True", "ready_reason": None, "ready_message": None,
                              "unschedulable": False, "taints": [], "labels": {}, "capacity": allocatable,
                              "allocatable": allocatable, "simulated": False, "requested_by_pods": held, **facts})


def test_free_capacity_is_the_schedulers_arithmetic_per_node(tmp_path: Path) -> None:
    """Per node the least over the requested names of floor((allocatable - requested) / request); a node not Ready,
    cordoned, tainted against the resource, or whose pods could not be counted takes none."""
    from pytest_hetero.backends.kubernetes.capacity import free_runs
    from pytest_hetero.backends.kubernetes.governance import in_maintenance

    res = matrix(tmp_path, requests={"nvidia.com/gpu": 2, "cpu": "3", "memory": "8Gi"}).resources[0]
    pool = [node("a", {"nvidia.com/gpu": "8", "cpu": "32", "memory": "64Gi"}, {"nvidia.com/gpu": 3.0, "cpu": 4.0}),
            node("b", {"nvidia.com/gpu": "8", "cpu": "7", "memory": "64Gi"}, {}),  # CPU bounds it: 7 // 3 = 2
            node("c", {"nvidia.com/gpu": "8", "cpu": "32", "memory": "64Gi"}, {}, ready="False"),
            node("d", {"nvidia.com/gpu": "8", "cpu": "32", "memory": "64Gi"}, {}, unschedulable=True),
            node("e", {"nvidia.com/gpu": "8", "cpu": "32", "memory": "64Gi"}, {},
                 taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
            node("f", {"nvidia.com/gpu": "8", "cpu": "32", "memory": "64Gi"}, None),
            node("g", {"cpu": "32", "memory": "64Gi"}, {}),  # no GPU advertised
            node("h", {"nvidia.com/gpu": "8", "cpu": "32", "memory": "20Gi"}, {"memory": 16 * 2**30})]
    got = free_runs(pool, res.requests, lambda n: in_maintenance(n, res), None)
    fits = {name: (f["fits"], f.get("bound_by") or f.get("why")) for name, f in got["nodes"].items()}
    assert fits == {"a": (2, "nvidia.com/gpu"), "b": (2, "cpu"), "c": (0, "not Ready (False)"),
                    "d": (0, "cordoned (spec.unschedulable: true)"), "e": (0, "untolerated taint dedicated=x:NoSchedule"),
                    "f": (0, "its pods could not be counted"), "g": (0, "nvidia.com/gpu"), "h": (0, "memory")}
    assert (got["total"], got["width"], got["unavailable"]) == (4, 4, None)
    none = free_runs(pool[2:3], res.requests, lambda n: in_maintenance(n, res), "list pods: HTTP 403 Forbidden")
    assert (none["total"], none["width"], none["unavailable"]) == (0, 1, "list pods: HTTP 403 Forbidden")
    many = free_runs([node(f"n{i}", {"cpu": "64"}, {}) for i in range(10)], {"cpu": "1"}, lambda n: [], None, 1000)
    assert (many["total"], many["width"]) == (640, 640)  # 200 nodes' worth fits under the cap (was 64)
    over = free_runs([node(f"n{i}", {"cpu": "64"}, {}) for i in range(20)], {"cpu": "1"}, lambda n: [], None, 1000)
    assert (over["total"], over["width"]) == (1280, 1000) and over["rule"].endswith("at least 1, at most 1000")
    nothing_asked = free_runs([node("z", {"cpu": "1"}, {})], {}, lambda n: [], None, 448)
    assert (nothing_asked["width"], nothing_asked["nodes"]["z"]["fits"]) == (448, 448)
    # each run is a pod: a node's pod capacity (allocatable pods less the pods bound to it) bounds it too
    crowded = free_runs([node("p", {"cpu": "32", "pods": "110"}, {"cpu": 1.0, "pods": 108.0})], {"cpu": "1"},
                        lambda n: [], None)
    assert crowded["nodes"]["p"] == {"fits": 2, "bound_by": "pods"}
    assert free_runs([node("q", {"pods": "110"}, {"pods": 10.0})], {}, lambda n: [], None)["nodes"]["q"] == {
        "fits": 100, "bound_by": "pods"}



def test_runs_ahead_are_the_group_from_this_item_on(tmp_path: Path) -> None:
    m = matrix(tmp_path, models=3)
    s = settings(tmp_path)
    group = [step(m, s, f"m{i}").planned for i in (1, 2, 3)]
    second = step(m, s, "m2")
    assert ahead(second) == [second.planned]  # no list from the glue: this item only
    second.state = {**new_state(), "upcoming": group}  # type: ignore[attr-defined]  # as LayerContext.state carries it
    assert ahead(second) == group[1:]


def test_the_glue_groups_the_selected_model_items_in_run_order(pytester: pytest.Pytester, tmp_path: Path) -> None:
    matrix(tmp_path, models=3)
    pytester.makefile(".matrix.yaml", s=(tmp_path / "s.matrix.yaml").read_text())
    pytester.makeconftest('''
import pytest
from pytest_hetero.pytest_plugin.item import LayerItem
from pytest_hetero.pytest_plugin.spread import upcoming

@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    for item in session.items:
        if isinstance(item, LayerItem) and item.planned.layer == "model":
            print("UPCOMING", item.planned.keys["model"], [p.keys["model"] for p in upcoming(item)])
''')
    out = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--collect-only", "-q", "-s",
                             "-k", "not m2")
    lines = sorted(line for line in out.outlines if line.startswith("UPCOMING"))
    assert lines == ["UPCOMING m1 ['m1', 'm3']", "UPCOMING m3 ['m1', 'm3']"]


def test_runs_go_at_most_width_at_once_and_each_item_joins_its_own(tmp_path: Path) -> None:
    m = matrix(tmp_path, models=4)
    s = settings(tmp_path, {"--hetero-model-runs": "per-run", "--hetero-concurrency": 2})
    steps = [step(m, s, f"m{i}") for i in (1, 2, 3, 4)]
    for each in steps:
        each.state = {**new_state(), "upcoming": [x.planned for x in steps]}  # type: ignore[attr-defined]  # as LayerContext's
    lock, running, peak = threading.Lock(), [0], [0]

    def run(deferred: Deferred, width: int, queued: float) -> ExecResult:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        deferred.record("ran", model=deferred.model.name, width=width)
        if deferred.model.name == "m3":
            raise ActionFailed("m3's container exited", "container_exited")
        return ExecResult(argv=[deferred.model.name], exit_code=0, duration_s=0.2, stdout=deferred.model.name,
                          stderr="", outputs=None)

    def plan(concurrency: Concurrency) -> Plan:
        assert concurrency != "free"
        return Plan(run=run, unexpected=lambda exc, _: ActionFailed(str(exc), "harness"), width=concurrency,
                    noun="container", facts={"slots": 2})

    spread = Spread()
    joined: list[str] = []
    for each in steps:
        try:
            joined.append(spread.execute(each, plan).stdout)
        except ActionFailed as exc:
            joined.append(exc.category)
    assert joined == ["m1", "m2", "container_exited", "m4"]  # each item its own result, a fault its own too
    assert peak[0] == 2  # the width, never more
    assert [d for k, d in steps[0].records if k == "model.spread"] == [
        {"model_runs": "per-run", "concurrency": 2, "launched": 4, "slots": 2,
         "items": ["::".join(x.planned.parts) for x in steps]}]
    assert [[d["model"] for k, d in x.records if k == "ran"] for x in steps] == [["m1"], ["m2"], ["m3"], ["m4"]]
    spread.shutdown()
    other = tmp_path / "other"
    other.mkdir()
    late = step(matrix(other, models=2), s)  # another matrix: a group of its own, after the engine's close
    with pytest.raises(ActionFailed, match="the gate stopped before this model run's container was created"):
        spread.execute(late, plan)


def test_a_joined_run_is_not_held_by_its_group(tmp_path: Path) -> None:
    """Issue 32 (memory flat in items): once an item has joined its run, the group keeps neither the run's result
    nor its Deferred (records, artifacts); a group of 2,000 runs held every ExecResult until the engine's close."""
    m = matrix(tmp_path, models=3)
    s = settings(tmp_path, {"--hetero-model-runs": "per-run", "--hetero-concurrency": 2})
    steps = [step(m, s, f"m{i}") for i in (1, 2, 3)]
    for each in steps:
        each.state = {**new_state(), "upcoming": [x.planned for x in steps]}  # type: ignore[attr-defined]  # as LayerContext's
    made: list[weakref.ref[Any]] = []

    def run(deferred: Deferred, width: int, queued: float) -> ExecResult:
        deferred.record("ran", model=deferred.model.name)
        result = ExecResult(argv=[deferred.model.name], exit_code=0, duration_s=0.0, stdout="x" * 10_000,
                            stderr="", outputs=None)
        made.extend([weakref.ref(result), weakref.ref(deferred)])
        return result

    spread = Spread()
    plan = lambda width: Plan(run=run, unexpected=lambda exc, _: ActionFailed(str(exc), "harness"),  # noqa: E731
                              width=2, noun="container")
    assert [len(spread.execute(each, plan).stdout) for each in steps] == [10_000] * 3
    [group] = spread.groups.values()
    group.pool.shutdown(wait=True)  # a worker drops its last run's arguments just after handing the result over
    gc.collect()
    assert (len(made), [ref() for ref in made], group.launched) == (6, [None] * 6, set())
    spread.shutdown()
    assert spread.wait(1.0) == 0


def test_free_cap_is_the_schema_bound_or_what_the_open_file_limit_holds() -> None:
    """``free`` takes at most 1,000 runs (the schema's bound on a number), fewer where the soft open-file limit would
    not hold 2 descriptors per run beside 128 for the rest of the gate."""
    import resource

    from pytest_hetero.backends.kubernetes.capacity import FREE_MAX, free_cap

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert FREE_MAX == 1000
    assert free_cap() == (1000 if soft == resource.RLIM_INFINITY else min(1000, (soft - 128) // 2))
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
        assert free_cap() == (min(1024, hard) - 128) // 2  # 448 under the common default of 1,024
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
