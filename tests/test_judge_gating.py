"""Gating is the judge's: the status word of an item that does not run its check (``blocked``, ``not_run``,
``not_applicable``) is written by :func:`pytest_hetero.judge.verdict.gating` alone; the glue asks and writes it
down. Checked on a real run (local backend through pytester) and by reading the source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support import REPO, evidence_of, matrix_text

from pytest_hetero.judge.model import FailureDict
from pytest_hetero.judge.verdict import DependencyOutcome, Gate, gating, not_applicable
from pytest_hetero.vocab import Layer

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

GATED = {"blocked", "not_run", "not_applicable"}


def _failure(layer: Layer, message: str, nodes: list[str] | None = None) -> FailureDict:
    failure: FailureDict = {"layer": layer, "category": "c", "message": message, "owner": "team"}
    if nodes is not None:
        failure["nodes"] = nodes
    return failure


def test_the_judge_words_every_gate() -> None:
    model: DependencyOutcome = {
        "nodeid": "m::cpu::py::a@d::model", "layer": "model", "status": "failed", "blocked_by": None, "reason": None,
        "failure": _failure("model", "entrypoint program not found: /x\nmore")}
    assert gating("business", "m::cpu::py::a@d::model", model) == Gate(
        "blocked", "blocked by m::cpu::py::a@d::model: entrypoint program not found: /x", "m::cpu::py::a@d::model")
    blocked: DependencyOutcome = {"nodeid": "m::cpu::startup", "layer": "startup", "status": "blocked",
                                  "blocked_by": "m::cpu::discovery", "reason": "blocked by m::cpu::discovery: no driver",
                                  "failure": None}
    assert gating("model", "m::cpu::startup", blocked) == Gate(
        "blocked", "blocked by m::cpu::discovery: no driver", "m::cpu::discovery")
    assert gating("business", "m::a@d::model", None) == Gate(
        "not_run", "not_run: it judges the outputs of m::a@d::model, which did not run in this session; "
                   "select the model item too")
    assert gating("model", "m::cpu::py::startup", None) is None
    skipped: DependencyOutcome = {"nodeid": "x", "layer": "model", "status": "not_applicable", "blocked_by": None,
                                  "reason": "n/a", "failure": None}
    assert gating("business", "x", skipped) == Gate(
        "not_applicable", "not applicable: it judges the outputs of x, which is not applicable")
    assert gating("model", "x", skipped) is None
    assert gating("model", "x", {**skipped, "status": "passed"}) is None
    assert not_applicable("no scheduler here") == Gate("not_applicable", "not applicable: no scheduler here")


def test_a_discovery_failed_on_some_nodes_only_blocks_nothing_above_it() -> None:
    """A node-scoped discovery failure (its failure names the nodes; node-level coverage, the other nodes passed)
    lets the pool's higher items run; the same failure for the whole pool, or a node list on another layer, blocks."""
    scoped: DependencyOutcome = {
        "nodeid": "m::gpu::discovery", "layer": "discovery", "status": "failed", "blocked_by": None, "reason": None,
        "failure": _failure("discovery", "discovery failed on 1 of 4 node(s) of pool gpu (n3; …", ["n3"])}
    assert gating("scheduling", "m::gpu::discovery", scoped) is None
    whole: DependencyOutcome = {**scoped, "failure": _failure("discovery", "node n3: allocatable 7 < capacity 8")}
    assert gating("scheduling", "m::gpu::discovery", whole) == Gate(
        "blocked", "blocked by m::gpu::discovery: node n3: allocatable 7 < capacity 8", "m::gpu::discovery")
    elsewhere: DependencyOutcome = {**scoped, "nodeid": "m::gpu::py::startup", "layer": "startup"}
    assert gating("model", "m::gpu::py::startup", elsewhere) is not None
    errored: DependencyOutcome = {**scoped, "status": "error"}
    assert gating("scheduling", "m::gpu::discovery", errored) is not None


def test_a_real_run_gates_through_the_judge(pytester: pytest.Pytester) -> None:
    """A model whose entrypoint is missing fails; its business item is blocked with the judge's words."""
    pytester.makefile(".matrix.yaml", m=matrix_text().replace("{code}/infer.py", "{code}/no_such_program.py"))
    pytester.runpytest("-p", "no:cacheprovider")
    ev = evidence_of(pytester)
    model = next(i for i in ev["items"] if i["layer"] == "model")
    business = next(i for i in ev["items"] if i["layer"] == "business")
    assert model["status"] == "failed"
    expected = gating("business", model["nodeid"], model)
    assert expected is not None and expected.status == "blocked"
    assert (business["status"], business["reason"], business["blocked_by"]) == (
        expected.status, expected.reason, expected.blocked_by)


def _status_literals(path: Path) -> list[str]:
    """Where ``path`` writes a gated status word: ``x.status = "blocked"`` (or in a tuple assignment), or a
    ``"status": "not_run"`` dict entry."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        pairs: list[tuple[ast.expr, ast.expr]] = []
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs += list(zip(target.elts, node.value.elts, strict=False))
                else:
                    pairs.append((target, node.value))
        if isinstance(node, ast.Dict):
            pairs += [(k, v) for k, v in zip(node.keys, node.values, strict=True) if k is not None]
        for target, value in pairs:
            named = (isinstance(target, ast.Attribute) and target.attr == "status") or (
                isinstance(target, ast.Constant) and target.value == "status")
            if named and isinstance(value, ast.Constant) and value.value in GATED:
                found.append(f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}")
    return found


def test_no_glue_or_layer_writes_a_gated_status_word() -> None:
    package = REPO / "pytest_hetero"
    offenders = [hit for folder in ("pytest_plugin", "layers", "backends")
                 for path in sorted((package / folder).rglob("*.py")) for hit in _status_literals(path)]
    assert offenders == []
    assert _status_literals(package / "judge" / "verdict.py") == []  # the judge builds Gates, not dicts
