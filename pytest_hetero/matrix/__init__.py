"""Validation matrix: JSON Schema, YAML loading with positions, typed model, expansion."""

from __future__ import annotations

from pytest_hetero.durations import parse_duration
from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.matrix.model import Matrix

__all__ = ["Matrix", "load_matrix", "parse_duration"]
