"""YAML merge keys (``<<: *base``, YAML 1.1 merge type) with overrides read as YAML reads them, while a key
written twice in one mapping is still refused with its file, line and column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from smallcase import matrix, write_case

from pytest_hetero.errors import MatrixInvalid
from pytest_hetero.matrix import load_matrix


def _with_resources(tmp_path: Path, resources_yaml: str) -> Path:
    write_case(tmp_path / "case")
    doc = yaml.safe_dump(json.loads(matrix(tmp_path / "case", "case")), sort_keys=False)  # block YAML
    head, _, tail = doc.partition("  resources:\n")
    tail = tail[tail.index("  images:"):]
    path = tmp_path / "m.matrix.yaml"
    path.write_text(head + "  resources:\n" + resources_yaml + tail)
    return path


MERGED = """\
  - &cpu
    name: cpu-a
    type: cpu
    requests: {cpu: 1}
    expect: {min_cpus: 1}
  - <<: *cpu
    name: cpu-b
  - <<: [*cpu, {requests: {cpu: 2}}]
    name: cpu-c
    expect: {min_cpus: 2}
"""


def test_a_merge_key_with_overrides_reads_as_yaml_reads_it(tmp_path: Path) -> None:
    path = _with_resources(tmp_path, MERGED)
    loaded = load_matrix(path)
    got = [(r.name, r.type, dict(r.requests), dict(r.expect)) for r in loaded.resources]
    assert got == [("cpu-a", "cpu", {"cpu": "1"}, {"min_cpus": 1}), ("cpu-b", "cpu", {"cpu": "1"}, {"min_cpus": 1}),
                   ("cpu-c", "cpu", {"cpu": "1"}, {"min_cpus": 2})]
    assert [r["name"] for r in yaml.safe_load(path.read_text())["spec"]["resources"]] == ["cpu-a", "cpu-b", "cpu-c"]


def test_a_key_written_twice_next_to_a_merge_is_still_refused(tmp_path: Path) -> None:
    path = _with_resources(tmp_path, MERGED.replace("    name: cpu-b\n", "    name: cpu-b\n    name: cpu-d\n"))
    with pytest.raises(MatrixInvalid) as info:
        load_matrix(path)
    line = path.read_text().splitlines().index("    name: cpu-d") + 1
    assert info.value.render().splitlines()[0] == f"{path}:{line}:5: field 'spec.resources[1].name': duplicate key 'name'"
