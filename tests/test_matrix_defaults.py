"""The matrix defaults filled once after the schema (pytest_hetero.matrix.defaults) are the ones the schema documents,
and filling them changes no check's order or the document kept as written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_matrix_load import GOOD

from pytest_hetero.durations import parse_duration
from pytest_hetero.errors import MatrixInvalid
from pytest_hetero.matrix import load_matrix
from pytest_hetero.matrix.defaults import DEFAULT_FOR, DEFAULT_TARGET, complete
from pytest_hetero.matrix.document import SpecDoc
from pytest_hetero.matrix.governance import DEFAULT_DURATION, DEFAULT_WINDOW, reserve_spec
from pytest_hetero.matrix.reference import schema
from pytest_hetero.vocab import DEFAULT_OWNERS, LAYERS

SPEC: SpecDoc = {
    "resources": [{"name": "cpu-a", "type": "cpu", "requests": {"cpu": 2}}],
    "images": [{"name": "py", "reference": "python:current"}],
    "models": [{"name": "mod", "version": "1"}],
    "datasets": [{"name": "ds", "version": "1", "uri": "d.csv", "sha256": "b" * 64}],
    "profiles": {"quick": {}},
}


def _default(*path: str) -> Any:
    node: Any = schema()
    for part in path:
        node = node[part]
    return node["default"]


def test_the_defaults_filled_are_the_schemas() -> None:
    spec = complete(SPEC)
    assert spec["images"][0]["for"] == list(DEFAULT_FOR) == _default("$defs", "image", "properties", "for")
    assert spec["datasets"][0]["sensitive"] is _default("$defs", "dataset", "properties", "sensitive")
    profile = spec["profiles"]["quick"]
    assert profile["layers"] == _default("$defs", "profile", "properties", "layers") == list(LAYERS)
    assert profile["representative"] is _default("$defs", "profile", "properties", "representative")
    assert profile["repeat"] == _default("$defs", "profile", "properties", "repeat")
    assert spec["target"] == DEFAULT_TARGET == _default("$defs", "target")
    assert spec["owners"] == _default("properties", "spec", "properties", "owners") == DEFAULT_OWNERS
    validation = spec["validation"]
    assert validation["domain"] == _default("properties", "spec", "properties", "validation", "properties", "domain")
    assert parse_duration(validation["valid_for"]) == parse_duration(
        _default("properties", "spec", "properties", "validation", "properties", "valid_for"))
    assert all(spec["layers"][layer]["repeat"] == _default("$defs", "layerSettings", "properties", "repeat")
               for layer in LAYERS)
    reserve = reserve_spec({"model": "m", "replicas": 3, "burst": {"priority_class": "hi", "pods": 1}, "p95_ms": 50})
    given = ("$defs", "governanceProbe", "properties", "reserve", "properties")
    assert (reserve["window"], reserve["duration"]) == (DEFAULT_WINDOW, DEFAULT_DURATION) == (
        _default(*given, "window"), _default(*given, "duration"))
    assert reserve["min_ready"] == 3  # the floor is every replica unless the matrix lowers it


def test_filling_defaults_leaves_the_document_as_written(tmp_path: Path) -> None:
    path = tmp_path / "m.matrix.yaml"
    path.write_text(GOOD)
    matrix = load_matrix(path)
    assert "target" not in matrix.source["spec"] and "vendor" not in matrix.source["spec"]["resources"][0]
    before = json.dumps(SPEC, sort_keys=True)
    complete(SPEC)
    assert json.dumps(SPEC, sort_keys=True) == before
    assert matrix.target == {"backend": "local"} and matrix.target is not DEFAULT_TARGET
    assert matrix.resources[0].vendor == "any" and matrix.models[0].task_type == "batch-inference"


def test_layer_timeouts_out_of_range_are_reported_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "bad.matrix.yaml"
    path.write_text(GOOD + "  layers:\n    startup: {timeout: 0s}\n    discovery: {timeout: 8d}\n")
    with pytest.raises(MatrixInvalid) as info:
        load_matrix(path)
    assert [p.location.field for p in info.value.problems] == ["spec.layers.startup.timeout",
                                                               "spec.layers.discovery.timeout"]
