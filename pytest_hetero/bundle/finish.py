"""Finishing a run's bundle, in one direction: amend the evidence → copy the inputs → write evidence.json
once → writers → manifest, statement and signature last.

:func:`publish` is that sequence for the pytest controller, ``hetero report --from-journal`` and
``hetero merge`` alike; it calls the ``pytest_hetero_*`` hooks through the relay it is given
(pytest's ``config.hook``, or the ``hetero`` command's registry), so this package imports neither
pytest nor the renderers. :func:`finish_bundle` is the built-in last step.

A finish is atomic as far as a reader can tell: every file is written to a temporary name and
renamed, the signature files of an earlier finish are removed first, and ``attestation.intoto.jsonl``
(the envelope) is written last, so a bundle without it is an unfinished one (``hetero verify`` says
so; ``hetero report --from-journal`` finishes it). SIGINT and SIGTERM are held while it runs: the
first is noted and the finish completes; a second abandons it (KeyboardInterrupt).

Only what the gate wrote is listed (:func:`pytest_hetero.bundle.manifest.recorded_manifest`): a file
in the folder that nobody recorded writing, or a recorded one that changed, is moved out of the bundle
to ``<bundle>.unrecorded/`` and named in the signed predicate (``unrecorded_files``), like journal
lines that were rejected; :class:`TamperDetected` then says so after the bundle is complete.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import msgspec

from pytest_hetero.bundle.manifest import (
    ATTESTATION,
    SIGNATURE_FILES,
    Problem,
    _safe,
    build_manifest,
    bundle_files,
    recorded_manifest,
    sha256_file,
    write_manifest_data,
)
from pytest_hetero.declared import resolve
from pytest_hetero.errors import BundleError, Location
from pytest_hetero.evidence.inputs import INPUTS, write_atomic
from pytest_hetero.evidence.model import gc_paused
from pytest_hetero.evidence.recorder import EVIDENCE, JOURNAL, write_evidence
from pytest_hetero.settings import SignCommand

if TYPE_CHECKING:
    from pytest_hetero.bundle.intoto import UnrecordedFile
    from pytest_hetero.evidence.document import EvidenceDocument, JournalSection, TornLine
    from pytest_hetero.evidence.inputs import RunInputs
    from pytest_hetero.settings import Settings
    from pytest_hetero.vocab import Status

TMP_PREFIX = ".hetero-tmp-"
"""Name prefix of the finish's temporary files (a leftover of an abandoned finish is removed)."""


class TamperDetected(BundleError):
    """The bundle is complete and signed, but something the gate did not write was found and kept out:
    journal lines that do not authenticate, files nobody recorded writing, recorded files changed."""


class FinishInterrupted(KeyboardInterrupt):
    """A second SIGINT/SIGTERM abandoned the finish; the bundle has no envelope (clearly unfinished)."""


@contextlib.contextmanager
def interrupts_held(notice: str, held: list[int]) -> Iterator[None]:
    """Hold SIGINT and SIGTERM while the block runs: the first is appended to ``held`` and
    ``notice`` written to stderr; a second raises :class:`FinishInterrupted`. Previous handlers
    come back afterwards. Outside the main thread (signals cannot be caught there) nothing is held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def hold(signum: int, frame: Any) -> None:
        held.append(signum)
        if len(held) == 1:
            sys.stderr.write(notice)
            return
        raise FinishInterrupted(f"signal {signum}")

    previous = {sig: signal.signal(sig, hold) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def publish(hook: Any, evidence: EvidenceDocument, settings: Settings, inputs: RunInputs
            ) -> list[tuple[str, Exception]]:
    """Finish the bundle ``settings.bundle_dir`` for the assembled ``evidence``:

    1. ``pytest_hetero_amend_evidence`` adds its sections to ``evidence`` (selection, baseline diff…);
    2. each matrix, and the code folders and acceptance files it names, are copied, secrets
       redacted, into ``inputs/`` (``inputs.kept``; ``evidence["inputs"]`` says what was kept);
    3. evidence.json is written, its only write (OSError propagates: the folder is unwritable);
    4. ``pytest_hetero_write_reports``: every writer renders the document;
    5. ``pytest_hetero_bundle_finished``: the built-in one, last, writes the manifest, statement
       and signature.

    ``hook`` is a pluggy hook relay with the ``pytest_hetero_*`` specs. A failing hook does not
    stop the later steps; returns ``[(hook name, exception)]`` for the caller to report. Signals
    are held meanwhile (see the module docstring; ``inputs.held_signals`` lists those held), and the cyclic
    garbage collector is paused (the finish builds no cycles; collections would only walk the document again).
    Raises FinishInterrupted on a second signal.
    """
    bundle = settings.bundle_dir
    notice = (f"pytest-hetero: finishing the bundle {bundle}; interrupt again to abandon it (then rebuild it "
              f"with: hetero report --from-journal {bundle})\n")
    with interrupts_held(notice, inputs.held_signals), gc_paused():
        inputs.before = _start_finish(bundle)
        failed: list[tuple[str, Exception]] = []
        _call(hook.pytest_hetero_amend_evidence, failed, evidence=evidence, settings=settings, inputs=inputs)
        inputs.keep(evidence, bundle)
        evidence["inputs"] = inputs.section
        _inputs_evidence(evidence, inputs)
        _redact_sections(evidence, inputs)
        inputs.written[EVIDENCE] = write_evidence(bundle, evidence)
        _record_journal(bundle, inputs)
        written: list[Any] = []
        _call(hook.pytest_hetero_write_reports, failed, evidence=evidence, bundle_dir=bundle, settings=settings,
              inputs=inputs, results=written)
        _record_written(bundle, written, inputs)
        _call(hook.pytest_hetero_bundle_finished, failed, evidence=evidence, bundle_dir=bundle, settings=settings,
              inputs=inputs)
    return failed


def _redact_sections(evidence: EvidenceDocument, inputs: RunInputs) -> None:
    """Redact the sections of ``evidence`` built at the finish (untested scope, inputs, what hooks
    added…) as each item's evidence was redacted when it was journaled: names from the matrix (a
    model named like a token) reach them unredacted. The environment's secrets and every matrix's
    ``spec.redact`` patterns count; ``items`` are left as they are (already redacted)."""
    from pytest_hetero.errors import MatrixError
    from pytest_hetero.redact import Redactor

    extra: list[tuple[str, str]] = []
    for entry in evidence["matrices"]:
        with contextlib.suppress(MatrixError, OSError, KeyError, TypeError):
            extra += list(inputs.matrix(entry).redact)
    redactor = Redactor(extra=extra)
    raw = cast("dict[str, object]", evidence)  # every section but items, whatever its type, redacted in place
    for key, value in list(raw.items()):
        if key != "items":
            raw[key] = redactor.data(value)


class _WrittenAudit(msgspec.Struct, frozen=True, kw_only=True):
    """The change record's ``audit`` (:class:`~pytest_hetero.pytest_plugin.audit.AuditRecord`) as the finish reads
    it: its ``status`` as written (None when absent)."""

    status: Any = None


class _WrittenChange(msgspec.Struct, frozen=True, kw_only=True):
    """The change record (:class:`~pytest_hetero.status.drift.ChangeImpact`) as the finish reads it: its
    ``audit`` (None when absent or null: no audit log was read)."""

    audit: _WrittenAudit | None = None


class _WrittenClusterChange(msgspec.Struct, frozen=True, kw_only=True):
    """The evidence's ``cluster`` section (:class:`~pytest_hetero.pytest_plugin.drift.ClusterRecord`) as the
    finish reads it: its ``change_record`` (None when absent or null: no ``--hetero-change``)."""

    change_record: _WrittenChange | None = None


def _inputs_evidence(evidence: EvidenceDocument, inputs: RunInputs) -> None:
    """Put what keeping the inputs found into ``evidence``: inputs that could not be kept
    (``inputs_not_kept``, also signed in the predicate: verification fails on it) and inputs that changed
    while the run used them (a ``not_proven`` entry per item that used one, so the verdict is at best
    ``incomplete``); both also as ``warnings``. Then the judge settles the exit status the run signs
    (a baseline gate's policy) and the verdict over all of it."""
    from pytest_hetero.evidence.untested import INPUTS_PART, summarise
    from pytest_hetero.judge.verdict import exit_status

    warnings = evidence["warnings"]
    evidence["inputs_not_kept"] = list(inputs.problems)
    warnings += [f"input not kept in the bundle: {p}" for p in inputs.problems]
    untested = evidence["untested"]
    run = evidence["run"]
    change = msgspec.convert(evidence.get("cluster") or {}, _WrittenClusterChange).change_record
    audited = change.audit.status if change is not None and change.audit is not None else None
    judged_change: Status | None = audited if audited in ("passed", "failed", "error") else None
    diff = evidence.get("baseline_diff")
    run["exit_status"] = exit_status(run["exit_status"], diff["gate"] if diff else None, judged_change)
    for changed in inputs.changed:
        warnings.append(changed["reason"])
        layer = {"code": "model", "acceptance": "business"}[changed["input"]]
        untested["not_proven"].extend(
            {"nodeid": n, "layer": layer, "part": INPUTS_PART, "reason": changed["reason"]} for n in changed["nodeids"])
    cleanup = evidence.get("cleanup")
    judged = summarise(evidence["items"], untested, cleanup["leftovers"] if cleanup else [],
                       run["exit_status"], len(evidence["errors"]), judged_change)  # settled above
    summary = evidence["summary"]
    summary["verdict"] = judged["verdict"]
    summary["verdict_reason"] = judged["verdict_reason"]
    summary["selection"] = judged["selection"]


def _start_finish(bundle: Path) -> set[str]:
    """Remove an earlier finish's signature files and temporary leftovers; return the files present."""
    for name in SIGNATURE_FILES:
        with contextlib.suppress(FileNotFoundError):
            (bundle / name).unlink()
    files = set(bundle_files(bundle, ordered=False)[0])
    stale = {f for f in files if f.rsplit("/", 1)[-1].startswith(TMP_PREFIX) or f.endswith(".tmp")}
    for rel in stale:
        with contextlib.suppress(OSError):
            (bundle / rel).unlink()
    return files - stale


def _record_journal(bundle: Path, inputs: RunInputs) -> None:
    """Record the journal as the gate wrote it. When lines were rejected (not the gate's) or the file
    grew after assembly, the journal in the bundle becomes the accepted lines only and the file as
    found is set aside."""
    read = inputs.journal
    if read is None:
        return
    path = bundle / JOURNAL
    if not read.rejected and path.stat().st_size == read.file_size:
        inputs.written[JOURNAL] = (read.file_sha256, read.file_size)
        return
    # lines not the gate's, or appended after assembly: the bundle keeps the lines assembly accepted
    keep = set(read.numbers)
    lines = path.read_bytes().splitlines(keepends=True)
    clean = b"".join(raw for n, raw in enumerate(lines, 1) if n in keep)
    _set_aside(bundle, JOURNAL)
    inputs.written[JOURNAL] = write_atomic(path, clean)


def _record_written(bundle: Path, results: list[Any], inputs: RunInputs) -> None:
    """Record the files the writers returned (paths inside the bundle), hashed as written."""
    for result in results:
        for path in result or []:
            try:
                rel = Path(path).resolve().relative_to(bundle.resolve()).as_posix()
            except ValueError:
                continue
            if rel not in inputs.written and (bundle / rel).is_file():
                inputs.written[rel] = sha256_file(bundle / rel)


def _call(step: Any, failed: list[tuple[str, Exception]], results: list[Any] | None = None, **kwargs: Any) -> None:
    try:
        answer = step(**kwargs)
    except Exception as exc:  # noqa: BLE001 - the bundle must still be finished; the caller reports it
        failed.append((str(step.name), exc))
        return
    if results is not None and isinstance(answer, list):
        results.extend(answer)


def aside_dir(bundle: Path) -> Path:
    """Where files kept out of ``bundle`` go: ``<bundle>.unrecorded/`` beside it."""
    return bundle.with_name(bundle.name + ".unrecorded")


def _set_aside(bundle: Path, rel: str) -> str:
    """Move ``rel`` out of the bundle into :func:`aside_dir`; return where it went (or why it stayed)."""
    target = aside_dir(bundle) / rel
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(bundle / rel, target)
    except OSError as exc:
        return f"could not be moved out ({exc.strerror})"
    return str(target)


class _WrittenArtifact(msgspec.Struct, frozen=True, kw_only=True):
    """An artifact as an item's (or an earlier attempt's) evidence lists it
    (:class:`~pytest_hetero.evidence.document.ArtifactDict`), each field as written: an edited journal's may lack
    or mistype any (None when absent)."""

    path: object = None
    sha256: object = None
    size: object = None


class _WrittenAttempt(msgspec.Struct, frozen=True, kw_only=True):
    """An earlier attempt of an item a rerun plugin ran again: its ``artifacts`` as written (``[]`` when absent
    or null; anything else is iterated as it is, each element then judged)."""

    artifacts: Any = None


def recorded(evidence: EvidenceDocument, inputs: RunInputs | None, bundle: Path) -> tuple[dict[str, tuple[str, int]],
                                                                                       list[Problem]]:
    """Bundle path → (sha256, size) of every file the gate wrote: the finish's own (``inputs.written``)
    and every artifact an item's evidence lists (its earlier attempts' too). Two items recording one path
    differently are settled by the file (the record matching it wins); unsafe paths, and artifacts that are not
    objects (an edited journal's), are problems, never listed."""
    out: dict[str, tuple[str, int]] = {}
    problems: list[Problem] = []
    clashes: dict[str, set[tuple[str, int]]] = {}
    for item in evidence["items"]:
        # an attempt a rerun repeated keeps its artifacts under attempt-N/, listed in its evidence
        # (every item has its artifacts list, which the journal and the loader refuse an item without; an attempt's
        # are as a rerun plugin wrote them: a JSON object always fits _WrittenAttempt, each field any value)
        earlier = [msgspec.convert(a, _WrittenAttempt).artifacts or [] for a in item.get("attempts") or []
                   if isinstance(a, dict)]
        for art in [*item["artifacts"], *(a for listed in earlier for a in listed)]:
            if not isinstance(art, dict):  # an edited journal's: no path to list or set aside
                problems.append(Problem(str(art)[:200], "unsafe", f"artifact of {item['nodeid']} is not an object "
                                                                  "{path, sha256, size}"))
                continue
            said = msgspec.convert(art, _WrittenArtifact)
            rel, digest, size = str(said.path), str(said.sha256), said.size
            if not _safe(rel) or rel in SIGNATURE_FILES or not isinstance(size, int):
                problems.append(Problem(rel, "unsafe", f"artifact of {item['nodeid']} has an unsafe path or no size"))
                continue
            if rel in out and out[rel] != (digest, size):
                clashes.setdefault(rel, {out[rel]}).add((digest, size))
            out[rel] = (digest, size)
    for rel, options in clashes.items():
        try:
            actual = sha256_file(bundle / rel)
        except OSError:
            continue
        out[rel] = actual if actual in options else out[rel]
    if inputs is not None:
        out.update(inputs.written)
    return out, problems


def finish_bundle(evidence: EvidenceDocument, bundle_dir: Path, key_path: Path | SignCommand | None,
                  owners: dict[str, dict[str, str]], inputs: RunInputs | list[tuple[str, str]] | None = None
                  ) -> str | None:
    """Write manifest.json, the statement and its envelope; sign with ``key_path`` when given.

    With ``inputs`` of a :func:`publish`, the manifest lists what the gate wrote (:func:`recorded`,
    with the files found present when the finish began in ``inputs.before``); anything else found is
    moved to :func:`aside_dir` and named, with rejected journal lines, in the predicate's
    ``unrecorded_files`` and ``journal``. Without that record (``inputs`` None, or only the matrix
    copies' ``[(bundle path, statement digest)]`` of a folder assembled by hand) every file found is
    hashed and listed. ``owners``
    ({matrix name: {layer: team}}) goes into the predicate; the matrix copies (``inputs.kept``: [(bundle
    path, statement digest)]) are statement subjects after manifest.json (a copy under ``inputs/``
    that this run could not refresh is a subject with the sha256 recorded at run time). Returns the
    run signer's keyid (None when unsigned). Raises SigningKeyError after writing an unsigned envelope
    when the key is refused, so the bundle is still complete and visibly unsigned; then
    TamperDetected when anything was kept out.
    """
    from pytest_hetero.bundle.signing import (
        Signer,
        build_predicate,
        build_statement,
        load_signer,
        write_statement,
    )

    key: Signer | None = None
    refused: BundleError | None = None
    if key_path is not None:
        try:
            key = load_signer(key_path)
        except BundleError as exc:
            refused = exc
    kept = inputs if isinstance(inputs, list) else inputs.kept if inputs is not None else []
    journal = evidence.get("journal")
    torn = journal.get("torn") if journal else None
    manifest_digest, aside = _write_manifest(evidence, bundle_dir, None if isinstance(inputs, list) else inputs, torn)
    digests = dict(kept)
    subjects = [("manifest.json", manifest_digest)]
    for m in evidence["matrices"]:
        rel = f"{INPUTS}/{m['name']}.matrix.yaml"
        if rel in digests and (bundle_dir / rel).is_file():
            subjects.append((rel, digests[rel]))
    run_keyid = key.keyid if key else None
    with gc_paused():
        predicate = build_predicate(evidence, owners, run_keyid)
        predicate["journal"] = journal
        predicate["inputs"] = evidence.get("inputs", {})
        predicate["unrecorded_files"] = aside
        predicate["inputs_not_kept"] = evidence.get("inputs_not_kept") or []
        statement_sha256 = write_statement(bundle_dir, build_statement(subjects, predicate), key)
    from pytest_hetero.bundle.vsa import write_vsas

    write_vsas(bundle_dir, predicate["validation"], evidence["matrices"], statement_sha256, key)
    missing = [a["path"] for a in aside if a["kind"] == "missing"]
    if missing:
        sys.stderr.write(f"pytest-hetero: {len(missing)} artifact(s) the evidence lists are not in the bundle "
                         f"(named in the statement), e.g. {missing[0]}\n")
    interrupted = interrupted_summary(torn, aside)
    if interrupted:
        sys.stderr.write(f"pytest-hetero: {interrupted}\n")
    if refused is not None:
        raise refused
    tampered = tamper_summary(journal, aside)
    if tampered:
        raise TamperDetected(tampered, Location(str(bundle_dir)),
                             f"what was kept out is listed in the signed statement; set-aside files are in "
                             f"{aside_dir(bundle_dir)}")
    return run_keyid


def _write_manifest(evidence: EvidenceDocument, bundle_dir: Path, inputs: RunInputs | None, torn: TornLine | None
                    ) -> tuple[str, list[UnrecordedFile]]:
    """Write manifest.json (see :func:`finish_bundle`: what the gate wrote, with ``inputs``; else every file found)
    after moving what it keeps out to :func:`aside_dir`; return (its hex sha256, what was kept out). What the
    manifest is built from (a few strings per file) is released on return, before the statement is built."""
    if inputs is None:
        manifest, problems = build_manifest(bundle_dir), list[Problem]()
    else:
        files, problems = recorded(evidence, inputs, bundle_dir)
        manifest, found = recorded_manifest(bundle_dir, files, inputs.before)
        problems += found
    aside: list[UnrecordedFile] = [
        {"path": p.path, "kind": _interrupted(p, torn), "detail": p.detail,
         "moved_to": _set_aside(bundle_dir, p.path) if p.kind in ("unrecorded", "modified") else None}
        for p in problems]
    return write_manifest_data(bundle_dir, manifest), aside


def _interrupted(problem: Problem, torn: TornLine | None) -> str:
    """``interrupted`` for a file the gate did not record because the run was cut off while recording it (the
    journal's last line is torn, and the file is an artifact: named by the torn line, or under ``artifacts/``),
    else the problem's own kind. It is kept out of the bundle all the same; only the words differ."""
    if torn and problem.kind == "unrecorded" and (problem.path in torn["paths"]
                                                  or problem.path.startswith("artifacts/")):
        return "interrupted"
    return problem.kind


def interrupted_summary(torn: TornLine | None, aside: list[UnrecordedFile]) -> str:
    """One line saying the run was cut off mid-write and what was lost (empty when the journal is whole, ``torn``
    None: the evidence's ``journal.torn``): the torn line, the item whose result it held, and the artifacts it had
    written, kept out of the bundle."""
    if not torn:
        return ""
    files = [a["path"] for a in aside if a["kind"] == "interrupted"]
    what = f"the result of {torn['nodeid']} was lost (reported not_run)" if torn["nodeid"] else \
        "the line was cut before it named its item (the item is reported not_run)"
    kept = (f"; {len(files)} file(s) it had written were kept out of the bundle (listed in the signed statement): "
            + ", ".join(json.dumps(f) for f in files[:5]) if files else "")
    return (f"the run was interrupted mid-write (killed, or the disk filled): journal line {torn['line']} is torn, "
            f"{torn['bytes']} bytes without an end; {what}{kept}")


def tamper_summary(journal: JournalSection | None, aside: list[UnrecordedFile]) -> str:
    """One line naming what was kept out of the bundle (empty when nothing was): the journal lines ``journal`` (the
    evidence's section; None: a bundle without one) rejected and the files set aside. Files an interrupted run
    left (see :func:`interrupted_summary`) are not tampering and are not named here."""
    rejected = journal["rejected"] if journal else []
    aside = [a for a in aside if a["kind"] not in ("missing", "interrupted")]  # gone or cut off is not planted
    parts = []
    if rejected:
        parts.append(f"{len(rejected)} journal line(s) not written by the gate were rejected "
                     f"(line {', '.join(str(r['line']) for r in rejected[:5])})")
    if aside:
        parts.append(f"{len(aside)} file(s) the gate did not write were kept out of the bundle: "
                     + ", ".join(json.dumps(a["path"]) + f" ({a['kind']})" for a in aside[:5]))
    return "evidence tampering detected: " + "; ".join(parts) if parts else ""


def signature_line(bundle_dir: Path) -> str:
    """``bundle signed by <keyid>`` or ``bundle UNSIGNED`` for the terminal summary."""
    try:
        envelope = json.loads((bundle_dir / ATTESTATION).read_text(encoding="utf-8"))
        signer = next((s["keyid"] for s in envelope["signatures"] if "signoff" not in s), None)
    except (OSError, ValueError, KeyError, TypeError):
        signer = None
    return f"bundle signed by {signer}" if signer else "bundle UNSIGNED (sign runs with --hetero-sign-key KEY)"


resolve(__name__)
