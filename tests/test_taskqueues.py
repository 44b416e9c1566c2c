"""spec.task_queues: loaded, refused where it cannot hold, planned as one scheduling item per resource × image
× task type (Kubernetes), not applicable elsewhere; the verdict's rules on the facts an engine reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from support import matrix_text

from pytest_hetero.backends.protocol import JobAdmission, JobPlacement, JobRequest, RendezvousAnswer
from pytest_hetero.errors import MatrixInvalid
from pytest_hetero.judge.failures import owner_category, status_of
from pytest_hetero.layers.base import LayerFailed
from pytest_hetero.layers.taskqueue import judge
from pytest_hetero.matrix.expand import expand
from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.matrix.taskqueues import TaskQueue
from pytest_hetero.pending.model import make_reason
from pytest_hetero.status.compute import pool_status

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import ItemDict

# the matrices lie in tmp_path and name the repository's cases/ by absolute path (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def write(tmp_path: Path, task_queues: dict[str, Any], task_type: str = "training") -> Path:
    doc = json.loads(matrix_text(backend="kubernetes", images=[{"name": "py", "reference": "python:3", "for": ["cpu"]}]))
    doc["spec"]["models"][0]["task_type"] = task_type
    doc["spec"]["task_queues"] = task_queues
    path = tmp_path / "m.matrix.yaml"
    path.write_text(json.dumps(doc, indent=1))
    return path


def test_a_rule_is_read_with_its_duration_and_workers(tmp_path: Path) -> None:
    m = load_matrix(write(tmp_path, {"training": {"queue": "lq-train", "cluster_queue": "cq-train",
                                                  "priority_class": "batch", "max_wait": "1m30s", "workers": 2}}))
    [rule] = m.task_queues
    assert (rule.task_type, rule.queue, rule.cluster_queue, rule.priority_class, rule.max_wait_s, rule.workers) == (
        "training", "lq-train", "cq-train", "batch", 90.0, 2)
    assert rule.line > 0


def test_each_task_type_rule_is_a_scheduling_item_per_resource_and_image_on_kubernetes(tmp_path: Path) -> None:
    m = load_matrix(write(tmp_path, {"training": {"workers": 2}}))
    plan = expand(m, scheduling_per_image=True)
    [item] = [i for i in plan.items if "task_type" in i.keys]
    assert (item.id, item.layer, item.depends_on) == ("cpu-host::py::training::scheduling", "scheduling",
                                                      ("cpu-host", "discovery"))
    assert item.keys == {"resource": "cpu-host", "image": "py", "task_type": "training"}
    # a backend without queues (docker, local): said not applicable, with the reason
    flat = expand(m, scheduling_per_image=False)
    assert not [i for i in flat.items if "task_type" in i.keys]
    [gone] = [o for o in flat.omitted if "task_type" in o.keys]
    assert gone.status == "not_applicable" and "Kubernetes queues" in gone.reason


def test_a_rule_for_a_task_type_no_model_has_is_refused_at_its_line(tmp_path: Path) -> None:
    with pytest.raises(MatrixInvalid) as err:
        load_matrix(write(tmp_path, {"fine-tune": {"queue": "lq"}}))
    [problem] = err.value.problems
    assert problem.message == "no model has task_type 'fine-tune'"
    assert problem.location.field == "spec.task_queues.fine-tune" and problem.location.line > 0
    assert "training" in problem.hint


def test_several_workers_only_for_training_and_fine_tune(tmp_path: Path) -> None:
    with pytest.raises(MatrixInvalid) as err:
        load_matrix(write(tmp_path, {"evaluation": {"workers": 2}}, task_type="evaluation"))
    [problem] = err.value.problems
    assert problem.message == "workers: 2 for task type 'evaluation', which runs one pod"
    assert problem.location.field == "spec.task_queues.evaluation.workers"


def test_a_bad_max_wait_is_refused_by_the_schema(tmp_path: Path) -> None:
    with pytest.raises(MatrixInvalid) as err:
        load_matrix(write(tmp_path, {"training": {"max_wait": "5 minutes"}}))
    assert "max_wait" in err.value.problems[0].location.field


RULE = TaskQueue("training", queue="lq", cluster_queue="cq-train", max_wait_s=5.0, workers=2, line=7)
REQ = JobRequest("training", 2, "lq", None, 60.0)


def admitted(local_queue: str = "lq", cluster_queue: str = "cq-train", wait_s: float = 1.0) -> JobPlacement:
    admission: JobAdmission = {
        "api_version": "kueue.x-k8s.io/v1beta2", "workload": "job-x-1", "local_queue": local_queue,
        "cluster_queue": cluster_queue, "flavors": {}, "resource_usage": {}, "pod_sets": [], "created_at": None,
        "quota_reserved_at": None, "quota_reserved_message": None, "admitted_at": None, "wait_s": wait_s,
        "wait_since_submit_s": None, "cluster_queue_status": {}, "priority_class": None, "priority_class_kind": None,
        "priority": None}
    ok: list[RendezvousAnswer] = [{"index": i, "pod": f"job-x-{i}", "ok": True, "error": None} for i in range(2)]
    return JobPlacement(admitted=True, placed=2, workers=2, admission=admission, rendezvous=ok, service="job-x")


def category(job: JobPlacement) -> str | None:
    try:
        judge(RULE, REQ, job)
    except LayerFailed as exc:
        return exc.category
    return None


def test_verdicts_on_the_facts() -> None:
    assert category(admitted()) is None
    assert category(admitted(cluster_queue="cq-shared")) == "queue_rule_mismatch"
    assert category(admitted(local_queue="other")) == "queue_rule_mismatch"
    assert category(admitted(wait_s=6.0)) == "queue_wait_exceeded"
    broken = admitted()
    broken.rendezvous[1] = {"index": 1, "pod": "job-x-1", "ok": False, "error": "peer 0: 10.0.0.1:29500: timed out"}
    assert category(broken) == "gang_rendezvous_failed"
    # never admitted: Kueue's reason decides; past max_wait the bound does, the reason kept in the message
    waiting = JobPlacement(admitted=False, workers=2, waited_s=3.0, decisive=make_reason(
                               "kueue", "queue_request_exceeds_max", "insufficient quota").to_dict(),
                           message="not admitted: insufficient quota")
    assert category(waiting) == "queue_request_exceeds_max"
    waiting.waited_s = 9.0
    assert category(waiting) == "queue_wait_exceeded"
    assert category(JobPlacement(admitted=False, workers=2)) == "scheduling_timeout"


def test_new_categories_are_the_platforms() -> None:
    for name in ("queue_rule_mismatch", "queue_wait_exceeded", "gang_rendezvous_failed"):
        assert (owner_category(name, "scheduling"), status_of(name, "failed", "scheduling")) == ("platform", "failed")


def test_a_task_types_scheduling_item_counts_for_that_task_type_only(tmp_path: Path) -> None:
    """The training job's failed scheduling item lowers training's level on the pool, not batch-inference's."""
    path = write(tmp_path, {"training": {"workers": 2}})
    doc = json.loads(path.read_text())
    doc["spec"]["models"].append({**doc["spec"]["models"][0], "name": "scorer", "task_type": "batch-inference"})
    path.write_text(json.dumps(doc))
    m = load_matrix(path)
    items: list[dict[str, Any]] = [
        {"keys": {"resource": "cpu-host"}, "layer": "discovery", "status": "passed", "records": []},
        {"keys": {"resource": "cpu-host", "image": "py"}, "layer": "scheduling", "status": "passed", "records": []},
        {"keys": {"resource": "cpu-host", "image": "py", "task_type": "training"}, "layer": "scheduling",
         "status": "failed", "records": []}]
    [pool] = pool_status(m, cast("list[ItemDict]", items), "2026-12-02T10:00:00Z")
    levels = {t: pool["task_types"][t]["layers"]["scheduling"] for t in ("training", "batch-inference")}
    assert levels == {"training": "failed", "batch-inference": "passed"}


def test_the_workloads_priority_class_is_read_in_both_kueue_versions() -> None:
    from pytest_hetero.backends.kubernetes.gang import priority_of
    from pytest_hetero.backends.kubernetes.manifests import ServedWorkload
    from pytest_hetero.backends.kubernetes.queues import parse_workload

    v1beta2: ServedWorkload = {"kind": "Workload", "metadata": {"name": "w2"}, "spec": {"priority": 100, "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                                               "name": "batch"}}}
    v1beta1: ServedWorkload = {"kind": "Workload", "metadata": {"name": "w1"}, "spec": {"priority": 5, "priorityClassName": "low", "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass"}}
    assert priority_of(parse_workload(v1beta2)) == {"priority_class": "batch", "priority_class_kind": "PriorityClass", "priority": 100}
    assert priority_of(parse_workload(v1beta1)) == {"priority_class": "low", "priority_class_kind": "kueue.x-k8s.io/workloadpriorityclass",
                                    "priority": 5}
    assert priority_of(parse_workload({"kind": "Workload", "metadata": {"name": "w0"}, "spec": {}}))["priority_class"] is None


def test_a_changed_rule_affects_its_task_types_items_only(tmp_path: Path) -> None:
    from pytest_hetero.matrix.diff import changed_items

    old_dir, new_dir = tmp_path / "old", tmp_path / "new"
    old_dir.mkdir()
    new_dir.mkdir()
    old = load_matrix(write(old_dir, {"training": {"workers": 2, "max_wait": "5m"}}))
    new = load_matrix(write(new_dir, {"training": {"workers": 2, "max_wait": "1m"}}))
    got = changed_items(old, expand(old, scheduling_per_image=True), new, expand(new, scheduling_per_image=True))
    # (the model items differ too: a copy in another folder cannot tell its code folder is the same)
    assert got["cpu-host::py::training::scheduling"] == "spec.task_queues.training changed"
    assert {"cpu-host::discovery", "cpu-host::py::scheduling"}.isdisjoint(got)
    same = load_matrix(write(new_dir, {"training": {"max_wait": "5m", "workers": 2}}))
    assert "cpu-host::py::training::scheduling" not in changed_items(
        old, expand(old, scheduling_per_image=True), same, expand(same, scheduling_per_image=True))


def test_the_rendezvous_answer_is_read_once_and_a_foreign_line_is_no_answer() -> None:
    from pytest_hetero.backends.kubernetes.gang import parse_answer

    line = json.dumps({"index": 1, "host": "job-x-1", "reached_ms": {"0": 2.5}, "heard": [0], "errors": {},
                       "ok": True})
    assert parse_answer(line) == {"index": 1, "host": "job-x-1", "reached_ms": {"0": 2.5}, "heard": [0],
                                  "errors": {}, "ok": True}
    for foreign in ('{"index": 1, "ok": true}', "[1, 2]", "Traceback (most recent call last):"):
        with pytest.raises(ValueError):
            parse_answer(foreign)
