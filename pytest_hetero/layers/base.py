"""What every layer check receives and how it reports: the context, and the outcome exceptions.

A layer check is a function ``check(ctx) -> None``. It records evidence through ``ctx`` and
ends in one of three ways besides returning (pass): :class:`LayerFailed` (the claim is
false: status ``failed``), :class:`LayerBroken` (the harness or an infrastructure call
broke: status ``error``), :class:`NotApplicable` (this backend cannot prove the layer).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict, TypeVar

from pytest_hetero.evidence.model import Artifact, ItemEvidence
from pytest_hetero.evidence.records import OUTPUTS as OUTPUTS_RECORD
from pytest_hetero.evidence.records import OutputsData
from pytest_hetero.matrix.expand import PlannedEntries, PlannedItem
from pytest_hetero.matrix.model import Matrix
from pytest_hetero.redact import Redactor
from pytest_hetero.vocab import Status

if TYPE_CHECKING:
    from pluggy import HookRelay

    from pytest_hetero.backends.protocol import Backend
    from pytest_hetero.evidence.records import Kind
    from pytest_hetero.settings import Settings


class LayerOutcome(Exception):
    """Base of the ways a check ends other than passing."""

    status: ClassVar[Status] = "failed"

    def __init__(self, message: str, category: str = "", *, causes: tuple[tuple[str, str], ...] = (),
                 nodes: tuple[str, ...] = ()) -> None:
        self.message = message
        self.category = category or "unspecified"
        self.causes = causes
        """``(category, message)`` of each cause when a finding has several (each keeps its own owner);
        empty for a single cause, which is ``category`` itself."""
        self.nodes = nodes
        """The nodes the failure holds for when it holds for some nodes of the pool only (a node-scoped discovery
        failure); empty: the whole claim."""
        super().__init__(message)


class LayerFailed(LayerOutcome):
    """The layer's claim does not hold (``category`` e.g. ``device_missing``; its owner is the failure table's)."""

    status = "failed"


class LayerBroken(LayerOutcome):
    """The harness or an infrastructure call broke; the claim is neither proven nor refuted."""

    status = "error"


class NotApplicable(LayerOutcome):
    """This backend cannot prove the layer (e.g. scheduling on the local backend); ``message`` says why."""

    status = "not_applicable"


_SAFE = re.compile(r"[^A-Za-z0-9._@-]+")
D = TypeVar("D", bound=Mapping[str, object])


class LayerState(TypedDict):
    """What an item's check hands on within the item (:attr:`LayerContext.state`; every key is always there,
    :func:`new_state` writes the defaults).

    ``upcoming``: the model items of this item's group in run order, which an engine may launch ahead of their
    items (set by the pytest glue for a model item, :func:`pytest_hetero.pytest_plugin.spread.upcoming`; empty:
    none). ``launchable``: the model layer's narrowing of ``upcoming`` to the items whose inputs verify, asked by
    the engine once per group (:func:`pytest_hetero.layers.execution.launchable`; None: not narrowed). ``smoke``:
    the model item a node-coverage startup item repeats on each node (:func:`pytest_hetero.layers.nodes.smoke_combo`;
    None: none). Engines read ``upcoming`` and ``launchable`` (:func:`pytest_hetero.backends.spread.ahead`).
    ``read``: False when no item of this session reads what this model item hands to its business item through
    :attr:`LayerContext.handoff` (its business item was deselected: set by the pytest glue,
    :func:`pytest_hetero.pytest_plugin.spread.handoff_read`); the model item then records the same and hands nothing
    on, which nothing would take back (a long run's memory would grow with its model items)."""

    upcoming: list[PlannedItem]
    launchable: Callable[[], list[PlannedItem]] | None
    smoke: PlannedItem | None
    read: bool


def new_state() -> LayerState:
    """A :class:`LayerState` with nothing handed on yet."""
    return {"upcoming": [], "launchable": None, "smoke": None, "read": True}


@dataclass
class LayerContext(PlannedEntries):
    """Everything a check needs: the item, its matrix entries, the backend, settings, and evidence.

    ``artifact_dir`` is ``<bundle>/artifacts/[<scope>/]<id parts>/``; ``timeout_s`` is the layer
    timeout after ``--hetero-timeout-scale``.
    """

    matrix: Matrix
    planned: PlannedItem
    backend: Backend
    settings: Settings
    evidence: ItemEvidence
    timeout_s: float
    output_limit: int
    redactor: Redactor = field(default_factory=Redactor)
    handoff: dict[str, bytes] = field(default_factory=dict)
    """Outputs passed from a model item to its business item in this process (sensitive datasets
    keep them out of the bundle), keyed by the model item's id."""
    state: LayerState = field(default_factory=new_state)
    scope: tuple[str, ...] = ()
    """Leading artifact folders: the matrix's nodeid prefix when a session runs several matrices,
    whose resource/image/model names may repeat (their artifacts would overwrite each other)."""
    hook: HookRelay | None = None
    """The ``pytest_hetero_*`` hook relay of the run (e.g. ``hook.pytest_hetero_make_protocol``);
    None outside a run, where checks fall back to the built-in implementations."""
    progress: Callable[[str], None] | None = None
    """Where a long check reports progress lines (the terminal, while output capture is
    suspended); None: no progress shown."""
    pinned_node: str | None = None
    """The node whose pinned workload a node-coverage smoke model run uses (see
    :mod:`pytest_hetero.layers.nodes`); None for every ordinary item."""
    _made: set[Path] = field(default_factory=set, repr=False)
    """Artifact folders this context has created (one mkdir per folder, not per artifact)."""

    @property
    def artifact_dir(self) -> Path:
        """Folder for this item's artifacts (created on demand)."""
        return artifact_dir_for(self.settings.bundle_dir, self.scope + self.planned.parts)

    def record(self, kind: str, **data: Any) -> None:
        """Add a timestamped typed record to the item's evidence."""
        self.evidence.record(kind, **data)

    def write(self, kind: Kind[D], data: D) -> None:
        """Add a timestamped record of ``kind`` to the item's evidence, its ``data`` of the kind's shape
        (:mod:`pytest_hetero.evidence.records`: mypy checks the writer); the same record as :meth:`record` with
        ``data``'s keys as keywords, in their order."""
        self.evidence.record(kind.name, **data)

    def artifact(self, name: str, content: str | bytes, media_type: str = "text/plain") -> Artifact:
        """Write ``content`` (secrets redacted) as artifact ``name``; return its Artifact (path relative to
        the bundle)."""
        folder = self.artifact_dir
        if folder not in self._made:
            folder.mkdir(parents=True, exist_ok=True)
            self._made.add(folder)
        data = content.encode("utf-8", "replace") if isinstance(content, str) else content
        data = self.redactor.bytes(data)
        target = folder / _SAFE.sub("_", name)
        target.write_bytes(data)
        art = Artifact(name=name, path=str(target.relative_to(self.settings.bundle_dir)),
                       size=len(data), sha256=hashlib.sha256(data).hexdigest(), media_type=media_type)
        self.evidence.artifacts.append(art)
        return art


OUTPUTS = "outputs.json"
"""Name of the model outputs artifact the business layer evaluates."""


WALL = "#wall_s"
"""Suffix of the handoff key holding a model run's wall time as the gate timed it (seconds, as text)."""


def keep_outputs(ctx: LayerContext, raw: bytes, run: int = 0, wall_s: float | None = None) -> None:
    """Hand a model run's outputs (JSON bytes) to the business item and record them.

    Normal datasets: written as the ``outputs.json`` artifact. Sensitive datasets
    (``datasets[].sensitive``): only sha256 and size are recorded; the content stays in memory
    for the business item of this process and never reaches the bundle. ``run`` ≥ 1 numbers a
    repeated sample (``outputs-rN.json``); the business item judges every sample. ``wall_s``: the run's wall
    time as the gate measured it, handed to the business item of this process (:func:`wall_of`). Nothing is handed
    on when no item of this session reads it (``ctx.state["read"]`` False: :class:`LayerState`).
    """
    key = "::".join(ctx.scope + ctx.planned.parts) + (f"#r{run}" if run else "")
    read = ctx.state["read"]
    if wall_s is not None and read:
        ctx.handoff[key + WALL] = repr(float(wall_s)).encode()
    if ctx.dataset.sensitive:
        if read:
            ctx.handoff[key] = raw
        ctx.write(OUTPUTS_RECORD, OutputsData(artifact=None, sha256=hashlib.sha256(raw).hexdigest(), bytes=len(raw),
                                              withheld="sensitive dataset: outputs content kept out of the evidence"))
        return
    art = ctx.artifact(OUTPUTS.replace(".json", f"-r{run}.json") if run else OUTPUTS, raw, "application/json")
    ctx.write(OUTPUTS_RECORD, OutputsData(artifact=art.path, sha256=art.sha256, bytes=art.size, run=run or None))


def outputs_of(ctx: LayerContext, parts: tuple[str, ...], run: int = 0) -> bytes:
    """The outputs of the model item ``parts`` (handed over in this process, else its artifact);
    ``run`` ≥ 1 picks a repeated sample.

    Raises OSError when neither exists (e.g. a sensitive dataset's model ran in another process).
    """
    handed = ctx.handoff.pop("::".join(ctx.scope + parts) + (f"#r{run}" if run else ""), None)
    if handed is not None:
        return handed
    name = OUTPUTS.replace(".json", f"-r{run}.json") if run else OUTPUTS
    return (artifact_dir_for(ctx.settings.bundle_dir, ctx.scope + parts) / name).read_bytes()


def wall_of(ctx: LayerContext, parts: tuple[str, ...], run: int = 0) -> float | None:
    """The wall time (s) the gate measured for the model run ``parts`` (``run`` ≥ 1: a repeated sample), when
    that run was in this process; None otherwise."""
    raw = ctx.handoff.pop("::".join(ctx.scope + parts) + (f"#r{run}" if run else "") + WALL, None)
    return float(raw.decode()) if raw is not None else None


def artifact_dir_for(bundle_dir: Path, parts: tuple[str, ...]) -> Path:
    """``<bundle>/artifacts/<part>/<part>/…`` with unsafe characters replaced by ``_``."""
    return bundle_dir.joinpath("artifacts", *(_SAFE.sub("_", p) for p in parts))
