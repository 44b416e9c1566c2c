"""The README's fresh-machine command and five-minute tour, run as written: the tour's bash blocks (between
``<!-- tour:start -->`` and ``<!-- tour:end -->``) in order, in a copy of the repository root, with ``python`` and
``hetero`` on PATH as the README's venv gives them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from support import REPO

README = REPO / "README.md"


def tour_blocks(text: str) -> list[str]:
    """The ```bash blocks of the tour section, in order."""
    section = text.split("<!-- tour:start -->", 1)[1].split("<!-- tour:end -->", 1)[0]
    return re.findall(r"^```bash\n(.*?)^```$", section, flags=re.S | re.M)


def test_the_readme_is_short_and_starts_with_the_venv_command() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    first = re.search(r"^```bash\n(.*?)^```$", text, flags=re.S | re.M)
    assert first is not None
    commands = [line for line in first.group(1).splitlines() if line and not line.startswith("#")]
    assert commands == ["python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "
                        "python -m pytest matrices/example-cpu.matrix.yaml", "bash tests/run.sh"]


def test_every_documentation_link_of_the_readme_exists() -> None:
    links = re.findall(r"\]\(((?:docs|cases|matrices|deploy|tests)/[^)#]+)", README.read_text(encoding="utf-8"))
    assert links and [link for link in links if not (REPO / link).exists()] == []


def test_the_tour_runs_as_written(tmp_path: Path) -> None:
    blocks = tour_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) == 5
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, root / name)
    bin_dir = tmp_path / "venv-bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    (bin_dir / "hetero").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pytest_hetero.cli "$@"\n')
    (bin_dir / "hetero").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)
    outs = []
    for block in blocks:
        done = subprocess.run(["bash", "-e", "-c", block], cwd=root, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"{block}\n---\n{done.stdout}\n{done.stderr}"
        outs.append(done.stdout)
    files, rules, first_run, failing_run, dossier = outs
    assert sorted(p.name for p in (root / "mine").iterdir()) == ["acceptance.yaml", "data.csv", "mine.matrix.yaml",
                                                                 "model.py", "threshold.json"]
    assert rules.startswith("ok: mine/mine.matrix.yaml (mine: 5 items, 0 omitted)")
    assert "verdict: PASS" in first_run and "## pytest-hetero: PASS" in first_run
    assert "4 passed, 1 skipped" in first_run
    assert "verdict: FAIL" in failing_run and "pytest exit status: 1" in failing_run
    owners = failing_run.split("failures by owner:", 1)[1].splitlines()
    assert owners[1].strip() == "business: 1"
    assert "mine/mine.matrix.yaml::this-cpu::py::threshold@four-rows::business: acceptance_failed: 1 of 3 acceptance rules failed: accuracy-floor" in owners[2]
    assert dossier.startswith("wrote dossier.html") and (root / "dossier.html").stat().st_size > 10_000
    assert sorted(dossier.splitlines()[1:]) == [
        "failed business mine/mine.matrix.yaml::this-cpu::py::threshold@four-rows::business",
        "not_applicable platform mine/mine.matrix.yaml::this-cpu::scheduling",
        "passed algorithm mine/mine.matrix.yaml::this-cpu::py::threshold@four-rows::model",
        "passed infrastructure mine/mine.matrix.yaml::this-cpu::discovery",
        "passed platform mine/mine.matrix.yaml::this-cpu::py::startup"]
