"""The CI examples in docs/ci/ use only commands the tool accepts: each ``hetero …`` and ``pytest …``
line is extracted from the parsed YAML and run through the real argument parsers."""

from __future__ import annotations

import re
import shlex
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
