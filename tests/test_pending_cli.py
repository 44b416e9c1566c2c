"""``hetero explain-pending``: JSON and text output, exit codes 0/1/2."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from pytest_hetero.cli import build_parser

REAL = Path(__file__).resolve().parents[2] / "shared/fixtures/real"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    args = build_parser().parse_args(["explain-pending", *argv])
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_json_output_for_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "event.txt"
    src.write_text("0/4 nodes are available: 4 Insufficient nvidia.com/gpu.\n")
    code, out, err = _run(["--from", str(src)], capsys)
    assert (code, err) == (0, "")
    (reason,) = json.loads(out)
    assert (reason["code"], reason["nodes"], reason["resource"], reason["owner"]) == (
        "insufficient_resource",
        4,
        "nvidia.com/gpu",
        "infrastructure",
    )


def test_text_output_from_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    data = b"couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor x, 2 more needed"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, out, _ = _run(["--text"], capsys)
    assert code == 0
    assert out == (
        "kueue: queue_quota_insufficient cpu in flavor x, 2 more needed [business] -- "
        "insufficient unused quota for cpu in flavor x, 2 more needed\n"
    )


def test_nothing_explained_exits_1_and_prints_the_fragment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "odd.txt"
    src.write_text("the scheduler is on holiday\n")
    code, out, _ = _run(["--from", str(src)], capsys)
    assert code == 1
    assert [(r["code"], r["message"]) for r in json.loads(out)] == [
        ("unknown", "the scheduler is on holiday")
    ]
    code, out, _ = _run(["--from", str(src), "--text"], capsys)
    assert code == 1 and "the scheduler is on holiday" in out


def test_empty_input_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "empty.txt"
    src.write_text("")
    assert _run(["--from", str(src), "--text"], capsys)[:2] == (1, "no reason found\n")


def test_missing_and_unreadable_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.txt"
    code, out, err = _run(["--from", str(missing)], capsys)
    assert (code, out) == (2, "")
    assert str(missing) in err and "cannot read" in err
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x7fELF\x00\xff\xfe")
    code, _, err = _run(["--from", str(binary)], capsys)
    assert code == 2 and str(binary) in err
    code, _, err = _run(["--from", str(tmp_path)], capsys)
    assert code == 2 and str(tmp_path) in err


@pytest.mark.skipif(not REAL.is_dir(), reason="real fixtures not present")
def test_real_hami_capture_end_to_end(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        ["--from", str(REAL / "event-hami-failedscheduling-cardinsufficientmemory.txt")], capsys
    )
    assert code == 0
    assert [r["code"] for r in json.loads(out)] == [
        "device_unfit",
        "preemption_no_victims",
        "device_memory_insufficient",
    ]


def test_registered_in_the_hetero_command(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pytest_hetero.cli.probe")
    from pytest_hetero.cli import main

    with pytest.raises(SystemExit):
        main(["explain-pending", "--help"])
    assert "--from" in capsys.readouterr().out


def test_owner_names_the_team_of_a_table_owner_and_refuses_a_per_code_override(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Owners come from the failure table; ``--owner ROLE=TEAM`` only names the team of an owner role (as a
    matrix's spec.owners does). The old per-code override (``CODE=OWNER``) is refused with the new form."""
    src = tmp_path / "m.txt"
    src.write_text("0/2 nodes are available: 2 node(s) had untolerated taint {nvidia.com/gpu: }.")
    code, out, _ = _run(["--from", str(src)], capsys)
    assert code == 0
    # a view of hetero explain: in a pasted text the pod spec lacking the toleration is the workload owner's
    # (failure category workload_spec), not the gate's pool spec (platform in a run)
    assert [(r["code"], r["owner"], r["taint"]) for r in json.loads(out)] == [
        ("untolerated_taint", "algorithm", "nvidia.com/gpu")
    ]
    code, out, _ = _run(["--from", str(src), "--owner", "algorithm=ml-team", "--text"], capsys)
    assert (code, out.split(" -- ")[0]) == (0, "scheduler: untolerated_taint (nvidia.com/gpu) on 2/2 nodes "
                                               "[ml-team]")
    code, out, err = _run(["--from", str(src), "--owner", "untolerated_taint=platform"], capsys)
    assert (code, out) == (2, "")
    assert "unknown owner role(s) ['untolerated_taint']" in err and "ROLE=TEAM" in err
    code, _, err = _run(["--from", str(src), "--owner", "platform="], capsys)
    assert code == 2 and "no team named" in err
