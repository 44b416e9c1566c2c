"""The Docker Engine API documents parsed once at the boundary (:mod:`pytest_hetero.backends.docker.api`)."""

from __future__ import annotations

from pytest_hetero.backends.docker.api import ALLOCATED_FIELDS, ContainerInspect, HostConfig


def test_host_config_keeps_the_allocated_fields_as_served_and_none_for_those_left_out() -> None:
    served = {"NanoCpus": 1500000000, "Memory": 268435456, "MemorySwap": 268435456, "CpusetCpus": "0,1",
              "DeviceRequests": [{"Driver": "", "Count": 0, "DeviceIDs": ["0"], "Capabilities": [["gpu"]]}],
              "ReadonlyRootfs": True}
    parsed = HostConfig.parse(served)
    assert (parsed.nano_cpus, parsed.memory) == (1500000000, 268435456.0)
    assert list(parsed.allocated) == list(ALLOCATED_FIELDS)
    assert parsed.allocated == {"NanoCpus": 1500000000, "CpusetCpus": "0,1", "Memory": 268435456,
                                "MemorySwap": 268435456, "Devices": None,
                                "DeviceRequests": served["DeviceRequests"], "Runtime": None}


def test_a_host_config_that_is_no_object_is_unlimited_and_allocated_nothing() -> None:
    raws: tuple[object, ...] = (None, [], "x")
    for raw in raws:
        parsed = ContainerInspect.parse({"Id": "c1", "HostConfig": raw}).host_config
        assert (parsed.nano_cpus, parsed.memory) == (0, 0.0)
        assert parsed.allocated == dict.fromkeys(ALLOCATED_FIELDS)
