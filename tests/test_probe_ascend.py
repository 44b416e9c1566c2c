"""Ascend probe: npu-smi info layouts, health words, board details, device nodes, live run."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_hetero.errors import ParseError
from pytest_hetero.probes.ascend import (
    inspect_device_nodes,
    parse_npu_board,
    parse_npu_vnpu,
    parse_visible,
    probe_ascend,
)
from pytest_hetero.probes.ascend_table import parse_npu_smi_info
from pytest_hetero.probes.model import Inventory

REAL = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real"
DATA = Path(__file__).parent / "data" / "probes"


def real(name: str) -> Inventory:
    path = REAL / name
    if not path.exists():
        pytest.skip(f"shared fixture {path} not present")
    return parse_npu_smi_info(path.read_text())


def test_910a_8npu_two_in_warning() -> None:
    inv = real("npu-smi-info-910a-8npu-warning.txt")
    assert (inv.source, inv.tool_version, inv.driver_version) == ("npu-smi", "24.1.RC2", "24.1.RC2")
    assert [(d.extra["npu_id"], d.extra["chip_id"], d.index, d.name) for d in inv.devices] == [
        (i, 0, i, "xxx") for i in range(8)
    ]
    assert [d.health_raw for d in inv.devices] == ["OK", "OK", "OK", "Warning", "OK", "OK", "OK", "Warning"]
    assert [d.health for d in inv.devices] == ["ok", "ok", "ok", "warning", "ok", "ok", "ok", "warning"]
    assert inv.devices[3].errors == ("npu-smi health reads Warning",)
    assert [d.power_w for d in inv.devices] == [70.5, 71.2, 69.0, 206.9, 70.2, 64.9, 69.4, 203.2]
    assert [(d.extra["memory_used_mb"], d.extra["memory_total_mb"]) for d in inv.devices] == [
        (4252, 15137),
        (4666, 15137),
        (4317, 15137),
        (3616, 15039),
        (3708, 15137),
        (4346, 15137),
        (4261, 15137),
        (4521, 15039),
    ]
    for d in inv.devices:
        assert (d.extra["hbm_used_mb"], d.extra["hbm_total_mb"], d.memory_total_mib, d.memory_used_mib) == (
            0,
            32768,
            32768,
            0,
        )
        assert (d.extra["hugepages_used"], d.extra["hugepages_total"]) == (1232, 1232)
        assert [(p.name, p.used_memory_mib, p.chip) for p in d.processes] == [("hlt_host_devmm_", 686, 0)] * 4
    assert sum(len(d.processes) for d in inv.devices) == 32
    assert [p.pid for p in inv.devices[0].processes] == [37656, 37664, 37640, 37648]
    assert inv.healthy and inv.warnings == ()


def test_310_4chip_v21() -> None:
    inv = real("npu-smi-info-310-4chip-v21.txt")
    assert (inv.tool_version, inv.driver_version) == ("21.0.4", "21.0.4.B030")
    assert [(d.extra["npu_id"], d.extra["chip_id"], d.extra["device_id"], d.index) for d in inv.devices] == [
        (6, 0, 3, 3),
        (6, 1, 4, 4),
        (6, 2, 5, 5),
        (6, 3, 6, 6),
    ]
    assert {d.name for d in inv.devices} == {"310"} and {d.health for d in inv.devices} == {"ok"}
    assert [d.power_w for d in inv.devices] == [12.8] * 4
    assert [d.temperature_c for d in inv.devices] == [73.0, 74.0, 70.0, 65.0]
    assert [(d.memory_used_mib, d.memory_total_mib) for d in inv.devices] == [
        (2703, 8192),
        (2867, 8192),
        (2867, 8192),
        (2867, 8192),
    ]
    assert [(d.extra["hugepages_used"], d.extra["hugepages_total"]) for d in inv.devices] == [(0, 970)] * 4
    assert [d.extra["hbm_total_mb"] for d in inv.devices] == [None] * 4
    assert [d.bus_id for d in inv.devices] == ["0000:89:00.0", "0000:8A:00.0", "0000:8B:00.0", "0000:8C:00.0"]
    assert inv.extra == {"npu_count": 1, "chip_count": 4}


def test_310_4chip_v20_legacy_without_hugepages() -> None:
    inv = real("npu-smi-info-310-4chip-v20-legacy.txt")
    assert inv.tool_version == "20.2.0"
    assert [(d.extra["npu_id"], d.extra["chip_id"], d.index) for d in inv.devices] == [
        (215, 0, 0),
        (215, 1, 1),
        (215, 2, 2),
        (215, 3, 3),
    ]
    assert [d.temperature_c for d in inv.devices] == [56.0, 57.0, 57.0, 55.0]
    assert [
        (d.power_w, d.memory_used_mib, d.memory_total_mib, d.extra["hugepages_total"], d.health)
        for d in inv.devices
    ] == [(12.8, 2703, 8192, None, "ok")] * 4
    assert [d.bus_id for d in inv.devices] == ["0000:DA:00.0", "0000:DC:00.0", "0000:DD:00.0", "0000:DB:00.0"]
    assert inv.warnings == ()


def test_910b3_8npu_healthy_hbm() -> None:
    inv = real("npu-smi-info-910b3-8npu-healthy.txt")
    assert inv.tool_version == "24.1.rc1.b030"
    assert [(d.index, d.name, d.health) for d in inv.devices] == [(i, "910B3", "ok") for i in range(8)]
    assert [d.power_w for d in inv.devices] == [101.8, 92.0, 102.0, 99.8, 98.6, 99.7, 103.8, 98.2]
    assert [d.temperature_c for d in inv.devices] == [43.0, 39.0, 40.0, 40.0, 45.0, 44.0, 45.0, 44.0]
    assert [d.memory_used_mib for d in inv.devices] == [3318] + [3314] * 6 + [3315]
    assert {
        (d.memory_total_mib, d.extra["memory_used_mb"], d.extra["memory_total_mb"], d.utilisation_pct)
        for d in inv.devices
    } == {(65536, 0, 0, 0.0)}
    assert all(d.processes == () for d in inv.devices) and inv.healthy


def test_310p3_v25_power_na_and_malformed_border() -> None:
    inv = real("npu-smi-info-310p3-2npu-v25.txt")
    assert inv.tool_version == "25.5.1"
    assert [(d.extra["npu_id"], d.extra["chip_id"], d.extra["device_id"], d.bus_id) for d in inv.devices] == [
        (4, 0, 0, "0000:81:00.0"),
        (5, 0, 1, "0000:85:00.0"),
    ]
    assert [(d.name, d.health, d.power_w, d.temperature_c) for d in inv.devices] == [
        ("310P3", "ok", None, 37.0),
        ("310P3", "ok", None, 40.0),
    ]
    assert [(d.memory_used_mib, d.memory_total_mib, d.extra["hbm_total_mb"]) for d in inv.devices] == [
        (1848, 21525, None),
        (1849, 21525, None),
    ]
    assert inv.warnings == ()


def test_a3_phy_id_shared_npu_row_alarm_critical_unknown() -> None:
    inv = parse_npu_smi_info((DATA / "npu-smi-info-a3-phyid-shared-npu-row.txt").read_text())
    assert inv.tool_version == "24.1.rc3"
    assert [(d.extra["npu_id"], d.extra["chip_id"], d.extra["phy_id"], d.index) for d in inv.devices] == [
        (0, 0, 0, 0),
        (0, 1, 1, 1),
        (1, 0, 2, 2),
        (1, 1, 3, 3),
        (2, 0, 4, 4),
        (3, 0, 5, 5),
    ]
    assert [(d.health, d.health_raw) for d in inv.devices] == [
        ("ok", "OK"),
        ("ok", "OK"),
        ("critical", "Alarm"),
        ("critical", "Alarm"),
        ("critical", "Critical"),
        ("unknown", "NOT_EXIST"),
    ]
    assert [d.power_w for d in inv.devices] == [173.4, None, 180.5, 180.5, None, None]
    assert [(d.utilisation_pct, d.memory_used_mib, d.memory_total_mib) for d in inv.devices] == [
        (0.0, 3400, 65536),
        (0.0, 3145, 65536),
        (12.0, 60000, 65536),
        (0.0, 3145, 65536),
        (None, 0, 0),
        (None, None, None),
    ]
    assert [(p.pid, p.name, p.used_memory_mib) for p in inv.devices[2].processes] == [
        (90211, "python3", 56700)
    ]
    assert not inv.healthy and [d.index for d in inv.unhealthy_devices()] == [2, 3, 4]
    assert inv.warnings == ()


def test_310p_duo_truncated_after_npu_row() -> None:
    inv = parse_npu_smi_info((DATA / "npu-smi-info-310p-duo-truncated.txt").read_text())
    assert [
        (d.extra["npu_id"], d.extra["chip_id"], d.index, d.bus_id, d.memory_total_mib) for d in inv.devices
    ] == [(1, 0, 0, "0000:01:00.0", 44280), (1, 1, 1, "0000:01:00.0", 43693), (2, None, 2, None, None)]
    assert (inv.devices[0].utilisation_pct, inv.devices[2].health, inv.devices[2].power_w) == (
        3.0,
        "warning",
        70.4,
    )
    assert inv.warnings == ("NPU 2 has no chip row (output truncated?)",)


def test_header_only_is_truncated_warning() -> None:
    text = "+----+\n| npu-smi 23.0.1   Version: 23.0.1 |\n+----+\n"
    inv = parse_npu_smi_info(text)
    assert (inv.devices, inv.tool_version, inv.warnings) == (
        (),
        "23.0.1",
        ("no NPU rows found after the header (output truncated?)",),
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)\ndcmi module initialize failed. ret is -8005\n",
            "DCMI -8005 DCMI_ERR_CODE_INNER_ERR: DCMI internal error in the Ascend driver: dcmi module initialize failed. "
            "ret is -8005",
        ),
        (
            "dcmi model initialized failed, because the device is used. ret is -8020",
            (
                # issue 16: the driver answered -8020 (resource occupied); it is not "could not reach the driver"
                "DCMI -8020 DCMI_ERR_CODE_RESOURCE_OCCUPIED: the driver answered, but the NPU is held by another process "
                "or container: dcmi model initialized failed, because the device is used. ret is -8020"
            ),
        ),
        ("bash: npu-smi: command not found", "npu-smi not installed: npu-smi: command not found"),
    ],
)
def test_driver_failures_are_global_errors(text: str, error: str) -> None:
    inv = parse_npu_smi_info(text)
    assert (inv.global_errors, inv.devices, inv.healthy) == ((error,), (), False)


def test_blank_and_foreign_text() -> None:
    assert parse_npu_smi_info("\n \n").warnings == ("input is empty: npu-smi printed nothing",)
    with pytest.raises(ParseError) as info:
        parse_npu_smi_info("| NVIDIA-SMI 550.90.07  Driver Version: 550.90.07 |\n")
    assert info.value.message.startswith("not `npu-smi info` output: no 'npu-smi <version>")


def test_decimal_comma_and_unexpected_value_count() -> None:
    text = (
        "| npu-smi 22.0.4   Version: 22.0.4 |\n"
        "| NPU     Name      | Health          | Power(W)          Temp(C)              |\n"
        "| Chip    Device    | Bus-Id          | AICore(%)         Memory-Usage(MB)     |\n"
        "+===================+=================+========================================+\n"
        "| 0       310       | OK              | 12,8              56       7           |\n"
        "| 0       0         | 0000:DA:00.0    | 5                 2703 / 8192          |\n"
    )
    inv = parse_npu_smi_info(text)
    (dev,) = inv.devices
    assert (dev.power_w, dev.temperature_c, dev.utilisation_pct, dev.memory_total_mib) == (
        12.8,
        56.0,
        5.0,
        8192,
    )
    assert inv.warnings == ("line 5: 3 value(s) under 2 column(s) ['Power(W)', 'Temp(C)']",)


def test_board_detail() -> None:
    board = parse_npu_board((DATA / "npu-smi-board-910b.txt").read_text())
    assert (
        board["npu_id"],
        board["firmware_version"],
        board["software_version"],
        board["pcie_bus_info"],
    ) == ("0", "6.4.12.1.241", "23.0.rc2", "0000:C1:00.0")
    assert (board["model"], board["class_id"], board["chip_count"], board["pci_device_id"]) == (
        None,
        None,
        "1",
        "0xD802",
    )
    assert parse_npu_board("") == {}
    with pytest.raises(ParseError):
        parse_npu_board("no colon here\n")


def test_visible_device_lists() -> None:
    assert [parse_visible(x) for x in (None, "", "0,1", "0-3", "0-1, 4", "x,2,a-b")] == [
        None,
        (),
        (0, 1),
        (0, 1, 2, 3),
        (0, 1, 4),
        (2,),
    ]


def test_device_nodes_complete_and_missing(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("davinci0", "davinci1", "davinci_manager", "devmm_svm", "davinci-bad"):
        (dev / name).write_text("")
    nodes = inspect_device_nodes(str(tmp_path), {"ASCEND_VISIBLE_DEVICES": "0-2"})
    assert (nodes.davinci, nodes.visible) == ((0, 1), (0, 1, 2))
    assert nodes.control == {"davinci_manager": True, "devmm_svm": True, "hisi_hdc": False}
    assert nodes.missing == ("/dev/hisi_hdc", "/dev/davinci2")
    empty = inspect_device_nodes(str(tmp_path / "nothing"), {})
    assert (empty.davinci, empty.visible, len(empty.missing)) == ((), None, 3)


def test_live_probe_with_fake_npu_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = REAL / "npu-smi-info-910b3-8npu-healthy.txt"
    if not table.exists():
        pytest.skip("shared fixture not present")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "npu-smi").write_text(f"#!/bin/sh\ncat '{table}'\n")
    (bin_dir / "npu-smi").chmod(0o755)
    cfg = tmp_path / "usr/local/Ascend/ascend-toolkit/latest"
    cfg.mkdir(parents=True)
    (cfg / "version.cfg").write_text("# CANN\nrunfile_version=8.0.RC3\n")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    inv = probe_ascend(str(tmp_path), {})
    assert (len(inv.devices), inv.cann_version, inv.driver_version) == (8, "8.0.RC3", "24.1.rc1.b030")
    assert inv.extra["device_nodes"]["missing"] == ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    none = probe_ascend(str(tmp_path), {})
    assert (none.source, none.global_errors) == (
        "none",
        ("npu-smi not found on PATH (no Ascend driver installed?)",),
    )


PIECES = st.sampled_from(
    [
        "| npu-smi 1  Version: 2 |",
        "| NPU Name | Health | Power(W) Temp(C) |",
        "| Chip Device |",
        "| 0 910B | OK | 1,5 NA |",
        "| 0 0 | 0000:01:00.0 | 0 1 / 2 |",
        "+===+",
        "|",
        "/",
        "| Process id |",
        "Total number of vnpu: 2",
        "| 100 | 0 | ff | 1 | vir01 |",
        "AICORE Memory",
        "1/8 NA/NA",
        "\n",
        "Alarm",
        "NA",
        "-",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.lists(st.one_of(PIECES, st.text(max_size=4))).map("".join)))
@example("²||||Total number of vnpu")  # found by this test: '²'.isdigit() but int('²') raises
@example("| ²  910B  | OK | 1.0 50 0 / 0 3000 / 65536 |\n| ³  0 | 0000:C1:00.0 | 0 0 / 0 |")
def test_any_text_gives_inventory_or_parse_error(text: str) -> None:
    try:
        assert isinstance(parse_npu_smi_info(text), Inventory)
    except ParseError:
        pass
    try:
        assert isinstance(parse_npu_board(text), dict)
    except ParseError:
        pass
    try:
        assert isinstance(parse_npu_vnpu(text).resources, dict)
    except ParseError:
        pass


def test_910a_v20_legacy_with_hbm_and_critical() -> None:
    inv = parse_npu_smi_info((DATA / "npu-smi-info-910a-v20-legacy-hbm.txt").read_text())
    assert (inv.tool_version, inv.warnings) == ("20.1.0", ())
    assert [
        (
            d.index,
            d.name,
            d.health,
            d.memory_used_mib,
            d.memory_total_mib,
            d.utilisation_pct,
            d.extra["memory_total_mb"],
        )
        for d in inv.devices
    ] == [(0, "910A", "ok", 0, 32255, 0.0, 15307), (1, "910A", "critical", 30720, 32255, 37.0, 15307)]
    assert [d.extra["hugepages_total"] for d in inv.devices] == [None, None]
    assert inv.devices[1].errors == ("npu-smi health reads Critical",)


def test_process_rows_without_name_or_chip_column() -> None:
    head = (
        "| npu-smi 24.1.rc3.3               Version: 24.1.rc3.3                |\n"
        "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
        "| Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
        "+===========================+===============+====================================================+\n"
        "| 7     Ascend910           | OK            | 182.0       36                0    / 0             |\n"
        "| 0     14                  | 0000:9D:00.0  | 100         0    / 0          59807/ 65536         |\n"
        "+===========================+===============+====================================================+\n"
    )
    with_chip = head + (
        "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |\n"
        "+===========================+===============+====================================================+\n"
        "| 7       0                 | 99976         |                          | 27977                   |\n"
    )
    (dev,) = parse_npu_smi_info(with_chip).devices
    assert (dev.index, dev.utilisation_pct, dev.memory_used_mib, dev.memory_total_mib) == (
        14,
        100.0,
        59807,
        65536,
    )
    assert [(p.pid, p.name, p.used_memory_mib, p.chip) for p in dev.processes] == [(99976, None, 27977, 0)]
    no_chip = head + "| NPU ID | Process id | Process name | Process memory(MB) |\n| 7 | 998 | python | 2 |\n"
    (dev,) = parse_npu_smi_info(no_chip).devices
    assert [(p.pid, p.name, p.used_memory_mib, p.chip) for p in dev.processes] == [(998, "python", 2, 0)]


def test_vnpu_list_and_resources() -> None:
    info = parse_npu_vnpu((DATA / "npu-smi-info-vnpu-310p.txt").read_text())
    assert (info.declared_count, info.warnings) == (3, ())
    assert [
        (p.kind, p.index, p.profile, p.extra["vgroup_id"], p.extra["status"]) for p in info.partitions
    ] == [
        ("vnpu", 100, "vir01", 0, "1"),
        ("vnpu", 101, "vir02", 1, "1"),
        ("vnpu", 102, "vir04", 2, "1"),
    ]
    assert (info.resources["AICORE"], info.resources["Memory"], info.resources["PNGD"]) == (
        {"free": 1, "total": 8},
        {"free": 0, "total": 21},
        {"free": None, "total": None},
    )
    bare = "4/8  21/42  3/7\nTotal number of vnpu: 2\nVnpu ID | Vgroup ID | Container ID | Status | Template Name\n"
    bare += "212      |  0             |  000000000000  |  0       |  vir04\n"
    short = parse_npu_vnpu("AICORE Memory AICPU\n" + bare)
    assert (short.resources["Memory"], [p.index for p in short.partitions], short.warnings) == (
        {"free": 21, "total": 42},
        [212],
        ("Total number of vnpu: 2 but 1 vNPU row(s) listed",),
    )
    with pytest.raises(ParseError):
        parse_npu_vnpu("| NVIDIA-SMI 550 |")


def test_chip_seen_inside_a_vnpu_container() -> None:
    inv = parse_npu_smi_info((DATA / "npu-smi-info-in-vnpu-container.txt").read_text())
    (dev,) = inv.devices
    assert (dev.name, dev.index, dev.extra["npu_id"], dev.extra["vnpu_template"], dev.power_w) == (
        "310Pvir04",
        0,
        7,
        "vir04",
        None,
    )
    assert [(p.kind, p.profile, p.memory_used_mib, p.memory_total_mib) for p in dev.partitions] == [
        ("vnpu", "vir04", 995, 10763)
    ]
