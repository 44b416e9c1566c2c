"""Ed25519 keys, the in-toto Statement over a bundle, and its DSSE envelope.

Formats:

* **in-toto Statement v1** (``_type`` ``https://in-toto.io/Statement/v1``): ``subject`` is the
  bundle's ``manifest.json`` and each matrix file copied into ``inputs/``, each as
  ``{"name": bundle-relative path, "digest": {"sha256": hex}}``; ``predicateType`` is
  :data:`PREDICATE_TYPE` (this project's URI, versioned ``/v1``); ``predicate`` is built by
  :func:`build_predicate`.
* **DSSE v1 envelope** ``{"payloadType": "application/vnd.in-toto+json", "payload": base64,
  "signatures": [{"keyid", "sig"}]}``. Each ``sig`` is Ed25519 over the pre-authentication
  encoding ``PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`` (LEN as ASCII
  decimal byte counts), so any DSSE verifier checks it. Nothing else is in an envelope.
* **Keys**: PEM, PKCS#8 private (unencrypted, file mode 0600) and SubjectPublicKeyInfo public.
  ``keyid`` is the one securesystemslib (``SSlibKey.from_crypto``) and in-toto compute: the hex
  sha256 of the canonical JSON ``{"keytype":"ed25519","keyval":{"public":HEX},"scheme":"ed25519"}``
  (HEX = the raw 32-byte public key). :func:`legacy_keyid` (sha256 of the DER
  SubjectPublicKeyInfo) is what bundles written before it carry; verify accepts both.

The run's envelope is the first line of ``attestation.intoto.jsonl`` (the in-toto bundle
convention; each team sign-off is a later line, see :mod:`pytest_hetero.bundle.attestation`), and
the bare statement is ``statement.intoto.json`` for reading.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shlex
import shutil
import stat
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from pytest_hetero import LAYERS, __version__
from pytest_hetero.bundle.manifest import ATTESTATION, STATEMENT
from pytest_hetero.declared import resolve
from pytest_hetero.errors import BundleError, Location
from pytest_hetero.evidence.model import STATUSES
from pytest_hetero.settings import SignCommand

if TYPE_CHECKING:
    from pytest_hetero.bundle.intoto import (
        Envelope,
        PredicateCluster,
        PredicateUntested,
        PredicateUsage,
        RunPredicate,
        RunStatement,
        SnapshotDigest,
    )
    from pytest_hetero.bundle.intoto import Signature as DsseSignature
    from pytest_hetero.evidence.document import EvidenceDocument
    from pytest_hetero.evidence.usage import UsageSection

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
PREDICATE_PREFIX = "https://pytest-hetero.dev/attestation/evidence-bundle/"
PREDICATE_VERSIONS: tuple[str, ...] = ("v1",)
PREDICATE_TYPE = PREDICATE_PREFIX + PREDICATE_VERSIONS[-1]
"""The predicateType URI this version writes; verify accepts every version in PREDICATE_VERSIONS."""


class SigningKeyError(BundleError):
    """A key file is missing, unreadable, not Ed25519, or a private key readable by others."""


def keyid(public_key: Ed25519PublicKey) -> str:
    """The keyid securesystemslib's ``SSlibKey.from_crypto`` computes for ``public_key``: hex sha256
    (64 chars) of the canonical JSON of ``{"keytype": "ed25519", "keyval": {"public": raw key hex},
    "scheme": "ed25519"}`` (sorted keys, no whitespace; the TUF/in-toto key format)."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()
    return hashlib.sha256(canonical({"keytype": "ed25519", "keyval": {"public": raw}, "scheme": "ed25519"})).hexdigest()


def legacy_keyid(public_key: Ed25519PublicKey) -> str:
    """The keyid of bundles written before the securesystemslib keyid: hex sha256 of the public key's
    DER SubjectPublicKeyInfo."""
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).hexdigest()


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding of ``payload`` (bytes) under ``payload_type``."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def generate_keypair(private_path: Path, public_path: Path) -> str:
    """Create a new Ed25519 pair: private PEM at ``private_path`` (mode 0600, created exclusively),
    public PEM at ``public_path``. Returns the keyid. Raises SigningKeyError if either exists."""
    for path in (private_path, public_path):
        if path.exists():
            raise SigningKeyError("refusing to overwrite an existing key file", Location(str(path)),
                                  "choose another path or remove the old key first")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    os.chmod(private_path, 0o600)  # umask cannot widen it, but an odd umask could narrow the owner bits
    public = key.public_key()
    public_path.write_bytes(public.public_bytes(serialization.Encoding.PEM,
                                                serialization.PublicFormat.SubjectPublicKeyInfo))
    return keyid(public)


MAX_KEY_BYTES = 64 * 1024
"""The most a key file may hold (an Ed25519 PEM is about 120 bytes)."""


def _read_key(path: Path, what: str, missing_hint: str) -> bytes:
    """The bytes of the key file ``path``, read by the one safe reader (a FIFO, a device, a symlink
    loop or a file over MAX_KEY_BYTES is refused). Raises SigningKeyError."""
    from pytest_hetero.safeio import Unreadable, read_local, refusal

    try:
        return read_local(path, MAX_KEY_BYTES)
    except Unreadable as exc:
        raise refusal(path, what, exc, SigningKeyError, missing_hint if exc.kind == "missing" else "") from None


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """Load an Ed25519 private key PEM. Raises SigningKeyError when the file is missing, readable
    or writable by group/others (``chmod 600`` fixes it), or not an unencrypted Ed25519 key.
    The key's content never appears in a message."""
    data = _read_key(path, "the private key", "create one with: hetero keygen KEY")
    mode = os.stat(path).st_mode
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        key = None
    if not isinstance(key, Ed25519PrivateKey):
        what = "a public key, not a private key" if b"PUBLIC KEY" in data else \
            "not an unencrypted Ed25519 private key in PEM"
        raise SigningKeyError(what, Location(str(path)), "pass the private key file; create a pair with: "
                              "hetero keygen KEY")
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SigningKeyError(f"private key file is accessible by group/others (mode {stat.S_IMODE(mode):04o})",
                              Location(str(path)), f"run: chmod 600 {path}")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """Load an Ed25519 public key PEM (or derive it from a private key PEM). Raises SigningKeyError."""
    data = _read_key(path, "the public key", "pass the .pub file written by hetero keygen")
    try:
        key: Any = serialization.load_pem_public_key(data)
    except ValueError:
        try:
            key = serialization.load_pem_private_key(data, password=None).public_key()
        except (ValueError, TypeError):
            key = None
    if not isinstance(key, Ed25519PublicKey):
        raise SigningKeyError("not an Ed25519 public key in PEM", Location(str(path)),
                              "pass the .pub file written by hetero keygen")
    return key


def canonical(obj: Any) -> bytes:
    """Deterministic JSON bytes: sorted keys, no spaces, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


class _WrittenLeftover(msgspec.Struct, frozen=True, kw_only=True):
    """What the predicate names of a leftover of the evidence's ``cleanup`` section
    (:class:`~pytest_hetero.evidence.document.LeftoverDict`, every field optional there, and typed: the verifying
    loader holds the section to it): each as written, None when absent."""

    backend: str | None = None
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    reason: str | None = None


def build_predicate(evidence: EvidenceDocument, owners: dict[str, dict[str, str]],
                    run_keyid: str | None) -> RunPredicate:
    """The signed claim about a run, from the evidence.json document.

    Shape: ``tool {name, version}``, ``run`` (id, times, exit status, interrupted, git commit),
    ``matrices`` [{name, sha256}], ``owners`` {matrix: {layer: team}}, ``target`` (backend
    fingerprints: backend, identity, nodes, versions, images), ``counts`` {layer: {status: n}}
    with every status of STATUSES present, ``totals``, ``verdict`` (``not_clean`` when the run left
    objects it created), ``cleanup`` (``clean`` and each leftover's backend, kind, namespace, name,
    reason), ``validation`` (pool × task type levels and expiry, :mod:`pytest_hetero.status.compute`),
    ``cluster`` (snapshot digests, drift and change record of ``--hetero-snapshot``; None without),
    ``untested`` (every untested
    entry with status, reason and blocked_by; never-covered dimension values; counts by status),
    ``does_not_prove`` {layer: text}, ``usage`` (the usage ledger's sums, :func:`_usage`; None without),
    ``run_signer`` (keyid or null when unsigned).
    """
    summary = evidence["summary"]
    counts: dict[str, dict[str, int]] = {
        layer: {s: int(summary["by_layer"][layer].get(s, 0)) for s in STATUSES} for layer in LAYERS}
    untested = evidence["untested"]
    by_status: dict[str, int] = dict(Counter(entry["status"] for entry in untested["items"]))
    run = evidence["run"]
    cleanup = evidence.get("cleanup")
    leftovers = [msgspec.convert(x, _WrittenLeftover) for x in (cleanup["leftovers"] if cleanup else [])]
    # blocked_by: every entry untested_scope writes has it; the typed loader gives one written without it None
    scope: PredicateUntested = {
        "items": [{"nodeid": e["nodeid"], "layer": e["layer"], "keys": e["keys"], "status": e["status"],
                   "reason": e["reason"], "blocked_by": e["blocked_by"]} for e in untested["items"]],
        "never_covered": untested["never_covered"], "by_status": by_status,
        "not_proven": untested["not_proven"]}
    if untested.get("nodes"):
        scope["nodes"] = untested["nodes"]
    return {
        "tool": {"name": "pytest-hetero", "version": run["tool_version"] or __version__},
        "run": {"id": run["id"], "started_at": run["started_at"], "finished_at": run["finished_at"],
                "finished_at_recovered": run["finished_at_recovered"], "exit_status": run["exit_status"],
                "interrupted": run["interrupted"], "git_commit": run["git_commit"], "host": run["host"],
                "profile": run["profile"]},
        "matrices": [{"name": m["name"], "sha256": m["sha256"]} for m in evidence["matrices"]],
        "owners": owners,
        "target": evidence["target"],
        "counts": counts,
        "totals": {s: int(summary["totals"].get(s, 0)) for s in STATUSES},
        "verdict": summary["verdict"],
        "verdict_reason": summary.get("verdict_reason"),
        "selection": summary.get("selection"),
        "cleanup": {"clean": summary.get("clean", True),
                    "leftovers": [{"backend": x.backend, "kind": x.kind, "namespace": x.namespace, "name": x.name,
                                   "reason": x.reason} for x in leftovers]},
        "untested": scope,
        "does_not_prove": untested["does_not_prove"],
        "validation": evidence.get("validation") or {"pools": []},
        "cluster": _cluster(evidence.get("cluster")),
        "usage": _usage(evidence.get("usage")),
        "run_signer": run_keyid,
    }


def _usage(section: UsageSection | None) -> PredicateUsage | None:
    """The predicate's ``usage``: the run-wide ledger's sums (resource-seconds by namespace, project, task
    type and model version; waste; governance; how many records were incomplete), without its
    per-workload lists (those are in evidence.json, which the statement's subject covers). None when the
    evidence has no ledger (a bundle written before it existed)."""
    if not section:
        return None
    waste = section["waste"]
    failed = waste["failed"]
    return {"workloads": section["workloads"], "simulated": section["simulated"],
            "resource_seconds": section["resource_seconds"], "cpu_s": section["cpu_s"],
            "waste": {"failed": {"workloads": failed["workloads"], "resource_seconds": failed["resource_seconds"]},
                      "retries": waste["retries"],
                      "idle_s": waste["idle"]["seconds"]},
            "governance": section["governance"],
            "incomplete": section["incomplete"]["count"]}


class _WrittenSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of the evidence's ``cluster`` section
    (:meth:`pytest_hetero.pytest_plugin.drift.ClusterRecord.pytest_hetero_amend_evidence`) as the predicate names
    it: its ``matrix``, ``taken_at`` and ``sha256`` as written (None when absent); the snapshot itself is left."""

    matrix: Any = None
    taken_at: Any = None
    sha256: Any = None


class _WrittenCluster(msgspec.Struct, frozen=True, kw_only=True):
    """The evidence's ``cluster`` section as the predicate reads it: ``snapshots``, ``drift`` and ``change_record``
    as written (None when absent)."""

    snapshots: Any = None
    drift: Any = None
    change_record: Any = None


def _cluster(section: dict[str, Any] | None) -> PredicateCluster | None:
    """The predicate's ``cluster``: each snapshot's matrix, time and sha256 (the snapshot itself is in
    evidence.json), the drift against a baseline (changes, affected items) and the change record. Raises
    :class:`msgspec.ValidationError` naming the path when a snapshot is not an object (the gate writes none such;
    before, an AttributeError)."""
    if not section:
        return None
    said = msgspec.convert(section, _WrittenCluster)
    snapshots: list[SnapshotDigest] = [{"matrix": s.matrix, "taken_at": s.taken_at, "sha256": s.sha256}
                                       for s in (msgspec.convert(x, _WrittenSnapshot) for x in said.snapshots or [])]
    return {"snapshots": snapshots, "drift": said.drift, "change_record": said.change_record}


def build_statement(subjects: list[tuple[str, str]], predicate: RunPredicate) -> RunStatement:
    """in-toto Statement v1 over ``subjects`` [(bundle-relative name, sha256 hex)]."""
    return {"_type": STATEMENT_TYPE,
            "subject": [{"name": name, "digest": {"sha256": digest}} for name, digest in subjects],
            "predicateType": PREDICATE_TYPE, "predicate": predicate}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def envelope_for(statement_bytes: bytes, key: Ed25519PrivateKey | Signer | None) -> Envelope:
    """DSSE envelope over ``statement_bytes``; signed by ``key`` (a private key or a :class:`Signer`), or
    with no signature when None. Raises SigningKeyError when a signer fails."""
    sigs: list[DsseSignature] = []
    if isinstance(key, Ed25519PrivateKey):
        key = Signer(key.sign, key.public_key(), keyid(key.public_key()), "key")
    if key is not None:
        sigs.append({"keyid": key.keyid, "sig": _b64(key.sign(pae(PAYLOAD_TYPE, statement_bytes)))})
    return {"payloadType": PAYLOAD_TYPE, "payload": _b64(statement_bytes), "signatures": sigs}


def envelope_bytes(envelope: Envelope) -> bytes:
    """The DSSE envelope as written to ``attestation.intoto.jsonl``: one line of compact JSON with
    sorted keys (ASCII), then a newline. :func:`~pytest_hetero.bundle.verify.verify_bundle` expects exactly
    these bytes."""
    return json.dumps(envelope, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("ascii") + b"\n"


def write_envelope(bundle_dir: Path, envelope: Envelope) -> None:
    """Write ``envelope`` as the run's attestation, the only line of ``attestation.intoto.jsonl``
    (atomically; a bundle being finished has no sign-off yet)."""
    tmp = bundle_dir / (ATTESTATION + ".tmp")
    tmp.write_bytes(envelope_bytes(envelope))
    tmp.replace(bundle_dir / ATTESTATION)


def write_statement(bundle_dir: Path, statement: RunStatement, key: Ed25519PrivateKey | Signer | None) -> str:
    """Write ``statement.intoto.json`` (the exact payload bytes) and its envelope; return the statement's hex sha256.

    The bytes are ``json.dumps(statement, sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False)`` in UTF-8
    with a newline, and the envelope's are :func:`envelope_bytes` of :func:`envelope_for` of them, but the statement
    is held once: encoded piece by piece into one buffer that is also the DSSE PAE the signature is over (Ed25519
    signs a whole message), the envelope's base64 payload written a piece at a time. Through ``json.dumps`` it was
    held six to ten times over at once (the standard library's list of indented pieces, its text, its bytes, the
    PAE, the base64, the envelope's text): 2.7 KB per deselected item at a run's finish. Raises SigningKeyError when a
    signer fails (after the statement is written, before the envelope), ValueError on a NaN or ±Infinity,
    UnicodeEncodeError on a lone surrogate, OSError when the folder cannot be written."""
    encoder = json.JSONEncoder(sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False)
    kind = PAYLOAD_TYPE.encode("utf-8")
    room = len(pae(PAYLOAD_TYPE, b"")) + 20  # the PAE's header, with room for a payload length of up to 20 digits
    buf = bytearray(room)
    for text in _joined(encoder.iterencode(statement)):
        buf += text.encode("utf-8")
    buf += b"\n"
    size = len(buf) - room
    header = b"DSSEv1 %d %s %d " % (len(kind), kind, size)  # pae()'s, written in front of the payload in place
    start = room - len(header)
    buf[start:room] = header
    whole = memoryview(buf)
    payload = whole[room:]
    (bundle_dir / STATEMENT).write_bytes(payload)
    signer = Signer(key.sign, key.public_key(), keyid(key.public_key()), "key") if isinstance(
        key, Ed25519PrivateKey) else key
    sigs: list[DsseSignature] = [] if signer is None else [{"keyid": signer.keyid,
                                                           "sig": _b64(signer.sign(whole[start:]))}]
    # envelope_bytes of the envelope with its payload left empty: "payload" sorts first, so its value opens the line
    shell = envelope_bytes({"payloadType": PAYLOAD_TYPE, "payload": "", "signatures": sigs})
    head = b'{"payload":"'
    if not shell.startswith(head + b'",'):
        raise AssertionError(f"unexpected envelope text {shell[:40]!r}")
    tmp = bundle_dir / (ATTESTATION + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(head)
        for n in range(0, size, _B64_PIECE):  # whole groups of 3 bytes: the pieces' base64 joined is the whole's
            fh.write(base64.b64encode(payload[n:n + _B64_PIECE]))
        fh.write(shell[len(head):])
    tmp.replace(bundle_dir / ATTESTATION)
    return hashlib.sha256(payload).hexdigest()


_B64_PIECE = 3 << 14
"""Payload bytes base64-encoded at a time by :func:`write_statement` (a multiple of 3: no padding but the last)."""
_JOINED = 1024
"""Encoder pieces joined into one string by :func:`_joined`."""


def _joined(pieces: Iterable[str]) -> Iterator[str]:
    """``pieces`` joined :data:`_JOINED` at a time (fewer, larger strings to encode; the same text)."""
    batch: list[str] = []
    for piece in pieces:
        batch.append(piece)
        if len(batch) >= _JOINED:
            yield "".join(batch)
            batch.clear()
    if batch:
        yield "".join(batch)


SIGN_TIMEOUT_S = 120.0
"""How long an external signer (:class:`SignCommand`) may take for one signature."""


@dataclass(frozen=True)
class Signer:
    """What signs a run: ``sign(message) -> 64-byte Ed25519 signature`` (``message`` bytes or a memoryview: the run's
    statement is signed from a buffer, :func:`write_statement`), ``public`` its public key, ``keyid`` (:func:`keyid`)
    and ``where`` (the key file, or ``command: …``)."""

    sign: Callable[[bytes | memoryview], bytes]
    public: Ed25519PublicKey
    keyid: str
    where: str


def load_signer(spec: Path | SignCommand) -> Signer:
    """The :class:`Signer` of a private key PEM (:func:`load_private_key`) or of a :class:`SignCommand`.
    Raises SigningKeyError for a refused key, an unreadable public key, or a command that cannot be
    started; the signer's own failures are raised at :meth:`Signer.sign` (also SigningKeyError)."""
    if isinstance(spec, Path):
        private = load_private_key(spec)
        return Signer(private.sign, private.public_key(), keyid(private.public_key()), str(spec))
    public = load_public_key(spec.public)
    argv = shlex.split(spec.command)
    if not argv or shutil.which(argv[0]) is None:
        raise SigningKeyError(f"signer command not found: {argv[0] if argv else '(empty)'}",
                              Location("--hetero-sign-command"), "give a program on PATH or its full path")

    def sign(message: bytes | memoryview) -> bytes:
        try:
            done = subprocess.run(argv, input=message, capture_output=True, timeout=SIGN_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SigningKeyError(f"signer command failed: {exc}", Location("--hetero-sign-command")) from None
        if done.returncode != 0:
            why = done.stderr.decode("utf-8", "replace").strip()[-300:]
            raise SigningKeyError(f"signer command exited with {done.returncode}: {why}",
                                  Location("--hetero-sign-command"))
        signature = _signature_bytes(done.stdout)
        try:
            public.verify(signature, message)
        except InvalidSignature:
            raise SigningKeyError("signer command returned no valid Ed25519 signature of the message for the "
                                  f"public key {spec.public}", Location("--hetero-sign-command"),
                                  "check that the signer holds the private half of --hetero-sign-public and "
                                  "signs stdin as is (raw, not hashed)") from None
        return signature

    return Signer(sign, public, keyid(public), f"command: {spec.command}")


def _signature_bytes(out: bytes) -> bytes:
    """The 64 signature bytes of a signer's stdout: raw, or base64 or hex text (whitespace ignored)."""
    if len(out) == 64:
        return out
    text = b"".join(out.split())
    for decode in (bytes.fromhex, lambda t: base64.b64decode(t, validate=True)):
        try:
            raw = decode(text.decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            continue
        if len(raw) == 64:
            return bytes(raw)
    return out[:64]  # judged by the signature check


def check_signature(public: Ed25519PublicKey, sig_b64: str, message: bytes) -> bool:
    """True when ``sig_b64`` (standard base64) is a valid Ed25519 signature of ``message``."""
    try:
        public.verify(base64.b64decode(sig_b64, validate=True), message)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


resolve(__name__)
