"""Who owns which layer, who signed, and whether that is verified: the sign-off view for renderers.

The view is the data contract every renderer of sign-off uses (report.html, summary.md, ``hetero
render``, the dossier); field names are stable::

    {"source": "run_end" | "attestations",
     "run_signer": keyid | None, "run_verified": bool, "signer_error": str | None,
     "verification": "verified" | "unverified" | "unsigned",
     "verified_by": keyid | None,              # the trusted key the run's signature verified with
     "policy": {"name", "sha256", "trusted_by"} | None,
     "note": str,                              # what a reader must know about this view
     "roles": [{"role": team, "layers": [layer, …], "owner": team,
                "signed": [{"keyid", "names", "decision", "conditions", "signed_at",
                            "verified", "why_unverified", "layers"}],
                "state": "pending" | "accepted" | "accepted_with_conditions"
                         | "accepted_with_known_failures" | "rejected"}]}

``role`` is the owner team as the matrix names it in ``spec.owners`` (what ``hetero sign --role``
takes and the trust policy's ``roles`` keys); ``owner`` is that same team name, kept for renderers
keyed on owners. ``names`` come from the trust policy and are empty unless the sign-off is verified;
``state`` counts verified sign-offs only.

``verification`` is what every rendering states before any claim: ``verified`` (the run's signature
checked with ``verified_by``, a trusted key; at ``run_end`` the gate's own key, which it just
signed with), ``unverified`` (a signature is present but was not checked with a trusted key, or did
not verify: nothing the evidence says is proven) or ``unsigned``.

``source`` says where the sign-off state comes from:

* ``run_end`` (:func:`run_signoff`): the bundle being written. Sign-offs are separate attestations
  appended *after* the run (``hetero sign``), and report.html/summary.md are covered by the run's
  signature, so they are never re-rendered on sign. They show the owner teams and say that sign-off
  is read from the attestations at view time; they never show a team as ``pending``.
* ``attestations`` (:func:`bundle_signoff`): read back at view time (``hetero render --key
  --policy``), each sign-off checked against the trust policy.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_hetero import LAYERS
from pytest_hetero.errors import BundleError, MatrixError
from pytest_hetero.evidence.views import RoleView, SignoffView, Verification
from pytest_hetero.settings import SignCommand

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from pytest_hetero.bundle.policy import TrustPolicy
    from pytest_hetero.bundle.signoff_check import SignOff
    from pytest_hetero.evidence.document import EvidenceDocument
    from pytest_hetero.evidence.inputs import RunInputs

STATES: tuple[str, ...] = ("pending", "accepted", "accepted_with_conditions", "accepted_with_known_failures",
                           "rejected")
RUN_END_NOTE = ("Written at the end of the run. Team sign-offs are separate attestations added to "
                "attestation.intoto.jsonl afterwards, so this page cannot show them: see who signed with "
                "`hetero render BUNDLE --key GATE.pub --policy POLICY` or `hetero verify … --policy POLICY`.")


def owners_from_items(evidence: EvidenceDocument) -> dict[str, dict[str, str]]:
    """{matrix prefix: {layer: owner}} as seen on reported items (fallback when matrices are gone)."""
    owners: dict[str, dict[str, str]] = {}
    for item in evidence["items"]:
        owners.setdefault(item["matrix"], {}).setdefault(item["layer"], item["owner"])
    return owners


def matrix_owners(evidence: EvidenceDocument, inputs: RunInputs) -> dict[str, dict[str, str]]:
    """{matrix name: {layer: team}} from the run's matrices, else (a matrix that no longer loads)
    from the owners on its reported items."""
    owners: dict[str, dict[str, str]] = {}
    fallback: dict[str, dict[str, str]] | None = None  # walks every item: only when a matrix is gone
    for m in evidence["matrices"]:
        try:
            owners[m["name"]] = dict(inputs.matrix(m).owners)
        except MatrixError:
            fallback = owners_from_items(evidence) if fallback is None else fallback
            owners[m["name"]] = fallback.get(m["prefix"], {})
    return owners


def _teams(owners: dict[str, dict[str, str]]) -> dict[str, set[str]]:
    teams: dict[str, set[str]] = {}
    for per in owners.values():
        if isinstance(per, dict):
            for layer, team in per.items():
                if team and isinstance(team, str):
                    teams.setdefault(team, set()).add(layer)
    return teams


def signoff_context(owners: dict[str, dict[str, str]], run_signer: str | None, signer_error: str | None,
                    signoffs: list[SignOff] | None = None, *, source: str = "run_end", run_verified: bool = False,
                    policy: TrustPolicy | None = None, note: str = RUN_END_NOTE) -> SignoffView:
    """The sign-off view (shape in the module docstring) for the owner teams in ``owners``
    ({matrix: {layer: team}}) and the checked ``signoffs``
    (:class:`~pytest_hetero.bundle.signoff_check.SignOff`, from
    :func:`~pytest_hetero.bundle.signoff_check.check_signoffs`)."""
    from pytest_hetero.bundle.signoff_check import role_state

    roles: list[RoleView] = []
    teams = _teams(owners)
    for team in sorted(teams):
        mine = [s for s in signoffs or [] if s.role == team]
        roles.append({"role": team, "layers": [x for x in LAYERS if x in teams[team]], "owner": team,
                      "signed": [s.view() for s in mine], "state": role_state(mine)})
    # at run end the gate has just signed with its own key: that is the verified signer
    verified = bool(run_signer) and (run_verified or source == "run_end")
    verification: Verification = "verified" if verified else "unverified" if run_signer else "unsigned"
    return {"source": source, "run_signer": run_signer, "run_verified": run_verified, "signer_error": signer_error,
            "verification": verification, "verified_by": run_signer if verification == "verified" else None,
            "policy": None if policy is None else {"name": policy.name, "sha256": policy.sha256,
                                                   "trusted_by": policy.trusted_by},
            "note": note, "roles": roles}


def run_signer(key_path: Path | SignCommand | None) -> tuple[str | None, str | None]:
    """``(keyid, None)`` of the run key at ``key_path`` (or of an external signer), or ``(None, why it is
    unsigned)``."""
    from pytest_hetero.bundle.signing import load_signer

    if key_path is None:
        return None, "no --hetero-sign-key / HETERO_SIGN_KEY given"
    try:
        return load_signer(key_path).keyid, None
    except BundleError as exc:
        return None, f"signing key refused: {exc.message}"


def run_signoff(owners: dict[str, dict[str, str]], key_path: Path | SignCommand | None) -> SignoffView:
    """The sign-off view of a bundle being written (``source: run_end``): its owner teams
    (``owners``: {matrix: {layer: team}}), none signed yet, and the run key's keyid or why there
    is none."""
    signer, why = run_signer(key_path)
    return signoff_context(owners, signer, why, run_verified=signer is not None)


def bundle_signoff(bundle_dir: Path, evidence: EvidenceDocument, keys: list[Ed25519PublicKey] | None = None,
                   policy: TrustPolicy | None = None) -> SignoffView:
    """The sign-off view read back from a bundle's attestations at view time (``source:
    attestations``). The run's signature is checked against ``keys`` and the policy's gate keys;
    each sign-off is verified only when the run's signature is and ``policy`` binds its key to its
    role (:func:`~pytest_hetero.bundle.signoff_check.check_signoffs`); otherwise it is shown unverified
    with the reason."""
    from pytest_hetero.bundle.attestation import RunClaim, read_attestations
    from pytest_hetero.bundle.signing import PAYLOAD_TYPE
    from pytest_hetero.bundle.signoff_check import NO_POLICY, check_signoffs
    from pytest_hetero.bundle.verify import Verification, check_run_signature, gate_keys
    from pytest_hetero.safeio import Unreadable

    try:
        lines = read_attestations(bundle_dir, PAYLOAD_TYPE)
    except Unreadable as exc:
        return signoff_context(owners_from_items(evidence), None, f"no readable attestation ({exc.kind}: "
                               f"{exc.detail})", source="attestations", policy=policy,
                               note="The attestations cannot be read: nothing about sign-off can be shown.")
    run = lines[0]
    check = Verification()
    check_run_signature(run, gate_keys(keys or [], policy), check)
    run_verified = bool(check.run_signers) and not check.problems
    signer = next((s.keyid for s in run.signers), None)
    trusted = policy if run_verified else None
    claim = RunClaim.of(run)
    signoffs, _ = check_signoffs(lines[1:], hashlib.sha256(run.payload).hexdigest(), claim, trusted,
                                 run_line=run.raw)
    if not run_verified:
        why = ("the run's signature is not verified (give the gate key with --key)" if signer
               else "the bundle is UNSIGNED")
        for s in signoffs:
            s.verified, s.names = False, []
            s.why_unverified = why if s.why_unverified == NO_POLICY else s.why_unverified
    note = (f"Read from the attestations; sign-offs checked against trust policy {trusted.name} "
            f"({trusted.trusted_by})." if trusted else
            "Read from the attestations; no sign-off is verified: give the gate key (--key) and the trust "
            "policy (--policy) to check them.")
    untrusted = not keys and not (policy and policy.gate)
    error = None if run_verified else "no trusted key given (--key GATE.pub): the signature was not checked" \
        if signer and untrusted else "; ".join(p.detail for p in check.problems) or None
    return signoff_context(claim.owners, signer, error,
                           signoffs, source="attestations", run_verified=run_verified, policy=trusted, note=note)
