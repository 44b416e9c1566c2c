"""The inputs of one run (matrices, acceptance files, entrypoint code), each read at most once after the
run, and their copies kept in the bundle; and the record of every file the bundle's finish wrote.

Assembly (re-planning untested scope), the ``selection`` section (profiles), the sign-off owners
and the copies under ``inputs/`` all need the run's matrices. The pytest controller already holds
them (collected, or loaded ahead of collection under pytest-xdist), so they are handed in here;
a matrix it does not hold (``hetero report --from-journal``, ``hetero merge``) is loaded from its
file once, on first use.

What a bundle proves includes what ran: besides each matrix (``inputs/<name>.matrix.yaml``), each
model's entrypoint ``code`` folder and each dataset's ``acceptance`` file are digested and copied
(secrets redacted) under ``inputs/<matrix name>/``: ``code/<model>/…`` with a ``code/<model>.sha256sum``
listing (``sha256sum`` format: every file of the folder with its digest, including files too large to
copy; bundle folders are left out), ``acceptance/<dataset>.yaml``. Models sharing one code
folder share its copy: the later ones' entries repeat the first's with ``same_as: <first model>``.
Nothing is copied from a path the journal names unless that path loads as the matrix it claims to be
(same name, a valid matrix); names become paths only after checking they are plain names, so a crafted
journal cannot write outside the bundle nor copy an arbitrary file.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, TypeVar

from pytest_hetero.errors import MatrixError
from pytest_hetero.evidence.records import INPUT_USED, data_of

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import EvidenceDocument, MatrixEntry
    from pytest_hetero.evidence.journal import JournalRead
    from pytest_hetero.evidence.recorder import MatrixLine
    from pytest_hetero.matrix.expand import Plan
    from pytest_hetero.matrix.model import Matrix
    from pytest_hetero.reporting.itemtexts import ItemTexts

INPUTS = "inputs"
"""Bundle folder holding a copy of each matrix file and of the inputs it names (secrets redacted)."""
NAME = re.compile(r"[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?")
"""A matrix, model or dataset name as the schema allows it (``$defs.name``): safe as one path part."""
COPY_FILE_LIMIT = 1 << 20
"""Largest file of a ``code`` folder copied into the bundle (bytes); larger ones are listed, not copied."""
COPY_TOTAL_LIMIT = 16 << 20
"""Bytes of one ``code`` folder copied at most; files beyond are listed with their digest only."""
DIGEST_FILE_LIMIT = 256 << 20
"""Largest file digested (bytes); a larger one is listed with its size and ``-`` for its digest."""
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
"""Folders of a ``code`` folder that are neither digested nor copied (VCS data, caches)."""


class LeftOut(TypedDict):
    """A file of a code folder not copied into the bundle: its path, and why (a too large or skipped file also
    has its ``size`` and ``sha256``, ``-`` when too large to digest)."""

    path: str
    why: str
    size: NotRequired[int]
    sha256: NotRequired[str]


class AcceptanceKept(TypedDict):
    """An acceptance file kept under ``inputs/``: its ``path``, ``sha256`` at the finish and bundle ``copy``;
    ``used_sha256`` and ``changed_during_run`` when items used other bytes."""

    path: str
    sha256: str
    copy: str
    used_sha256: NotRequired[list[str]]
    changed_during_run: NotRequired[bool]


class CodeKept(TypedDict):
    """A code folder kept under ``inputs/``: its ``path``, the ``sha256`` of its ``listing`` (``sha256sum``
    format), how many ``files`` it has, how many were ``copied`` (``bytes_copied``), those ``left_out``;
    ``same_as`` the model whose entry it repeats (a shared folder), ``used_sha256`` and ``changed_during_run``
    when items used other bytes."""

    path: str
    sha256: str
    listing: str
    files: int
    copied: int
    bytes_copied: int
    left_out: list[LeftOut]
    same_as: NotRequired[str]
    used_sha256: NotRequired[list[str]]
    changed_during_run: NotRequired[bool]


class MatrixInputs(TypedDict):
    """What was kept of one matrix's inputs: acceptance files by data set, code folders by model."""

    acceptance: dict[str, AcceptanceKept]
    code: dict[str, CodeKept]


class InputChanged(TypedDict):
    """An input whose bytes at the finish are not those items used: its path, kind, the items, why."""

    path: str
    input: Literal["code", "acceptance"]
    nodeids: list[str]
    reason: str


_Kept = TypeVar("_Kept", AcceptanceKept, CodeKept)


def write_atomic(path: Path, data: bytes) -> tuple[str, int]:
    """Write ``data`` to ``path`` through a temporary file and a rename (a reader, or a run killed
    meanwhile, sees the old file or the new one, never half of one); return (hex sha256, size).
    Raises OSError."""
    tmp = path.with_name(f".hetero-tmp-{path.name}")
    tmp.write_bytes(data)
    tmp.replace(path)
    return hashlib.sha256(data).hexdigest(), len(data)


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _walk(root: Path, bundle_dir: Path | None = None) -> tuple[list[tuple[str, os.DirEntry[str]]], list[str]]:
    """Regular files and symlinks under ``root`` as (POSIX relative path, entry), sorted by path bytes,
    and the folders left out as bundles: links are not followed, SKIPPED_DIRS are left out, and so is
    ``bundle_dir`` and every folder holding a ``journal.jsonl`` (a pytest-hetero bundle: evidence, not code;
    a code folder ``.`` would otherwise copy earlier bundles and the one being written into itself)."""
    found: list[tuple[str, os.DirEntry[str]]] = []
    bundles: list[str] = []
    own = os.path.realpath(bundle_dir) if bundle_dir is not None else None
    stack = [(root, "")]
    while stack:
        folder, rel = stack.pop()
        with os.scandir(folder) as it:
            for entry in it:
                sub = f"{rel}{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    if entry.name in SKIPPED_DIRS:
                        continue
                    if os.path.realpath(entry.path) == own or os.path.isfile(os.path.join(entry.path, "journal.jsonl")):
                        bundles.append(sub)
                    else:
                        stack.append((Path(entry.path), sub + "/"))
                elif entry.is_file(follow_symlinks=False) or entry.is_symlink():
                    found.append((sub, entry))
    return sorted(found, key=lambda f: f[0].encode("utf-8", "surrogateescape")), sorted(bundles)


USED = "inputs.used"
"""Record kind of an input digested when an item used it: ``{"input": "code"|"acceptance", "path", "sha256"}``
(``sha256`` of the code folder's ``sha256sum`` listing, or of the acceptance file; None with ``error`` when
it could not be read). The finish compares the bundle's copies against these."""
_LISTED: dict[str, tuple[tuple[tuple[str, int, int], ...], str]] = {}
"""Code folders digested in this process: path → (stat signature of its files, listing sha256)."""


def code_digest(root: Path) -> str:
    """sha256 (hex) of the ``sha256sum`` listing of the code folder ``root``, exactly as the bundle's
    ``code/<model>.sha256sum`` lists it (every regular file, links left out, SKIPPED_DIRS skipped). Files
    are hashed again only when a file's size or modification time changed since this process last
    listed the folder. Raises OSError when the folder cannot be read."""
    files, _ = _walk(root)
    stats = [(rel, entry.stat(follow_symlinks=False)) for rel, entry in files if not entry.is_symlink()]
    signature = tuple((rel, st.st_size, st.st_mtime_ns) for rel, st in stats)
    known = _LISTED.get(str(root))
    if known is not None and known[0] == signature:
        return known[1]
    lines = [f"{_digest(root / rel) if st.st_size <= DIGEST_FILE_LIMIT else '-'}  {rel}\n" for rel, st in stats]
    digest = hashlib.sha256("".join(lines).encode("utf-8", "surrogateescape")).hexdigest()
    _LISTED[str(root)] = (signature, digest)
    return digest


def used_inputs(evidence: EvidenceDocument) -> dict[str, dict[str, list[str]]]:
    """``{path: {sha256: [nodeid…]}}`` of the inputs items recorded using (:data:`USED` records)."""
    out: dict[str, dict[str, list[str]]] = {}
    for item in evidence["items"]:
        for record in item["records"]:
            if (data := data_of(record, INPUT_USED)) is not None:
                out.setdefault(data["path"], {}).setdefault(str(data["sha256"]), []).append(item["nodeid"])
    return out


def input_digests(evidence: EvidenceDocument) -> dict[tuple[str, str, str], str]:
    """``{(matrix name, "code"|"rules", model or dataset name): sha256}`` of the code folders and acceptance
    files a run used: the digest items recorded when they used them (:data:`USED`), else the one the
    bundle's ``inputs`` section kept (bundles written before items recorded it)."""
    used = {path: sorted(digests) for path, digests in used_inputs(evidence).items()}
    out: dict[tuple[str, str, str], str] = {}
    for matrix, section in (evidence.get("inputs") or {}).items():
        kept: list[tuple[str, str, str, str]] = [
            *(("code", name, e["path"], e["sha256"]) for name, e in section["code"].items()),
            *(("rules", name, e["path"], e["sha256"]) for name, e in section["acceptance"].items())]
        for kind, name, path, sha256 in kept:
            seen = used.get(path)
            out[(matrix, kind, name)] = ",".join(seen) if seen else sha256
    return out


class RunInputs:
    """The run's matrices by journal entry (``{"path", "prefix", "name", "sha256"}``, as in
    evidence.json's ``matrices`` list and the journal's ``matrix`` lines).

    ``held`` maps a nodeid prefix to the (Matrix, Plan) the caller already has; it answers for an
    entry with the same prefix, path and sha256. Anything else is loaded from the entry's path
    once (a file that no longer loads raises the same MatrixError each time it is asked for).
    ``texts`` are the items' CTRF and JUnit texts rendered while the run went on (the recorder's), which
    assembly binds to the lines it read and the writers join; None renders every item at the finish.
    """

    def __init__(self, held: Mapping[str, tuple[Matrix, Plan]] | None = None, texts: ItemTexts | None = None
                 ) -> None:
        self._held = dict(held or {})
        self.texts = texts
        """The items' texts rendered during the run (see above), or None."""
        self._loaded: dict[str, Matrix | MatrixError] = {}
        self.kept: list[tuple[str, str]] = []
        """``[(bundle path, statement digest)]`` of the matrix copies :meth:`keep` wrote."""
        self.written: dict[str, tuple[str, int]] = {}
        """Bundle path → (hex sha256, size) of every file the finish wrote (the manifest lists these)."""
        self.section: dict[str, MatrixInputs] = {}
        """The ``inputs`` section (matrix name → code folders and acceptance files kept), see :meth:`keep`."""
        self.journal: JournalRead | None = None
        """What assembly read from the journal (lines kept, lost, rejected; digests), set by ``assemble``: without its
        ``entries`` and ``said`` (assembled into the evidence document, not held through the finish)."""
        self.problems: list[str] = []
        """Inputs that could not be kept, one line each (also written to stderr)."""
        self._used: dict[str, dict[str, list[str]]] = {}
        self.changed: list[InputChanged] = []
        """Inputs whose bytes at the finish are not those an item used (``{"path", "input", "nodeids",
        "reason"}``), see :meth:`keep`."""
        self.before: set[str] = set()
        """Bundle paths present when the finish began (a file absent from it was added by the finish)."""
        self.held_signals: list[int] = []
        """Signals (SIGINT, SIGTERM) that arrived while the finish held them."""

    def _held_for(self, entry: MatrixEntry | MatrixLine) -> tuple[Matrix, Plan] | None:
        held = self._held.get(entry["prefix"])
        if held is None or held[0].sha256 != entry["sha256"] or str(held[0].path) != str(entry.get("path")):
            return None
        return held

    def matrix(self, entry: MatrixEntry | MatrixLine) -> Matrix:
        """The Matrix of ``entry``. Raises MatrixError when it is not held and its file no longer loads."""
        held = self._held_for(entry)
        if held is not None:
            return held[0]
        path = str(entry["path"])
        if path not in self._loaded:
            from pytest_hetero.matrix.load import load_matrix

            try:
                self._loaded[path] = load_matrix(path)
            except MatrixError as exc:
                self._loaded[path] = exc
        found = self._loaded[path]
        if isinstance(found, MatrixError):
            raise found
        return found

    def plan(self, entry: MatrixEntry | MatrixLine, scheduling_per_image: bool) -> Plan:
        """The plan of ``entry``'s matrix as collection expanded it (``scheduling_per_image`` as the
        backend planned). Raises MatrixError like :meth:`matrix`."""
        from pytest_hetero.matrix.expand import expand, plan_uses_image

        held = self._held_for(entry)
        if held is not None and plan_uses_image(held[1]) == scheduling_per_image:
            return held[1]
        return expand(self.matrix(entry), scheduling_per_image=scheduling_per_image)

    def copy(self, entry: MatrixEntry | MatrixLine) -> tuple[bytes, str]:
        """The bytes kept in ``inputs/`` for ``entry`` and the sha256 the signed statement records for them.

        Only a file that loads as a valid matrix named as the entry says is copied (MatrixError
        otherwise, so a journal naming any other file copies nothing). Secrets in it (URL
        credentials or a bearer token in a description, environment secrets, the matrix's own
        ``spec.redact`` patterns) are redacted. The digest is that of the kept bytes when the file
        is still the one that ran, else the sha256 recorded at run time (so verification shows a
        matrix edited after the run). Raises OSError when the file is unreadable.
        """
        from pytest_hetero.errors import Location
        from pytest_hetero.evidence.model import sha256_text
        from pytest_hetero.matrix.yamlnodes import MAX_BYTES
        from pytest_hetero.redact import Redactor
        from pytest_hetero.safeio import read_local

        matrix = self.matrix(entry)
        if matrix.name != entry["name"] or not NAME.fullmatch(matrix.name):
            raise MatrixError(f"the journal names matrix {entry['name']!r} but {matrix.path} is {matrix.name!r}",
                              Location(str(matrix.path)), "rebuild from the journal the run wrote")
        raw = matrix.raw or read_local(matrix.path, MAX_BYTES)  # the bytes the run loaded, never the file again
        kept = Redactor(extra=matrix.redact).bytes(raw)
        return kept, sha256_text(kept) if sha256_text(raw) == entry["sha256"] else str(entry["sha256"])

    def keep(self, evidence: EvidenceDocument, bundle_dir: Path) -> list[tuple[str, str]]:
        """Copy each matrix of ``evidence`` (secrets redacted) to ``inputs/<name>.matrix.yaml`` under
        ``bundle_dir``, and its models' ``code`` folders and datasets' ``acceptance`` files under
        ``inputs/<name>/`` (see the module docstring), from the bytes the run loaded (``Matrix.raw``,
        ``Matrix.pinned``), not the files as they read now; return and remember in :attr:`kept` ``[(bundle
        path, statement digest)]`` of the matrix copies, fill :attr:`section` and :attr:`written`.
        What cannot be kept (unreadable, not a valid matrix, an unsafe name) is reported on stderr,
        noted in :attr:`problems` and left out. A code folder or acceptance file whose digest at the
        finish is not the one an item recorded when it used it (:data:`USED`) is kept as found, its entry
        says ``used_sha256`` and ``changed_during_run``, and :attr:`changed` names it."""
        from pytest_hetero.safeio import Unreadable

        self.kept = []
        self._used = used_inputs(evidence)
        for m in evidence["matrices"]:
            name = m["name"]
            if not NAME.fullmatch(name):
                self._problem(f"matrix name {name!r} in the journal is not a plain name; nothing copied for it")
                continue
            rel = f"{INPUTS}/{name}.matrix.yaml"
            try:
                data, digest = self.copy(m)
                (bundle_dir / INPUTS).mkdir(exist_ok=True)
                self.written[rel] = write_atomic(bundle_dir / rel, data)
            except OSError as exc:
                self._problem(f"cannot copy matrix {m['path']} into the bundle: {exc.strerror}")
                continue
            except Unreadable as exc:
                self._problem(f"cannot copy matrix {m['path']} into the bundle: {exc.kind}: {exc.detail}")
                continue
            except MatrixError as exc:
                self._problem(f"matrix {m['path']} not copied into the bundle: {exc.message}")
                continue
            self.kept.append((rel, digest))
            self.section[name] = self._keep_referenced(self.matrix(m), bundle_dir / INPUTS / name, rel[:-12])
        return self.kept

    def _problem(self, text: str) -> None:
        self.problems.append(text)
        sys.stderr.write(f"pytest-hetero: {text}\n")

    def _keep_referenced(self, matrix: Matrix, folder: Path, rel: str) -> MatrixInputs:
        """Copy the acceptance files and code folders ``matrix`` names under ``folder`` (bundle path
        ``rel``); return ``{"acceptance": {dataset: {path, sha256, copy}}, "code": {model: {…}}}``."""
        from pytest_hetero.matrix.yamlnodes import MAX_BYTES
        from pytest_hetero.redact import Redactor
        from pytest_hetero.safeio import Unreadable, read_local

        redactor = Redactor(extra=matrix.redact)
        out: MatrixInputs = {"acceptance": {}, "code": {}}
        for dataset in matrix.datasets:
            if dataset.acceptance is None or not NAME.fullmatch(dataset.name):
                continue
            try:  # the bytes the run judged by (pinned when the matrix loaded), else the file as it reads now
                raw = matrix.pinned.get(dataset.acceptance) or read_local(dataset.acceptance, MAX_BYTES)
                dest = f"{rel}/acceptance/{redactor.text(dataset.name)}.yaml"  # a name like a token: redacted
                (folder / "acceptance").mkdir(parents=True, exist_ok=True)
                self.written[dest] = write_atomic(folder.parent.parent / dest, redactor.bytes(raw))
            except OSError as exc:
                self._problem(f"cannot copy acceptance file {dataset.acceptance}: {exc.strerror}")
                continue
            except Unreadable as exc:
                self._problem(f"cannot copy acceptance file {dataset.acceptance}: {exc.kind}: {exc.detail}")
                continue
            kept: AcceptanceKept = {"path": str(dataset.acceptance), "sha256": hashlib.sha256(raw).hexdigest(),
                                    "copy": dest}
            out["acceptance"][dataset.name] = self._compare(kept, "acceptance")
        skip = {str(m.path) for m in matrix.models} | {str(d.path) for d in matrix.datasets}
        bundle_dir = folder.parent.parent
        first: dict[Path, str] = {}  # a code folder shared by many models is digested and copied once
        for model in matrix.models:
            if model.code is None or not NAME.fullmatch(model.name) or model.name in out["code"]:
                continue
            if model.code in first:
                out["code"][model.name] = {**out["code"][first[model.code]], "same_as": first[model.code]}
                continue
            try:
                out["code"][model.name] = self._compare(self._keep_code(
                    model.code, bundle_dir, f"{rel}/code/{redactor.text(model.name)}", skip, redactor), "code")
            except OSError as exc:
                self._problem(f"cannot copy code folder {model.code}: {exc.strerror}")
                continue
            first[model.code] = model.name
        return out

    def _compare(self, kept: _Kept, what: Literal["code", "acceptance"]) -> _Kept:
        """``kept`` (an input's entry, with ``path`` and ``sha256`` at the finish), flagged when items
        recorded using other bytes (see :meth:`keep`)."""
        used = self._used.get(kept["path"], {})
        if used and set(used) != {kept["sha256"]}:
            nodeids = sorted({n for ids in used.values() for n in ids})
            kept = kept.copy()
            kept["used_sha256"] = sorted(used)
            kept["changed_during_run"] = True
            reason = (f"the {what} {'folder' if what == 'code' else 'file'} {kept['path']} changed while the run "
                      f"used it (used as sha256 {', '.join(d[:12] + '…' for d in sorted(used))}; at the finish "
                      f"{kept['sha256'][:12]}…): the bundle's copy may not be what the items ran with")
            self.changed.append({"path": kept["path"], "input": what, "nodeids": nodeids, "reason": reason})
            sys.stderr.write(f"pytest-hetero: {reason}\n")
        return kept

    def _keep_code(self, root: Path, bundle_dir: Path, dest: str, skip: set[str], redactor: Any) -> CodeKept:
        """Digest every file of the code folder ``root`` into ``<dest>.sha256sum`` and copy those that fit
        the limits (and are not the model or dataset files themselves) under ``dest``."""
        lines: list[str] = []
        copied = total = 0
        files, bundles = _walk(root, bundle_dir)
        left_out: list[LeftOut] = [
            {"path": rel + "/", "why": "a pytest-hetero bundle folder (evidence, not code)"} for rel in bundles]
        for rel, entry in files:
            if entry.is_symlink():
                left_out.append({"path": rel, "why": f"symlink to {os.readlink(entry.path)} (not followed)"})
                continue
            size = entry.stat(follow_symlinks=False).st_size
            digest = _digest(Path(entry.path)) if size <= DIGEST_FILE_LIMIT else "-"
            lines.append(f"{digest}  {rel}\n")
            why = ("a model or dataset file of the matrix (digested by the run)" if str(Path(entry.path)) in skip
                   else "too large to digest" if digest == "-"
                   else f"over {COPY_FILE_LIMIT} bytes" if size > COPY_FILE_LIMIT
                   else f"the folder's copy limit of {COPY_TOTAL_LIMIT} bytes was reached"
                   if total + size > COPY_TOTAL_LIMIT else "")
            if why:
                left_out.append({"path": rel, "size": size, "sha256": digest, "why": why})
                continue
            target = bundle_dir / dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            self.written[f"{dest}/{rel}"] = write_atomic(target, redactor.bytes(Path(entry.path).read_bytes()))
            copied += 1
            total += size
        listing = "".join(lines).encode("utf-8", "surrogateescape")
        (bundle_dir / dest).parent.mkdir(parents=True, exist_ok=True)  # when no file was copied (finding 6)
        self.written[f"{dest}.sha256sum"] = write_atomic(bundle_dir / f"{dest}.sha256sum", listing)
        return {"path": str(root), "sha256": hashlib.sha256(listing).hexdigest(), "listing": f"{dest}.sha256sum",
                "files": len(lines), "copied": copied, "bytes_copied": total, "left_out": left_out}
