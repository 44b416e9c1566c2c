"""matrix.diff's tables and the field comparison its changes are made of."""

from __future__ import annotations

from typing import get_args

from pytest_hetero.matrix.diff import BY_CONTENT, DIMENSION_KEYS, differing
from pytest_hetero.matrix.model import Dimension


def test_tables_cover_every_dimension() -> None:
    """Each dimension has its spec list and its fields compared by content (none for resources and images): the
    tables are read by subscript, a dimension missing from one would be a KeyError."""
    assert set(DIMENSION_KEYS) == set(BY_CONTENT) == set(get_args(Dimension))
    assert BY_CONTENT["resource"] == BY_CONTENT["image"] == frozenset()


def test_differing_names_each_changed_key_with_absent_as_none() -> None:
    old = {"backend": "kubernetes", "namespace": "a", "context": "kind"}
    new = {"backend": "kubernetes", "namespace": "b", "pull_policy": "always"}
    assert differing(old, new) == {"context": ("kind", None), "namespace": ("a", "b"), "pull_policy": (None, "always")}
    assert list(differing(old, new)) == ["context", "namespace", "pull_policy"]  # sorted
    assert differing(old, dict(old)) == {}
