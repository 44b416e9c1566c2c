"""matrix.model's tables: complete over the values the schema admits, read by subscript."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest

import pytest_hetero.matrix
from pytest_hetero.matrix.document import ResourceType
from pytest_hetero.matrix.model import PROBE_OF_TYPE, Resource


def test_probe_table_covers_every_resource_type_the_schema_admits() -> None:
    shipped = json.loads((Path(pytest_hetero.matrix.__file__).parent / "schema.json").read_text(encoding="utf-8"))
    enum = shipped["$defs"]["resource"]["properties"]["type"]["enum"]
    assert set(PROBE_OF_TYPE) == set(get_args(ResourceType)) == set(enum)


@pytest.mark.parametrize(("type_", "vendor", "probe"), [
    ("gpu", "any", "nvidia"), ("npu", "any", "ascend"), ("cpu", "any", "cpu"),
    ("gpu", "NVIDIA", "nvidia"), ("npu", "huawei", "ascend"), ("gpu", "ascend", "ascend"), ("npu", "acme", "ascend"),
])
def test_probe_vendor_by_vendor_then_by_type(type_: ResourceType, vendor: str, probe: str) -> None:
    assert Resource(name="r", type=type_, vendor=vendor, requests={}).probe_vendor == probe
