"""Built-in writers: every rendering at session end, then manifest, statement and signature last.

``pytest_hetero_write_reports`` copies each matrix file into ``inputs/`` and writes
report.html, summary.md, junit.xml and ctrf.json from the evidence document.
``pytest_hetero_bundle_finished`` (after every writer, including third-party ones) writes
manifest.json, statement.intoto.json and attestation.intoto.jsonl, signed with the run key
when one is configured, else with no signature (the bundle is marked UNSIGNED).
"""

from __future__ import annotations

import contextlib
import gc
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_hetero.bundle.manifest import ATTESTATION, write_manifest
from pytest_hetero.errors import BundleError, MatrixError
from pytest_hetero.evidence.model import sha256_text
from pytest_hetero.reporting.ctrf import render_ctrf
from pytest_hetero.reporting.html import render_html
from pytest_hetero.reporting.junit import render_junit
from pytest_hetero.reporting.markdown import render_markdown
from pytest_hetero.reporting.view import owners_from_items, signoff_context
from pytest_hetero.settings import Settings
from pytest_hetero.bundle.signing import (
    build_predicate,
    build_statement,
    keyid,
    load_private_key,
    read_envelope,
    write_statement,
)

FORMATS: dict[str, str] = {"html": "report.html", "md": "summary.md", "junit": "junit.xml", "ctrf": "ctrf.json"}
"""Rendering format → file name in the bundle."""
INPUTS = "inputs"


def matrix_owners(evidence: dict[str, Any]) -> dict[str, dict[str, str]]:
    """{matrix name: {layer: team}} from the matrix files (at run time), else from item owners."""
    from pytest_hetero.matrix.load import load_matrix

    owners: dict[str, dict[str, str]] = {}
    fallback = owners_from_items(evidence)
    for m in evidence["matrices"]:
        try:
            owners[m["name"]] = dict(load_matrix(m["path"]).owners)
        except MatrixError:
            owners[m["name"]] = fallback.get(m["prefix"], {})
    return owners


def render(fmt: str, evidence: dict[str, Any], signoff: dict[str, Any]) -> bytes:
    """Render ``evidence`` in ``fmt`` (a key of FORMATS) to bytes."""
    if fmt == "html":
        return render_html(evidence, signoff).encode("utf-8")
    if fmt == "md":
        return render_markdown(evidence, signoff).encode("utf-8")
    if fmt == "junit":
        return render_junit(evidence)
    if fmt == "ctrf":
        # compact, keys in the fixed order render_ctrf builds them: the C encoder's fastest path
        return (json.dumps(render_ctrf(evidence), ensure_ascii=False) + "\n").encode("utf-8")
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def bundle_signoff(bundle_dir: Path, evidence: dict[str, Any]) -> dict[str, Any]:
    """Sign-off context read back from a bundle's envelope (claims unverified: use hetero verify)."""
    try:
        _, _, statement = read_envelope(bundle_dir)
        envelope = json.loads((bundle_dir / ATTESTATION).read_text(encoding="utf-8"))
    except (BundleError, OSError, ValueError):
        return signoff_context(owners_from_items(evidence), None, "no readable attestation")
    sigs = envelope.get("signatures", [])
    run_signer = next((s["keyid"] for s in sigs if "signoff" not in s), None)
    return signoff_context(statement.get("predicate", {}).get("owners", {}), run_signer, None,
                           [s["signoff"] for s in sigs if isinstance(s.get("signoff"), dict)])


def _run_signer(key_path: Path | None) -> tuple[str | None, str | None]:
    if key_path is None:
        return None, "no --hetero-sign-key / HETERO_SIGN_KEY given"
    try:
        return keyid(load_private_key(key_path).public_key()), None
    except BundleError as exc:
        return None, f"signing key refused: {exc.message}"


def matrix_copy(m: dict[str, Any]) -> tuple[bytes, str]:
    """The bytes kept in ``inputs/`` for the evidence's matrix line ``m`` and the sha256 the signed
    statement records for them.

    Secrets in the file (URL credentials or a bearer token in a description, environment
    secrets, the matrix's own ``spec.redact`` patterns) are redacted. The digest is that of the
    kept bytes when the file is still the one that ran, else the sha256 recorded at run time (so
    verification shows a matrix edited after the run). Raises OSError when the file is unreadable.
    """
    from pytest_hetero.matrix.load import load_matrix
    from pytest_hetero.redact import Redactor

    raw = Path(m["path"]).read_bytes()
    try:
        extra: tuple[tuple[str, str], ...] = load_matrix(m["path"]).redact
    except MatrixError:
        extra = ()
    kept = Redactor(extra=extra).bytes(raw)
    return kept, sha256_text(kept) if sha256_text(raw) == m["sha256"] else m["sha256"]


def copy_inputs(evidence: dict[str, Any], bundle_dir: Path) -> list[tuple[str, str]]:
    """Copy each matrix file, secrets redacted, to ``inputs/<name>.matrix.yaml``; return
    [(bundle path, statement digest)] (see :func:`matrix_copy`)."""
    out = []
    for m in evidence["matrices"]:
        rel = f"{INPUTS}/{m['name']}.matrix.yaml"
        (bundle_dir / INPUTS).mkdir(exist_ok=True)
        try:
            kept, digest = matrix_copy(m)
            (bundle_dir / rel).write_bytes(kept)
        except OSError as exc:
            sys.stderr.write(f"pytest-hetero: cannot copy matrix {m['path']} into the bundle: {exc.strerror}\n")
            continue
        out.append((rel, digest))
    return out


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while rendering a large evidence document.

    Rendering allocates millions of short-lived objects next to a heap already holding the
    whole document; each full collection would walk that heap again (measured: over half
    the rendering time at 50,000 items). Rendering creates no reference cycles worth
    collecting; the collector is simply resumed at the end.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def write_renderings(evidence: dict[str, Any], bundle_dir: Path, key_path: Path | None) -> list[Path]:
    """Copy the matrix files into ``inputs/`` and write every rendering (FORMATS); return their paths.

    The sign-off section names ``key_path``'s keyid as run signer, or says UNSIGNED and why.
    """
    copy_inputs(evidence, bundle_dir)
    signer, why = _run_signer(key_path)
    signoff = signoff_context(matrix_owners(evidence), signer, why)
    written = []
    with gc_paused():
        for fmt, name in FORMATS.items():
            (bundle_dir / name).write_bytes(render(fmt, evidence, signoff))
            written.append(bundle_dir / name)
    return written


@pytest.hookimpl(trylast=True)
def pytest_hetero_write_reports(evidence: dict[str, Any], bundle_dir: Path, settings: Settings) -> list[Path]:
    """Write the matrix copies and every rendering (FORMATS) into ``bundle_dir``."""
    return write_renderings(evidence, bundle_dir, settings.sign_key)


def finish_bundle(evidence: dict[str, Any], bundle_dir: Path, key_path: Path | None) -> str | None:
    """Write manifest.json, the statement and its envelope; sign with ``key_path`` when given.

    Returns the run signer's keyid (None when unsigned). Raises SigningKeyError after writing an
    unsigned envelope when the key is refused, so the bundle is still complete and visibly unsigned.
    """
    key, refused = None, None
    if key_path is not None:
        try:
            key = load_private_key(key_path)
        except BundleError as exc:
            refused = exc
    _, manifest_digest = write_manifest(bundle_dir)
    owners = matrix_owners(evidence)
    subjects = [("manifest.json", manifest_digest)]
    for m in evidence["matrices"]:
        rel = f"{INPUTS}/{m['name']}.matrix.yaml"
        if (bundle_dir / rel).is_file():
            try:
                digest = matrix_copy(m)[1]
            except OSError:
                digest = m["sha256"]
            subjects.append((rel, digest))
    run_keyid = keyid(key.public_key()) if key else None
    with gc_paused():
        write_statement(bundle_dir, build_statement(subjects, build_predicate(evidence, owners, run_keyid)), key)
    if refused is not None:
        raise refused
    return run_keyid


@pytest.hookimpl(trylast=True)
def pytest_hetero_bundle_finished(evidence: dict[str, Any], bundle_dir: Path, settings: Settings) -> None:
    """Manifest, statement and DSSE envelope, signed with ``settings.sign_key`` when set."""
    finish_bundle(evidence, bundle_dir, settings.sign_key)


def signature_line(bundle_dir: Path) -> str:
    """``bundle signed by <keyid>`` or ``bundle UNSIGNED`` for the terminal summary."""
    try:
        envelope = json.loads((bundle_dir / ATTESTATION).read_text(encoding="utf-8"))
        signer = next((s["keyid"] for s in envelope["signatures"] if "signoff" not in s), None)
    except (OSError, ValueError, KeyError, TypeError):
        signer = None
    return f"bundle signed by {signer}" if signer else "bundle UNSIGNED (sign runs with --hetero-sign-key KEY)"
