"""``hetero report --from-journal DIR``: rebuild a complete bundle from a run's journal alone.

For a run that crashed or was killed (even with SIGKILL): every item that finished is in the
journal; everything planned but unfinished becomes ``not_run (interrupted …)`` in untested
scope; the bundle is then finished as a run finishes its own
(:func:`pytest_hetero.bundle.finish.publish`: evidence.json, renderings, manifest and statement,
signed with ``--sign-key``), so the recovered bundle verifies like any other. Writers of plugins
(``-p MODULE``, the ``pytest_hetero`` entry points) run too.
"""

from __future__ import annotations

import argparse
import sys

from pytest_hetero.bundle.finish import publish
from pytest_hetero.errors import HeteroError
from pytest_hetero.evidence.inputs import RunInputs
from pytest_hetero.evidence.recorder import assemble
from pytest_hetero.hooks.registry import plugin_manager
from pytest_hetero.reporting.terminal import summary_lines
from pytest_hetero.settings import bundle_settings


def run(args: argparse.Namespace) -> int:
    """Assemble, finish and sign; print the summary. Exit 0 ok, 2 unreadable journal/key."""
    bundle = args.from_journal.resolve()
    try:
        inputs = RunInputs()
        evidence = assemble(bundle, inputs)
        failed = publish(plugin_manager(args.plugins).hook, evidence, bundle_settings(bundle, args.sign_key), inputs)
        for _, exc in failed:
            raise exc
    except HeteroError as exc:
        print(f"hetero report: {exc.render()}", file=sys.stderr)
        return 2
    for line in summary_lines(evidence, bundle):
        print(line)
    return 0
