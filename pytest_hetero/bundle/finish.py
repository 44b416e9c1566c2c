"""Finishing a run's bundle, in one direction: amend the evidence → write evidence.json once → copy
the matrices → writers → manifest, statement and signature last.

:func:`publish` is that sequence for the pytest controller, ``hetero report --from-journal`` and
``hetero merge`` alike; it calls the ``pytest_hetero_*`` hooks through the relay it is given
(pytest's ``config.hook``, or the ``hetero`` command's registry), so this package imports neither
pytest nor the renderers. :func:`finish_bundle` is the built-in last step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_hetero.bundle.manifest import ATTESTATION, write_manifest
from pytest_hetero.errors import BundleError
from pytest_hetero.evidence.inputs import INPUTS
from pytest_hetero.evidence.model import gc_paused
from pytest_hetero.evidence.recorder import write_evidence

if TYPE_CHECKING:
    from pytest_hetero.evidence.inputs import RunInputs
    from pytest_hetero.settings import Settings


def publish(hook: Any, evidence: dict[str, Any], settings: Settings, inputs: RunInputs) -> list[tuple[str, Exception]]:
    """Finish the bundle ``settings.bundle_dir`` for the assembled ``evidence``:

    1. ``pytest_hetero_amend_evidence`` adds its sections to ``evidence`` (selection, baseline diff…);
    2. evidence.json is written, its only write (OSError propagates: the folder is unwritable);
    3. each matrix is copied, secrets redacted, into ``inputs/`` (``inputs.kept``);
    4. ``pytest_hetero_write_reports``: every writer renders the document;
    5. ``pytest_hetero_bundle_finished``: the built-in one, last, writes the manifest, statement
       and signature.

    ``hook`` is a pluggy hook relay with the ``pytest_hetero_*`` specs. A failing hook does not
    stop the later steps; returns ``[(hook name, exception)]`` for the caller to report.
    """
    failed: list[tuple[str, Exception]] = []
    _call(hook.pytest_hetero_amend_evidence, failed, evidence=evidence, settings=settings, inputs=inputs)
    write_evidence(settings.bundle_dir, evidence)
    inputs.keep(evidence, settings.bundle_dir)
    for step in (hook.pytest_hetero_write_reports, hook.pytest_hetero_bundle_finished):
        _call(step, failed, evidence=evidence, bundle_dir=settings.bundle_dir, settings=settings, inputs=inputs)
    return failed


def _call(step: Any, failed: list[tuple[str, Exception]], **kwargs: Any) -> None:
    try:
        step(**kwargs)
    except Exception as exc:  # noqa: BLE001 - the bundle must still be finished; the caller reports it
        failed.append((str(step.name), exc))


def finish_bundle(evidence: dict[str, Any], bundle_dir: Path, key_path: Path | None,
                  owners: dict[str, dict[str, str]], kept: list[tuple[str, str]]) -> str | None:
    """Write manifest.json, the statement and its envelope; sign with ``key_path`` when given.

    ``owners`` ({matrix name: {layer: team}}) goes into the predicate; ``kept`` ([(bundle path,
    statement digest)], see :meth:`RunInputs.keep`) are the matrix copies, statement subjects
    after manifest.json (a copy under ``inputs/`` that this run could not refresh is a subject
    with the sha256 recorded at run time). Returns the run signer's keyid (None when unsigned).
    Raises SigningKeyError after writing an unsigned envelope when the key is refused, so the
    bundle is still complete and visibly unsigned.
    """
    from pytest_hetero.bundle.signing import (
        build_predicate,
        build_statement,
        keyid,
        load_private_key,
        write_statement,
    )

    key, refused = None, None
    if key_path is not None:
        try:
            key = load_private_key(key_path)
        except BundleError as exc:
            refused = exc
    _, manifest_digest = write_manifest(bundle_dir)
    digests = dict(kept)
    subjects = [("manifest.json", manifest_digest)]
    for m in evidence["matrices"]:
        rel = f"{INPUTS}/{m['name']}.matrix.yaml"
        if (bundle_dir / rel).is_file():
            subjects.append((rel, digests.get(rel, m["sha256"])))
    run_keyid = keyid(key.public_key()) if key else None
    with gc_paused():
        write_statement(bundle_dir, build_statement(subjects, build_predicate(evidence, owners, run_keyid)), key)
    if refused is not None:
        raise refused
    return run_keyid


def signature_line(bundle_dir: Path) -> str:
    """``bundle signed by <keyid>`` or ``bundle UNSIGNED`` for the terminal summary."""
    try:
        envelope = json.loads((bundle_dir / ATTESTATION).read_text(encoding="utf-8"))
        signer = next((s["keyid"] for s in envelope["signatures"] if "signoff" not in s), None)
    except (OSError, ValueError, KeyError, TypeError):
        signer = None
    return f"bundle signed by {signer}" if signer else "bundle UNSIGNED (sign runs with --hetero-sign-key KEY)"
