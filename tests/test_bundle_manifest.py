"""manifest.json: every file with sha256 and size, deterministic order, and each kind of mismatch."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from pytest_hetero.bundle.manifest import (
    MANIFEST,
    Problem,
    build_manifest,
    check_manifest,
    manifest_bytes,
    write_manifest,
)
from pytest_hetero.errors import BundleError


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    root = tmp_path / "b"
    (root / "artifacts" / "cpu-host").mkdir(parents=True)
    (root / "evidence.json").write_text('{"a": 1}\n')
    (root / "journal.jsonl").write_text('{"type": "run"}\n')
    (root / "artifacts" / "cpu-host" / "stdout.txt").write_bytes(b"hello\n")
    (root / "artifacts" / "Zeta.txt").write_bytes(b"")
    (root / "statement.intoto.json").write_text("{}")
    (root / "attestation.intoto.jsonl").write_text("{}")
    write_manifest(root)
    return root


def test_manifest_lists_every_file_but_signature_files_in_byte_order(bundle: Path) -> None:
    manifest = json.loads((bundle / MANIFEST).read_text())
    assert manifest["schema"] == "pytest-hetero/manifest/v1"
    assert manifest["algorithm"] == "sha256"
    assert manifest["files"] == [
        {"path": "artifacts/Zeta.txt", "sha256": hashlib.sha256(b"").hexdigest(), "size": 0},
        {"path": "artifacts/cpu-host/stdout.txt", "sha256": hashlib.sha256(b"hello\n").hexdigest(), "size": 6},
        {"path": "evidence.json", "sha256": hashlib.sha256(b'{"a": 1}\n').hexdigest(), "size": 9},
        {"path": "journal.jsonl", "sha256": hashlib.sha256(b'{"type": "run"}\n').hexdigest(), "size": 16},
    ]
    assert check_manifest(bundle) == []


def test_manifest_bytes_are_deterministic(bundle: Path) -> None:
    first = (bundle / MANIFEST).read_bytes()
    _, digest = write_manifest(bundle)
    assert (bundle / MANIFEST).read_bytes() == first
    assert digest == hashlib.sha256(first).hexdigest()
    assert manifest_bytes(build_manifest(bundle)) == first


def test_modified_file_is_named_with_both_digests(bundle: Path) -> None:
    (bundle / "evidence.json").write_text('{"a": 2}\n')
    [problem] = check_manifest(bundle)
    assert (problem.path, problem.kind) == ("evidence.json", "modified")
    new, old = hashlib.sha256(b'{"a": 2}\n').hexdigest(), hashlib.sha256(b'{"a": 1}\n').hexdigest()
    assert problem.detail == f"sha256 {new[:16]}… (9 bytes) but the manifest says {old[:16]}… (9 bytes)"


def test_missing_and_extra_files(bundle: Path) -> None:
    (bundle / "artifacts" / "cpu-host" / "stdout.txt").unlink()
    (bundle / "artifacts" / "cpu-host" / "injected.txt").write_text("x")
    assert check_manifest(bundle) == [
        Problem("artifacts/cpu-host/stdout.txt", "missing", "listed in the manifest but not in the bundle"),
        Problem("artifacts/cpu-host/injected.txt", "extra", "file in the bundle is not listed in the manifest"),
    ]


def test_reordered_manifest_is_an_order_problem(bundle: Path) -> None:
    manifest = json.loads((bundle / MANIFEST).read_text())
    manifest["files"].reverse()
    (bundle / MANIFEST).write_bytes(manifest_bytes(manifest))
    [problem] = check_manifest(bundle)
    assert problem.kind == "order"
    assert problem.detail == ("entries out of order: 'evidence.json' listed after 'journal.jsonl' (entry 1); "
                              "the manifest was re-ordered or edited")


def test_duplicate_entry_and_escaping_path(bundle: Path) -> None:
    manifest = json.loads((bundle / MANIFEST).read_text())
    manifest["files"].insert(1, dict(manifest["files"][0]))
    manifest["files"].append({"path": "../outside", "sha256": "0" * 64, "size": 0})
    (bundle / MANIFEST).write_bytes(manifest_bytes(manifest))
    problems = check_manifest(bundle)
    assert problems[0].kind == "order" and problems[0].detail.startswith("duplicate entry: 'artifacts/Zeta.txt'")
    assert Problem("../outside", "unsafe", "listed path escapes the bundle or names a signature file") in problems


def test_malformed_and_missing_manifest(bundle: Path) -> None:
    (bundle / MANIFEST).write_text('{"files": [')
    assert check_manifest(bundle) == [Problem(MANIFEST, "malformed", "cannot read the manifest (JSONDecodeError)")]
    (bundle / MANIFEST).unlink()
    assert check_manifest(bundle) == [Problem(MANIFEST, "missing", "the bundle has no manifest")]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks on this platform")
def test_symlinks_are_refused_when_building_and_flagged_when_checking(bundle: Path, tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("outside")
    os.symlink(tmp_path / "secret", bundle / "artifacts" / "link.txt")
    with pytest.raises(BundleError, match="1 symlink"):
        build_manifest(bundle)
    assert Problem("artifacts/link.txt", "unsafe", "symlink or special file in the bundle") in check_manifest(bundle)
