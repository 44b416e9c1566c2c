"""Issue 14.11 with the ecosystem's own verifier: ``cosign verify-blob-attestation`` (built from the Go module proxy
by tests/infra/gotools.sh) sees what each signature covers. The run's line verifies only with the gate key, only as
the run's predicate type and only over manifest.json; a sign-off line only with its team's key, only as a sign-off
and only over the run's statement.intoto.json. Before, an envelope holding only the business team's signature
verified as the run's attestation."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from bundle_samples import make_bundle, sample_evidence

from pytest_hetero.bundle.attestation import SIGNOFF_PREDICATE_TYPE, add_signoff
from pytest_hetero.bundle.signing import PREDICATE_TYPE, generate_keypair, load_private_key

REPO = Path(__file__).resolve().parents[1]


def gotool(name: str) -> str:
    """Path of a Go tool built by tests/infra/gotools.sh ($HETERO_<NAME> or its cache); a missing one fails the test
    under CI=true (tests/run.sh builds it) and skips it elsewhere."""
    path = os.environ.get(f"HETERO_{name.upper()}")
    if not path:
        done = subprocess.run(["bash", str(REPO / "tests/infra/gotools.sh"), "path", name], capture_output=True,
                              text=True, check=False)
        path = done.stdout.strip() if done.returncode == 0 else shutil.which(name) or ""
    if not path:
        message = f"{name} is not built: run bash tests/infra/gotools.sh build {name}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="module")
def cosign() -> str:
    return gotool("cosign")


@pytest.fixture
def signed(tmp_path: Path) -> Path:
    for name in ("gate", "business"):
        generate_keypair(tmp_path / f"{name}.key", tmp_path / f"{name}.pub")
    bundle = make_bundle(tmp_path / "b", sample_evidence(), tmp_path / "gate.key")
    add_signoff(bundle, load_private_key(tmp_path / "business.key"), "business", "reject", "GPU host down")
    lines = (bundle / "attestation.intoto.jsonl").read_bytes().splitlines(keepends=True)
    for n, line in enumerate(lines, 1):  # cosign reads one envelope per file: a line of the JSONL bundle
        (tmp_path / f"line{n}.json").write_bytes(line)
    return bundle


def verify_blob(cosign: str, key: Path, envelope: Path, ptype: str, blob: Path) -> tuple[int, str]:
    done = subprocess.run([cosign, "verify-blob-attestation", "--insecure-ignore-tlog", "--key", str(key),
                           "--signature", str(envelope), "--type", ptype, str(blob)],
                          capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, (done.stdout + done.stderr).strip().splitlines()[-1]


def test_cosign_verifies_the_run_attestation_with_the_gate_key_only(cosign: str, signed: Path) -> None:
    keys, line1 = signed.parent, signed.parent / "line1.json"
    assert verify_blob(cosign, keys / "gate.pub", line1, PREDICATE_TYPE, signed / "manifest.json") == (0, "Verified OK")
    assert verify_blob(cosign, keys / "business.pub", line1, PREDICATE_TYPE, signed / "manifest.json") == (
        1, "error during command execution: accepted signatures do not match threshold, Found: 0, Expected 1")
    assert verify_blob(cosign, keys / "gate.pub", line1, SIGNOFF_PREDICATE_TYPE, signed / "manifest.json") == (
        1, f"error during command execution: invalid predicate type, expected {SIGNOFF_PREDICATE_TYPE} got "
           f"{PREDICATE_TYPE}")


def test_cosign_tells_a_signoff_from_the_run_signature(cosign: str, signed: Path) -> None:
    keys, line2 = signed.parent, signed.parent / "line2.json"
    statement = signed / "statement.intoto.json"
    assert verify_blob(cosign, keys / "business.pub", line2, SIGNOFF_PREDICATE_TYPE, statement) == (0, "Verified OK")
    assert verify_blob(cosign, keys / "business.pub", line2, PREDICATE_TYPE, statement) == (
        1, f"error during command execution: invalid predicate type, expected {PREDICATE_TYPE} got "
           f"{SIGNOFF_PREDICATE_TYPE}")
    assert verify_blob(cosign, keys / "business.pub", line2, SIGNOFF_PREDICATE_TYPE, signed / "manifest.json") == (
        1, "error during command execution: no matching subject digest found")
    assert verify_blob(cosign, keys / "gate.pub", line2, SIGNOFF_PREDICATE_TYPE, statement) == (
        1, "error during command execution: accepted signatures do not match threshold, Found: 0, Expected 1")
    statement.write_bytes(statement.read_bytes() + b" ")  # a sign-off is bound to the statement's exact bytes
    assert verify_blob(cosign, keys / "business.pub", line2, SIGNOFF_PREDICATE_TYPE, statement) == (
        1, "error during command execution: no matching subject digest found")
