"""Plain-data views the bundle hands to the renderers: the sign-off view (:mod:`pytest_hetero.bundle.signoff`
builds it, every renderer of sign-off reads it) and a bundle's signed validation status
(:func:`pytest_hetero.bundle.vsa.load_status`, read by the catalogue and ``hetero status``). They live here, beside
the evidence document's shapes, so that reporting reads them without importing the bundle package (the layout:
``tests/test_architecture.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from pytest_hetero.evidence.document import UntestedEntry, ValidationSection


class SignedView(TypedDict, total=False):
    """One sign-off of a role in the sign-off view (:meth:`pytest_hetero.bundle.signoff_check.SignOff.view`
    writes every field; a renderer reads each with a default, since a view may come from elsewhere)."""

    keyid: str
    names: list[str]
    decision: str
    conditions: str | None
    signed_at: str | None
    verified: bool
    why_unverified: str | None
    layers: list[str]


class RoleView(TypedDict, total=False):
    """One owner team of the sign-off view: its layers, its sign-offs and its state (one of :data:`STATES`)."""

    role: str
    layers: list[str]
    owner: str
    signed: list[SignedView]
    state: str


class PolicyView(TypedDict):
    """The trust policy the sign-offs were checked against: its name, sha256 and who trusts it."""

    name: str
    sha256: str
    trusted_by: str


class SignoffView(TypedDict, total=False):
    """The sign-off view (shape in the module docstring). :func:`signoff_context` writes every field; the
    renderers take a view with any of them missing (read with defaults: never accepted unless it says so)."""

    source: str
    run_signer: str | None
    run_verified: bool
    signer_error: str | None
    verification: str
    verified_by: str | None
    policy: PolicyView | None
    note: str
    roles: list[RoleView]


class BundleStatus(TypedDict):
    """The validation status a bundle signs (:func:`load_status`): its folder, the sha256 of its run statement,
    how it verified, the signed ``validation`` section, its VSA statements, the signed predicate's ``run``
    and the untested entries by pool (the resource they are keyed by)."""

    bundle: Path
    digest: str
    verification: str
    validation: ValidationSection
    vsas: list[dict[str, Any]]
    run: dict[str, Any]
    untested: dict[str, list[UntestedEntry]]
