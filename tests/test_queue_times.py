"""Queue and placement times per pool in the usage ledger (:mod:`pytest_hetero.evidence.queue_times`), from
``usage.workload`` records as the engines write them."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_hetero.evidence.queue_times import percentile, pool_of
from pytest_hetero.evidence.usage import RECORD, ledger


def _item(nodeid: str, **facts: Any) -> dict[str, Any]:
    return {"nodeid": nodeid, "records": [{"kind": RECORD, "at": "2026-12-02T17:00:00.000Z", "data": facts}]}


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]  # 1..20
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 100)) == (10.0, 19.0, 20.0)
    assert percentile([7.0], 95) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_wait_start_and_run_per_pool_with_unknown_spans_counted_never_zero() -> None:
    t = 1_800_000_000.0
    items = [_item(f"m.matrix.yaml::gpu::img::scheduling{i}", workload=f"pod/ns/g{i}", object="pod",
                   submitted=t, placed=t + wait, started=t + wait + 2, ended=t + wait + 12, requests={})
             for i, wait in enumerate([1.0, 3.0, 30.0])]
    items.append(_item("m.matrix.yaml::npu::img::startup", workload="pod/ns/n", object="pod", submitted=t,
                       placed="2027-01-15T08:00:05Z", requests={}, simulated=True))  # RFC 3339, never started
    items.append(_item("m.matrix.yaml::gpu::img::c::model", workload="exec/ns/g0/1", object="exec", started=t,
                       ended=t + 5, requests={}))  # a run inside a pod: not a workload of its own here
    items.append(_item("m.matrix.yaml::cpu::img::startup", workload="pod/ns/c1", object="pod", submitted=t + 0.7,
                       placed=t, started=t + 1, requests={}))  # placed in the second it was submitted: 0
    items.append(_item("m.matrix.yaml::cpu::img::startup", workload="pod/ns/c2", object="pod", submitted=t + 5,
                       placed=t, requests={}))  # placed 5 s before it was submitted: clocks disagree, unknown
    pools = ledger(items, "2026-12-02T17:10:00Z")["queue"]["pools"]
    assert pools["cpu"]["wait_s"] == {"count": 1, "p50": 0.0, "p95": 0.0, "max": 0.0}
    assert pools["cpu"]["unknown"]["wait_s"] == 1
    gpu, npu = pools["gpu"], pools["npu"]
    assert (gpu["workloads"], gpu["simulated"], gpu["unknown"]) == (3, 0, {"wait_s": 0, "start_s": 0, "run_s": 0})
    assert gpu["wait_s"] == {"count": 3, "p50": 3.0, "p95": 30.0, "max": 30.0}
    assert gpu["start_s"] == {"count": 3, "p50": 2.0, "p95": 2.0, "max": 2.0}
    assert gpu["run_s"]["p50"] == 10.0
    assert npu["wait_s"] == {"count": 1, "p50": 5.0, "p95": 5.0, "max": 5.0}  # 2027-01-15T08:00:00Z is t
    assert (npu["simulated"], npu["unknown"]) == (1, {"wait_s": 0, "start_s": 1, "run_s": 1})
    assert "start_s" not in npu and "run_s" not in npu  # not measured: absent, never 0


def test_pool_is_the_resource_of_the_item() -> None:
    assert pool_of("k.matrix.yaml::gpu::sa::digits@d::model") == "gpu"
    assert pool_of("odd") == pool_of(None) == "(unknown)"
