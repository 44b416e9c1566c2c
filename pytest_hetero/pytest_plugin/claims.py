"""Claim ids (the node ids of evidence, JUnit, the heat map and baselines) that do not move with option paths.

pytest settles its rootdir before any plugin has declared its options, so the value of
``--hetero-affected-from /elsewhere/old.matrix.yaml`` (or of ``--hetero-report-dir``,
``--hetero-baseline``, ``--hetero-sign-key`` written as a separate word) counts as a test path:
the rootdir moves up to a common ancestor and every node id gains a prefix (``poc/matrices/…``
instead of ``matrices/…``), which breaks CI test history. Claim ids are therefore relative to the
rootdir pytest settles on from the test paths alone (:func:`claim_root`); ``--rootdir`` and
``-c`` are honoured as pytest honours them.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

CLAIM_ROOT = pytest.StashKey[Path]()
"""The folder claim ids are relative to (see :func:`claim_root`)."""
PATH_OPTIONS: tuple[str, ...] = ("--hetero-affected-from", "--hetero-report-dir", "--hetero-baseline",
                                 "--hetero-sign-key")
"""Options whose value is a path but not a test path."""


def option_paths(config: pytest.Config) -> list[str]:
    """Values of :data:`PATH_OPTIONS` written as a separate word (``--opt PATH``, not ``--opt=PATH``) in
    ``PYTEST_ADDOPTS`` or on the command line, which pytest took for test paths when settling its rootdir."""
    words = shlex.split(os.environ.get("PYTEST_ADDOPTS", "")) + [str(a) for a in config.invocation_params.args]
    return [words[n + 1] for n, word in enumerate(words[:-1]) if word in PATH_OPTIONS]


def claim_root(config: pytest.Config) -> Path:
    """The rootdir pytest would have settled on without the values of :data:`PATH_OPTIONS`: pytest's own
    when none was given as a separate word (or ``--rootdir``/``-c`` decide it), else pytest's rule
    (``determine_setup``) applied to the test paths alone."""
    moved = [v for v in option_paths(config) if (config.invocation_params.dir / v).exists()]
    if not moved or config.option.rootdir or config.option.inifilename:
        return config.rootpath
    args = [str(a) for a in config.args] if config.args_source == pytest.Config.ArgsSource.ARGS else []
    try:  # pytest's rule itself, not a copy that drifts; it has no public entry point
        from _pytest.config.findpaths import determine_setup

        root: Path = determine_setup(inifile=None, override_ini=None, args=args, rootdir_cmd_arg=None,
                                     invocation_dir=config.invocation_params.dir)[0]
    except (ImportError, TypeError):  # another pytest: its rootdir stands
        return config.rootpath
    return root


def claim_prefix(config: pytest.Config, path: Path, nodeid_prefix: str) -> str:
    """The claim id prefix of the matrix file at ``path``: its path relative to :data:`CLAIM_ROOT`
    (``/``-separated), or pytest's ``nodeid_prefix`` for a file outside it."""
    root = config.stash.get(CLAIM_ROOT, None)
    if root is None or root == config.rootpath:
        return nodeid_prefix
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return nodeid_prefix
