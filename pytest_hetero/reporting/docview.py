"""The evidence document's optional sections and the sign-off view as the renderings read them: read once, here.

``run`` and ``target`` are sections a document may lack (a bundle written before a field was, a hand-made
document, a third-party engine's target fingerprint); the sign-off view
(:class:`~pytest_hetero.evidence.views.SignoffView`) is read once for what every rendering states. Each becomes a
frozen dataclass in one function, which reads every field the renderings show (None where the section lacks
it); the renderings then read attributes, each with the default it shows for an absent field. Nothing here
changes what a rendering says: an absent field reads as it did (a run without an ``id`` shows the same default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import Entry, EvidenceDocument, RunSection
    from pytest_hetero.evidence.views import RoleView, SignoffView, Verification

__all__ = ["Dims", "RunView", "SignoffState", "TargetView", "dims", "run_view", "signoff_state", "targets"]


class Dims(NamedTuple):
    """An item's keys along the dimensions the renderings group by (:func:`dims`), each None where the item has
    none (a discovery item names no image; only model and business items a model and data set; ``check`` the
    training check a task type brings, ``coverage`` a node-coverage item's)."""

    resource: str | None
    image: str | None
    model: str | None
    dataset: str | None
    check: str | None


def dims(entry: Entry) -> Dims:
    """``entry``'s keys (dimension → name, :class:`~pytest_hetero.evidence.document.ItemDict`) read once."""
    keys = entry["keys"]
    return Dims(keys.get("resource"), keys.get("image"), keys.get("model"), keys.get("dataset"), keys.get("check"))


@dataclass(frozen=True)
class RunView:
    """The ``run`` section (:class:`~pytest_hetero.evidence.document.RunSection`, the journal's run and end
    lines) as the renderings read it: each field as the section holds it, None when it lacks it."""

    id: str | None
    tool: str | None
    tool_version: str | None
    git_commit: str | None
    host: str | None
    python: str | None
    pytest: str | None
    rootdir: str | None
    invocation: list[str] | None
    profile: str | None
    started_at: str | None
    finished_at: str | None
    interrupted: bool | None


def run_view(run: RunSection) -> RunView:
    """``run`` (the document's ``run`` section; ``{}`` for a document without one) read once."""
    return RunView(id=run["id"], tool=run["tool"], tool_version=run["tool_version"],
                   git_commit=run["git_commit"], host=run["host"], python=run["python"],
                   pytest=run["pytest"], rootdir=run["rootdir"], invocation=run["invocation"],
                   profile=run["profile"], started_at=run["started_at"], finished_at=run["finished_at"],
                   interrupted=run["interrupted"])


@dataclass(frozen=True)
class TargetView:
    """One target fingerprint of the ``target`` section, as an engine wrote it
    (:meth:`pytest_hetero.backends.protocol.Engine.fingerprint`: ``{"backend", "identity", "nodes", "versions",
    "images"}``; a third-party engine's may lack any, or hold other JSON): each field as written, None when
    absent; ``matrix`` the matrix prefix a fingerprint names (only a multi-backend run's do)."""

    backend: object
    identity: object
    nodes: Sequence[object] | None
    versions: dict[str, object] | None
    images: dict[str, object] | None
    matrix: object


def targets(evidence: EvidenceDocument) -> list[TargetView]:
    """The document's target fingerprints (none when it has no ``target`` section), each read once."""
    return [TargetView(backend=raw.get("backend"), identity=raw.get("identity"), nodes=raw.get("nodes"),
                       versions=raw.get("versions"), images=raw.get("images"), matrix=raw.get("matrix"))
            for raw in evidence["target"]]


@dataclass(frozen=True)
class SignoffState:
    """What every rendering says of the bundle's signature, from a sign-off view (:func:`signoff_state`):
    ``state`` ``verified`` | ``unverified`` | ``unsigned``, ``by`` the trusted keyid it verified with (None unless
    verified), and the view's ``run_signer``, ``signer_error``, ``source``, ``note`` and ``roles``."""

    state: Verification
    by: str | None
    run_signer: str | None
    signer_error: str | None
    source: str
    note: str
    roles: list[RoleView]


def signoff_state(signoff: SignoffView) -> SignoffState:
    """``signoff`` read once (:func:`pytest_hetero.bundle.signoff.signoff_context` writes every field: the
    ``verification`` it states, and ``verified_by`` the run signer's keyid when, and only when, verified)."""
    return SignoffState(state=signoff["verification"], by=signoff["verified_by"], run_signer=signoff["run_signer"],
                        signer_error=signoff["signer_error"], source=signoff["source"], note=signoff["note"],
                        roles=signoff["roles"])
