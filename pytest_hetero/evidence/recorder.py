"""The append-only evidence journal and its assembly into ``evidence.json``.

Only the pytest controller writes here. Each finished item is one JSON line in
``<bundle>/journal.jsonl``, flushed and fsynced at once, so a crash or Ctrl-C keeps every
item that finished. :func:`assemble` rebuilds the evidence document from the journal alone,
which is also how an interrupted run is recovered (``hetero report --from-journal``);
:func:`write_evidence` writes it, once, as ``evidence.json``.

Journal line types: ``run`` (first line: run metadata), ``matrix`` (a matrix seen, with the
data needed to re-plan it), ``item`` (an ItemEvidence dict), ``deselected`` (nodeid, reason),
``collect_error`` (nodeid, message), ``target`` (a backend fingerprint), ``end`` (exit status).
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_hetero.errors import BundleError, Location, MatrixError
from pytest_hetero.evidence.model import SCHEMA, utc_now

if TYPE_CHECKING:
    from pytest_hetero.evidence.inputs import RunInputs
    from pytest_hetero.matrix.expand import Plan
    from pytest_hetero.matrix.model import Matrix

JOURNAL = "journal.jsonl"
EVIDENCE = "evidence.json"


class Recorder:
    """Appends journal lines to ``bundle_dir/journal.jsonl``; creates the folder on first write.

    ``run`` is the run's metadata, or a function returning it, called once when the first line
    is written (so a run that writes no bundle pays for none of it, e.g. ``git rev-parse``).
    """

    def __init__(self, bundle_dir: Path, run: dict[str, Any] | Callable[[], dict[str, Any]]) -> None:
        self.bundle_dir = bundle_dir
        self._run = run
        self._fh: Any = None
        self._matrices: set[str] = set()
        self._targets: dict[str, str] = {}
        self.broken = ""
        """Why the journal could not be written (disk full, folder removed…); empty while it can."""

    @property
    def started(self) -> bool:
        """True once anything was written (a run with no matrix items writes no bundle)."""
        return self._fh is not None

    def _write(self, entry: dict[str, Any]) -> None:
        if self._fh is None:
            try:
                self.bundle_dir.mkdir(parents=True, exist_ok=True)
                self._fh = open(self.bundle_dir / JOURNAL, "a", encoding="utf-8")  # noqa: SIM115
            except OSError as exc:
                self._broke(exc)
                return
            run = self._run() if callable(self._run) else self._run
            self._fh_write({"type": "run", **run})
        self._fh_write(entry)

    def _fh_write(self, entry: dict[str, Any]) -> None:
        """Append, flush and fsync one line; on an OSError note why in ``broken`` and write no more."""
        if self.broken:
            return
        try:
            self._fh.write(json.dumps(entry, sort_keys=True, default=str) + "\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())
        except OSError as exc:
            self._broke(exc)

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
        self._write({"type": "item", "evidence": evidence})

    def deselected(self, nodeid: str, reason: str) -> None:
        """Append that ``nodeid`` was deselected, and why."""
        self._write({"type": "deselected", "nodeid": nodeid, "reason": reason})

    def collect_error(self, nodeid: str, message: str) -> None:
        """Append a collection error (e.g. an invalid matrix) with its rendered message."""
        self._write({"type": "collect_error", "nodeid": nodeid, "message": message})

    def target(self, fingerprint: dict[str, Any]) -> None:
        """Append a backend's target fingerprint (backend, host/cluster, nodes, versions, images)
        when it differs from the last one journaled for the same backend and identity."""
        key = f"{fingerprint.get('backend')}|{fingerprint.get('identity')}"
        text = json.dumps(fingerprint, sort_keys=True, default=str)
        if self._targets.get(key) == text:
            return
        self._targets[key] = text
        self._write({"type": "target", "fingerprint": fingerprint})

    def cleanup(self, backend: str, leftovers: list[dict[str, Any]]) -> None:
        """Append what ``backend`` could not remove at session end (Leftover dicts; see
        :class:`~pytest_hetero.backends.protocol.Leftover`): evidence's ``cleanup`` and the verdict read it."""
        self._write({"type": "cleanup", "backend": backend, "leftovers": leftovers})

    def end(self, exit_status: int, interrupted: bool, stopped: str = "") -> None:
        """Append the end line and close the journal; ``stopped`` is pytest's reason for stopping
        early (``-x``/``--maxfail``), empty when the run went through."""
        if self._fh is None:
            return
        self._fh_write({"type": "end", "at": utc_now(), "exit_status": exit_status,
                        "interrupted": interrupted, "stopped": stopped})
        try:
            self._fh.close()
        except OSError as exc:
            self._broke(exc)


def read_journal(bundle_dir: Path) -> list[dict[str, Any]]:
    """Read every complete line of the journal; a torn last line (crash mid-write) is dropped.

    Raises BundleError when the journal is missing, a middle line is not JSON, or a line is not
    an entry assembly can use (see ENTRY_FIELDS).
    """
    path = bundle_dir / JOURNAL
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise BundleError(f"cannot read journal: {exc.strerror}", Location(str(path)),
                          "point at a report folder written by pytest-hetero") from None
    entries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                break
            raise BundleError("journal line is not JSON", Location(str(path), number),
                              "the journal was edited or corrupted") from None
        problem = entry_problem(entry)
        if problem:
            raise BundleError(f"journal line is not a pytest-hetero entry: {problem}", Location(str(path), number),
                              "the journal was edited or corrupted")
        entries.append(entry)
    return entries


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
EVIDENCE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "nodeid": str, "matrix": str, "layer": str, "keys": dict, "owner": str, "status": str, "records": list,
    "artifacts": list}
"""Fields every journaled item's evidence must carry, with their JSON types."""


def entry_problem(entry: Any) -> str:
    """Why ``entry`` (one parsed journal line) cannot be assembled; empty string when it can."""
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
    return ""


def assemble(bundle_dir: Path, inputs: RunInputs | None = None) -> dict[str, Any]:
    """Build the evidence document from the journal; see :func:`_assemble`. The cyclic garbage
    collector is paused meanwhile: a large run allocates many small dicts and nothing cyclic."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _assemble(bundle_dir, inputs)
    finally:
        if enabled:
            gc.enable()


def _assemble(bundle_dir: Path, inputs: RunInputs | None) -> dict[str, Any]:
    """Build the evidence document from the journal and return it (nothing is written).

    A journal without an ``end`` line is an interrupted run: planned items never reported
    become ``not_run`` in untested scope. Matrices are planned again as collection planned them,
    from ``inputs`` (matrices the caller holds, others loaded from their files once); a file whose
    sha256 changed since the run is noted in ``warnings``.
    """
    from pytest_hetero.evidence.inputs import RunInputs
    from pytest_hetero.evidence.untested import summarise, untested_scope

    inputs = inputs if inputs is not None else RunInputs()
    entries = read_journal(bundle_dir)
    run = next((e for e in entries if e["type"] == "run"), {})
    end = next((e for e in entries if e["type"] == "end"), None)
    interrupted = end is None or bool(end.get("interrupted"))
    items: dict[str, dict[str, Any]] = {}
    for e in entries:
        if e["type"] == "item":
            items[e["evidence"]["nodeid"]] = e["evidence"]
    deselected = {e["nodeid"]: e["reason"] for e in entries if e["type"] == "deselected"}
    warnings: list[str] = []
    plans: list[tuple[Matrix, str, Plan]] = []
    matrices = []
    for e in (e for e in entries if e["type"] == "matrix"):
        matrices.append({k: e[k] for k in ("path", "prefix", "name", "sha256")})
        try:
            matrix = inputs.matrix(e)
            plan = inputs.plan(e, e["scheduling_per_image"])
        except MatrixError as exc:
            warnings.append(f"matrix {e['prefix']} can no longer be loaded: {exc.message}")
            continue
        if matrix.sha256 != e["sha256"]:
            warnings.append(f"matrix {e['prefix']} changed after the run (sha256 {matrix.sha256})")
        plans.append((matrix, e["prefix"], plan))
    item_list = sorted(items.values(), key=lambda i: i["nodeid"])
    stopped = "" if end is None else str(end.get("stopped") or "")
    untested = untested_scope(plans, item_list, deselected, interrupted, stopped)
    latest: dict[str, dict[str, Any]] = {}
    for e in (e for e in entries if e["type"] == "target"):
        latest[f"{e['fingerprint'].get('backend')}|{e['fingerprint'].get('identity')}"] = e["fingerprint"]
    fingerprints = list(latest.values())
    leftovers = [{"backend": e["backend"], **x} for e in entries if e["type"] == "cleanup" for x in e["leftovers"]]
    doc = {
        "schema": SCHEMA,
        "run": {**{k: v for k, v in run.items() if k != "type"},
                "finished_at": end["at"] if end else None,
                "exit_status": end["exit_status"] if end else None, "interrupted": interrupted,
                "stopped": stopped},
        "matrices": matrices,
        "target": fingerprints,
        "items": item_list,
        "untested": untested,
        "summary": summarise(item_list, untested, leftovers),
        "cleanup": {"clean": not leftovers, "leftovers": leftovers},
        "errors": [{"nodeid": e["nodeid"], "message": e["message"]}
                   for e in entries if e["type"] == "collect_error"],
        "warnings": warnings,
    }
    return doc


def write_evidence(bundle_dir: Path, evidence: dict[str, Any]) -> None:
    """Write ``evidence`` as ``bundle_dir/evidence.json`` (atomically: a temporary file, then a
    rename), compact with sorted keys. Raises OSError when the folder cannot be written."""
    tmp = bundle_dir / (EVIDENCE + ".tmp")
    # compact: the C encoder is ~4x faster than indented output on 50,000-item runs
    tmp.write_text(json.dumps(evidence, sort_keys=True, separators=(",", ":")), encoding="utf-8")
    tmp.replace(bundle_dir / EVIDENCE)
