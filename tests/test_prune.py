"""``hetero prune``: keep the newest N run folders and/or those younger than T, never a bundle a baseline points
to (a link in the reports folder, a bundle or a file listing bundles given with --baseline)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from pytest_hetero.cli import main

DAY = 86400.0


def reports_folder(tmp_path: Path) -> Path:
    """b1..b5 finished (1.0, 2.5, 3.5, 4.5, 5.5 days old), ``running`` (journal only, 10 days untouched),
    ``baseline -> b5``, ``notes/`` and ``README.md`` (not run folders), and ``ci-baselines.txt`` listing b4."""
    reports = tmp_path / "reports"
    now = time.time()
    for name, age in (("b1", 1.0), ("b2", 2.5), ("b3", 3.5), ("b4", 4.5), ("b5", 5.5)):
        (reports / name).mkdir(parents=True)
        (reports / name / "evidence.json").write_text('{"items": []}')
        (reports / name / "journal.jsonl").write_text("")
        os.utime(reports / name / "evidence.json", (now - age * DAY, now - age * DAY))
    (reports / "running").mkdir()
    (reports / "running" / "journal.jsonl").write_text("")
    os.utime(reports / "running", (now - 10 * DAY, now - 10 * DAY))
    (reports / "baseline").symlink_to("b5")
    (reports / "notes").mkdir()
    (reports / "README.md").write_text("what lands here\n")
    (tmp_path / "ci-baselines.txt").write_text("# the bundle the merge-request job compares with\nb4\n")
    return reports


def left(reports: Path) -> list[str]:
    return sorted(p.name for p in reports.iterdir())


def test_keep_n_keeps_the_newest_and_every_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = reports_folder(tmp_path)
    assert main(["prune", str(reports), "--keep", "2", "--baseline", str(tmp_path / "ci-baselines.txt")]) == 0
    assert left(reports) == ["README.md", "b1", "b2", "b4", "b5", "baseline", "notes", "running"]
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "1 of 6 run folders removed"
    assert f"removed {reports}/b3 (age 3.5d: no rule keeps it)" in out
    assert f"kept {reports}/b5 (age 5.5d: baseline: the link baseline points to it)" in out
    assert f"kept {reports}/b4 (age 4.5d: baseline: listed in {tmp_path}/ci-baselines.txt)" in out
    assert f"kept {reports}/running (age 10.0d: no evidence.json yet (a run in progress?): only --older-than " \
           "removes it)" in out


def test_older_than_removes_only_older_unprotected_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = reports_folder(tmp_path)
    assert main(["prune", str(reports), "--older-than", "3d", "--baseline", str(reports / "b4"), "--json"]) == 0
    assert left(reports) == ["README.md", "b1", "b2", "b4", "b5", "baseline", "notes"]
    rows = {Path(r["path"]).name: (r["action"], r["why"]) for r in json.loads(capsys.readouterr().out)}
    assert rows == {"b1": ("keep", "younger than 259200 s"), "b2": ("keep", "younger than 259200 s"),
                    "b3": ("remove", "no rule keeps it"), "b4": ("keep", f"baseline: named by {reports}/b4"),
                    "b5": ("keep", "baseline: the link baseline points to it"),
                    "running": ("remove", "no rule keeps it")}


def test_both_rules_keep_what_either_keeps_and_dry_run_removes_nothing(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    reports = reports_folder(tmp_path)
    assert main(["prune", str(reports), "--keep", "1", "--older-than", "3d", "--dry-run"]) == 0
    assert left(reports) == ["README.md", "b1", "b2", "b3", "b4", "b5", "baseline", "notes", "running"]
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" (")[0] for line in out if line.startswith("would remove")] == [
        f"would remove {reports}/b3", f"would remove {reports}/b4", f"would remove {reports}/running"]
    assert out[-1] == "3 of 6 run folders to remove"


@pytest.mark.parametrize(("argv", "message"), [
    ([], "hetero prune: give --keep N and/or --older-than DURATION\n"
         "  hint: a bare prune would remove every bundle that is not a baseline\n"),
    (["--older-than", "a week"], "hetero prune: --older-than 'a week' is not a duration (a number of seconds, or "
                                 "e.g. 250ms, 30s, 5m, 2h, 2d, 1w, 1m30s)\n"),
    (["--keep", "1", "--baseline", "missing-bundle"], "hetero prune: baseline missing-bundle: no such bundle or file\n"
     "  hint: give a bundle folder, a link to one, or a text file listing bundles\n"),
])
def test_bad_arguments_remove_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                      message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    reports = reports_folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["prune", str(reports), *argv]) == 2
    assert capsys.readouterr().err == message
    assert left(reports) == ["README.md", "b1", "b2", "b3", "b4", "b5", "baseline", "notes", "running"]


def test_a_baseline_file_line_naming_nothing_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = reports_folder(tmp_path)
    (tmp_path / "ci-baselines.txt").write_text("b9\n")
    assert main(["prune", str(reports), "--keep", "0", "--baseline", str(tmp_path / "ci-baselines.txt")]) == 2
    assert capsys.readouterr().err.startswith(f"hetero prune: baseline file {tmp_path}/ci-baselines.txt: 'b9' names "
                                              "no bundle")
    assert "b1" in left(reports)
