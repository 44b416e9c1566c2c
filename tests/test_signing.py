"""Keys, DSSE PAE, the in-toto statement and team sign-off signatures (real Ed25519 keys on disk)."""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

sys.path.insert(0, str(Path(__file__).parent))
from bundle_samples import make_bundle, sample_evidence

from pytest_hetero.bundle.signing import (
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    SigningKeyError,
    add_role_signature,
    check_signature,
    generate_keypair,
    keyid,
    load_private_key,
    load_public_key,
    pae,
    read_envelope,
)
from pytest_hetero.errors import BundleError
from pytest_hetero.evidence.model import STATUSES


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
    assert keyid(public) == hashlib.sha256(der).hexdigest()
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
    with pytest.raises(SigningKeyError, match="cannot read private key"):
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


def test_role_signature_records_role_key_time_and_owned_layers(tmp_path: Path, keys: dict[str, Path]) -> None:
    bundle = make_bundle(tmp_path / "b", sample_evidence(), keys["run"])
    entry = add_role_signature(bundle, load_private_key(keys["platform"]), "platform")
    claim = entry["signoff"]
    assert claim["role"] == "platform"
    assert claim["layers"] == ["scheduling", "startup"]
    assert claim["keyid"] == keyid(load_public_key(keys["platform.pub"]))
    assert claim["signed_at"].endswith("Z")
    envelope, payload, _ = read_envelope(bundle)
    import hashlib
    assert claim["statement_sha256"] == hashlib.sha256(payload).hexdigest()
    assert len(envelope["signatures"]) == 2 and envelope["signatures"][1] == entry
    partial = add_role_signature(bundle, load_private_key(keys["business"]), "platform", ["startup"])
    assert partial["signoff"]["layers"] == ["startup"]


def test_role_cannot_vouch_for_layers_it_does_not_own(tmp_path: Path, keys: dict[str, Path]) -> None:
    bundle = make_bundle(tmp_path / "b", sample_evidence(), keys["run"])
    key = load_private_key(keys["business"])
    with pytest.raises(BundleError, match=r"role 'business' cannot vouch for model: it owns only business"):
        add_role_signature(bundle, key, "business", ["business", "model"])
    with pytest.raises(BundleError) as info:
        add_role_signature(bundle, key, "marketing")
    assert info.value.message == "role 'marketing' owns no layer in this bundle's matrices"
    assert info.value.hint == "owner roles here: algorithm, business, infrastructure, platform"
    add_role_signature(bundle, key, "business")
    with pytest.raises(BundleError, match="already signed for role 'business'"):
        add_role_signature(bundle, key, "business")


def test_private_key_never_appears_in_the_bundle(tmp_path: Path, keys: dict[str, Path]) -> None:
    bundle = make_bundle(tmp_path / "b", sample_evidence(), keys["run"])
    add_role_signature(bundle, load_private_key(keys["business"]), "business")
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
    assert json.loads((bundle / "attestation.intoto.jsonl").read_text())["signatures"][0]["keyid"]
