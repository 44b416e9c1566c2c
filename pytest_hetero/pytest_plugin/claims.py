"""Claim ids (the node ids of evidence, JUnit, the heat map and baselines) that do not move with option paths.

pytest settles its rootdir before any plugin has declared its options, so the value of
``--hetero-affected-from /elsewhere/old.matrix.yaml`` (or of ``--hetero-report-dir``,
``--hetero-baseline``, ``--hetero-sign-key`` written as a separate word) counts as a test path:
the rootdir moves up to a common ancestor and every node id gains a prefix (``poc/matrices/…``
instead of ``matrices/…``), which breaks CI test history. Claim ids are therefore relative to the
rootdir pytest settles on from the test paths alone (:func:`claim_root`); ``--rootdir`` and
``-c`` are honoured as pytest honours them.

Without an ini file (no ``pytest.ini``/``pyproject.toml [tool.pytest.ini_options]``/``tox.ini``/
``setup.cfg`` above the matrices) pytest's rootdir is the common ancestor of the invocation directory and
the test paths, so ``cd matrices && pytest m.matrix.yaml`` and ``pytest matrices/m.matrix.yaml`` would give
different ids and a baseline would stop matching. A claim id is then the matrix file's path relative to its
project (:func:`pytest_hetero.matrix.load.containment_root`: the nearest folder above it holding
``pyproject.toml``, ``.git`` or ``.hetero-root``, else its own folder), the same from any directory.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

CLAIM_ROOT = pytest.StashKey[Path]()
"""The folder claim ids are relative to (see :func:`claim_root`; set by ``pytest_configure``, with
:data:`~pytest_hetero.pytest_plugin.stash.SETTINGS`)."""
PATH_OPTIONS: tuple[str, ...] = ("--hetero-affected-from", "--hetero-report-dir", "--hetero-baseline",
                                 "--hetero-sign-key", "--hetero-audit-log")
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


def without_ini(config: pytest.Config) -> bool:
    """True when pytest found no ini file and was given no ``--rootdir``/``-c``: its rootdir then depends on
    the invocation directory, so claim ids are anchored to each matrix's project instead."""
    return config.inipath is None and not config.option.rootdir and not config.option.inifilename


def claim_prefix(config: pytest.Config, path: Path, nodeid_prefix: str) -> str:
    """The claim id prefix of the matrix file at ``path`` (``/``-separated): relative to its project when
    pytest found no ini file (:func:`without_ini`), else relative to :data:`CLAIM_ROOT`; pytest's
    ``nodeid_prefix`` for a file outside that root."""
    if without_ini(config):
        from pytest_hetero.matrix.load import containment_root

        return path.resolve().relative_to(containment_root(path)[0]).as_posix()
    root = config.stash[CLAIM_ROOT]
    if root == config.rootpath:
        return nodeid_prefix
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return nodeid_prefix
