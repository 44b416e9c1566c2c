"""Every ``pytest_hetero_*`` hook. Implement them in a plugin: a conftest.py or pytest11 plugin for a
pytest run, or a module in the ``pytest_hetero`` entry-point group (or ``-p MODULE``) for both the
pytest run and the ``hetero`` command (see :mod:`pytest_hetero.hooks.registry`).

Built-in behaviour is the last-resort (``trylast``) implementation of these same hooks (see
:mod:`pytest_hetero.hooks.builtin`), so a third party extends or replaces it the same way.
Implementations may take any subset of a hook's arguments, by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import argparse

    from pytest_hetero.backends.labels import CleanupReport
    from pytest_hetero.backends.protocol import Backend
    from pytest_hetero.evidence.document import EvidenceDocument, ItemDict
    from pytest_hetero.evidence.inputs import RunInputs
    from pytest_hetero.layers.base import LayerContext
    from pytest_hetero.matrix.model import Serving
    from pytest_hetero.serving.protocol import ServingProtocol
    from pytest_hetero.settings import Settings

hookspec = pluggy.HookspecMarker("pytest")


@hookspec(firstresult=True)
def pytest_hetero_backend(name: str) -> type[Backend] | None:
    """Return the Backend class for backend ``name`` (e.g. ``"docker"``), or None.

    Called at collection and by ``hetero lint``/``plan`` to plan a matrix (the class's
    ``scheduling_per_image`` keys scheduling items by resource × image), and once per (name,
    matrix target) per pytest process to build the backend, as ``cls(target, settings)``. The
    first non-None answer wins; the built-ins answer ``local``, ``docker`` and ``kubernetes``.
    """


@hookspec(firstresult=True)
def pytest_hetero_make_protocol(name: str, serving: Serving) -> ServingProtocol | None:
    """Return the client of inference protocol ``name`` (``serving.protocol``) for one served model, or None.

    Called when a startup or model item of a served model needs it (serving checks reach the
    hook through ``ctx.hook``). The first non-None answer wins; the built-ins answer ``oip``
    (Open Inference Protocol, KServe V2 REST) and ``openai`` (OpenAI-compatible API), see
    :mod:`pytest_hetero.serving`.
    """


@hookspec
def pytest_hetero_layer_check(ctx: LayerContext) -> None:
    """Extra check after the built-in check of ``ctx.layer`` passed; raise LayerFailed/LayerBroken
    to fail the item, record evidence with ``ctx.record``. Every implementation is called."""


@hookspec(firstresult=True)
def pytest_hetero_failure_owner(layer: str, category: str, default: str) -> str | None:
    """Return the team that owns a failure of ``category`` in ``layer`` (``default`` is the
    matrix's owner for the layer, or the matrix's team for the owner category the check named,
    see :meth:`~pytest_hetero.matrix.model.Matrix.team`). First non-None answer wins."""


@hookspec
def pytest_hetero_evidence(ctx: LayerContext | None, evidence: ItemDict) -> None:
    """Add to an item's finished evidence (the dict journaled for it: ``nodeid``, ``layer``,
    ``keys``, ``status``, ``records``, ``artifacts``…), e.g. append to ``evidence["records"]``.

    Called in the process that ran the item, once per item, with its final status, before
    secrets are redacted and the evidence goes onto the report and into the journal. ``ctx`` is
    the item's LayerContext, or None for an item that never reached its check (blocked, a
    business item whose model item was not applicable, or a backend that could not be built).
    An item whose run crashed outside pytest-hetero's handling (pytest records a harness error
    for it) does not pass here. Every implementation is called. A record the hook adds of a kind the gate
    declares (:data:`pytest_hetero.evidence.records.KINDS`) must fit that kind's shape, as every record is checked
    after the hooks (:func:`pytest_hetero.evidence.document.check_item`): one that does not errors the item, naming
    the field; a kind of the plugin's own keeps an open ``data`` object.
    """


@hookspec
def pytest_hetero_amend_evidence(evidence: EvidenceDocument, settings: Settings, inputs: RunInputs) -> None:
    """Add a top-level section to the run's evidence document before evidence.json is written
    (its only write): the built-ins add ``selection`` (profile, affected-only, shard) and
    ``baseline_diff`` (``--hetero-baseline``).

    The document is lazy: ``evidence["items"]`` is a read-only sequence of item dicts read from disk one at
    a time (an :class:`~pytest_hetero.evidence.spool.ItemSpool`; a list when the document was loaded from
    evidence.json), each read a fresh dict, so a change to an item is not kept. Walk it once and keep what
    you need of each item, not the items (the same holds for every hook given ``evidence`` below).

    Called once, on the controller (or by ``hetero report``/``merge``), after the journal is
    assembled. ``inputs`` holds the run's matrices, each read once: use ``inputs.matrix(entry)``
    for an entry of ``evidence["matrices"]`` instead of reading the file. Every implementation
    is called; each owns the keys it adds.
    """


@hookspec
def pytest_hetero_write_reports(evidence: EvidenceDocument, bundle_dir: Path, settings: Settings,
                                inputs: RunInputs) -> list[Path] | None:
    """Render ``evidence`` (the evidence.json document, as written; its ``items`` lazy, read-only: see
    :func:`pytest_hetero_amend_evidence`) into files under ``bundle_dir``; return their paths. Called on
    the controller after evidence.json and the matrix copies (``inputs/``) are written, before the manifest
    and the signature. Every implementation is called; the built-in one (last) writes report.html,
    summary.md, junit.xml and ctrf.json."""


@hookspec
def pytest_hetero_bundle_finished(evidence: EvidenceDocument, bundle_dir: Path, settings: Settings,
                                  inputs: RunInputs) -> None:
    """Called after every writer (``evidence`` as for :func:`pytest_hetero_write_reports`); the built-in
    implementation, last of all, writes manifest.json,
    the in-toto statement and its DSSE envelope (signed with ``settings.sign_key`` when set).
    Files a plugin adds here are covered by the manifest. Exceptions are reported, not raised."""


@hookspec
def pytest_hetero_cleanup_options(parser: argparse.ArgumentParser) -> None:
    """Add a backend's own options to ``hetero cleanup`` (prefix them with the backend name, e.g.
    ``--docker-host``). Called when ``hetero cleanup`` parses its arguments."""


@hookspec
def pytest_hetero_cleanup(backend: str | None, args: argparse.Namespace) -> list[CleanupReport] | None:
    """Remove (or list, with ``args.dry_run``) what crashed runs of your backends left behind.

    ``backend`` is the backend ``hetero cleanup --backend`` named, or None for every backend;
    answer only for your own backends (None or an empty list when it names none of them).
    Select objects with :func:`pytest_hetero.backends.labels.selected` (``args.run_id``,
    ``args.older_than_s``: the ``pytest-hetero.run-id`` and ``pytest-hetero.created-at`` labels).
    Return one CleanupReport per backend cleaned (its ``error`` says why the backend could not be
    reached or listed; never raise for that). Every implementation is called.
    """
