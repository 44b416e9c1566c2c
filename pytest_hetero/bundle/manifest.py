"""The evidence bundle's manifest: every file the gate wrote into a report folder, with its sha256 and size.

``manifest.json`` (schema ``pytest-hetero/manifest/v1``) lists the regular files under the bundle
folder except the signature files (:data:`SIGNATURE_FILES`), which cover the manifest itself.
Entries are sorted by their POSIX relative path compared as UTF-8 bytes, so two builds of the same
folder give byte-identical manifests. The journal is evidence and is listed.

A run's manifest is built from the record of what the gate wrote (:func:`recorded_manifest`): the
journal, every artifact an item's evidence lists with its digest, and every file the finish wrote.
A file found in the folder that nobody recorded (planted by the code under test, say) is never
listed: it is moved out of the bundle and named. :func:`build_manifest` (hash everything found)
remains for folders without such a record.

:func:`check_manifest` compares a manifest with the files on disk and names each problem:
``modified`` (digest or size differs), ``missing`` (listed, not on disk), ``extra`` (on disk,
not listed), ``order`` (entries not in the deterministic order, or duplicated), ``malformed``
(manifest unreadable) and ``unsafe`` (a listed path escaping the bundle, or a symlink).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring
from pathlib import Path
from typing import Annotated, TypedDict

import msgspec

from pytest_hetero.declared import resolve

MANIFEST = "manifest.json"
STATEMENT = "statement.intoto.json"
ATTESTATION = "attestation.intoto.jsonl"
VALIDATION = "validation.intoto.jsonl"
"""Each pool's validation status as a VSA (:mod:`pytest_hetero.bundle.vsa`): it names the statement's digest."""
SIGNATURE_FILES: frozenset[str] = frozenset({MANIFEST, STATEMENT, ATTESTATION, VALIDATION})
"""Top-level files not listed in the manifest: the manifest and the statement/envelope over it."""
MANIFEST_SCHEMA = "pytest-hetero/manifest/v1"
MAX_LISTED_BYTES = 64 << 30
"""The most one listed file may claim to hold."""
_CHUNK = 1 << 20
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX = re.compile(r"[0-9a-f]*")
_MANIFEST_FIELDS = frozenset({"algorithm", "files", "schema"})
_ENTRY_FIELDS = frozenset({"path", "sha256", "size"})


@dataclass(frozen=True)
class Problem:
    """One verification failure: ``path`` (bundle-relative file, or a signature's keyid), ``kind``
    (modified, missing, extra, order, malformed, unsafe, signature, unknown_key, predicate,
    subject, role, unsigned, stale, not_kept, validation) and a human ``detail``."""

    path: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}: {self.kind}: {self.detail}"


def sha256_file(path: Path) -> tuple[str, int]:
    """Return (hex sha256, size in bytes) of ``path``, read in 1 MiB chunks. Raises OSError."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _sort_key(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


def _sorted(paths: Iterable[str]) -> list[str]:
    """``paths`` sorted by their UTF-8 bytes (:func:`_sort_key`); ASCII paths, whose order is their bytes',
    without encoding each (50,000 encodings at 20k items)."""
    listed = list(paths)
    return sorted(listed) if "".join(listed).isascii() else sorted(listed, key=_sort_key)


def bundle_files(bundle_dir: Path, ordered: bool = True) -> tuple[list[str], list[str]]:
    """Walk ``bundle_dir`` with ``os.scandir`` (file types from the directory entries, one ``lstat``
    only where the type is unknown; links never followed): (regular files to list, symlinks/special
    files found), both as sorted POSIX relative paths (the first in walk order when not ``ordered``);
    signature files at the top level are left out of the first list."""
    files, odd = _walk(bundle_dir, sizes=False)
    return _sorted(files) if ordered else list(files), odd


def bundle_sizes(bundle_dir: Path) -> tuple[dict[str, int], list[str]]:
    """:func:`bundle_files` with each regular file's size in bytes (``lstat`` of the directory entry)."""
    return _walk(bundle_dir, sizes=True)


def _walk(bundle_dir: Path, sizes: bool) -> tuple[dict[str, int], list[str]]:
    files: dict[str, int] = {}
    odd: list[str] = []
    stack: list[tuple[str, str]] = [(os.fspath(bundle_dir), "")]
    while stack:
        folder, prefix = stack.pop()
        with os.scandir(folder) as it:
            for entry in it:
                rel = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, rel + "/"))
                elif entry.is_file(follow_symlinks=False):
                    if rel not in SIGNATURE_FILES:
                        files[rel] = entry.stat(follow_symlinks=False).st_size if sizes else 0
                else:  # a symlink (to a file or folder) or a FIFO, socket, device
                    odd.append(rel)
    odd.sort(key=_sort_key)
    return files, odd


class ManifestFile(TypedDict):
    """One file of the bundle as ``manifest.json`` lists it: bundle-relative POSIX path, hex sha256, bytes."""

    path: str
    sha256: str
    size: int


class Manifest(TypedDict):
    """``manifest.json``: its schema, the digest algorithm (``sha256``) and every file listed."""

    schema: str
    algorithm: str
    files: list[ManifestFile]


class _ManifestTop(msgspec.Struct, frozen=True, kw_only=True):
    """``manifest.json``'s top level as written (untrusted JSON; None when absent), checked before any entry."""

    schema: object = None
    algorithm: object = None
    files: object = None


class _ListedFile(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of ``manifest.json`` (:class:`ManifestFile`) as :func:`manifest_entries` holds it: a string path,
    a 64-character sha256 (that it is lower-case hex is checked at once for all entries) and an integer size in
    0..:data:`MAX_LISTED_BYTES` (a boolean is not one); other fields are ignored."""

    path: str
    sha256: Annotated[str, msgspec.Meta(min_length=64, max_length=64)]
    size: Annotated[int, msgspec.Meta(ge=0, le=MAX_LISTED_BYTES)]


_ENTRY_AT = re.compile(r"at `\$\[(\d+)\]")
"""Where a msgspec error in the list of entries names the entry (``… - at `$[12].size```)."""


def manifest_entries(manifest: object) -> list[tuple[str, str, int]]:
    """[(path, sha256, size)] of a parsed ``manifest.json`` (untrusted JSON): the one reader of its shape, for
    :func:`~pytest_hetero.bundle.verify.verify_bundle` (after the signed digest matched) and :func:`check_manifest`.
    The shape is :class:`Manifest`: schema :data:`MANIFEST_SCHEMA`, algorithm ``sha256``, each entry a string path,
    a 64-digit lower-case hex sha256 and an integer size in 0..:data:`MAX_LISTED_BYTES`. Raises
    :class:`~pytest_hetero.safeio.Unreadable` (``malformed``) naming the first entry that is not."""
    from pytest_hetero.safeio import Unreadable

    # a JSON object always fits the top level (each field any JSON value): converting it cannot fail
    top = msgspec.convert(manifest, _ManifestTop) if isinstance(manifest, dict) else None
    if top is None or top.schema != MANIFEST_SCHEMA or top.algorithm != "sha256" or not isinstance(top.files, list):
        raise Unreadable("malformed", f"not a {MANIFEST_SCHEMA} manifest with sha256 digests")
    try:  # one pass of type checks, then every digest at once: 50,000 entries cost milliseconds
        entries = [(e.path, e.sha256, e.size) for e in msgspec.convert(top.files, list[_ListedFile])]
    except msgspec.ValidationError as exc:
        at = _ENTRY_AT.search(str(exc))
        raise Unreadable("malformed", f"entry {at.group(1) if at else 0} is not {{path, sha256 hex, size}}") from None
    if not _HEX.fullmatch("".join(h for _, h, _ in entries)):
        n = next((i for i, (_, h, _) in enumerate(entries) if not _HEX64.fullmatch(h)), 0)
        raise Unreadable("malformed", f"entry {n} is not {{path, sha256 hex, size}}")
    return entries


def build_manifest(bundle_dir: Path) -> Manifest:
    """Hash every file of the bundle; return ``{"schema", "algorithm": "sha256", "files":
    [{"path", "sha256", "size"}]}`` in deterministic order. Symlinks are refused (BundleError),
    since a link could point outside the signed folder."""
    from pytest_hetero.errors import BundleError, Location

    files, odd = bundle_files(bundle_dir)
    if odd:
        raise BundleError(f"bundle contains {len(odd)} symlink(s) or special file(s): {', '.join(odd[:5])}",
                          Location(str(bundle_dir)), "capture artifacts as regular files")
    entries: list[ManifestFile] = []
    for rel in files:
        digest, size = sha256_file(bundle_dir / rel)
        entries.append({"path": rel, "sha256": digest, "size": size})
    return {"schema": MANIFEST_SCHEMA, "algorithm": "sha256", "files": entries}


def recorded_manifest(bundle_dir: Path, recorded: dict[str, tuple[str, int]], before: set[str]
                      ) -> tuple[Manifest, list[Problem]]:
    """The manifest of what the gate wrote, and what was set aside: (manifest, problems).

    ``recorded`` maps a bundle path to the (sha256, size) the gate wrote there; such a file is listed
    with that digest, unread, when its size still matches (a change of the same size is left for
    verification to name ``modified``). A file found that is not recorded is listed (hashed now) only
    when it is absent from ``before``, the folder's files when the finish began, i.e. a file a writer
    or ``pytest_hetero_bundle_finished`` plugin added. Problems, none of them listed: ``unrecorded``
    (a file nobody recorded writing; also every symlink and special file, which the gate never writes),
    ``modified`` (a recorded file whose size changed), ``missing`` (recorded, gone).
    """
    found, odd = bundle_sizes(bundle_dir)
    entries: list[ManifestFile] = []
    problems = [Problem(rel, "unrecorded", "a symlink or special file in the bundle folder") for rel in odd]
    for rel in _sorted(found):
        if rel in recorded:
            digest, size = recorded[rel]
            actual = found[rel]
            if actual != size:
                problems.append(Problem(rel, "modified", f"{actual} bytes, but the gate wrote {size}"))
                continue
            entries.append({"path": rel, "sha256": digest, "size": size})
        elif rel not in before:
            digest, size = sha256_file(bundle_dir / rel)
            entries.append({"path": rel, "sha256": digest, "size": size})
        else:
            problems.append(Problem(rel, "unrecorded", "in the bundle folder, but the gate did not write it"))
    problems += [Problem(rel, "missing", "the gate wrote it, but it is gone")
                 for rel in sorted(set(recorded) - set(found), key=_sort_key) if rel not in SIGNATURE_FILES]
    return {"schema": MANIFEST_SCHEMA, "algorithm": "sha256", "files": entries}, problems


def write_manifest_data(bundle_dir: Path, manifest: Manifest) -> str:
    """Write ``manifest`` as ``manifest.json`` (atomically): :func:`manifest_bytes`, a piece at a time (its text is
    never held whole: ~170 bytes per file listed); return its hex sha256. Raises OSError when the folder cannot be
    written (the temporary file is removed)."""
    digest = hashlib.sha256()
    tmp = bundle_dir / (MANIFEST + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            for piece in _manifest_pieces(manifest):
                digest.update(piece)
                fh.write(piece)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(bundle_dir / MANIFEST)
    return digest.hexdigest()


def manifest_bytes(manifest: Manifest) -> bytes:
    """Canonical serialisation: ``json.dumps(manifest, sort_keys=True, indent=1, ensure_ascii=False)``, UTF-8,
    trailing newline. A manifest of the usual shape is written by hand to exactly those bytes (the
    standard library indents in pure Python: half a second at 7,500 entries); any other shape goes
    through ``json.dumps``."""
    return b"".join(_manifest_pieces(manifest))


_ENTRY_BATCH = 256
"""Manifest entries written per piece of :func:`_manifest_pieces`."""


def _manifest_pieces(manifest: Manifest) -> Iterator[bytes]:
    """:func:`manifest_bytes` as consecutive pieces: the usual shape :data:`_ENTRY_BATCH` entries per piece (the
    batches joined as the entries are, so the bytes are the same), any other shape in one piece."""
    if set(manifest) != _MANIFEST_FIELDS or not _usual_entries(manifest["files"]):
        yield (json.dumps(manifest, sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False)
               + "\n").encode("utf-8")
        return
    entries = manifest["files"]
    dumps = encode_basestring  # what JSONEncoder(ensure_ascii=False).encode does with a str, without its checks
    between = "\n  },\n  {\n"
    yield f'{{\n "algorithm": {dumps(manifest["algorithm"])},\n "files": [\n  {{\n'.encode()
    for n in range(0, len(entries), _ENTRY_BATCH):
        body = between.join(f'   "path": {dumps(e["path"])},\n   "sha256": {dumps(e["sha256"])},\n   "size": '
                            f'{e["size"]}' for e in entries[n:n + _ENTRY_BATCH])
        yield (between + body if n else body).encode()
    yield f'\n  }}\n ],\n "schema": {dumps(manifest["schema"])}\n}}\n'.encode()


def _usual_entries(entries: object) -> bool:
    """Whether ``entries`` are what :func:`manifest_bytes` writes by hand: a non-empty list whose every entry has
    exactly the :class:`ManifestFile` fields, ``path`` and ``sha256`` strings and ``size`` an integer."""
    return isinstance(entries, list) and bool(entries) and all(
        isinstance(e, dict) and e.keys() == _ENTRY_FIELDS and isinstance(e["path"], str)
        and isinstance(e["sha256"], str) and type(e["size"]) is int for e in entries)


def write_manifest(bundle_dir: Path) -> tuple[Manifest, str]:
    """Build and write ``manifest.json``; return (manifest, its hex sha256)."""
    manifest = build_manifest(bundle_dir)
    data = manifest_bytes(manifest)
    tmp = bundle_dir / (MANIFEST + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(bundle_dir / MANIFEST)
    return manifest, hashlib.sha256(data).hexdigest()


def _safe(rel: str) -> bool:
    """A bundle-relative POSIX path that stays inside the bundle (not absolute, no ``..`` part, no backslash)."""
    return bool(rel) and not rel.startswith("/") and "\\" not in rel and ".." not in rel.split("/")


def check_manifest(bundle_dir: Path) -> list[Problem]:
    """Compare ``manifest.json`` with the files on disk; return every problem (empty = intact).

    Checks, in order: the manifest parses and has the expected shape (:func:`manifest_entries`, which names
    what is malformed); entries are in the deterministic order without duplicates; each listed file exists
    with the listed size and sha256; no unlisted file exists (signature files excepted); no symlink is present.
    """
    from pytest_hetero.safeio import Unreadable

    path = bundle_dir / MANIFEST
    try:
        listed = manifest_entries(json.loads(path.read_bytes()))
    except FileNotFoundError:
        return [Problem(MANIFEST, "missing", "the bundle has no manifest")]
    except Unreadable as exc:
        return [Problem(MANIFEST, exc.kind, exc.detail)]
    except (OSError, ValueError) as exc:
        return [Problem(MANIFEST, "malformed", f"cannot read the manifest ({type(exc).__name__})")]
    paths = [p for p, _, _ in listed]
    problems = _order_problems(paths)
    problems += [p for entry in listed if (p := _entry_problem(bundle_dir, *entry)) is not None]
    on_disk, odd = bundle_files(bundle_dir)
    listed_set = set(paths)
    problems += [Problem(rel, "extra", "file in the bundle is not listed in the manifest")
                 for rel in on_disk if rel not in listed_set]
    problems += [Problem(rel, "unsafe", "symlink or special file in the bundle") for rel in odd]
    return problems


def _order_problems(paths: list[str]) -> list[Problem]:
    """The first entry out of the deterministic order (or a duplicate), as a Problem."""
    for i in range(1, len(paths)):
        if _sort_key(paths[i]) <= _sort_key(paths[i - 1]):
            what = "duplicate entry" if paths[i] == paths[i - 1] else "entries out of order"
            return [Problem(MANIFEST, "order", f"{what}: {paths[i]!r} listed after {paths[i - 1]!r} "
                                               f"(entry {i}); the manifest was re-ordered or edited")]
    return []


def _entry_problem(bundle_dir: Path, rel: str, digest: str, size: int) -> Problem | None:
    """What is wrong with one listed file (unsafe path, missing, modified), or None."""
    if not _safe(rel) or rel in SIGNATURE_FILES:
        return Problem(rel, "unsafe", "listed path escapes the bundle or names a signature file")
    full = bundle_dir / rel
    if full.is_symlink():
        return None  # reported once, as a symlink, by the walk of the bundle
    if not full.is_file():
        return Problem(rel, "missing", "listed in the manifest but not in the bundle")
    actual, actual_size = sha256_file(full)
    if actual != digest or actual_size != size:
        return Problem(rel, "modified", f"sha256 {actual[:16]}… ({actual_size} bytes) but the "
                                        f"manifest says {digest[:16]}… ({size} bytes)")
    return None


resolve(__name__)
