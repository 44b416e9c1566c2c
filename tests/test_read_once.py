"""After the run, data flows one way: each matrix file is read once per process, by its load, and its copy
under ``inputs/`` is made from those bytes; evidence.json is written once, with every section in it."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from support import matrix_text

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

COUNTING = '''
import os
import pathlib

import pytest_hetero.evidence.recorder as recorder
import pytest_hetero.matrix.load as load

_load, _read, _write = load.load_matrix, pathlib.Path.read_bytes, recorder.write_evidence
_inside = [0]


def _log(kind, path):
    with open(os.environ["T_READS"], "a") as fh:
        fh.write(f"{os.getpid()} {kind} {pathlib.Path(path).name}\\n")


def counting_load(path, *args, **kwargs):
    _log("load", path)
    _inside[0] += 1
    try:
        return _load(path, *args, **kwargs)
    finally:
        _inside[0] -= 1


def counting_read(self):
    if self.name.endswith(".matrix.yaml") and not _inside[0]:
        _log("read", self)
    return _read(self)


def counting_write(bundle_dir, evidence):
    _log("write", bundle_dir / "evidence.json")
    return _write(bundle_dir, evidence)


load.load_matrix = counting_load
pathlib.Path.read_bytes = counting_read
recorder.write_evidence = counting_write
'''


def _log(path: Path) -> dict[int, Counter[str]]:
    """pid → Counter of ``kind file`` lines."""
    out: dict[int, Counter[str]] = {}
    for line in path.read_text().splitlines():
        pid, rest = line.split(" ", 1)
        out.setdefault(int(pid), Counter())[rest] += 1
    return out


@pytest.mark.parametrize("options", [[], ["--hetero-profile", "quick"]], ids=["plain", "profile"])
def test_one_load_and_one_copy_per_matrix(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                          options: list[str]) -> None:
    monkeypatch.setenv("T_READS", str(pytester.path / "reads.log"))
    pytester.makeconftest(COUNTING)
    profiles = {"profiles": {"quick": {"layers": ["discovery", "scheduling", "startup"]}}}
    pytester.makefile(".matrix.yaml", m=matrix_text(extra_spec=profiles))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--hetero-run-id", "r1", *options)
    assert result.ret == 0, result.stdout.str()
    (counts,) = _log(pytester.path / "reads.log").values()
    # the copy under inputs/ is made from the bytes the load read (Matrix.raw): the file is never read again
    assert counts == Counter({"load m.matrix.yaml": 1, "write evidence.json": 1})
    evidence = json.loads((pytester.path / "reports" / "r1" / "evidence.json").read_text())
    if options:  # the selection section is in the one write, with the profile read from the held matrix
        assert evidence["selection"]["profiles"] == {"t": {"name": "quick", "layers": [
            "discovery", "scheduling", "startup"], "representative": False, "repeat": 1}}


def test_under_xdist_the_controller_loads_each_matrix_once(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller collects nothing: it loads the matrix ahead of the run, and the bundle uses that."""
    monkeypatch.setenv("T_READS", str(pytester.path / "reads.log"))
    pytester.makeconftest(COUNTING)
    pytester.makefile(".matrix.yaml", m=matrix_text())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--hetero-run-id", "r1")
    assert result.ret == 0, result.stdout.str()
    per_pid = _log(pytester.path / "reads.log")
    (controller,) = [pid for pid, counts in per_pid.items() if counts["write evidence.json"]]
    assert per_pid[controller] == Counter({"load m.matrix.yaml": 1, "write evidence.json": 1})
    workers = [counts for pid, counts in per_pid.items() if pid != controller]
    assert workers and all(counts == Counter({"load m.matrix.yaml": 1}) for counts in workers)
    assert os.getpid() not in per_pid
