"""Issue 29: a deleted sign-off line is caught. Each sign-off is signed with its place in the file and the sha256
of the line before it (a chain), so removing, replacing or reordering one breaks the next; the latest ones, which
no later line vouches for, are caught against the chain head ``hetero sign`` prints (``verify --signoff-head``).
A ``reject`` never silently becomes ``pending`` or an earlier ``accept``."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from bundle_samples import make_bundle, policy_text, sample_evidence
from test_bundle_verify import hetero

from pytest_hetero.bundle.attestation import read_attestations
from pytest_hetero.bundle.policy import load_policy
from pytest_hetero.bundle.signing import PAYLOAD_TYPE, generate_keypair, keyid, load_public_key
from pytest_hetero.bundle.signoff import bundle_signoff
from pytest_hetero.evidence.document import as_document

OWNERS = {"discovery": "infra-team", "business": "risk-business"}
ATT = "attestation.intoto.jsonl"


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name in ("gate", "biz", "infra"):
        generate_keypair(tmp_path / f"{name}.key", tmp_path / f"{name}.pub")
        out[name], out[name + ".pub"] = tmp_path / f"{name}.key", tmp_path / f"{name}.pub"
    return out


@pytest.fixture
def bundle(tmp_path: Path, keys: dict[str, Path]) -> Path:
    return make_bundle(tmp_path / "b", sample_evidence(), keys["gate"], OWNERS)


@pytest.fixture
def policy(tmp_path: Path, keys: dict[str, Path]) -> Path:
    path = tmp_path / "trust.yaml"
    path.write_text(policy_text({"risk-business": [(keys["biz.pub"], ["Ana Ruiz"])],
                                 "infra-team": [(keys["infra.pub"], ["Ivo Infra"])]}, name="acme"))
    assert hetero("sign-policy", str(path), "--key", str(keys["gate"])) == 0
    return path


def sign(bundle: Path, keys: dict[str, Path], who: str, role: str, decision: str, text: str | None = None,
         *extra: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``hetero sign``; returns the chain head it printed."""
    capsys.readouterr()
    argv = ["sign", str(bundle), "--key", str(keys[who]), "--role", role, "--decision", decision,
            "--gate-key", str(keys["gate.pub"]), *(["--text", text] if text else []), *extra]
    assert hetero(*argv) == 0
    (head,) = [line.split(": ", 1)[1].split(" ", 1)[0] for line in capsys.readouterr().out.splitlines()
               if line.startswith("sign-off chain head: ")]
    return head


def verify(bundle: Path, keys: dict[str, Path], policy: Path, capsys: pytest.CaptureFixture[str],
           *extra: str) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = hetero("verify", str(bundle), "--key", str(keys["gate.pub"]), "--policy", str(policy), *extra)
    return code, capsys.readouterr().out.splitlines()


def drop_line(bundle: Path, number: int) -> None:
    lines = (bundle / ATT).read_bytes().splitlines(keepends=True)
    (bundle / ATT).write_bytes(b"".join(raw for n, raw in enumerate(lines, 1) if n != number))


def test_a_deleted_reject_before_other_signoffs_breaks_the_chain(bundle: Path, keys: dict[str, Path], policy: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Before: deleting the infra team's reject (line 2) left `verify` saying OK, infra-team pending."""
    sign(bundle, keys, "infra", "infra-team", "reject", "driver not installed on gpu nodes", capsys=capsys)
    sign(bundle, keys, "biz", "risk-business", "accept-with-known-failures", "gpu-nvidia blocked: INC-42",
         capsys=capsys)
    assert verify(bundle, keys, policy, capsys)[0] == 0
    drop_line(bundle, 2)
    code, out = verify(bundle, keys, policy, capsys)
    biz = keyid(load_public_key(keys["biz.pub"]))[:16]
    assert (code, out[0], out[-1]) == (1, f"FAIL sign-off line 2 (role risk-business, keyid {biz}…): signoff_chain: "
                                          "the chain of sign-offs is broken: it is sign-off 1 in the file but was "
                                          "signed as sign-off 2: 1 sign-off line(s) before it were removed",
                                       f"verification FAILED: 1 problem(s) in {bundle}")


def test_a_replaced_or_reordered_signoff_breaks_the_chain(bundle: Path, keys: dict[str, Path], policy: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    sign(bundle, keys, "infra", "infra-team", "reject", "driver not installed", capsys=capsys)
    sign(bundle, keys, "biz", "risk-business", "accept-with-known-failures", "INC-42", capsys=capsys)
    lines = (bundle / ATT).read_bytes().splitlines(keepends=True)
    (bundle / ATT).write_bytes(lines[0] + lines[2] + lines[1])
    code, out = verify(bundle, keys, policy, capsys)
    assert code == 1
    assert [line.split("): ", 1)[1] for line in out if line.startswith("FAIL ")] == [
        "signoff_chain: the chain of sign-offs is broken: it is sign-off 1 in the file but was signed as sign-off 2: "
        "1 sign-off line(s) before it were removed",
        "signoff_chain: the chain of sign-offs is broken: it is sign-off 2 in the file but was signed as sign-off 1: "
        "lines were inserted or reordered before it"]


def test_a_deleted_latest_reject_is_caught_against_the_pinned_head(bundle: Path, keys: dict[str, Path],
                                                                   policy: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The latest sign-off has no later line to vouch for it: the business team accepts, then rejects
    (superseding), and the reject is cut off. Before: `verify` said OK with risk-business accepted."""
    sign(bundle, keys, "biz", "risk-business", "accept-with-known-failures", "INC-42", capsys=capsys)
    head = sign(bundle, keys, "biz", "risk-business", "reject", "accuracy regressed", "--supersede", capsys=capsys)
    runs = read_attestations(bundle, PAYLOAD_TYPE)
    assert head == f"2:{hashlib.sha256(runs[2].raw).hexdigest()}"
    code, out = verify(bundle, keys, policy, capsys, "--signoff-head", head)
    assert code == 0
    assert "  risk-business: rejected" in out
    assert out[-1] == f"sign-off chain head: {head} (pin it with --signoff-head to catch a removed latest sign-off)"
    drop_line(bundle, 3)
    code, out = verify(bundle, keys, policy, capsys, "--signoff-head", head)
    assert (code, out) == (1, ["FAIL attestation.intoto.jsonl: signoff_removed: the bundle holds 1 sign-off(s) but 2 "
                                "were pinned: the latest 1 sign-off line(s) were removed",
                                f"verification FAILED: 1 problem(s) in {bundle}"])


def test_the_signoff_view_does_not_count_signoffs_after_a_removed_one(bundle: Path, keys: dict[str, Path],
                                                                      policy: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """What render and the dossier show: after a removed reject, the remaining accept is unverified with the
    reason, so the role reads pending, never accepted."""
    sign(bundle, keys, "biz", "risk-business", "reject", "accuracy regressed", capsys=capsys)
    sign(bundle, keys, "biz", "risk-business", "accept-with-known-failures", "INC-42", "--supersede", capsys=capsys)
    drop_line(bundle, 2)
    gate = [load_public_key(keys["gate.pub"])]
    view = bundle_signoff(bundle, as_document({"items": [], "untested": {"items": []}}), gate,
                          load_policy(policy, gate))
    (role,) = [r for r in view["roles"] if r["role"] == "risk-business"]
    assert role["state"] == "pending"
    assert [(s["decision"], s["verified"], s["why_unverified"]) for s in role["signed"]] == [
        ("accept-with-known-failures", False, "the chain of sign-offs is broken: it is sign-off 1 in the file but "
         "was signed as sign-off 2: 1 sign-off line(s) before it were removed")]


def test_a_chain_whose_sequence_is_a_boolean_is_no_chain(bundle: Path, keys: dict[str, Path], policy: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A sign-off signed with ``chain.sequence: true`` (not a number: Python's ``True == 1``) is not counted as
    the first sign-off. Before the chain was read as a declared shape, ``true`` passed for sequence 1."""
    import base64
    import json

    from pytest_hetero.bundle.signing import envelope_bytes, envelope_for, load_private_key

    sign(bundle, keys, "biz", "risk-business", "accept-with-known-failures", "INC-42", capsys=capsys)
    lines = (bundle / ATT).read_bytes().splitlines(keepends=True)
    statement = json.loads(base64.b64decode(json.loads(lines[1])["payload"]))
    assert statement["predicate"]["chain"]["sequence"] == 1
    statement["predicate"]["chain"]["sequence"] = True
    payload = json.dumps(statement, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    (bundle / ATT).write_bytes(lines[0] + envelope_bytes(envelope_for(payload, load_private_key(keys["biz"]))))
    code, out = verify(bundle, keys, policy, capsys)
    assert code == 1
    assert [line.split("): ", 1)[1] for line in out if line.startswith("FAIL ")] == [
        "signoff_chain: it carries no chain {sequence, previous}: a removed sign-off before it could not be told, "
        "so it is not counted (sign again with this hetero)"]
