"""The plain data the dossier's chapters hand ``templates/dossier.html.j2``, as types.

Built by :mod:`pytest_hetero.reporting.dossier` and :mod:`~pytest_hetero.reporting.dossier_sections`, read by
the template (and the tests) by key; every field is always written. Texts are already in the dossier's
language.
"""

from __future__ import annotations

from typing import TypedDict

from pytest_hetero.reporting.dossier_capacity import Capacity
from pytest_hetero.reporting.dossier_charts import QueueChart, UsageCharts


class SignedRow(TypedDict):
    """One sign-off of a role: who signed (``keyid``, ``names``), the decision as its state word and text,
    its conditions, when, whether it verified and why not, the layers."""

    keyid: str
    names: list[str]
    decision: str
    decision_text: str
    conditions: list[str]
    signed_at: str
    verified: bool
    why_unverified: str | None
    layers: list[str]


class Role(TypedDict):
    """A sign-off role: the team, its layers, its state word and text, and its sign-offs."""

    role: str
    owner: str
    layers: list[str]
    state: str
    state_text: str
    signed: list[SignedRow]


class ItemRow(TypedDict):
    """One item of a layer chapter."""

    item: str
    status: str
    status_text: str
    fact: str
    reason: str
    owner: str


class Chapter(TypedDict):
    """A layer's chapter: its claim, owner teams, status counts ``(status, text)``, evidence kinds present
    ``(label, count)``, its first items (``more``: the rest), and the roles that sign it."""

    layer: str
    name: str
    claim: str
    owners: list[str]
    counts: list[tuple[str, str]]
    evidence: list[tuple[str, int]]
    rows: list[ItemRow]
    more: int
    roles: list[Role]


class ResultRow(TypedDict):
    """One acceptance rule's result (or an item that did not run its rules)."""

    where: str
    rule: str
    threshold: str
    observed: str
    verdict: str
    verdict_text: str
    failing: str


class ResultGroup(TypedDict):
    """The results of one matrix × model × dataset."""

    heading: str
    digests: str
    rows: list[ResultRow]


class Results(TypedDict):
    """The acceptance results; ``more``: business items not listed."""

    groups: list[ResultGroup]
    more: int


class UsageRow(TypedDict):
    """One device of a model run's usage (or why it was not sampled)."""

    item: str
    source: str
    rss: str
    device: str
    memory: str
    util: str
    samples: str


class QueueRow(TypedDict):
    """A queued workload: submitted → admitted → placed → started, the waits and the restarts."""

    item: str
    submitted: str
    admitted: str
    placed: str
    started: str
    wait: str
    restarts: str


class Operations(TypedDict):
    """The run-time operations chapter."""

    usage: list[UsageRow]
    usage_more: int
    scopes: list[str]
    queue: list[QueueRow]
    queue_more: int
    queue_note: str
    none: str
    charts: UsageCharts
    backends: list[str]
    queue_charts: list[QueueChart]
    capacity: Capacity


class Coverage(TypedDict):
    """An acceptance phase or POC scenario: covered / partial / not_covered / against, the first items that
    prove it (``more``: the rest) and a sentence."""

    what: str
    state: str
    state_text: str
    proof: list[str]
    more: int
    detail: str


class UntestedGroup(TypedDict):
    """Untested items (or parts not proven) of one reason: how many, three examples, who can close it, how."""

    reason: str
    count: int
    examples: list[str]
    who: str
    how: str


class Untested(TypedDict):
    """The untested scope: groups (``more``: groups not listed), never-covered lines, "nothing untested"."""

    groups: list[UntestedGroup]
    more: int
    never: list[str]
    none: str


class Proof(TypedDict):
    """What a layer's passed items prove: statements (``more``: items not stated)."""

    layer: str
    name: str
    lines: list[str]
    more: int


class Cover(TypedDict):
    """The cover: the verdict in words and its class, how the bundle verified, the scope table, the change
    since the baseline, the open conditions."""

    verdict: str
    verdict_class: str
    verification: str
    verification_state: str
    verified_by: str
    scope: list[tuple[str, list[str]]]
    change: list[str]
    conditions: list[str]
