"""Property test of the bundle verifier: any corruption of any file of a real signed bundle yields
a Verification with named problems — never an exception, and never a pass."""

from __future__ import annotations

import shutil
from pathlib import Path

from bundle_samples import make_bundle, sample_evidence
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_hetero.bundle.signing import generate_keypair, load_public_key
from pytest_hetero.bundle.verify import verify_bundle


def _pristine(root: Path) -> tuple[Path, Path]:
    golden = root / "golden"
    if not golden.exists():
        root.mkdir(parents=True, exist_ok=True)
        generate_keypair(root / "run.key", root / "run.pub")
        make_bundle(golden, sample_evidence(), root / "run.key")
    return golden, root / "run.pub"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_corruption_is_named_never_raised_never_passed(tmp_path_factory: object, data: st.DataObject) -> None:
    root = Path(str(tmp_path_factory.getbasetemp())) / "fuzz-verify"  # type: ignore[attr-defined]
    golden, pub = _pristine(root)
    work = root / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(golden, work)
    files = sorted(p for p in work.rglob("*") if p.is_file())
    target = data.draw(st.sampled_from(files))
    raw = target.read_bytes()
    action = data.draw(st.sampled_from(["truncate", "flip", "insert", "delete", "replace"]))
    if action == "delete":
        target.unlink()
    elif action == "replace":
        target.write_bytes(data.draw(st.binary(max_size=200)))
    else:
        at = data.draw(st.integers(min_value=0, max_value=max(len(raw) - 1, 0)))
        if action == "truncate":
            target.write_bytes(raw[:at])
        elif action == "flip" and raw:
            target.write_bytes(raw[:at] + bytes([raw[at] ^ 0x01]) + raw[at + 1:])
        else:
            target.write_bytes(raw[:at] + data.draw(st.binary(min_size=1, max_size=20)) + raw[at:])
    if target.exists() and target.read_bytes() == raw:
        return  # no change (e.g. replace with identical bytes)
    result = verify_bundle(work, [load_public_key(pub)])
    assert result.problems, f"{action} of {target.relative_to(work)} went unnoticed"
    assert all(p.kind and p.detail for p in result.problems)
