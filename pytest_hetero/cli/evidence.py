"""``hetero report --from-journal DIR``: rebuild a complete bundle from a run's journal alone.

For a run that crashed or was killed (even with SIGKILL): every item that finished is in the
journal; everything planned but unfinished becomes ``not_run (interrupted …)`` in untested
scope; the bundle is then finished as a run finishes its own
(:func:`pytest_hetero.bundle.finish.publish`: evidence.json, renderings, manifest and statement,
signed with ``--sign-key``, or by the run's external signer with ``--sign-command CMD --sign-public PEM``), so
the recovered bundle verifies like any other. Writers of plugins
(``-p MODULE``, the ``pytest_hetero`` entry points) run too.

What recovery can prove about the journal: with the run's own key (``--sign-key``, the key the run
was signed with) every line is authenticated as the gate's, exactly as the live run would have;
lines that are torn or not UTF-8 are set aside and named (their items are ``not_run``), lines that
do not authenticate are rejected and named. For an unsigned run the journal key died with the
process, so recovery cannot tell the gate's lines from lines another process appended: it says so
(``journal.authenticated`` false, in evidence.json and the statement), still refusing two lines
that disagree about one item. The journal is locked while it is rebuilt; a run still writing it is
refused, and so is a finished bundle (one with ``attestation.intoto.jsonl``): a rebuild would discard its
signature and team sign-offs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pytest_hetero.bundle.finish import TamperDetected, publish
from pytest_hetero.bundle.manifest import ATTESTATION
from pytest_hetero.errors import HeteroError
from pytest_hetero.evidence.inputs import RunInputs
from pytest_hetero.evidence.journal import JournalKey, KeyOrigin, Recover, no_recovery
from pytest_hetero.evidence.recorder import assemble, lock_journal
from pytest_hetero.hooks.registry import plugin_manager
from pytest_hetero.reporting.terminal import summary_lines
from pytest_hetero.settings import SignCommand, bundle_settings, signer_spec


def key_recovery(sign_key: Path | SignCommand | None) -> Recover:
    """A function deriving a run's journal key from its run line with ``sign_key``, the run's private key or
    its external signer (``--sign-command``: it is asked to sign the derivation message, as the run asked it)
    (None when the line names another key or no key is given). Raises SigningKeyError for a bad key or a
    signer that cannot be started."""
    if sign_key is None:
        return no_recovery
    from pytest_hetero.bundle.signing import load_signer

    signer = load_signer(sign_key)
    kid = signer.keyid

    def recover(origin: KeyOrigin) -> JournalKey | None:
        if origin.key != "derived" or origin.keyid != kid or origin.nonce is None:
            return None
        return JournalKey.derived(signer.sign, kid, origin.run_id, origin.nonce)

    return recover


def finished(bundle: Path) -> str | None:
    """Why ``bundle`` must not be rebuilt, or None: a finished bundle (its ``attestation.intoto.jsonl``,
    written last, exists) holds the run's signature and any team sign-offs, which a rebuild would replace."""
    from pytest_hetero.bundle.attestation import MAX_ATTESTATION_BYTES
    from pytest_hetero.safeio import Unreadable, read_regular

    try:
        lines = sum(1 for line in read_regular(bundle, ATTESTATION, MAX_ATTESTATION_BYTES).splitlines()
                    if line.strip())
    except Unreadable as exc:
        if exc.kind == "missing":
            return None
        why = f"{exc.kind}: {exc.detail}"
    else:
        why = f"{lines} line(s): the run's signature and {max(lines - 1, 0)} team sign-off(s)"
    return (f"{bundle} is a finished bundle ({ATTESTATION} exists, {why}); rebuilding it from its journal would "
            "replace the run's signature and discard every sign-off")


def run(args: argparse.Namespace) -> int:
    """Assemble, finish and sign; print the summary and what the journal lost. Exit 0 ok, 1 evidence
    tampering was found and kept out, 2 unreadable or refused journal, a finished bundle (refused: see
    :func:`finished`), bad key; 130 interrupted."""
    bundle = args.from_journal.resolve()
    refused = finished(bundle)
    if refused is not None:
        print(f"hetero report: {refused}\n  hint: nothing to recover; check it with: hetero verify {bundle} --key "
              "GATE.pub (to rebuild it anyway, copy the folder and remove the copy's "
              f"{ATTESTATION}: the copy starts unsigned, with no sign-offs)", file=sys.stderr)
        return 2
    try:
        lock = lock_journal(bundle)
    except HeteroError as exc:
        print(f"hetero report: {exc.render()}", file=sys.stderr)
        return 2
    code = 0
    try:
        signer = signer_spec(args.sign_key, args.sign_command, args.sign_public)
        inputs = RunInputs()
        evidence = assemble(bundle, inputs, recover=key_recovery(signer))
        failed = publish(plugin_manager(args.plugins).hook, evidence, bundle_settings(bundle, signer), inputs)
        for _, problem in failed:
            if not isinstance(problem, TamperDetected):
                raise problem
            print(f"hetero report: {problem.render()}", file=sys.stderr)
            code = 1
    except HeteroError as exc:
        print(f"hetero report: {exc.render()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"hetero report: interrupted; {bundle} is unfinished (no attestation.intoto.jsonl): run the same "
              "command again", file=sys.stderr)
        return 130
    finally:
        os.close(lock)
    for line in summary_lines(evidence, bundle):
        print(line)
    for warning in evidence["warnings"]:
        if warning.startswith("journal"):
            print(f"warning: {warning}", file=sys.stderr)
    return code
