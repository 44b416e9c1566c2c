"""The CI examples in docs/ci/ use only commands the tool accepts: each ``hetero …`` and ``pytest …``
line is extracted from the parsed YAML and run through the real argument parsers."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import REPO

from pytest_hetero.bundle.baseline import POLICIES
from pytest_hetero.cli import build_parser
from pytest_hetero.matrix.selection import parse_selector, parse_shard
from pytest_hetero.pytest_plugin.options import settings_of

DOCS = REPO / "docs" / "ci"
# CI expressions replaced by sample values: GitHub ${{ … }}, then shell/GitLab variables
GITHUB_EXPR = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
SHELL_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
SAMPLE = {"matrix.shard": "2", "CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "4", "CI_PIPELINE_ID": "4711"}
SEPARATORS = re.compile(r";|&&|\|\||\bthen\b|\bdo\b|\belse\b")


def scripts(node: Any) -> list[str]:
    """Every shell script in a CI document: GitHub ``run:`` values and GitLab ``script:`` lists."""
    out: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "run" and isinstance(value, str):
                out.append(value)
            elif key in ("script", "before_script", "after_script"):
                out += [value] if isinstance(value, str) else [str(v) for v in value]
            else:
                out += scripts(value)
    elif isinstance(node, list):
        for value in node:
            out += scripts(value)
    return out


def commands(path: Path) -> list[list[str]]:
    """argv of every ``hetero``/``pytest`` command in ``path``, CI variables substituted."""
    found = []
    for script in scripts(yaml.safe_load(path.read_text(encoding="utf-8"))):
        script = GITHUB_EXPR.sub(lambda m: SAMPLE.get(m.group(1), "123"), script.replace("\\\n", " "))
        script = SHELL_VAR.sub(lambda m: SAMPLE.get(m.group(1), "/tmp/x"), script)
        for line in script.splitlines():
            for part in SEPARATORS.split(line):
                argv = shlex.split(part.strip())
                if argv and argv[0] in ("hetero", "pytest"):
                    found.append(argv)
    return found


EXAMPLES = sorted(DOCS.glob("*.yml"))


def test_examples_exist() -> None:
    assert [p.name for p in EXAMPLES] == ["github-actions.yml", "gitlab-ci.yml"]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_hetero_commands_parse(example: Path) -> None:
    argvs = [a for a in commands(example) if a[0] == "hetero"]
    used = {a[1] for a in argvs}
    assert {"lint", "plan", "merge", "diff"} <= used
    parser = build_parser()
    for argv in argvs:
        args = parser.parse_args(argv[1:])
        if argv[1] == "plan" and args.shard:
            parse_shard(args.shard)
        if argv[1] in ("lint", "plan"):
            assert args.func(args) == 0, argv  # real run: the matrix is in the repository


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_pytest_commands_parse(example: Path, pytester: pytest.Pytester) -> None:
    argvs = [a for a in commands(example) if a[0] == "pytest"]
    assert any("--hetero-shard" in a for a in argvs) and any("--hetero-affected-from" in a for a in argvs)
    for argv in argvs:
        config = pytester.parseconfig(*argv[1:])
        settings = settings_of(config)
        if settings.shard:
            assert parse_shard(settings.shard) == (2, 4)
        for selector in settings.affected:
            parse_selector(selector)
        assert settings.fail_on in POLICIES


def test_a_wrong_option_would_be_caught(pytester: pytest.Pytester) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["merge", "a", "--output-dir", "x"])
    with pytest.raises(pytest.UsageError):
        pytester.parseconfig("m.matrix.yaml", "--hetero-shards", "1/2")


def test_github_workflow_passes_actionlint_with_the_shipped_config() -> None:
    """actionlint (built from the Go module proxy) with .github/actionlint.yaml, which declares the `gpu` runner
    label; without the config the same file fails on that label, so the config is what makes it pass."""
    from test_cosign import gotool

    actionlint = gotool("actionlint")
    config = REPO / ".github" / "actionlint.yaml"
    ok = subprocess.run([actionlint, "-no-color", "-config-file", str(config), str(DOCS / "github-actions.yml")],
                        capture_output=True, text=True, timeout=120, check=False)
    assert (ok.returncode, ok.stdout + ok.stderr) == (0, "")
    bare = Path(os.environ.get("TMPDIR", "/tmp")) / f"actionlint-empty-{os.getpid()}.yaml"
    bare.write_text("self-hosted-runner:\n  labels: []\n")
    try:
        refused = subprocess.run([actionlint, "-no-color", "-config-file", str(bare), str(DOCS / "github-actions.yml")],
                                 capture_output=True, text=True, timeout=120, check=False)
    finally:
        bare.unlink()
    assert refused.returncode == 1 and 'label "gpu" is unknown' in refused.stdout


@pytest.mark.parametrize(("example", "schema"), [("github-actions.yml", "vendor.github-workflows"),
                                                 ("gitlab-ci.yml", "vendor.gitlab-ci")])
def test_ci_examples_are_valid_against_the_published_schemas(example: str, schema: str) -> None:
    """SchemaStore's GitHub workflow and GitLab CI schemas, as vendored by check-jsonschema (PyPI)."""
    done = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(DOCS / example)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "ok -- validation done"), done.stdout + done.stderr


def test_no_step_hides_a_failure() -> None:
    for example in EXAMPLES:
        assert "|| true" not in example.read_text(), example.name


def _gitlab_script(job: str) -> str:
    doc = yaml.safe_load((DOCS / "gitlab-ci.yml").read_text())
    return "\n".join(str(line) for line in doc[job]["script"])


def test_gitlab_before_change_bootstraps_without_a_baseline(tmp_path: Path) -> None:
    """The job's own script, run by bash in a checkout copy: with no previous nightly it says so, runs, and exits
    by the verdict (the example's GPU row fails on this host: exit 1); the bundle it leaves is then a baseline the
    same script compares with (gate fail-on regression: nothing regressed, exit 0)."""
    import shutil

    from pytest_hetero.bundle.signing import generate_keypair

    work = tmp_path / "checkout"
    for folder in ("matrices", "cases"):
        shutil.copytree(REPO / folder, work / folder)
    # a CI job runs in a checkout: a git repository, the project its matrices' ../cases paths stay inside
    subprocess.run(["git", "init", "-q", str(work)], check=True, timeout=60)
    old = (work / "matrices" / "example-cpu.matrix.yaml").read_text()
    (work / "old-matrix.yaml").write_text(old.replace("devices: 1", "devices: 2", 1))  # the change under review
    assert "devices: 1" in old  # the GPU row's expectation: its items are affected, and fail on this host
    generate_keypair(tmp_path / "ci.key", tmp_path / "ci.pub")
    script = _gitlab_script("before-change")
    # what the job fetches is the CI's business; here: no artifact yet (HTTP 404), then last night's bundle
    block = script[script.index("baseline=$("):]
    env = {**os.environ, "HETERO_SIGN_KEY": str(tmp_path / "ci.key"), "CI": "true",
           "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    first = subprocess.run(["bash", "-ec", block], cwd=work, env=env, capture_output=True, text=True, timeout=600,
                           check=False)
    assert "no baseline: this run becomes the baseline" in first.stdout, first.stdout[-2000:] + first.stderr[-2000:]
    assert first.returncode == 1 and "verdict: FAIL" in first.stdout
    [bundle] = list((work / "reports").iterdir())
    (work / "previous" / "merged").mkdir(parents=True)
    bundle.rename(work / "previous" / "merged" / "nightly-1")
    second = subprocess.run(["bash", "-ec", block], cwd=work, env=env, capture_output=True, text=True, timeout=600,
                            check=False)
    assert "no baseline" not in second.stdout and "baseline comparison" in second.stdout, second.stdout[-2000:]
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert "gate (fail-on regression): PASS" in second.stdout
