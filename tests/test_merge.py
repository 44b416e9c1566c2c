"""``hetero merge``: shard bundles of real runs → one bundle, with digest, overlap, coverage and signature checks."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from support import matrix_text

from pytest_hetero.bundle.finish import finish_bundle
from pytest_hetero.bundle.signing import generate_keypair, load_public_key
from pytest_hetero.bundle.verify import verify_bundle
from pytest_hetero.cli import main
from pytest_hetero.evidence.document import as_document

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def three_resources(description: str = "") -> str:
    doc = json.loads(matrix_text(name="wide", resources=[
        {"name": f"cpu-{c}", "type": "cpu", "requests": {"cpu": 1}} for c in "abc"]))
    doc["spec"]["images"] = [{"name": "py-a", "reference": "python:current"},
                             {"name": "py-b", "reference": "python:current"}]
    if description:
        doc["metadata"]["description"] = description
    return json.dumps(doc, indent=1)


def run_shard(pytester: pytest.Pytester, spec: str | None, *extra: str) -> Path:
    """Run ``w.matrix.yaml`` (quick profile) as shard ``spec``; move its bundle to ``<spec>/``, return it."""
    args = ["w.matrix.yaml", "-p", "no:cacheprovider", "--hetero-profile", "quick", *extra]
    if spec:
        args += ["--hetero-shard", spec]
    pytester.runpytest(*args)
    (bundle,) = list((pytester.path / "reports").iterdir())
    dest = pytester.path / "shards" / (spec or "all").replace("/", "of")
    dest.parent.mkdir(exist_ok=True)
    return Path(bundle.rename(dest))


def evidence(path: Path) -> dict[str, Any]:
    return dict(json.loads((path / "evidence.json").read_text()))


def test_merge_two_unsigned_shards_covers_whole_matrix(pytester: pytest.Pytester,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makefile(".matrix.yaml", w=three_resources())
    one, two = run_shard(pytester, "1/2"), run_shard(pytester, "2/2")
    out = pytester.path / "merged"
    assert main(["merge", str(one), str(two), "-o", str(out)]) == 2
    assert "bundle is not signed" in capsys.readouterr().err
    assert main(["merge", str(one), str(two), "-o", str(out), "--allow-unsigned"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (  # the README's merge wrote an unsigned bundle silently
        f"merged bundle {out} is UNSIGNED (the shards' signatures do not carry over; sign the merge with "
        "--sign-key KEY or --sign-command CMD --sign-public PEM)")
    merged = evidence(out)
    parts = [evidence(one), evidence(two)]
    assert sorted(i["nodeid"] for i in merged["items"]) == sorted(i["nodeid"] for p in parts for i in p["items"])
    assert len(merged["items"]) == 3 * 3  # discovery, scheduling, first image's startup per resource (quick)
    untested = merged["untested"]["items"]
    assert {u["reason"] for u in untested if u["status"] == "deselected"} == {"deselected (profile quick)"}
    assert len([u for u in untested if u["status"] == "deselected"]) == 3 * 8 - 9
    assert merged["merge"]["bundles"][0]["verification"] == "unsigned"
    assert {b["shard"] for b in merged["merge"]["bundles"]} == {"1/2", "2/2"}
    assert merged["run"]["merged_from"] == [parts[0]["run"]["id"], parts[1]["run"]["id"]]
    assert (out / "summary.md").is_file() and (out / "manifest.json").is_file()


def test_missing_shard_overlap_and_foreign_digest_are_refused(pytester: pytest.Pytester,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makefile(".matrix.yaml", w=three_resources())
    one, everything = run_shard(pytester, "1/2"), run_shard(pytester, None)
    out = pytester.path / "merged"
    assert main(["merge", str(one), "-o", str(out), "--allow-unsigned"]) == 2
    err = capsys.readouterr().err
    assert "planned item(s) were run by no bundle" in err and "add the bundle of shard 2/2" in err
    assert main(["merge", str(one), str(everything), "-o", str(out), "--allow-unsigned"]) == 2
    assert "shards overlap" in capsys.readouterr().err
    pytester.makefile(".matrix.yaml", w=three_resources("edited after shard 1"))
    two = run_shard(pytester, "2/2")
    assert main(["merge", str(one), str(two), "-o", str(out), "--allow-unsigned"]) == 2
    assert "was run from matrix" in capsys.readouterr().err
    assert not out.exists()


def test_signed_shards_are_verified_and_the_merge_is_re_signed(pytester: pytest.Pytester,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    key, pub = pytester.path / "run.pem", pytester.path / "run.pub"
    generate_keypair(key, pub)
    pytester.makefile(".matrix.yaml", w=three_resources())
    one = run_shard(pytester, "1/2", "--hetero-sign-key", str(key))
    two = run_shard(pytester, "2/2", "--hetero-sign-key", str(key))
    out = pytester.path / "merged"
    assert main(["merge", str(one), str(two), "-o", str(out), "--key", str(pub), "--sign-key", str(key)]) == 0
    assert "UNSIGNED" not in capsys.readouterr().out
    merged = evidence(out)
    assert [b["verification"] for b in merged["merge"]["bundles"]] == ["verified", "verified"]
    assert verify_bundle(out, [load_public_key(pub)]).ok
    kept = (two / "evidence.json").read_bytes()
    (two / "evidence.json").write_text((two / "evidence.json").read_text() + " ")
    assert main(["merge", str(one), str(two), "-o", str(pytester.path / "m2"), "--key", str(pub)]) == 2
    assert "bundle does not verify" in capsys.readouterr().err
    # merge reads only the evidence to verify a shard, so each artifact is checked against the signed manifest
    # as it is copied: a tampered one stops the merge, an unlisted one is not carried into the signed merge
    (two / "evidence.json").write_bytes(kept)
    artifact = two / "artifacts" / "cpu-b" / "stdout.txt"
    artifact.parent.mkdir(parents=True)
    artifact.write_text("captured output\n")
    shard = evidence(two)  # recorded in the shard's evidence as its run would have (the gate signs what it wrote)
    holder = shard["items"][0]
    holder.setdefault("artifacts", []).append({"name": "stdout", "path": "artifacts/cpu-b/stdout.txt", "size": 16,
                                               "sha256": hashlib.sha256(b"captured output\n").hexdigest()})
    (two / "evidence.json").write_text(json.dumps(shard, indent=1))
    statement = json.loads((two / "statement.intoto.json").read_text())  # signed again, as its run would have
    finish_bundle(as_document(shard), two, key, statement["predicate"]["owners"],
                  [(s["name"], s["digest"]["sha256"]) for s in statement["subject"][1:]])
    assert verify_bundle(two, [load_public_key(pub)]).ok
    original = artifact.read_bytes()
    artifact.write_bytes(b"forged")
    assert main(["merge", str(one), str(two), "-o", str(pytester.path / "m3"), "--key", str(pub)]) == 2
    assert "is not the one the shard's signed manifest lists" in capsys.readouterr().err
    artifact.write_bytes(original)
    (artifact.parent / "planted.txt").write_text("x")
    assert main(["merge", str(one), str(two), "-o", str(pytester.path / "m4"), "--key", str(pub),
                 "--sign-key", str(key)]) == 0
    assert not list((pytester.path / "m4").rglob("planted.txt"))
    assert (pytester.path / "m4" / "artifacts" / "cpu-b" / "stdout.txt").read_bytes() == original
    assert verify_bundle(pytester.path / "m4", [load_public_key(pub)]).ok


def test_more_shards_than_resources_exit_0_and_merge(pytester: pytest.Pytester) -> None:
    """Three resources in five shards (the CI example's 4 shards of a 2-resource matrix): the empty
    shards pass, their bundles still name the matrix and its deselections, and the merge equals a
    single run."""
    pytester.makefile(".matrix.yaml", w=three_resources())
    shards = []
    for k in range(1, 6):
        result = pytester.runpytest("w.matrix.yaml", "-p", "no:cacheprovider", "--hetero-profile", "quick",
                                    "--hetero-shard", f"{k}/5")
        (bundle,) = list((pytester.path / "reports").iterdir())
        shards.append(Path(bundle.rename(pytester.path / f"shard{k}")))
        ev = evidence(shards[-1])
        assert [m["name"] for m in ev["matrices"]] == ["wide"]
        if not ev["items"]:
            assert result.ret == pytest.ExitCode.OK
            assert ev["run"]["exit_status"] == 0
            assert len(ev["untested"]["items"]) == 3 * 8
    assert sum(1 for s in shards if not evidence(s)["items"]) == 2
    whole = run_shard(pytester, None)
    out = pytester.path / "merged"
    assert main(["merge", *map(str, shards), "-o", str(out), "--allow-unsigned"]) == 0
    merged, single = evidence(out), evidence(whole)
    assert {i["nodeid"]: i["status"] for i in merged["items"]} == \
        {i["nodeid"]: i["status"] for i in single["items"]}
    assert merged["summary"] == single["summary"]
    assert sorted((u["nodeid"], u["reason"]) for u in merged["untested"]["items"]) == \
        sorted((u["nodeid"], u["reason"]) for u in single["untested"]["items"])
