"""Matrix file → collectors mirroring the dependency tree → layer items.

``matrices/x.matrix.yaml`` (MatrixFile) → ``cpu-host`` (Group) → ``discovery`` (LayerItem),
``py311`` (Group) → ``startup``, ``digits-logreg@digits-test`` (Group) → ``model``,
``business``. So a node id reads like the claim it proves.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_hetero.errors import HeteroError, MatrixError, MatrixInvalid
from pytest_hetero.hooks.builtin import BACKENDS
from pytest_hetero.matrix.expand import Plan, PlannedItem, expand
from pytest_hetero.matrix.load import backend_location, load_matrix
from pytest_hetero.matrix.model import Matrix
from pytest_hetero.pytest_plugin.claims import claim_prefix
from pytest_hetero.pytest_plugin.item import LayerItem
from pytest_hetero.pytest_plugin.stash import AHEAD, PLANS, SETTINGS


def plan_matrix(config: pytest.Config, matrix: Matrix) -> tuple[str, Plan]:
    """Resolve the backend name (``--hetero-backend`` over the matrix target) and expand.

    Raises MatrixError when no plugin provides that backend, an ``expect`` key of a resource cannot
    be checked for its type on that backend (:func:`~pytest_hetero.layers.discovery.expect_problems`), or
    an image reference is one that backend cannot run (:func:`~pytest_hetero.layers.discovery.image_problems`).
    """
    settings = config.stash[SETTINGS]
    name = settings.backend or matrix.backend
    cls = config.hook.pytest_hetero_backend(name=name)
    if cls is None:
        known = ", ".join(BACKENDS)
        raise MatrixError(f"unknown backend '{name}'", backend_location(matrix.path, name, matrix.backend),
                          f"use one of {known}, or install the plugin that provides it")
    from pytest_hetero.layers.discovery import expect_problems, image_problems

    problems = [*expect_problems(matrix, name), *image_problems(matrix, name)]
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise MatrixInvalid(problems)
    return name, expand(matrix, scheduling_per_image=bool(cls.scheduling_per_image))


class MatrixFile(pytest.File):
    """A ValidationMatrix YAML file; a bad file becomes one collection error with file:line and hint."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        """Load (unless this session loaded it ahead of collection), validate and expand the matrix;
        yield the tree of Groups and LayerItems."""
        prefix = claim_prefix(self.config, self.path, self.nodeid)
        ahead = self.config.stash.get(AHEAD, {}).get(prefix)
        if ahead is not None and ahead[0].path == self.path.resolve():
            matrix = ahead[0]
        else:
            matrix = load_matrix(self.path)
        backend, plan = plan_matrix(self.config, matrix)
        self.config.stash[PLANS][prefix] = (matrix, plan)
        self.claim_prefix = prefix
        tree = ItemTree()
        for planned in plan.items:
            node = tree
            for part in planned.parts[:-1]:
                node = node.groups.setdefault(part, ItemTree())
            node.items[planned.parts[-1]] = planned
        yield from _children(self, tree, matrix, backend)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        """Our errors read as ``file:line:col: field '…': message`` plus hint, never a traceback;
        secrets a message quotes from the file (a token in the wrong field) are redacted."""
        from pytest_hetero.redact import Redactor

        if isinstance(excinfo.value, HeteroError):
            return Redactor().text(excinfo.value.render())
        return Redactor().text(str(super().repr_failure(excinfo)))


@dataclass
class ItemTree:
    """One level of the planned items' dependency tree: the items of this level by the last part of their node
    id, and the deeper levels by their part (each in plan order)."""

    items: dict[str, PlannedItem] = field(default_factory=dict)
    groups: dict[str, ItemTree] = field(default_factory=dict)


class Group(pytest.Collector):
    """One level of the dependency tree (a resource, an image, or a model@dataset combination)."""

    def __init__(self, *, tree: ItemTree, matrix: Matrix, backend: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._tree = tree
        self._matrix = matrix
        self._backend = backend

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        """Yield this level's items first (they are the dependencies), then deeper groups."""
        yield from _children(self, self._tree, self._matrix, self._backend)


def _children(parent: pytest.Collector, tree: ItemTree, matrix: Matrix,
              backend: str) -> Iterator[pytest.Item | pytest.Collector]:
    for name, planned in tree.items.items():
        yield LayerItem.from_parent(parent, name=name, planned=planned, matrix=matrix, backend=backend)
    for name, level in tree.groups.items():
        yield Group.from_parent(parent, name=name, tree=level, matrix=matrix, backend=backend)
