"""Keys, DSSE PAE, the in-toto statement and team sign-off signatures (real Ed25519 keys on disk)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import sys
import tracemalloc
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest
from cryptography.hazmat.primitives import serialization

sys.path.insert(0, str(Path(__file__).parent))
from bundle_samples import make_bundle, sample_evidence

from pytest_hetero.bundle.attestation import (
    SIGNOFF_PREDICATE_TYPE,
    add_signoff,
    decision_problem,
    read_attestations,
    read_envelope,
)
from pytest_hetero.bundle.signing import (
    _B64_PIECE,
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    SigningKeyError,
    check_signature,
    envelope_bytes,
    envelope_for,
    generate_keypair,
    keyid,
    legacy_keyid,
    load_private_key,
    load_public_key,
    pae,
    write_statement,
)
from pytest_hetero.errors import BundleError
from pytest_hetero.evidence.model import STATUSES

if TYPE_CHECKING:
    from pytest_hetero.bundle.intoto import RunStatement


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name in ("run", "business", "platform"):
        generate_keypair(tmp_path / f"{name}.key", tmp_path / f"{name}.pub")
        out[name] = tmp_path / f"{name}.key"
        out[name + ".pub"] = tmp_path / f"{name}.pub"
    return out


def test_pae_matches_the_dsse_v1_definition() -> None:
    assert pae("http://example.com/HelloWorld", b"hello world") == \
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    assert pae("t", b"") == b"DSSEv1 1 t 0 "
    assert pae("\u00e9", b"\x00") == b"DSSEv1 2 \xc3\xa9 1 \x00"


def test_keygen_writes_private_key_0600_and_public_key(keys: dict[str, Path]) -> None:
    assert stat.S_IMODE(keys["run"].stat().st_mode) == 0o600
    assert keys["run"].read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----\n")
    assert keys["run.pub"].read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----\n")
    private, public = load_private_key(keys["run"]), load_public_key(keys["run.pub"])
    assert keyid(private.public_key()) == keyid(public)
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    import hashlib
    assert legacy_keyid(public) == hashlib.sha256(der).hexdigest() != keyid(public)
    with pytest.raises(SigningKeyError, match="refusing to overwrite"):
        generate_keypair(keys["run"], keys["run"].with_suffix(".other"))


def test_world_readable_private_key_is_refused_with_the_fix(keys: dict[str, Path]) -> None:
    os.chmod(keys["run"], 0o644)
    with pytest.raises(SigningKeyError) as info:
        load_private_key(keys["run"])
    assert info.value.render() == (f"{keys['run']}: private key file is accessible by group/others (mode 0644)\n"
                                   f"  hint: run: chmod 600 {keys['run']}")
    os.chmod(keys["run"], 0o640)
    with pytest.raises(SigningKeyError, match=r"mode 0640"):
        load_private_key(keys["run"])


def test_bad_key_files(tmp_path: Path, keys: dict[str, Path]) -> None:
    junk = tmp_path / "junk.key"
    junk.write_text("not a key")
    os.chmod(junk, 0o600)
    with pytest.raises(SigningKeyError, match="not an unencrypted Ed25519 private key"):
        load_private_key(junk)
    with pytest.raises(SigningKeyError, match="cannot read the private key: missing: no such file"):
        load_private_key(tmp_path / "absent.key")
    with pytest.raises(SigningKeyError, match="not an Ed25519 public key"):
        load_public_key(junk)
    assert keyid(load_public_key(keys["run"])) == keyid(load_public_key(keys["run.pub"]))


def test_signed_statement_carries_the_predicate(tmp_path: Path, keys: dict[str, Path]) -> None:
    bundle = make_bundle(tmp_path / "b", sample_evidence(), keys["run"])
    envelope, payload, statement = read_envelope(bundle)
    assert envelope["payloadType"] == PAYLOAD_TYPE == "application/vnd.in-toto+json"
    assert payload == (bundle / "statement.intoto.json").read_bytes()
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == PREDICATE_TYPE == "https://pytest-hetero.dev/attestation/evidence-bundle/v1"
    import hashlib
    assert statement["subject"] == [
        {"name": "manifest.json", "digest": {"sha256": hashlib.sha256((bundle / "manifest.json").read_bytes()).hexdigest()}},
        {"name": "inputs/example-cpu.matrix.yaml",
         "digest": {"sha256": hashlib.sha256((bundle / "inputs/example-cpu.matrix.yaml").read_bytes()).hexdigest()}},
    ]
    pred = statement["predicate"]
    run_kid = keyid(load_public_key(keys["run.pub"]))
    assert pred["run_signer"] == run_kid
    assert pred["tool"] == {"name": "pytest-hetero", "version": "0.1.0"}
    assert pred["verdict"] == "fail"
    assert pred["owners"] == {"example-cpu": {"discovery": "infrastructure", "scheduling": "platform",
                                              "startup": "platform", "model": "algorithm", "business": "business"}}
    assert pred["target"][0]["identity"] == "vm"
    assert set(pred["counts"]["model"]) == set(STATUSES)
    assert pred["counts"]["model"]["passed"] == 1 and pred["counts"]["model"]["blocked"] == 1
    assert pred["counts"]["discovery"]["failed"] == 1
    assert pred["untested"]["by_status"] == {"blocked": 4, "excluded": 1}
    blocked = next(e for e in pred["untested"]["items"] if e["status"] == "blocked")
    assert blocked["blocked_by"] == "matrices/example-cpu.matrix.yaml::gpu-nvidia::discovery"
    assert blocked["reason"].startswith("blocked by matrices/example-cpu.matrix.yaml::gpu-nvidia::discovery")
    excluded = next(e for e in pred["untested"]["items"] if e["status"] == "excluded")
    assert excluded["reason"] == "excluded by matrix rule (line 40): py-old is retired"
    assert pred["untested"]["never_covered"] == {"example-cpu": {"resource": ["gpu-nvidia"]}}
    assert set(pred["does_not_prove"]) == {"discovery", "scheduling", "startup", "model", "business"}
    [sig] = envelope["signatures"]
    assert sig["keyid"] == run_kid
    assert check_signature(load_public_key(keys["run.pub"]), sig["sig"], pae(PAYLOAD_TYPE, payload))
    assert not check_signature(load_public_key(keys["business.pub"]), sig["sig"], pae(PAYLOAD_TYPE, payload))


def test_unsigned_bundle_has_an_envelope_without_signatures(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b", sample_evidence(), None)
    envelope, _, statement = read_envelope(bundle)
    assert envelope["signatures"] == []
    assert statement["predicate"]["run_signer"] is None
    assert "Bundle <span class=\"unsigned\">UNSIGNED</span>" in (bundle / "report.html").read_text()
    assert "bundle **UNSIGNED**" in (bundle / "summary.md").read_text()


def test_signoff_is_its_own_attestation_over_the_run_statement(tmp_path: Path, keys: dict[str, Path]) -> None:
    """Each sign-off is a new line: an in-toto statement whose only subject is the run statement (by digest),
    with the sign-off predicate type, signed by the team's key alone; the run's line is left as it was."""
    import hashlib

    bundle = make_bundle(tmp_path / "b", sample_evidence(resources=("cpu-host",)), keys["run"])
    run_line = (bundle / "attestation.intoto.jsonl").read_bytes()
    statement = add_signoff(bundle, load_private_key(keys["platform"]), "platform", "accept")
    assert (bundle / "attestation.intoto.jsonl").read_bytes().startswith(run_line)
    run, signoff = read_attestations(bundle, PAYLOAD_TYPE)
    assert signoff.statement == statement
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == SIGNOFF_PREDICATE_TYPE == "https://pytest-hetero.dev/attestation/signoff/v1"
    assert statement["subject"] == [{"name": "statement.intoto.json",
                                     "digest": {"sha256": hashlib.sha256(run.payload).hexdigest()}}]
    claim = statement["predicate"]
    assert (claim["role"], claim["layers"], claim["decision"], claim["conditions"]) == (
        "platform", ["scheduling", "startup"], "accept", None)
    assert claim["run"] == {"id": "run-1", "verdict": "pass", "finished_at": "2026-11-29T10:05:00.000000Z"}
    assert claim["signed_at"].endswith("Z") and claim["failing"] == {}
    [sig] = signoff.envelope["signatures"]
    assert set(signoff.envelope) == {"payload", "payloadType", "signatures"} and set(sig) == {"keyid", "sig"}
    assert sig["keyid"] == keyid(load_public_key(keys["platform.pub"]))
    assert check_signature(load_public_key(keys["platform.pub"]), sig["sig"], pae(PAYLOAD_TYPE, signoff.payload))
    assert [s["keyid"] for s in run.envelope["signatures"]] == [keyid(load_public_key(keys["run.pub"]))]
    partial = add_signoff(bundle, load_private_key(keys["business"]), "platform", "accept", layers=["startup"])
    assert partial["predicate"]["layers"] == ["startup"]


def test_signoff_refusals(tmp_path: Path, keys: dict[str, Path]) -> None:
    bundle = make_bundle(tmp_path / "b", sample_evidence(), keys["run"])
    key = load_private_key(keys["business"])
    with pytest.raises(BundleError, match=r"role 'business' cannot vouch for model: it owns only business"):
        add_signoff(bundle, key, "business", "reject", "no", ["business", "model"])
    with pytest.raises(BundleError) as info:
        add_signoff(bundle, key, "marketing", "accept")
    assert info.value.message == "role 'marketing' owns no layer in this bundle's matrices"
    assert info.value.hint == "owner roles here: algorithm, business, infrastructure, platform"
    with pytest.raises(BundleError) as info:
        add_signoff(bundle, key, "business", "accept")  # gpu-nvidia's business item is blocked
    assert info.value.message == ("sign-off refused: 1 item(s) failed, errored or were blocked in the layers signed "
                                  "(business: 1): say accept-with-known-failures (naming them in --text) or reject")
    with pytest.raises(BundleError, match="decision accept-with-known-failures needs its text"):
        add_signoff(bundle, key, "business", "accept-with-known-failures", "  ")
    assert decision_problem("accept-with-known-failures", "none", {}) == (
        "no item failed in the layers signed: nothing to accept as a known failure (use accept)")
    assert decision_problem("accept", None, {}) is None
    assert decision_problem("approve", None, {}) == ("decision 'approve' is not one of accept, accept-with-conditions, "
                                                     "accept-with-known-failures, reject")
    add_signoff(bundle, key, "business", "accept-with-known-failures", "gpu-nvidia is out for repair (INC-42)")
    with pytest.raises(BundleError, match="already signed for role 'business'"):
        add_signoff(bundle, key, "business", "reject", "changed my mind")


def test_private_key_never_appears_in_the_bundle(tmp_path: Path, keys: dict[str, Path]) -> None:
    bundle = make_bundle(tmp_path / "b", sample_evidence(), keys["run"])
    add_signoff(bundle, load_private_key(keys["business"]), "business", "reject", "GPU host down")
    secrets = []
    for name in ("run", "business"):
        pem = keys[name].read_bytes()
        raw = load_private_key(keys[name]).private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                                         serialization.NoEncryption())
        body = b"".join(pem.splitlines()[1:-1])
        secrets += [body, raw, raw.hex().encode(), base64.b64encode(raw)]
    for path in bundle.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(s in data for s in secrets), path
    assert str(keys["run"]).encode() not in (bundle / "statement.intoto.json").read_bytes()
    lines = (bundle / "attestation.intoto.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["signatures"][0]["keyid"] for line in lines)


def _large_statement(entries: int) -> RunStatement:
    """A statement shaped like a run's whose untested scope lists ``entries`` items (a run whose business items were
    deselected), with characters JSON escapes or writes as they are (``ensure_ascii=False``)."""
    items = [{"blocked_by": None, "keys": {"dataset": "d", "image": "py", "model": f"m{n} é😀\u2028", "resource": "r"},
              "layer": "business", "nodeid": f"m.matrix.yaml::r::py::m{n}@d::business", "reason": 'deselected "-k"\n',
              "status": "deselected"} for n in range(entries)]
    return cast("RunStatement", {"_type": "https://in-toto.io/Statement/v1", "predicateType": PREDICATE_TYPE,
                                 "subject": [{"name": "manifest.json", "digest": {"sha256": "0" * 64}}],
                                 "predicate": {"untested": {"items": items}, "run_signer": None, "ratio": 0.1}})


def test_the_statement_and_its_envelope_are_json_dumps_and_envelope_for(tmp_path: Path,
                                                                         keys: dict[str, Path]) -> None:
    """write_statement encodes piece by piece into the PAE's buffer and writes the base64 payload in pieces: the
    bytes are still json.dumps(indent=1)'s and envelope_bytes(envelope_for(…))'s, signed and unsigned, for a
    statement of more than one base64 piece."""
    statement = _large_statement(3000)
    data = json.dumps(statement, sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False).encode() + b"\n"
    assert len(data) > 2 * _B64_PIECE
    for key in (load_private_key(keys["run"]), None):
        digest = write_statement(tmp_path, statement, key)
        assert (tmp_path / "statement.intoto.json").read_bytes() == data
        assert (tmp_path / "attestation.intoto.jsonl").read_bytes() == envelope_bytes(envelope_for(data, key))
        assert digest == hashlib.sha256(data).hexdigest()
        assert not (tmp_path / "attestation.intoto.jsonl.tmp").exists()


def test_the_statement_is_held_once_while_written_and_signed(tmp_path: Path, keys: dict[str, Path]) -> None:
    """Through json.dumps the statement was held about six times at once (the encoder's list of pieces, its text,
    its bytes, the PAE, the base64 and the envelope's text): 2.7 KB per deselected item at a run's finish."""
    statement = _large_statement(3000)
    key = load_private_key(keys["run"])
    size = len(json.dumps(statement, sort_keys=True, indent=1, ensure_ascii=False).encode())
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        write_statement(tmp_path, statement, key)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < 1.5 * size, f"peak {peak} bytes while writing a statement of {size}"
