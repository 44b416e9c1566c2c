"""hetero verify: an intact signed bundle passes; each kind of tampering fails with a precise message."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from bundle_samples import make_bundle, policy_text, sample_evidence
from support import matrix_text

from pytest_hetero.bundle.attestation import add_signoff
from pytest_hetero.bundle.manifest import Problem, manifest_bytes
from pytest_hetero.bundle.policy import load_policy
from pytest_hetero.bundle.signing import (
    PAYLOAD_TYPE,
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

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


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
    head, chain = out.rsplit("sign-off chain head: ", 1)
    assert head == (f"OK {bundle}: run run-1, verdict FAIL, finished 2026-11-29T10:05:00.000000Z; 15 files match the "
                    f"manifest; run signed by {kid(keys['run.pub'])[:16]}…\nsign-offs: none\n")
    # no sign-off yet: position 0 and the chain's seed digest (bound to this bundle)
    assert re.fullmatch(r"0:[0-9a-f]{64} \(pin it with --signoff-head to catch a removed latest sign-off\)\n", chain)


def test_wrong_key(bundle: Path, keys: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert hetero("verify", str(bundle), "--key", str(keys["other.pub"])) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [(f"FAIL signature 1 (keyid {kid(keys['run.pub'])[:16]}…): unknown_key: the run is signed by a key "
                    "not trusted here (--key, or the policy's gate keys)"), f"verification FAILED: 1 problem(s) in {bundle}"]


def test_truncated_envelope(bundle: Path, keys: dict[str, Path]) -> None:
    path = bundle / "attestation.intoto.jsonl"
    path.write_bytes(path.read_bytes()[:200])
    [problem, *rest] = problems(bundle, keys["run.pub"])
    assert (problem.path, problem.kind) == ("attestation.intoto.jsonl", "edited")
    assert problem.detail.startswith("the last line has no newline")
    path.write_bytes(path.read_bytes() + b"\n")
    [problem] = problems(bundle, keys["run.pub"])
    assert (problem.path, problem.kind) == ("attestation.intoto.jsonl", "malformed")
    assert problem.detail.startswith("line 1 is not JSON (Unterminated string")
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
    found = problems(bundle, keys["run.pub"])  # the first failed step stops the walk: an unsigned manifest says nothing
    assert [(p.path, p.kind) for p in found] == [("manifest.json", "modified")]
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
                     "line 1 is not byte for byte as pytest-hetero writes it (reformatted or edited after signing)")
    for text in (json.dumps(json.loads(raw)).encode() + b"\n", b" " + raw):  # spaces after separators; leading space
        path.write_bytes(text)
        assert problems(bundle, keys["run.pub"]) == [edited]
    path.write_bytes(raw[:-1])  # the final newline dropped
    assert problems(bundle, keys["run.pub"]) == [Problem(
        "attestation.intoto.jsonl", "edited", "the last line has no newline, as every line is written: the file was "
        "truncated or edited")]
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
    assert kinds == [("inputs/example-cpu.matrix.yaml", "modified")]


def test_unsigned_bundle_fails_verification(tmp_path: Path, keys: dict[str, Path]) -> None:
    bundle = make_bundle(tmp_path / "u", sample_evidence(), None)
    assert problems(bundle, keys["run.pub"]) == [
        Problem("attestation.intoto.jsonl", "unsigned", "the bundle is UNSIGNED (no signature in the run's envelope)")]


def test_required_roles(tmp_path: Path, keys: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    bundle = make_bundle(tmp_path / "clean", sample_evidence(resources=("cpu-host",)), keys["run"])
    (tmp_path / "p.yaml").write_text(policy_text({"business": [(keys["business.pub"], ["Ana Ruiz"])],
                                                  "algorithm": [(keys["other.pub"], ["Al Go"])]}))
    pin = hashlib.sha256((tmp_path / "p.yaml").read_bytes()).hexdigest()
    pubs = ("--key", str(keys["run.pub"]), "--policy", str(tmp_path / "p.yaml"), "--policy-sha256", pin)
    assert hetero("verify", str(bundle), *pubs, "--require-role", "business") == 1
    assert "FAIL role business: role: required sign-off is missing (pending)" in capsys.readouterr().out
    assert hetero("sign", str(bundle), "--key", str(keys["business"]), "--role", "business",
                  "--decision", "accept-with-conditions", "--text", "re-run on the 2.1 image before release") == 0
    assert capsys.readouterr().out.startswith(f"signed {bundle} as business for business: accept-with-conditions: "
                                              f"re-run on the 2.1 image before release; key {kid(keys['business.pub'])} at ")
    assert hetero("verify", str(bundle), *pubs, "--require-role", "business") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:3] == ["sign-offs checked against trust policy test-policy (pinned by sha256 " + pin[:16] + "…):",
                        "  business: accepted_with_conditions"]
    assert out[3].startswith("    accept-with-conditions: re-run on the 2.1 image before release, by Ana Ruiz (key "
                             f"{kid(keys['business.pub'])[:16]}…) at ")
    assert hetero("verify", str(bundle), "--key", str(keys["run.pub"])) == 0  # without a policy: not checked
    assert capsys.readouterr().out.splitlines()[1] == ("sign-offs: 1 present, not checked (no --policy: a sign-off is "
                                                       "bound to its role only by a trust policy)")
    assert hetero("verify", str(bundle), "--key", str(keys["run.pub"]), "--require-role", "business") == 2
    assert "--require-role needs --policy" in capsys.readouterr().err
    assert [str(p) for p in verify_bundle(bundle, [load_public_key(keys["run.pub"])], ("business", "algorithm"),
                                          policy=load_policy(tmp_path / "p.yaml", [], pin)).problems] == [
        "role algorithm: role: required sign-off is missing (pending)"]


def test_forged_signoff_claim(tmp_path: Path, keys: dict[str, Path]) -> None:
    """A sign-off whose claim was edited after signing (role and layers changed, re-encoded as the writer spells
    it) is caught by its signature under the policy."""
    bundle = make_bundle(tmp_path / "clean", sample_evidence(resources=("cpu-host",)), keys["run"])
    add_signoff(bundle, load_private_key(keys["business"]), "business", "accept")
    path = bundle / "attestation.intoto.jsonl"
    run_line, line = path.read_bytes().splitlines()
    envelope = json.loads(line)
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"].update(role="algorithm", layers=["model"])
    envelope["payload"] = base64.b64encode(json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()).decode()
    path.write_bytes(run_line + b"\n" + envelope_bytes(envelope))
    (tmp_path / "p.yaml").write_text(policy_text({"business": [(keys["business.pub"], ["Ana Ruiz"])],
                                                  "algorithm": [(keys["business.pub"], ["Ana Ruiz"])]}))
    policy = load_policy(tmp_path / "p.yaml", [], hashlib.sha256((tmp_path / "p.yaml").read_bytes()).hexdigest())
    assert problems_with(bundle, keys["run.pub"], policy, ("algorithm",)) == [
        Problem(f"sign-off line 2 (role algorithm, keyid {kid(keys['business.pub'])[:16]}…)", "role",
                "the signature does not verify: the sign-off was altered or the signature is corrupt"),
        Problem("role algorithm", "role", "required sign-off is missing (pending)")]


def problems_with(bundle: Path, pub: Path, policy: object, roles: tuple[str, ...] = ()) -> list[Problem]:
    return verify_bundle(bundle, [load_public_key(pub)], roles, policy=policy).problems  # type: ignore[arg-type]


def test_sign_refuses_foreign_layers_and_bad_keys(bundle: Path, keys: dict[str, Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert hetero("sign", str(bundle), "--key", str(keys["business"]), "--role", "business",
                  "--layer", "model", "--decision", "reject", "--text", "x") == 2
    assert "role 'business' cannot vouch for model: it owns only business" in capsys.readouterr().err
    os.chmod(keys["business"], 0o604)
    assert hetero("sign", str(bundle), "--key", str(keys["business"]), "--role", "business", "--decision",
                  "accept") == 2
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
    # the signature files are outside the manifest they cover; validation.intoto.jsonl names the statement's digest
    assert listed == sorted(set(names) - {"manifest.json", "statement.intoto.json", "attestation.intoto.jsonl",
                                          "validation.intoto.jsonl"})
    assert "validation.intoto.jsonl" in names
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


def test_standard_dsse_library_verifies_each_attestation_with_its_own_key(bundle: Path, keys: dict[str, Path]) -> None:
    """securesystemslib (secure-systems-lab's DSSE implementation), with the keys built by its own
    ``SSlibKey.from_crypto`` (so with the keyid it computes): the run's line verifies with the gate key only, the
    sign-off's line with the team's key only; each payload's predicate type says what was signed."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError
    from securesystemslib.signer import Key, SSlibKey

    def sslib_key(pub: Path) -> SSlibKey:
        return SSlibKey.from_crypto(load_public_key(pub))

    assert sslib_key(keys["run.pub"]).keyid == kid(keys["run.pub"])  # the keyid standard tools compute is ours
    add_signoff(bundle, load_private_key(keys["business"]), "business", "reject", "GPU host down")
    run_line, signoff_line = (bundle / "attestation.intoto.jsonl").read_text().splitlines()
    run, signoff = Envelope.from_dict(json.loads(run_line)), Envelope.from_dict(json.loads(signoff_line))
    assert run.payload_type == signoff.payload_type == "application/vnd.in-toto+json"
    both: list[Key] = [sslib_key(keys["run.pub"]), sslib_key(keys["business.pub"])]
    assert set(run.verify(both, 1)) == {kid(keys["run.pub"])}
    assert set(signoff.verify(both, 1)) == {kid(keys["business.pub"])}
    with pytest.raises(VerificationError):
        run.verify([sslib_key(keys["business.pub"])], 1)  # a team key never verifies the run's claim
    with pytest.raises(VerificationError):
        signoff.verify([sslib_key(keys["run.pub"])], 1)
    assert json.loads(run.pae().split(b" ", 4)[4])["predicateType"] == \
        "https://pytest-hetero.dev/attestation/evidence-bundle/v1"
    signed = json.loads(signoff.payload)
    assert signed["predicateType"] == "https://pytest-hetero.dev/attestation/signoff/v1"
    assert signed["subject"][0]["digest"]["sha256"] == hashlib.sha256(run.payload).hexdigest()


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

    def run(*argv: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(script), *map(str, argv)], capture_output=True, text=True, check=False,
                              timeout=120)

    ok = run(bundle, keys["run.pub"])
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.splitlines() == ["Signature Verified Successfully", f"OK {bundle}: run run-1, verdict fail"]
    wrong = run(bundle, keys["other.pub"])
    assert wrong.returncode != 0 and "Signature Verification Failure" in wrong.stdout + wrong.stderr
    # a sign-off is told from the run signature: the team key verifies its own line only, and only as a sign-off
    assert hetero("sign", str(bundle), "--key", str(keys["business"]), "--role", "business", "--decision",
                  "reject", "--text", "GPU host down") == 0
    assert run(bundle, keys["run.pub"]).returncode == 0
    team_on_run = run(bundle, keys["business.pub"])
    assert team_on_run.returncode != 0 and "Signature Verification Failure" in team_on_run.stdout + team_on_run.stderr
    signoff = run("--signoff", 2, bundle, keys["business.pub"])
    assert signoff.returncode == 0, signoff.stdout + signoff.stderr
    assert signoff.stdout.splitlines()[0] == "Signature Verified Successfully"
    assert signoff.stdout.splitlines()[1].startswith("OK sign-off line 2: role business for business: reject: GPU "
                                                     "host down at ")
    gate_on_signoff = run("--signoff", 2, bundle, keys["run.pub"])
    assert gate_on_signoff.returncode != 0 and "Signature Verification Failure" in gate_on_signoff.stdout + \
        gate_on_signoff.stderr
    not_a_signoff = run("--signoff", 1, bundle, keys["run.pub"])
    assert not_a_signoff.returncode == 1 and "FAIL a sign-off is line 2 or later" in not_a_signoff.stdout
    (bundle / "artifacts/cpu-host/py-current/forged.txt").write_text("x")
    extra = run(bundle, keys["run.pub"])
    assert extra.returncode == 1 and "FAIL files differ from manifest.json:" in extra.stdout
    assert "> artifacts/cpu-host/py-current/forged.txt" in extra.stdout
    os.mkfifo(bundle / "artifacts/cpu-host/py-current/pipe")  # must not hang sha256sum
    fifo = run(bundle, keys["run.pub"])
    assert fifo.returncode == 1 and "FAIL not a regular file: ./artifacts/cpu-host/py-current/pipe" in fifo.stdout


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

    commands = build_parser()._subparsers._group_actions[0]  # type: ignore[union-attr]
    names = set(commands.choices or ())
    assert {"keygen", "sign", "verify", "render"} <= names
    assert main(["verify", str(bundle), "--key", str(keys["run.pub"])]) == 0


def test_team_sign_off_alone_does_not_make_an_unsigned_bundle_verify(pytester: pytest.Pytester,
                                                                       tmp_path: Path) -> None:
    generate_keypair(tmp_path / "biz.key", tmp_path / "biz.pub")
    pytester.makefile(".matrix.yaml", t=matrix_text())
    pytester.runpytest_subprocess("t.matrix.yaml", "--hetero-run-id", "r4", "--hetero-report-dir", "reports")
    bundle = pytester.path / "reports" / "r4"
    add_signoff(bundle, load_private_key(tmp_path / "biz.key"), "business", "reject", "not signed by the gate")
    result = verify_bundle(bundle, [load_public_key(tmp_path / "biz.pub")])
    assert [(p.kind, p.detail) for p in result.problems] == [
        ("unsigned", "the bundle is UNSIGNED (no signature in the run's envelope)")]


def test_loading_evidence_needs_the_run_signature_only(bundle: Path, keys: dict[str, Path],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """load_evidence (baseline, merge, diff): a sign-off by a key nobody trusts does not change the evidence and does
    not stop it; a run signed by an untrusted key does, and the hint says which key to trust."""
    from pytest_hetero.bundle.verify import load_evidence
    from pytest_hetero.errors import BundleError

    assert hetero("sign", str(bundle), "--key", str(keys["business"]), "--role", "business", "--decision", "reject",
                  "--text", "GPU host down") == 0
    capsys.readouterr()
    evidence, state = load_evidence(bundle, allow_unsigned=False, keys=[load_public_key(keys["run.pub"])])
    assert (state, evidence["run"]["id"]) == ("verified", "run-1")
    with pytest.raises(BundleError) as info:
        load_evidence(bundle, allow_unsigned=False, keys=[load_public_key(keys["business.pub"])])
    assert info.value.message == (f"bundle does not verify (1 problem(s)): signature 1 (keyid "
                                  f"{kid(keys['run.pub'])[:16]}…): unknown_key: the run is signed by a key not trusted "
                                  "here (--key, or the policy's gate keys)")
    assert info.value.hint == ("the run's signing key is not trusted here: pass its public key with --key PUB.pem "
                               "(pytest: $HETERO_TRUST_KEYS)")
