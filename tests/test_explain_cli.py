"""``hetero explain`` on the command line: JSON, --text, exit codes, stdin, and the older views."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from pytest_hetero.cli import main

REAL = Path(__file__).resolve().parents[2] / "shared/fixtures/real"
pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason="real fixtures not present")


def test_json_output_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", "--from", str(REAL / "dmesg-xid-119-gsp-timeout-h100.txt")])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["exit_code"] == 1 and data["owners"] == ["infrastructure"]
    xid = next(f for f in data["findings"] if f["code"] == "xid_119")
    assert xid["count"] == 5 and xid["lines"][0] == {
        "number": 3,
        "text": "[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout "
                "after 6s of waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).",
    }
    assert data["blocks"] == [{"kind": "kernel-log", "start": 1, "end": 43, "recognised": True, "command": None}]


def test_text_output_healthy_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", "--text", "--from", str(REAL / "nvidia-smi-table-h100-8gpu.txt")])
    out = capsys.readouterr().out
    assert code == 0
    assert out.strip() == ("0 problem(s), 9 healthy/informational finding(s) (shown with --all); owners: none; "
                           "blocks: nvidia-smi-table")
    main(["explain", "--text", "--all", "--from", str(REAL / "nvidia-smi-table-h100-8gpu.txt")])
    assert capsys.readouterr().out.count("gpu_ok [no owner]") == 8


def test_stdin_unreadable_exit_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"just some words\n")))
    code = main(["explain", "--text"])
    captured = capsys.readouterr()
    assert code == 2
    assert "unrecognised [no owner]" in captured.out and "nothing could be read" in captured.err


def test_missing_file_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["explain", "--from", str(tmp_path / "nope.txt")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_explain_pending_reads_bare_runtime_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 16 case 1: explain-pending no longer says 'scheduler: unknown' for a device runtime error."""
    paste = tmp_path / "err.txt"
    paste.write_text("nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot "
                     "open shared object file: no such file or directory: unknown\n")
    code = main(["explain-pending", "--text", "--from", str(paste)])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("kubelet: device_runtime_error [infrastructure]")


def test_probe_from_still_reads_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "nvidia", "--no-raw", "--from", str(REAL / "nvidia-smi-table-h100-8gpu.txt")]) == 0
    assert len(json.loads(capsys.readouterr().out)["devices"]) == 8


def test_explain_imports_only_its_readers(tmp_path: Path) -> None:
    """``hetero explain`` does not load the Docker/Kubernetes/signing stacks of the other commands (seconds
    of imports); ``hetero --help`` still lists every command."""
    import subprocess

    paste = tmp_path / "paste.txt"
    paste.write_text("NVRM: Xid (PCI:0000:9b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n", encoding="utf-8")
    probe = ("import sys; from pytest_hetero.cli import main; code = main(['explain', '--from', sys.argv[1]]); "
             "print(code, sorted(m for m in ('kubernetes', 'docker', 'cryptography', 'jinja2', 'pytest') "
             "if m in sys.modules))")
    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", probe, str(paste)], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"}).stdout.strip().splitlines()
    assert out[-1] == "1 []"
    names = subprocess.run([sys.executable, "-m", "pytest_hetero.cli", "--help"], capture_output=True, text=True,
                           check=True, env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"}).stdout
    for command in ("explain", "explain-pending", "probe", "report", "verify", "cleanup"):
        assert command in names
