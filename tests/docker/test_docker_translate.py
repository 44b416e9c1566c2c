"""Request translation into Docker Engine terms (pure functions; the engine's acceptance is tested elsewhere)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hetero.backends.docker.translate import DockerTarget, quantity, translate
from pytest_hetero.matrix.document import ResourceType
from pytest_hetero.matrix.model import Resource


def res(requests: dict[str, str], limits: dict[str, str] | None = None, type_: ResourceType = "cpu",
        name: str = "r") -> Resource:
    return Resource(name=name, type=type_, vendor="any", requests=requests, limits=limits or {})


@pytest.mark.parametrize(("text", "value"), [
    ("2", 2.0), ("500m", 0.5), ("1.5", 1.5), ("512Mi", 536870912.0), ("1Gi", 1073741824.0),
    ("1G", 1e9), ("64k", 64000.0), ("0", 0.0),
])
def test_quantity(text: str, value: float) -> None:
    assert quantity(text) == value


@pytest.mark.parametrize("text", ["", "two", "1.5Xi", "-1", "1e3"])
def test_quantity_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="is not a quantity"):
        quantity(text)


def test_cpu_and_memory_limit_wins_over_request() -> None:
    req = translate(res({"cpu": "1", "memory": "256Mi"}, {"cpu": "1500m", "memory": "1Gi"}), DockerTarget.parse({}), host_visible=False)
    assert (req.nano_cpus, req.mem_limit, req.memswap_limit) == (1_500_000_000, 2**30, 2**30)
    assert req.host_config() == {"nano_cpus": 1_500_000_000, "mem_limit": 2**30, "memswap_limit": 2**30}
    assert req.untranslated == {} and req.device_requests == [] and req.devices == []


def test_cpuset_from_target() -> None:
    req = translate(res({"cpu": "1"}), DockerTarget.parse({"cpuset": {"r": "0-1"}}), host_visible=False)
    assert req.cpuset_cpus == "0-1"
    assert req.host_config()["cpuset_cpus"] == "0-1"


def test_nvidia_count_and_pinned_ids() -> None:
    counted = translate(res({"nvidia.com/gpu": "2"}, type_="gpu"), DockerTarget.parse({}), host_visible=False)
    assert counted.device_requests == [{"Driver": "", "Count": 2, "DeviceIDs": [], "Capabilities": [["gpu"]]}]
    assert (counted.device_count, counted.device_ids) == (2, [])
    pinned = translate(res({"nvidia.com/gpu": "2"}, type_="gpu"), DockerTarget.parse({"device_ids": {"r": [0, "3"]}}), host_visible=False)
    assert pinned.device_requests == [{"Driver": "", "Count": 0, "DeviceIDs": ["0", "3"], "Capabilities": [["gpu"]]}]
    dr = pinned.host_config()["device_requests"][0]
    assert (dr["Count"], dr["DeviceIDs"], dr["Capabilities"]) == (0, ["0", "3"], [["gpu"]])


def test_fractional_device_count_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"nvidia.com/gpu: '500m' is not a whole number of devices"):
        translate(res({"nvidia.com/gpu": "500m"}, type_="gpu"), DockerTarget.parse({}), host_visible=False)


def test_ascend_remote_engine_assumes_standard_layout() -> None:
    req = translate(res({"huawei.com/Ascend910": "2"}, type_="npu"), DockerTarget.parse({}), host_visible=False)
    assert req.device_ids == ["0", "1"] and req.device_count == 2
    assert req.devices == ["/dev/davinci0:/dev/davinci0:rwm", "/dev/davinci1:/dev/davinci1:rwm",
                           "/dev/davinci_manager:/dev/davinci_manager:rwm", "/dev/devmm_svm:/dev/devmm_svm:rwm",
                           "/dev/hisi_hdc:/dev/hisi_hdc:rwm"]
    assert [m["source"] for m in req.mounts] == ["/usr/local/Ascend/driver", "/usr/local/dcmi",
                                                 "/usr/local/bin/npu-smi", "/etc/ascend_install.info"]
    assert all(m["read_only"] and m["source"] == m["target"] for m in req.mounts)
    assert req.environment == {"ASCEND_VISIBLE_DEVICES": "0,1"}


def test_ascend_local_host_uses_its_device_nodes(tmp_path: Path) -> None:
    for name in ("davinci2", "davinci10", "davinci3", "davinci_manager", "devmm_svm", "hisi_hdc"):
        (tmp_path / name).touch()
    req = translate(res({"huawei.com/npu": "2"}, type_="npu"), DockerTarget.parse({}), host_visible=True, dev=tmp_path)
    assert req.device_ids == ["2", "3"]
    assert req.devices[:2] == [f"{tmp_path}/davinci2:/dev/davinci2:rwm", f"{tmp_path}/davinci3:/dev/davinci3:rwm"]
    assert req.environment == {"ASCEND_VISIBLE_DEVICES": "2,3"}
    # this host has no Ascend driver installed, so no driver folder is bind-mounted
    assert req.mounts == [m for m in req.mounts if Path(m["source"]).exists()]


def test_ascend_too_few_nodes_is_visible_in_the_translation(tmp_path: Path) -> None:
    (tmp_path / "davinci0").touch()
    req = translate(res({"huawei.com/Ascend310P": "4"}, type_="npu"), DockerTarget.parse({}), host_visible=True, dev=tmp_path)
    assert (req.device_count, req.device_ids) == (4, ["0"])


def test_untranslated_keys_are_kept_with_reasons() -> None:
    req = translate(res({"cpu": "1", "ephemeral-storage": "1Gi", "example.com/fpga": "1"}), DockerTarget.parse({}), host_visible=False)
    assert req.untranslated == {
        "ephemeral-storage": "the Docker engine has no equivalent of the extended resource ephemeral-storage",
        "example.com/fpga": "the Docker engine has no equivalent of the extended resource example.com/fpga",
    }
