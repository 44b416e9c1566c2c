"""Queue rules per task type and the shape of a task type's job (``spec.task_queues``).

``spec.task_queues`` maps a task type (a ``models[].task_type``) to the rule its jobs must meet on
Kubernetes through Kueue::

    task_queues:
      training:
        queue: lq-train          # LocalQueue the job is submitted to (default: the resource's queue)
        cluster_queue: cq-train  # the ClusterQueue that must admit it
        priority_class: batch    # PriorityClass it is submitted with and must keep
        max_wait: 10m            # Workload created -> Admitted, at most (pytest_hetero.durations)
        workers: 2               # pods of one job, admitted together (training, fine-tune only)

Each rule gives one scheduling item per resource × image (``<resource>::<image>::<task type>::scheduling``,
:mod:`pytest_hetero.layers.taskqueue`). A rule for a task type no model has, and ``workers`` above 1 for a
task type that is not training or fine-tune, are matrix errors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_hetero.durations import parse_duration
from pytest_hetero.errors import MatrixError

if TYPE_CHECKING:
    from pytest_hetero.matrix.defaults import Spec

GANG_TASK_TYPES = ("training", "fine-tune")
"""Task types whose job may have several pods (``workers`` > 1)."""


@dataclass(frozen=True)
class TaskQueue:
    """The rule of one task type: ``queue`` (LocalQueue; None: the resource's), ``cluster_queue``,
    ``priority_class`` (None: the resource's), ``max_wait_s`` (seconds; None: no bound), ``workers``
    (pods of one job), ``line`` of the rule in the matrix file."""

    task_type: str
    queue: str | None = None
    cluster_queue: str | None = None
    priority_class: str | None = None
    max_wait_s: float | None = None
    workers: int = 1
    line: int = 0


def build(spec: Spec, line: Callable[..., int]) -> tuple[TaskQueue, ...]:
    """The :class:`TaskQueue` of each ``spec.task_queues`` entry (schema-checked), in file order;
    ``line(*path)`` gives the line of a path of the document."""
    return tuple(TaskQueue(
        task_type=t, queue=r["queue"], cluster_queue=r["cluster_queue"], priority_class=r["priority_class"],
        max_wait_s=parse_duration(r["max_wait"]) if r["max_wait"] is not None else None,
        workers=int(r["workers"]), line=line("spec", "task_queues", t))
        for t, r in spec["task_queues"].items())


def task_queue_problems(spec: Spec,
                        error: Callable[[tuple[Any, ...], str, str], MatrixError]) -> list[MatrixError]:
    """Problems the schema cannot see: a rule for a task type no model has; ``workers`` > 1 for a task
    type that runs one pod."""
    problems: list[MatrixError] = []
    have = sorted({m["task_type"] for m in spec["models"]})
    for task, rule in spec["task_queues"].items():
        if task not in have:
            problems.append(error(("spec", "task_queues", task), f"no model has task_type '{task}'",
                                  f"the models' task types are {', '.join(have) or 'none'}: bind one of them, or "
                                  f"give a model task_type: {task}"))
        if int(rule["workers"]) > 1 and task not in GANG_TASK_TYPES:
            problems.append(error(("spec", "task_queues", task, "workers"),
                                  f"workers: {rule['workers']} for task type '{task}', which runs one pod",
                                  f"only {' and '.join(GANG_TASK_TYPES)} jobs have several pods; remove workers"))
    return problems
