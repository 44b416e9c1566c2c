"""Every ``pytest_hetero_*`` hook. Implement them in a plugin (conftest.py or an installed pytest11 plugin).

Built-in behaviour is the last-resort implementation of these same hooks (see
:mod:`pytest_hetero.hooks.builtin`), so a third party extends or replaces it the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from pytest_hetero.backends.protocol import Backend
    from pytest_hetero.layers.base import LayerContext
    from pytest_hetero.matrix.model import Serving
    from pytest_hetero.serving.protocol import ServingProtocol
    from pytest_hetero.settings import Settings

hookspec = pluggy.HookspecMarker("pytest")


@hookspec(firstresult=True)
def pytest_hetero_make_backend(name: str, target: dict[str, Any], settings: Settings) -> Backend | None:
    """Return a Backend for ``name`` (e.g. ``"docker"``) and the matrix ``target`` mapping, or None.

    Called once per (name, target) per pytest process, when the first item needs it. The
    first non-None answer wins; the built-ins answer ``local``, ``docker`` and ``kubernetes``.
    """


@hookspec(firstresult=True)
def pytest_hetero_backend_class(name: str) -> type[Backend] | None:
    """Return the Backend class for ``name`` without building it (used at collection to plan
    items, e.g. ``scheduling_per_image``). First non-None answer wins."""


@hookspec(firstresult=True)
def pytest_hetero_make_protocol(name: str, serving: Serving) -> ServingProtocol | None:
    """Return the client of inference protocol ``name`` (``serving.protocol``) for one served model, or None.

    Called when a startup or model item of a served model needs it. The first non-None answer
    wins; the built-ins answer ``oip`` (Open Inference Protocol, KServe V2 REST) and ``openai``
    (OpenAI-compatible API), see :mod:`pytest_hetero.serving`.
    """


@hookspec
def pytest_hetero_layer_check(ctx: LayerContext) -> None:
    """Extra check after the built-in check of ``ctx.layer`` passed; raise LayerFailed/LayerBroken
    to fail the item, record evidence with ``ctx.record``. Every implementation is called."""


@hookspec(firstresult=True)
def pytest_hetero_failure_owner(layer: str, category: str, default: str) -> str | None:
    """Return the team that owns a failure of ``category`` in ``layer`` (``default`` is the
    matrix's owner for the layer, or the owner the check named). First non-None answer wins."""


@hookspec
def pytest_hetero_evidence(ctx: LayerContext, evidence: dict[str, Any]) -> None:
    """Add to an item's evidence dict (``evidence["records"]``) before it is journaled."""


@hookspec
def pytest_hetero_write_reports(evidence: dict[str, Any], bundle_dir: Path, settings: Settings) -> list[Path] | None:
    """Render ``evidence`` (the evidence.json document) into files under ``bundle_dir``; return their
    paths. Called on the controller after evidence.json is written, before signing."""


@hookspec
def pytest_hetero_bundle_finished(evidence: dict[str, Any], bundle_dir: Path, settings: Settings) -> None:
    """Called last, after every writer: sign or publish the bundle. Exceptions are reported, not raised."""
