"""Key custody (issue 29): a run can be signed by an external signer, so the key need never be on the host.

Before (main): the gate could only sign with a private key file (``--hetero-sign-key``) on the host that
runs the code under test; a model that escaped the sandbox took it and re-signed a forged bundle. Now
``--hetero-sign-command CMD`` (with ``--hetero-sign-public PEM``) hands each message (the DSSE PAE bytes,
and the journal key's derivation message) to a real signer program on stdin and takes its signature from
stdout, checking it against the public key. The signer here is a real program holding a key in a folder
the gate is never told about.
"""

from __future__ import annotations

import base64
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support import DATA_SHA, DIGITS, MODEL_SHA

from pytest_hetero.bundle.signing import PAYLOAD_TYPE, generate_keypair, keyid, load_private_key, load_public_key, pae

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

SIGNER = """\
import base64, sys
from cryptography.hazmat.primitives import serialization
key = serialization.load_pem_private_key(open({key!r}, "rb").read(), password=None)
message = sys.stdin.buffer.read()
sys.stdout.write(base64.b64encode(key.sign(message)).decode() + "\\n")
"""
"""A signer with its key's path inside it (not on the gate's command line or in its environment)."""


def matrix(folder: Path) -> Path:
    (folder / "rules.yaml").write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                                       "  - {name: floor, metric: accuracy, op: \">=\", value: 0.5}\n")
    # the real digits model: the gate computes accuracy from the dataset's truth (never the model's own number)
    entry = ["{python}", "{code}/infer.py", "--model", "{model}", "--data", "{dataset}", "--out", "{outputs}",
             "--provider", "{provider}"]
    doc = {"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": "t"},
           "spec": {"target": {"backend": "local"},
                    "resources": [{"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}],
                    "images": [{"name": "py", "reference": "python:current"}],
                    "models": [{"name": "m", "version": "1", "uri": str(DIGITS / "model" / "digits-logreg-1.0.0.onnx"),
                                "sha256": MODEL_SHA, "runtime": "onnxruntime", "code": str(DIGITS),
                                "entrypoint": entry}],
                    "datasets": [{"name": "d", "version": "1", "uri": str(DIGITS / "data" / "digits-test-1.0.0.csv"),
                                  "sha256": DATA_SHA, "acceptance": "rules.yaml",
                                  "truth": {"task": "classification", "target": "label", "id": "index"}}]}}
    path = folder / "m.matrix.yaml"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def signer(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Path]:
    """(signer command, public key, private key): the key in a 0700 folder apart from the run's."""
    vault = tmp_path_factory.mktemp("vault")
    vault.chmod(0o700)
    generate_keypair(vault / "k.key", vault / "k.pub")
    public = tmp_path_factory.mktemp("pub") / "k.pub"
    public.write_bytes((vault / "k.pub").read_bytes())
    program = vault / "signer.py"
    program.write_text(SIGNER.format(key=str(vault / "k.key")))
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(program))}", public, vault / "k.key"


def test_a_run_signed_by_an_external_signer_verifies_and_equals_the_key_signature(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, signer: tuple[str, Path, Path]) -> None:
    """The bundle's envelope carries the signer's keyid and a signature ``hetero verify`` accepts with the
    public key; it is byte for byte the signature the key itself makes over the same PAE (Ed25519 is
    deterministic), and the journal's run line names the same keyid (its key derived through the signer)."""
    command, public, private = signer
    monkeypatch.delenv("HETERO_SIGN_KEY", raising=False)
    path = matrix(pytester.path)
    result = pytester.runpytest(str(path), "-p", "no:cacheprovider", "--hetero-run-id", "r1",
                                "--hetero-sign-command", command, "--hetero-sign-public", str(public),
                                "-k", "model or business")
    result.assert_outcomes(passed=2)
    bundle = pytester.path / "reports" / "r1"
    envelope = json.loads((bundle / "attestation.intoto.jsonl").read_text().splitlines()[0])
    expected = keyid(load_public_key(public))
    assert [s["keyid"] for s in envelope["signatures"]] == [expected]
    statement = base64.b64decode(envelope["payload"])
    own = base64.b64encode(load_private_key(private).sign(pae(PAYLOAD_TYPE, statement))).decode()
    assert envelope["signatures"][0]["sig"] == own
    run_line = json.loads((bundle / "journal.jsonl").read_text().splitlines()[0])
    assert expected in json.dumps(run_line)
    verify = subprocess.run([sys.executable, "-m", "pytest_hetero.cli", "verify", str(bundle), "--key", str(public)],
                            capture_output=True, text=True, check=False, timeout=120)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert str(private) not in (bundle / "evidence.json").read_text()


def test_a_signer_that_signs_wrong_is_refused_before_anything_runs(pytester: pytest.Pytester,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   signer: tuple[str, Path, Path]) -> None:
    """A signer whose signatures do not verify with the given public key (here: another key's): pytest
    stops at start with the reason; nothing is run or signed."""
    command, _, _ = signer
    other = pytester.path / "other"
    other.mkdir()
    generate_keypair(other / "o.key", other / "o.pub")
    monkeypatch.delenv("HETERO_SIGN_KEY", raising=False)
    path = matrix(pytester.path)
    result = pytester.runpytest(str(path), "-p", "no:cacheprovider", "--hetero-run-id", "r1",
                                "--hetero-sign-command", command, "--hetero-sign-public", str(other / "o.pub"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*--hetero-sign-command / HETERO_SIGN_COMMAND: * signer command returned no valid Ed25519 signature of the "
        f"message for the public key {other / 'o.pub'}*"])
    assert not (pytester.path / "reports" / "r1" / "attestation.intoto.jsonl").exists()


def test_a_command_without_its_public_key_or_with_a_key_file_is_refused(pytester: pytest.Pytester,
                                                                        signer: tuple[str, Path, Path]) -> None:
    """The signer's public key is required (keyid, and the check of every signature); a key file and a
    command together are ambiguous."""
    command, public, private = signer
    path = matrix(pytester.path)
    alone = pytester.runpytest(str(path), "-p", "no:cacheprovider", "--hetero-sign-command", command)
    assert alone.ret == pytest.ExitCode.USAGE_ERROR
    alone.stderr.fnmatch_lines(["*--hetero-sign-command needs --hetero-sign-public PEM (the signer's public key)*"])
    both = pytester.runpytest(str(path), "-p", "no:cacheprovider", "--hetero-sign-command", command,
                              "--hetero-sign-public", str(public), "--hetero-sign-key", str(private))
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    both.stderr.fnmatch_lines(["*--hetero-sign-key and --hetero-sign-command both given*"])


def hetero(*argv: str) -> subprocess.CompletedProcess[str]:
    """``hetero ARGV…`` in a subprocess."""
    return subprocess.run([sys.executable, "-m", "pytest_hetero.cli", *argv], capture_output=True, text=True,
                          check=False, timeout=300)


def test_report_merge_signoffs_and_policies_take_the_same_external_signer(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, signer: tuple[str, Path, Path],
        tmp_path: Path) -> None:
    """Before: ``hetero report --from-journal``, ``hetero merge``, ``hetero sign`` and ``hetero sign-policy`` took
    a key file only, so recovering, merging or signing off a run signed by an external signer needed the key
    on the host after all. Now each takes ``--sign-command CMD --sign-public PEM``: the rebuilt bundle
    authenticates every journal line (its journal key derived through the signer, as the run derived it) and
    verifies; the merge verifies; a team's sign-off and a signed trust policy carry the signer's keyid and a
    signature that checks; a key file and a command together, or a command without its public key, are refused."""
    command, public, _ = signer
    monkeypatch.delenv("HETERO_SIGN_KEY", raising=False)
    path = matrix(pytester.path)
    pytester.runpytest(str(path), "-p", "no:cacheprovider", "--hetero-run-id", "r1", "--hetero-sign-command", command,
                       "--hetero-sign-public", str(public), "-k", "model or business").assert_outcomes(passed=2)
    bundle = pytester.path / "reports" / "r1"
    signed = ["--sign-command", command, "--sign-public", str(public)]

    # a crash before the bundle was finished: its copy without the attestation, rebuilt through the signer
    crashed = tmp_path / "r1"
    subprocess.run(["cp", "-a", str(bundle), str(crashed)], check=True)
    (crashed / "attestation.intoto.jsonl").unlink()
    rebuilt = hetero("report", "--from-journal", str(crashed), *signed)
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert json.loads((crashed / "evidence.json").read_text())["journal"]["authenticated"] is True
    assert hetero("verify", str(crashed), "--key", str(public)).returncode == 0

    merged = tmp_path / "merged"
    done = hetero("merge", str(bundle), "-o", str(merged), "--key", str(public), *signed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "UNSIGNED" not in done.stdout
    assert hetero("verify", str(merged), "--key", str(public)).returncode == 0, "the merge verifies"

    team = tmp_path / "team"
    team.mkdir(mode=0o700)
    generate_keypair(team / "t.key", team / "t.pub")
    (team / "signer.py").write_text(SIGNER.format(key=str(team / "t.key")))
    team_command = f"{shlex.quote(sys.executable)} {shlex.quote(str(team / 'signer.py'))}"
    signoff = hetero("sign", str(bundle), "--role", "business", "--decision", "accept", "--gate-key", str(public),
                     "--sign-command", team_command, "--sign-public", str(team / "t.pub"))
    assert signoff.returncode == 0, signoff.stdout + signoff.stderr
    line = json.loads((bundle / "attestation.intoto.jsonl").read_text().splitlines()[1])
    team_public = load_public_key(team / "t.pub")
    assert [s["keyid"] for s in line["signatures"]] == [keyid(team_public)]
    team_public.verify(base64.b64decode(line["signatures"][0]["sig"]),
                       pae(line["payloadType"], base64.b64decode(line["payload"])))

    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: pytest-hetero/v1\nkind: TrustPolicy\nroles:\n  business:\n    keys:\n"
                      f"      - {{names: [Risk Lead], public_key: {json.dumps((team / 't.pub').read_text())}}}\n")
    signed_policy = hetero("sign-policy", str(policy), *signed)
    assert signed_policy.returncode == 0, signed_policy.stdout + signed_policy.stderr
    with_policy = hetero("verify", str(bundle), "--key", str(public), "--policy", str(policy),
                         "--require-role", "business")
    assert with_policy.returncode == 0, with_policy.stdout + with_policy.stderr

    both = hetero("sign", str(bundle), "--role", "business", "--decision", "accept", "--key", str(team / "t.key"),
                  "--sign-command", team_command, "--sign-public", str(team / "t.pub"))
    assert both.returncode == 2 and "--key and --sign-command both given" in both.stderr, both.stderr
    alone = hetero("merge", str(bundle), "-o", str(tmp_path / "m2"), "--key", str(public), "--sign-command", command)
    assert alone.returncode == 2 and "--sign-command needs --sign-public PEM" in alone.stderr, alone.stderr
    neither = hetero("sign-policy", str(policy))
    assert neither.returncode == 2 and "needs a signer: --key PEM, or --sign-command" in neither.stderr, neither.stderr
