"""The judge's account of a failure, as evidence holds it: :class:`Failure` (category, message, owner team and
owner category) and each :class:`Cause` when a finding has several. Written only by
:mod:`pytest_hetero.judge.verdict`; :mod:`pytest_hetero.evidence.model` re-exports them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from pytest_hetero.vocab import Layer, OwnerCategory


class CauseDict(TypedDict):
    """One cause of a failure with several, as evidence.json holds it."""

    category: str
    owner: str
    owner_category: OwnerCategory
    message: str


class _FailureBase(TypedDict):
    layer: Layer
    category: str
    message: str
    owner: str


class FailureDict(_FailureBase, total=False):
    """An item's ``failure`` as evidence.json holds it: ``owner`` is the team, ``owner_category`` the
    failure table's category of it; ``causes`` only when the finding has several causes; ``nodes`` only when it holds
    for some nodes of the pool, not the whole claim (a node-scoped discovery failure)."""

    owner_category: OwnerCategory
    causes: list[CauseDict]
    nodes: list[str]


@dataclass(frozen=True)
class Cause:
    """One cause of a failure with several: its category, owner team (and owner category), message."""

    category: str
    owner: str
    owner_category: OwnerCategory
    message: str

    def to_dict(self) -> CauseDict:
        """JSON-ready dict."""
        return {"category": self.category, "owner": self.owner, "owner_category": self.owner_category,
                "message": self.message}


@dataclass(frozen=True)
class Failure:
    """Why an item failed: the ``category`` (closed per layer), a one-line ``message``, the owning team
    (``owner``) and its owner category as the failure table decides it (``owner_category``; None for a
    failure written before the table existed); ``causes``: each cause of a finding with several, each
    with its own owner (:mod:`pytest_hetero.judge.failures`)."""

    layer: Layer
    category: str
    message: str
    owner: str
    owner_category: OwnerCategory | None = None
    causes: tuple[Cause, ...] = ()
    nodes: tuple[str, ...] = ()

    def to_dict(self) -> FailureDict:
        """JSON-ready dict."""
        out: FailureDict = {"layer": self.layer, "category": self.category, "message": self.message,
                            "owner": self.owner}
        if self.owner_category is not None:
            out["owner_category"] = self.owner_category
        if self.causes:
            out["causes"] = [c.to_dict() for c in self.causes]
        if self.nodes:
            out["nodes"] = list(self.nodes)
        return out
