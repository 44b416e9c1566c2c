"""A layer item: one claim (e.g. "cpu-host::py311::startup") proven with evidence, gated by its dependency.

Gating follows the dependency graph: in setup, an item whose dependency failed, errored or
was blocked is skipped as ``blocked by <root nodeid>: <short failure>`` and its evidence
says ``blocked`` with ``blocked_by`` -- the judge (:func:`pytest_hetero.judge.verdict.gating`) decides
and words it; this glue only asks and writes it down. State lives on the items' stash, not in globals.
"""

from __future__ import annotations

import errno
import json
import time
import traceback
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from pytest_hetero.backends.protocol import Backend
from pytest_hetero.errors import HeteroError
from pytest_hetero.evidence.document import DocumentError, check_item
from pytest_hetero.evidence.model import Failure, ItemEvidence, utc_now
from pytest_hetero.judge.failures import FailureStatus
from pytest_hetero.judge.verdict import Gate, gating, item_failure, not_applicable
from pytest_hetero.layers import CHECKS
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerOutcome, NotApplicable
from pytest_hetero.matrix.expand import PlannedItem
from pytest_hetero.matrix.model import Matrix
from pytest_hetero.pytest_plugin.ordering import number
from pytest_hetero.pytest_plugin.serving import TerminalProgress
from pytest_hetero.pytest_plugin.stash import (
    ATTEMPTS,
    BACKENDS,
    FINAL,
    HANDOFF,
    OUTCOME,
    PLANS,
    RAISED,
    REDACTORS,
    SETTINGS,
)
from pytest_hetero.redact import Redactor

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import AttemptDict, ItemDict, SlimEvidence

STORAGE_ERRORS = {errno.ENOSPC: "disk_full", errno.EDQUOT: "disk_full", errno.EROFS: "read_only_filesystem"}
"""errno of an OSError raised inside a layer → category (owner infrastructure): a disk the run writes to."""


def release_frames(raised: BaseException) -> None:
    """Clear the local variables of every finished frame ``raised`` and the exceptions it was raised from
    (``__context__``, ``__cause__``) passed through (:func:`traceback.clear_frames`; a frame still running is left
    as it is). A plugin may keep a failed call's exception until the session ends (pytest-rerunfailures 16 keeps
    every one: ``item._rerun_condition_excinfos``); its frames held the layer's whole context (the evidence and
    its records, the outputs, the engine's answers): kilobytes per failed item, for the rest of the run. Call
    once nothing reads those frames any more: the item's protocol is over (its reports logged, a debugger
    session ended)."""
    seen: set[int] = set()
    exc: BaseException | None = raised
    pending: list[BaseException] = []
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        pending += [e for e in (exc.__context__, exc.__cause__) if e is not None]
        exc = pending.pop() if pending else None


class LayerFailure(Exception):
    """Raised from runtest so pytest marks the item failed; carries the evidence failure."""

    def __init__(self, failure: Failure, status: str) -> None:
        self.failure = failure
        self.status = status
        super().__init__(failure.message)


_MARKERS: dict[str, pytest.MarkDecorator] = {}


def _marker(name: str) -> pytest.MarkDecorator:
    """One shared (immutable) MarkDecorator per name: building one per item cost ~40 % of the
    collection time of a 160,000-item matrix."""
    if name not in _MARKERS:
        _MARKERS[name] = getattr(pytest.mark, name)
    return _MARKERS[name]


def _group(name: str) -> pytest.MarkDecorator:
    """``xdist_group`` per resource, so ``--dist loadgroup`` keeps a resource's subtree on one worker."""
    key = "xdist_group:" + name
    if key not in _MARKERS:
        _MARKERS[key] = pytest.mark.xdist_group(name=name)
    return _MARKERS[key]


def keep_attempt(bundle_dir: Path, evidence: ItemDict | SlimEvidence, number: int) -> AttemptDict:
    """``evidence`` of attempt ``number`` with its artifact files moved from ``<folder>/<name>`` to
    ``<folder>/attempt-<number>/<name>`` under ``bundle_dir`` and every mention of their paths
    (artifacts, records) rewritten; a file already gone keeps its recorded path."""
    moved: dict[str, str] = {}
    artifacts = evidence["artifacts"] if "artifacts" in evidence else []  # SlimEvidence (journaled) has none
    for art in artifacts:
        old = PurePosixPath(art["path"])
        new = old.parent / f"attempt-{number}" / old.name
        source = bundle_dir / old
        if source.is_file():
            (bundle_dir / new).parent.mkdir(parents=True, exist_ok=True)
            source.replace(bundle_dir / new)
            moved[str(old)] = str(new)
    kept: AttemptDict = _renamed(evidence, moved)  # the same JSON, paths renamed
    kept["attempt"] = number
    return kept


def _renamed(value: Any, moved: dict[str, str]) -> Any:
    """``value`` (JSON data) with every string equal to a key of ``moved`` replaced by its value."""
    if isinstance(value, str):
        return moved.get(value, value)
    if isinstance(value, dict):
        return {k: _renamed(v, moved) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, moved) for v in value]
    return value


class LayerItem(pytest.Item):
    """One layer of one combination. ``planned`` gives layer, keys and dependency."""

    def __init__(self, *, planned: PlannedItem, matrix: Matrix, backend: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.planned = planned
        self.matrix = matrix
        self.backend_name = backend
        self.dependency: LayerItem | None = None
        node = self.parent
        while node is not None and not isinstance(node, pytest.File):
            node = node.parent
        prefix = getattr(node, "claim_prefix", None) or self.nodeid.split("::", 1)[0]
        self.claim_id = f"{prefix}::{planned.id}"
        """Canonical node id fixed at collection (a plugin may later decorate ``nodeid``, as
        pytest-xdist's loadgroup does); it is the key of the evidence and of baselines."""
        resource = matrix.resource(planned.keys["resource"])
        for mark in ("hetero", planned.layer, resource.type):
            self.add_marker(_marker(mark))
        if self.config.pluginmanager.hasplugin("xdist"):  # the marker is xdist's; unknown without it
            self.add_marker(_group(f"{matrix.name}::{resource.name}"))
        number(self)

    @property
    def owner(self) -> str:
        """The matrix's owner team of this item's layer."""
        return self.matrix.owners[self.planned.layer]

    def new_evidence(self) -> ItemEvidence:
        """Empty evidence for this item (status passed until something says otherwise)."""
        prefix = self.claim_id.split("::", 1)[0]
        return ItemEvidence(nodeid=self.claim_id, matrix=prefix, layer=self.planned.layer,
                            keys=dict(self.planned.keys), owner=self.owner)

    def redactor(self) -> Redactor:
        """The Redactor of this item's matrix (built once per matrix per process)."""
        cache = self.config.stash.setdefault(REDACTORS, {})
        if self.matrix.sha256 not in cache:
            cache[self.matrix.sha256] = Redactor(extra=self.matrix.redact)
        return cache[self.matrix.sha256]

    def finish(self, evidence: ItemEvidence, started: float, ctx: LayerContext | None = None) -> None:
        """Stamp times, let ``pytest_hetero_evidence`` add to the evidence, and store it, secrets
        redacted, on the item's stash for dependents and the report. ``ctx`` is the item's
        LayerContext, None when the item never reached its check."""
        evidence.finished_at = utc_now()
        evidence.duration_s = round(time.perf_counter() - started, 4)
        data = evidence.to_dict()
        earlier = self.stash.get(ATTEMPTS, None)
        if earlier:
            data["attempt"] = len(earlier) + 1
            data["attempts"] = list(earlier)
        self.config.hook.pytest_hetero_evidence(ctx=ctx, evidence=data)
        try:  # what a hook added is journaled, signed and rendered: it must be of the document's shape
            check_item(data, "evidence")
        except DocumentError as exc:
            raise HeteroError(f"a pytest_hetero_evidence hook left this item's evidence not of its shape: {exc}",
                              hint='a record is {"kind": str, "at": ISO 8601 time, "data": {...}} '
                                   "(ItemEvidence.record); see pytest_hetero/evidence/document.py") from None
        self.stash[OUTCOME] = self.redactor().data(data)

    def setup(self) -> None:
        """Ask the judge whether this item runs (:func:`pytest_hetero.judge.verdict.gating`: blocked by a
        dependency that failed, errored or was blocked in this session; a business item without its model
        run); when not, write its evidence with the judge's status and skip."""
        self._next_attempt()
        dep = self.dependency
        # FINAL: what pytest's report made of a dependency whose check never finished (a timeout plugin
        # killed it: an error, which blocks this item like any other)
        outcome = (dep.stash.get(OUTCOME, None) or dep.stash.get(FINAL, None)) if dep is not None else None
        dependency = dep.claim_id if dep is not None else "::".join(self.planned.depends_on or ())
        gate = gating(self.planned.layer, dependency, outcome)
        if gate is not None:
            self._gated(gate, time.perf_counter())

    def _gated(self, gate: Gate, started: float) -> NoReturn:
        """Write the judge's gating (status, reason, root failure) into fresh evidence and skip."""
        evidence = self.new_evidence()
        evidence.status, evidence.reason, evidence.blocked_by = gate.status, gate.reason, gate.blocked_by
        self.finish(evidence, started)
        pytest.skip(gate.reason)

    def _next_attempt(self) -> None:
        """When a rerun plugin (pytest-rerunfailures) runs this item again, keep the finished
        attempt: its artifacts move to ``attempt-N/`` beside the item's (the next attempt writes the
        same names) and its evidence joins :data:`ATTEMPTS`, reported with the final attempt."""
        previous = self.stash.get(OUTCOME, None)
        if previous is None:
            return
        attempts = self.stash.setdefault(ATTEMPTS, [])
        attempts.append(keep_attempt(self.config.stash[SETTINGS].bundle_dir, previous, len(attempts) + 1))
        del self.stash[OUTCOME]
        if FINAL in self.stash:
            del self.stash[FINAL]

    def backend(self) -> Backend:
        """The live backend for this item's (name, target), built on first use."""
        pool = self.config.stash[BACKENDS]
        key = (self.backend_name, json.dumps(self.matrix.target, sort_keys=True))
        if key not in pool:
            cls = self.config.hook.pytest_hetero_backend(name=self.backend_name)
            if cls is None:
                raise LayerBroken(f"no plugin provides backend '{self.backend_name}'", "backend_unknown")
            pool[key] = cls(self.matrix.target, self.config.stash[SETTINGS])
        return pool[key]

    def matrix_ref(self) -> dict[str, Any]:
        """What the controller needs to re-plan this item's matrix: path, nodeid prefix, name, sha256."""
        return {"path": str(self.matrix.path), "prefix": self.claim_id.split("::", 1)[0], "name": self.matrix.name,
                "sha256": self.matrix.sha256,
                "scheduling_per_image": "image" in self.planned.keys if self.planned.layer == "scheduling"
                else self._per_image()}

    def _per_image(self) -> bool:
        cls = self.config.hook.pytest_hetero_backend(name=self.backend_name)
        return bool(getattr(cls, "scheduling_per_image", False))

    def live_backend(self) -> Backend | None:
        """The backend instance if this process built one for this item's target, else None."""
        key = (self.backend_name, json.dumps(self.matrix.target, sort_keys=True))
        return self.config.stash[BACKENDS].get(key)

    def _artifact_scope(self) -> tuple[str, ...]:
        """``(matrix nodeid prefix,)`` when this session collected several matrices, else ``()``."""
        if len(self.config.stash[PLANS]) < 2:
            return ()
        return (self.claim_id.split("::", 1)[0],)

    def runtest(self) -> None:
        """Run the layer check; translate its outcome into evidence and a pytest outcome."""
        started = time.perf_counter()
        evidence = self.new_evidence()
        settings = self.config.stash[SETTINGS]
        ctx: LayerContext | None = None
        if self.dependency is not None and OUTCOME not in self.dependency.stash:
            evidence.record("gating.note", message=f"dependency {self.dependency.claim_id} did not run in "
                            "this session; this item runs without it")
        try:
            ctx = LayerContext(
                matrix=self.matrix, planned=self.planned, backend=self.backend(), settings=settings,
                evidence=evidence, output_limit=self.matrix.output_limit, redactor=self.redactor(),
                handoff=self.config.stash.setdefault(HANDOFF, {}), scope=self._artifact_scope(),
                timeout_s=self.matrix.timeouts_s[self.planned.layer] * settings.timeout_scale,
                hook=self.config.hook, progress=TerminalProgress(self.config))
            if self.planned.layer == "model":  # the items an engine may start ahead (per-run model runs)
                from pytest_hetero.pytest_plugin.spread import handoff_read, upcoming

                ctx.state["upcoming"] = upcoming(self)
                ctx.state["read"] = handoff_read(self)
            CHECKS[self.planned.layer](ctx)
            self.config.hook.pytest_hetero_layer_check(ctx=ctx)
        except NotApplicable as exc:
            gate = not_applicable(exc.message)
            evidence.status, evidence.reason = gate.status, gate.reason
            self.finish(evidence, started, ctx)
            pytest.skip(gate.reason)
        except LayerOutcome as exc:
            self._fail(evidence, started, ctx, "error" if exc.status == "error" else "failed", exc.category,
                       exc.message, exc.causes, exc.nodes)
        except HeteroError as exc:
            self._fail(evidence, started, ctx, "error", "configuration", exc.render())
        except OSError as exc:
            if exc.errno in STORAGE_ERRORS:  # the host's disk, not our code
                where = f" writing {exc.filename}" if exc.filename else ""
                self._fail(evidence, started, ctx, "error", STORAGE_ERRORS[exc.errno],
                           f"{exc.strerror}{where}; free space or choose another --hetero-report-dir")
            else:
                evidence.record("harness.traceback", text=traceback.format_exc())
                self._fail(evidence, started, ctx, "error", "harness", f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - a harness bug is evidence too, then re-raised
            evidence.record("harness.traceback", text=traceback.format_exc())
            self._fail(evidence, started, ctx, "error", "harness", f"{type(exc).__name__}: {exc}")
        self.finish(evidence, started, ctx)

    def _fail(self, evidence: ItemEvidence, started: float, ctx: LayerContext | None, reported: FailureStatus,
              category: str, message: str, causes: tuple[tuple[str, str], ...] = (),
              nodes: tuple[str, ...] = ()) -> None:
        """Write the judge's status and failure (owner from the failure table) and raise LayerFailure."""
        redact = self.redactor().text
        status, failure = item_failure(self.matrix, self.planned.layer, category, redact(message), reported,
                                       tuple((c, redact(m)) for c, m in causes), nodes)
        team = self.config.hook.pytest_hetero_failure_owner(
            layer=self.planned.layer, category=category, default=failure.owner) or failure.owner
        evidence.status = status
        evidence.failure = replace(failure, owner=team)
        self.finish(evidence, started, ctx)
        raised = LayerFailure(evidence.failure, status)
        self.stash.setdefault(RAISED, []).append(raised)  # its frames are cleared after the protocol
        raise raised

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        """``[failed|error] layer/category (owner): message`` for our failures; default otherwise."""
        if isinstance(excinfo.value, LayerFailure):
            from pytest_hetero.reporting.view import one_line

            f = excinfo.value.failure
            # one line: a message quotes what a model wrote (metric names, stderr), which must not start a
            # line of its own (a fake "verdict: PASS") in pytest's report
            return (f"[{excinfo.value.status}] {f.layer}/{one_line(f.category)} (owner: {one_line(f.owner)}): "
                    f"{one_line(f.message)}")
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Any, int | None, str]:
        """(matrix path, 0-based line of the resource, the claim this item proves)."""
        resource = self.matrix.resource(self.planned.keys["resource"])
        return self.path, max(resource.line - 1, 0), f"{self.planned.layer}: {self.planned.id}"
