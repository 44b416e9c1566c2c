"""The ``--hetero-*`` options and ``hetero_*`` ini keys on pytest's parser, and the settings resolved
from them (the tables and the resolution are pytest-free in :mod:`pytest_hetero.settings`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hetero.settings import INI, OPTIONS, Settings, build_settings


def add_options(parser: pytest.Parser) -> None:
    """Register every ``--hetero-*`` option and ``hetero_*`` ini key on pytest's parser."""
    group = parser.getgroup("hetero", "pytest-hetero validation gate")
    for name, kwargs in OPTIONS:
        group.addoption(name, **kwargs)
    for name, help_text, default in INI:
        parser.addini(name, help_text, default=default)


def settings_of(config: pytest.Config, run_id: str | None = None) -> Settings:
    """Resolve the run's settings from ``config`` once (``run_id`` overrides, for xdist workers).
    Raises SettingsError for bad values."""
    inipath = Path(str(config.inipath)) if config.inipath is not None else None
    return build_settings(config.getoption, config.getini, Path(str(config.rootpath)), inipath, run_id)
