"""Issue 27, point 5: nothing unverified is shown as signed, and ``hetero verify`` covers everything signed.

Every test starts from a bundle made by the README's main command (``python3 -m pytest
matrices/example-cpu.matrix.yaml`` with the documented ``--hetero-sign-key``), never a hand-made one:
it has ``validation.intoto.jsonl``, which the documented auditors' recipe (``docs/verify-bundle.sh``)
used to refuse and ``hetero verify`` used not to read.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from readme_run import ROOT, cli, readme_bundle

from pytest_hetero.bundle.signing import keyid, load_public_key

SCRIPT = ROOT / "docs" / "verify-bundle.sh"


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(bundle, gate public key) of the README's main command with the documented signing option."""
    return readme_bundle(tmp_path_factory.mktemp("readme"))


@pytest.fixture
def run_bundle(readme_run: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the README run's bundle (each test may damage its own)."""
    bundle, pub = readme_run
    copy = tmp_path / bundle.name
    shutil.copytree(bundle, copy)
    return copy, pub


def _tools() -> None:
    missing = [t for t in ("jq", "openssl", "sha256sum") if shutil.which(t) is None]
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"missing tools for the documented verification: {missing}")
        pytest.skip(f"missing {missing}")


def recipe(bundle: Path, pub: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), str(bundle), str(pub)], capture_output=True, text=True, check=False,
                          timeout=120)


def signed_verdict(bundle: Path) -> str:
    line = (bundle / "attestation.intoto.jsonl").read_bytes().split(b"\n")[0]
    return str(json.loads(base64.b64decode(json.loads(line)["payload"]))["predicate"]["verdict"])


def test_the_readme_run_writes_a_validation_file_the_recipe_and_verify_accept(run_bundle: tuple[Path, Path]) -> None:
    """Before: ``FAIL files differ from manifest.json: > validation.intoto.jsonl`` on every genuine bundle."""
    _tools()
    bundle, pub = run_bundle
    lines = (bundle / "validation.intoto.jsonl").read_bytes().splitlines()
    assert len(lines) == 2  # one VSA per pool: cpu-host and gpu-nvidia
    done = recipe(bundle, pub)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["Signature Verified Successfully",
                                        f"OK {bundle}: run {bundle.name}, verdict {signed_verdict(bundle)}"]
    verified = cli("verify", bundle, "--key", pub)
    assert verified.returncode == 0, verified.stdout
    assert verified.stdout.splitlines()[0].startswith(f"OK {bundle}: run {bundle.name}, verdict ")


def _rewrite_line(path: Path, n: int, edit: dict[str, object]) -> None:
    """Line ``n`` (0-based) re-encoded with its predicate's ``edit`` applied and its signature kept."""
    lines = path.read_bytes().split(b"\n")
    env = json.loads(lines[n])
    statement = json.loads(base64.b64decode(env["payload"]))
    statement["predicate"].update(edit)
    env["payload"] = base64.b64encode(json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()).decode()
    lines[n] = json.dumps(env, sort_keys=True, separators=(",", ":")).encode()
    path.write_bytes(b"\n".join(lines))


def _forge(path: Path) -> None:  # the failed GPU pool's VSA made to say it passed at business level
    _rewrite_line(path, 1, {"verificationResult": "PASSED",
                            "verifiedLevels": ["PYTEST_HETERO_BATCH_INFERENCE_BUSINESS"]})


def _flip(path: Path) -> None:  # one byte of the signature
    data = bytearray(path.read_bytes())
    at = data.index(b'"sig":"') + 9
    data[at] = ord("A") if data[at] != ord("A") else ord("B")
    path.write_bytes(bytes(data))


def _delete(path: Path) -> None:
    path.write_bytes(path.read_bytes().split(b"\n")[0] + b"\n")


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-40])


def _remove(path: Path) -> None:
    path.unlink()


@pytest.mark.parametrize(("damage", "verify_says", "recipe_says"), [
    (_forge, "FAIL validation.intoto.jsonl: validation: line 2: no valid signature by a trusted key (the gate's; "
             "forged, altered or unsigned)", "the signature does not verify with"),
    (_flip, "FAIL validation.intoto.jsonl: validation: line 1: no valid signature by a trusted key (the gate's; "
            "forged, altered or unsigned)", "the signature does not verify with"),
    (_delete, "FAIL validation.intoto.jsonl: validation: 1 pool(s) in the file, the signed statement 2: missing "
              "hetero-pool:example-cpu/gpu-nvidia", "has 1 line(s), the signed statement 2 pool(s)"),
    (_truncate, "FAIL validation.intoto.jsonl: validation: edited: the last line has no newline, as every line is "
                "written: the file was truncated or edited", "the last line has no newline (truncated or edited)"),
    (_remove, "FAIL validation.intoto.jsonl: validation: missing: the signed statement has 2 pool(s) but the bundle "
              "has no validation.intoto.jsonl", "is not a regular file (the statement signs 2 pool(s))"),
], ids=["forged", "flipped", "deleted-line", "truncated", "removed"])
def test_verify_and_the_recipe_catch_a_damaged_validation_file(run_bundle: tuple[Path, Path], damage: object,
                                                               verify_says: str, recipe_says: str) -> None:
    """Before: ``hetero verify`` said OK for each (only ``catalog`` read the file)."""
    _tools()
    bundle, pub = run_bundle
    damage(bundle / "validation.intoto.jsonl")  # type: ignore[operator]
    verified = cli("verify", bundle, "--key", pub)
    assert verified.returncode == 1
    assert verified.stdout.splitlines() == [verify_says, f"verification FAILED: 1 problem(s) in {bundle}"]
    done = recipe(bundle, pub)
    assert done.returncode == 1 and recipe_says in done.stdout.splitlines()[-1], done.stdout


def _edit_to_pass(bundle: Path) -> None:
    evidence = json.loads((bundle / "evidence.json").read_text())
    evidence["summary"]["verdict"] = "pass"
    for item in evidence["items"]:
        if item["status"] == "failed":
            item["status"], item["failure"] = "passed", None
    (bundle / "evidence.json").write_text(json.dumps(evidence))


def _text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<style>.*?</style>", "", page, flags=re.S)))
                    .split())


def test_an_edited_bundle_rendered_without_a_key_is_never_shown_as_proven(run_bundle: tuple[Path, Path],
                                                                          tmp_path: Path) -> None:
    """Before: the dossier said "Verdict passed" and "Bundle signed by key …" (zh 运行签名：有) for evidence.json
    edited from fail to pass."""
    bundle, pub = run_bundle
    kid = keyid(load_public_key(pub))
    _edit_to_pass(bundle)
    out = {}
    for fmt, lang in (("dossier", "en"), ("dossier", "zh"), ("html", None), ("md", None), ("junit", None),
                      ("ctrf", None)):
        name = f"{fmt}-{lang or 'en'}"
        done = cli("render", bundle, "--format", fmt, *(["--lang", lang] if lang else []), "--out", tmp_path / name)
        assert done.returncode == 0, done.stderr
        out[name] = (tmp_path / name).read_text(encoding="utf-8")
    en, zh = _text(out["dossier-en"]), _text(out["dossier-zh"])
    why = "no trusted key given (--key GATE.pub): the signature was not checked"
    assert "Verdict passed" not in en and f"Bundle signed by key {kid[:16]}." not in en
    assert "Verdict NOT VERIFIED — the unproven evidence says: passed — " in en
    assert "scheduling not proven on this backend (local); " in en and "; bundle signature not verified " in en
    assert f"NOT verified: the bundle carries a signature by key {kid}, not checked with a trusted key ({why})." in en
    assert f"Bundle carries a signature by key {kid[:16]}, NOT verified: {why}." in en
    assert "run signature: present, NOT verified;" in en
    assert "运行签名：有；" not in zh and "运行签名：有，未验证；" in zh
    assert "未经验证——未经证实的证据称：通过" in zh and f"未验证：证据包带有密钥 {kid} 的签名" in zh
    page = _text(out["html-en"])
    assert "NOT VERIFIED an unproven claim: PASS" in page
    assert f"Bundle signed by key {kid} , NOT verified : {why}" in page
    assert out["md-en"].splitlines()[0] == "## pytest-hetero: PASS (**NOT VERIFIED**: an unproven claim)"
    assert '<property name="verification" value="unverified" />' in out["junit-en"]
    assert json.loads(out["ctrf-en"])["results"]["extra"] == {
        "verdict": "pass", "run_id": bundle.name, "verification": "unverified", "verified_by": None}
    refused = cli("render", bundle, "--format", "dossier", "--key", pub)  # with the key the edit is caught
    assert refused.returncode == 2 and refused.stdout == ""
    assert "bundle does not verify: evidence.json: modified: " in refused.stderr


def test_every_rendering_with_the_key_says_which_key_verified_it(run_bundle: tuple[Path, Path],
                                                                 tmp_path: Path) -> None:
    bundle, pub = run_bundle
    kid = keyid(load_public_key(pub))
    verdict = {"fail": "failed", "pass": "passed", "incomplete": "incomplete"}[signed_verdict(bundle)]
    pages = {}
    for fmt in ("dossier", "html", "md", "junit", "ctrf"):
        done = cli("render", bundle, "--format", fmt, "--key", pub, "--out", tmp_path / fmt)
        assert done.returncode == 0, done.stderr
        pages[fmt] = (tmp_path / fmt).read_text(encoding="utf-8")
    en = _text(pages["dossier"])
    assert f"Verdict {verdict} — " in en and "NOT VERIFIED" not in en
    assert f"Verified: the run's signature checks with trusted key {kid}." in en
    assert f"Bundle signed by key {kid[:16]}, verified with that trusted key." in en
    assert f"Bundle signed by key {kid} , verified with that trusted key" in _text(pages["html"])
    assert f"bundle **verified**, signed by `{kid[:16]}`" in pages["md"]
    assert f'<property name="verified_by" value="{kid}" />' in pages["junit"]
    assert json.loads(pages["ctrf"])["results"]["extra"]["verified_by"] == kid
