"""Who owns which layer, who signed: the sign-off view, as plain data for the renderers.

:func:`run_signoff` describes a bundle being written (the run key's keyid, or why it is unsigned);
:func:`bundle_signoff` reads a written bundle's envelope back (``hetero render``). Both return
:func:`signoff_context`'s shape, which the renderers in :mod:`pytest_hetero.reporting` take as is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_hetero import LAYERS
from pytest_hetero.errors import BundleError, MatrixError

if TYPE_CHECKING:
    from pytest_hetero.evidence.inputs import RunInputs


def owners_from_items(evidence: dict[str, Any]) -> dict[str, dict[str, str]]:
    """{matrix prefix: {layer: owner}} as seen on reported items (fallback when matrices are gone)."""
    owners: dict[str, dict[str, str]] = {}
    for item in evidence["items"]:
        owners.setdefault(item.get("matrix", ""), {}).setdefault(item["layer"], item.get("owner", ""))
    return owners


def matrix_owners(evidence: dict[str, Any], inputs: RunInputs) -> dict[str, dict[str, str]]:
    """{matrix name: {layer: team}} from the run's matrices, else (a matrix that no longer loads)
    from the owners on its reported items."""
    owners: dict[str, dict[str, str]] = {}
    fallback = owners_from_items(evidence)
    for m in evidence["matrices"]:
        try:
            owners[m["name"]] = dict(inputs.matrix(m).owners)
        except MatrixError:
            owners[m["name"]] = fallback.get(m["prefix"], {})
    return owners


def signoff_context(owners: dict[str, dict[str, str]], run_signer: str | None, signer_error: str | None,
                    claims: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``{"run_signer": keyid|None, "signer_error": str|None, "roles": [{"role", "layers",
    "signed": [claims], "status": "signed"|"pending"}]}``; roles are the owner teams."""
    teams: dict[str, set[str]] = {}
    for per in owners.values():
        for layer, team in per.items():
            if team:
                teams.setdefault(team, set()).add(layer)
    roles = []
    for team in sorted(teams):
        signed = [c for c in claims or [] if c.get("role") == team]
        roles.append({"role": team, "layers": [x for x in LAYERS if x in teams[team]], "signed": signed,
                      "status": "signed" if signed else "pending"})
    return {"run_signer": run_signer, "signer_error": signer_error, "roles": roles}


def run_signer(key_path: Path | None) -> tuple[str | None, str | None]:
    """``(keyid, None)`` of the run key at ``key_path``, or ``(None, why it is unsigned)``."""
    from pytest_hetero.bundle.signing import keyid, load_private_key

    if key_path is None:
        return None, "no --hetero-sign-key / HETERO_SIGN_KEY given"
    try:
        return keyid(load_private_key(key_path).public_key()), None
    except BundleError as exc:
        return None, f"signing key refused: {exc.message}"


def run_signoff(owners: dict[str, dict[str, str]], key_path: Path | None) -> dict[str, Any]:
    """The sign-off view of a bundle being written: its owner teams (``owners``: {matrix: {layer:
    team}}), all pending, and the run key's keyid or why there is none."""
    signer, why = run_signer(key_path)
    return signoff_context(owners, signer, why)


def bundle_signoff(bundle_dir: Path, evidence: dict[str, Any]) -> dict[str, Any]:
    """Sign-off view read back from a bundle's envelope (claims unverified: use hetero verify)."""
    from pytest_hetero.bundle.manifest import ATTESTATION
    from pytest_hetero.bundle.signing import read_envelope

    try:
        _, _, statement = read_envelope(bundle_dir)
        envelope = json.loads((bundle_dir / ATTESTATION).read_text(encoding="utf-8"))
    except (BundleError, OSError, ValueError):
        return signoff_context(owners_from_items(evidence), None, "no readable attestation")
    sigs = envelope.get("signatures", [])
    signer = next((s["keyid"] for s in sigs if "signoff" not in s), None)
    return signoff_context(statement.get("predicate", {}).get("owners", {}), signer, None,
                           [s["signoff"] for s in sigs if isinstance(s.get("signoff"), dict)])
