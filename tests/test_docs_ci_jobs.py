"""Each CI example's ``before-change`` job script, run by bash as the CI runs it, in a real git repository with
two commits: the base branch (on the ``origin`` remote) and the change under review. The old matrix comes from
``git show`` with its relative paths as written, ``HETERO_ALLOW_PATHS`` is not set, and only the items the change
affects run; JUnit is published once per item."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import REPO

DOCS = REPO / "docs" / "ci"
MATRIX = "matrices/example-cpu.matrix.yaml"


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def two_commits(tmp_path: Path) -> Path:
    """``origin`` (bare) holds the base commit on ``main``; the clone ``work`` adds the change under review:
    the CPU row asks for 2 usable CPUs instead of 1 (its five items are affected, the GPU row's are not)."""
    seed = tmp_path / "seed"
    seed.mkdir()
    for folder in ("matrices", "cases"):
        shutil.copytree(REPO / folder, seed / folder, ignore=shutil.ignore_patterns("__pycache__"))
    git(seed, "init", "-q", "-b", "main")
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "base")
    git(tmp_path, "clone", "-q", "--bare", str(seed), "origin.git")
    git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), "work")
    work = tmp_path / "work"
    git(work, "checkout", "-q", "-b", "change")
    text = (work / MATRIX).read_text()
    assert text.count("min_cpus: 1") == 1
    (work / MATRIX).write_text(text.replace("min_cpus: 1", "min_cpus: 2"))
    git(work, "commit", "-qam", "cpu-host needs 2 CPUs")
    return work


def run_job(script: str, work: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-ec", script], cwd=work, env=env, capture_output=True, text=True, timeout=600,
                          check=False)


def job_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HETERO_ALLOW_PATHS", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(REPO)
    return env


def ran_and_deselected(work: Path) -> tuple[dict[str, str], dict[str, str]]:
    [bundle] = list((work / "reports").iterdir())
    evidence = json.loads((bundle / "evidence.json").read_text())
    ran = {i["nodeid"]: i["status"] for i in evidence["items"]}
    deselected = {u["nodeid"]: u["reason"] for u in evidence["untested"]["items"] if u["status"] == "deselected"}
    return ran, deselected


CPU = {f"{MATRIX}::cpu-host::discovery": "passed", f"{MATRIX}::cpu-host::scheduling": "not_applicable",
       f"{MATRIX}::cpu-host::py-current::startup": "passed",
       f"{MATRIX}::cpu-host::py-current::digits-logreg@digits-test::model": "passed",
       f"{MATRIX}::cpu-host::py-current::digits-logreg@digits-test::business": "passed"}


def check_selection(work: Path, old_name: str) -> None:
    ran, deselected = ran_and_deselected(work)
    assert ran == CPU
    assert sorted(deselected) == sorted(k.replace("cpu-host", "gpu-nvidia") for k in CPU)
    assert set(deselected.values()) == {f"deselected (unchanged since {old_name}, its paths read from matrices/; "
                                        "files it shares with this matrix not compared)"}


def test_github_before_change_job_runs_only_the_affected_items(tmp_path: Path) -> None:
    if (os.cpu_count() or 0) < 2:  # pragma: no cover - the change asks for 2 CPUs
        pytest.fail("this test needs a host with at least 2 CPUs")
    work = two_commits(tmp_path)
    job = yaml.safe_load((DOCS / "github-actions.yml").read_text())["jobs"]["before-change"]
    steps: list[dict[str, Any]] = job["steps"]
    show = next(s["run"] for s in steps if "git show" in s.get("run", ""))
    key = next(s["run"] for s in steps if "key.pem" in s.get("run", "") and "pytest" not in s["run"])
    first_run = next(s["run"] for s in steps if s.get("if") == "steps.baseline.outputs.dir == ''")
    script = "\n".join([show, key, first_run]).replace("${{ github.base_ref }}", "main")
    assert "${{" not in script
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    from pytest_hetero.bundle.signing import generate_keypair

    generate_keypair(tmp_path / "ci.key", tmp_path / "ci.pub")
    env = {**job_env(tmp_path), "RUNNER_TEMP": str(runner_temp), "HETERO_SIGN_KEY": (tmp_path / "ci.key").read_text()}
    done = run_job(script, work, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (runner_temp / "old-matrix.yaml").read_text() == git(work, "show", f"main:{MATRIX}")
    check_selection(work, "old-matrix.yaml")


def test_gitlab_before_change_job_runs_only_the_affected_items(tmp_path: Path) -> None:
    work = two_commits(tmp_path)
    lines = [str(line) for line in yaml.safe_load((DOCS / "gitlab-ci.yml").read_text())["before-change"]["script"]]
    # the job's lines, minus the fetch of last night's bundle from the GitLab API (none yet: HTTP 404)
    script = "\n".join(line for line in lines if "curl" not in line and "$code" not in line)
    from pytest_hetero.bundle.signing import generate_keypair

    generate_keypair(tmp_path / "ci.key", tmp_path / "ci.pub")
    env = {**job_env(tmp_path), "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
           "HETERO_SIGN_KEY": str(tmp_path / "ci.key")}
    done = run_job(script, work, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "no baseline: this run becomes the baseline" in done.stdout
    check_selection(work, "old-matrix.yaml")


def test_junit_is_published_once_per_item() -> None:
    gitlab = yaml.safe_load((DOCS / "gitlab-ci.yml").read_text())
    publishers = sorted(name for name, job in gitlab.items() if isinstance(job, dict)
                        and "junit" in ((job.get("artifacts") or {}).get("reports") or {}))
    assert publishers == ["merge"]
    assert gitlab["merge"]["artifacts"]["reports"]["junit"] == "merged/*/junit.xml"
    github = yaml.safe_load((DOCS / "github-actions.yml").read_text())["jobs"]
    junit_steps = {name: [s for s in job["steps"] if re.search(r"junit", str(s.get("uses", "")))]
                   for name, job in github.items()}
    assert {name: len(steps) for name, steps in junit_steps.items() if steps} == {"merge": 1}
