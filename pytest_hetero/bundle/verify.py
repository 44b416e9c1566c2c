"""Offline verification of an evidence bundle: envelope, signatures, statement, subjects, manifest.

:func:`verify_bundle` never raises for a tampered bundle: it returns every problem found, so
``hetero verify`` can name each failing file or signature and why. :func:`load_evidence` is how
the other commands (baseline diff, merge) read a bundle: only after it verifies against
:func:`trusted_keys`.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from pytest_hetero.bundle.manifest import (
    ATTESTATION,
    MANIFEST,
    STATEMENT,
    Problem,
    _safe,
    check_manifest,
    sha256_file,
)
from pytest_hetero.bundle.signing import (
    PAYLOAD_TYPE,
    PREDICATE_PREFIX,
    PREDICATE_VERSIONS,
    SIGNOFF_TYPE,
    STATEMENT_TYPE,
    canonical,
    check_signature,
    envelope_bytes,
    keyid,
    pae,
    read_envelope,
    role_layers,
)
from pytest_hetero.errors import BundleError, Location


@dataclass
class Verification:
    """Result of :func:`verify_bundle`: ``problems`` (empty = verified), the run signer keyid if a
    trusted key signed without a role, ``roles`` {role: [sign-off claims by trusted keys]}, the
    statement (None when unreadable) and the number of manifest entries checked."""

    problems: list[Problem] = field(default_factory=list)
    run_signers: list[str] = field(default_factory=list)
    roles: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    statement: dict[str, Any] | None = None
    files: int = 0

    @property
    def ok(self) -> bool:
        """True when nothing failed."""
        return not self.problems


def _check_statement(statement: dict[str, Any], payload: bytes, bundle_dir: Path) -> list[Problem]:
    problems = []
    if statement.get("_type") != STATEMENT_TYPE:
        problems.append(Problem(ATTESTATION, "predicate", f"_type {statement.get('_type')!r} is not {STATEMENT_TYPE}"))
    ptype = str(statement.get("predicateType"))
    if not ptype.startswith(PREDICATE_PREFIX):
        problems.append(Problem(ATTESTATION, "predicate",
                                f"wrong predicate type {ptype!r}: not a pytest-hetero evidence bundle "
                                f"(expected {PREDICATE_PREFIX}{PREDICATE_VERSIONS[-1]})"))
    elif ptype[len(PREDICATE_PREFIX):] not in PREDICATE_VERSIONS:
        problems.append(Problem(ATTESTATION, "predicate",
                                f"unknown predicate version {ptype[len(PREDICATE_PREFIX):]!r} "
                                f"(this verifier knows {', '.join(PREDICATE_VERSIONS)})"))
    subjects = statement.get("subject")
    names = []
    for subject in subjects if isinstance(subjects, list) else []:
        name = str(subject.get("name", "")) if isinstance(subject, dict) else ""
        digest = subject.get("digest", {}).get("sha256") if isinstance(subject, dict) else None
        names.append(name)
        if not _safe(name) or not digest:
            problems.append(Problem(name or "?", "subject", "subject has an unsafe name or no sha256 digest"))
            continue
        try:
            actual, _ = sha256_file(bundle_dir / name)
        except OSError:
            problems.append(Problem(name, "missing", "subject of the signed statement is not in the bundle"))
            continue
        if actual != digest:
            problems.append(Problem(name, "modified", f"sha256 {actual[:16]}… does not match the signed "
                                                      f"statement's subject digest {digest[:16]}…"))
    if MANIFEST not in names:
        problems.append(Problem(MANIFEST, "subject", "the signed statement does not cover manifest.json"))
    try:
        if (bundle_dir / STATEMENT).read_bytes() != payload:
            problems.append(Problem(STATEMENT, "modified", "differs from the signed payload in the envelope"))
    except OSError:
        problems.append(Problem(STATEMENT, "missing", "the unsigned copy of the statement is missing"))
    return problems


def _check_signatures(envelope: dict[str, Any], payload: bytes, statement: dict[str, Any],
                      keys: dict[str, Ed25519PublicKey], result: Verification) -> None:
    sigs = envelope["signatures"]
    if not sigs:
        result.problems.append(Problem(ATTESTATION, "unsigned",
                                       "the bundle is UNSIGNED (no signature in the envelope)"))
        return
    digest = hashlib.sha256(payload).hexdigest()
    message = pae(PAYLOAD_TYPE, payload)
    for n, sig in enumerate(sigs, 1):
        kid = str(sig.get("keyid", "")) if isinstance(sig, dict) else ""
        claim = sig.get("signoff") if isinstance(sig, dict) else None
        role = f", role {claim.get('role')}" if isinstance(claim, dict) else ""
        label = f"signature {n} (keyid {kid[:16]}…{role})"
        public = keys.get(kid)
        if public is None:
            result.problems.append(Problem(label, "unknown_key", "signed by a key not passed with --key"))
            continue
        if not check_signature(public, str(sig.get("sig", "")), message):
            result.problems.append(Problem(label, "signature", "does not verify: the statement was altered "
                                                                "or the signature is corrupt"))
            continue
        if claim is None:
            result.run_signers.append(kid)
            continue
        if not isinstance(claim, dict) or not check_signature(public, str(sig.get("signoff_sig", "")),
                                                              pae(SIGNOFF_TYPE, canonical(claim))):
            result.problems.append(Problem(label, "signature", "sign-off claim (role, layers, time) does not verify"))
            continue
        owned = role_layers(statement, str(claim.get("role")))
        if claim.get("keyid") != kid or claim.get("statement_sha256") != digest:
            result.problems.append(Problem(label, "role", "sign-off claim is for another key or statement"))
        elif not claim.get("layers") or any(layer not in owned for layer in claim["layers"]):
            result.problems.append(Problem(label, "role", f"role vouches for {claim.get('layers')} but owns {owned}"))
        else:
            result.roles.setdefault(str(claim["role"]), []).append(claim)
    if not result.run_signers and not result.problems:
        # team sign-offs confirm a run's conclusions; they do not stand in for the run's own signature
        result.problems.append(Problem(ATTESTATION, "unsigned", "no run signature: the bundle was written UNSIGNED "
                                                                "and only team sign-offs were added"))


def verify_bundle(bundle_dir: Path, public_keys: list[Ed25519PublicKey],
                  require_roles: list[str] | tuple[str, ...] = ()) -> Verification:
    """Verify ``bundle_dir`` against the trusted ``public_keys``.

    Holds only if: the envelope parses; the run's own signature exists (team sign-offs alone do
    not make an unsigned bundle verify) and every signature is by
    a trusted key and verifies over DSSE PAE; sign-off claims verify and name layers their role
    owns; the statement is in-toto v1 with our predicate type at a known version; each subject
    (manifest.json, matrix copies) matches its digest; statement.intoto.json equals the payload;
    the manifest matches every file (see :func:`pytest_hetero.bundle.manifest.check_manifest`); and each
    role in ``require_roles`` has a valid sign-off.
    """
    result = Verification()
    if not bundle_dir.is_dir():
        result.problems.append(Problem(str(bundle_dir), "missing", "not a bundle folder"))
        return result
    keys = {keyid(k): k for k in public_keys}
    try:
        envelope, payload, statement = read_envelope(bundle_dir)
    except BundleError as exc:
        result.problems.append(Problem(ATTESTATION, "malformed", exc.message))
    else:
        result.statement = statement
        if (bundle_dir / ATTESTATION).read_bytes() != envelope_bytes(envelope):
            result.problems.append(Problem(ATTESTATION, "edited", "the envelope file is not byte for byte as "
                                           "pytest-hetero writes it (reformatted or edited after signing)"))
        _check_signatures(envelope, payload, statement, keys, result)
        result.problems.extend(_check_statement(statement, payload, bundle_dir))
    result.problems.extend(check_manifest(bundle_dir))
    try:
        result.files = len(json.loads((bundle_dir / MANIFEST).read_bytes())["files"])
    except (OSError, ValueError, KeyError, TypeError):
        result.files = 0
    for role in require_roles:
        if role not in result.roles:
            result.problems.append(Problem(f"role {role}", "role", "required sign-off is missing (pending)"))
    return result


def trusted_keys(paths: list[Path] | tuple[Path, ...] = (), private: Path | None = None) -> list[Any]:
    """Ed25519 public keys to verify bundles with: each PEM in ``paths``, every path in
    ``$HETERO_TRUST_KEYS`` (``os.pathsep``-separated), and the public half of ``private`` (the
    run's own ``--hetero-sign-key``). Raises BundleError (SigningKeyError) for an unreadable key."""
    from pytest_hetero.bundle.signing import load_private_key, load_public_key

    env = [Path(p) for p in os.environ.get("HETERO_TRUST_KEYS", "").split(os.pathsep) if p]
    keys = [load_public_key(Path(p)) for p in [*paths, *env]]
    if private is not None:
        keys.append(load_private_key(private).public_key())
    return keys


def load_evidence(path: Path, *, allow_unsigned: bool, keys: list[Any] | None = None) -> tuple[dict[str, Any], str]:
    """Read ``path`` (a bundle folder, or its ``evidence.json``) after verifying its signature
    against the trusted ``keys`` (see :func:`trusted_keys`).

    Returns (evidence document, ``"verified"``, ``"unsigned"`` or ``"unverified"``). Raises
    BundleError when the evidence is unreadable or the bundle does not verify (tampered,
    unknown signer); an unsigned bundle, or a signed one with no trusted key given, is
    accepted only with ``allow_unsigned`` and is reported as such.
    """
    path = Path(path)
    bundle = path.parent if path.is_file() else path
    evidence_file = bundle / "evidence.json"
    try:
        evidence = json.loads(evidence_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BundleError(f"cannot read evidence: {exc}", Location(str(evidence_file)),
                          "point at a report folder written by pytest-hetero") from None
    if not isinstance(evidence, dict) or "items" not in evidence or "untested" not in evidence:
        raise BundleError("not an evidence document", Location(str(evidence_file)))
    return evidence, _verify(bundle, allow_unsigned, keys or [])


def _signature_count(bundle: Path) -> int:
    from pytest_hetero.bundle.manifest import ATTESTATION

    try:
        return len(json.loads((bundle / ATTESTATION).read_text(encoding="utf-8")).get("signatures") or [])
    except (OSError, ValueError, AttributeError):
        return 0


def _verify(bundle: Path, allow_unsigned: bool, keys: list[Any]) -> str:
    if not _signature_count(bundle):
        if allow_unsigned:
            return "unsigned"
        raise BundleError("bundle is not signed, so it cannot be verified", Location(str(bundle)),
                          "sign runs with --hetero-sign-key, or pass --allow-unsigned "
                          "(pytest: --hetero-allow-unsigned) to accept it unverified")
    if not keys:
        if allow_unsigned:
            return "unverified"
        raise BundleError("bundle is signed but no trusted public key was given", Location(str(bundle)),
                          "pass --key PUB.pem (pytest: --hetero-sign-key or $HETERO_TRUST_KEYS)")
    result = verify_bundle(bundle, keys)
    if result.problems:
        text = "; ".join(str(p) for p in result.problems[:5])
        untrusted = all(p.kind == "unknown_key" for p in result.problems)
        hint = ("a signer's public key is not trusted here: pass it with --key PUB.pem (pytest: "
                "$HETERO_TRUST_KEYS)" if untrusted else "use the bundle exactly as the run wrote it")
        raise BundleError(f"bundle does not verify ({len(result.problems)} problem(s)): {text}",
                          Location(str(bundle)), hint)
    return "verified"
