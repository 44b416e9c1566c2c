"""pytest-xdist on the local backend: statuses, reasons and untested scope equal a serial run's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import matrix_text

pytest.importorskip("xdist")

RESOURCES = [{"name": "cpu-a", "type": "cpu", "requests": {"cpu": 1}},
             {"name": "cpu-b", "type": "cpu", "requests": {"cpu": 1}},
             {"name": "gpu-nvidia", "type": "gpu", "vendor": "nvidia", "requests": {"nvidia.com/gpu": 1},
              "expect": {"devices": 1}}]


def outcome(pytester: pytest.Pytester, *args: str) -> tuple[int, dict[str, tuple[str, str]]]:
    """Run in a subprocess; return (exit code, id → (status, reason)) over items and untested scope."""
    result = pytester.runpytest_subprocess("m.matrix.yaml", "-p", "no:cacheprovider", *args)
    (bundle,) = list((pytester.path / "reports").iterdir())
    doc: dict[str, Any] = json.loads((bundle / "evidence.json").read_text())
    bundle.rename(pytester.path / f"done-{bundle.name}")
    out = {u["nodeid"]: (u["status"], u["reason"]) for u in doc["untested"]["items"]}
    out.update({i["nodeid"]: (i["status"], i.get("reason") or "") for i in doc["items"]})
    return int(result.ret), out


@pytest.mark.parametrize("extra", [[], ["--hetero-profile", "quick", "--hetero-affected", "resource=cpu-b"]])
def test_two_workers_give_the_serial_statuses(pytester: pytest.Pytester, extra: list[str]) -> None:
    doc = json.loads(matrix_text(resources=RESOURCES))
    doc["spec"]["images"] = [{"name": "py-a", "reference": "python:current"},
                             {"name": "py-b", "reference": "python:current"}]
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    serial_ret, serial = outcome(pytester, *extra)
    parallel_ret, parallel = outcome(pytester, "-n", "2", *extra)
    assert parallel == serial
    assert parallel_ret == serial_ret
    assert len(serial) == 3 * 8
    statuses = {k.split("::", 1)[1]: v[0] for k, v in serial.items()}
    assert statuses["cpu-b::discovery"] == "passed"
    assert statuses["gpu-nvidia::py-b::startup"] in ("blocked", "deselected")
