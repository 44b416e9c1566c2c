"""Expansion: items keyed by exactly the dimensions each layer depends on; omissions with reasons."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import matrix_text

from pytest_hetero.matrix import load_matrix
from pytest_hetero.matrix.expand import expand

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def _matrix(tmp_path: Path, **kw: object) -> object:
    path = tmp_path / "m.matrix.yaml"
    path.write_text(matrix_text(**kw))  # type: ignore[arg-type]
    return load_matrix(path)


def test_shared_discovery_and_dependency_chain(tmp_path: Path) -> None:
    m = _matrix(tmp_path, resources=[{"name": "cpu-a", "type": "cpu", "requests": {"cpu": 1}}],
                images=[{"name": "py", "reference": "python:current"}, {"name": "py2", "reference": "python:current"}])
    plan = expand(m)  # type: ignore[arg-type]
    assert [i.id for i in plan.items] == [
        "cpu-a::discovery", "cpu-a::scheduling",
        "cpu-a::py::startup", "cpu-a::py::digits-logreg@digits-test::model",
        "cpu-a::py::digits-logreg@digits-test::business",
        "cpu-a::py2::startup", "cpu-a::py2::digits-logreg@digits-test::model",
        "cpu-a::py2::digits-logreg@digits-test::business"]
    deps = {i.id: i.depends_on for i in plan.items}
    assert deps["cpu-a::py2::startup"] == ("cpu-a", "scheduling")
    assert deps["cpu-a::py::digits-logreg@digits-test::business"] == ("cpu-a", "py", "digits-logreg@digits-test",
                                                                      "model")
    assert plan.by_id()["cpu-a::py::digits-logreg@digits-test::model"].keys == {
        "resource": "cpu-a", "image": "py", "model": "digits-logreg", "dataset": "digits-test"}
    assert plan.omitted == []


def test_scheduling_per_image(tmp_path: Path) -> None:
    plan = expand(_matrix(tmp_path), scheduling_per_image=True)  # type: ignore[arg-type]
    ids = [i.id for i in plan.items]
    assert ids[:3] == ["cpu-host::discovery", "cpu-host::py::scheduling", "cpu-host::py::startup"]
    assert plan.by_id()["cpu-host::py::startup"].depends_on == ("cpu-host", "py", "scheduling")


def test_exclusions_and_incompatible_images(tmp_path: Path) -> None:
    m = _matrix(tmp_path, resources=[{"name": "cpu-a", "type": "cpu", "requests": {"cpu": 1}},
                                     {"name": "gpu-a", "type": "gpu", "requests": {"nvidia.com/gpu": 1}}],
                images=[{"name": "cuda", "reference": "x", "for": ["gpu"]},
                        {"name": "py", "reference": "python:current"}],
                exclude=[{"resource": "gpu-a", "image": "py", "reason": "py image is CPU-only by policy"}])
    plan = expand(m)  # type: ignore[arg-type]
    omitted = [(o.status, "::".join(o.parts)) for o in plan.omitted]
    assert omitted == [
        ("not_applicable", "cpu-a::cuda::startup"), ("not_applicable", "cpu-a::cuda::model"),
        ("not_applicable", "cpu-a::cuda::business"),
        ("excluded", "gpu-a::py::startup"), ("excluded", "gpu-a::py::digits-logreg@digits-test::model"),
        ("excluded", "gpu-a::py::digits-logreg@digits-test::business")]
    assert plan.omitted[0].reason == "image 'cuda' is built for gpu, not for resource type cpu"
    assert plan.omitted[3].reason.endswith(": py image is CPU-only by policy")
    assert [i.id for i in plan.items if i.keys["resource"] == "gpu-a"] == [
        "gpu-a::discovery", "gpu-a::scheduling", "gpu-a::cuda::startup",
        "gpu-a::cuda::digits-logreg@digits-test::model", "gpu-a::cuda::digits-logreg@digits-test::business"]


def test_partial_exclusion_by_model_only(tmp_path: Path) -> None:
    m = _matrix(tmp_path, exclude=[{"model": "digits-logreg", "dataset": "digits-test", "reason": "retired pair"}])
    plan = expand(m)  # type: ignore[arg-type]
    assert [i.id for i in plan.items] == ["cpu-host::discovery", "cpu-host::scheduling", "cpu-host::py::startup"]
    assert {o.layer for o in plan.omitted} == {"model", "business"}
    assert json.dumps([o.status for o in plan.omitted]) == '["excluded", "excluded"]'
