"""Model-execution layer: the named model version runs on the named dataset version.

The backend runs the entrypoint; this module records the run uniformly (command, exit code,
duration in seconds, peak RSS in MiB, bounded stdout/stderr with sha256 of the full text,
the outputs file as an artifact), the run-time usage the engine sampled (``model.usage``: device
memory high-water mark and utilisation, :mod:`pytest_hetero.probes.usage`; "not available" and why
when the engine samples nothing), the run's own peak memory and CPU-seconds as the gate measured them
(``model.run_time``, each with its source; judged by ``run_time`` acceptance rules) and decides the verdict.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from pytest_hetero.backends.protocol import UsageFacts
from pytest_hetero.backends.spread import wanted as spread_wanted
from pytest_hetero.declared import resolve
from pytest_hetero.errors import HeteroError
from pytest_hetero.evidence.inputs import code_digest
from pytest_hetero.evidence.model import bounded, sha256_text
from pytest_hetero.evidence.records import (
    IDENTITY,
    INPUT_USED,
    NOT_PROVEN,
    OUTPUTS_UNUSABLE,
    REPEAT,
    IdentityData,
    NotProvenData,
    OutputsUnusableData,
    RepeatData,
    UsedData,
)
from pytest_hetero.evidence.untested import CONTENTION_PART, ISOLATION_PART, MODELS_ISOLATION_PART
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerFailed, keep_outputs
from pytest_hetero.layers.startup import verify_inputs
from pytest_hetero.layers.usage import keep_run_time
from pytest_hetero.layers.usage import record as record_usage
from pytest_hetero.matrix.references import file_sha256
from pytest_hetero.probes.device_values import device_run_time
from pytest_hetero.probes.usage import UsageRecord, unavailable
from pytest_hetero.signals import interruptions_noticed
from pytest_hetero.truth.view import RECORD as VIEW_RECORD
from pytest_hetero.truth.view import ViewError
from pytest_hetero.truth.view import view as dataset_view
from pytest_hetero.truth.withhold import RECORD as WITHHELD_RECORD

if TYPE_CHECKING:
    from pytest_hetero.matrix.expand import PlannedItem
    from pytest_hetero.matrix.model import Matrix


def check(ctx: LayerContext) -> None:
    """Verify this combination's model and dataset files, then run the model; LayerFailed on a file
    that is not the declared version, timeout, non-zero exit, or missing/invalid outputs.

    A served model (``serving``) is not run but loaded with the dataset's inputs through its
    service instead: :func:`pytest_hetero.layers.serving.execute` writes the same outputs file.
    """
    verify_inputs(ctx)  # this combination's own files: a wrong one fails here, not the image's startup
    if ctx.state["upcoming"]:  # per-run: only runs whose own inputs verify may be launched ahead of their item
        # asked by the engine when it launches the group (its first model item), not by every item: each call reads
        # the whole group (N items: N² reads over the group)
        ctx.state["launchable"] = functools.partial(launchable, ctx.matrix, ctx.planned, ctx.state["upcoming"])
    if ctx.model.code is not None:  # digested as used: the bundle's copy, taken at the finish, is checked against it
        try:
            ctx.write(INPUT_USED, UsedData(input="code", path=str(ctx.model.code), sha256=code_digest(ctx.model.code)))
        except OSError as exc:
            ctx.write(INPUT_USED, UsedData(input="code", path=str(ctx.model.code), sha256=None, error=exc.strerror))
    model = ctx.model
    if model.serving is not None:
        from pytest_hetero.layers.serving import execute

        execute(ctx)
        return
    repeat = repeats(ctx)
    for run in range(1, repeat + 1):
        if repeat > 1:
            ctx.write(REPEAT, RepeatData(run=run, of=repeat))
        _run_once(ctx, run if repeat > 1 else 0)


def launchable(matrix: Matrix, own: PlannedItem, upcoming: list[PlannedItem]) -> list[PlannedItem]:
    """The model items of ``upcoming`` (``state["upcoming"]``: ``own``'s group in run order) whose runs an engine
    may launch ahead of their items (``model_runs: per-run``): ``own`` (its item's inputs were verified), and each
    later one whose model and dataset files have their declared sha256 and whose dataset view (the file without its
    inline truth) can be made now. Asked through ``state["launchable"]`` when the engine launches the group
    (:func:`pytest_hetero.backends.spread.ahead`), once per group. A run launched ahead starts before its own item's
    checks; without this, a model file that fails its digest ran anyway and its item then said ``digest_mismatch``
    with no run recorded. An item left out runs its own checks when its turn comes (and fails them, or runs then).
    The same list object is returned when every item qualifies. Reads each distinct file once (a file shared by
    several items is hashed once here)."""
    digests: dict[Path, str | None] = {}

    def matches(path: Path, expected: str) -> bool:
        if path not in digests:
            try:
                digests[path] = file_sha256(path) if path.is_file() else None
            except OSError:
                digests[path] = None
        return digests[path] == expected

    kept: list[PlannedItem] = []
    for planned in upcoming:
        if planned.parts == own.parts:  # this item's own inputs were verified just before
            kept.append(planned)
            continue
        try:
            model, dataset = matrix.model(planned.keys["model"]), matrix.dataset(planned.keys["dataset"])
        except (KeyError, HeteroError):
            continue
        if (model.sha256 and not matches(model.path, model.sha256)) or not matches(dataset.path, dataset.sha256):
            continue
        try:
            dataset_view(dataset)
        except ViewError:
            continue
        kept.append(planned)
    return upcoming if len(kept) == len(upcoming) else kept


class _IsolationFacts(msgspec.Struct, frozen=True, kw_only=True):
    """The keys of an engine's ``details["isolation"]`` the model layer reads, as the engine writes them (each may be
    absent; null ``confined`` reads as not confined, as it always has)."""

    confined: bool | None = True
    reason: str | None = None
    contention: str | None = None
    shared_between_runs: bool | None = None


@dataclass(frozen=True)
class Isolation:
    """An engine's ``details["isolation"]`` as the model layer judges it (:meth:`of`): whether the run was
    ``confined`` (a sandbox or a container of its own; True when the engine does not say), why not or why its
    workload is shared (``reason``; None: not said), what it shared with runs at once (``contention``; None:
    nothing) and whether its workload is ``shared_between_runs``. Each engine writes its own keys beside these
    (``mechanism``, ``reset_before``…), which this layer does not read."""

    confined: bool
    reason: str | None
    contention: str | None
    shared_between_runs: bool

    @classmethod
    def of(cls, facts: dict[str, object]) -> Isolation:
        """The facts an engine wrote (any of these keys may be absent; an empty text is None), converted once.
        Facts not of their declared JSON type prove nothing: the run is taken as unconfined, the reason naming
        the field (``... - at `$.confined```)."""
        try:
            found = msgspec.convert(facts, _IsolationFacts)
        except msgspec.ValidationError as error:
            return cls(confined=False, reason=f"the engine's isolation facts are not of their shape: {error}",
                       contention=None, shared_between_runs=False)
        return cls(confined=bool(found.confined), reason=found.reason or None, contention=found.contention or None,
                   shared_between_runs=bool(found.shared_between_runs))


def _not_proven_isolation(ctx: LayerContext, isolation: Isolation) -> None:
    """The ``scope.not_proven`` records an engine's ``isolation`` facts call for: the run unconfined, its workload
    shared with other runs, or resources it shared with runs at once (``contention``)."""
    if not isolation.confined:
        ctx.write(NOT_PROVEN, NotProvenData(
            layer="model", part=ISOLATION_PART,
            reason=f"the code under test ran unconfined ({isolation.reason or 'no sandbox'}): it could have read "
                   "the signing key and altered this run's evidence"))
    if isolation.contention:
        ctx.write(NOT_PROVEN, NotProvenData(layer="model", part=CONTENTION_PART, reason=isolation.contention))
    if isolation.shared_between_runs:
        # per-run model runs go at once: the run that could reach this one may be running beside it
        who = "another run (earlier or at the same time)" if spread_wanted(ctx) else "an earlier run"
        ctx.write(NOT_PROVEN, NotProvenData(
            layer="model", part=MODELS_ISOLATION_PART,
            reason=f"{isolation.reason or 'the workload is shared between model runs'}: {who} could have "
                   "changed this run's result"))


def run_once(ctx: LayerContext) -> None:
    """One run of ``ctx``'s model × dataset, recorded and judged as a model item's run is (no repeats, no
    served model, the files' digests left to the model item): node coverage's smoke run on each node
    (:mod:`pytest_hetero.layers.nodes`). Raises what a model item's run raises."""
    _run_once(ctx, 0)


def repeats(ctx: LayerContext) -> int:
    """How many times the profile that runs asks for each model run and business sample (``repeat``)."""
    if not ctx.settings.profile:
        return 1
    from pytest_hetero.matrix.selection import resolve_profile

    try:
        return max(1, resolve_profile(ctx.matrix, ctx.settings.profile).repeat)
    except HeteroError:
        return 1


def _run_once(ctx: LayerContext, run: int) -> None:
    """One entrypoint run; ``run`` ≥ 1 numbers a repeated sample (its outputs kept as outputs-rN.json)."""
    model, dataset = ctx.model, ctx.dataset
    sensitive = dataset.sensitive
    ctx.write(IDENTITY, IdentityData(model=model.name, version=model.version, sha256=model.sha256,
                                     dataset=dataset.name, dataset_version=dataset.version,
                                     dataset_sha256=dataset.sha256))
    try:  # the file the model reads: the dataset without its inline truth column (made by the gate, here)
        made = dataset_view(dataset)
    except ViewError as exc:
        raise LayerBroken(f"{exc.message}; the model was not run on a file holding its answers", exc.category) \
            from None
    if made is not None:
        ctx.record(VIEW_RECORD, **made.record())
    with interruptions_noticed("the model run"):  # a Ctrl-C meanwhile is the run's interruption, never the model's
        result = ctx.backend.execute(ctx)
    workload: UsageFacts | None = result.details.pop("workload", None)
    started: UsageFacts | None = result.details.pop("workload_started", None)
    record_usage(ctx, started)  # started here: no startup item did
    ran_well = result.exit_code == 0 and not result.timed_out and result.failure is None
    record_usage(ctx, workload if isinstance(workload, dict) else None, None if ran_well else "failed", run=True)
    usage: UsageRecord | None = result.details.pop("usage", None)
    ctx.record("model.usage", **(usage if isinstance(usage, dict) else unavailable(
        f"the {ctx.backend.name} engine does not sample device memory or utilisation during a run")))
    keep_run_time(ctx, result.details.pop("run_time", None), ctx.backend.name, run,  # + the devices' values
                  device_run_time(usage if isinstance(usage, dict) else None, ctx.resource.type, ctx.backend.name))
    withheld = result.details.pop("truth_withheld", None)
    if isinstance(withheld, dict):  # the truth files (and their copies) the run could not read, and how
        ctx.record(WITHHELD_RECORD, **withheld)
    started_here = result.details.pop("image", None)
    if started_here is not None:  # the engine had to start the image itself: its digest is this item's to check
        from pytest_hetero.backends.protocol import ImageIdentity
        from pytest_hetero.layers.startup import judge_digest

        judge_digest(ctx, ImageIdentity(digest=started_here["digest"], known=tuple(started_here["known"]),
                                        what=started_here["what"]))
    isolation = result.details.get("isolation")
    if isinstance(isolation, dict):
        _not_proven_isolation(ctx, Isolation.of(isolation))
    # secrets out before any cut: a token cut at a head/tail boundary would keep its prefix
    result.stdout, result.stderr = ctx.redactor.text(result.stdout), ctx.redactor.text(result.stderr)
    if sensitive:  # logs may echo samples: keep sizes and digests only
        streams = {name: {"text": "[withheld: sensitive dataset]", "truncated": True,
                          "bytes": len(text.encode("utf-8", "replace")), "sha256": sha256_text(text)}
                   for name, text in (("stdout", result.stdout), ("stderr", result.stderr))}
        arts: dict[str, str | None] = {"stdout_artifact": None, "stderr_artifact": None}
    else:
        streams = {"stdout": bounded(result.stdout, ctx.output_limit),
                   "stderr": bounded(result.stderr, ctx.output_limit)}
        suffix = f"-r{run}" if run else ""
        arts = {"stdout_artifact": ctx.artifact(f"stdout{suffix}.txt", result.stdout).path,
                "stderr_artifact": ctx.artifact(f"stderr{suffix}.txt", result.stderr).path}
    ctx.record("model.run", argv=result.argv, exit_code=result.exit_code,
               duration_s=round(result.duration_s, 4), timed_out=result.timed_out,
               timeout_s=ctx.timeout_s, peak_rss_mib=result.peak_rss_mib, **streams, **arts, **result.details)
    if result.timed_out:
        raise LayerFailed(f"model run exceeded the {ctx.timeout_s:g} s timeout", "timeout")
    if result.failure:
        outcome = LayerBroken if result.failure.get("status") == "error" else LayerFailed
        raise outcome(result.failure["message"], result.failure["category"])
    if result.exit_code != 0:
        last = "(stderr withheld: sensitive dataset)" if sensitive else \
            (result.stderr.strip().splitlines() or ["(no stderr)"])[-1][:300]
        raise LayerFailed(f"entrypoint exited with {result.exit_code}: {last}", "nonzero_exit")
    if result.outputs is None:
        raise LayerFailed("entrypoint wrote no outputs file", "no_outputs")
    judge_outputs(ctx, result.outputs, run, wall_s=result.duration_s)


def judge_outputs(ctx: LayerContext, raw: bytes, run: int, wall_s: float | None = None) -> None:
    """Keep the outputs of run ``run`` when they are a JSON object :func:`parse_outputs` reads; else keep
    them as unusable and raise LayerFailed ``bad_outputs`` (algorithm: the model wrote them). ``wall_s``: the run's
    wall time as the gate measured it (seconds), kept beside the outputs for the business layer's measured values."""
    try:
        parsed = parse_outputs(raw)
    except DuplicateKey as exc:
        where = keep_bad_outputs(ctx, raw, run)
        raise LayerFailed(f"outputs file repeats key {exc.key!r} in one object: which value counts would be a "
                          f"guess{where}", "bad_outputs") from None
    except OutputsUnusable as exc:
        where = keep_bad_outputs(ctx, raw, run)
        raise LayerFailed(f"outputs file {exc}{where}", "bad_outputs") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = keep_bad_outputs(ctx, raw, run)
        raise LayerFailed(f"outputs file is not JSON: {exc}{where}", "bad_outputs") from None
    if not isinstance(parsed, dict):
        where = keep_bad_outputs(ctx, raw, run)
        raise LayerFailed(f"outputs file is a JSON {type(parsed).__name__}, not an object{where}", "bad_outputs")
    keep_outputs(ctx, raw, run, wall_s=wall_s)


MAX_OUTPUTS_DEPTH = 64
"""Deepest nesting of arrays and objects an outputs file may have (metrics and per-sample lists need 3)."""

MAX_NUMBER_CHARS = 64
"""Longest number literal of an outputs file (an integer beyond 10**63 is no metric; Python would refuse one
of 4,300 digits with a ValueError and turn one of 400 into an OverflowError at the first comparison)."""


class OutputsUnusable(ValueError):
    """The outputs file is JSON the gate will not judge: nested deeper than :data:`MAX_OUTPUTS_DEPTH`, or a
    number longer than :data:`MAX_NUMBER_CHARS`. The message completes "outputs file …"."""


def _number(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        if len(text) > MAX_NUMBER_CHARS:
            raise OutputsUnusable(f"holds a {len(text)}-character number ({text[:20]}…); numbers of more than "
                                  f"{MAX_NUMBER_CHARS} characters are not read: write metrics as ordinary numbers")
        return kind(text)
    return parse


def parse_outputs(raw: bytes | str) -> Any:
    """The JSON value of an outputs file (RFC 8259; UTF-8, UTF-16 or UTF-32 bytes as ``json.loads``
    detects them), read within bounds: every object's keys unique, numbers of at most
    :data:`MAX_NUMBER_CHARS` characters, nesting at most :data:`MAX_OUTPUTS_DEPTH` deep (checked without
    recursion; a nesting deep enough to exhaust the parser's recursion is refused the same way).

    Raises DuplicateKey, OutputsUnusable (both ValueError), json.JSONDecodeError or UnicodeDecodeError;
    never RecursionError. The model and business layers read outputs only through it."""
    try:
        parsed = json.loads(raw, object_pairs_hook=_unique_keys, parse_int=_number(int), parse_float=_number(float))
    except RecursionError:
        raise OutputsUnusable(f"is nested deeper than the parser's limit (the most read is {MAX_OUTPUTS_DEPTH} "
                              "levels of arrays and objects)") from None
    stack: list[tuple[Any, int]] = [(parsed, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        if depth > MAX_OUTPUTS_DEPTH:
            raise OutputsUnusable(f"is nested {depth}+ levels deep; the most read is {MAX_OUTPUTS_DEPTH} levels "
                                  "of arrays and objects")
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return parsed


class DuplicateKey(ValueError):
    """An outputs JSON object names ``key`` twice (RFC 8259 §4: names SHOULD be unique; parsers disagree
    on which value wins, Python's keeps the last)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads`` object hook: the object as a dict. Raises :class:`DuplicateKey` on a repeated name."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


BAD_OUTPUTS_LIMIT = 1024 * 1024
"""Bytes of an unusable outputs file kept as an artifact (the rest is cut; size and sha256 are of the whole)."""


def keep_bad_outputs(ctx: LayerContext, raw: bytes, run: int) -> str:
    """Keep outputs that cannot be judged (not JSON, not an object) so their owner can see them: the
    first BAD_OUTPUTS_LIMIT bytes as artifact ``outputs-unusable[-rN].txt`` and a ``model.outputs_unusable``
    record (whole size and sha256); a sensitive dataset's are recorded by size and sha256 only. Returns
    `` (kept as <path>)`` for the failure message, or an empty string."""
    digest = sha256_text(raw)
    if ctx.dataset.sensitive:
        ctx.write(OUTPUTS_UNUSABLE, OutputsUnusableData(
            artifact=None, bytes=len(raw), sha256=digest,
            withheld="sensitive dataset: outputs content kept out of the evidence"))
        return ""
    kept = ctx.redactor.bytes(raw)[:BAD_OUTPUTS_LIMIT]  # secrets out before the cut (a cut token keeps its prefix)
    art = ctx.artifact(f"outputs-unusable{f'-r{run}' if run else ''}.txt", kept)
    ctx.write(OUTPUTS_UNUSABLE, OutputsUnusableData(artifact=art.path, bytes=len(raw), sha256=digest,
                                                    kept_bytes=len(kept), truncated=len(raw) > len(kept)))
    return f" (kept as {art.path})"


resolve(__name__)
