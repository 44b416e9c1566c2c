"""``hetero explain-pending`` and ``hetero probe --from`` are views of ``hetero explain``'s findings (issue 31):
for every real fixture the three commands name the same codes, owners and health."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_hetero.cli import build_parser
from pytest_hetero.explain import explain_bytes
from pytest_hetero.pending.model import CODES

REAL = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real"
FILES = sorted(p for p in REAL.glob("*") if p.is_file() and p.name != "FACTS.md") if REAL.is_dir() else []


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    args = build_parser().parse_args(argv)
    code = args.func(args)
    return code, capsys.readouterr().out


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_explain_pending_names_what_explain_names(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = explain_bytes(path.read_bytes())
    code, out = _run(["explain-pending", "--from", str(path)], capsys)
    rows = json.loads(out)
    expected = [(f.code, "undetermined" if f.undetermined else f.owner) for f in report.findings if f.code in CODES]
    assert [(r["code"], r["owner"]) for r in rows if r["code"] != "unknown"] == expected
    assert code == (0 if expected else 1)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
@pytest.mark.parametrize("vendor", ["nvidia", "ascend"])
def test_probe_from_is_unhealthy_when_explain_finds_a_vendor_problem(
        vendor: str, path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_hetero.cli.probe import VENDOR_KINDS

    code, out = _run(["probe", vendor, "--from", str(path), "--no-raw"], capsys)
    if code == 2:
        return  # not this vendor's format: probe refuses, explain reads it as another kind
    report = explain_bytes(path.read_bytes())
    mine = [(f.code, f.owner) for f in report.findings if f.unhealthy and f.kind.startswith(VENDOR_KINDS[vendor])]
    data = json.loads(out)
    assert [(f["code"], f["owner"]) for f in data["findings"]] == mine
    if mine:
        assert (code, data["healthy"]) == (1, False)
    assert data["healthy"] == (code == 0)


def test_explain_pending_is_not_a_reader_of_its_own() -> None:
    source = (Path(__file__).resolve().parents[1] / "pytest_hetero" / "cli" / "pending.py").read_text()
    assert "pending.normalise" not in source and "explain_bytes" in source
