"""Issue 27, point 4 on the real Docker engine: the dossier claims only what the recorded facts prove.

matrices/example-docker.matrix.yaml passes every item, places its workload, runs no governance probe,
and records ``scope.not_proven`` (queue/quota: a Docker host has none). Before: phase 2 read "no
boundary crossed: covered" and the untested scope "Nothing untested".
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from dockerkit import REPO


def _text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<style>.*?</style>", "", page, flags=re.S)))
                    .split())


def test_docker_run_claims_no_boundary_and_lists_what_it_did_not_prove(tmp_path: Path, run_id: str,
                                                                       engine: Any) -> None:
    hetero = [sys.executable, "-m", "pytest_hetero.cli"]
    assert subprocess.run([*hetero, "keygen", str(tmp_path / "gate.key")], check=False).returncode == 0
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "matrices/example-docker.matrix.yaml", "-p", "no:cacheprovider",
         "--hetero-run-id", run_id, "--hetero-report-dir", str(tmp_path / "reports"), "--hetero-sign-key",
         str(tmp_path / "gate.key")], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = tmp_path / "dossier.html"
    done = subprocess.run([*hetero, "render", str(tmp_path / "reports" / run_id), "--format", "dossier", "--key",
                           str(tmp_path / "gate.key.pub"), "--out", str(out)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    text = _text(out.read_text(encoding="utf-8"))
    assert ("2. Tasks land in the right pool, Pending explained, no boundary crossed partly covered "
            "cpu-2c::scheduling 1 placement(s) proven, 0 Pending reason(s) explained, 0 unexplained; "
            "no boundary crossed: not proven (no tenant-isolation probe ran)") in text
    assert "Nothing untested" not in text
    assert "Scheduling: queue/quota not proven" in text
