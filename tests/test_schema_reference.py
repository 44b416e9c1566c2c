"""``hetero schema [PATH]`` explains matrix fields from the shipped JSON Schema, and docs/matrix-reference.md is
generated from it: this test fails when the two drift apart (regenerate with ``hetero schema --markdown``)."""

from __future__ import annotations

import pytest
from support import REPO

from pytest_hetero.cli import main
from pytest_hetero.matrix.reference import Node, _deref, _element, explain, markdown, schema


def test_the_generated_reference_matches_the_schema() -> None:
    assert (REPO / "docs" / "matrix-reference.md").read_text(encoding="utf-8") == markdown(), \
        "docs/matrix-reference.md is stale: run `hetero schema --markdown > docs/matrix-reference.md`"


def test_every_field_has_a_meaning() -> None:
    root = schema()
    missing: list[str] = []

    def walk(path: list[str], node: Node) -> None:
        for name, child in _element(root, node).get("properties", {}).items():
            if not _deref(root, child).get("description"):
                missing.append(".".join([*path, name]))
            walk([*path, name], child)

    walk([], root)
    assert missing == []


def test_a_field_reads_like_kubectl_explain(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "spec.images[].for"]) == 0
    assert capsys.readouterr().out == (
        "FIELD:    spec.images.for\n"
        "TYPE:     list of one of: gpu | npu | cpu\n"
        "REQUIRED: no\n"
        'DEFAULT:  ["gpu", "npu", "cpu"]\n'
        "\n"
        "DESCRIPTION:\n"
        "    Resource types the image is built for; other combinations are recorded as not applicable.\n"
        "\n"
        "EXAMPLES:\n"
        '    ["cpu"]\n')


def test_a_mapping_lists_its_fields_and_marks_the_required_ones() -> None:
    text = explain("spec.resources")
    assert text.splitlines()[:3] == ["FIELD:    spec.resources", "TYPE:     list of object", "REQUIRED: yes"]
    fields = text.split("FIELDS:\n", 1)[1].splitlines()
    assert fields[:4] == ["    name  <name (string)>  -required-", "      A name: lower case letters, digits, '.', "
                          "'_' and '-', at most 63 characters.", "    type  <one of: gpu | npu | cpu>  -required-",
                          "      Resource type."]
    assert "    layers  <object>" in explain("spec").splitlines()
    assert "TYPE:     duration (number of seconds, or a string such as 30s, 5m, 2d)" in explain("spec.layers.model.timeout")


def test_an_unknown_field_names_the_close_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "spec.resources.reqests"]) == 2
    assert capsys.readouterr().err == ("hetero schema: 'spec.resources.reqests': spec.resources has no field "
                                       "'reqests'\n  hint: did you mean requests?\n")
