"""``attestation.intoto.jsonl``: the run's attestation, then one attestation per team sign-off.

The file follows the in-toto bundle convention (JSON Lines, one DSSE envelope per line):

* **line 1, the run**: a DSSE envelope over the run's in-toto Statement (predicate type
  :data:`~pytest_hetero.bundle.signing.PREDICATE_TYPE`, subjects ``manifest.json`` and the matrix
  copies), signed by the gate's run key (no signature: an UNSIGNED bundle);
* **each later line, one sign-off**: a DSSE envelope over an in-toto Statement v1 whose only subject
  is ``statement.intoto.json`` with the sha256 of the run's statement (the exact payload bytes of
  line 1), whose ``predicateType`` is :data:`SIGNOFF_PREDICATE_TYPE`, and whose predicate is the
  team's decision (:func:`signoff_predicate`); it carries exactly one signature, the team's.

So any in-toto verifier sees what each signature covers: ``cosign verify-blob-attestation --type
<run predicate> … manifest.json`` accepts line 1 only, ``--type <sign-off predicate> …
statement.intoto.json`` a sign-off line only, and a team's key never verifies the run's line.

Every envelope has exactly the DSSE fields (``payload``, ``payloadType``, ``signatures`` of
``{keyid, sig}``); any other field is unsigned and makes the line malformed. Parsing is bounded
(:mod:`pytest_hetero.safeio`): a hostile file is a named :class:`~pytest_hetero.safeio.Unreadable`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import msgspec

from pytest_hetero import LAYERS
from pytest_hetero.bundle.manifest import ATTESTATION, STATEMENT
from pytest_hetero.declared import resolve
from pytest_hetero.errors import BundleError, Location
from pytest_hetero.evidence.model import utc_now
from pytest_hetero.safeio import MIB, Unreadable, loads_bounded, read_regular
from pytest_hetero.vocab import BLOCKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from pytest_hetero.bundle.intoto import ChainLink, Envelope, Signature, SignoffPredicate, SignoffStatement
    from pytest_hetero.bundle.signing import Signer

SIGNOFF_PREDICATE_TYPE = "https://pytest-hetero.dev/attestation/signoff/v1"
"""predicateType of a team sign-off statement."""
DECISIONS: tuple[str, ...] = ("accept", "accept-with-conditions", "accept-with-known-failures", "reject")
"""What a sign-off may decide; every decision but ``accept`` needs its text (conditions, known
failures accepted, or why rejected)."""
MAX_ATTESTATION_BYTES = 512 * MIB
"""The most ``attestation.intoto.jsonl`` may hold (a 100,000-item run's is under 100 MiB)."""
ENVELOPE_FIELDS = frozenset({"payload", "payloadType", "signatures"})
SIGNATURE_FIELDS = frozenset({"keyid", "sig"})


class DsseSignature(msgspec.Struct, frozen=True, kw_only=True):
    """One signature of a DSSE envelope, read once by :func:`dsse_signers` after the envelope's shape was checked:
    its ``keyid`` (None when the signature names none: DSSE leaves it optional) and its base64 ``sig``."""

    keyid: str | None = None
    sig: str


@dataclass(frozen=True)
class Attestation:
    """One parsed line of ``attestation.intoto.jsonl``: its 1-based ``line``, the ``raw`` bytes of
    the line (without newline), the DSSE ``envelope`` dict, the decoded ``payload`` bytes and the
    in-toto ``statement`` parsed from them; the statement's top-level fields read once by :func:`parse_line`
    (``statement_type``, ``subject`` and ``predicate_type_written`` as written, None when absent; ``predicate``
    the object, ``{}`` when absent or not an object) and the envelope's ``signers``."""

    line: int
    raw: bytes
    envelope: Envelope
    """Its shape checked by :func:`parse_line`: exactly the DSSE fields, with their JSON types."""
    payload: bytes
    statement: dict[str, Any]
    statement_type: object
    """The statement's ``_type`` as written (untrusted; None when absent)."""
    subject: object
    """The statement's ``subject`` as written (untrusted; None when absent)."""
    predicate_type_written: object
    """The statement's ``predicateType`` as written (untrusted; None when absent)."""
    predicate: dict[str, Any]
    """The statement's ``predicate`` (``{}`` when absent or not an object)."""
    signers: tuple[DsseSignature, ...]
    """The envelope's signatures, in order."""

    @property
    def predicate_type(self) -> str:
        """The statement's ``predicateType`` (``""`` when absent or not a string)."""
        value = self.predicate_type_written
        return value if isinstance(value, str) else ""

    @property
    def signatures(self) -> list[Signature]:
        """The envelope's ``[{"keyid", "sig"}]`` (shape checked by :func:`parse_line`)."""
        return self.envelope["signatures"]


class _WrittenEnvelope(msgspec.Struct, frozen=True, kw_only=True):
    """A DSSE envelope's fields as written (untrusted; None when absent), which :func:`_envelope_shape` checks."""

    payload_type: object = msgspec.field(name="payloadType", default=None)
    payload: object = None
    signatures: object = None


class _WrittenSignature(msgspec.Struct, frozen=True, kw_only=True):
    """A DSSE signature's fields as written (untrusted): ``sig`` (None when absent) and the optional ``keyid``
    (UNSET when absent, which DSSE allows; null is not a keyid)."""

    sig: object = None
    keyid: object = msgspec.UNSET


def _envelope_shape(envelope: Any, payload_type: str) -> str | None:
    """What is wrong with the DSSE envelope's shape (None when it is exactly DSSE)."""
    if not isinstance(envelope, dict):
        return "not a JSON object"
    extra = sorted(set(envelope) - ENVELOPE_FIELDS)
    if extra:
        return f"unsigned field(s) {', '.join(map(repr, extra))} beside the DSSE fields"
    said = msgspec.convert(envelope, _WrittenEnvelope)  # a JSON object always fits: each field any JSON value
    if said.payload_type != payload_type:
        return f"payloadType {str(said.payload_type)[:80]!r}, expected {payload_type}"
    if not isinstance(said.payload, str) or not isinstance(said.signatures, list):
        return "payload is not a string or signatures is not a list"
    for n, sig in enumerate(said.signatures, 1):
        written = msgspec.convert(sig, _WrittenSignature) if isinstance(sig, dict) else None
        if written is None or not isinstance(written.sig, str) \
                or not isinstance(written.keyid, (str, msgspec.UnsetType)):
            return f"signature {n} is not {{keyid, sig}} strings"
        extra = sorted(set(sig) - SIGNATURE_FIELDS)
        if extra:
            return f"signature {n} has unsigned field(s) {', '.join(map(repr, extra))}"
    return None


def dsse_envelope(value: object, payload_type: str) -> Envelope:
    """``value`` (parsed, untrusted JSON) as a DSSE envelope of ``payload_type``: exactly the DSSE fields
    (``payload`` a string, ``payloadType`` ``payload_type``, ``signatures`` a list of ``{sig, keyid}`` strings,
    ``keyid`` optional), nothing else. The one check of an envelope's shape, for the bundle's attestation lines
    (:func:`parse_line`) and a trust policy's signature file
    (:func:`pytest_hetero.bundle.policy.load_policy`). Raises ValueError saying what is wrong."""
    problem = _envelope_shape(value, payload_type)
    if problem:
        raise ValueError(problem)
    return cast("Envelope", value)  # the shape was checked above, field by field


def dsse_signers(envelope: Envelope) -> tuple[DsseSignature, ...]:
    """The signatures of an envelope whose shape :func:`dsse_envelope` checked, in order."""
    # its shape checked: each signature {sig: string, keyid: optional string}, so converting cannot fail
    return msgspec.convert(envelope["signatures"], tuple[DsseSignature, ...])


class WrittenDigest(msgspec.Struct, frozen=True, kw_only=True):
    """An in-toto ``DigestSet`` (a subject's or an input attestation's ``digest``) as written: its ``sha256``
    (untrusted; None when absent)."""

    sha256: object = None


class WrittenSubject(msgspec.Struct, frozen=True, kw_only=True):
    """An in-toto ``ResourceDescriptor`` (a statement's subject) as written: its ``name`` and ``digest`` (untrusted;
    None when absent)."""

    name: object = None
    digest: object = None


class _StatementTop(msgspec.Struct, frozen=True, kw_only=True):
    """An in-toto Statement's top-level fields, each as written (untrusted JSON; None when absent): what
    :func:`parse_line` reads of a statement before anything is checked."""

    type_: object = msgspec.field(name="_type", default=None)
    subject: object = None
    predicate_type: object = msgspec.field(name="predicateType", default=None)
    predicate: object = None


def parse_line(raw: bytes, line: int, payload_type: str) -> Attestation:
    """Parse one JSON line holding a DSSE envelope over an in-toto JSON statement.

    Raises :class:`Unreadable` (``malformed``) naming the line when it is not JSON, nests too
    deeply, is not exactly a DSSE envelope (unsigned extra fields included), its payload is not
    base64 or not a JSON object.
    """
    value = loads_bounded(raw, f"line {line}")
    try:
        envelope = dsse_envelope(value, payload_type)
    except ValueError as exc:
        raise Unreadable("malformed", f"line {line}: {exc}") from None
    try:
        payload = base64.b64decode(envelope["payload"], validate=True)
    except (binascii.Error, ValueError):
        raise Unreadable("malformed", f"line {line}: payload is not base64") from None
    statement = loads_bounded(payload, f"line {line}'s payload")
    if not isinstance(statement, dict):
        raise Unreadable("malformed", f"line {line}: the payload is not a JSON object")
    top = msgspec.convert(statement, _StatementTop)  # every field is any JSON value: a JSON object always fits
    predicate = top.predicate
    return Attestation(line, raw, envelope, payload, statement, top.type_, top.subject, top.predicate_type,
                       predicate if isinstance(predicate, dict) else {}, dsse_signers(envelope))


def read_attestations(bundle_dir: Path, payload_type: str) -> list[Attestation]:
    """Every line of the bundle's ``attestation.intoto.jsonl``, parsed (line 1 is the run's).

    Raises :class:`Unreadable`: the file is missing, not a regular file, over
    :data:`MAX_ATTESTATION_BYTES`, empty, not ending in a newline (``edited``), or a line is malformed
    (see :func:`parse_line`).
    """
    data = read_regular(bundle_dir, ATTESTATION, MAX_ATTESTATION_BYTES)
    if not data:
        raise Unreadable("malformed", "the file holds no envelope")
    if not data.endswith(b"\n"):
        raise Unreadable("edited", "the last line has no newline, as every line is written: the file was "
                                   "truncated or edited")
    lines = data[:-1].split(b"\n")
    return [parse_line(raw, n, payload_type) for n, raw in enumerate(lines, 1)]


def read_envelope(bundle_dir: Path) -> tuple[Envelope, bytes, dict[str, Any]]:
    """The run's attestation (line 1): (DSSE envelope, payload bytes, statement dict).

    Raises BundleError naming the file when it is missing, hostile or malformed."""
    from pytest_hetero.bundle.signing import PAYLOAD_TYPE

    try:
        run = read_attestations(bundle_dir, PAYLOAD_TYPE)[0]
    except Unreadable as exc:
        raise BundleError(f"envelope is {exc.kind}: {exc.detail}", Location(str(bundle_dir / ATTESTATION)),
                          "restore the attestation from the original bundle") from None
    return run.envelope, run.payload, run.statement


class _RunPredicateTop(msgspec.Struct, frozen=True, kw_only=True):
    """The fields :class:`RunClaim` reads of the run's predicate, each as written (untrusted; None when absent)."""

    owners: object = None
    counts: object = None
    run: object = None
    verdict: object = None
    inputs_not_kept: object = None
    validation: object = None


class _PredicateRunTop(msgspec.Struct, frozen=True, kw_only=True):
    """The fields :class:`RunClaim` reads of the predicate's ``run`` object, as written (None when absent)."""

    id: object = None
    finished_at: object = None
    finished_at_recovered: object = None


@dataclass(frozen=True)
class RunClaim:
    """What is read of the run's signed predicate, parsed once from the untrusted statement
    (:meth:`of`): ``owners`` ({matrix: {layer: team}}), ``counts`` ({layer: {status: n}}), and the run's
    ``run_id``, ``verdict`` and ``finished_at`` as the predicate states them (a sign-off repeats them as they
    are). An owners or counts entry that is not an object, a team that is not a string and a count that is
    not an integer are left out. ``run_stated``: the predicate has a ``run`` object; ``finished_at_recovered``:
    it says exactly ``true``; ``inputs_not_kept`` and ``validation`` as written (None when absent); ``run`` the
    predicate's ``run`` object as written (``{}`` when absent or not an object)."""

    owners: dict[str, dict[str, str]]
    counts: dict[str, dict[str, int]]
    run: dict[str, Any] = field(default_factory=dict)
    run_id: object = None
    verdict: object = None
    finished_at: object = None
    run_stated: bool = False
    finished_at_recovered: bool = False
    inputs_not_kept: object = None
    validation: object = None

    @classmethod
    def of(cls, statement: Attestation) -> RunClaim:
        """The claim of the run's line ``statement`` (its parsed, untrusted predicate)."""
        # a JSON object always fits these shapes (each field any JSON value): converting cannot fail
        predicate = msgspec.convert(statement.predicate, _RunPredicateTop)
        owners, counts, found = predicate.owners, predicate.counts, predicate.run
        run = found if isinstance(found, dict) else {}
        said = msgspec.convert(run, _PredicateRunTop)
        return cls(
            {str(m): {str(layer): team for layer, team in per.items() if isinstance(team, str)}
             for m, per in owners.items() if isinstance(per, dict)} if isinstance(owners, dict) else {},
            {str(layer): {str(status): n for status, n in per.items() if isinstance(n, int)}
             for layer, per in counts.items() if isinstance(per, dict)} if isinstance(counts, dict) else {}, run,
            said.id, predicate.verdict, said.finished_at, isinstance(found, dict),
            said.finished_at_recovered is True, predicate.inputs_not_kept, predicate.validation)


def role_layers(claim: RunClaim, role: str) -> list[str]:
    """Layers (in LAYERS order) that ``role`` owns in any matrix of the signed run predicate."""
    owned = {layer for per in claim.owners.values() for layer, team in per.items() if team == role}
    return [layer for layer in LAYERS if layer in owned]


def failing_counts(claim: RunClaim, layers: list[str]) -> dict[str, int]:
    """{layer: items failed, errored or blocked} for ``layers`` per the run predicate's counts
    (layers with none are left out)."""
    out = {}
    for layer in layers:
        per = claim.counts.get(layer, {})
        n = sum(int(per.get(s, 0)) for s in sorted(BLOCKING))
        if n:
            out[layer] = n
    return out


def decision_problem(decision: str, text: str | None, failing: dict[str, int]) -> str | None:
    """Why ``decision`` (with ``text``) cannot stand over ``failing`` ({layer: n}), or None.

    Rules: the decision is one of :data:`DECISIONS`; every decision but ``accept`` states its text;
    accepting layers with failed, errored or blocked items must say ``accept-with-known-failures``
    (or reject); ``accept-with-known-failures`` over layers without any is refused too."""
    if decision not in DECISIONS:
        return f"decision {decision!r} is not one of {', '.join(DECISIONS)}"
    if decision != "accept" and not (text or "").strip():
        return f"decision {decision} needs its text (--text: the conditions, the failures accepted, or why)"
    bad = sum(failing.values())
    if bad and decision in ("accept", "accept-with-conditions"):
        where = ", ".join(f"{layer}: {n}" for layer, n in failing.items())
        return (f"{bad} item(s) failed, errored or were blocked in the layers signed ({where}): "
                "say accept-with-known-failures (naming them in --text) or reject")
    if not bad and decision == "accept-with-known-failures":
        return "no item failed in the layers signed: nothing to accept as a known failure (use accept)"
    return None


def chain_link(sequence: int, previous_line: bytes) -> ChainLink:
    """The ``chain`` member of the ``sequence``-th sign-off (1-based): ``{"sequence": n, "previous": sha256
    hex of the line before it}`` (``previous_line``: that line's bytes without its newline; for the first
    sign-off, the run's line). Signed with the sign-off, it makes each sign-off vouch for every line before
    it: a line removed, replaced or reordered breaks the chain of the next one."""
    return {"sequence": sequence, "previous": hashlib.sha256(previous_line).hexdigest()}


def chain_head(lines: list[Attestation]) -> str:
    """``N:<sha256 of the last line>`` for the attestations ``lines`` (N sign-offs): what ``hetero sign``
    prints and ``hetero verify --signoff-head`` pins, so the removal of the latest sign-offs (which no later
    line can reveal) is caught against a record kept outside the bundle."""
    return f"{len(lines) - 1}:{hashlib.sha256(lines[-1].raw).hexdigest()}"


def signoff_predicate(claim: RunClaim, role: str, layers: list[str], decision: str,
                      text: str | None, chain: ChainLink | None = None) -> SignoffPredicate:
    """The predicate of a sign-off: ``{"role", "layers", "decision", "conditions", "signed_at", "run":
    {"id", "verdict", "finished_at"}, "failing": {layer: n}, "chain": {"sequence", "previous"}}``
    (``conditions`` is the decision's text, None for a plain accept without text; ``chain``: see
    :func:`chain_link`)."""
    out: SignoffPredicate = {
        "role": role, "layers": layers, "decision": decision, "conditions": (text or "").strip() or None,
        "signed_at": utc_now(), "run": {"id": claim.run_id, "verdict": claim.verdict, "finished_at": claim.finished_at},
        "failing": failing_counts(claim, layers)}
    if chain is not None:
        out["chain"] = chain
    return out


def _signoff_refusal(bundle_dir: Path, message: str, hint: str = "") -> BundleError:
    return BundleError(message, Location(str(bundle_dir / ATTESTATION)), hint)


def add_signoff(bundle_dir: Path, key: Ed25519PrivateKey | Signer, role: str, decision: str, text: str | None = None,
                layers: list[str] | None = None, *, supersede: bool = False) -> SignoffStatement:
    """Append ``role``'s sign-off, signed by ``key`` (a private key, or a ``signing.Signer``: a key file or an
    external signer command), as a new line of the bundle's attestations;
    return its in-toto statement.

    ``layers`` defaults to every layer the role owns in the run predicate. Raises BundleError when
    the attestations do not read, the role owns no layer or not one asked for, the decision
    cannot stand over the layers' failures (:func:`decision_problem`), or this key already
    signed for this role and ``supersede`` is false (with it, the new line is the key's later decision:
    verification counts only a key's latest sign-off, see ``signoff_check.current``).
    """
    from pytest_hetero.bundle.signing import (
        PAYLOAD_TYPE,
        STATEMENT_TYPE,
        Signer,
        envelope_bytes,
        envelope_for,
        keyid,
    )
    from pytest_hetero.bundle.signoff_check import SignoffClaim

    try:
        lines = read_attestations(bundle_dir, PAYLOAD_TYPE)
    except Unreadable as exc:
        raise _signoff_refusal(bundle_dir, f"cannot read the attestations: {exc.kind}: {exc.detail}") from None
    run = lines[0]
    claim = RunClaim.of(run)
    owned = role_layers(claim, role)
    if not owned:
        teams = sorted({t for per in claim.owners.values() for t in per.values()})
        raise _signoff_refusal(bundle_dir, f"role {role!r} owns no layer in this bundle's matrices",
                               f"owner roles here: {', '.join(teams)}")
    chosen: list[str] = [x for x in LAYERS if x in (layers or owned)]
    foreign = [layer for layer in chosen if layer not in owned]
    if foreign:
        raise _signoff_refusal(bundle_dir, f"role {role!r} cannot vouch for {', '.join(foreign)}: it owns only "
                               f"{', '.join(owned)}", "each team signs the layers it owns")
    why = decision_problem(decision, text, failing_counts(claim, chosen))
    if why:
        raise _signoff_refusal(bundle_dir, f"sign-off refused: {why}")
    kid = key.keyid if isinstance(key, Signer) else keyid(key.public_key())
    for other in lines[1:]:
        signed = SignoffClaim.of(other)
        if signed.role_written == role and any(s.keyid == kid for s in other.signers):
            if not supersede:
                raise _signoff_refusal(
                    bundle_dir, f"key {kid[:16]}… already signed for role {role!r} "
                    f"({signed.decision_written!r} at {signed.signed_at_written})",
                    "to record a later decision that supersedes it (the earlier line stays, superseded), sign "
                    "again with --supersede")
    statement: SignoffStatement = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": STATEMENT, "digest": {"sha256": hashlib.sha256(run.payload).hexdigest()}}],
        "predicateType": SIGNOFF_PREDICATE_TYPE,
        "predicate": signoff_predicate(claim, role, chosen, decision, text,
                                       chain_link(len(lines), lines[-1].raw))}
    payload = json.dumps(statement, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                         allow_nan=False).encode("utf-8")
    line = envelope_bytes(envelope_for(payload, key))
    fd = os.open(bundle_dir / ATTESTATION, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
    return statement


resolve(__name__)
