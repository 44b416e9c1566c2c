"""Team sign-off lines checked: well-formed sign-offs of this run, bound to their role's keys by the trust policy.

:func:`check_signoffs` turns each sign-off line of ``attestation.intoto.jsonl`` (see
:mod:`pytest_hetero.bundle.attestation`) into a :class:`SignOff`: who signed (keyid, and the people's
names from the policy), what (role, layers, decision, conditions, time) and whether it is verified,
with the reason when not. :func:`role_state` folds a role's verified sign-offs into one state, a key's later sign-off
superseding its earlier ones.
``hetero verify`` and the sign-off view (:mod:`pytest_hetero.bundle.signoff`) both use it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from pytest_hetero import LAYERS
from pytest_hetero.bundle.attestation import (
    DECISIONS,
    SIGNOFF_PREDICATE_TYPE,
    Attestation,
    RunClaim,
    decision_problem,
    failing_counts,
    role_layers,
)
from pytest_hetero.bundle.manifest import STATEMENT, Problem
from pytest_hetero.bundle.signing import PAYLOAD_TYPE, STATEMENT_TYPE, check_signature, envelope_bytes, pae
from pytest_hetero.declared import resolve

if TYPE_CHECKING:
    from pytest_hetero.bundle.policy import TrustPolicy
    from pytest_hetero.evidence.views import SignedView

NO_POLICY = "no trust policy given (--policy): who signed is not checked"


@dataclass
class SignOff:
    """One sign-off line as checked: who (``keyid``, ``names`` from the policy), the claim (``role``,
    ``layers``, ``decision``, ``conditions``, ``signed_at``) and whether it is ``verified`` (else
    ``why_unverified``)."""

    line: int
    keyid: str
    role: str
    layers: list[str]
    decision: str
    conditions: str | None
    signed_at: str | None
    names: list[str] = field(default_factory=list)
    verified: bool = False
    why_unverified: str | None = None

    def view(self) -> SignedView:
        """The entry of the sign-off view's ``signed`` list (see :mod:`pytest_hetero.bundle.signoff`)."""
        return {"keyid": self.keyid, "names": list(self.names), "decision": self.decision,
                "conditions": self.conditions, "signed_at": self.signed_at, "verified": self.verified,
                "why_unverified": self.why_unverified, "layers": list(self.layers)}


def current(signed: list[SignOff]) -> list[SignOff]:
    """The verified sign-offs of ``signed`` that stand: of several by one key (``hetero sign --supersede``),
    only the latest (by its signed ``signed_at``, then line) counts; the earlier are superseded."""
    latest: dict[str, SignOff] = {}
    for s in signed:
        if s.verified:
            prev = latest.get(s.keyid)
            if prev is None or (s.signed_at or "", s.line) >= (prev.signed_at or "", prev.line):
                latest[s.keyid] = s
    return sorted(latest.values(), key=lambda s: s.line)


def role_state(signed: list[SignOff]) -> str:
    """A role's state from its sign-offs (only verified ones that stand count, see :func:`current`):
    ``pending``, ``rejected`` (any reject), ``accepted_with_known_failures``, ``accepted_with_conditions``
    or ``accepted``."""
    decisions = {s.decision for s in current(signed)}
    for decision, state in (("reject", "rejected"), ("accept-with-known-failures", "accepted_with_known_failures"),
                            ("accept-with-conditions", "accepted_with_conditions"), ("accept", "accepted")):
        if decision in decisions:
            return state
    return "pending"


class SignedChainLink(msgspec.Struct, frozen=True, kw_only=True):
    """A sign-off's signed ``chain`` (:class:`~pytest_hetero.bundle.intoto.ChainLink`, written by
    :func:`~pytest_hetero.bundle.attestation.chain_link`), read from the untrusted predicate: its 1-based
    ``sequence`` (an integer; a boolean is not one) and ``previous``, the sha256 hex of the line before it."""

    sequence: int
    previous: str


class _SignoffPredicateTop(msgspec.Struct, frozen=True, kw_only=True):
    """The fields :class:`SignoffClaim` reads of a sign-off's predicate, each as written (untrusted; None when
    absent or null: :meth:`SignoffClaim.of` tells the two apart where it matters)."""

    role: object = None
    layers: object = None
    decision: object = None
    conditions: object = None
    signed_at: object = None
    chain: object = None


@dataclass(frozen=True)
class SignoffClaim:
    """What a sign-off line's predicate says, parsed once from the untrusted statement (:meth:`of`): the ``role``
    and ``decision`` as text (``""`` when absent), the ``layers`` that are text (``[]`` when not a list),
    ``conditions`` and ``signed_at`` (None when absent or not text), the signed ``chain`` (None when it is not
    ``{sequence: int, previous: text}``, :class:`SignedChainLink`), and whether the predicate is ``well_formed``:
    ``{role, layers, decision, conditions, signed_at}`` with a text role, a non-empty list of layers, a decision of
    :data:`~pytest_hetero.bundle.attestation.DECISIONS`, text or null conditions and a text time (then ``role``,
    ``layers`` and ``decision`` are exactly as written); ``role_written``, ``decision_written`` and
    ``signed_at_written`` as written (None when absent)."""

    role: str
    layers: list[str]
    decision: str
    conditions: str | None
    signed_at: str | None
    chain: SignedChainLink | None
    well_formed: bool
    role_written: object = None
    decision_written: object = None
    signed_at_written: object = None

    @classmethod
    def of(cls, att: Attestation) -> SignoffClaim:
        """The claim of the sign-off line ``att`` (its statement's predicate, untrusted)."""
        predicate = att.predicate
        # a JSON object always fits (each field any JSON value): converting cannot fail
        said = msgspec.convert(predicate, _SignoffPredicateTop)
        role, layers, decision = said.role, said.layers, said.decision
        conditions, signed_at = said.conditions, said.signed_at
        try:
            link: SignedChainLink | None = msgspec.convert(said.chain, SignedChainLink)
        except msgspec.ValidationError:  # absent, or not {sequence: int, previous: text}: no chain
            link = None
        well_formed = isinstance(role, str) and isinstance(layers, list) and bool(layers) \
            and all(x in LAYERS for x in layers) and decision in DECISIONS \
            and isinstance(conditions, (str, type(None))) and isinstance(signed_at, str)
        return cls(role=str(role if "role" in predicate else ""),
                   layers=[x for x in layers if isinstance(x, str)] if isinstance(layers, list) else [],
                   decision=str(decision if "decision" in predicate else ""),
                   conditions=conditions if isinstance(conditions, str) else None,
                   signed_at=signed_at if isinstance(signed_at, str) else None, chain=link, well_formed=well_formed,
                   role_written=role, decision_written=decision, signed_at_written=signed_at)


def _signoff_of(att: Attestation, claim: SignoffClaim) -> SignOff:
    sigs = att.signers
    return SignOff(line=att.line, keyid=(sigs[0].keyid or "") if sigs else "", role=claim.role,
                   layers=list(claim.layers), decision=claim.decision, conditions=claim.conditions,
                   signed_at=claim.signed_at)


def _signoff_shape(att: Attestation, signed: SignoffClaim, run_digest: str, claim: RunClaim) -> str | None:
    """What makes a sign-off line wrong whatever key signed it (None when well-formed)."""
    if att.predicate_type != SIGNOFF_PREDICATE_TYPE or att.statement_type != STATEMENT_TYPE:
        return (f"not a sign-off statement (predicateType {att.predicate_type[:120]!r}); every line after the "
                f"first must be {SIGNOFF_PREDICATE_TYPE}")
    if att.subject != [{"name": STATEMENT, "digest": {"sha256": run_digest}}]:
        return "its subject is not this run's statement.intoto.json (a sign-off of another run or statement)"
    if len(att.signatures) != 1:
        return f"{len(att.signatures)} signatures: a sign-off carries exactly its team's one"
    if not signed.well_formed:
        return "the predicate is not {role, layers, decision, conditions, signed_at}"
    role, layers = signed.role, signed.layers
    owned = role_layers(claim, role)
    if any(x not in owned for x in layers):
        return f"role {role!r} vouches for {', '.join(layers)} but owns {', '.join(owned) or 'no layer'}"
    return decision_problem(signed.decision, signed.conditions, failing_counts(claim, layers))


def _bind(signoff: SignOff, att: Attestation, policy: TrustPolicy) -> str | None:
    """Check the sign-off's key against the policy for its role; the reason it does not hold, or None."""
    role = policy.roles.get(signoff.role)
    kid = signoff.keyid
    if role is None:
        return f"role {signoff.role!r} is not in the trust policy {policy.name}"
    key = role.keys.get(kid)
    if key is None:
        if kid in policy.gate_keyids:
            return f"the gate key cannot sign as {signoff.role!r}: the policy does not allow it"
        others = [r.name for r in policy.roles.values() if kid in r.keys]
        if others:
            return (f"signed with the key of {', '.join(others)} ({', '.join(policy.names_of(kid))}), "
                    f"not of {signoff.role!r}")
        return f"signed by a key the policy {policy.name} does not give {signoff.role!r}"
    if not check_signature(key.public, att.signatures[0]["sig"], pae(PAYLOAD_TYPE, att.payload)):
        return "the signature does not verify: the sign-off was altered or the signature is corrupt"
    signoff.names = list(key.names)
    return None


def _chain_problem(signed: SignoffClaim, sequence: int, previous: bytes) -> str | None:
    """Why the ``sequence``-th sign-off line (its claim ``signed``) breaks the chain of sign-offs (None when it
    holds): its signed ``chain`` must name its own place and the sha256 of the line before it (``previous``)."""
    chain = signed.chain
    if chain is None:
        return ("it carries no chain {sequence, previous}: a removed sign-off before it could not be told, so it "
                "is not counted (sign again with this hetero)")
    said = chain.sequence
    if said > sequence:
        return (f"the chain of sign-offs is broken: it is sign-off {sequence} in the file but was signed as sign-off "
                f"{said}: {said - sequence} sign-off line(s) before it were removed")
    if said < sequence:
        return (f"the chain of sign-offs is broken: it is sign-off {sequence} in the file but was signed as sign-off "
                f"{said}: lines were inserted or reordered before it")
    if chain.previous != hashlib.sha256(previous).hexdigest():
        return ("the chain of sign-offs is broken: the line before it is not the one it was signed after (a sign-off "
                "before it was removed, replaced or reordered)")
    return None


def check_signoffs(lines: list[Attestation], run_digest: str, claim: RunClaim,
                   policy: TrustPolicy | None, run_line: bytes | None = None) -> tuple[list[SignOff], list[Problem]]:
    """Step 6: each sign-off line (``lines`` after the run's) as a :class:`SignOff`, and the problems;
    ``run_digest`` is the sha256 of the run's statement, ``claim`` what its signed predicate says
    (:class:`~pytest_hetero.bundle.attestation.RunClaim`).

    A line that is not a well-formed sign-off of this run is a problem whatever the policy. With
    ``policy``, a sign-off holds only when signed by one of its role's keys (the gate key only where
    the role allows it) and its signature verifies; one that does not is a problem. Without a policy
    no sign-off is verified (``why_unverified`` says so) and none is a problem for that reason.

    With ``run_line`` (the run's line as written), the sign-offs must chain (:func:`_chain_problem`): one
    removed, replaced or reordered is a ``signoff_chain`` problem on the next line, whatever the policy; the
    removal of the latest ones is caught by ``hetero verify --signoff-head``.
    """
    out: list[SignOff] = []
    problems: list[Problem] = []
    previous = run_line
    for sequence, att in enumerate(lines, 1):
        signed = SignoffClaim.of(att)
        signoff = _signoff_of(att, signed)
        label = f"sign-off line {att.line} (role {signoff.role[:60]}, keyid {signoff.keyid[:16]}…)"
        why = _signoff_shape(att, signed, run_digest, claim)
        kind = "signoff"
        if why is None and att.raw != envelope_bytes(att.envelope).rstrip(b"\n"):
            why = "the line is not byte for byte as hetero sign writes it (reformatted or edited)"
        if why is None and previous is not None:
            why = _chain_problem(signed, sequence, previous)
            kind = "signoff_chain" if why else kind
        previous = att.raw
        if why is None and policy is not None:
            why, kind = _bind(signoff, att, policy), "role"
        if why is not None:
            problems.append(Problem(label, kind, why))
        signoff.verified = why is None and policy is not None
        signoff.why_unverified = None if signoff.verified else why or NO_POLICY
        out.append(signoff)
    return out, problems


resolve(__name__)
