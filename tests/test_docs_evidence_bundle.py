"""docs/evidence-bundle.md says what the tools do: the key file names keygen writes, and that a key
which cannot sign stops the run (there is no unsigned fallback)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO, matrix_text

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

DOC = (REPO / "docs" / "evidence-bundle.md").read_text(encoding="utf-8")


def test_the_doc_names_the_public_key_keygen_writes(tmp_path: Path) -> None:
    """The doc said `--key keys/gate.pub` where keygen writes keys/gate.key.pub."""
    private = re.search(r"hetero keygen (\S+)", DOC)
    assert private is not None
    run = subprocess.run([sys.executable, "-m", "pytest_hetero.cli", "keygen", private.group(1)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, check=True)
    written = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "keys").iterdir())
    assert written == [private.group(1), f"{private.group(1)}.pub"], run.stdout
    verify = re.search(r"hetero verify \S+ --key (\S+)", DOC)
    assert verify is not None and (tmp_path / verify.group(1)).is_file()


def test_a_key_that_cannot_sign_stops_the_run_as_the_doc_says(pytester: pytest.Pytester) -> None:
    """The doc described a fallback (the bundle written unsigned) that no longer exists."""
    assert "then written unsigned" not in DOC and "never written unsigned" in DOC
    subprocess.run([sys.executable, "-m", "pytest_hetero.cli", "keygen", "k.key"], cwd=pytester.path, check=True,
                   capture_output=True, timeout=60)
    (pytester.path / "k.key").chmod(0o644)
    pytester.makefile(".matrix.yaml", m=matrix_text())
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-sign-key", "k.key")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not (pytester.path / "reports").exists()
