"""Issue 29: one safe reader for every file the gate reads from outside. Every ``hetero`` command that reads a
file someone else may have made (a bundle's evidence, a journal, a matrix, an acceptance file, a key, a trust
policy, a captured tool output) is run, in a subprocess with a deadline, on each hostile kind of that file: a
FIFO, a symlink to /dev/zero, a symlink loop, a sparse 64 GiB file, 200,000-deep nesting, a 200,000-digit
number, bytes that are not UTF-8. Each must end in a clean refusal: the command's error exit status, a message
naming what is wrong, no traceback, well inside the deadline."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from bundle_samples import make_bundle, sample_evidence

from pytest_hetero.bundle.signing import generate_keypair

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

REPO = Path(__file__).resolve().parents[1]
DEADLINE_S = 30.0
"""A refusal takes well under a second; a hang (FIFO, /dev/zero) or a whole read of a sparse file would take
forever or exhaust memory, so the bound is loose enough for a loaded CI machine and far below either."""
KINDS = ("fifo", "dev-zero-link", "symlink-loop", "sparse-64GiB", "deep-nesting", "huge-number", "invalid-utf8")
SPARSE_SIZE = 64 << 30


def plant(path: Path, kind: str) -> None:
    """Replace ``path`` with the hostile ``kind`` of file."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero-link":
        path.symlink_to("/dev/zero")
    elif kind == "symlink-loop":
        path.symlink_to(path.name + ".other")
        path.with_name(path.name + ".other").symlink_to(path.name)
    elif kind == "sparse-64GiB":
        with open(path, "wb") as fh:
            fh.truncate(SPARSE_SIZE)
    elif kind == "deep-nesting":
        path.write_bytes(b"[" * 200_000)
    elif kind == "huge-number":
        path.write_bytes(b'{"apiVersion": ' + b"9" * 200_000 + b"}")
    else:
        path.write_bytes(b'{"apiVersion": "pytest-hetero/v1", "x": "\xff\xfe\xc3"}\n')


EXPECTED = {
    # what the refusal names, per kind (alternatives: a name inside a bundle is opened without following links,
    # so a link there is refused as a symlink; a document's content is refused by the parser that reads it)
    "fifo": ("a FIFO, not a regular file",),
    "dev-zero-link": ("a character device, not a regular file", "a symlink, not a regular file",
                      "resolves to /dev/zero, outside the matrix's folder"),
    "symlink-loop": ("a symlink loop", "a symlink, not a regular file"),
    "sparse-64GiB": (f"{SPARSE_SIZE} bytes, more than the", "larger than", "oversize"),
    # (a signed bundle's evidence is refused first for not being the signed bytes; a journal whose every line
    # is unreadable, for holding no run line)
    "deep-nesting": ("nested too deeply", "nests more than 64 levels deep", "not JSON", "YAML syntax error",
                     "not an unencrypted Ed25519", "not an Ed25519", "not a YAML trust policy",
                     "modified: its sha256 is not the signed manifest's", "modified: larger than the",
                     "holds no readable run line", "more than the 65536 a file of this kind may hold"),
    "huge-number": ("more than 4300 digits", "not an unencrypted Ed25519", "not an Ed25519",
                    "modified: larger than the", "holds no readable run line", "not a trust policy",
                    "more than the 65536 a file of this kind may hold"),
    "invalid-utf8": ("not UTF-8", "not an unencrypted Ed25519", "not an Ed25519", "not a YAML trust policy",
                     "modified: larger than the", "modified: its sha256", "holds no readable run line"),
}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A signed and an unsigned bundle, the gate key pair and the example matrix with its case folder; each
    test copies what it attacks."""
    base = tmp_path_factory.mktemp("hostile")
    generate_keypair(base / "gate.key", base / "gate.pub")
    signed = make_bundle(base / "signed", sample_evidence(), base / "gate.key")
    unsigned = make_bundle(base / "unsigned", sample_evidence(), None)
    shutil.copytree(REPO / "matrices", base / "project" / "matrices")
    shutil.copytree(REPO / "cases", base / "project" / "cases")
    return {"base": base, "signed": signed, "unsigned": unsigned, "key": base / "gate.key", "pub": base / "gate.pub",
            "project": base / "project"}


Setup = Callable[[dict[str, Path], Path, str], tuple[list[str], Path]]
"""(made, the test's folder, kind) → (hetero argv, the hostile file)."""


def _bundle(made: dict[str, Path], where: Path, name: str) -> Path:
    dest = where / name
    shutil.copytree(made[name], dest, symlinks=True)
    return dest


def _evidence(signed: bool, *argv: str) -> Setup:
    def setup(made: dict[str, Path], where: Path, kind: str) -> tuple[list[str], Path]:
        bundle = _bundle(made, where, "signed" if signed else "unsigned")
        plant(bundle / "evidence.json", kind)
        key = ["--key", str(made["pub"])] if signed else []
        return [a.replace("{B}", str(bundle)).replace("{U}", str(made["unsigned"])).replace("{OUT}", str(where / "o"))
                for a in argv] + key, bundle / "evidence.json"
    return setup


def _journal(made: dict[str, Path], where: Path, kind: str) -> tuple[list[str], Path]:
    bundle = _bundle(made, where, "unsigned")
    (bundle / "attestation.intoto.jsonl").unlink()  # a crashed run: the journal is all there is
    plant(bundle / "journal.jsonl", kind)
    return ["report", "--from-journal", str(bundle)], bundle / "journal.jsonl"


def _matrix(command: str) -> Setup:
    def setup(made: dict[str, Path], where: Path, kind: str) -> tuple[list[str], Path]:
        path = where / "m.matrix.yaml"
        plant(path, kind)
        return [command, str(path)], path
    return setup


def _acceptance(made: dict[str, Path], where: Path, kind: str) -> tuple[list[str], Path]:
    project = where / "project"
    shutil.copytree(made["project"], project)
    path = project / "cases" / "digits" / "acceptance.yaml"
    plant(path, kind)
    return ["lint", str(project / "matrices" / "example-cpu.matrix.yaml")], path


def _file_arg(*argv: str) -> Setup:
    def setup(made: dict[str, Path], where: Path, kind: str) -> tuple[list[str], Path]:
        path = where / "hostile"
        plant(path, kind)
        bundle = _bundle(made, where, "signed") if "{B}" in argv else made["signed"]
        pin = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() and not path.is_symlink() \
            and path.stat().st_size < SPARSE_SIZE else "0" * 64  # a pinned policy is parsed: attack the parser
        return [a.replace("{F}", str(path)).replace("{B}", str(bundle)).replace("{PUB}", str(made["pub"]))
                .replace("{KEY}", str(made["key"])).replace("{SHA}", pin) for a in argv], path
    return setup


COMMANDS: dict[str, tuple[Setup, int]] = {
    **{f"render-{fmt}": (_evidence(False, "render", "{B}", "--format", fmt), 2)
       for fmt in ("html", "md", "junit", "ctrf", "dossier")},
    **{f"render-{fmt}-key": (_evidence(True, "render", "{B}", "--format", fmt), 2)
       for fmt in ("html", "md", "junit", "ctrf", "dossier")},
    "diff": (_evidence(False, "diff", "{U}", "{B}", "--allow-unsigned"), 2),
    "merge": (_evidence(False, "merge", "{U}", "{B}", "-o", "{OUT}", "--allow-unsigned"), 2),
    "trend": (_evidence(False, "trend", "{U}", "{B}", "--allow-unsigned"), 2),
    "catalog": (_evidence(False, "catalog", "{B}", "--allow-unsigned"), 2),
    "report-from-journal": (_journal, 2),
    "lint": (_matrix("lint"), 1),
    "plan": (_matrix("plan"), 2),
    "lint-acceptance": (_acceptance, 1),
    "verify-key": (_file_arg("verify", "{B}", "--key", "{F}"), 2),
    "render-key-file": (_file_arg("render", "{B}", "--key", "{F}"), 2),
    "verify-policy": (_file_arg("verify", "{B}", "--key", "{PUB}", "--policy", "{F}", "--policy-sha256", "{SHA}"), 2),
    "sign-key": (_file_arg("sign", "{B}", "--key", "{F}", "--role", "business", "--decision", "accept"), 2),
    "sign-policy": (_file_arg("sign-policy", "{F}", "--key", "{KEY}"), 2),
    "explain": (_file_arg("explain", "--from", "{F}"), 2),
    "explain-pending": (_file_arg("explain-pending", "--from", "{F}"), 2),
    "probe": (_file_arg("probe", "nvidia", "--from", "{F}"), 2),
}
CAPTURED = ("explain", "explain-pending", "probe")
"""Captured tool output is read as text, not parsed as one document: only the file kinds apply."""
CASES = [(c, k) for c in COMMANDS for k in KINDS
         if not (c in CAPTURED and k in ("deep-nesting", "huge-number", "invalid-utf8"))]


def hetero(argv: list[str], cwd: Path) -> tuple[int, str, float]:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest_hetero.cli", *argv], capture_output=True, text=True,
                          timeout=DEADLINE_S, env=env, cwd=cwd, stdin=subprocess.DEVNULL, check=False)
    return done.returncode, done.stdout + done.stderr, time.monotonic() - start


@pytest.mark.parametrize(("command", "kind"), CASES, ids=[f"{c}-{k}" for c, k in CASES])
def test_every_command_refuses_every_hostile_file_cleanly(made: dict[str, Path], tmp_path: Path, command: str,
                                                           kind: str) -> None:
    setup, status = COMMANDS[command]
    argv, hostile = setup(made, tmp_path, kind)
    code, out, seconds = hetero(argv, tmp_path)
    assert "Traceback" not in out, out
    assert code == status, out
    assert seconds < DEADLINE_S
    assert any(text in out for text in EXPECTED[kind]), out
    assert hostile.name in out or hostile.parent.name in out, out  # the refusal names the file (or its bundle)
