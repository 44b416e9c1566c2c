"""Plain-data views the bundle hands to the renderers: the sign-off view (:mod:`pytest_hetero.bundle.signoff`
builds it, every renderer of sign-off reads it) and a bundle's signed validation status
(:func:`pytest_hetero.bundle.vsa.load_status`, read by the catalogue and ``hetero status``). They live here, beside
the evidence document's shapes, so that reporting reads them without importing the bundle package (the layout:
``tests/test_architecture.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, TypedDict

from pytest_hetero.evidence.document import UntestedEntry, ValidationSection


class SignedView(TypedDict):
    """One sign-off of a role in the sign-off view, as :meth:`pytest_hetero.bundle.signoff_check.SignOff.view`
    (its one writer) writes every field: the signing ``keyid``, the ``names`` the trust policy gives it (empty
    unless verified), the ``decision`` as written (``""`` when the line had none), the ``conditions`` and
    ``signed_at`` (None when absent or not text), whether it is ``verified``, why not (None when it is) and the
    ``layers`` it vouches for (empty when the line named none that are text)."""

    keyid: str
    names: list[str]
    decision: str
    conditions: str | None
    signed_at: str | None
    verified: bool
    why_unverified: str | None
    layers: list[str]


class RoleView(TypedDict):
    """One owner team of the sign-off view (:func:`pytest_hetero.bundle.signoff.signoff_context`, its one writer,
    writes every field): the team (``role``, and ``owner``, the same name), its layers, its sign-offs and its state
    (:func:`pytest_hetero.bundle.signoff_check.role_state`: ``pending`` or an accepted/rejected state)."""

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


Verification = Literal["verified", "unverified", "unsigned"]
"""What every rendering states of the run's signature before any claim (:mod:`pytest_hetero.bundle.signoff`)."""


class SignoffView(TypedDict):
    """The sign-off view (shape in :mod:`pytest_hetero.bundle.signoff`'s docstring). Its one writer,
    :func:`pytest_hetero.bundle.signoff.signoff_context` (at run end, and at view time from the attestations,
    each line parsed once by :class:`pytest_hetero.bundle.signoff_check.SignoffClaim`), writes every field; the
    view is built in the process that renders it, never read back from a file."""

    source: str
    run_signer: str | None
    run_verified: bool
    signer_error: str | None
    verification: Verification
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
