"""What a task type brings: the checks each ``spec.models[].task_type`` adds to the model layer, and the
training settings of a model (``spec.models[].training``) those checks run with.

``training`` and ``fine-tune`` bring the **communication** check (an all-reduce across the job's ranks:
world size, bus bandwidth and latency per message size) and the **checkpoint** check (the job writes its state
to the matrix's volume, is killed, restarts and resumes from it). The other task types bring none: their
proof is the model run and the business rules. Each check is a model-layer item of its own, keyed
resource × image × model@dataset × check, id ``<resource>::<image>::<model>@<dataset>::<check>::model``, so
``-k communication`` or ``-k checkpoint`` selects it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_hetero.durations import parse_duration
from pytest_hetero.matrix.document import TaskType, TrainingDoc

TASK_CHECKS: dict[TaskType, tuple[str, ...]] = {
    "training": ("communication", "checkpoint"),
    "fine-tune": ("communication", "checkpoint"),
    "batch-inference": (),
    "online-inference": (),
    "evaluation": (),
    "data-processing": (),
}
"""Task type → the checks it brings (model-layer items beside the model run)."""

CHECK_PROOFS: dict[str, str] = {
    "communication": "an all-reduce across the job's ranks completes with the right sum; world size, bus "
                     "bandwidth and latency per message size measured by the gate; minimum bus bandwidth met",
    "checkpoint": "the job writes its state to the matrix's volume, is killed, restarts and resumes from the "
                  "step it wrote, with the digest it wrote; write and read times measured",
}
"""What a pass of each check proves (``hetero plan``, README)."""

DEFAULT_SIZES: tuple[int, ...] = (4096, 65536, 1048576, 8388608)
"""Message sizes of the all-reduce in bytes when ``training.communication.sizes`` is absent."""


@dataclass(frozen=True)
class Training:
    """``spec.models[].training`` (every field has a default, so a training model without it still brings its
    checks). Units: bytes, seconds, GB/s (10⁹ bytes per second, as nccl-tests)."""

    world_size: int = 2
    sizes: tuple[int, ...] = DEFAULT_SIZES
    iterations: int = 5
    warmup: int = 1
    min_busbw_gbps: float | None = None
    """The acceptance rule of the communication check: the bus bandwidth at :attr:`judged_at` must reach it."""
    at_bytes: int | None = None
    """Message size the minimum is judged at (None: the largest of :attr:`sizes`)."""
    port: int = 29500
    rendezvous_timeout_s: float = 60.0
    framework: str = "auto"
    backend: str = ""
    volume: str | None = None
    """The checkpoint volume (a host path on Docker, absolute or relative to the matrix; a PVC name on
    Kubernetes); None: a scratch folder the gate makes and removes."""
    steps: int = 6
    kill_after: int = 2
    checkpoint_bytes: int = 1 << 20
    step_pause_s: float = 0.5

    @property
    def judged_at(self) -> int:
        """The message size (bytes) the minimum bus bandwidth is judged at."""
        return self.at_bytes if self.at_bytes is not None else max(self.sizes)


def checks_of(task_type: TaskType) -> tuple[str, ...]:
    """The checks ``task_type`` brings (:data:`TASK_CHECKS` has a row for every task type)."""
    return TASK_CHECKS[task_type]


def parse_training(raw: TrainingDoc | None, base: Path) -> Training:
    """:class:`Training` from the schema-valid ``spec.models[].training`` mapping (None: the defaults).
    Sizes and checkpoint bytes may be quantities (``1Mi``); a ``checkpoint.volume`` holding a ``/`` is a path,
    resolved against ``base`` (the matrix's folder), else a name (a PersistentVolumeClaim)."""
    from pytest_hetero.matrix.quantity import quantity

    if not raw:
        return Training()
    from pytest_hetero.matrix.defaults import training_spec  # defaults imports the model, which imports this module

    spec = training_spec(raw)
    comm, ckpt = spec["communication"], spec["checkpoint"]

    def size(value: Any) -> int:
        return int(quantity(value))

    return Training(
        world_size=int(spec["world_size"]),
        sizes=tuple(size(s) for s in comm["sizes"]),
        iterations=int(comm["iterations"]), warmup=int(comm["warmup"]),
        min_busbw_gbps=float(comm["min_busbw_gbps"]) if comm["min_busbw_gbps"] is not None else None,
        at_bytes=size(comm["at"]) if comm["at"] is not None else None,
        port=int(comm["port"]),
        rendezvous_timeout_s=parse_duration(comm["rendezvous_timeout"]),
        framework=str(comm["framework"]), backend=str(comm["backend"]),
        volume=_volume(ckpt["volume"], base), steps=int(ckpt["steps"]),
        kill_after=int(ckpt["kill_after"]),
        checkpoint_bytes=size(ckpt["size"]),
        step_pause_s=parse_duration(ckpt["step_pause"]))


def _volume(value: str | None, base: Path) -> str | None:
    if not value:
        return None
    return str((base / value).resolve()) if "/" in value else value
