"""pytest glue only: options, markers, matrix collection, evidence on reports, session finish.

Flow: configure (settings, markers, recorder) → collect (MatrixFile) → each item: setup
(blocked?) → run (backend, layer check) → makereport (evidence as plain JSON in
``user_properties``) → controller journals it → session finish (backends close first, then
:func:`pytest_hetero.bundle.finish.publish`: amend the evidence, evidence.json once, writers,
signing last).

Start-up cost: this module imports only pytest, pluggy and light modules; collection, items,
engines, reporting and signing are imported when a matrix file is collected or a bundle written.
"""

from __future__ import annotations

import fnmatch
import os
import socket
import subprocess
import sys
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import pytest

from pytest_hetero import LAYERS, __version__, signals
from pytest_hetero.errors import HeteroError
from pytest_hetero.hooks import builtin
from pytest_hetero.hooks.registry import register_builtins
from pytest_hetero.pytest_plugin.options import add_options, settings_of
from pytest_hetero.pytest_plugin.stash import (
    AHEAD,
    BACKENDS,
    DESELECTED,
    EVIDENCE_PROPERTY,
    FINAL,
    OUTCOME,
    PLANS,
    PREVIOUS_SIGTERM,
    RAISED,
    RECORDER,
    SETTINGS,
    evidence_of,
)

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import EvidenceDocument, FailureDict, ItemDict, SlimEvidence
    from pytest_hetero.evidence.recorder import Recorder
    from pytest_hetero.judge.failures import FailureStatus
    from pytest_hetero.matrix.expand import Plan
    from pytest_hetero.matrix.model import Matrix
    from pytest_hetero.pytest_plugin.item import LayerItem
    from pytest_hetero.settings import Settings

MATRIX_PROPERTY = "hetero_matrix"
TARGET_PROPERTY = "hetero_target"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Register the ``pytest_hetero_*`` hookspecs, the built-in implementations and the plugins of
    the ``pytest_hetero`` entry-point group (the same registry the ``hetero`` command uses)."""
    register_builtins(pluginmanager)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Declare ``--hetero-*`` options and ``hetero_*`` ini keys."""
    add_options(parser)


class WorkerInput(TypedDict):
    """What the controller gives every pytest-xdist worker (:func:`pytest_configure_node` writes all three, beside
    xdist's own keys): the controller's run id (artifacts share one bundle), its claim root and its pid."""

    hetero_run_id: str
    hetero_claim_root: str
    hetero_controller_pid: int


def _git_commit(cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Resolve settings, register markers and the glue's plugin modules, open the recorder on the controller."""
    from pytest_hetero.pytest_plugin import baseline, drift, ordering, pytest_html, selection

    # the snapshot before the selection module (so its trylast implementation runs after selection's);
    # the ordering wrapper last of all (outermost: it restores plan order after every other plugin)
    if not config.pluginmanager.hasplugin("pytest_hetero.ordering"):
        config.pluginmanager.register(ordering.Snapshot(), "pytest_hetero.snapshot")
    for module in (drift, selection, baseline, pytest_html):
        if not config.pluginmanager.is_registered(module):
            config.pluginmanager.register(module, module.__name__)
    if not config.pluginmanager.hasplugin("pytest_hetero.ordering"):
        config.pluginmanager.register(ordering.Ordering(), "pytest_hetero.ordering")
    worker: WorkerInput | None = getattr(config, "workerinput", None)
    try:
        settings = settings_of(config, run_id=worker["hetero_run_id"] if worker else None)
    except HeteroError as exc:
        raise pytest.UsageError(exc.render()) from None
    config.stash[SETTINGS] = settings
    config.stash[PLANS] = {}
    config.stash[BACKENDS] = {}
    config.stash[DESELECTED] = {}
    config.stash[RECORDER] = None  # a worker's: the controller's journal is opened last (below)
    config.addinivalue_line("markers", "hetero: an item of a pytest-hetero validation matrix")
    for layer in LAYERS:
        config.addinivalue_line("markers", f"{layer}: pytest-hetero {layer} layer item")
    for kind in ("gpu", "npu", "cpu"):
        config.addinivalue_line("markers", f"{kind}: item for a resource of type {kind}")
    from pytest_hetero.pytest_plugin.claims import CLAIM_ROOT, claim_root

    config.stash[CLAIM_ROOT] = Path(worker["hetero_claim_root"]) if worker else claim_root(config)
    if settings.matrices and config.args_source != pytest.Config.ArgsSource.ARGS:
        # `pytest --hetero-matrix X` alone runs X, not X plus the default testpaths
        config.args[:] = []
    extra = [str(p) for p in settings.matrices if str(p) not in config.args]
    config.args.extend(extra)
    if worker is None:
        _check_early(config, settings)
    else:
        signals.follow_controller(worker["hetero_controller_pid"])
        config.stash[PREVIOUS_SIGTERM] = signals.catch_sigterm()
    if not config.pluginmanager.hasplugin("pytest_hetero.slimmer"):
        config.pluginmanager.register(Slimmer(config), "pytest_hetero.slimmer")
    if worker is None:
        recorder = config.stash[RECORDER] = _recorder(config, settings)
        config.pluginmanager.register(Journaler(recorder, not config.option.collectonly),
                                      "pytest_hetero.journaler")
        config.stash[PREVIOUS_SIGTERM] = signals.catch_sigterm()


def _recorder(config: pytest.Config, settings: Settings) -> Recorder:
    """The controller's journal. Its run line (with the git commit, whose lookup runs a
    subprocess) is made when the first line is written: a session that writes no bundle pays nothing."""
    from pytest_hetero.evidence.model import utc_now
    from pytest_hetero.evidence.recorder import Recorder
    from pytest_hetero.reporting.itemtexts import ItemTexts

    run = {"id": settings.run_id, "tool": "pytest-hetero", "tool_version": __version__, "started_at": utc_now(),
           "host": socket.gethostname(), "python": sys.version.split()[0], "pytest": pytest.__version__,
           "invocation": list(config.invocation_params.args), "profile": settings.profile,
           "backend_override": settings.backend, "rootdir": str(settings.rootdir)}

    def run_line() -> dict[str, Any]:
        from pytest_hetero.redact import Redactor

        line: dict[str, Any] = Redactor().data({**run, "git_commit": _git_commit(settings.rootdir)})
        return line

    # each item's JUnit and CTRF texts are rendered as it is journaled: the finish joins them
    return Recorder(settings.bundle_dir, run_line, _journal_key(settings), ItemTexts())


def _journal_key(settings: Settings) -> Any:
    """The journal key: derived from the run key when the run is signed (a recovery holding the key can
    authenticate the journal after a crash), else ephemeral. It stays in this process (never in
    ``workerinput``: pytest-xdist workers send reports, the controller alone writes the journal)."""
    from pytest_hetero.evidence.journal import JournalKey

    if settings.sign_key is None:
        return JournalKey.ephemeral()
    from pytest_hetero.bundle.signing import load_signer

    try:
        signer = load_signer(settings.sign_key)
        return JournalKey.derived(signer.sign, signer.keyid, settings.run_id)
    except HeteroError:
        return JournalKey.ephemeral()  # _check_early already refused the run with the reason


def _check_early(config: pytest.Config, settings: Settings) -> None:
    """Refuse, before anything runs, a backend no plugin provides and a signing key that cannot sign."""
    if settings.backend and config.hook.pytest_hetero_backend(name=settings.backend) is None:
        raise pytest.UsageError(f"--hetero-backend {settings.backend!r}: no plugin provides this backend "
                                f"(built in: {', '.join(builtin.BACKENDS)})")
    if settings.sign_key is not None:
        from pytest_hetero.bundle.signing import load_signer

        what = "--hetero-sign-key / HETERO_SIGN_KEY" if isinstance(settings.sign_key, Path) else \
            "--hetero-sign-command / HETERO_SIGN_COMMAND"
        try:
            signer = load_signer(settings.sign_key)
            signer.sign(b"pytest-hetero signer check")  # an external signer answers before anything runs
        except HeteroError as exc:
            raise pytest.UsageError(f"{what}: {exc.render()}") from None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """On a pytest-xdist controller (which collects nothing), when the command line names matrix files:
    refuse a ``--dist`` mode that would split a resource's items across workers
    (:func:`~pytest_hetero.pytest_plugin.xdist.refused_dist`), then claim the run folder before the
    workers start (a second run with this run id is refused here)."""
    config = session.config
    recorder = config.stash[RECORDER]
    if recorder is None or config.option.collectonly or config.pluginmanager.getplugin("dsession") is None:
        return
    from pytest_hetero.pytest_plugin.selection import matrices_in_args
    from pytest_hetero.pytest_plugin.xdist import refused_dist

    if matrices_in_args(config):
        refused = refused_dist(config)
        if refused:
            raise pytest.UsageError(refused)
        _claim(config, recorder)


def _claim(config: pytest.Config, recorder: Recorder) -> None:
    """Claim the run folder (:meth:`Recorder.claim`) or stop the session before anything runs (a usage
    error, exit 4)."""
    refused = recorder.claim()
    if refused:
        raise pytest.UsageError(f"pytest-hetero: {refused}")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Give SIGTERM back to whoever had it (matters when pytest runs in-process, e.g. pytester)."""
    signals.restore_sigterm(config.stash.get(PREVIOUS_SIGTERM, None))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: give every worker the controller's run id (artifacts share one bundle), claim
    root (claim ids) and pid (see :func:`~pytest_hetero.signals.follow_controller`)."""
    node.workerinput["hetero_run_id"] = node.config.stash[SETTINGS].run_id
    from pytest_hetero.pytest_plugin.claims import CLAIM_ROOT

    node.workerinput["hetero_claim_root"] = str(node.config.stash[CLAIM_ROOT])
    node.workerinput["hetero_controller_pid"] = os.getpid()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist: what a worker's engines could not remove, for the controller's evidence."""
    node.config.stash.setdefault(_LEFTOVERS, []).extend(
        tuple(x) for x in (getattr(node, "workeroutput", None) or {}).get("hetero_leftovers", []))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist: keep each resource's items on one worker, in order (see xdist_scheduling)."""
    from pytest_hetero.pytest_plugin.xdist import make_scheduler

    return make_scheduler(config, log)


def pytest_report_header(config: pytest.Config) -> str | None:
    """Say so when claim ids are not relative to pytest's rootdir (no ini file, or an option's path moved it)."""
    from pytest_hetero.pytest_plugin.claims import CLAIM_ROOT, option_paths, without_ini

    lines = []
    if without_ini(config):
        lines.append(f"pytest-hetero: no ini file: claim ids are each matrix's path relative to its project (the "
                     f"folder above it holding pyproject.toml, .git or .hetero-root, else its own folder), not to "
                     f"the rootdir {config.rootpath}")
    root = config.stash[CLAIM_ROOT]
    if root != config.rootpath:
        lines.append(f"pytest-hetero: claim ids are relative to {root}: pytest took {', '.join(option_paths(config))} "
                     f"for test paths and moved its rootdir to {config.rootpath} (write --hetero-…=PATH to keep its "
                     f"node ids too)")
    return "\n".join(lines) or None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Never collect inside evidence bundles (they keep copies of matrices) or the report folder."""
    if collection_path.is_dir() and ((collection_path / "journal.jsonl").exists()
                                     or collection_path.resolve() == config.stash[SETTINGS].report_dir):
        return True
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect files matching ``hetero_matrix_glob`` and every ``--hetero-matrix`` path."""
    settings = parent.config.stash[SETTINGS]
    if fnmatch.fnmatch(file_path.name, settings.matrix_glob) or file_path.resolve() in settings.matrices:
        from pytest_hetero.pytest_plugin.collect import MatrixFile

        return MatrixFile.from_parent(parent, path=file_path)
    return None


def layer_items(config: pytest.Config, items: list[pytest.Item]) -> list[LayerItem]:
    """The layer items among ``items``. None can exist before this process collected a matrix
    file (which fills PLANS), so a session without one never imports the item module."""
    if not config.stash[PLANS]:
        return []
    from pytest_hetero.pytest_plugin.item import LayerItem

    return [i for i in items if isinstance(i, LayerItem)]


MIN_FREE_BYTES = 64 * 1024 * 1024
"""Free space (bytes) the report folder needs before a run starts: evidence must not fail at the end."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before anything runs: the report folder must be writable with room to spare, or the run stops
    with a clear message (exit 4) instead of losing evidence at the end. Then every collected
    matrix is journaled, so an interrupted run reports its unfinished items as ``not_run``."""
    if session.config.option.collectonly or not session.config.stash[PLANS]:
        return  # no matrix file collected, hence no layer item
    report_dir = session.config.stash[SETTINGS].report_dir
    problem = check_writable(report_dir)
    if problem:  # a usage error reads "ERROR: …" (pytest.exit here printed "! _pytest.outcomes.Exit: … !")
        raise pytest.UsageError(f"pytest-hetero: report folder {report_dir} {problem}; fix it or choose another "
                                "with --hetero-report-dir")
    same = duplicate_names(session.config.stash[PLANS])
    if same:
        raise pytest.UsageError(f"pytest-hetero: {same}; the bundle keys matrices by metadata.name "
                                "(inputs/<name>.matrix.yaml, never-covered values): give each matrix of one run "
                                "its own name")
    recorder = session.config.stash[RECORDER]
    if recorder is not None:
        _claim(session.config, recorder)
        # journal every collected matrix now, not with its first finished item: a run killed,
        # interrupted or stopped by another file's collection error still lists what it planned
        for prefix, (matrix, plan) in session.config.stash[PLANS].items():
            recorder.planned(prefix, matrix, plan)


def duplicate_names(plans: dict[str, tuple[Any, Any]]) -> str:
    """``'matrix name X is used by A and B'`` for the first metadata.name two collected matrix files
    share (``plans``: nodeid prefix → (Matrix, Plan)), else an empty string."""
    seen: dict[str, str] = {}
    for prefix, (matrix, _plan) in plans.items():
        if matrix.name in seen:
            return f"matrix name {matrix.name!r} is used by {seen[matrix.name]} and {prefix}"
        seen[matrix.name] = prefix
    return ""


def check_writable(folder: Path) -> str:
    """Empty string when ``folder`` can be created and written with MIN_FREE_BYTES free; else why not."""
    import shutil
    import tempfile

    if folder.exists() and not folder.is_dir():
        return "is a file, not a folder"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".hetero-probe-"):
            pass
    except OSError as exc:
        return f"is not writable ({exc.strerror})"
    free = shutil.disk_usage(folder).free
    if free < MIN_FREE_BYTES:
        return f"has only {free // (1024 * 1024)} MiB free (needs {MIN_FREE_BYTES // (1024 * 1024)} MiB)"
    return ""


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Remember deselected layer items (-k/-m) so untested scope names them with the reason."""
    if not items:
        return
    for item in layer_items(items[0].config, items):
        item.config.stash[DESELECTED][item.claim_id] = "deselected (not selected by -k/-m/--lf in this session)"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """Once an item's protocol is over (every attempt run, reported, any debugger session ended), clear the
    frames of the failures its layer raised (:func:`~pytest_hetero.pytest_plugin.item.release_frames`): a plugin
    keeping the exception until the session ends then keeps a few hundred bytes, not the layer's context."""
    try:
        return (yield)
    finally:
        from pytest_hetero.pytest_plugin.item import release_frames

        for raised in item.stash.get(RAISED, []):
            release_frames(raised)
        item.stash[RAISED] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Attach the item's evidence, as plain JSON, to the report of the phase that decided it."""
    outcome = yield
    report = outcome.get_result()
    found = layer_items(item.config, [item])
    if not found:
        return
    layer_item = found[0]
    final = item.stash.get(FINAL, None)
    if final is not None:
        if report.failed and final["status"] not in OUTSIDE_KEEPS:  # e.g. a teardown error after a pass
            override = outside_verdict(final, report, layer_item.matrix)
            corrected = final.copy()  # a new dict, status and failure replaced in place
            corrected["status"], corrected["failure"] = override["status"], override["failure"]
            item.stash[FINAL] = corrected
            report.user_properties.append((OVERRIDE_PROPERTY, override))
        return
    evidence = item.stash.get(OUTCOME, None)
    if evidence is not None and report.failed and evidence["status"] not in OUTSIDE_KEEPS:
        # pytest failed this phase for a reason outside the layer's verdict (a warning turned error by
        # -W error, a plugin's check after the call): the evidence must say so, not passed
        override = outside_verdict(evidence, report, layer_item.matrix)
        evidence = evidence.copy()  # a new dict, status and failure replaced in place
        evidence["status"], evidence["failure"] = override["status"], override["failure"]
    if evidence is None and report.failed:
        # the layer never finished (a timeout plugin killed the run, a BaseException): pytest's account
        from pytest_hetero.judge.verdict import outside_failure

        ev = layer_item.new_evidence()
        ev.status, ev.failure = outside_failure(layer_item.matrix, layer_item.planned.layer, report.when,
                                                report.outcome, None, str(report.longrepr or ""))
        evidence = ev.to_dict()  # the stash's JSON, as a worker's report carries it
    if evidence is None or (report.when == "setup" and report.passed):
        return
    if report.skipped and isinstance(report.longrepr, tuple):
        # point skips (blocked, not applicable) at the matrix line, not at our source; the reason may
        # quote a model's stderr: one line, no control characters
        from pytest_hetero.reporting.view import one_line

        path, lineno, _ = item.reportinfo()
        report.longrepr = (str(path), (lineno or 0) + 1, one_line(str(report.longrepr[2])))
    item.stash[FINAL] = shared_slim(evidence, item.stash.get(FINAL, None))
    # once this report is logged (and not to be rerun), the item keeps only what gating reads
    item.config.stash.setdefault(_SLIM_LATER, {})[report.nodeid] = item
    report.user_properties.append((EVIDENCE_PROPERTY, evidence))
    report.user_properties.append((MATRIX_PROPERTY, layer_item.matrix_ref()))
    backend = layer_item.live_backend()
    if backend is not None:
        report.user_properties.append((TARGET_PROPERTY, backend.fingerprint()))


OVERRIDE_PROPERTY = "hetero_outside_verdict"
"""User property of a later phase's report (a teardown error) that corrects the evidence an earlier phase
carried: ``{"status", "failure"}`` (see :func:`outside_verdict`); the journal applies it."""
OUTSIDE_KEEPS = ("failed", "error")
"""Evidence statuses a pytest failure outside the layer's verdict leaves as they are (already not a pass)."""


class OutsideVerdict(TypedDict):
    """What replaces an item's status and failure when pytest failed a phase outside the layer's verdict."""

    status: FailureStatus
    failure: FailureDict


def outside_verdict(evidence: ItemDict | SlimEvidence, report: pytest.TestReport, matrix: Matrix) -> OutsideVerdict:
    """What replaces ``evidence``'s status and failure when pytest failed ``report``'s phase for a reason
    outside the layer's verdict: ``{"status": "error", "failure": {layer, category "pytest_outcome",
    message (the phase, the status the layer gave, pytest's text, its last 1500 characters), owner}}``,
    as the judge writes it (:func:`pytest_hetero.judge.verdict.outside_failure`)."""
    from pytest_hetero.judge.verdict import outside_failure

    status, failure = outside_failure(matrix, evidence["layer"], report.when, report.outcome, evidence["status"],
                                      str(report.longrepr or ""))
    return {"status": status, "failure": failure.to_dict()}


SLIM_FIELDS: tuple[str, ...] = ("nodeid", "matrix", "layer", "keys", "owner", "status", "blocked_by", "reason",
                                 "failure")
"""What an item and its report keep of the evidence once it is journaled (gating, pytest-html columns)."""


def slim(evidence: ItemDict | SlimEvidence) -> SlimEvidence:
    """``evidence`` without its records and artifacts (the journal holds them): a few hundred bytes
    instead of tens of kilobytes, so a long run's memory does not grow with what items recorded
    (:data:`SLIM_FIELDS`, in that order)."""
    return {"nodeid": evidence["nodeid"], "matrix": evidence["matrix"], "layer": evidence["layer"],
            "keys": evidence["keys"], "owner": evidence["owner"], "status": evidence["status"],
            "blocked_by": evidence["blocked_by"], "reason": evidence["reason"],
            "failure": evidence["failure"]}


def shared_slim(evidence: ItemDict | SlimEvidence, known: SlimEvidence | None) -> SlimEvidence:
    """:func:`slim` of ``evidence``, or ``known`` itself when that says the same: an item's phases, its
    stash and its reports then hold one slim dict instead of one each (they are replaced, never changed)."""
    made = slim(evidence)
    return known if known is not None and made == known else made


_SLIM_LATER = pytest.StashKey[dict[str, Any]]()
"""Nodeid → the item whose report carries its full evidence, until that report is logged."""


class Slimmer:
    """Every process's plugin object that keeps a long run's memory flat: once a report is logged by
    every plugin (the controller journaled it; an xdist worker sent it), the report keeps only
    :func:`slim` evidence, and so does its item unless the attempt is to be rerun (pytest-rerunfailures
    keeps the attempt's full evidence with the next one). pytest holds every report and item until the
    session ends."""

    def __init__(self, config: pytest.Config) -> None:
        """Slim what ``config``'s items and reports hold."""
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Slim ``report`` and its item (see the class docstring)."""
        props = report.user_properties
        if not any(name == EVIDENCE_PROPERTY for name, _ in props):
            return
        item = self.config.stash.get(_SLIM_LATER, {}).pop(report.nodeid, None)
        final = item.stash.get(FINAL, None) if item is not None else None
        if item is not None and str(report.outcome) != "rerun" and OUTCOME in item.stash:
            item.stash[OUTCOME] = shared_slim(item.stash[OUTCOME], final)
        carried = evidence_of(report)
        slimmed = shared_slim(carried, final) if carried is not None else None
        report.user_properties = [(name, slimmed if name == EVIDENCE_PROPERTY and value is carried else value)
                                  for name, value in props if name != TARGET_PROPERTY]


class Journaler:
    """Controller-side plugin object: journals what reports carry (item evidence, the matrix it
    came from, the backend's target fingerprint) and collection errors, as they arrive from this
    process or from pytest-xdist workers. Inactive under ``--collect-only``."""

    def __init__(self, recorder: Recorder, active: bool) -> None:
        """Journal into ``recorder``; ``active`` False (``--collect-only``) journals nothing."""
        self.recorder = recorder
        self.active = active
        self.session: pytest.Session | None = None
        self.pending: dict[str, dict[str, Any]] = {}

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Keep the session: a journal that cannot be written any more stops it."""
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Journal each item's evidence once its teardown report arrives (a teardown error corrects it:
        :data:`OVERRIDE_PROPERTY`); when the journal cannot be written (disk full mid-run), stop the
        session after this item: later results would be lost."""
        props: dict[str, Any] = dict(report.user_properties)
        if not self.active:
            return
        if str(report.outcome) == "rerun":  # an attempt a rerun plugin repeats is kept in the final attempt's
            self.pending.pop(report.nodeid, None)
            return
        if EVIDENCE_PROPERTY in props:
            self.pending[report.nodeid] = props
        if report.when == "teardown":
            self.flush(report.nodeid, props.get(OVERRIDE_PROPERTY))

    def flush(self, nodeid: str | None = None, override: dict[str, Any] | None = None) -> None:
        """Journal the evidence held for ``nodeid`` (None: every item still held, at session end), with
        ``override`` applied."""
        for key in [nodeid] if nodeid is not None else list(self.pending):
            props = self.pending.pop(key, None)
            if props is None:
                continue
            if MATRIX_PROPERTY in props:
                self.recorder.matrix(**props[MATRIX_PROPERTY])
            if TARGET_PROPERTY in props:
                self.recorder.target(props[TARGET_PROPERTY])
            self.recorder.item({**props[EVIDENCE_PROPERTY], **(override or {})})
            if self.recorder.broken and self.session is not None:
                self.session.shouldstop = f"pytest-hetero: {self.recorder.broken}"

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """Journal collection errors of matrix files (invalid matrices) so the bundle shows them."""
        if self.active and report.failed and report.nodeid.endswith(".yaml"):
            self.recorder.collect_error(report.nodeid, str(report.longrepr))


def _flush_journaler(config: pytest.Config) -> None:
    """Journal what the Journaler still holds (an item whose teardown report never came: an interrupt)."""
    journaler = config.pluginmanager.get_plugin("pytest_hetero.journaler")
    if isinstance(journaler, Journaler):
        journaler.flush()


def _empty_shard(config: pytest.Config) -> bool:
    """True when ``--hetero-shard`` left this session nothing to run (other shards run it all)."""
    if not config.stash[SETTINGS].shard:
        return False
    from pytest_hetero.matrix.selection import SHARD_REASON

    return any(r.startswith(SHARD_REASON) for r in config.stash[DESELECTED].values())


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Generator[None, object, object]:
    """Close backends first, then (controller) journal deselections, assemble, write, sign. On a worker
    the backends close before pytest-xdist reports back; on the controller the bundle is finished after
    every other plugin's ``pytest_sessionfinish`` (pytest-rerunfailures' ``--fail-on-flaky`` sets exit
    status 7 there), and the exit status the run signs is the one the process returns. An interrupt
    (Ctrl-C, SIGTERM) meanwhile ends with the rebuild hint, never a traceback."""
    if getattr(session.config, "workerinput", None) is not None:
        _session_finish(session, exitstatus)
        return (yield)
    result = yield
    try:
        _session_finish(session, int(session.exitstatus))
    except KeyboardInterrupt:
        _interrupted_finish(session)
    return result


def _interrupted_finish(session: pytest.Session) -> None:
    """Say the bundle is unfinished and how to finish it; close the journal (releasing the run folder)."""
    config = session.config
    recorder = config.stash[RECORDER]
    if recorder is not None:
        _flush_journaler(config)
        recorder.close()
    settings = config.stash[SETTINGS]
    if recorder is not None and recorder.started or (settings.bundle_dir / "journal.jsonl").exists():
        key = " --sign-key KEY" if settings.sign_key else ""
        sys.stderr.write(f"pytest-hetero: interrupted while finishing the run; the bundle {settings.bundle_dir} is "
                         f"unfinished (it has no attestation.intoto.jsonl). Everything journaled is kept: rebuild "
                         f"it with: hetero report --from-journal {settings.bundle_dir}{key}\n")
    session.exitstatus = pytest.ExitCode.INTERRUPTED


def _session_finish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    recorder = config.stash[RECORDER]
    leftovers = _close_backends(config, recorder)
    if getattr(config, "workerinput", None) is not None:
        config.workeroutput["hetero_leftovers"] = leftovers  # type: ignore[attr-defined]
        return
    if recorder is None:
        return
    _flush_journaler(config)
    for name in sorted({b for b, _ in leftovers}):
        recorder.cleanup(name, [x for b, x in leftovers if b == name])
    if leftovers and exitstatus == pytest.ExitCode.OK:
        exitstatus = session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a run that left its workloads is not clean
    recorder.deselected_many(config.stash[DESELECTED].items())
    if not config.option.collectonly:
        # matrices whose every combination is excluded still get a bundle that says so
        for prefix, (matrix, plan) in config.stash[PLANS].items():
            if not plan.items:
                recorder.planned(prefix, matrix, plan)
    if not recorder.started:
        return
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and _empty_shard(config):
        # more shards than resource subtrees: this shard's share is empty, which is not a failure
        exitstatus = session.exitstatus = pytest.ExitCode.OK
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
    stopped = next((str(v) for v in (session.shouldfail, session.shouldstop) if isinstance(v, str) and v), "")
    if interrupted and recorder.collect_errors and not config.option.continue_on_collection_errors:
        # pytest stopped after collection: nothing was interrupted, no item of any matrix ran
        interrupted, stopped = False, (f"{len(recorder.collect_errors)} collection error(s) "
                                       f"({', '.join(recorder.collect_errors[:3])}) stopped pytest before any item "
                                       "ran; fix them or run with --continue-on-collection-errors")
    recorder.end(int(exitstatus), interrupted, stopped)
    _publish(session, recorder)


def _publish(session: pytest.Session, recorder: Recorder) -> None:
    """Finish the bundle; the process exits with the status the run signed unless finishing itself
    failed (a refused journal, an unwritable folder, a writer bug, an interrupt)."""
    config = session.config
    settings = config.stash[SETTINGS]
    before = session.exitstatus
    try:
        evidence = None if recorder.broken else _finish(session, settings, recorder)
    except _Refused as exc:
        sys.stderr.write(f"pytest-hetero: no bundle was written: {exc}\n")
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        return
    if evidence is None:
        sys.stderr.write(f"pytest-hetero: the report folder became unwritable during the run: {recorder.broken}; "
                         f"the run stopped. Items journaled before are kept: free space, then run "
                         f"hetero report --from-journal {settings.bundle_dir}\n")
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
        return
    signed = evidence["run"]["exit_status"]
    if session.exitstatus == before and signed is not None:
        session.exitstatus = signed  # the judge's (a baseline gate's policy included): the one signed
    config.stash[_SUMMARY] = evidence


def _close_backends(config: pytest.Config, recorder: Recorder | None) -> list[tuple[str, dict[str, Any]]]:
    """Journal each engine's fingerprint and close it; every (backend name, Leftover dict) of the run so
    far (the workers' ones arrive through :func:`pytest_testnodedown`). A close() that raises is a
    leftover too: what it created was not released."""
    leftovers = config.stash.setdefault(_LEFTOVERS, [])
    for backend in config.stash[BACKENDS].values():
        try:
            if recorder is not None and recorder.started:
                recorder.target(backend.fingerprint())
            leftovers += [(backend.name, x.to_dict()) for x in backend.close() or []]
        except Exception as exc:  # noqa: BLE001 - cleanup must go on for the other backends
            sys.stderr.write(f"pytest-hetero: closing backend {backend.name} failed: {exc}\n")
            leftovers.append((backend.name, {"kind": "backend", "name": backend.name, "namespace": None,
                                             "reason": f"close() raised {type(exc).__name__}: {exc}",
                                             "detail": {}, "remove": f"hetero cleanup --backend {backend.name}"}))
    return leftovers


_SUMMARY = pytest.StashKey["EvidenceDocument"]()
_LEFTOVERS = pytest.StashKey[list[tuple[str, dict[str, Any]]]]()
"""(backend name, Leftover dict) of every engine of the run, the workers' included."""


class _Refused(Exception):
    """Assembly refused the journal (conflicting lines): no bundle is written."""


def _finish(session: pytest.Session, settings: Settings, recorder: Recorder) -> EvidenceDocument | None:
    """Assemble the journal (its lines authenticated with the run's journal key) and finish the bundle
    (:func:`~pytest_hetero.bundle.finish.publish`), the matrices coming from what this process holds;
    hook failures are reported on stderr (a bug, not a HeteroError, makes the exit status
    INTERNAL_ERROR; evidence tampering, exit 1). Returns the evidence document, or None with
    ``recorder.broken`` set when evidence.json cannot be written."""
    from pytest_hetero.bundle.finish import TamperDetected, publish
    from pytest_hetero.evidence.inputs import RunInputs
    from pytest_hetero.evidence.recorder import EVIDENCE, assemble

    config = session.config
    ahead: dict[str, tuple[Matrix, Plan]] = config.stash.get(AHEAD, {})
    collected: dict[str, tuple[Matrix, Plan]] = config.stash[PLANS]
    # what was collected here wins over what was loaded ahead
    inputs = RunInputs({**ahead, **collected}, recorder.texts)
    try:
        try:
            evidence = assemble(settings.bundle_dir, inputs, key=recorder.key)
        except HeteroError as exc:  # two journal lines that disagree: refuse, never pick
            raise _Refused(exc.render()) from None
        try:
            failed = publish(config.hook, evidence, settings, inputs)
        except OSError as exc:
            recorder.broken = f"cannot write {settings.bundle_dir / EVIDENCE} ({exc.strerror})"
            return None
    finally:
        if recorder.texts is not None:  # their spool file is removed with them
            recorder.texts.close()
    for name, error in failed:
        if isinstance(error, HeteroError):
            sys.stderr.write(f"pytest-hetero: {error.render()}\n")
            if isinstance(error, TamperDetected) and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        else:  # evidence.json is written; a writer bug must not hide it
            sys.stderr.write(f"pytest-hetero: {name} failed: {type(error).__name__}: {error}\n")
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
    if inputs.held_signals:
        sys.stderr.write(f"pytest-hetero: the bundle {settings.bundle_dir} was finished before giving way to the "
                         "interrupt\n")
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    return evidence


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Counts per layer and status, the verdict, the bundle path and the untested scope at a glance."""
    evidence = config.stash.get(_SUMMARY, None)
    if evidence is not None:
        from pytest_hetero.bundle.finish import signature_line
        from pytest_hetero.reporting.terminal import write_summary

        bundle_dir = config.stash[SETTINGS].bundle_dir
        write_summary(terminalreporter, evidence, bundle_dir, signature_line(bundle_dir))
