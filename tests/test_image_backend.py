"""A local-only image reference (``python:current``) on an OCI backend is a matrix error at lint and collection.

Before, ``hetero lint`` said ok and a Docker run failed at startup as ``registry_unreachable`` owned by
infrastructure, never naming the real mistake.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import matrix_text

from pytest_hetero.cli.workflow import lint

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

MESSAGE = ("image 'py' reference 'python:current' is a Python environment of the local backend; the docker "
           "backend runs OCI images")
HINT = "give an OCI image reference (e.g. pytest-hetero/py311-onnx:1"


def test_lint_names_the_image_field_and_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "d.matrix.yaml"
    path.write_text(matrix_text(backend="docker"))
    # the image entry's line (its opening brace, just above its name), as for models and datasets
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if '"name": "py"' in text) - 1
    assert lint([path]) == 1
    out = capsys.readouterr().out
    assert MESSAGE in out and HINT in out
    assert f"d.matrix.yaml:{line}" in out and "spec.images[0:py].reference" in out
    path.write_text(matrix_text(backend="local"))
    assert lint([path]) == 0
    # Docker Hub's python image is an OCI reference, not the local engine's syntax
    path.write_text(matrix_text(backend="docker", images=[{"name": "py", "reference": "python:3.11"}]))
    assert lint([path]) == 0, capsys.readouterr().out


def test_collection_refuses_it_under_hetero_backend_docker(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", m=matrix_text(backend="local"))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-backend", "docker")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert MESSAGE in out and "spec.images[0:py].reference" in out and HINT in out
    assert "registry_unreachable" not in out
