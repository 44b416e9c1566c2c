"""Programs the gate runs inside a job's workloads (the training checks): the all-reduce benchmark of the
communication check (:mod:`.allreduce`) and the step loop of the checkpoint check (:mod:`.checkpoint`).

They are the gate's own code, not the code under test: the gate places their text in the workloads and runs
it with the image's Python and framework; what they print is raw measurements (times, values read, digests),
and the gate computes and judges the numbers (:mod:`pytest_hetero.layers.training`). Each is self-contained
(standard library and the framework the image ships), so it runs in any image with a Python 3.8+.
"""

from __future__ import annotations

from importlib.resources import files

ALLREDUCE = "allreduce.py"
"""File name of the all-reduce benchmark."""
CHECKPOINT = "checkpoint.py"
"""File name of the checkpoint step loop."""


def text(name: str) -> bytes:
    """The bytes of the job program ``name`` (:data:`ALLREDUCE` or :data:`CHECKPOINT`)."""
    return files(__package__).joinpath(name).read_bytes()
