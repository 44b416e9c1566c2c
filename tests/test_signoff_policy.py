"""Issue 14.10: a team's sign-off is bound to the team's keys by a trust policy, states a decision and its text,
cannot accept failures silently, and every rendering shows it as verified only when it is."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from bundle_samples import make_bundle, policy_text, sample_evidence
from test_bundle_verify import hetero

from pytest_hetero.bundle.attestation import SIGNOFF_PREDICATE_TYPE, add_signoff, read_attestations
from pytest_hetero.bundle.policy import PolicyError, load_policy
from pytest_hetero.bundle.signing import (
    PAYLOAD_TYPE,
    STATEMENT_TYPE,
    envelope_bytes,
    envelope_for,
    generate_keypair,
    keyid,
    load_private_key,
    load_public_key,
)
from pytest_hetero.bundle.signoff import bundle_signoff
from pytest_hetero.bundle.verify import verify_bundle

OWNERS = {"discovery": "infra-team", "business": "risk-business"}


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name in ("gate", "biz", "algo", "infra"):
        generate_keypair(tmp_path / f"{name}.key", tmp_path / f"{name}.pub")
        out[name], out[name + ".pub"] = tmp_path / f"{name}.key", tmp_path / f"{name}.pub"
    return out


@pytest.fixture
def bundle(tmp_path: Path, keys: dict[str, Path]) -> Path:
    """A signed run whose matrix names its teams: discovery → infra-team, business → risk-business (1 failing
    discovery item, 1 blocked business item)."""
    return make_bundle(tmp_path / "b", sample_evidence(), keys["gate"], OWNERS)


@pytest.fixture
def policy(tmp_path: Path, keys: dict[str, Path]) -> Path:
    path = tmp_path / "trust.yaml"
    path.write_text(policy_text({"risk-business": [(keys["biz.pub"], ["Ana Ruiz", "Bo Chen"])],
                                 "algorithm": [(keys["algo.pub"], ["Al Gorithm"])],
                                 "infra-team": [(keys["infra.pub"], ["Ivo Infra"])]}, name="acme"))
    assert hetero("sign-policy", str(path), "--key", str(keys["gate"])) == 0  # signed by the gate key
    return path


def _verify(bundle: Path, keys: dict[str, Path], policy: Path | None, *roles: str) -> list[str]:
    loaded = load_policy(policy, [load_public_key(keys["gate.pub"])]) if policy else None
    return [str(p) for p in verify_bundle(bundle, [load_public_key(keys["gate.pub"])], roles, policy=loaded).problems]


def test_a_role_is_signed_only_by_its_keys(bundle: Path, keys: dict[str, Path], policy: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: the algorithm team's key signs as risk-business. Before: `verify --key gate.pub --key
    algo.pub --require-role risk-business` printed OK. Now a role is checked only against a policy, and the policy
    gives risk-business other keys."""
    assert hetero("sign", str(bundle), "--key", str(keys["algo"]), "--role", "risk-business", "--decision",
                  "accept-with-known-failures", "--text", "gpu-nvidia blocked: INC-42") == 0
    capsys.readouterr()
    assert hetero("verify", str(bundle), "--key", str(keys["gate.pub"]), "--key", str(keys["algo.pub"]),
                  "--require-role", "risk-business") == 2
    assert capsys.readouterr().err.startswith("hetero verify: --require-role needs --policy: a sign-off is bound to "
                                              "its role's keys only by a trust policy")
    assert hetero("verify", str(bundle), "--key", str(keys["gate.pub"]), "--policy", str(policy),
                  "--require-role", "risk-business") == 1
    assert capsys.readouterr().out.splitlines()[:2] == [
        f"FAIL sign-off line 2 (role risk-business, keyid {keyid(load_public_key(keys['algo.pub']))[:16]}…): role: "
        "signed with the key of algorithm (Al Gorithm), not of 'risk-business'",
        "FAIL role risk-business: role: required sign-off is missing (pending)"]


def test_the_gate_key_cannot_sign_as_a_team_unless_the_policy_says_so(bundle: Path, keys: dict[str, Path],
                                                                      policy: Path, tmp_path: Path) -> None:
    add_signoff(bundle, load_private_key(keys["gate"]), "infra-team", "accept-with-known-failures",
                "no NVIDIA driver on vm: known")
    assert _verify(bundle, keys, policy, "infra-team") == [
        f"sign-off line 2 (role infra-team, keyid {keyid(load_public_key(keys['gate.pub']))[:16]}…): role: the gate "
        "key cannot sign as 'infra-team': the policy does not allow it",
        "role infra-team: role: required sign-off is missing (pending)"]
    sloppy = tmp_path / "sloppy.yaml"
    sloppy.write_text(policy_text({"infra-team": [(keys["gate.pub"], ["CI"])]}))
    digest = hashlib.sha256(sloppy.read_bytes()).hexdigest()
    with pytest.raises(PolicyError) as info:
        load_policy(sloppy, [load_public_key(keys["gate.pub"])], digest)
    assert info.value.message.startswith("lists the gate key ") and info.value.location.field == "roles.infra-team.keys"
    assert info.value.hint == "set allow_gate_key: true for this role if it must"
    allowed = tmp_path / "allowed.yaml"
    allowed.write_text(policy_text({"infra-team": [(keys["gate.pub"], ["CI gate"])]}, allow_gate_key=("infra-team",)))
    loaded = load_policy(allowed, [load_public_key(keys["gate.pub"])], hashlib.sha256(allowed.read_bytes()).hexdigest())
    result = verify_bundle(bundle, [load_public_key(keys["gate.pub"])], ("infra-team",), policy=loaded)
    assert result.ok and [(s.role, s.names, s.verified) for s in result.signoffs] == [("infra-team", ["CI gate"], True)]


def test_the_policy_is_trusted_only_signed_by_the_gate_or_pinned(policy: Path, keys: dict[str, Path]) -> None:
    gate = [load_public_key(keys["gate.pub"])]
    assert load_policy(policy, gate).trusted_by == f"signed by gate key {keyid(gate[0])[:16]}…"
    with pytest.raises(PolicyError, match="the policy's signature is not by a trusted gate key"):
        load_policy(policy, [load_public_key(keys["biz.pub"])])
    Path(str(policy) + ".dsse.json").unlink()
    with pytest.raises(PolicyError) as info:
        load_policy(policy, gate)
    digest = hashlib.sha256(policy.read_bytes()).hexdigest()
    assert info.value.message == "the trust policy is neither signed nor pinned, so it cannot be trusted"
    assert info.value.hint == (f"sign it with: hetero sign-policy {policy} --key GATE.key, or pin it with "
                               f"--policy-sha256 {digest}")
    assert load_policy(policy, [], f"sha256:{digest}").trusted_by == f"pinned by sha256 {digest[:16]}…"
    assert hetero("sign-policy", str(policy), "--key", str(keys["gate"])) == 0
    policy.write_text(policy.read_text().replace("Bo Chen", "Mallory"))  # edited after the gate signed it
    with pytest.raises(PolicyError, match="the policy differs from the one its signature covers"):
        load_policy(policy, gate)
    with pytest.raises(PolicyError, match="is not the pinned"):
        load_policy(policy, gate, digest)


def test_malformed_policies_name_the_field(tmp_path: Path, keys: dict[str, Path]) -> None:
    cases = {
        "kind: Nope\n": ("kind", "not a trust policy (expected apiVersion: pytest-hetero/v1, kind: TrustPolicy)"),
        "apiVersion: pytest-hetero/v1\nkind: TrustPolicy\nroles: {b: {keys: [{names: [A], public_key: x}]}}\n":
            ("roles.b.keys[0].public_key", "not an Ed25519 public key in PEM"),
        "apiVersion: pytest-hetero/v1\nkind: TrustPolicy\nroles: {b: {keys: [{public_key: x}]}}\n":
            ("roles.b.keys[0].names", "names must list the people who hold this key"),
        "apiVersion: pytest-hetero/v1\nkind: TrustPolicy\nrole: {}\n": ("role", "unknown key 'role'"),
    }
    for n, (text, (field, message)) in enumerate(cases.items()):
        path = tmp_path / f"p{n}.yaml"
        path.write_text(text)
        with pytest.raises(PolicyError) as info:
            load_policy(path, [], hashlib.sha256(text.encode()).hexdigest())
        assert (info.value.location.field, info.value.message) == (field, message)


def test_accepting_failures_must_say_so_also_when_signed_by_other_tools(bundle: Path, keys: dict[str, Path],
                                                                         policy: Path) -> None:
    """hetero sign refuses a plain accept over the failing discovery item; a sign-off written by another tool with
    the right key that does it anyway is refused by verify, by name."""
    with pytest.raises(Exception, match=r"sign-off refused: 1 item\(s\) failed, errored or were blocked in the "
                                        r"layers signed \(discovery: 1\)"):
        add_signoff(bundle, load_private_key(keys["infra"]), "infra-team", "accept")
    run = read_attestations(bundle, PAYLOAD_TYPE)[0]
    statement = {"_type": STATEMENT_TYPE, "predicateType": SIGNOFF_PREDICATE_TYPE,
                 "subject": [{"name": "statement.intoto.json", "digest": {"sha256": hashlib.sha256(run.payload).hexdigest()}}],
                 "predicate": {"role": "infra-team", "layers": ["discovery"], "decision": "accept", "conditions": None,
                               "signed_at": "2026-11-29T11:00:00Z", "run": {}, "failing": {}}}
    payload = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
    with open(bundle / "attestation.intoto.jsonl", "ab") as fh:
        fh.write(envelope_bytes(envelope_for(payload, load_private_key(keys["infra"]))))
    assert _verify(bundle, keys, policy) == [
        f"sign-off line 2 (role infra-team, keyid {keyid(load_public_key(keys['infra.pub']))[:16]}…): signoff: 1 "
        "item(s) failed, errored or were blocked in the layers signed (discovery: 1): say accept-with-known-failures "
        "(naming them in --text) or reject"]
    assert _verify(bundle, keys, None)[0].endswith("say accept-with-known-failures (naming them in --text) or reject")


def test_reject_and_known_failures_are_states_with_names_and_text(bundle: Path, keys: dict[str, Path],
                                                                  policy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    add_signoff(bundle, load_private_key(keys["infra"]), "infra-team", "accept-with-known-failures",
                "gpu-nvidia has no driver until INC-42 is closed")
    add_signoff(bundle, load_private_key(keys["biz"]), "risk-business", "reject", "no GPU business result")
    assert _verify(bundle, keys, policy, "infra-team", "risk-business") == [
        "role risk-business: role: rejected by Ana Ruiz, Bo Chen: no GPU business result"]
    assert hetero("verify", str(bundle), "--key", str(keys["gate.pub"]), "--policy", str(policy),
                  "--require-role", "infra-team") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("OK ") and "run run-1, verdict FAIL, finished 2026-11-29T10:05:00.000000Z" in lines[0]
    assert lines[1] == (f"sign-offs checked against trust policy acme (signed by gate key "
                        f"{keyid(load_public_key(keys['gate.pub']))[:16]}…):")
    assert lines[2:4] == ["  infra-team: accepted_with_known_failures",
                          lines[3]] and lines[3].startswith("    accept-with-known-failures: gpu-nvidia has no driver "
                                                            "until INC-42 is closed, by Ivo Infra (key ")
    assert lines[4] == "  risk-business: rejected"


def test_the_signoff_view_contract(bundle: Path, keys: dict[str, Path], policy: Path) -> None:
    """The data other renderers (the dossier) read: field names and meanings are fixed."""
    add_signoff(bundle, load_private_key(keys["biz"]), "risk-business", "accept-with-known-failures",
                "GPU business blocked by INC-42")
    add_signoff(bundle, load_private_key(keys["algo"]), "infra-team", "reject", "forged")
    evidence = json.loads((bundle / "evidence.json").read_text())
    gate = [load_public_key(keys["gate.pub"])]
    view = bundle_signoff(bundle, evidence, gate, load_policy(policy, gate))
    assert (view["source"], view["run_verified"], view["run_signer"]) == ("attestations", True, keyid(gate[0]))
    policy_view = view["policy"]
    assert policy_view is not None
    assert policy_view["name"] == "acme" and policy_view["trusted_by"].startswith("signed by gate key")
    roles = {r["role"]: r for r in view["roles"]}
    assert sorted(roles) == ["algorithm", "infra-team", "platform", "risk-business"]
    business = roles["risk-business"]
    assert set(business) == {"role", "layers", "owner", "signed", "state"}
    assert (business["layers"], business["owner"], business["state"]) == (["business"], "risk-business",
                                                                         "accepted_with_known_failures")
    [signed] = business["signed"]
    assert set(signed) >= {"keyid", "names", "decision", "conditions", "signed_at", "verified", "why_unverified"}
    assert (signed["names"], signed["decision"], signed["conditions"], signed["verified"], signed["why_unverified"]) \
        == (["Ana Ruiz", "Bo Chen"], "accept-with-known-failures", "GPU business blocked by INC-42", True, None)
    [forged] = roles["infra-team"]["signed"]
    assert (forged["verified"], forged["names"], roles["infra-team"]["state"]) == (False, [], "pending")
    assert forged["why_unverified"] == "signed with the key of algorithm (Al Gorithm), not of 'infra-team'"
    unverified = bundle_signoff(bundle, evidence)  # no key, no policy: nothing is verified, nobody named
    assert unverified["run_verified"] is False
    assert all(not s["verified"] and not s["names"] for r in unverified["roles"] for s in r["signed"])
    assert {r["state"] for r in unverified["roles"]} == {"pending"}


def test_a_hostile_policy_file_is_refused_not_hung(tmp_path: Path, keys: dict[str, Path], policy: Path) -> None:
    """The policy may sit beside a hostile bundle: a FIFO in place of the policy or of its signature is a named
    refusal, not a hang."""
    import os

    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(PolicyError, match="cannot read the trust policy: unsafe: a FIFO, not a regular file"):
        load_policy(fifo, [load_public_key(keys["gate.pub"])])
    signature = Path(str(policy) + ".dsse.json")
    signature.unlink()
    os.mkfifo(signature)
    with pytest.raises(PolicyError, match="the policy's signature file is unsafe: a FIFO, not a regular file"):
        load_policy(policy, [load_public_key(keys["gate.pub"])])


def test_policies_with_odd_yaml_keys_or_metadata_are_refused_cleanly(tmp_path: Path) -> None:
    """YAML keys may be numbers beside strings, and metadata may be anything: each is a PolicyError naming the
    field. Before, unknown keys of mixed types raised TypeError (they were sorted together) and a metadata that
    is not a mapping AttributeError; metadata with a non-string key was read (now refused, as JSON could not
    hold it)."""
    head = "apiVersion: pytest-hetero/v1\nkind: TrustPolicy\n"
    cases = {
        head + "1: x\nfoo: y\n": ("1", "unknown key 1"),
        head + "roles: {b: {keys: [{2: a, x: 1, names: [A]}]}}\n": ("roles.b.keys[0]", None),
        head + "metadata: acme\nroles: {}\n": ("metadata", None),
        head + "metadata: [acme]\nroles: {}\n": ("metadata", None),
        head + "metadata: {name: acme, 1: x}\nroles: {}\n": ("metadata", None),
        head + "roles: {b: {keys: [], allow_gate_key: 1}}\n": ("roles.b.allow_gate_key", "must be true or false"),
    }
    for n, (text, (field, message)) in enumerate(cases.items()):
        path = tmp_path / f"p{n}.yaml"
        path.write_text(text)
        with pytest.raises(PolicyError) as info:
            load_policy(path, [], hashlib.sha256(text.encode()).hexdigest())
        assert info.value.location.field == field
        if message is not None:
            assert info.value.message == message
        elif field == "metadata":
            assert info.value.message.startswith("metadata must be a mapping with string keys, e.g. {name: acme-gate}")
        else:
            assert info.value.hint == "unknown key(s): [2, 'x']"
