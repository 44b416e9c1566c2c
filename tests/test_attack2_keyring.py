"""Attack round 2, (b)/(c): the kernel's key rings are not file-system, process or IPC objects, and the local
sandbox neither resets nor forbids them. Run as root, the gate runs every model as the one sandbox user: that uid's
user key ring (``@u``) outlives each run (its keys can be made readable to that uid), so what one model stores there the next model run reads (across sessions
too). And each run inherits the gate's session key ring (``@s``) and *possesses* it: a key the gate's login put
there (credentials a login's keyring holds) is readable by the code under test, whatever its uid.

A real run through pytester, the local engine and its bubblewrap sandbox, with two models: ``writer`` adds a key to
its user and session key rings, ``reader`` (run after it) searches both, and the test itself holds a key in the
session key ring the gate inherits. The reader must find none of them. x86_64 syscall numbers."""

from __future__ import annotations

import ctypes
import hashlib
import json
import platform
from pathlib import Path
from typing import Any

import pytest
from support import evidence_of

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="x86_64 syscall numbers")

PROBE = r"""import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
ADD_KEY, KEYCTL, SEARCH, READ = 248, 250, 10, 11
def find(ring, name):
    kid = libc.syscall(KEYCTL, SEARCH, ring, b"user", name, 0)
    if kid < 0:
        return None
    buf = ctypes.create_string_buffer(256)
    n = libc.syscall(KEYCTL, READ, kid, buf, 256)
    return buf.raw[:n].decode() if n >= 0 else None
if sys.argv[1] == "writer":
    for ring in (-4, -3):  # @u, @s
        r = libc.syscall(ADD_KEY, b"user", b"attack2-left", b"left-by-writer", 14, ring)
        print(f"add_key {ring}: {r} errno {ctypes.get_errno()}", file=sys.stderr)
seen = {f"{name.decode()}@{ring}": find(ring, name) for ring in (-4, -3) for name in (b"attack2-left", b"attack2-gate")}
print("SEEN " + repr(sorted(k for k, v in seen.items() if v)), file=sys.stderr)
open(sys.argv[2], "w").write('{"ids": [0, 1], "predictions": [1, 1]}')
"""


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _matrix(root: Path) -> Path:
    (root / ".hetero-root").write_text("")
    (root / "probe.py").write_text(PROBE)
    (root / "model.bin").write_bytes(b"m")
    (root / "rows.csv").write_text("index,label,x\n0,1,0\n1,1,1\n")
    (root / "rules.yaml").write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nmetadata: {name: k}\n"
                                     "rules:\n  - {name: acc, metric: accuracy, op: '>=', value: 0.5}\n")
    models = [{"name": name, "version": "1", "uri": "model.bin", "sha256": _sha(root / "model.bin"),
               "entrypoint": ["{python}", "probe.py", name, "{outputs}"]} for name in ("writer", "reader")]
    matrix: dict[str, Any] = {
        "apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": "k"},
        "spec": {"target": {"backend": "local"},
                 "resources": [{"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}],
                 "images": [{"name": "py", "reference": "python:current"}], "models": models,
                 "datasets": [{"name": "rows", "version": "1", "uri": "rows.csv", "sha256": _sha(root / "rows.csv"),
                               "truth": {"task": "classification", "target": "label", "id": "index"},
                               "acceptance": "rules.yaml"}]}}
    path = root / "k.matrix.yaml"
    path.write_text(json.dumps(matrix))
    return path


@pytest.mark.parametrize("shared", ["on", "off"])  # runs forked by the session sandbox, or a bubblewrap each
def test_no_key_ring_carries_anything_into_a_model_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                       shared: str) -> None:
    monkeypatch.setenv("HETERO_SANDBOX_SHARED", shared)
    libc = ctypes.CDLL(None, use_errno=True)
    # a key in the session key ring the gate runs in (a login's credentials live there)
    gate_key = libc.syscall(248, b"user", b"attack2-gate", b"gate-secret", 11, -3)
    assert gate_key > 0, ctypes.get_errno()
    try:
        pytester.runpytest("-p", "no:cacheprovider", str(_matrix(pytester.path)))
    finally:
        libc.syscall(250, 3, gate_key)  # KEYCTL_REVOKE
    ev = evidence_of(pytester)
    runs = {i["keys"]["model"]: next(r["data"] for r in i["records"] if r["kind"] == "model.run")
            for i in ev["items"] if i["layer"] == "model"}
    assert runs["reader"]["isolation"]["mechanism"] == "bubblewrap"
    assert "SEEN []" in runs["writer"]["stderr"]["text"], runs["writer"]["stderr"]["text"]
    assert runs["writer"]["stderr"]["text"].count("errno 1\n") == 2  # add_key refused: EPERM, as Docker's profile
    assert "SEEN []" in runs["reader"]["stderr"]["text"], runs["reader"]["stderr"]["text"]
