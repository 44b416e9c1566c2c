"""Shared test helpers (import as `from support import …`; tests/ is on pythonpath): repository paths, the real field fixtures, and matrix writers for pytester."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures" / "real"
"""Real field outputs (nvidia-smi, npu-smi, kubectl…) with FACTS.md; read in place, never copied."""
DIGITS = REPO / "cases" / "digits"

TRAINING_FACTS: dict[str, tuple[str, str, str]] = {
    "killed peer": ("failed", "collective_peer_killed", "infrastructure"),
    "unreachable rendezvous": ("failed", "rendezvous_unreachable", "platform"),
    "full volume": ("failed", "volume_full", "infrastructure"),
}
"""A training row's fact → ``(status, category, owner)``, the same on every engine (issue 27): asserted for Docker by
tests/docker/test_docker_training.py and for the real node by tests/kubernetes/test_realnode_training.py, each with
the message words its engine must give."""


def outside_paths(factory: pytest.TempPathFactory) -> str:
    """The ``HETERO_ALLOW_PATHS`` value a test needs when its matrix sits in a temporary folder (outside any
    project) and names the repository's ``cases/``, or files of another temporary folder of this session, by
    absolute path: exactly those two folders (``os.pathsep``-separated). The ``outside_inputs`` fixture sets
    it for one test; a module- or session-scoped fixture passes it in its subprocess's environment."""
    return os.pathsep.join((str(REPO / "cases"), str(factory.getbasetemp())))
MODEL_SHA = "d2230a9096140b09d443879ca3b0d7cb0021917896a8f462f79806de1109b523"
DATA_SHA = "3678e2fa8f107ffa5d8518cc07a46b9e4ce67e89d65b2f88e4c391638d965bfb"


def matrix_text(*, resources: list[dict[str, Any]] | None = None, exclude: list[dict[str, Any]] | None = None,
                acceptance: Path | None = None, model_sha: str = MODEL_SHA, layers: dict[str, Any] | None = None,
                images: list[dict[str, Any]] | None = None, name: str = "t", backend: str = "local",
                extra_spec: dict[str, Any] | None = None, truth: bool | None = None) -> str:
    """A ValidationMatrix document (JSON is valid YAML) on the real digits case, with absolute paths. ``truth``:
    the dataset declares its label column as ground truth (default: only with the digits acceptance rules, which
    judge gate-computed metrics; a test's own rules over a stand-in model's self-reported numbers need none)."""
    spec: dict[str, Any] = {
        "target": {"backend": backend},
        "layers": layers or {"model": {"timeout": "2m"}},
        "resources": resources or [{"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}],
        "images": images or [{"name": "py", "reference": "python:current"}],
        "models": [{"name": "digits-logreg", "version": "1.0.0",
                    "uri": str(DIGITS / "model" / "digits-logreg-1.0.0.onnx"), "sha256": model_sha,
                    "runtime": "onnxruntime", "code": str(DIGITS),
                    "entrypoint": ["{python}", "{code}/infer.py", "--model", "{model}", "--data", "{dataset}",
                                   "--out", "{outputs}", "--provider", "{provider}"]}],
        "datasets": [{"name": "digits-test", "version": "1.0.0",
                      "uri": str(DIGITS / "data" / "digits-test-1.0.0.csv"), "sha256": DATA_SHA,
                      "acceptance": str(acceptance or DIGITS / "acceptance.yaml")}],
        **(extra_spec or {}),
    }
    if truth or (truth is None and acceptance is None):
        spec["datasets"][0]["truth"] = {"task": "classification", "target": "label", "id": "index"}
    if exclude:
        spec["exclude"] = exclude
    doc = {"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": name}, "spec": spec}
    return json.dumps(doc, indent=2)


def clear_reports(pytester: pytest.Pytester) -> None:
    """Remove the bundles of earlier runs in this pytester folder, so a test that runs pytest again with the
    same run id (its workloads carry that id, which the fixtures check for leftovers) is not refused: a run
    folder is claimed once, and a finished bundle is never overwritten."""
    shutil.rmtree(pytester.path / "reports", ignore_errors=True)


def evidence_of(pytester: pytest.Pytester) -> dict[str, Any]:
    """The evidence.json of the single bundle a pytester run wrote under reports/."""
    bundles = sorted((pytester.path / "reports").iterdir())
    assert len(bundles) == 1, bundles
    return dict(json.loads((bundles[0] / "evidence.json").read_text()))


def statuses(evidence: dict[str, Any]) -> dict[str, str]:
    """nodeid (without the matrix file prefix) → status, over reported and untested items."""
    out = {i["nodeid"].split("::", 1)[1]: i["status"] for i in evidence["untested"]["items"]}
    out.update({i["nodeid"].split("::", 1)[1]: i["status"] for i in evidence["items"]})
    return out


def dedent(text: str) -> str:
    """textwrap.dedent, stripped of the first newline."""
    return textwrap.dedent(text).lstrip("\n")


def survivors(marker: str) -> list[int]:
    """Pids of processes whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def gone(marker: str, within_s: float = 5.0) -> list[int]:
    """Survivors of ``marker`` left after waiting up to ``within_s`` for them to die."""
    deadline = time.monotonic() + within_s
    while survivors(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return survivors(marker)


def ctrl_c_reaches() -> None:
    """``preexec_fn`` of a gate started to be interrupted: SIGINT back to its default, so the child's Python
    turns it into KeyboardInterrupt as a terminal's would. A process started in the background of a
    non-interactive shell (``cmd &``, e.g. a CI wrapper) inherits SIGINT ignored, and Python keeps an ignored
    SIGINT ignored: the Ctrl-C the test sends would never arrive."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)

