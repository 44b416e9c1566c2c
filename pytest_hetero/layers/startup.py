"""Startup layer: the image starts on the target; mounts, runtime, driver and device initialise inside it.

Besides the backend's start, every backend must prove the model and dataset the combinations
will use are the declared versions: :func:`verify_digest` is the shared check.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pytest_hetero.layers.base import LayerContext, LayerFailed

CHUNK = 1024 * 1024


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks. Raises OSError when unreadable."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_digest(ctx: LayerContext, what: str, name: str, version: str, path: Path, expected: str) -> None:
    """Check ``path`` exists with sha256 ``expected``; record it; LayerFailed (owner algorithm) otherwise.

    ``what`` is ``model`` or ``dataset``; the failure names both digests.
    """
    if not path.is_file():
        ctx.record("artifact.digest", what=what, name=name, version=version, path=str(path),
                   expected=expected, observed=None)
        raise LayerFailed(f"{what} {name}@{version} not found at {path}", "file_missing", "algorithm")
    observed = file_sha256(path)
    ctx.record("artifact.digest", what=what, name=name, version=version, path=str(path),
               expected=expected, observed=observed, size=path.stat().st_size)
    if observed != expected:
        raise LayerFailed(f"{what} {name}@{version} sha256 mismatch: matrix declares {expected}, "
                          f"file {path} has {observed}", "digest_mismatch", "algorithm")


def verify_inputs(ctx: LayerContext) -> None:
    """Verify every model and dataset the image's combinations will use (declared sha256 vs file).

    A served model without a declared file (empty sha256) has no file to verify; its service
    proves its version at startup instead (:func:`pytest_hetero.serving.checks.startup`).
    """
    for model in ctx.matrix.models:
        if not model.sha256:
            continue
        verify_digest(ctx, "model", model.name, model.version, model.path, model.sha256)
    for dataset in ctx.matrix.datasets:
        verify_digest(ctx, "dataset", dataset.name, dataset.version, dataset.path, dataset.sha256)


def check(ctx: LayerContext) -> None:
    """Start the image through the backend (which runs the in-container device initialisation);
    then, when the matrix serves models, prove each inference service is ready, reports the declared
    version and enforces its authentication (:func:`pytest_hetero.serving.checks.startup`)."""
    ctx.backend.start(ctx)
    if any(model.serving is not None for model in ctx.matrix.models):
        from pytest_hetero.serving.checks import startup

        startup(ctx)
