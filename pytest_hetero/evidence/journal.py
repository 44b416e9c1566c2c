"""The journal's line format: numbered, authenticated lines, and reading them back from a damaged file.

Each line of ``journal.jsonl`` is one JSON object with a sequence number ``seq`` (0, 1, 2, … in the
order the gate wrote them) and, last, ``mac``: HMAC-SHA256 (RFC 2104), keyed with the run's journal
key, over the line's bytes without the ``mac`` member (the object up to its closing brace). The body
is ``json.dumps(entry, sort_keys=True, separators=(",", ":"), allow_nan=False)`` (a NaN or ±Infinity
becomes null: :func:`finite`); the ``mac``
member is spliced in before the final ``}``, so the line stays one JSON object that any reader
parses, and the authenticated bytes are recovered exactly by cutting the fixed-length suffix.

The key (:class:`JournalKey`) exists only in the controller's memory: pytest-xdist workers never
receive it (their reports reach the controller as plain data, and only the controller writes the
journal). Where it comes from is written in the run line's ``journal`` member:

* ``{"mac": "hmac-sha256", "key": "derived", "keyid": K, "nonce": N}`` — the run is signed: the key is
  the sha256 of the Ed25519 signature (deterministic, RFC 8032) by the run key ``K`` over
  :data:`KEY_CONTEXT`, the run id and the random nonce ``N``. Only the holder of the private key can
  compute it, so ``hetero report --from-journal DIR --sign-key KEY`` re-derives it after a crash and
  authenticates every line, exactly as the live run would have.
* ``{"mac": "hmac-sha256", "key": "ephemeral"}`` — an unsigned run: 32 random bytes that die with the
  process. The live run authenticates its own journal at assembly; a recovery after a crash cannot,
  and says so (``journal.authenticated`` false with the reason) — it still refuses conflicting
  lines and names torn and missing ones.

:func:`read_lines` reads a journal whatever happened to it: lines that are not UTF-8 or not JSON (a
torn write, a crash mid-line, an edited file) are *lost* and named; lines whose MAC does not verify
are *rejected* and named; gaps in ``seq`` name lines that vanished. What it returns is exactly the
lines the gate wrote, in order, and the sha256 of those bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_hetero.errors import BundleError, Location

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import JournalSection, TornLine

KEY_CONTEXT = b"pytest-hetero/journal-key/v1\x00"
"""Domain separation for the signature a journal key is derived from (never a message signed otherwise)."""
MAC_SCHEME = "hmac-sha256"
_MAC_TAIL = re.compile(rb',"mac":"([0-9a-f]{64})"\}')
_TAIL = 74
"""Length of ``,"mac":"<64 hex>"}``, the end of every line the gate writes (newline aside)."""
MAX_JOURNAL_BYTES = 16 << 30
"""The most a journal may hold (16 GiB; a 100,000-item run writes well under 1 GiB): a larger or sparse file
is refused before a byte is read."""
MAX_LINE_BYTES = 256 << 20
"""The longest journal line read whole (256 MiB); a longer one is lost, never held in memory."""
_MAYBE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class JournalKey:
    """The run's journal key (32 bytes) and how it was made (``info``, written in the run line)."""

    def __init__(self, secret: bytes, info: dict[str, str]) -> None:
        self._secret = secret
        self.info = dict(info)

    def __repr__(self) -> str:  # the secret never reaches a log or a traceback
        return f"JournalKey({self.info})"

    @classmethod
    def ephemeral(cls) -> JournalKey:
        """A random key that lives only in this process (unsigned runs)."""
        return cls(secrets.token_bytes(32), {"mac": MAC_SCHEME, "key": "ephemeral"})

    @classmethod
    def derived(cls, sign: Callable[[bytes], bytes], keyid: str, run_id: str, nonce: str | None = None) -> JournalKey:
        """The key of a signed run: sha256 of ``sign(KEY_CONTEXT + run id + NUL + nonce)``.

        ``sign`` is the run key's Ed25519 signing function (deterministic: the same key and message
        give the same signature, so a recovery holding the key derives the same journal key);
        ``keyid`` names that key; ``nonce`` is fresh hex unless given (recovery passes the run line's).
        """
        nonce = nonce or secrets.token_hex(16)
        secret = hashlib.sha256(sign(KEY_CONTEXT + run_id.encode() + b"\x00" + nonce.encode())).digest()
        return cls(secret, {"mac": MAC_SCHEME, "key": "derived", "keyid": keyid, "nonce": nonce})

    def mac(self, body: bytes) -> str:
        """Hex HMAC-SHA256 of ``body`` under this key."""
        return hmac.digest(self._secret, body, "sha256").hex()


def without_surrogates(obj: Any) -> Any:
    """``obj`` (parsed JSON) with every lone UTF-16 surrogate in its strings replaced by U+FFFD.

    ``json.loads`` turns an escaped lone surrogate (``"\\ud800"``) into a str that cannot be encoded
    as UTF-8, so one in a model's outputs would make every rendering fail; valid escaped pairs are
    already joined into one character by the parser, so any surrogate left is lone."""
    if isinstance(obj, str):
        return _SURROGATE.sub("\ufffd", obj)
    if isinstance(obj, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [without_surrogates(v) for v in obj]
    return obj


def finite(obj: Any) -> Any:
    """``obj`` (JSON-like: dicts, lists, scalars) with every NaN or ±Infinity float replaced by None.

    RFC 8259 has no token for them (Python's ``json`` writes bare ``NaN``/``Infinity``, which ``JSON.parse``,
    ``jq`` and Go reject), so the gate never writes one: a non-finite number in a record becomes null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def _dumps(entry: Mapping[str, object]) -> str:
    try:
        text = json.dumps(entry, sort_keys=True, separators=(",", ":"), default=str, allow_nan=False)
    except ValueError:  # rare: a NaN or ±Infinity somewhere; only then walk the entry
        entry = finite(entry)
        text = json.dumps(entry, sort_keys=True, separators=(",", ":"), default=str, allow_nan=False)
    if _MAYBE_SURROGATE.search(text):  # rare: only then walk the entry
        text = json.dumps(without_surrogates(entry), sort_keys=True, separators=(",", ":"), default=str,
                          allow_nan=False)
    return text


def seal(entry: Mapping[str, object], seq: int, key: JournalKey) -> bytes:
    """One journal line (UTF-8 bytes with the newline) for ``entry``, numbered ``seq``, authenticated."""
    body = _dumps({**entry, "seq": seq}).encode("ascii")
    return body[:-1] + b',"mac":"' + key.mac(body).encode("ascii") + b'"}\n'


@dataclass
class JournalRead:
    """What :func:`read_lines` found.

    ``entries``: the accepted entries, in file order (``seq`` kept, ``mac`` removed); ``lost``:
    ``[(file line, why)]`` lines that could not be read (torn, not UTF-8, not JSON); ``rejected``:
    ``[(file line, why)]`` lines whose MAC did not verify (not written by the gate) or that repeat
    an accepted line; ``missing``: ``seq`` numbers absent between accepted ones;
    ``authenticated``: whether MACs were checked (a key was available), with ``why_not``; ``key``:
    the run line's ``journal`` member; ``sha256``/``size``: digest and byte count of the accepted
    lines as written (equal to the file's when nothing was lost or rejected); ``file_sha256`` and
    ``file_size``: the whole file's, as read.
    """

    entries: list[dict[str, Any]] = field(default_factory=list)
    lost: list[tuple[int, str]] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    authenticated: bool = False
    why_not: str = ""
    key: dict[str, Any] = field(default_factory=dict)
    origin: KeyOrigin = field(default_factory=lambda: KeyOrigin("", False))
    """How the key was made, as the run line says (:meth:`KeyOrigin.of`; none stated before it is read)."""
    sha256: str = ""
    size: int = 0
    file_sha256: str = ""
    file_size: int = 0
    numbers: list[int] = field(default_factory=list)
    """File line number (1-based) of each accepted entry."""
    said: dict[int, bytes | str] = field(default_factory=dict)
    """``seq`` → what its accepted line says: the line's MAC (hex) when it was authenticated, else the sha256 of
    its bytes (see :func:`_read`)."""
    torn: TornLine | None = None
    """The journal's last line when it is torn (no newline, not JSON: the run was killed or the disk filled
    mid-write): ``{"line", "bytes", "nodeid", "paths"}`` — the item and artifact paths its surviving bytes
    name (None, [] when cut before them). A crash, not tampering: see :func:`torn_tail`."""

    def mac_of(self, seq: int) -> str | None:
        """The verified MAC (hex) of the accepted line numbered ``seq``; None when lines were not authenticated
        or no accepted line has that number."""
        said = self.said.get(seq) if self.authenticated else None
        return said if isinstance(said, str) else None

    def section(self) -> JournalSection:
        """The ``journal`` section of evidence.json (and of the signed predicate)."""
        section: JournalSection = {
            "lines": len(self.numbers), "sha256": self.sha256, "authenticated": self.authenticated,
            "unauthenticated_reason": self.why_not or None, "key": self.origin.key, "keyid": self.origin.keyid,
            "lost": [{"line": n, "why": why} for n, why in self.lost],
            "rejected": [{"line": n, "why": why} for n, why in self.rejected],
            "missing_seq": self.missing}
        if self.torn:
            section["torn"] = self.torn
        return section


def parse_line(raw: bytes) -> tuple[dict[str, Any] | None, bytes, str, str]:
    """(entry without ``mac``, authenticated body, MAC hex, why unreadable) of one raw journal line, as
    :func:`read_lines` parses it (the MAC is not checked here): entry None with the reason when the line is not
    UTF-8 JSON or not an object; body and MAC empty when the line has no ``mac`` tail."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, b"", "", f"not UTF-8 (byte {exc.start})"
    try:
        entry = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None, b"", "", "torn or not JSON"
    except ValueError:  # int() of more digits than sys.get_int_max_str_digits(): no line the gate writes
        return None, b"", "", "not an entry: holds a number of more than 4300 digits"
    # one scan for an escape at all (most lines have none), then the two for a surrogate's
    if b"\\u" in raw and (b"\\ud" in raw or b"\\uD" in raw) and _MAYBE_SURROGATE.search(text):
        entry = without_surrogates(entry)
    if not isinstance(entry, dict):
        return None, b"", "", f"not an entry: a JSON {type(entry).__name__}, not an object"
    line = raw.rstrip(b"\r\n")
    found = _MAC_TAIL.fullmatch(line, len(line) - _TAIL) if len(line) > _TAIL else None
    if found is None:
        return entry, b"", "", ""
    entry.pop("mac", None)
    return entry, line[:-_TAIL] + b"}", found.group(1).decode("ascii"), ""


@dataclass(frozen=True)
class KeyOrigin:
    """How a journal's key was made, as its run line says (parsed once by :meth:`of`): the run's ``run_id``,
    whether the line has a ``journal`` member at all (``stated``: journals written before authentication have
    none), and that member's ``key`` (``derived`` or ``ephemeral``), ``keyid`` and ``nonce`` (each None when
    absent or not a string)."""

    run_id: str
    stated: bool
    key: str | None = None
    keyid: str | None = None
    nonce: str | None = None

    @classmethod
    def of(cls, first: dict[str, Any]) -> KeyOrigin:
        """The key origin the run line ``first`` (an untrusted parsed line) states."""
        info = first.get("journal")
        run_id = str(first.get("id", ""))
        if not isinstance(info, dict):
            return cls(run_id, False)
        key, keyid, nonce = info.get("key"), info.get("keyid"), info.get("nonce")
        return cls(run_id, True, key if isinstance(key, str) else None, keyid if isinstance(keyid, str) else None,
                   nonce if isinstance(nonce, str) else None)


Recover = Callable[[KeyOrigin], JournalKey | None]
"""Derives a crashed run's journal key from the origin its run line states (None: it cannot)."""


def no_recovery(origin: KeyOrigin) -> JournalKey | None:
    """The :data:`Recover` of a reader holding no run key: it derives nothing."""
    return None


def key_for(origin: KeyOrigin, key: JournalKey | None, recover: Recover) -> tuple[JournalKey | None, str]:
    """The key to check a journal whose run line states ``origin``: ``key`` (the live run's), else what
    ``recover`` derives from it; (None, why) when there is none."""
    if key is not None:
        return key, ""
    if not origin.stated:
        return None, "the journal carries no MACs (written before journal authentication)"
    if origin.key == "ephemeral":
        return None, ("the run was unsigned: its journal key lived only in the crashed process, so these lines "
                      "cannot be told from lines another process appended")
    derived = recover(origin)
    if derived is None:
        return None, (f"the journal key is derived from run key {str(origin.keyid)[:16]}…; pass that "
                      "private key (--sign-key) to authenticate the lines")
    return derived, ""


Take = Callable[[dict[str, Any], int], dict[str, Any]]
"""What a reader does with each accepted entry (and its file line number) before keeping it: returns the entry
to keep in :attr:`JournalRead.entries` (assembly keeps a stub of an item line, its evidence on disk)."""


def read_lines(path: Path, key: JournalKey | None = None, recover: Recover = no_recovery,
               take: Take | None = None) -> JournalRead:
    """Read the journal at ``path`` (see the module docstring).

    ``key`` is the live run's key; without it, ``recover`` may derive one from the run line's
    :class:`KeyOrigin` (``hetero report --from-journal --sign-key``). Raises BundleError when the file cannot be
    read, its first
    readable line is not the run line, or, unauthenticated, two different lines claim one ``seq``
    (neither can be picked). With ``take``, each accepted entry is kept as ``take(entry, file line number)``
    returns it (its exceptions propagate).
    """
    from pytest_hetero.safeio import Unreadable, open_local, refusal

    try:  # the one safe reader: a FIFO, a device, a symlink loop or a sparse giant is refused unread
        fd = open_local(path)
        size = os.fstat(fd).st_size
        if size > MAX_JOURNAL_BYTES:
            os.close(fd)
            raise Unreadable("oversize", f"{size} bytes, more than the {MAX_JOURNAL_BYTES} a journal may hold")
    except Unreadable as exc:
        raise refusal(path, "the journal", exc, BundleError,
                      "point at a report folder written by pytest-hetero" if exc.kind == "missing" else "") from None
    fh = os.fdopen(fd, "rb")
    try:
        out = _read(fh, key, recover, path, take)
    finally:
        fh.close()
    if not out.entries:
        raise BundleError("the journal holds no readable run line", Location(str(path)),
                          "the run wrote nothing recoverable; run the matrix again")
    return out


def _read(fh: Any, key: JournalKey | None, recover: Recover, path: Path, take: Take | None = None) -> JournalRead:
    """Read the open journal ``fh`` line by line (never the whole file at once).

    The digest of the accepted lines is the whole file's until a line is not accepted (then it is forked
    from the file's digest as it stood before that line), so a whole journal is hashed once, not twice."""
    out = JournalRead()
    check: list[JournalKey | None] = [None]  # the key, once the run line is read (see _accepted)
    seen: dict[int, bytes | str] = {}  # seq -> what the line says: its verified MAC, else the sha256 of its bytes
    whole = hashlib.sha256()
    digest: Any = None  # the accepted lines' digest, once it differs from the whole file's
    last: tuple[int, bytes] | None = None
    file_size = size = 0
    for number, raw in enumerate(_bounded_lines(fh), 1):
        last = (number, raw)
        file_size += len(raw)
        entry = None if raw.isspace() else _accepted(out, raw, number, check, key, recover, seen, path)
        if entry is None:  # blank, lost or rejected: in the file, not among the accepted lines
            if digest is None:
                digest = whole.copy()
            whole.update(raw)
            continue
        whole.update(raw)
        if digest is not None:
            digest.update(raw)
        size += len(raw)
        out.numbers.append(number)
        out.entries.append(entry if take is None else take(entry, number))
    out.file_size, out.size = file_size, size
    out.file_sha256 = whole.hexdigest()
    out.sha256 = (whole if digest is None else digest).hexdigest()
    out.missing = _missing(seen)
    out.said = seen
    out.torn = torn_tail(out, last)
    return out


def _accepted(out: JournalRead, raw: bytes, number: int, check: list[JournalKey | None], key: JournalKey | None,
              recover: Recover, seen: dict[int, bytes | str], path: Path) -> dict[str, Any] | None:
    """The entry of the journal's line ``number`` (``raw``, not blank) when it is accepted; None when it is lost
    or rejected (noted in ``out``). The first accepted line (the run line) sets ``check[0]``, the key its MACs
    are checked with; ``seen`` gains the line's ``seq``. Raises BundleError as :func:`read_lines` says."""
    entry, body, mac, why = parse_line(raw)
    if entry is None and why.startswith("not an entry") and check[0] is None:
        # whole, readable JSON that is no entry: an edit, not a torn write; unauthenticated, refuse
        raise BundleError(f"journal line is not a pytest-hetero entry: {why[len('not an entry: '):]}",
                          Location(str(path), number), "the journal was edited or corrupted")
    if entry is None:
        (out.rejected if why.startswith("not an entry") else out.lost).append((number, why))
        return None
    if not out.entries and not out.rejected:
        check[0] = _start(out, entry, key, recover, Location(str(path), number))
    # with a key, a line's verified MAC stands for what it says (equal bodies, equal MACs); without, its sha256
    said: bytes | str = mac if check[0] is not None and mac and body else \
        hashlib.sha256(body or raw.rstrip(b"\r\n")).digest()
    seq = entry.get("seq")
    problem = _line_problem(seq, said, mac, check[0], seen, body) or (
        "no MAC although every line of this journal carries one: not written by the gate"
        if out.key and not mac else "")
    if problem.startswith("conflict"):
        raise BundleError(f"journal line {number} {problem[len('conflict: '):]}", Location(str(path), number),
                          "the lines cannot be authenticated, so neither is picked: the journal was written "
                          "to by another process; run the matrix again")
    if problem:
        out.rejected.append((number, problem))
        return None
    if isinstance(seq, int):
        seen[seq] = said
    return entry


_TORN_NODEID = re.compile(rb'"nodeid":"((?:[^"\\]|\\.){1,2000})"')
_TORN_PATH = re.compile(rb'"path":"(artifacts/(?:[^"\\]|\\.){1,2000})"')


def torn_tail(read: JournalRead, last: tuple[int, bytes] | None) -> TornLine | None:
    """The torn last line of a journal, or None: the file's last line (``last``: its number and bytes) was
    lost, has no newline and is no JSON — what a write cut short by SIGKILL or a full disk leaves (every
    line the gate writes is whole JSON ending in a newline). Its surviving bytes name the item and the
    artifacts it was recording (``"nodeid"``, ``"path":"artifacts/…"``: keys are written sorted, artifacts
    first), so what was lost can be said."""
    if last is None or last[1].endswith(b"\n") or not read.lost or read.lost[-1][0] != last[0]:
        return None
    raw = last[1]
    node = _TORN_NODEID.search(raw)
    paths = sorted({m.group(1).decode("utf-8", "replace") for m in _TORN_PATH.finditer(raw)})
    return {"line": last[0], "bytes": len(raw), "nodeid": node.group(1).decode("utf-8", "replace") if node else None,
            "paths": paths}


def _bounded_lines(fh: Any) -> Any:
    """The lines of ``fh`` (bytes, newline kept), each cut at MAX_LINE_BYTES: a longer "line" (no newline
    in gigabytes) is yielded as its first MAX_LINE_BYTES bytes, which do not parse (lost), and the rest of
    it is skipped without being held in memory."""
    while True:
        raw = fh.readline(MAX_LINE_BYTES)
        if not raw:
            return
        if len(raw) == MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while (rest := fh.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
        yield raw


def _start(out: JournalRead, first: dict[str, Any], key: JournalKey | None, recover: Recover,
           where: Location) -> JournalKey | None:
    """Read the run line ``first``: note how the journal is authenticated in ``out``; return the key."""
    if first.get("type") != "run":
        raise BundleError("the journal does not start with its run line", where,
                          "its first line was lost or the journal was edited; a run line is needed to rebuild")
    out.origin = KeyOrigin.of(first)
    check, out.why_not = key_for(out.origin, key, recover)
    out.authenticated = check is not None
    out.key = dict(first["journal"]) if out.origin.stated else {}  # stated: the line has a journal object
    return check


def _missing(seen: dict[int, bytes | str]) -> list[int]:
    """Sequence numbers absent below the highest one read."""
    return [n for n in range(max(seen)) if n not in seen] if seen else []


def _line_problem(seq: object, said: bytes | str, mac: str, check: JournalKey | None,
                  seen: dict[int, bytes | str], body: bytes) -> str:
    """Why a parsed line (its ``seq`` as written) is rejected (empty: accepted); ``said`` stands for what it says
    (see :func:`_read`)."""
    if check is not None:
        if not mac:
            return "no MAC: not written by the gate"
        if not hmac.compare_digest(check.mac(body), mac):
            return "MAC does not verify: not written by the gate (or altered)"
    if isinstance(seq, int) and seq in seen:
        if seen[seq] == said:
            return f"a repeat of line seq {seq}"
        # with a key both cannot verify; without one, neither can be told from the other
        return f"conflict: is a second, different line numbered seq {seq}"
    return ""
