"""The README's main command, run for real: ``hetero keygen keys/gate.key`` then ``python3 -m pytest
matrices/example-cpu.matrix.yaml --hetero-sign-key keys/gate.key`` in a copy of the project (its matrix
and the digits case), the code under test first on the path. Used by the tests of issue 27's claims."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def env() -> dict[str, str]:
    """The environment of a child process: this checkout first on PYTHONPATH."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


def cli(*argv: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``hetero ARGV…`` in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", "pytest_hetero.cli", *map(str, argv)], capture_output=True,
                          text=True, check=False, timeout=300, cwd=cwd, env=env())


def copy_project(project: Path) -> Path:
    """``project`` holding matrices/example-cpu.matrix.yaml and cases/digits as in this checkout, a
    ``.hetero-root`` (the containment boundary) and ``keys/gate.key`` (+ ``.pub``); returns ``project``."""
    (project / "matrices").mkdir(parents=True)
    shutil.copy(ROOT / "matrices" / "example-cpu.matrix.yaml", project / "matrices")
    shutil.copytree(ROOT / "cases" / "digits", project / "cases" / "digits")
    (project / ".hetero-root").write_text("")
    done = cli("keygen", "keys/gate.key", cwd=project)
    assert done.returncode == 0, done.stderr
    return project


def gate(project: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``python3 -m pytest matrices/example-cpu.matrix.yaml --hetero-sign-key keys/gate.key EXTRA…`` in
    ``project`` (pytest-randomly and the cache off, as the README's reader would not have them)."""
    return subprocess.run([sys.executable, "-m", "pytest", "matrices/example-cpu.matrix.yaml", "--hetero-sign-key",
                           "keys/gate.key", "-p", "no:cacheprovider", "-p", "no:randomly", *extra], cwd=project,
                          env=env(), capture_output=True, text=True, check=False, timeout=600)


def readme_bundle(project: Path) -> tuple[Path, Path]:
    """(bundle, gate public key) of the README's command run once in a fresh copy at ``project``."""
    copy_project(project)
    done = gate(project)
    assert "bundle signed by" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    (bundle,) = (project / "reports").iterdir()
    return bundle, project / "keys" / "gate.key.pub"
