"""What a backend must answer. One instance per (backend name, target) per pytest process.

Built-in backends are the last-resort implementations of the ``pytest_hetero_make_backend``
hook, so a third-party plugin adds or replaces one the same way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pytest_hetero.layers.base import LayerContext, NotApplicable
from pytest_hetero.settings import Settings

EXECUTION_PROVIDERS: dict[str, str] = {
    "cpu": "CPUExecutionProvider",
    "gpu": "CUDAExecutionProvider",
    "npu": "CANNExecutionProvider",
}
"""ONNX Runtime execution provider a resource type must run with (substituted for ``{provider}``)."""


@dataclass
class ExecResult:
    """One model-entrypoint run: ``argv`` as run, ``exit_code`` (None when killed on timeout),
    wall ``duration_s``, full ``stdout``/``stderr`` text, ``outputs`` (the bytes of the outputs
    file the entrypoint wrote, or None), ``peak_rss_mib`` where measurable, and backend ``details``.
    ``failure`` (``{"category", "owner", "message"}``) is the backend's classification of a run that
    failed for a reason the exit code alone does not tell (OOM kill, container killed); the
    model layer records the run first, then fails with it (status ``error`` instead of ``failed``
    when ``failure["status"] == "error"``: the infrastructure broke, e.g. the node turned NotReady)."""

    argv: list[str]
    exit_code: int | None
    duration_s: float
    stdout: str
    stderr: str
    outputs: bytes | None
    timed_out: bool = False
    peak_rss_mib: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    failure: dict[str, str] | None = None


def render_entrypoint(entrypoint: tuple[str, ...], values: dict[str, str]) -> list[str]:
    """Substitute ``{python}``, ``{code}``, ``{model}``, ``{dataset}``, ``{outputs}``, ``{provider}``.

    Raises KeyError naming an unknown placeholder.
    """
    return [part.format_map(values) for part in entrypoint]


class Backend(ABC):
    """Interface of a backend. Methods record evidence on ``ctx`` and raise LayerFailed /
    LayerBroken / NotApplicable (see :mod:`pytest_hetero.layers.base`)."""

    name: ClassVar[str] = ""
    scheduling_per_image: ClassVar[bool] = False
    """True when placement depends on the image (scheduling items keyed resource × image)."""

    def __init__(self, target: dict[str, Any], settings: Settings) -> None:
        self.target = target
        self.settings = settings

    @abstractmethod
    def fingerprint(self) -> dict[str, Any]:
        """Identity of what is validated: ``{"backend", "identity", "nodes", "versions", "images"}``."""

    @abstractmethod
    def discover(self, ctx: LayerContext) -> None:
        """Discovery: the resource's nodes/devices are visible, healthy and advertised as expected."""

    def schedule(self, ctx: LayerContext) -> None:
        """Scheduling: a workload with the resource's requests is placed in the right pool."""
        raise NotApplicable(f"the {self.name} backend cannot prove scheduling")

    @abstractmethod
    def start(self, ctx: LayerContext) -> None:
        """Startup: the image starts with runtime, driver and device initialised inside it."""

    @abstractmethod
    def execute(self, ctx: LayerContext) -> ExecResult:
        """Model execution: run the model entrypoint on the dataset; return the run's result."""

    def close(self) -> None:
        """Release everything this backend created (unless settings.keep). Must not raise."""
