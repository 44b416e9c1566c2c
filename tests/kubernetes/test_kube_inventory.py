"""In-pod device inventory against allocation and expectations, on a real nvidia-smi capture.

The plane has no GPU, so the payload output is the field capture ../shared/fixtures/real/
nvidia-smi-q-x-tesla-t4.xml (one Tesla T4) as the payload would carry it; the comparison is the
backend's own logic (kube_payload.inventory_check)."""

from __future__ import annotations

from support import FIXTURES
from typing_extensions import Unpack

from pytest_hetero.backends.protocol import StartedOn
from pytest_hetero.layers.startup import inventory_check
from pytest_hetero.matrix.document import ExpectDoc
from pytest_hetero.matrix.model import Resource
from pytest_hetero.probes.payload import PayloadReport

T4 = PayloadReport(
    tools={
        "nvidia-smi": {
            "present": True,
            "rc": 0,
            "output": (FIXTURES / "nvidia-smi-q-x-tesla-t4.xml").read_text(),
        }
    }
)
NODE = StartedOn("gpu-1", {"name": "gpu-1", "ready": "True", "ready_reason": None, "ready_message": None,
                           "unschedulable": False, "taints": [], "labels": {}, "capacity": {"nvidia.com/gpu": "4"},
                           "allocatable": {"nvidia.com/gpu": "4"}, "simulated": True})


def gpu(count: str, **expect: Unpack[ExpectDoc]) -> Resource:
    return Resource(
        name="t4", type="gpu", vendor="nvidia", requests={"nvidia.com/gpu": count}, expect=expect
    )


def test_one_allocated_t4_matches() -> None:
    got = inventory_check(gpu("1", product="T4"), T4, NODE)
    assert got is not None
    assert (
        got["source"],
        got["allocated"],
        got["devices_seen"],
        got["node_capacity"],
        got["differences"],
    ) == ("nvidia-smi-xml", 1, 1, "4", [])


def test_fewer_devices_than_allocated_and_wrong_product_are_named() -> None:
    got = inventory_check(gpu("2", product="H100"), T4, NODE)
    assert got is not None and got["devices_seen"] == 1
    assert [(d["category"], d["expected"], d["actual"], d["device"]) for d in got["differences"]] == [
        ("device-count", "2", "1", None),
        ("product", "H100", "Tesla T4", "GPU 00000000:00:1E.0"),
    ]


def test_cpu_and_images_without_the_tool_have_nothing_to_compare() -> None:
    assert (
        inventory_check(Resource(name="c", type="cpu", vendor="any", requests={"cpu": "1"}), T4, NODE) is None
    )
    assert inventory_check(gpu("1"), PayloadReport(), NODE) is None
