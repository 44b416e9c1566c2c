"""``validation.intoto.jsonl``: each pool's validation status as a SLSA Verification Summary Attestation.

One line per pool of the run's signed ``validation`` section, each a DSSE envelope (the run's key; no
signature when the run is unsigned) over an in-toto Statement v1 with predicateType
:data:`VSA_PREDICATE_TYPE` (https://slsa.dev/spec/v1.0/verification_summary). The statement's subject is
the pool: name ``hetero-pool:<matrix>/<pool>``, digest the sha256 of the canonical JSON of
:func:`pool_identity` (matrix, pool, requests, node selector, nodes). The predicate:

* ``verifier.id`` :data:`VERIFIER_ID`, ``verifier.version`` ``{"pytest-hetero": version}``;
* ``timeVerified`` (the run's end), ``resourceUri`` (the subject's name);
* ``policy``: ``{"uri": LEVELS_POLICY, "digest": {"sha256": the matrix file's sha256}}``;
* ``inputAttestations``: ``[{"uri": "statement.intoto.json", "digest": {"sha256": the run statement's
  payload digest}}]`` — what binds the VSA to exactly one bundle;
* ``verificationResult`` ``PASSED`` when at least one task type reached a level above ``none``;
* ``verifiedLevels``: ``PYTEST_HETERO_<TASK_TYPE>_<LEVEL>`` per task type (upper case, ``-`` → ``_``);
  VSA v1 allows non-SLSA level strings;
* ``pytestHetero``: ``{"validFrom", "validUntil", "taskTypes": {task: level}, "domain"}``. VSA v1 has no
  expiry field; consumers that follow the in-toto parsing rules ignore this extension field, so the
  expiry is only enforced by readers that know it (:func:`read_vsas` and ``hetero publish``).

The file is a signature file: it is outside the manifest (it names the statement's digest, so it
cannot be inside it), like ``attestation.intoto.jsonl``. ``hetero verify`` checks it
(:func:`check_vsas`, from ``verify_bundle``), as do ``docs/verify-bundle.sh`` and :func:`read_vsas`:
present exactly when the signed statement has pools, one line per pool, each signed by the gate key
and saying exactly what the signed statement says of its pool.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from pytest_hetero import __version__
from pytest_hetero.bundle.manifest import STATEMENT, VALIDATION
from pytest_hetero.declared import resolve
from pytest_hetero.errors import BundleError, Location
from pytest_hetero.evidence.views import BundleStatus

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    from pytest_hetero.bundle.attestation import Attestation
    from pytest_hetero.bundle.intoto import PoolIdentity, VsaStatement
    from pytest_hetero.bundle.signing import Signer
    from pytest_hetero.evidence.document import MatrixEntry, PoolStatus, UntestedEntry, ValidationSection

VSA_PREDICATE_TYPE = "https://slsa.dev/verification_summary/v1"
VERIFIER_ID = "https://pytest-hetero.dev/gate"
LEVELS_POLICY = "https://pytest-hetero.dev/policy/validation-levels/v1"
MAX_VSA_BYTES = 64 * 1024 * 1024


def pool_identity(pool: PoolStatus) -> PoolIdentity:
    """What names a pool in its subject digest: matrix, pool, requests, node selector, nodes."""
    return {"matrix": pool["matrix"], "pool": pool["pool"], "requests": pool["requests"],
            "node_selector": pool["node_selector"], "nodes": pool["nodes"]}


def verified_level(task_type: str, level: str) -> str:
    """``PYTEST_HETERO_<TASK_TYPE>_<LEVEL>``, e.g. ``PYTEST_HETERO_BATCH_INFERENCE_BUSINESS``."""
    return f"PYTEST_HETERO_{task_type}_{level}".upper().replace("-", "_")


def vsa_statement(pool: PoolStatus, statement_digest: str, matrix_sha256: str) -> VsaStatement:
    """The in-toto Statement v1 (a VSA) of one ``pool`` entry of the validation status."""
    from pytest_hetero.bundle.signing import STATEMENT_TYPE, canonical

    name = f"hetero-pool:{pool['matrix']}/{pool['pool']}"
    levels = {task: str(entry["level"]) for task, entry in sorted(pool["task_types"].items())}
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": hashlib.sha256(canonical(pool_identity(pool))).hexdigest()}}],
        "predicateType": VSA_PREDICATE_TYPE,
        "predicate": {
            "verifier": {"id": VERIFIER_ID, "version": {"pytest-hetero": __version__}},
            "timeVerified": pool["verified_at"], "resourceUri": name,
            "policy": {"uri": LEVELS_POLICY, "digest": {"sha256": matrix_sha256}},
            "inputAttestations": [{"uri": STATEMENT, "digest": {"sha256": statement_digest}}],
            "verificationResult": "PASSED" if any(v != "none" for v in levels.values()) else "FAILED",
            "verifiedLevels": [verified_level(t, v) for t, v in levels.items() if v != "none"],
            "pytestHetero": {"validFrom": pool["verified_at"], "validUntil": pool["expires_at"],
                             "taskTypes": levels, "domain": pool["domain"]},
        },
    }


def write_vsas(bundle_dir: Path, validation: ValidationSection, matrices: list[MatrixEntry],
               statement_sha256: str, key: Ed25519PrivateKey | Signer | None) -> int:
    """Write ``validation.intoto.jsonl`` (one envelope per pool; none written when there is no pool);
    return the number of lines. ``matrices`` are the evidence's ``[{"name", "sha256", …}]``; ``statement_sha256``
    the hex sha256 of the run's ``statement.intoto.json``, the attestation each VSA names as its input."""
    from pytest_hetero.bundle.signing import envelope_bytes, envelope_for

    pools = validation["pools"]
    path = bundle_dir / VALIDATION
    if not pools:
        path.unlink(missing_ok=True)
        return 0
    shas = {m["name"]: m["sha256"] for m in matrices}
    lines = []
    for pool in pools:
        data = json.dumps(vsa_statement(pool, statement_sha256, shas.get(pool["matrix"], "")), sort_keys=True,
                          separators=(",", ":")).encode("utf-8")
        lines.append(envelope_bytes(envelope_for(data, key)))
    tmp = path.with_name(VALIDATION + ".tmp")
    tmp.write_bytes(b"".join(lines))
    tmp.replace(path)
    return len(lines)


class _PoolTop(msgspec.Struct, frozen=True, kw_only=True):
    """The fields :class:`SignedPool` reads of a pool of the signed ``validation`` section, each as written
    (untrusted; None when absent)."""

    matrix: object = None
    pool: object = None
    task_types: object = None
    expires_at: object = None


class _TaskTypeTop(msgspec.Struct, frozen=True, kw_only=True):
    """A pool's task type entry as :class:`SignedPool` reads it: its ``level`` as written (None when absent)."""

    level: object = None


@dataclass(frozen=True)
class SignedPool:
    """A pool of the signed statement's ``validation`` section, as its VSA must repeat it, read once from the
    untrusted predicate (:meth:`of`): the ``resource_uri`` its VSA names (``hetero-pool:<matrix>/<pool>``, each
    as written, None when absent), each task type's ``level`` as written (a task type whose entry is not an
    object is left out; a missing level is None) and ``expires_at`` as written (None when absent)."""

    levels: dict[str, object]
    expires_at: object
    resource_uri: str

    @classmethod
    def of(cls, pool: object) -> SignedPool:
        """The pool entry ``pool`` of the signed predicate (untrusted JSON; not an object: no task type, no
        expiry)."""
        # a JSON object always fits (each field any JSON value): converting cannot fail
        said = msgspec.convert(pool if isinstance(pool, dict) else {}, _PoolTop)
        tasks = said.task_types if isinstance(said.task_types, dict) else {}
        return cls({t: msgspec.convert(e, _TaskTypeTop).level for t, e in tasks.items() if isinstance(e, dict)},
                   said.expires_at, f"hetero-pool:{said.matrix}/{said.pool}")


class _VsaPredicateTop(msgspec.Struct, frozen=True, kw_only=True):
    """The fields :class:`VsaClaim` reads of a VSA predicate (:class:`~pytest_hetero.bundle.intoto.VsaPredicate`),
    each as written (untrusted; None when absent)."""

    input_attestations: object = msgspec.field(name="inputAttestations", default=None)
    resource_uri: object = msgspec.field(name="resourceUri", default=None)
    verification_result: object = msgspec.field(name="verificationResult", default=None)
    verified_levels: object = msgspec.field(name="verifiedLevels", default=None)
    pytest_hetero: object = msgspec.field(name="pytestHetero", default=None)


class _InputTop(msgspec.Struct, frozen=True, kw_only=True):
    """An input attestation's ``digest`` as written (None when absent)."""

    digest: object = None


class _ExtensionTop(msgspec.Struct, frozen=True, kw_only=True):
    """The ``pytestHetero`` extension's fields :class:`VsaClaim` reads, as written (None when absent)."""

    task_types: object = msgspec.field(name="taskTypes", default=None)
    valid_until: object = msgspec.field(name="validUntil", default=None)


@dataclass(frozen=True)
class VsaClaim:
    """What one line of ``validation.intoto.jsonl`` says, read once from its untrusted predicate (:meth:`of`), each
    value as written (None when absent): the sha256 of the first input attestation (``input_digest``: the
    statement it was derived from), ``resource_uri``, the extension's ``task_types`` and ``valid_until``, the
    ``verification_result`` and the ``verified_levels``."""

    input_digest: object
    resource_uri: object
    task_types: object
    valid_until: object
    verification_result: object
    verified_levels: object

    @classmethod
    def of(cls, line: Attestation) -> VsaClaim:
        """The claim of the VSA line ``line`` (its statement's predicate, untrusted JSON)."""
        from pytest_hetero.bundle.attestation import WrittenDigest

        # each shape's fields are any JSON value and only JSON objects are converted: converting cannot fail
        predicate = msgspec.convert(line.predicate, _VsaPredicateTop)
        inputs = predicate.input_attestations
        first = inputs[0] if isinstance(inputs, list) and inputs and isinstance(inputs[0], dict) else {}
        named = msgspec.convert(first, _InputTop).digest
        ext = msgspec.convert(predicate.pytest_hetero if isinstance(predicate.pytest_hetero, dict) else {},
                              _ExtensionTop)
        return cls(msgspec.convert(named, WrittenDigest).sha256 if isinstance(named, dict) else None,
                   predicate.resource_uri, ext.task_types, ext.valid_until, predicate.verification_result,
                   predicate.verified_levels)


class _ValidationTop(msgspec.Struct, frozen=True, kw_only=True):
    """The signed predicate's ``validation`` section as :func:`check_vsas` reads it: ``pools`` as written (None
    when absent)."""

    pools: object = None


def check_vsas(bundle_dir: Path, keys: dict[str, Ed25519PublicKey] | None, predicate_validation: Any,
               statement_payload: bytes) -> tuple[list[dict[str, Any]], list[str]]:
    """Check ``validation.intoto.jsonl`` offline against the signed run statement; never raises for
    bundle content. Returns (the VSA statements read, problems in words, each naming its line).

    ``predicate_validation`` is the signed predicate's ``validation`` section; ``statement_payload``
    the run statement's exact signed bytes (its sha256 is what every VSA must name). ``keys``
    ({keyid: public key}; None: signatures not checked, e.g. an unsigned bundle read with
    --allow-unsigned): every line must carry a valid signature by one of them. The file must exist
    exactly when the statement signs at least one pool, hold one line per pool (none twice, none
    missing), each byte for byte as the gate writes it, end with a newline, and say exactly what the
    signed section says for its pool (levels, expiry).
    """
    from pytest_hetero.bundle.safeio import Unreadable, read_regular

    # a JSON object always fits (its one field any JSON value): converting cannot fail
    pools = msgspec.convert(predicate_validation, _ValidationTop).pools \
        if isinstance(predicate_validation, dict) else None
    pools = [p for p in pools if isinstance(p, dict)] if isinstance(pools, list) else []
    try:
        data = read_regular(bundle_dir, VALIDATION, MAX_VSA_BYTES)
    except Unreadable as exc:
        if exc.kind == "missing" and not pools:
            return [], []
        if exc.kind == "missing":
            return [], [f"missing: the signed statement has {len(pools)} pool(s) but the bundle has no {VALIDATION}"]
        return [], [f"{exc.kind}: {exc.detail}"]
    if not pools:
        return [], [f"the signed statement has no pool, yet {VALIDATION} is present: it was added after signing"]
    if not data.endswith(b"\n"):
        return [], ["edited: the last line has no newline, as every line is written: the file was truncated or edited"]
    digest = hashlib.sha256(statement_payload).hexdigest()
    expected = {signed.resource_uri: signed for signed in map(SignedPool.of, pools)}
    out: list[dict[str, Any]] = []
    problems: list[str] = []
    seen: set[str] = set()
    for n, raw in enumerate(data[:-1].split(b"\n"), 1):
        statement, problem = _vsa_line(raw, n, keys, digest, expected, seen)
        if problem:
            problems.append(problem)
        elif statement is not None:
            out.append(statement)
    if not problems and len(seen) != len(expected):
        lost = sorted(set(expected) - seen)
        problems.append(f"{len(seen)} pool(s) in the file, the signed statement {len(expected)}: missing "
                        f"{', '.join(x[:200] for x in lost[:5])}")
    return out, problems


def _vsa_line(raw: bytes, n: int, keys: dict[str, Ed25519PublicKey] | None, digest: str,
              expected: dict[str, SignedPool], seen: set[str]) -> tuple[dict[str, Any] | None, str | None]:
    """(the statement, None) of line ``n`` when it checks (its pool added to ``seen``), else (None, the problem)."""
    from pytest_hetero.bundle.attestation import parse_line
    from pytest_hetero.bundle.safeio import Unreadable
    from pytest_hetero.bundle.signing import PAYLOAD_TYPE, check_signature, envelope_bytes, pae

    try:
        line = parse_line(raw, n, PAYLOAD_TYPE)
    except Unreadable as exc:
        return None, f"{exc.kind}: {exc.detail}"
    if line.predicate_type != VSA_PREDICATE_TYPE:
        return None, f"line {n}: predicateType {line.predicate_type[:80]!r} is not a VSA's"
    if keys is not None:
        message = pae(PAYLOAD_TYPE, line.payload)
        if not any(s.keyid is not None and s.keyid in keys and check_signature(keys[s.keyid], s.sig, message)
                   for s in line.signers):
            return None, f"line {n}: no valid signature by a trusted key (the gate's; forged, altered or unsigned)"
    if raw != envelope_bytes(line.envelope).rstrip(b"\n"):
        return None, f"line {n}: not byte for byte as pytest-hetero writes it (edited after signing)"
    claim = VsaClaim.of(line)
    uri = str(claim.resource_uri)
    problem = _vsa_problem(claim, digest, expected, n)
    if problem is None and uri in seen:
        problem = f"line {n}: pool {uri[:200]} appears twice"
    if problem:
        return None, problem
    seen.add(uri)
    return line.statement, None


def read_vsas(bundle_dir: Path, keys: dict[str, Ed25519PublicKey] | None,
              predicate_validation: ValidationSection) -> list[dict[str, Any]]:
    """The VSA statements of ``bundle_dir``, checked offline (:func:`check_vsas` against the bundle's
    ``statement.intoto.json``). Raises BundleError naming the first problem; also when the
    statement signs no pool (``predicate_validation``'s ``pools`` is empty)."""
    from pytest_hetero.bundle.safeio import MIB, Unreadable, read_regular

    where = Location(str(bundle_dir / VALIDATION))
    if not predicate_validation["pools"]:
        raise BundleError(f"no {VALIDATION} in the bundle", where, "the run wrote no validation status (no pool)")
    try:
        payload = read_regular(bundle_dir, STATEMENT, 512 * MIB)
    except Unreadable as exc:
        raise BundleError(f"{STATEMENT}: {exc.kind}: {exc.detail}", where) from None
    statements, problems = check_vsas(bundle_dir, keys, predicate_validation, payload)
    if problems:
        raise BundleError(f"{VALIDATION}: {problems[0]}", where,
                          "use the bundle exactly as the run wrote it, with the run's public key")
    return statements


def _vsa_problem(claim: VsaClaim, digest: str, expected: dict[str, SignedPool], n: int) -> str | None:
    if claim.input_digest != digest:
        return f"line {n}: the VSA names another bundle's statement"
    pool = expected.get(str(claim.resource_uri))
    if pool is None:
        return f"line {n}: pool {str(claim.resource_uri)[:200]} is not in the signed statement"
    levels = pool.levels
    if claim.task_types != levels or claim.valid_until != pool.expires_at:
        return f"line {n}: levels or expiry differ from the signed statement's"
    want = "PASSED" if any(v != "none" for v in levels.values()) else "FAILED"
    wanted_levels = [verified_level(t, str(v)) for t, v in sorted(levels.items(), key=lambda tv: tv[0]) if v != "none"]
    if claim.verification_result != want or claim.verified_levels != wanted_levels:
        return (f"line {n}: verificationResult {str(claim.verification_result)[:40]} or verifiedLevels "
                f"differ from the signed statement's levels ({want})")
    return None


def load_status(path: Path, keys: list[Any] | None, *, allow_unsigned: bool = False) -> BundleStatus:
    """The validation status a bundle signs, checked offline with ``keys`` (public keys):
    ``{"bundle": folder, "digest": sha256 of the run statement, "verification": verified | unsigned |
    unverified, "validation": the predicate's section, "vsas": [VSA statements], "run": the predicate's
    run, "untested": {pool: [untested entries]}}``. A bundle that does not verify, or whose VSA file
    does not match its statement, raises BundleError (see :func:`read_vsas`)."""
    from pytest_hetero.bundle.attestation import RunClaim, read_attestations
    from pytest_hetero.bundle.signing import PAYLOAD_TYPE
    from pytest_hetero.bundle.verify import gate_keys, load_verified
    from pytest_hetero.safeio import Unreadable

    path = Path(path)
    bundle = path.parent if path.is_file() else path
    loaded = load_verified(bundle, allow_unsigned=allow_unsigned, keys=keys)
    try:
        run = read_attestations(bundle, PAYLOAD_TYPE)[0]
    except Unreadable as exc:
        raise BundleError(f"cannot read the run's attestation: {exc.detail}", Location(str(bundle))) from None
    claim = RunClaim.of(run)
    validation = claim.validation
    signed = loaded.evidence.get("validation")
    if not isinstance(validation, dict) or signed is None or validation != signed:
        raise BundleError("the bundle signs no validation status (written by a pytest-hetero without it, or "
                          "its evidence differs)", Location(str(bundle)), "rerun the gate with this version")
    vsas = read_vsas(bundle, gate_keys(keys) if loaded.verification == "verified" and keys else None, signed) \
        if signed.get("pools") else []
    untested: dict[str, list[UntestedEntry]] = {}
    for entry in loaded.evidence["untested"]["items"]:
        untested.setdefault(str(entry["keys"].get("resource")), []).append(entry)
    return {"bundle": bundle, "digest": hashlib.sha256(run.payload).hexdigest(),
            "verification": loaded.verification, "validation": signed, "vsas": vsas,
            "run": claim.run, "untested": untested}


resolve(__name__)
