"""The local engine's outputs file checks on real files: links, FIFOs, hard links and sizes are refused by metadata."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_hetero.backends.local import OutputsRefused, read_outputs


def refused(path: Path, max_bytes: int = 1024) -> tuple[str, str]:
    with pytest.raises(OutputsRefused) as info:
        read_outputs(path, max_bytes)
    return info.value.category, info.value.message


def test_a_symbolic_link_is_named_as_one_with_its_target_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_text('{"metrics": {"accuracy": 1.0}}')
    (tmp_path / "outputs.json").symlink_to("real.json")
    assert refused(tmp_path / "outputs.json") == (
        "bad_outputs", "outputs file outputs.json is a symbolic link (to 'real.json'); links are not followed: "
                       "write the outputs into the file itself")


def test_fifo_hard_link_and_size_are_refused_and_a_plain_file_is_read(tmp_path: Path) -> None:
    out = tmp_path / "outputs.json"
    os.mkfifo(out)
    assert refused(out) == ("bad_outputs", "outputs file outputs.json is not a regular file")
    out.unlink()
    out.write_text("{}")
    os.link(out, tmp_path / "other")
    assert refused(out) == ("bad_outputs", "outputs file outputs.json has 2 hard links; write a new file")
    (tmp_path / "other").unlink()
    assert read_outputs(out) == b"{}"
    assert read_outputs(tmp_path / "missing.json") is None
    out.write_bytes(b"x" * 2000)
    assert refused(out)[0] == "outputs_too_large"
