"""What a serving-protocol client answers, the data set samples it sends, and endpoint expansion.

A protocol (one per ``serving.protocol`` name, built by the ``pytest_hetero_make_protocol`` hook)
turns samples into pre-encoded HTTP requests, parses responses into per-sample predictions,
and reads the service's model identity. It does no I/O of its own for load: :mod:`.load` sends
what :meth:`ServingProtocol.prepare` built, so every protocol is measured the same way.
"""

from __future__ import annotations

import csv
import json
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import httpx
import msgspec

from pytest_hetero.declared import resolve
from pytest_hetero.matrix.model import Serving

_O = TypeVar("_O")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_endpoint(text: str, environ: dict[str, str] | None = None) -> str:
    """Expand ``${VAR}`` and ``${VAR:-default}`` in an endpoint URL and strip a trailing ``/``.

    Raises KeyError naming a variable that is unset and has no default.
    """
    env = os.environ if environ is None else environ

    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = env.get(name)
        if value:
            return value
        if default is None:
            raise KeyError(name)
        return default

    return _VAR.sub(one, text).rstrip("/")


@dataclass(frozen=True)
class Sample:
    """One data set row: ``index`` (the row's id), ``label`` (expected answer or None), and either
    numeric ``features`` (CSV) or a ``text`` input (JSONL)."""

    index: int
    label: Any
    features: tuple[float, ...] = ()
    text: str | None = None


def read_samples(path: Path) -> list[Sample]:
    """Read a data set file.

    ``.csv``: header ``index,label,<feature>…`` (the digits case), numbers after the first two
    columns become ``features``. ``.jsonl``: one object per line ``{"index": int, "input": str,
    "label"?: any}``. Raises ValueError naming the file and line on anything else.
    """
    samples: list[Sample] = []
    if path.suffix == ".jsonl":
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                samples.append(Sample(int(row["index"]), row.get("label"), text=str(row["input"])))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{n}: need {{index, input, label?}}: {exc}") from None
        return samples
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, [])
        if header[:2] != ["index", "label"]:
            raise ValueError(f"{path}:1: header must start with index,label (got {header[:2]})")
        for n, row in enumerate(reader, 2):
            try:
                samples.append(Sample(int(row[0]), int(row[1]), tuple(float(v) for v in row[2:])))
            except (ValueError, IndexError) as exc:
                raise ValueError(f"{path}:{n}: {exc}") from None
    return samples


@dataclass(frozen=True)
class PreparedRequest:
    """A request ready to send: ``path`` below the endpoint, JSON ``body`` bytes, the positions of
    the ``samples`` it carries (in the list given to prepare), and whether the answer streams (SSE)."""

    path: str
    body: bytes
    samples: tuple[int, ...]
    stream: bool = False


@dataclass
class Answer:
    """A parsed response: one prediction per sample of the request, the model version the response
    reports (None when the protocol has none), and per-sample extra fields (name → values)."""

    predictions: list[Any]
    version: str | None = None
    extra: dict[str, list[Any]] = field(default_factory=dict)


@dataclass
class Identity:
    """What the service says about the model: ``found`` (it serves a model of that name), the
    ``name`` and ``versions`` it reports, ``version_served`` (True/False when the protocol can ask
    for one version, None when it cannot), and the raw documents and status codes by path."""

    found: bool
    name: str | None = None
    versions: list[str] = field(default_factory=list)
    version_served: bool | None = None
    raw: dict[str, Any] = field(default_factory=dict)


class OptionsInvalid(ValueError):
    """A protocol's ``serving.options`` has an option of another type than the protocol declares (the message
    names the protocol and the option, ``$.max_tokens``)."""


def options_of(serving: Serving, shape: type[_O]) -> _O:
    """``serving.options`` converted once to the protocol's declared ``shape`` (a ``msgspec.Struct``; options it
    does not declare are ignored). Raises :class:`OptionsInvalid` naming the option of another type."""
    try:
        return msgspec.convert(serving.options, shape)
    except msgspec.ValidationError as exc:
        raise OptionsInvalid(f"serving.options of protocol {serving.protocol!r} (model {serving.model_name}): "
                             f"{exc}") from None


Get = Callable[[str], httpx.Response]
"""GET a path below the endpoint with the run's headers (auth); raises httpx.HTTPError."""


class ServingProtocol(ABC):
    """Client side of one inference protocol for one served model (``serving``)."""

    name: ClassVar[str] = ""
    ready_path: ClassVar[str] = ""
    """Path that answers 200 once the service is ready."""

    def __init__(self, serving: Serving) -> None:
        self.serving = serving

    @property
    def task(self) -> str:
        """What the requests ask for: ``infer``, ``embeddings`` or ``chat``."""
        return self.serving.task or "infer"

    @abstractmethod
    def metadata_path(self) -> str:
        """Path of the model's metadata; also the request an unauthenticated caller must be refused."""

    @abstractmethod
    def identity(self, get: Get) -> Identity:
        """Ask the service which model and versions it serves."""

    @abstractmethod
    def prepare(self, samples: list[Sample], batch: int) -> list[PreparedRequest]:
        """Encode ``samples`` into requests of ``batch`` samples each (the last may be smaller)."""

    @abstractmethod
    def parse(self, request: PreparedRequest, body: bytes) -> Answer:
        """Parse a 2xx response body of ``request``. Raises ValueError when it is malformed."""


resolve(__name__)
