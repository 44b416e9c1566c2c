"""Where the bundle finish spends its CPU: each step of ``assemble`` + ``publish`` timed (process CPU
time, median and min–max over the rounds) on bench_bundle's realistic run of 5,007 items per resource
(``--resources``, default 1; bench_bundle's default size is 4), with ``json.dump`` of the same document for
scale. Steps are timed by wrapping the module functions in place: a diagnostic, not a benchmark with a target
(bench_bundle.py prints the ratio).

Usage: ``PYTHONPATH=CHECKOUT python bench/bundle_steps.py [--rounds 3] [--resources 1]``; to compare two
checkouts run it once per checkout, alternating.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

if TYPE_CHECKING:  # run as a script, bench/ is on sys.path; mypy knows it as the package `bench`
    from bench import bench_bundle as bb
else:
    import bench_bundle as bb

import pytest_hetero.bundle.finish as finish  # noqa: E402
import pytest_hetero.bundle.manifest as manifest  # noqa: E402
import pytest_hetero.hooks.builtin as builtin  # noqa: E402
from pytest_hetero.bundle.signing import generate_keypair, keyid, load_private_key  # noqa: E402
from pytest_hetero.evidence.inputs import RunInputs  # noqa: E402
from pytest_hetero.evidence.journal import JournalKey  # noqa: E402
from pytest_hetero.evidence.recorder import assemble  # noqa: E402
from pytest_hetero.hooks.registry import plugin_manager  # noqa: E402
from pytest_hetero.matrix.expand import expand  # noqa: E402
from pytest_hetero.matrix.load import load_matrix  # noqa: E402
from pytest_hetero.reporting import writers  # noqa: E402
from pytest_hetero.reporting.itemtexts import ItemTexts  # noqa: E402
from pytest_hetero.settings import bundle_settings  # noqa: E402

TIMES: dict[str, list[float]] = {}
STEPS: tuple[tuple[Any, tuple[str, ...]], ...] = (
    (finish, ("_start_finish", "write_evidence", "finish_bundle", "_record_written", "recorded")),
    (manifest, ("recorded_manifest",)),
    (builtin, ("_validation",)),
)
"""(module, names) of the steps wrapped; finish_bundle calls recorded_manifest through its own import."""


def timed(name: str, call: Callable[[], Any]) -> Any:
    """Run ``call``; add its CPU seconds to TIMES[name]; return its result."""
    start = time.process_time()
    result = call()
    TIMES.setdefault(name, []).append(time.process_time() - start)
    return result


def wrap(module: Any, name: str, label: str) -> None:
    """Replace ``module.name`` by a version that times itself as ``label``."""
    inner = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return timed(label, lambda: inner(*args, **kwargs))

    setattr(module, name, wrapper)


def main(argv: list[str] | None = None) -> int:
    """Build the run once, finish it ``--rounds`` times, print each step's median and spread."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--resources", type=int, default=1, help="resources in the matrix (5,007 items each; "
                        "bench_bundle's default 20,028 items is 4)")
    args = parser.parse_args(argv)
    for module, names in STEPS:
        for name in names:
            wrap(module, name, name)
    finish.recorded_manifest = manifest.recorded_manifest  # type: ignore[attr-defined]  # the name finish_bundle calls
    pieces = writers.pieces  # what write_renderings writes from; timed whole, each format's pieces in turn
    writers.pieces = lambda fmt, *a, **k: iter(timed(f"render.{fmt}", lambda: list(pieces(fmt, *a, **k))))
    work = Path(tempfile.mkdtemp(prefix="hetero-steps-"))
    try:
        matrix = bb.write_inputs(work, args.resources)
        generate_keypair(work / "run.key", work / "run.pub")
        private = load_private_key(work / "run.key")
        bundle = work / "reports" / "bench-run"
        key = JournalKey.derived(private.sign, keyid(private.public_key()), bundle.name)
        texts = ItemTexts()  # rendered as items are journaled, as the controller's recorder does
        items = bb.write_run(bundle, matrix, args.resources, key, texts=texts)
        hook = plugin_manager([]).hook
        settings = bundle_settings(bundle, work / "run.key")
        loaded = load_matrix(matrix)
        held = {matrix.name: (loaded, expand(loaded, scheduling_per_image=False))}
        for _ in range(args.rounds):
            bb.clean(bundle)
            assembled = assemble(bundle, RunInputs(held), key=key)
            doc = {**assembled, "items": list(assembled["items"])}  # plain JSON data: assembly keeps items on disk
            with open(work / "plain.json", "w", encoding="utf-8") as fh:
                timed("json.dump (scale)", lambda: json.dump(doc, fh))  # noqa: B023 - called at once
            bb.clean(bundle)
            inputs = RunInputs(held, texts)
            built = timed("assemble", lambda: assemble(bundle, inputs, key=key))  # noqa: B023
            timed("publish", lambda: finish.publish(hook, built, settings, inputs))  # noqa: B023
        print(f"{items} items, {args.rounds} rounds, CPU seconds: median (min-max)")
        for name, values in TIMES.items():
            print(f"{name:24s} {statistics.median(values):6.3f} s ({min(values):.3f}-{max(values):.3f})")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
