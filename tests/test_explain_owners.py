"""Field-text readers name a failure category, never an owner: the failure table decides (issues 27, 31)."""

from __future__ import annotations

import ast
from pathlib import Path

from pytest_hetero.explain import explain_text
from pytest_hetero.explain.read_framework import _NCCL_RESULTS, PEER
from pytest_hetero.explain.read_text import TEAM_SHARE, WORKLOAD_SPEC, reason_failure
from pytest_hetero.judge.failures import TABLE, UNDETERMINED, field_owner
from pytest_hetero.pending.model import CODES
from pytest_hetero.probes.ascend_errors import ACL_CODES, DCMI_CODES, match_cann
from pytest_hetero.probes.cuda_errors import CUDA_ERRORS
from pytest_hetero.probes.dcgm import WARNING_CODES, classify_warning
from pytest_hetero.probes.xid_codes import XIDS, xid_info

EXPLAIN = Path(__file__).resolve().parents[1] / "pytest_hetero" / "explain"


def _keyword_constants(name: str) -> dict[str, str]:
    """Every string constant passed as keyword ``name`` (either branch of a conditional) in explain/."""
    found: dict[str, str] = {}
    for path in sorted(EXPLAIN.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == name:
                for sub in ast.walk(node.value):
                    if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                        found.setdefault(sub.value, f"{path.name}:{sub.lineno}")
    return found


def test_no_reader_names_an_owner() -> None:
    assert _keyword_constants("owner") == {}


def test_every_failure_a_reader_or_catalog_names_is_in_the_table() -> None:
    known = TABLE.keys() | UNDETERMINED.keys()
    named = dict(_keyword_constants("failure"))
    named.update({e.failure: "cuda_errors" for e in CUDA_ERRORS})
    named.update({e.failure: "ascend_errors" for e in [*DCMI_CODES.values(), *ACL_CODES.values()]})
    cann = match_cann("EH9999: Inner Error!")
    assert cann is not None
    named[cann.failure] = "ascend_errors.match_cann"
    named.update({x.failure: "xid_codes" for x in [*XIDS.values(), xid_info(9999)]})
    named.update({row[2]: "dcgm.WARNING_CODES" for row in WARNING_CODES})
    unknown = classify_warning("something else")[1]
    assert unknown is not None
    named[unknown] = "dcgm.classify_warning"
    named.update({failure: "read_framework" for _, failure, _ in _NCCL_RESULTS.values()})
    named[PEER] = "read_framework.PEER"
    named.update({f: "reason_failure" for code in CODES for f in [reason_failure(code)] if f})
    assert {k: where for k, where in named.items() if k not in known} == {}


def test_pasted_kubernetes_reasons_keep_their_gate_row_unless_who_wrote_the_spec_matters() -> None:
    """A pasted reason takes its own row; the spec/share rows only for the codes listed, whose owner in a
    gate run (the gate writes the spec) differs from a pasted workload's (its owner wrote it)."""
    assert {reason_failure(c) for c in WORKLOAD_SPEC} == {"workload_spec"}
    assert {reason_failure(c) for c in TEAM_SHARE} == {"team_share_exceeded"}
    assert (field_owner("workload_spec"), field_owner("team_share_exceeded")) == ("algorithm", "business")
    assert reason_failure("unknown") is None
    assert reason_failure("image_pull_failed", "registry_unreachable") == "registry_unreachable"  # the cause wins
    assert reason_failure("crash_loop", "device_runtime_error") == "device_runtime_error"


def test_xid_owner_follows_the_catalog_category() -> None:
    assert {n: field_owner(x.failure) for n, x in XIDS.items() if x.application} == {
        n: "algorithm" for n, x in XIDS.items() if x.application}
    assert {field_owner(x.failure) for x in XIDS.values() if not x.application} == {"infrastructure"}


def test_an_undetermined_finding_names_candidates_from_the_table() -> None:
    r = explain_text("[rank0]:[E626 06:24:44.1 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective "
                     "operation timeout: WorkNCCL(SeqNum=8, OpType=BROADCAST, NumelIn=1, NumelOut=1, "
                     "Timeout(ms)=1800000) ran for 1800091 milliseconds before timing out.")
    (f,) = r.findings
    d = f.to_dict()
    assert (f.failure, f.owner, d["owner"]) == ("collective_peer_unknown", None, "undetermined")
    assert d["owner_candidates"] == f.owner_candidates and str(f.owner_candidates).startswith(
        UNDETERMINED["collective_peer_unknown"].candidates)
