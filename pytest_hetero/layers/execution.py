"""Model-execution layer: the named model version runs on the named dataset version.

The backend runs the entrypoint; this module records the run uniformly (command, exit code,
duration in seconds, peak RSS in MiB, bounded stdout/stderr with sha256 of the full text,
the outputs file as an artifact) and decides the verdict.
"""

from __future__ import annotations

import json

from pytest_hetero.evidence.model import bounded
from pytest_hetero.layers.base import LayerContext, LayerFailed

OUTPUTS = "outputs.json"


def check(ctx: LayerContext) -> None:
    """Run the model; LayerFailed on timeout, non-zero exit, or missing/invalid outputs.

    A served model (``serving``) is not run but loaded with the dataset's inputs through its
    service instead: :func:`pytest_hetero.serving.checks.execute` writes the same outputs file.
    """
    model, dataset = ctx.model, ctx.dataset
    if model.serving is not None:
        from pytest_hetero.serving.checks import execute

        execute(ctx)
        return
    ctx.record("model.identity", model=model.name, version=model.version, sha256=model.sha256,
               dataset=dataset.name, dataset_version=dataset.version, dataset_sha256=dataset.sha256)
    result = ctx.backend.execute(ctx)
    stdout_art = ctx.artifact("stdout.txt", result.stdout)
    stderr_art = ctx.artifact("stderr.txt", result.stderr)
    ctx.record("model.run", argv=result.argv, exit_code=result.exit_code,
               duration_s=round(result.duration_s, 4), timed_out=result.timed_out,
               timeout_s=ctx.timeout_s, peak_rss_mib=result.peak_rss_mib,
               stdout=bounded(result.stdout, ctx.output_limit),
               stderr=bounded(result.stderr, ctx.output_limit),
               stdout_artifact=stdout_art.path, stderr_artifact=stderr_art.path, **result.details)
    if result.timed_out:
        raise LayerFailed(f"model run exceeded the {ctx.timeout_s:g} s timeout", "timeout", "algorithm")
    if result.failure:
        raise LayerFailed(result.failure["message"], result.failure["category"], result.failure.get("owner"))
    if result.exit_code != 0:
        last = (result.stderr.strip().splitlines() or ["(no stderr)"])[-1][:300]
        raise LayerFailed(f"entrypoint exited with {result.exit_code}: {last}", "nonzero_exit", "algorithm")
    if result.outputs is None:
        raise LayerFailed("entrypoint wrote no outputs file", "no_outputs", "algorithm")
    raw = result.outputs
    try:
        json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LayerFailed(f"outputs file is not JSON: {exc}", "bad_outputs", "algorithm") from None
    art = ctx.artifact(OUTPUTS, raw, "application/json")
    ctx.record("model.outputs", artifact=art.path, sha256=art.sha256, bytes=art.size)
