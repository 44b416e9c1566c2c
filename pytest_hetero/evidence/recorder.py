"""The append-only evidence journal and its assembly into ``evidence.json``.

Only the pytest controller writes here. Each finished item is one JSON line in
``<bundle>/journal.jsonl``, numbered and authenticated (:mod:`pytest_hetero.evidence.journal`).
Durability is a group commit: every line is written to the kernel at once (one ``write``), so a
SIGKILL of the process loses nothing that finished; ``fsync`` runs when :data:`SYNC_EVERY_LINES`
lines or :data:`SYNC_INTERVAL_S` seconds have gathered since the last one (checked as lines are
written), and at the end, so a power loss costs at most the lines of that window. :func:`assemble`
rebuilds the evidence document from the journal alone, which is also how an interrupted run is
recovered (``hetero report --from-journal``); :func:`write_evidence` writes it, once, as
``evidence.json``.

The run folder is claimed before anything runs (:meth:`Recorder.claim`): the journal is created
exclusively and locked (``flock``) for the whole session, so a second run with the same run id, in
parallel or as a CI retry, is refused instead of merging into a hybrid bundle.

Journal line types: ``run`` (first line: run metadata and how the journal key was made), ``matrix``
(a matrix seen, with the data needed to re-plan it), ``item`` (an ItemEvidence dict), ``deselected``
(nodeid, reason), ``collect_error`` (nodeid, message), ``target`` (a backend fingerprint), ``end``
(exit status).
"""

from __future__ import annotations

import errno
import fcntl
import gc
import hashlib
import json
import math
import os
import time
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeVar, cast

from pytest_hetero.errors import BundleError, Location, MatrixError
from pytest_hetero.evidence.document import (
    ITEM_FIELDS,
    ITEM_RESULT_FIELDS,
    RECORD_ENVELOPE,
    RUN_FIELD_TYPES,
    RUN_START_FIELDS,
    ItemDict,
    LeftoverDict,
    RunStart,
    is_record,
    run_section,
)
from pytest_hetero.evidence.journal import JournalKey, JournalRead, Recover, no_recovery, read_lines, seal
from pytest_hetero.evidence.model import SCHEMA, utc_now
from pytest_hetero.evidence.spool import ItemSpool
from pytest_hetero.vocab import LAYERS, STATUSES

if TYPE_CHECKING:
    from typing import NotRequired, Required

    from pytest_hetero.evidence.document import EvidenceDocument, MatrixEntry
    from pytest_hetero.evidence.inputs import RunInputs
    from pytest_hetero.matrix.expand import Plan
    from pytest_hetero.matrix.model import Matrix
    from pytest_hetero.reporting.itemtexts import ItemTexts

JOURNAL = "journal.jsonl"
EVIDENCE = "evidence.json"
SYNC_EVERY_LINES = 64
"""Lines written since the last fsync that trigger the next one."""
SYNC_INTERVAL_S = 0.1
"""Seconds since the last fsync after which the next line written triggers one."""
ITEM_TEXT = 32 << 10
"""Characters of evidence.json's items :func:`write_evidence` encodes per call (about: as many items as the
previous call's text says fit, at least one, at most :data:`ITEM_BATCH`)."""
ITEM_BATCH = 64
"""The most items of evidence.json encoded per call."""


class RunLine(RunStart, total=False):
    """The journal's first line: the run's metadata (:class:`~pytest_hetero.evidence.document.RunStart`, the
    ``run`` section's fields the run knows at its start). Its ``journal`` member (how the key was made,
    :attr:`JournalKey.info`) and ``seq`` are the journal's own, read by :mod:`~pytest_hetero.evidence.journal`
    and left out of the ``run`` section."""

    type: Required[Literal["run"]]


class MatrixLine(TypedDict):
    """A matrix the run planned (:meth:`Recorder.matrix`): what re-planning it needs."""

    type: Literal["matrix"]
    path: str
    prefix: str
    name: str
    sha256: str
    scheduling_per_image: bool
    seq: NotRequired[int]


class ItemLine(TypedDict):
    """One finished item's evidence (:meth:`Recorder.item`)."""

    type: Literal["item"]
    evidence: ItemDict
    seq: NotRequired[int]


class DeselectedLine(TypedDict):
    """An item left out by -k/-m, a profile or a shard, and why."""

    type: Literal["deselected"]
    nodeid: str
    reason: str
    seq: NotRequired[int]


class CollectErrorLine(TypedDict):
    """A collection error (an invalid matrix), with its rendered message."""

    type: Literal["collect_error"]
    nodeid: str
    message: str
    seq: NotRequired[int]


class TargetLine(TypedDict):
    """A backend's target fingerprint (the engine's own shape: ``backend``, ``identity``, versions…)."""

    type: Literal["target"]
    fingerprint: dict[str, Any]
    seq: NotRequired[int]


class CleanupLine(TypedDict):
    """What one backend could not remove at session end."""

    type: Literal["cleanup"]
    backend: str
    leftovers: list[LeftoverDict]
    seq: NotRequired[int]


class EndLine(TypedDict):
    """The last line: the exit status; ``stopped`` (pytest's reason for stopping early) since it was added."""

    type: Literal["end"]
    at: str
    exit_status: int
    interrupted: bool
    stopped: NotRequired[str]
    seq: NotRequired[int]


JournalLine = RunLine | MatrixLine | ItemLine | DeselectedLine | CollectErrorLine | TargetLine | CleanupLine | EndLine
"""One journal line as :func:`read_checked` returns it (its ``type`` tells which; ``mac`` removed): the fields
:data:`ENTRY_FIELDS` and :data:`EVIDENCE_FIELDS` name are checked, the rest are as the gate wrote them."""
_Line = TypeVar("_Line", RunLine, EndLine, MatrixLine, ItemLine)


def target_key(fingerprint: Mapping[str, object]) -> str:
    """What tells one target from another (``backend|identity``): the recorder journals a fingerprint again only
    when it differs from the last one of its key, and assembly keeps the last one of each key."""
    return f"{fingerprint.get('backend')}|{fingerprint.get('identity')}"


class RunCollision(BundleError):
    """The run folder belongs to another run with the same run id (running, finished or crashed)."""


def collision(bundle_dir: Path) -> str:
    """Why ``bundle_dir`` cannot be this run's folder (its journal exists), for the refusal message."""
    journal = bundle_dir / JOURNAL
    run_id = bundle_dir.name
    if journal_locked(bundle_dir):
        return (f"run id {run_id!r} is in use: another session is writing {journal} right now; give each run its "
                "own --hetero-run-id (or leave it out for a fresh one)")
    if (bundle_dir / "attestation.intoto.jsonl").exists():
        return (f"run id {run_id!r} already has a finished bundle at {bundle_dir} (signed or not, with any team "
                "sign-offs: it is kept as it is); give this run another --hetero-run-id, or leave it out for a "
                "fresh one")
    return (f"run id {run_id!r} already has an interrupted run's bundle at {bundle_dir} (no "
            f"attestation.intoto.jsonl); give this run another --hetero-run-id, or finish that one with: hetero "
            f"report --from-journal {bundle_dir}")


def journal_locked(bundle_dir: Path) -> bool:
    """True while a session holds the lock of ``bundle_dir``'s journal (it is still writing it)."""
    from pytest_hetero.safeio import Unreadable, open_local

    try:
        fd = open_local(bundle_dir / JOURNAL)
    except Unreadable:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def lock_journal(bundle_dir: Path) -> int:
    """Take the journal's lock for a rebuild (``hetero report --from-journal``); return the open
    descriptor holding it (close it to release). Raises BundleError when a session still writes it."""
    from pytest_hetero.safeio import Unreadable, open_local, refusal

    path = bundle_dir / JOURNAL
    try:  # the one safe reader: a FIFO, a device or a symlink loop is refused, never waited on
        fd = open_local(path)
    except Unreadable as exc:
        raise refusal(path, "the journal", exc, BundleError,
                      "point at a report folder written by pytest-hetero" if exc.kind == "missing" else "") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise BundleError("the run is still writing this journal", Location(str(path)),
                          "wait for it to finish (its own bundle will be complete), or stop it first") from None
    return fd


class Recorder:
    """Appends journal lines to ``bundle_dir/journal.jsonl`` (see the module docstring).

    ``run`` is the run's metadata, or a function returning it, called once when the first line
    is written (so a run that writes no bundle pays for none of it, e.g. ``git rev-parse``).
    ``key`` authenticates every line; a fresh ephemeral key when not given. It is never written,
    and never leaves this process. ``texts``, when given, is handed every item line once it is written, to render
    the item's CTRF and JUnit texts while the run goes on (the finish joins them: :func:`assemble` with
    ``RunInputs(texts=recorder.texts)``).
    """

    def __init__(self, bundle_dir: Path, run: dict[str, Any] | Callable[[], dict[str, Any]],
                 key: JournalKey | None = None, texts: ItemTexts | None = None) -> None:
        self.bundle_dir = bundle_dir
        self._run = run
        self.key = key or JournalKey.ephemeral()
        self.texts = texts
        """Renders each item line written (see above); None when nothing is rendered during the run."""
        self._fd: int | None = None
        self._seq = 0
        self._pending = 0
        self._last_sync = -math.inf  # the run line is synced at once, whatever the clock reads
        self._matrices: set[str] = set()
        self._targets: dict[str, str] = {}
        self.collect_errors: list[str] = []
        """Node ids of the collection errors journaled by this process."""
        self.syncs = 0
        """fsync calls made (the group commit's count)."""
        self.broken = ""
        """Why the journal could not be written (disk full, folder removed…); empty while it can."""
        self.refused = ""
        """Why the run folder could not be claimed (another run with this run id); empty when claimed."""

    @property
    def started(self) -> bool:
        """True once the run folder is claimed (a run with no matrix items writes no bundle)."""
        return self._fd is not None

    def claim(self) -> str:
        """Create the run folder and its journal exclusively and lock it for this session. Returns
        "" when this run owns the folder, else why not (also kept in :attr:`refused`; nothing is
        written then). Idempotent."""
        if self._fd is not None or self.refused or self.broken:
            return self.refused
        journal = self.bundle_dir / JOURNAL
        try:
            self.bundle_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            self.refused = collision(self.bundle_dir)
            return self.refused
        except OSError as exc:
            self._broke(exc)
            return ""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another session opened the file we just created: it cannot be ours
            os.close(fd)
            self.refused = collision(self.bundle_dir)
            return self.refused
        self._fd = fd
        run = self._run() if callable(self._run) else self._run
        self._append([{"type": "run", **run, "journal": self.key.info}])
        return ""

    def _write(self, entry: JournalLine) -> None:
        self._write_many([entry])

    def write_entries(self, entries: Sequence[JournalLine]) -> None:
        """Append ready-made lines in one write; ``hetero merge`` writes a merged run's journal this way."""
        self._write_many(entries)

    def _write_many(self, entries: Sequence[Mapping[str, object]]) -> None:
        if not entries or self._fd is None and (self.claim() or self.broken):
            return
        self._append(entries)

    def _append(self, entries: Sequence[Mapping[str, object]]) -> None:
        """Seal, write (one ``write`` call, so a line is in the kernel before this returns) and, as
        the group commit says, fsync; on an OSError note why in ``broken`` and write no more."""
        if self.broken or self._fd is None or not entries:
            return
        lines = [seal(e, self._seq + n, self.key) for n, e in enumerate(entries)]
        try:
            view = memoryview(b"".join(lines))
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            self._broke(exc)
            return
        if self.texts is not None:
            for entry, line in zip(entries, lines, strict=True):
                if entry.get("type") == "item":
                    self.texts.add(line)
        self._seq += len(entries)
        self._pending += len(entries)
        if self._pending >= SYNC_EVERY_LINES or time.monotonic() - self._last_sync >= SYNC_INTERVAL_S:
            self.sync()

    def sync(self) -> None:
        """Call ``fsync`` on the journal now if lines were written since the last one."""
        if not self._pending or self._fd is None or self.broken:
            return
        try:
            os.fsync(self._fd)
        except OSError as exc:
            if exc.errno != errno.EINVAL:  # EINVAL: a file system that cannot sync (nothing to lose)
                self._broke(exc)
                return
        self.syncs += 1
        self._pending = 0
        self._last_sync = time.monotonic()

    def _broke(self, exc: OSError) -> None:
        """Note the first reason the journal cannot be written (later ones add nothing)."""
        self.broken = self.broken or f"cannot write {self.bundle_dir / JOURNAL} ({exc.strerror})"

    def matrix(self, path: str, prefix: str, name: str, sha256: str, scheduling_per_image: bool) -> None:
        """Note a matrix once: absolute ``path``, nodeid ``prefix``, file ``sha256``."""
        if prefix in self._matrices:
            return
        self._matrices.add(prefix)
        self._write({"type": "matrix", "path": path, "prefix": prefix, "name": name, "sha256": sha256,
                     "scheduling_per_image": scheduling_per_image})

    def planned(self, prefix: str, matrix: Matrix, plan: Plan) -> None:
        """:meth:`matrix` for a loaded matrix and its expanded plan (the collector's view)."""
        from pytest_hetero.matrix.expand import plan_uses_image

        self.matrix(str(matrix.path), prefix, matrix.name, matrix.sha256, plan_uses_image(plan))

    def item(self, evidence: dict[str, Any]) -> None:
        """Append one finished item's evidence dict."""
        self._write_many([{"type": "item", "evidence": evidence}])  # checked by check_item before it got here

    def deselected(self, nodeid: str, reason: str) -> None:
        """Append that ``nodeid`` was deselected, and why."""
        self._write({"type": "deselected", "nodeid": nodeid, "reason": reason})

    def deselected_many(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Append every ``(nodeid, reason)`` deselection in one write (one group commit, not one per item)."""
        self._write_many([{"type": "deselected", "nodeid": n, "reason": r} for n, r in pairs])

    def collect_error(self, nodeid: str, message: str) -> None:
        """Append a collection error (e.g. an invalid matrix) with its rendered message."""
        self.collect_errors.append(nodeid)
        self._write({"type": "collect_error", "nodeid": nodeid, "message": message})

    def target(self, fingerprint: dict[str, Any]) -> None:
        """Append a backend's target fingerprint (backend, host/cluster, nodes, versions, images)
        when it differs from the last one journaled for the same backend and identity."""
        key = target_key(fingerprint)
        text = json.dumps(fingerprint, sort_keys=True, default=str)
        if self._targets.get(key) == text:
            return
        self._targets[key] = text
        self._write({"type": "target", "fingerprint": fingerprint})

    def cleanup(self, backend: str, leftovers: list[dict[str, Any]]) -> None:
        """Append what ``backend`` could not remove at session end (Leftover dicts; see
        :class:`~pytest_hetero.backends.protocol.Leftover`): evidence's ``cleanup`` and the verdict read it."""
        self._write_many([{"type": "cleanup", "backend": backend, "leftovers": leftovers}])

    def end(self, exit_status: int, interrupted: bool, stopped: str = "") -> None:
        """Append the end line, fsync and close the journal (which releases the run folder's lock);
        ``stopped`` is pytest's reason for stopping early (``-x``/``--maxfail``), empty when the run
        went through."""
        if self._fd is None:
            return
        self._append([{"type": "end", "at": utc_now(), "exit_status": exit_status, "interrupted": interrupted,
                       "stopped": stopped}])
        self.sync()
        self.close()

    def close(self) -> None:
        """Close the journal (releasing the lock) without an end line; idempotent."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.close(fd)
        except OSError as exc:
            self._broke(exc)


def read_journal(bundle_dir: Path, key: JournalKey | None = None,
                 recover: Recover | None = None) -> list[JournalLine]:
    """The usable entries of ``bundle_dir``'s journal (see :func:`read_checked`)."""
    return read_checked(bundle_dir, key, recover)[0]


def read_checked(bundle_dir: Path, key: JournalKey | None = None,
                 recover: Recover | None = None
                 ) -> tuple[list[JournalLine], JournalRead]:
    """Read the journal (:func:`pytest_hetero.evidence.journal.read_lines`: torn, non-UTF-8 and
    forged lines are set aside and named) and check each accepted entry's shape.

    Returns (the entries as :data:`JournalLine` s, what was read). Raises BundleError when the journal is
    missing, holds no run line, or an accepted line is not an entry assembly can use (see ENTRY_FIELDS).
    """
    path = bundle_dir / JOURNAL
    read = read_lines(path, key, recover or no_recovery)
    for number, entry in zip(read.numbers, read.entries, strict=True):
        problem = entry_problem(entry)
        if problem:
            raise BundleError(f"journal line is not a pytest-hetero entry: {problem}", Location(str(path), number),
                              "the journal was edited or corrupted")
    # every entry passed entry_problem: its type is one of ENTRY_FIELDS' and the fields assembly reads hold
    # their JSON types (an item's status and layer the vocabulary's), which is what JournalLine states
    return cast("list[JournalLine]", read.entries), read


ENTRY_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "run": {},
    "matrix": {"path": str, "prefix": str, "name": str, "sha256": str, "scheduling_per_image": bool},
    "item": {"evidence": dict},
    "deselected": {"nodeid": str, "reason": str},
    "collect_error": {"nodeid": str, "message": str},
    "target": {"fingerprint": dict},
    "cleanup": {"backend": str, "leftovers": list},
    "end": {"at": str, "exit_status": int, "interrupted": bool},
}
"""Journal entry type → the fields assembly reads, with their JSON types."""
EVIDENCE_FIELDS: dict[str, type] = dict(ITEM_FIELDS)
"""Fields every journaled item's evidence must carry, with their JSON types: the loader's table
(:data:`pytest_hetero.evidence.document.ITEM_FIELDS`)."""
RESULT_FIELDS: dict[str, tuple[type, ...]] = ITEM_RESULT_FIELDS
"""An item's result fields with the exact JSON types they may hold in a line: the loader's table
(:data:`pytest_hetero.evidence.document.ITEM_RESULT_FIELDS`), so the assembled document's readers can subscript
them and the finish never writes a document its own loader refuses."""


def entry_problem(entry: Any) -> str:
    """Why ``entry`` (one parsed journal line) cannot be assembled; empty string when it can."""
    if type(entry) is dict and entry.get("type") == "item" and _good_item(entry.get("evidence")):
        return ""  # the common case, checked in one expression
    if not isinstance(entry, dict):
        return f"a JSON {type(entry).__name__}, not an object"
    kind = entry.get("type")
    if kind not in ENTRY_FIELDS:
        return f"unknown type {kind!r}"
    checks = [(entry, name, typ, "") for name, typ in ENTRY_FIELDS[kind].items()]
    if kind == "item" and isinstance(entry.get("evidence"), dict):
        checks += [(entry["evidence"], name, typ, "evidence.") for name, typ in EVIDENCE_FIELDS.items()]
    for obj, name, typ, where in checks:
        if name not in obj:
            return f"{kind} entry lacks '{where}{name}'"
        if not isinstance(obj[name], typ) or (typ is int and isinstance(obj[name], bool)):
            return f"{kind} entry field '{where}{name}' is a {type(obj[name]).__name__}"
    if kind == "item":
        evidence = entry["evidence"]
        return _vocabulary_problem(evidence) or _result_problem(evidence) or _records_problem(evidence["records"])
    if kind == "run":  # the loader's run field types (a field the line lacks becomes None when assembled)
        for name, types in RUN_FIELD_TYPES:
            if name in entry and name in RUN_START_FIELDS and type(entry[name]) not in types:
                return f"run entry field '{name}' is a {type(entry[name]).__name__}"
    return ""


def _result_problem(evidence: dict[str, Any]) -> str:
    """Why one of an item's :data:`RESULT_FIELDS` is absent or of another JSON type; empty when none is."""
    for name, types in RESULT_FIELDS.items():
        if name not in evidence:
            return f"item entry lacks 'evidence.{name}'"
        if type(evidence[name]) not in types:
            return f"item entry field 'evidence.{name}' is a {type(evidence[name]).__name__}"
    return ""


def _records_problem(records: list[Any]) -> str:
    """Why one of an item's ``records`` (a list) is not a record ``{kind: string, at: string, data: object}``, as the
    typed loader (:func:`pytest_hetero.evidence.document.check_item`) judges it; empty when each is one."""
    for n, record in enumerate(records):
        if not is_record(record):
            return f"item entry field 'evidence.records[{n}]' is not a record {RECORD_ENVELOPE}"
    return ""


def _vocabulary_problem(evidence: dict[str, Any]) -> str:
    """Why an item's ``status`` or ``layer`` (strings) is not one of :mod:`pytest_hetero.vocab`'s, the words
    the typed loader (:func:`pytest_hetero.evidence.document.as_document`) accepts; empty when both are."""
    if evidence["status"] not in STATUSES:
        return f"item entry field 'evidence.status' is {evidence['status']!r}, not a status ({', '.join(STATUSES)})"
    if evidence["layer"] not in LAYERS:
        return f"item entry field 'evidence.layer' is {evidence['layer']!r}, not a layer ({', '.join(LAYERS)})"
    return ""




def _good_item(ev: Any) -> bool:
    """The fields of EVIDENCE_FIELDS hold their types (bool is no int: none of them is an int), the
    status and layer are the vocabulary's, the RESULT_FIELDS are present with their types, and every record is
    one (:func:`_records_problem`)."""
    return (type(ev) is dict and all(type(ev.get(name)) is typ for name, typ in ITEM_FIELDS)
            and ev["layer"] in LAYERS and ev["status"] in STATUSES
            and all(name in ev and type(ev[name]) in types for name, types in RESULT_FIELDS.items())
            and not _records_problem(ev["records"]))


_ITEM_LINE: dict[str, Any] = {"type": "item"}
"""What assembly keeps in :attr:`JournalRead.entries` for every item line (one shared dict, never changed): the
line's evidence is in the spool, the rest of what assembly reads of it in the :class:`_Spooler`."""


class _Spooler:
    """The journal reader's ``take`` (:func:`pytest_hetero.evidence.journal.read_lines`) for assembly: checks each
    entry as :func:`read_checked` does (the first problem is kept in ``problem``: (line, why)) and moves an item
    line's evidence to an :class:`~pytest_hetero.evidence.spool.ItemSpool`, keeping :data:`_ITEM_LINE` in its
    place. Of each item line it keeps, in the order read (the spool's numbering), what assembly reads: its
    ``seq``, a digest of what it says, its other fields when it has more than ``type``; and the latest time any
    item states (:attr:`latest`). Memory per item line: a few dozen bytes besides the spool's nodeid."""

    def __init__(self) -> None:
        self.spool = ItemSpool()
        self.problem: tuple[int, str] | None = None
        self.taken: list[tuple[str, int]] = []
        """(nodeid, ``seq``; -1 when the line has none) of each item line :meth:`items` took, by nodeid (which line
        each item came from: :meth:`pytest_hetero.reporting.itemtexts.ItemTexts.bind`)."""
        self.latest: str | None = None
        """The latest ``started_at``/``finished_at`` of the items read (ISO 8601 UTC strings compare as times)."""
        self._seqs = array("q")  # each line's seq; _NO_SEQ when it is not an int (then in _odd_seqs)
        self._odd_seqs: dict[int, object] = {}
        self._digests = bytearray()  # 32 bytes per line: sha256 of its text without seq
        self._rests: dict[int, dict[str, Any]] = {}  # the line's fields but evidence and seq, when not just its type

    def __call__(self, entry: dict[str, Any], number: int) -> dict[str, Any]:
        """The entry to keep for ``entry`` (journal line ``number``)."""
        if self.problem is not None:
            return entry  # assembly refuses the journal: nothing read after matters
        problem = entry_problem(entry)
        if problem:
            self.problem = (number, problem)
            return entry
        if entry["type"] != "item":
            return entry
        evidence: ItemDict = entry["evidence"]  # entry_problem checked its fields (EVIDENCE_FIELDS, RESULT_FIELDS)
        spooled, text = self.spool.add(evidence)
        rest = {k: v for k, v in entry.items() if k not in ("evidence", "seq")}
        if rest != _ITEM_LINE:
            self._rests[spooled] = rest
        seq = entry.get("seq")
        if type(seq) is int and seq != _NO_SEQ and -(1 << 63) <= seq < (1 << 63):
            self._seqs.append(seq)
        else:
            self._seqs.append(_NO_SEQ)
            self._odd_seqs[spooled] = seq
        self._digests += hashlib.sha256(json.dumps(rest, sort_keys=True).encode() + b"\0" + text).digest()
        for stated in (evidence["started_at"], evidence["finished_at"]):
            if stated and (self.latest is None or stated > self.latest):
                self.latest = stated
        return _ITEM_LINE

    def _seq(self, n: int) -> object:
        """The ``seq`` of item line ``n`` (as written: None when it had none)."""
        seq = self._seqs[n]
        return self._odd_seqs.get(n) if seq == _NO_SEQ else seq

    def _line(self, n: int) -> dict[str, Any]:
        """The whole item line ``n`` but its ``seq``, read back (comparing two lines whose digests differ)."""
        return {**self._rests.get(n, _ITEM_LINE), "evidence": self.spool[n]}

    def items(self, path: Path) -> Sequence[ItemDict]:
        """The spool holding one item per nodeid, ordered by nodeid; a repeated line that says the same is
        dropped, one that differs is a conflict: BundleError naming both lines' sequence numbers (as
        :func:`_by_key`); the first line of each nodeid is taken (:attr:`taken`). Call once, when every line
        is read."""
        chosen: dict[str, int] = {}
        digests = self._digests
        for n, nodeid in enumerate(self.spool.nodeids()):
            first = chosen.get(nodeid)
            if first is None:
                chosen[nodeid] = n
            elif (digests[32 * first:32 * first + 32] != digests[32 * n:32 * n + 32]
                  and not _same(self._line(first), self._line(n))):
                raise BundleError(f"two item lines for {nodeid} disagree (seq {self._seq(first)} and {self._seq(n)})",
                                  Location(str(path)), "refusing to pick one: a journal line was written by another "
                                  "process, or the run was journaled twice; run the matrix again")
        order = sorted(chosen)
        self.taken = [(nodeid, seq if isinstance(seq := self._seq(chosen[nodeid]), int) else -1) for nodeid in order]
        self.spool.order(chosen[nodeid] for nodeid in order)
        self._seqs, self._odd_seqs, self._digests, self._rests = array("q"), {}, bytearray(), {}
        return self.spool


_NO_SEQ = -(1 << 63)
"""What :class:`_Spooler` stores for an item line whose ``seq`` is not a 64-bit int (its value is kept aside)."""


def assemble(bundle_dir: Path, inputs: RunInputs | None = None, key: JournalKey | None = None,
             recover: Recover | None = None) -> EvidenceDocument:
    """Build the evidence document from the journal; see :func:`_assemble`. The cyclic garbage
    collector is paused meanwhile: a large run allocates many small dicts and nothing cyclic."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _assemble(bundle_dir, inputs, key, recover)
    finally:
        if enabled:
            gc.enable()


def _single(found: list[_Line], kind: str, path: Path) -> _Line | None:
    """The one entry of ``found`` (the run's lines of ``kind``: run, end); two that differ are a conflict:
    BundleError."""
    if any(_same(e, found[0]) is False for e in found[1:]):
        raise BundleError(f"the journal holds {len(found)} different {kind} lines", Location(str(path)),
                          "refusing to pick one: the journal was written to by another process")
    return found[0] if found else None


def _same(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    """Two entries say the same (their sequence numbers aside)."""
    return {k: v for k, v in a.items() if k != "seq"} == {k: v for k, v in b.items() if k != "seq"}


def _by_key(entries: list[_Line], kind: str, key: Callable[[_Line], str], path: Path) -> dict[str, _Line]:
    """``entries`` (the journal's lines of ``kind``) by ``key`` (item nodeid, matrix prefix); a repeat that says
    the same is dropped, one that differs is a conflict: BundleError naming both lines' sequence numbers."""
    out: dict[str, _Line] = {}
    for e in entries:
        k = key(e)
        if k in out and not _same(out[k], e):
            raise BundleError(f"two {kind} lines for {k} disagree (seq {out[k].get('seq')} and {e.get('seq')})",
                              Location(str(path)), "refusing to pick one: a journal line was written by another "
                              "process, or the run was journaled twice; run the matrix again")
        out.setdefault(k, e)
    return out


def _journal_warnings(read: JournalRead) -> list[str]:
    """What reading the journal set aside, one warning each (lost, rejected, missing lines)."""
    out = [f"journal line {n} lost ({why}); its item, if any, is reported not_run" for n, why in read.lost]
    out += [f"journal line {n} rejected: {why}" for n, why in read.rejected]
    if read.missing:
        out.append(f"journal lines numbered seq {', '.join(map(str, read.missing[:20]))} are missing")
    if not read.authenticated:
        out.append(f"journal lines not authenticated: {read.why_not}")
    return out


def _last_time(entries: list[JournalLine], items_latest: str | None = None) -> str | None:
    """The latest time the journal ``entries`` state (the run's start, items' finish times, the end line's
    ``at``) and ``items_latest`` (the latest an item states, for item lines assembly kept as :data:`_ITEM_LINE`):
    the finish time of a run that wrote no ``end`` line (killed), as far as its journal can tell.
    ISO 8601 UTC strings of one format compare as times; None when no entry has one."""
    times: list[str] = [items_latest] if items_latest else []
    for e in entries:
        if e["type"] == "run":
            times += [str(e["started_at"])] if e.get("started_at") else []
        elif e["type"] == "end":
            times.append(e["at"])
        elif e["type"] == "item" and "evidence" in e:
            evidence = e["evidence"]  # its result fields checked (entry_problem): started_at, finished_at strings
            times += [t for t in (evidence["started_at"], evidence["finished_at"]) if t]
    return max(times, default=None)


def _assemble(bundle_dir: Path, inputs: RunInputs | None, key: JournalKey | None,
              recover: Recover | None) -> EvidenceDocument:
    """Build the evidence document from the journal and return it (nothing is written).

    Lines are read and authenticated with ``key`` (the live run's) or the key ``recover`` derives
    (see :func:`read_checked`); what was set aside is the ``journal`` section and ``warnings``, and
    ``inputs.journal`` keeps the read for the bundle's finish. Two lines for one item (or matrix,
    run, end) that disagree are refused (BundleError), never picked.

    ``usage`` is the run-wide usage ledger of the gate's own workloads (:func:`pytest_hetero.evidence.usage.ledger`).

    A journal without an ``end`` line is an interrupted run: planned items never reported
    become ``not_run`` in untested scope. Matrices are planned again as collection planned them,
    from ``inputs`` (matrices the caller holds, others loaded from their files once); a file whose
    sha256 changed since the run is noted in ``warnings``.
    """
    from pytest_hetero.evidence.inputs import RunInputs
    from pytest_hetero.evidence.untested import summarise, untested_scope
    from pytest_hetero.evidence.usage import ledger

    inputs = inputs if inputs is not None else RunInputs()
    path = bundle_dir / JOURNAL
    spooler = _Spooler()
    read = read_lines(path, key, recover or no_recovery, take=spooler)
    if spooler.problem is not None:
        raise BundleError(f"journal line is not a pytest-hetero entry: {spooler.problem[1]}",
                          Location(str(path), spooler.problem[0]), "the journal was edited or corrupted")
    # every entry passed entry_problem (read_checked's check), an item line kept as a stub of its spooled evidence
    entries = cast("list[JournalLine]", read.entries)
    run = _single([e for e in entries if e["type"] == "run"], "run", path)
    end = _single([e for e in entries if e["type"] == "end"], "end", path)
    interrupted = end is None or end["interrupted"]
    item_list = spooler.items(path)
    if inputs.texts is not None:  # the items' texts rendered during the run, for the lines assembly took
        inputs.texts.bind(read, spooler.taken)
    deselected = {e["nodeid"]: e["reason"] for e in entries if e["type"] == "deselected"}
    warnings = _journal_warnings(read)
    plans: list[tuple[Matrix, str, Plan]] = []
    matrices: list[MatrixEntry] = []
    for e in _by_key([e for e in entries if e["type"] == "matrix"], "matrix", lambda e: e["prefix"], path).values():
        matrices.append({"path": e["path"], "prefix": e["prefix"], "name": e["name"], "sha256": e["sha256"]})
        try:
            matrix = inputs.matrix(e)
            plan = inputs.plan(e, e["scheduling_per_image"])
        except MatrixError as exc:
            warnings.append(f"matrix {e['prefix']} can no longer be loaded: {exc.message}")
            continue
        if matrix.sha256 != e["sha256"]:
            warnings.append(f"matrix {e['prefix']} changed after the run (sha256 {matrix.sha256})")
        plans.append((matrix, e["prefix"], plan))
    stopped = "" if end is None else str(end.get("stopped") or "")
    lost = (f"its result may be among the journal lines that could not be read "
            f"(lines {', '.join(str(n) for n, _ in read.lost[:10])})" if read.lost or read.missing else "")
    untested = untested_scope(plans, item_list, deselected, interrupted, stopped, lost)
    latest: dict[str, dict[str, Any]] = {}
    for line in entries:
        if line["type"] == "target":
            fingerprint = line["fingerprint"]
            latest[target_key(fingerprint)] = fingerprint
    fingerprints = list(latest.values())
    leftovers: list[LeftoverDict] = [{"backend": e["backend"], **x} for e in entries if e["type"] == "cleanup"
                                     for x in e["leftovers"]]
    doc: EvidenceDocument = {
        "schema": SCHEMA,
        "run": run_section(run, finished_at=end["at"] if end else _last_time(entries, spooler.latest),
                           finished_at_recovered=end is None, exit_status=end["exit_status"] if end else None,
                           interrupted=interrupted, stopped=stopped),
        "matrices": matrices,
        "target": fingerprints,
        "items": item_list,
        "untested": untested,
        "summary": summarise(item_list, untested, leftovers, end["exit_status"] if end else None,
                             sum(1 for e in entries if e["type"] == "collect_error")),
        "cleanup": {"clean": not leftovers, "leftovers": leftovers},
        # the ledger reads records' data as untrusted JSON (a record whose data does not fit is named incomplete)
        "usage": ledger(item_list, end["at"] if end else None),
        "errors": [{"nodeid": e["nodeid"], "message": e["message"]}
                   for e in entries if e["type"] == "collect_error"],
        "warnings": warnings,
        "journal": read.section(),
    }
    # the finish reads the journal's digests, line numbers and what was set aside (finish._record_journal); the
    # entries, assembled above (a decoded line for each line but an item's: ~1 KB per deselected item), and each
    # line's MAC would be held through it
    inputs.journal = replace(read, entries=[], said={})
    return doc


def write_evidence(bundle_dir: Path, evidence: Mapping[str, object]) -> tuple[str, int]:
    """Write ``evidence`` as ``bundle_dir/evidence.json`` (atomically: a temporary file, then a
    rename), compact with sorted keys, RFC 8259 JSON; return (hex sha256, size in bytes) of what was written.

    The bytes are exactly ``json.dumps(evidence, sort_keys=True, separators=(",", ":"), allow_nan=False)``
    (ASCII), but written section by section and ``items`` a few at a time (:data:`ITEM_TEXT`), each through the
    C encoder (an :class:`~pytest_hetero.evidence.spool.ItemSpool`'s items as the spool holds their text, the
    same): the document's text is never held whole (at 16 KiB of logs per item it was twice the file's size on
    top of the document). Raises OSError when the folder cannot be written, ValueError on a NaN or ±Infinity
    (never written: the temporary file is removed), TypeError on a non-string top-level key."""
    if not all(isinstance(k, str) for k in evidence):
        raise TypeError("evidence.json's top-level keys must be strings")
    encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False).encode
    tmp = bundle_dir / (EVIDENCE + ".tmp")
    digest, size = hashlib.sha256(), 0
    try:
        with open(tmp, "wb") as fh:
            def put_bytes(data: bytes) -> None:
                nonlocal size
                digest.update(data)
                size += len(data)
                fh.write(data)

            def put(text: str) -> None:
                put_bytes(text.encode("ascii"))

            put("{")
            for n, (key, value) in enumerate(sorted(evidence.items())):
                put(("," if n else "") + encode(key) + ":")
                if key == "items" and isinstance(value, ItemSpool):  # each item's text as the spool holds it
                    put("[")
                    for i, line in enumerate(value.lines(check=True)):
                        put_bytes(b"," + line if i else line)
                    put("]")
                elif key == "items" and isinstance(value, list):
                    # several items per call (a list's compact text is its items' joined by "," in [ ]): one
                    # call's fixed cost (a new C encoder, a join, a write) per item was ~0.07 s of 0.4 at 20k
                    # items; as many as the last call's text says fit ITEM_TEXT, so large items go one by one
                    put("[")
                    i, n = 0, 1
                    while i < len(value):
                        text = encode(value[i:i + n])[1:-1]
                        put(("," if i else "") + text)
                        i += n
                        n = max(1, min(ITEM_BATCH, n * ITEM_TEXT // max(1, len(text))))
                    put("]")
                else:
                    put(encode(value))
            put("}")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(bundle_dir / EVIDENCE)
    return digest.hexdigest(), size
