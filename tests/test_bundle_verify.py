"""hetero verify: an intact signed bundle passes; each kind of tampering fails with a precise message."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from bundle_samples import make_bundle, sample_evidence
from support import matrix_text

from pytest_hetero.bundle.manifest import Problem, manifest_bytes
from pytest_hetero.bundle.signing import (
    PAYLOAD_TYPE,
    add_role_signature,
    envelope_bytes,
    envelope_for,
    generate_keypair,
    keyid,
    load_private_key,
    load_public_key,
    write_envelope,
)
from pytest_hetero.bundle.verify import verify_bundle
from pytest_hetero.cli import build_parser


def hetero(*argv: str) -> int:
    """Run a ``hetero`` subcommand (keygen, sign, verify, render); returns the exit code."""
    args = build_parser().parse_args(list(argv))
    return int(args.func(args))


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name in ("run", "business", "other"):
        assert hetero("keygen", str(tmp_path / f"{name}.key"), "--pub", str(tmp_path / f"{name}.pub")) == 0
        out[name], out[name + ".pub"] = tmp_path / f"{name}.key", tmp_path / f"{name}.pub"
    return out


@pytest.fixture
def bundle(tmp_path: Path, keys: dict[str, Path]) -> Path:
    return make_bundle(tmp_path / "bundle", sample_evidence(), keys["run"])


def problems(bundle: Path, *pubs: Path, roles: tuple[str, ...] = ()) -> list[Problem]:
    return verify_bundle(bundle, [load_public_key(p) for p in pubs], roles).problems


def kid(pub: Path) -> str:
    return keyid(load_public_key(pub))


def test_intact_bundle_verifies(bundle: Path, keys: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert hetero("verify", str(bundle), "--key", str(keys["run.pub"])) == 0
    out = capsys.readouterr().out
    # evidence, journal, 4 renderings, the artifact, the matrix copy and the inputs it names (acceptance
    # file, code listing, 5 code files)
    assert out == (f"OK {bundle}: 15 files match the manifest; statement signed by {kid(keys['run.pub'])[:16]}…; "
                   "role sign-offs: none\n")


def test_wrong_key(bundle: Path, keys: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert hetero("verify", str(bundle), "--key", str(keys["other.pub"])) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [(f"FAIL signature 1 (keyid {kid(keys['run.pub'])[:16]}…): unknown_key: signed by a key not passed "
                   "with --key"), f"verification FAILED: 1 problem(s) in {bundle}"]


def test_truncated_envelope(bundle: Path, keys: dict[str, Path]) -> None:
    path = bundle / "attestation.intoto.jsonl"
    path.write_bytes(path.read_bytes()[:200])
    [problem, *rest] = problems(bundle, keys["run.pub"])
    assert (problem.path, problem.kind) == ("attestation.intoto.jsonl", "malformed")
    assert problem.detail.startswith("envelope is truncated or malformed: ")
    assert rest == []


def test_edited_evidence(bundle: Path, keys: dict[str, Path]) -> None:
    path = bundle / "evidence.json"
    doc = json.loads(path.read_text())
    doc["summary"]["verdict"] = "pass"
    path.write_text(json.dumps(doc, indent=1, sort_keys=True))
    [problem] = problems(bundle, keys["run.pub"])
    assert (problem.path, problem.kind) == ("evidence.json", "modified")


def test_artifact_deleted(bundle: Path, keys: dict[str, Path]) -> None:
    (bundle / "artifacts/cpu-host/py-current/stdout.txt").unlink()
    assert problems(bundle, keys["run.pub"]) == [
        Problem("artifacts/cpu-host/py-current/stdout.txt", "missing", "listed in the manifest but not in the bundle")]


def test_artifact_added(bundle: Path, keys: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    (bundle / "artifacts/cpu-host/py-current/forged.txt").write_text("passed")
    assert hetero("verify", str(bundle), "--key", str(keys["run.pub"])) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        "FAIL artifacts/cpu-host/py-current/forged.txt: extra: file in the bundle is not listed in the manifest")


def test_manifest_reordered(bundle: Path, keys: dict[str, Path]) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"][0], manifest["files"][1] = manifest["files"][1], manifest["files"][0]
    (bundle / "manifest.json").write_bytes(manifest_bytes(manifest))
    found = problems(bundle, keys["run.pub"])
    assert [(p.path, p.kind) for p in found] == [("manifest.json", "modified"), ("manifest.json", "order")]
    assert found[0].detail.endswith("does not match the signed statement's subject digest "
                                    f"{json.loads((bundle / 'statement.intoto.json').read_text())['subject'][0]['digest']['sha256'][:16]}…")


def _resign(bundle: Path, key: Path, edit: dict[str, object]) -> None:
    statement = json.loads((bundle / "statement.intoto.json").read_text())
    statement.update(edit)
    data = json.dumps(statement, sort_keys=True, indent=1).encode() + b"\n"
    (bundle / "statement.intoto.json").write_bytes(data)
    write_envelope(bundle, envelope_for(data, load_private_key(key)))


def test_wrong_predicate_type(bundle: Path, keys: dict[str, Path]) -> None:
    _resign(bundle, keys["run"], {"predicateType": "https://slsa.dev/provenance/v1"})
    assert problems(bundle, keys["run.pub"]) == [Problem(
        "attestation.intoto.jsonl", "predicate", "wrong predicate type 'https://slsa.dev/provenance/v1': not a "
        "pytest-hetero evidence bundle (expected https://pytest-hetero.dev/attestation/evidence-bundle/v1)")]


def test_unknown_predicate_version(bundle: Path, keys: dict[str, Path]) -> None:
    _resign(bundle, keys["run"], {"predicateType": "https://pytest-hetero.dev/attestation/evidence-bundle/v9"})
    assert problems(bundle, keys["run.pub"]) == [Problem(
        "attestation.intoto.jsonl", "predicate", "unknown predicate version 'v9' (this verifier knows v1)")]


def test_payload_altered_breaks_the_signature(bundle: Path, keys: dict[str, Path]) -> None:
    path = bundle / "attestation.intoto.jsonl"
    envelope = json.loads(path.read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["verdict"] = "pass"
    data = json.dumps(statement, sort_keys=True, indent=1).encode() + b"\n"
    envelope["payload"] = base64.b64encode(data).decode()
    path.write_bytes(envelope_bytes(envelope))  # as the writer spells it: only the signature can tell
    (bundle / "statement.intoto.json").write_bytes(data)
    assert problems(bundle, keys["run.pub"]) == [Problem(
        f"signature 1 (keyid {kid(keys['run.pub'])[:16]}…)", "signature",
        "does not verify: the statement was altered or the signature is corrupt")]


def test_envelope_reformatted_is_named_though_its_signatures_hold(bundle: Path, keys: dict[str, Path]) -> None:
    """Re-serialising the envelope with spaces, or dropping its final newline, keeps every signature valid; the
    verifier still names the file as edited (any byte changed after the run is reported)."""
    path = bundle / "attestation.intoto.jsonl"
    raw = path.read_bytes()
    edited = Problem("attestation.intoto.jsonl", "edited",
                     "the envelope file is not byte for byte as pytest-hetero writes it (reformatted or edited "
                     "after signing)")
    for text in (json.dumps(json.loads(raw)).encode() + b"\n", raw[:-1]):  # spaces after separators; no newline
        path.write_bytes(text)
        assert problems(bundle, keys["run.pub"]) == [edited]
    path.write_bytes(raw)
    assert problems(bundle, keys["run.pub"]) == []


def test_statement_copy_edited(bundle: Path, keys: dict[str, Path]) -> None:
    (bundle / "statement.intoto.json").write_text("{}")
    assert problems(bundle, keys["run.pub"]) == [
        Problem("statement.intoto.json", "modified", "differs from the signed payload in the envelope")]


def test_matrix_copy_edited(bundle: Path, keys: dict[str, Path]) -> None:
    path = bundle / "inputs/example-cpu.matrix.yaml"
    path.write_text(path.read_text().replace("min_cpus: 1", "min_cpus: 0"))
    kinds = [(p.path, p.kind) for p in problems(bundle, keys["run.pub"])]
    assert kinds == [("inputs/example-cpu.matrix.yaml", "modified"), ("inputs/example-cpu.matrix.yaml", "modified")]


def test_unsigned_bundle_fails_verification(tmp_path: Path, keys: dict[str, Path]) -> None:
    bundle = make_bundle(tmp_path / "u", sample_evidence(), None)
    assert problems(bundle, keys["run.pub"]) == [
        Problem("attestation.intoto.jsonl", "unsigned", "the bundle is UNSIGNED (no signature in the envelope)")]


def test_required_roles(bundle: Path, keys: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    pubs = ("--key", str(keys["run.pub"]), "--key", str(keys["business.pub"]))
    assert hetero("verify", str(bundle), *pubs, "--require-role", "business") == 1
    assert "FAIL role business: role: required sign-off is missing (pending)" in capsys.readouterr().out
    assert hetero("sign", str(bundle), "--key", str(keys["business"]), "--role", "business") == 0
    assert capsys.readouterr().out.startswith(f"signed {bundle} as business for business with key "
                                              f"{kid(keys['business.pub'])} at ")
    assert hetero("verify", str(bundle), *pubs, "--require-role", "business") == 0
    assert capsys.readouterr().out.endswith(f"role sign-offs: business by {kid(keys['business.pub'])[:16]}…\n")
    assert hetero("verify", str(bundle), "--key", str(keys["run.pub"])) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        f"FAIL signature 2 (keyid {kid(keys['business.pub'])[:16]}…, role business): unknown_key: "
        "signed by a key not passed with --key")
    assert problems(bundle, keys["run.pub"], keys["business.pub"], roles=("business", "algorithm")) == [
        Problem("role algorithm", "role", "required sign-off is missing (pending)")]


def test_forged_role_claim(bundle: Path, keys: dict[str, Path]) -> None:
    add_role_signature(bundle, load_private_key(keys["business"]), "business")
    path = bundle / "attestation.intoto.jsonl"
    envelope = json.loads(path.read_text())
    envelope["signatures"][1]["signoff"]["role"] = "algorithm"
    envelope["signatures"][1]["signoff"]["layers"] = ["model"]
    path.write_bytes(envelope_bytes(envelope))  # as the writer spells it: only the signature can tell
    assert problems(bundle, keys["run.pub"], keys["business.pub"], roles=("algorithm",)) == [
        Problem(f"signature 2 (keyid {kid(keys['business.pub'])[:16]}…, role algorithm)", "signature",
                "sign-off claim (role, layers, time) does not verify"),
        Problem("role algorithm", "role", "required sign-off is missing (pending)")]


def test_sign_refuses_foreign_layers_and_bad_keys(bundle: Path, keys: dict[str, Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert hetero("sign", str(bundle), "--key", str(keys["business"]), "--role", "business",
                  "--layer", "model") == 2
    assert "role 'business' cannot vouch for model: it owns only business" in capsys.readouterr().err
    os.chmod(keys["business"], 0o604)
    assert hetero("sign", str(bundle), "--key", str(keys["business"]), "--role", "business") == 2
    err = capsys.readouterr().err
    assert err == (f"hetero sign: {keys['business']}: private key file is accessible by group/others (mode 0604)\n"
                   f"  hint: run: chmod 600 {keys['business']}\n")


def test_pytest_run_signs_the_bundle(pytester: pytest.Pytester, tmp_path: Path) -> None:
    generate_keypair(tmp_path / "run.key", tmp_path / "run.pub")
    pytester.makefile(".matrix.yaml", t=matrix_text())
    result = pytester.runpytest_subprocess("t.matrix.yaml", "--hetero-run-id", "r1", "--hetero-report-dir", "reports",
                                           "--hetero-sign-key", str(tmp_path / "run.key"))
    result.stdout.fnmatch_lines([f"bundle signed by {kid(tmp_path / 'run.pub')}"])
    bundle = pytester.path / "reports" / "r1"
    assert verify_bundle(bundle, [load_public_key(tmp_path / "run.pub")]).problems == []
    names = sorted(p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file())
    for expected in ("attestation.intoto.jsonl", "ctrf.json", "evidence.json", "inputs/t.matrix.yaml",
                     "journal.jsonl", "junit.xml", "manifest.json", "report.html", "statement.intoto.json",
                     "summary.md"):
        assert expected in names
    listed = [e["path"] for e in json.loads((bundle / "manifest.json").read_text())["files"]]
    assert listed == sorted(set(names) - {"manifest.json", "statement.intoto.json", "attestation.intoto.jsonl"})
    secret = b"".join((tmp_path / "run.key").read_bytes().splitlines()[1:-1])
    assert secret not in (result.stdout.str() + result.stderr.str()).encode()


def test_refused_signing_key_stops_the_run_before_anything_runs(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Asking to sign with a key that cannot sign is a usage error up front, not an unsigned pass."""
    generate_keypair(tmp_path / "run.key", tmp_path / "run.pub")
    os.chmod(tmp_path / "run.key", 0o644)
    pytester.makefile(".matrix.yaml", t=matrix_text())
    result = pytester.runpytest_subprocess("t.matrix.yaml", "--hetero-run-id", "r2", "--hetero-report-dir", "reports",
                                           "--hetero-sign-key", str(tmp_path / "run.key"))
    assert result.ret == 4
    result.stderr.fnmatch_lines([(f"ERROR: --hetero-sign-key / HETERO_SIGN_KEY: {tmp_path / 'run.key'}: private key "
                                  "file is accessible by group/others (mode 0644)"),
                                 f"  hint: run: chmod 600 {tmp_path / 'run.key'}"])
    assert not (pytester.path / "reports" / "r2").exists()
    public = pytester.runpytest_subprocess("t.matrix.yaml", "--hetero-sign-key", str(tmp_path / "run.pub"))
    assert public.ret == 4
    public.stderr.fnmatch_lines([f"*{tmp_path / 'run.pub'}: a public key, not a private key",
                                 "  hint: pass the private key file; create a pair with: hetero keygen KEY"])


def test_pytest_run_without_key_is_visibly_unsigned(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", t=matrix_text())
    result = pytester.runpytest_subprocess("t.matrix.yaml", "--hetero-run-id", "r3", "--hetero-report-dir", "reports")
    result.stdout.fnmatch_lines(["bundle UNSIGNED*"])
    bundle = pytester.path / "reports" / "r3"
    envelope = json.loads((bundle / "attestation.intoto.jsonl").read_text())
    assert envelope["signatures"] == [] and envelope["payloadType"] == PAYLOAD_TYPE
    digest = hashlib.sha256((bundle / "manifest.json").read_bytes()).hexdigest()
    assert json.loads((bundle / "statement.intoto.json").read_text())["subject"][0]["digest"]["sha256"] == digest


def test_standard_dsse_library_verifies_the_envelope(bundle: Path, keys: dict[str, Path]) -> None:
    """securesystemslib (secure-systems-lab's DSSE implementation) accepts our envelope and keyid."""
    from cryptography.hazmat.primitives import serialization
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError
    from securesystemslib.signer import SSlibKey

    def sslib_key(pub: Path) -> SSlibKey:
        public = load_public_key(pub)
        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()
        return SSlibKey(keyid(public), "ed25519", "ed25519", {"public": raw})

    add_role_signature(bundle, load_private_key(keys["business"]), "business")
    envelope = Envelope.from_dict(json.loads((bundle / "attestation.intoto.jsonl").read_text()))
    assert envelope.payload_type == "application/vnd.in-toto+json"
    accepted = envelope.verify([sslib_key(keys["run.pub"]), sslib_key(keys["business.pub"])], 2)
    assert set(accepted) == {kid(keys["run.pub"]), kid(keys["business.pub"])}
    with pytest.raises(VerificationError):
        envelope.verify([sslib_key(keys["other.pub"])], 1)


def _ensure_tools() -> None:
    import shutil
    import subprocess

    missing = [t for t in ("jq", "openssl", "sha256sum") if shutil.which(t) is None]
    if missing and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], capture_output=True, check=False)
        missing = [t for t in missing if shutil.which(t) is None]
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"missing tools for the documented verification: {missing}")
        pytest.skip(f"missing {missing}")


def test_documented_openssl_verification(bundle: Path, keys: dict[str, Path]) -> None:
    import subprocess

    _ensure_tools()
    script = Path(__file__).resolve().parents[1] / "docs" / "verify-bundle.sh"
    ok = subprocess.run(["bash", str(script), str(bundle), str(keys["run.pub"])], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.splitlines() == ["Signature Verified Successfully", f"OK {bundle}"]
    wrong = subprocess.run(["bash", str(script), str(bundle), str(keys["other.pub"])], capture_output=True, text=True, check=False)
    assert wrong.returncode != 0 and "Signature Verification Failure" in wrong.stdout + wrong.stderr
    (bundle / "artifacts/cpu-host/py-current/forged.txt").write_text("x")
    extra = subprocess.run(["bash", str(script), str(bundle), str(keys["run.pub"])], capture_output=True, text=True, check=False)
    assert extra.returncode == 1 and "FAIL files differ from manifest.json:" in extra.stdout
    assert "> artifacts/cpu-host/py-current/forged.txt" in extra.stdout


def test_sign_key_from_environment(pytester: pytest.Pytester, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    generate_keypair(tmp_path / "env.key", tmp_path / "env.pub")
    monkeypatch.setenv("HETERO_SIGN_KEY", str(tmp_path / "env.key"))
    pytester.makefile(".matrix.yaml", t=matrix_text())
    result = pytester.runpytest_subprocess("t.matrix.yaml", "--hetero-run-id", "r3", "--hetero-report-dir", "reports")
    result.stdout.fnmatch_lines([f"bundle signed by {kid(tmp_path / 'env.pub')}"])
    assert verify_bundle(pytester.path / "reports" / "r3", [load_public_key(tmp_path / "env.pub")]).ok


def test_commands_are_registered_in_the_hetero_cli(bundle: Path, keys: dict[str, Path]) -> None:
    from pytest_hetero.cli import build_parser, main

    names = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert {"keygen", "sign", "verify", "render"} <= names
    assert main(["verify", str(bundle), "--key", str(keys["run.pub"])]) == 0


def test_team_sign_off_alone_does_not_make_an_unsigned_bundle_verify(pytester: pytest.Pytester,
                                                                       tmp_path: Path) -> None:
    from pytest_hetero.bundle.signing import add_role_signature, load_private_key, load_public_key
    from pytest_hetero.bundle.verify import verify_bundle

    generate_keypair(tmp_path / "biz.key", tmp_path / "biz.pub")
    pytester.makefile(".matrix.yaml", t=matrix_text())
    pytester.runpytest_subprocess("t.matrix.yaml", "--hetero-run-id", "r4", "--hetero-report-dir", "reports")
    bundle = pytester.path / "reports" / "r4"
    add_role_signature(bundle, load_private_key(tmp_path / "biz.key"), "business", None)
    result = verify_bundle(bundle, [load_public_key(tmp_path / "biz.pub")])
    assert [(p.kind, p.detail) for p in result.problems] == [
        ("unsigned", "no run signature: the bundle was written UNSIGNED and only team sign-offs were added")]


def test_baseline_with_a_sign_off_by_an_untrusted_key_says_which_key_to_trust(
        bundle: Path, keys: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """load_evidence (baseline, merge, diff) of an unaltered bundle whose business sign-off key is not
    trusted: the hint says to trust the key, not that the bundle was altered."""
    from pytest_hetero.bundle.verify import load_evidence
    from pytest_hetero.errors import BundleError

    assert hetero("sign", str(bundle), "--key", str(keys["business"]), "--role", "business") == 0
    capsys.readouterr()
    with pytest.raises(BundleError) as info:
        load_evidence(bundle, allow_unsigned=False, keys=[load_public_key(keys["run.pub"])])
    assert info.value.message == (f"bundle does not verify (1 problem(s)): signature 2 (keyid "
                                  f"{kid(keys['business.pub'])[:16]}…, role business): unknown_key: signed by a key "
                                  "not passed with --key")
    assert info.value.hint == ("a signer's public key is not trusted here: pass it with --key PUB.pem (pytest: "
                               "$HETERO_TRUST_KEYS)")
    evidence, state = load_evidence(bundle, allow_unsigned=False,
                                    keys=[load_public_key(keys["run.pub"]), load_public_key(keys["business.pub"])])
    assert (state, evidence["run"]["id"]) == ("verified", "run-1")
