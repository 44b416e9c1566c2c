"""Issue 29: a run killed (or out of disk) while writing a journal line leaves that last line torn. ``hetero report
--from-journal`` reports it as what it is — the run was interrupted, this item's result was lost — and never as
"evidence tampering"; the artifacts the item had written are kept out of the bundle, named, and the rebuilt bundle
verifies.

The run and its SIGKILL are real; the tear itself is made by cutting the journal inside the line being written,
because a kernel that completes the write cannot be made to stop halfway on demand (a SIGKILL or ENOSPC in the
middle of a large ``write`` does it in the field)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from support import REPO
from test_crash_safety import _hetero, _start, _wait_items

# its matrix sits in a temporary folder and names cases/ by absolute path (test_crash_safety's _start), which path
# containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

MODEL = "cpu-host::py::digits-logreg@digits-test::model"


def test_a_torn_last_line_after_sigkill_is_an_interruption_not_tampering(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")  # this checkout's code
    proc = _start(tmp_path)
    bundle = tmp_path / "reports" / "r1"
    journal = bundle / "journal.jsonl"
    try:
        _wait_items(journal, 5)
        time.sleep(1.0)  # inside the slow model's run
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    lines = journal.read_bytes().splitlines(keepends=True)
    (at,) = [n for n, raw in enumerate(lines) if json.loads(raw).get("evidence", {}).get("nodeid", "").endswith(MODEL)]
    line = lines[at]
    artifacts = [a["path"] for a in json.loads(line)["evidence"]["artifacts"]]
    assert artifacts and all((bundle / a).is_file() for a in artifacts)
    cut = line.index(b'"owner"')  # past the artifacts and the nodeid (keys are sorted), before the line's end
    journal.write_bytes(b"".join(lines[:at]) + line[:cut])
    keys = tmp_path / "keys"
    keys.mkdir()
    assert _hetero("keygen", str(keys / "run.key"), "--pub", str(keys / "run.pub")).returncode == 0
    rebuilt = _hetero("report", "--from-journal", str(bundle), "--sign-key", str(keys / "run.key"))
    assert "tampering" not in rebuilt.stderr + rebuilt.stdout
    assert rebuilt.returncode == 0, rebuilt.stderr
    nodeid = json.loads(line)["evidence"]["nodeid"]
    ev = json.loads((bundle / "evidence.json").read_text())
    assert ev["journal"]["torn"] == {"line": at + 1, "bytes": cut, "nodeid": nodeid, "paths": sorted(artifacts)}
    assert ev["journal"]["lost"] == [{"line": at + 1, "why": "torn or not JSON"}]
    said = [x for x in rebuilt.stderr.splitlines() if "interrupted mid-write" in x]
    assert said and said[0].startswith(
        f"pytest-hetero: the run was interrupted mid-write (killed, or the disk filled): journal line {at + 1} is "
        f"torn, {cut} bytes without an end; the result of {nodeid} was lost (reported not_run); "), rebuilt.stderr
    assert all(json.dumps(a) in said[0] for a in artifacts)
    assert all(not (bundle / a).exists() for a in artifacts)  # kept out, named in the statement
    assert nodeid in {u["nodeid"] for u in ev["untested"]["items"] if u["status"] == "not_run"}
    verified = _hetero("verify", str(bundle), "--key", str(keys / "run.pub"))
    assert verified.returncode == 0, verified.stdout + verified.stderr
