"""Issue 15.4: ``hetero verify`` on a hostile bundle fails closed and fast. Each test performs the attack on a real
signed bundle and runs the real command in a subprocess with a deadline: a hang is a timeout, a traceback is
visible on stderr, and every attack must end in named ``FAIL`` lines and exit status 1."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import pytest
from bundle_samples import make_bundle, sample_evidence

from pytest_hetero.bundle.finish import finish_bundle
from pytest_hetero.bundle.intoto import Envelope
from pytest_hetero.bundle.manifest import Problem, manifest_bytes
from pytest_hetero.bundle.signing import (
    envelope_bytes,
    envelope_for,
    generate_keypair,
    keyid,
    load_private_key,
    load_public_key,
)
from pytest_hetero.bundle.verify import verify_bundle
from pytest_hetero.evidence.document import as_document

REPO = Path(__file__).resolve().parents[1]
DEADLINE_S = 60


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, Path]:
    generate_keypair(tmp_path / "gate.key", tmp_path / "gate.pub")
    return {"gate": tmp_path / "gate.key", "gate.pub": tmp_path / "gate.pub"}


@pytest.fixture
def bundle(tmp_path: Path, keys: dict[str, Path]) -> Path:
    return make_bundle(tmp_path / "b", sample_evidence(), keys["gate"])


def verify_cli(bundle: Path, pub: Path, *extra: str) -> tuple[int, list[str], float]:
    """``hetero verify`` in a subprocess: (exit status, stdout lines, seconds). Fails the test on a traceback."""
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest_hetero.cli", "verify", str(bundle), "--key", str(pub), *extra],
                          capture_output=True, text=True, timeout=DEADLINE_S, env=env, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout.splitlines(), time.monotonic() - start


def resign(bundle: Path, key: Path, statement_edit: object = None, manifest: bytes | None = None) -> None:
    """Rewrite the run's statement (``statement_edit(statement)``) and/or manifest bytes, then sign them again with
    ``key``: the attacker holds a trusted key (or a buggy writer), so only the verifier's parsing stands between."""
    statement = json.loads((bundle / "statement.intoto.json").read_text())
    if manifest is not None:
        (bundle / "manifest.json").write_bytes(manifest)
        statement["subject"][0]["digest"]["sha256"] = hashlib.sha256(manifest).hexdigest()
    if callable(statement_edit):
        statement_edit(statement)
    data = json.dumps(statement, sort_keys=True, indent=1).encode() + b"\n"
    (bundle / "statement.intoto.json").write_bytes(data)
    (bundle / "attestation.intoto.jsonl").write_bytes(envelope_bytes(envelope_for(data, load_private_key(key))))


def test_fifo_in_place_of_evidence_does_not_hang(bundle: Path, keys: dict[str, Path]) -> None:
    (bundle / "evidence.json").unlink()
    os.mkfifo(bundle / "evidence.json")
    status, out, _ = verify_cli(bundle, keys["gate.pub"])
    assert status == 1
    assert "FAIL evidence.json: unsafe: a FIFO in the bundle: only regular files are evidence" in out
    assert "FAIL evidence.json: missing: listed in the manifest but not in the bundle" not in out


def test_fifo_or_dev_zero_in_place_of_the_attestation_stops_before_anything_is_read(bundle: Path,
                                                                                     keys: dict[str, Path]) -> None:
    """Signature first: a hostile envelope stops verification; the FIFO artifact beside it is never opened."""
    os.mkfifo(bundle / "artifacts" / "pipe")
    (bundle / "attestation.intoto.jsonl").unlink()
    os.mkfifo(bundle / "attestation.intoto.jsonl")
    status, out, _ = verify_cli(bundle, keys["gate.pub"])
    assert (status, out[0]) == (1, "FAIL attestation.intoto.jsonl: unsafe: a FIFO, not a regular file")
    assert len(out) == 2  # nothing else was read after the envelope failed
    (bundle / "attestation.intoto.jsonl").unlink()
    (bundle / "attestation.intoto.jsonl").symlink_to("/dev/zero")
    status, out, _ = verify_cli(bundle, keys["gate.pub"])
    assert status == 1 and out[0].startswith("FAIL attestation.intoto.jsonl: unsafe: a symlink, not a regular file")
    (bundle / "attestation.intoto.jsonl").unlink()
    with open(bundle / "attestation.intoto.jsonl", "wb") as fh:
        fh.truncate(600 << 20)  # sparse: 600 MiB that would all be read
    status, out, seconds = verify_cli(bundle, keys["gate.pub"])
    assert (status, out[0]) == (1, "FAIL attestation.intoto.jsonl: oversize: larger than 536870912 bytes, the most "
                                   "this file may hold")
    assert seconds < DEADLINE_S


def test_statement_copy_as_fifo(bundle: Path, keys: dict[str, Path]) -> None:
    (bundle / "statement.intoto.json").unlink()
    os.mkfifo(bundle / "statement.intoto.json")
    assert [str(p) for p in verify_bundle(bundle, [load_public_key(keys["gate.pub"])]).problems] == [
        "statement.intoto.json: unsafe: the copy of the signed statement: a FIFO, not a regular file"]


def test_symlinks_and_symlinked_folders_are_named_not_followed(bundle: Path, keys: dict[str, Path],
                                                                tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "stdout.txt").write_text("stdout of the model run\n")  # identical bytes: following it would pass
    art = bundle / "artifacts" / "cpu-host" / "py-current"
    (art / "stdout.txt").unlink()
    (art / "stdout.txt").symlink_to(outside / "stdout.txt")
    assert [str(p) for p in verify_bundle(bundle, [load_public_key(keys["gate.pub"])]).problems] == [
        "artifacts/cpu-host/py-current/stdout.txt: unsafe: a symlink in the bundle: only regular files are evidence"]
    (art / "stdout.txt").unlink()
    art.rename(tmp_path / "moved")
    art.symlink_to(tmp_path / "moved")
    assert [str(p) for p in verify_bundle(bundle, [load_public_key(keys["gate.pub"])]).problems] == [
        "artifacts/cpu-host/py-current: unsafe: a symlink in the bundle: only regular files are evidence"]


def test_deeply_nested_json_is_a_named_failure(bundle: Path, keys: dict[str, Path]) -> None:
    resign(bundle, keys["gate"], manifest=b"[" * 100_000)
    status, out, _ = verify_cli(bundle, keys["gate.pub"])
    assert (status, out[0]) == (1, "FAIL manifest.json: malformed: manifest.json is nested too deeply to be evidence")
    line = b'{"payload":' + b"[" * 100_000
    (bundle / "attestation.intoto.jsonl").write_bytes(line + b"\n")
    status, out, _ = verify_cli(bundle, keys["gate.pub"])
    assert (status, out[0]) == (1, "FAIL attestation.intoto.jsonl: malformed: line 1 is nested too deeply to be "
                                   "evidence")


def test_subject_digest_that_is_a_string(bundle: Path, keys: dict[str, Path]) -> None:
    def edit(statement: dict) -> None:  # type: ignore[type-arg]
        statement["subject"][1]["digest"] = "sha256:abc"

    resign(bundle, keys["gate"], edit)
    status, out, _ = verify_cli(bundle, keys["gate.pub"])
    assert (status, out[0]) == (1, "FAIL inputs/example-cpu.matrix.yaml: subject: subject has an unsafe name or no "
                                   "sha256 hex digest")

    def no_manifest(statement: dict) -> None:  # type: ignore[type-arg]
        statement["subject"] = [{"name": "../../etc/passwd", "digest": {"sha256": "0" * 64}}]

    resign(bundle, keys["gate"], no_manifest)
    assert [str(p) for p in verify_bundle(bundle, [load_public_key(keys["gate.pub"])]).problems] == [
        "../../etc/passwd: subject: subject has an unsafe name or no sha256 hex digest",
        "manifest.json: subject: the signed statement does not cover manifest.json"]


def test_unsigned_fields_beside_the_dsse_envelope_are_refused(bundle: Path, keys: dict[str, Path]) -> None:
    path = bundle / "attestation.intoto.jsonl"
    envelope = json.loads(path.read_bytes())
    for edited, expected in (
            ({**envelope, "verdict": "pass"}, "line 1: unsigned field(s) 'verdict' beside the DSSE fields"),
            ({**envelope, "signatures": [{**envelope["signatures"][0], "role": "business"}]},
             "line 1: signature 1 has unsigned field(s) 'role'"),
            ({**envelope, "payload": "not base64!"}, "line 1: payload is not base64")):
        path.write_bytes(envelope_bytes(cast("Envelope", edited)))  # deliberately not a DSSE envelope
        status, out, _ = verify_cli(bundle, keys["gate.pub"])
        assert (status, out[0]) == (1, f"FAIL attestation.intoto.jsonl: malformed: {expected}")


def test_a_signed_bundle_without_evidence_is_incomplete(tmp_path: Path, keys: dict[str, Path]) -> None:
    """Even signed by the gate key (a writer that lost evidence.json), the bundle lacks a documented file."""
    evidence = sample_evidence()
    bundle = make_bundle(tmp_path / "b", evidence, keys["gate"])
    (bundle / "evidence.json").unlink()
    finish_bundle(as_document(evidence), bundle, keys["gate"], {"example-cpu": {}}, [])
    status, out, _ = verify_cli(bundle, keys["gate.pub"])
    assert status == 1 and out == [
        "FAIL evidence.json: incomplete: a documented file of every bundle is not in the signed manifest: the bundle "
        "is incomplete", f"verification FAILED: 1 problem(s) in {bundle}"]


def test_file_names_are_printed_escaped(bundle: Path, keys: dict[str, Path]) -> None:
    name = "x\x1b[2K\rOK b: 8 files match\x1b[0m\u202e\n"
    (bundle / "artifacts" / name).write_text("forged")
    status, out, _ = verify_cli(bundle, keys["gate.pub"])
    assert status == 1
    assert out[0] == ("FAIL artifacts/x\\x1b[2K\\x0dOK b: 8 files match\\x1b[0m\\u202e\\x0a: extra: file in the bundle is "
                      "not listed in the manifest")
    assert not any("\x1b" in line or "\r" in line or "\u202e" in line for line in out)


def test_ok_reports_what_it_verified_and_max_age(bundle: Path, keys: dict[str, Path]) -> None:
    status, out, _ = verify_cli(bundle, keys["gate.pub"], "--max-age", "36500d")
    assert status == 0
    listed = len(json.loads((bundle / "manifest.json").read_text())["files"])  # evidence, renderings, inputs/ copies
    assert listed == 15
    assert out[0] == (f"OK {bundle}: run run-1, verdict FAIL, finished 2026-11-29T10:05:00.000000Z; {listed} files match the "
                      f"manifest; run signed by {keyid(load_public_key(keys['gate.pub']))[:16]}…")
    status, out, _ = verify_cli(bundle, keys["gate.pub"], "--max-age", "1h")
    assert status == 1 and out[0].startswith("FAIL run: stale: finished at 2026-11-29T10:05:00.000000Z, ")
    assert out[0].endswith("h ago: older than --max-age (1.0 h)")
    finished = datetime(2026, 11, 29, 10, 5, tzinfo=UTC)
    pub = [load_public_key(keys["gate.pub"])]
    assert verify_bundle(bundle, pub, max_age_s=86400, now=finished + timedelta(hours=23)).ok
    assert [str(p) for p in verify_bundle(bundle, pub, max_age_s=86400, now=finished + timedelta(hours=25)).problems] \
        == ["run: stale: finished at 2026-11-29T10:05:00.000000Z, 25.0 h ago: older than --max-age (24.0 h)"]
    assert [str(p) for p in verify_bundle(bundle, pub, max_age_s=86400, now=finished - timedelta(hours=1)).problems] \
        == ["run: stale: finished at 2026-11-29T10:05:00.000000Z, in the future by 3600 s"]
    status, _, _ = verify_cli(bundle, keys["gate.pub"], "--max-age", "soon")
    assert status == 2


def test_manifest_entries_of_another_shape_and_listed_escapes(bundle: Path, keys: dict[str, Path]) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"][0]["size"] = "12"
    resign(bundle, keys["gate"], manifest=manifest_bytes(manifest))
    assert verify_bundle(bundle, [load_public_key(keys["gate.pub"])]).problems == [
        Problem("manifest.json", "malformed", "entry 0 is not {path, sha256 hex, size}")]
    manifest["files"][0]["size"] = 1
    manifest["files"].insert(0, {"path": "../outside", "sha256": "0" * 64, "size": 1})
    resign(bundle, keys["gate"], manifest=manifest_bytes(manifest))
    found = [str(p) for p in verify_bundle(bundle, [load_public_key(keys["gate.pub"])]).problems]
    assert "../outside: unsafe: listed path escapes the bundle or names a signature file" in found


def test_a_payload_that_is_not_an_object(bundle: Path, keys: dict[str, Path]) -> None:
    line: Envelope = {"payload": base64.b64encode(b"[1]").decode(), "payloadType": "application/vnd.in-toto+json",
                      "signatures": []}
    (bundle / "attestation.intoto.jsonl").write_bytes(envelope_bytes(line))
    assert [str(p) for p in verify_bundle(bundle, [load_public_key(keys["gate.pub"])]).problems] == [
        "attestation.intoto.jsonl: malformed: line 1: the payload is not a JSON object"]


def test_a_signed_evidence_document_its_readers_refuse_is_a_named_failure(bundle: Path, keys: dict[str, Path]) -> None:
    """A bundle whose evidence.json is signed and listed, but holds a record its own kind's shape refuses (only a
    gate writer's bug, or a holder of the gate key, can make one): ``render``/``diff``/``catalog`` refuse it, so
    ``verify`` must not say OK — it names the file and the field (attack12's finding, session of 12-04)."""
    doc = json.loads((bundle / "evidence.json").read_text())
    doc["items"][0]["records"].append({"kind": "scheduling.placed", "at": "2026-11-29T10:00:01Z",
                                       "data": {"pod": "p", "node": "n", "waited_s": "soon", "decided_at": None,
                                                "observed_epoch_s": None}})
    data = json.dumps(doc, indent=1, sort_keys=True).encode()
    (bundle / "evidence.json").write_bytes(data)
    manifest = json.loads((bundle / "manifest.json").read_text())
    [entry] = [e for e in manifest["files"] if e["path"] == "evidence.json"]
    entry.update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    resign(bundle, keys["gate"], manifest=manifest_bytes(manifest))
    status, out, _ = verify_cli(bundle, keys["gate.pub"])
    assert status == 1
    assert out[0] == ("FAIL evidence.json: content: signed, but not an evidence document the readers accept at "
                      "items[0].records[1].data.waited_s: is a string, not a number (record kind scheduling.placed) "
                      "(a gate defect, or a newer format than this verifier knows)"), out
    assert out[-1] == f"verification FAILED: 1 problem(s) in {bundle}"
