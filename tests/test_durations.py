"""One duration grammar (``pytest_hetero.durations``) read by every place a length of time is written: layer
timeouts, ``spec.validation.valid_for``, ``hetero verify --max-age``, ``hetero cleanup --older-than``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from smallcase import matrix, write_case
from support import REPO

from pytest_hetero.cli.signing import parse_age
from pytest_hetero.durations import parse_duration
from pytest_hetero.errors import HeteroError
from pytest_hetero.matrix import load_matrix
from pytest_hetero.matrix.load import matrix_schema

FORMS = [(30, 30.0), (0.5, 0.5), ("30", 30.0), ("250ms", 0.25), ("30s", 30.0), ("5m", 300.0), ("2h", 7200.0),
         ("2d", 172800.0), ("1w", 604800.0), ("1m30s", 90.0), ("1d12h", 129600.0), (" 90s ", 90.0), ("1.5h", 5400.0)]


@pytest.mark.parametrize(("text", "seconds"), FORMS)
def test_every_form_reads_to_seconds(text: float | str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["5 minutes", "2D", "1 h", "0", "0s", "-5s", "", "h", "1e400", True, None, "5y"])
def test_anything_else_is_refused_naming_the_forms(text: object) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text)  # type: ignore[arg-type]
    assert str(info.value).startswith(f"bad duration {text!r}")
    assert "250ms, 30s, 5m, 2h, 2d" in str(info.value)


def _matrix(tmp_path: Path, timeout: str, valid_for: str) -> Path:
    write_case(tmp_path / "case")
    doc = json.loads(matrix(tmp_path / "case", "case"))
    doc["spec"]["layers"] = {"model": {"timeout": timeout}, "business": {"timeout": "250ms"}}
    doc["spec"]["validation"] = {"valid_for": valid_for}
    path = tmp_path / "m.matrix.yaml"
    path.write_text(json.dumps(doc))
    return path


def test_a_matrix_reads_days_in_timeouts_and_milliseconds_in_valid_for(tmp_path: Path) -> None:
    loaded = load_matrix(_matrix(tmp_path, "2d", "36h"))
    assert (loaded.timeouts_s["model"], loaded.timeouts_s["business"], loaded.valid_for_s) == (172800.0, 0.25, 129600.0)
    assert load_matrix(_matrix(tmp_path, "1w", "250ms")).timeouts_s["model"] == 604800.0


def test_a_zero_timeout_is_a_matrix_error_not_a_traceback(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_hetero.cli", "lint", str(_matrix(tmp_path, "0s", "7d"))],
                          capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1
    assert "field 'spec.layers.model.timeout': timeout '0s' is 0 s, outside (0, 7 days]" in done.stdout + done.stderr


def test_the_schema_takes_the_same_string_forms_for_timeouts_and_valid_for() -> None:
    schema = matrix_schema()
    pattern = schema["$defs"]["duration"]["oneOf"][1]["pattern"]
    valid_for = schema["properties"]["spec"]["properties"]["validation"]["properties"]["valid_for"]
    assert pattern == valid_for["oneOf"][1]["pattern"] == r"^([0-9]+(\.[0-9]+)?(ms|s|m|h|d|w))+$"


def test_verify_max_age_reads_milliseconds_and_weeks() -> None:
    assert (parse_age("250ms"), parse_age("2w"), parse_age("3600")) == (0.25, 1209600.0, 3600.0)
    with pytest.raises(HeteroError) as info:
        parse_age("soon")
    assert info.value.render().startswith("--max-age 'soon' is not a duration")


PLUGIN = '''
from pytest_hetero.backends.labels import CleanupReport

def pytest_hetero_cleanup(backend, args):
    if backend == "lab":
        print(f"lab older_than_s={args.older_than_s!r}")
        return [CleanupReport(backend="lab")]
    return None
'''


@pytest.mark.parametrize(("text", "seconds"), [("2d", "172800.0"), ("250ms", "0.25"), ("90", "90.0")])
def test_cleanup_older_than_reads_the_same_grammar(tmp_path: Path, text: str, seconds: str) -> None:
    (tmp_path / "labclean.py").write_text(PLUGIN)
    env = {"PYTHONPATH": f"{REPO}:{tmp_path}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "pytest_hetero.cli", "cleanup", "-p", "labclean", "--backend", "lab",
                           "--older-than", text], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert (done.returncode, done.stdout) == (0, f"lab older_than_s={seconds}\nnothing to clean up\n")
    bad = subprocess.run([sys.executable, "-m", "pytest_hetero.cli", "cleanup", "-p", "labclean", "--backend", "lab",
                          "--older-than", "2 days"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert (bad.returncode, bad.stderr) == (2, "hetero cleanup: --older-than '2 days' is not a duration (a number of "
                                               "seconds, or e.g. 250ms, 30s, 5m, 2h, 2d, 1w, 1m30s)\n")
