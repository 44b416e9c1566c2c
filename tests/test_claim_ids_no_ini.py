"""Without an ini file pytest's rootdir follows the invocation directory; claim ids (the keys of evidence and
baselines) must not: they are the matrix's path relative to its project from any directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from smallcase import matrix, write_case
from support import REPO


def _claim_ids(cwd: Path, matrix_path: Path, reports: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)
    before = set(reports.iterdir()) if reports.exists() else set()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-q",
                           os.path.relpath(matrix_path, cwd), "-m", "discovery", f"--hetero-report-dir={reports}"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    (bundle,) = set(reports.iterdir()) - before
    return [item["nodeid"] for item in json.loads((bundle / "evidence.json").read_text())["items"]]


@pytest.mark.parametrize("marker", [".git", None], ids=["git-project", "bare-folder"])
def test_claim_ids_are_the_same_from_any_directory(tmp_path: Path, marker: str | None) -> None:
    project = tmp_path / "work" / "proj"
    write_case(project / "case")
    (project / "matrices").mkdir()
    if marker:
        (project / marker).mkdir()
    path = project / "matrices" / "m.matrix.yaml"
    path.write_text(matrix(project / "case", "../case" if marker else "case"))
    if not marker:  # the matrix's own folder is its project: the case lives beside it
        path = project / "m.matrix.yaml"
        path.write_text(matrix(project / "case", "case"))
    expected = "matrices/m.matrix.yaml::cpu-a::discovery" if marker else "m.matrix.yaml::cpu-a::discovery"
    reports = tmp_path / "reports"
    for cwd in dict.fromkeys((path.parent, project, tmp_path)):
        assert _claim_ids(cwd, path, reports) == [expected], cwd
