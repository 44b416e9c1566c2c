"""NVIDIA probe: nvidia-smi XML and table, Xid logs, NVML, the live fallback chain."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path
from typing import get_args

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_hetero.errors import ParseError
from pytest_hetero.probes.model import DEVICE_KIND, HEALTH_ORDER, Device, Health, Inventory, Vendor, worst
from pytest_hetero.probes.nvidia import detect_format, parse_nvidia_smi, probe_nvidia
from pytest_hetero.probes.nvidia_table import parse_nvidia_smi_table
from pytest_hetero.probes.nvidia_xid import parse_xid_log, xid_inventory
from pytest_hetero.probes.nvidia_xml import parse_nvidia_smi_xml

REAL = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real"
DATA = Path(__file__).parent / "data" / "probes"


def real(name: str) -> str:
    path = REAL / name
    if not path.exists():
        pytest.skip(f"shared fixture {path} not present")
    return path.read_text()


def xml(gpu_body: str, *, dtd: int = 12, attached: int = 1, gpus: int = 1) -> str:
    gpu = f'<gpu id="00000000:3B:00.0"><product_name>NVIDIA H100 80GB HBM3</product_name>{gpu_body}</gpu>'
    return (
        f'<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v{dtd}.dtd">\n'
        f"<nvidia_smi_log><timestamp>Mon Jan 20 10:18:26 2025</timestamp>"
        f"<driver_version>550.90.07</driver_version><cuda_version>12.4</cuda_version>"
        f"<attached_gpus>{attached}</attached_gpus>{gpu * gpus}</nvidia_smi_log>"
    )


# --- real field outputs (FACTS.md) -------------------------------------------------------


def test_xml_a100_mig_facts() -> None:
    inv = parse_nvidia_smi(real("nvidia-smi-q-x-a100-sxm4-80gb-mig.xml"))
    assert (inv.source, inv.timestamp, inv.driver_version, inv.cuda_version) == (
        "nvidia-smi-xml",
        "Fri Aug  4 11:44:30 2023",
        "535.54.03",
        "12.2",
    )
    assert inv.extra["dtd"] == "nvsmi_device_v12.dtd"
    assert inv.attached_count == 4 and len(inv.devices) == 1
    assert (inv.devices[0].index, inv.devices[0].extra["position"]) == (None, 0)
    assert inv.warnings == ("attached_gpus=4 but 1 <gpu> element(s) in the output",)
    gpu = inv.devices[0]
    assert (gpu.bus_id, gpu.name, gpu.extra["architecture"], gpu.extra["minor_number"]) == (
        "00000000:01:00.0",
        "NVIDIA A100-SXM4-80GB",
        "Ampere",
        1,
    )
    assert (gpu.extra["mig_mode_current"], gpu.extra["mig_mode_pending"]) == ("Enabled", "Enabled")
    assert [
        (
            p.index,
            p.gpu_instance_id,
            p.compute_instance_id,
            p.multiprocessors,
            p.memory_total_mib,
            p.memory_used_mib,
        )
        for p in gpu.partitions
    ] == [
        (0, 3, 0, 14, 19968, 12),
        (1, 4, 0, 14, 19968, 12),
        (2, 5, 0, 14, 19968, 12),
        (3, 6, 0, 14, 19968, 12),
    ]
    assert (
        gpu.memory_total_mib,
        gpu.extra["memory_reserved_mib"],
        gpu.memory_used_mib,
        gpu.extra["memory_free_mib"],
    ) == (81920, 869, 50, 80999)
    assert (
        gpu.extra["ecc_mode"],
        gpu.extra["ecc_volatile_uncorrectable"],
        gpu.extra["ecc_aggregate_uncorrectable"],
    ) == ("Enabled", 0, 0)
    assert (gpu.extra["retired_pages_sbe"], gpu.extra["retired_pages_dbe"]) == (None, None)
    assert gpu.extra["remapped_rows_uncorrectable"] is None
    assert (gpu.temperature_c, gpu.power_w, gpu.power_limit_w) == (27.0, 67.03, 500.0)
    assert (gpu.extra["performance_state"], gpu.utilisation_pct, gpu.extra["memory_util_pct"]) == (
        "P0",
        None,
        None,
    )
    assert gpu.extra["persistence_mode"] == "Disabled" and gpu.processes == ()
    assert (gpu.health, gpu.errors, inv.healthy) == ("ok", (), True)


def test_xml_t4_facts() -> None:
    inv = parse_nvidia_smi_xml(real("nvidia-smi-q-x-tesla-t4.xml"))
    assert (inv.extra["dtd"], inv.timestamp, inv.driver_version, inv.cuda_version, inv.attached_count) == (
        "nvsmi_device_v11.dtd",
        "Mon Apr 24 16:22:39 2023",
        "515.105.01",
        "11.7",
        1,
    )
    assert inv.warnings == ()
    gpu = inv.devices[0]
    assert (gpu.bus_id, gpu.name, gpu.extra["mig_mode_current"]) == ("00000000:00:1E.0", "Tesla T4", None)
    assert (
        gpu.memory_total_mib,
        gpu.extra["memory_reserved_mib"],
        gpu.memory_used_mib,
        gpu.extra["memory_free_mib"],
    ) == (15360, 388, 1032, 13939)
    assert (gpu.extra["ecc_mode"], gpu.extra["ecc_volatile_uncorrectable"]) == ("Enabled", 0)
    assert (gpu.extra["retired_pages_sbe"], gpu.extra["retired_pages_dbe"]) == (0, 0)
    assert (gpu.temperature_c, gpu.power_w, gpu.utilisation_pct, gpu.extra["memory_util_pct"]) == (
        40.0,
        26.78,
        0.0,
        0.0,
    )
    assert gpu.extra["performance_state"] == "P0"
    assert [(p.pid, p.type, p.name, p.used_memory_mib) for p in gpu.processes] == [
        (675, "G", "/usr/lib/xorg/Xorg", 22),
        (5762, "C", "python", 1005),
    ]
    assert gpu.health == "ok"


def test_table_h100_8gpu_facts() -> None:
    text = real("nvidia-smi-table-h100-8gpu.txt")
    assert not text.endswith("\n")
    inv = parse_nvidia_smi(text)
    assert (inv.source, inv.timestamp, inv.tool_version, inv.driver_version, inv.cuda_version) == (
        "nvidia-smi-table",
        "Mon Jan 20 10:18:26 2025",
        "550.90.07",
        "550.90.07",
        "12.4",
    )
    assert [d.index for d in inv.devices] == list(range(8))
    assert {d.name for d in inv.devices} == {"NVIDIA H100 80GB HBM3"}
    assert [d.bus_id for d in inv.devices] == [
        f"00000000:{b}:00.0" for b in ("19", "3B", "4C", "5D", "9B", "BB", "CB", "DB")
    ]
    for d in inv.devices:
        assert (d.memory_used_mib, d.memory_total_mib, d.utilisation_pct, d.power_limit_w) == (
            1,
            81559,
            0.0,
            700.0,
        )
        assert (
            d.extra["persistence_mode"],
            d.extra["ecc_volatile_uncorrectable"],
            d.extra["mig_mode_current"],
            d.extra["performance_state"],
            d.health,
        ) == ("On", 0, "Disabled", "P0", "ok")
        assert d.processes == ()
    assert inv.extra["processes_reported"] is True and inv.warnings == ()


def test_table_err_fan_facts() -> None:
    inv = parse_nvidia_smi(real("nvidia-smi-table-err-fan.txt"))
    assert (inv.tool_version, inv.driver_version, inv.cuda_version, inv.timestamp) == (
        "525.125.06",
        "525.125.06",
        "12.0",
        None,
    )
    (gpu,) = inv.devices
    assert (gpu.index, gpu.name, gpu.extra["name_truncated"], gpu.extra["persistence_mode"]) == (
        0,
        "NVIDIA GeForce ...",
        True,
        "Off",
    )
    assert (gpu.bus_id, gpu.extra["fan_speed_pct"], gpu.temperature_c, gpu.extra["performance_state"]) == (
        "00000000:01:00.0",
        None,
        38.0,
        "P5",
    )
    assert (gpu.power_w, gpu.power_limit_w, gpu.memory_used_mib, gpu.memory_total_mib) == (
        49.0,
        450.0,
        2021,
        23028,
    )
    assert (
        gpu.utilisation_pct,
        gpu.extra["compute_mode"],
        gpu.extra["ecc_volatile_uncorrectable"],
        gpu.extra["mig_mode_current"],
    ) == (0.0, "E. Process", 0, None)
    assert (gpu.health, gpu.errors) == ("warning", ("fan reads ERR!",))
    assert inv.extra["processes_reported"] is False
    assert inv.warnings == ("GPU 0 name truncated by nvidia-smi: 'NVIDIA GeForce ...'",)


def test_table_a100_mig_mixed_facts() -> None:
    inv = parse_nvidia_smi(real("nvidia-smi-table-a100-pcie-mig-mixed.txt"))
    assert (inv.timestamp, inv.driver_version, inv.cuda_version) == (
        "Fri Oct 11 12:04:56 2024",
        "535.129.03",
        "12.2",
    )
    g0, g1 = inv.devices
    assert (g0.name, g0.bus_id, g0.extra["mig_mode_current"], g0.extra["ecc_column"], g0.utilisation_pct) == (
        "NVIDIA A100-PCIE-40GB",
        "00000000:21:00.0",
        "Enabled",
        "On",
        None,
    )
    assert (g0.memory_used_mib, g0.memory_total_mib, g0.power_w, g0.power_limit_w) == (50, 40960, 31.0, 250.0)
    assert (
        g1.name,
        g1.bus_id,
        g1.extra["mig_mode_current"],
        g1.extra["ecc_volatile_uncorrectable"],
        g1.utilisation_pct,
        g1.memory_used_mib,
        g1.memory_total_mib,
    ) == ("NVIDIA A100-PCIE-40GB", "00000000:81:00.0", "Disabled", 0, 0.0, 4, 40960)
    assert [
        (
            p.gpu_instance_id,
            p.compute_instance_id,
            p.index,
            p.memory_used_mib,
            p.memory_total_mib,
            p.multiprocessors,
        )
        for p in g0.partitions
    ] == [(3, 0, 0, 12, 9856, 14), (4, 0, 1, 12, 9856, 14), (5, 0, 2, 12, 9856, 14), (6, 0, 3, 12, 9856, 14)]
    assert g1.partitions == () and g0.processes == g1.processes == ()


def test_table_new_kmd_header_hami_slice() -> None:
    inv = parse_nvidia_smi(real("nvidia-smi-table-rtxpro6000-hami-vgpu-slice.txt"))
    assert (inv.timestamp, inv.tool_version, inv.driver_version, inv.cuda_version) == (
        "Tue Jul  7 10:25:15 2026",
        "610.43.02",
        "610.43.02",
        "13.3",
    )
    (gpu,) = inv.devices
    assert (
        gpu.name,
        gpu.extra["persistence_mode"],
        gpu.bus_id,
        gpu.memory_used_mib,
        gpu.memory_total_mib,
    ) == ("NVIDIA RTX PRO 6000 Blac...", "Off", "00000000:05:00.0", 0, 8000)
    assert (gpu.power_w, gpu.power_limit_w, gpu.extra["performance_state"], gpu.temperature_c) == (
        48.0,
        600.0,
        "P0",
        34.0,
    )
    assert (gpu.extra["ecc_volatile_uncorrectable"], gpu.extra["mig_mode_current"]) == (0, "Disabled")
    assert inv.extra["processes_reported"] is False


def test_table_embedded_in_report_with_processes() -> None:
    inv = parse_nvidia_smi_table(real("quota-exceeded-timeslicing-tenancy-l4.txt"))
    assert (inv.driver_version, inv.cuda_version) == ("595.91.07", "13.2")
    (gpu,) = inv.devices
    assert (
        gpu.name,
        gpu.memory_used_mib,
        gpu.memory_total_mib,
        gpu.utilisation_pct,
        gpu.power_w,
        gpu.power_limit_w,
    ) == ("NVIDIA L4", 7291, 23034, 8.0, 36.0, 72.0)
    assert [(p.pid, p.type, p.name, p.used_memory_mib, p.gpu_instance_id) for p in gpu.processes] == [
        (27854, "C", "python3", 1400, None),
        (28018, "C", "python3", 2424, None),
        (28160, "C", "python3", 3448, None),
    ]


def test_dmesg_xid_119_facts() -> None:
    text = real("dmesg-xid-119-gsp-timeout-h100.txt")
    events = parse_xid_log(text)
    assert [(e.xid, e.pci_bus, e.pid, e.process_name) for e in events] == [
        (119, "0000:9b:00", 2024380, "nvidia-smi"),
        (119, "0000:9b:00", 2024380, "nvidia-smi"),
        (119, "0000:9b:00", 2024380, "nvidia-smi"),
        (119, "0000:9b:00", 1263500, "cache_mgr_main"),
        (119, "0000:9b:00", 1240590, "gpud"),
    ]
    assert (events[0].timestamp, events[-1].timestamp) == (
        "Sun Feb 23 16:24:18 2025",
        "Sun Feb 23 16:30:13 2025",
    )
    assert [e.message.split("Expected function ")[1].split(" (")[0] for e in events] == [
        "103",
        "10",
        "10",
        "76",
        "76",
    ]
    inv = parse_nvidia_smi(text)
    assert inv.source == "kernel-log" and not inv.healthy
    assert inv.global_errors == (
        (
            "Xid 119 on PCI:0000:9b:00 x5 (first Sun Feb 23 16:24:18 2025, last Sun Feb 23 16:30:13 2025): "
            "Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4)."
        ),
    )
    assert (inv.extra["reset_recommended"], inv.extra["hardware"], inv.extra["kernel"]) == (
        True,
        "Dell Inc. PowerEdge XE9680",
        "5.15.0-112-generic",
    )


def test_device_plugin_xid79_marked_unhealthy() -> None:
    text = real("device-plugin-log-xid79-marked-unhealthy.txt")
    (event,) = parse_xid_log(text)
    uuid = "GPU-00000000-0000-0000-0000-000000000001"
    assert (event.xid, event.uuid, event.source, event.timestamp, event.marked_unhealthy, event.critical) == (
        79,
        uuid,
        "device-plugin",
        "I0624 22:58:05.486697",
        True,
        True,
    )
    inv = parse_nvidia_smi(text)
    assert inv.source == "device-plugin-log" and inv.extra["unhealthy_devices"] == [uuid]
    assert inv.extra["nvml_events"] == [{"event_type": 8, "event_data": 109}]
    assert inv.global_errors[-1] == f"device {uuid} marked unhealthy by the device plugin"


# --- XML variants ---------------------------------------------------------------------------


def test_xml_v12_volatile_uncorrectable_ecc_is_critical() -> None:
    body = (
        "<ecc_errors><volatile><sram_correctable>5</sram_correctable><sram_uncorrectable>1</sram_uncorrectable>"
        "<dram_correctable>0</dram_correctable><dram_uncorrectable>2</dram_uncorrectable></volatile></ecc_errors>"
    )
    gpu = parse_nvidia_smi_xml(xml(body)).devices[0]
    assert (gpu.health, gpu.errors, gpu.extra["ecc_volatile_uncorrectable"]) == (
        "critical",
        ("volatile uncorrectable ECC errors: 3",),
        3,
    )


def test_xml_v10_double_bit_total_counts() -> None:
    body = (
        "<ecc_errors><volatile><single_bit><device_memory>4</device_memory><total>4</total></single_bit>"
        "<double_bit><device_memory>2</device_memory><register_file>0</register_file><total>2</total>"
        "</double_bit></volatile></ecc_errors>"
    )
    inv = parse_nvidia_smi_xml(xml(body, dtd=10))
    assert inv.warnings == () and inv.devices[0].extra["ecc_volatile_uncorrectable"] == 2
    assert inv.devices[0].health == "critical" and not inv.healthy


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            (
                "<retired_pages><pending_blacklist>Yes</pending_blacklist><pending_retirement>N/A</pending_retirement>"
                "</retired_pages>"
            ),
            "retired pages pending (reset or reboot needed)",
        ),
        (
            "<retired_pages><pending_retirement>Yes</pending_retirement></retired_pages>",
            "retired pages pending (reset or reboot needed)",
        ),
        (
            (
                "<remapped_rows><remapped_row_corr>0</remapped_row_corr><remapped_row_unc>1</remapped_row_unc>"
                "<remapped_row_pending>Yes</remapped_row_pending><remapped_row_failure>No</remapped_row_failure></remapped_rows>"
            ),
            "row remapping pending (reset needed)",
        ),
        (
            (
                "<remapped_rows><remapped_row_pending>No</remapped_row_pending><remapped_row_failure>Yes</remapped_row_failure>"
                "</remapped_rows>"
            ),
            "row remapping failure (GPU needs service)",
        ),
        ("<gpu_reset_status><reset_required>Yes</reset_required></gpu_reset_status>", "GPU reset required"),
    ],
)
def test_xml_memory_error_states_are_critical(body: str, reason: str) -> None:
    gpu = parse_nvidia_smi_xml(xml(body)).devices[0]
    assert (gpu.health, gpu.errors) == ("critical", (reason,))


def test_xml_error_and_na_fields() -> None:
    body = (
        "<uuid>[Unknown Error]</uuid><serial>N/A</serial><fb_memory_usage><total>[N/A]</total><used>ERR!</used>"
        "</fb_memory_usage><temperature><gpu_temp>Unknown Error</gpu_temp></temperature>"
        "<fan_speed>Requested functionality has been deprecated</fan_speed>"
        "<utilization><gpu_util>[N/A]</gpu_util></utilization>"
    )
    inv = parse_nvidia_smi_xml(xml(body))
    gpu = inv.devices[0]
    assert (
        gpu.uuid,
        gpu.serial,
        gpu.memory_total_mib,
        gpu.memory_used_mib,
        gpu.temperature_c,
        gpu.utilisation_pct,
        gpu.extra["fan_speed_pct"],
    ) == (None, None, None, None, None, None, None)
    assert gpu.health == "critical"
    assert gpu.errors == (
        "uuid reads [Unknown Error]",
        "fb_memory_usage/used reads ERR!",
        "temperature/gpu_temp reads Unknown Error",
        "3 fields unreadable: the GPU is probably lost or hung",
    )
    two = parse_nvidia_smi_xml(xml("<uuid>[Unknown Error]</uuid><fan_speed>ERR!</fan_speed>")).devices[0]
    assert (two.health, two.errors) == ("warning", ("fan_speed reads ERR!", "uuid reads [Unknown Error]"))
    assert inv.warnings == ("field fan_speed reads 'Requested functionality has been deprecated'",)


def test_xml_newer_dtd_instant_power_and_decimal_comma() -> None:
    body = (
        "<gpu_power_readings><average_power_draw>N/A</average_power_draw><instant_power_draw>113,47 W"
        "</instant_power_draw><current_power_limit>700,00 W</current_power_limit></gpu_power_readings>"
        "<temperature><gpu_temp>31 C</gpu_temp></temperature>"
    )
    inv = parse_nvidia_smi_xml(xml(body, dtd=14, attached=2, gpus=2))
    assert inv.warnings == ("DTD nvsmi_device_v14.dtd is outside v10..v13; read with the v13 rules",)
    assert [(d.index, d.power_w, d.power_limit_w, d.temperature_c) for d in inv.devices] == [
        (0, 113.47, 700.0, 31.0),
        (1, 113.47, 700.0, 31.0),
    ]


def test_xml_truncated_keeps_what_was_read() -> None:
    full = xml(
        "<fb_memory_usage><total>81559 MiB</total><used>1 MiB</used></fb_memory_usage>", attached=2, gpus=2
    )
    cut = full[: full.rindex("<fb_memory_usage>") + 30]
    inv = parse_nvidia_smi(cut)
    assert [(d.name, d.memory_total_mib) for d in inv.devices] == [
        ("NVIDIA H100 80GB HBM3", 81559),
        ("NVIDIA H100 80GB HBM3", None),
    ]
    assert inv.warnings == (
        "XML truncated or malformed (no element found: line 3, column 437); read up to that point",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "<html><body>502</body></html>",
            "not nvidia-smi -q -x XML: root element <html>, expected <nvidia_smi_log>",
        ),
        ("<<<", "not nvidia-smi -q -x XML: not well-formed (invalid token): line 1, column 1"),
        ("hello world", "not nvidia-smi output: no 'NVIDIA-SMI <version>' header line"),
    ],
)
def test_not_nvidia_output_raises_parse_error(text: str, message: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_nvidia_smi(text)
    assert info.value.message == message


# --- table variants ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            (
                "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
                "NVIDIA driver is installed and running.\n"
            ),
            (
                "no NVIDIA driver reachable: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                "Make sure that the latest NVIDIA driver is installed and running."
            ),
        ),
        ("No devices were found\n", "no NVIDIA devices found: No devices were found"),
        (
            "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.127\n",
            "NVML initialisation failed: Failed to initialize NVML: Driver/library version mismatch",
        ),
        (
            (
                "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA Display "
                "Driver is properly installed and present in your system."
            ),
            (
                "no NVIDIA driver library: NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure "
                "that the NVIDIA Display Driver is properly installed and present in your system."
            ),
        ),
        ("sh: 1: nvidia-smi: not found\n", "nvidia-smi not installed: nvidia-smi: not found"),
    ],
)
def test_tool_failure_messages_are_global_errors(text: str, error: str) -> None:
    inv = parse_nvidia_smi(text)
    assert (inv.global_errors, inv.devices, inv.healthy) == ((error,), (), False)


def test_table_unable_to_determine_handle_and_err_fields() -> None:
    inv = parse_nvidia_smi((DATA / "nvidia-smi-table-err-all.txt").read_text())
    g0, g1, lost = inv.devices
    assert (g0.index, g0.bus_id, g0.health, g0.temperature_c, g0.power_w, g0.utilisation_pct) == (
        0,
        "00000000:07:00.0",
        "critical",
        None,
        None,
        None,
    )
    assert g0.errors == (
        "volatile uncorrectable ECC reads ERR!",
        "fan reads ERR!",
        "temperature reads ERR!",
        "power draw reads ERR!",
        "power cap reads ERR!",
        "GPU utilisation reads ERR!",
        "6 fields unreadable: the GPU is probably lost or hung",
    )
    assert (g0.memory_used_mib, g0.processes[0].pid, g0.processes[0].used_memory_mib) == (40326, 88123, 40310)
    assert (g1.health, g1.temperature_c, g1.power_w) == ("ok", 31.0, 54.0)
    assert (lost.index, lost.bus_id, lost.health, lost.errors) == (
        None,
        "0000:3B:00.0",
        "critical",
        ("Unable to determine the device handle: Unknown Error",),
    )
    assert not inv.healthy


def test_table_r418_old_layout_ecc_and_processes() -> None:
    inv = parse_nvidia_smi((DATA / "nvidia-smi-table-r418-old.txt").read_text())
    assert (inv.driver_version, inv.cuda_version, inv.timestamp) == (
        "418.87.01",
        "10.1",
        "Tue Mar  3 09:12:01 2020",
    )
    g0, g1 = inv.devices
    assert (g0.name, g0.health, g0.errors, g0.utilisation_pct, g0.extra["mig_mode_current"]) == (
        "Tesla V100-SXM2...",
        "critical",
        ("volatile uncorrectable ECC errors: 2",),
        97.0,
        None,
    )
    assert (g1.extra["fan_speed_pct"], g1.health) == (30.0, "ok")
    assert [(p.pid, p.type, p.name, p.used_memory_mib) for p in g0.processes] == [
        (12345, "C", "/usr/bin/python3 train.py", 15010)
    ]
    assert g1.processes == () and inv.unhealthy_devices() == [g0]


def test_table_mig_devices_with_processes_in_gi() -> None:
    inv = parse_nvidia_smi((DATA / "nvidia-smi-table-mig-procs.txt").read_text())
    (gpu,) = inv.devices
    assert [
        (p.index, p.gpu_instance_id, p.memory_total_mib, p.multiprocessors, p.ecc_uncorrectable)
        for p in gpu.partitions
    ] == [(0, 1, 40320, 60, 0), (1, 9, 9984, 16, 3)]
    (proc,) = gpu.processes
    assert (proc.pid, proc.gpu_instance_id, proc.compute_instance_id, proc.name, proc.used_memory_mib) == (
        4242,
        1,
        0,
        "python -m vllm.entrypoints.api_server",
        20050,
    )


def test_table_truncated_mid_row() -> None:
    inv = parse_nvidia_smi((DATA / "nvidia-smi-table-truncated.txt").read_text())
    assert [(d.index, d.bus_id, d.memory_total_mib) for d in inv.devices] == [
        (0, "00000000:19:00.0", 81559),
        (1, "00000000:3B:00.0", None),
    ]
    assert inv.warnings == ("output ends inside the GPU table (truncated)",)


def test_blank_input_is_an_empty_inventory_with_warning() -> None:
    inv = parse_nvidia_smi("  \n\n")
    assert (inv.devices, inv.warnings) == ((), ("input is empty: nvidia-smi printed nothing",))


# --- Xid logs -------------------------------------------------------------------------------


def test_xid_variants_timestamps_unknown_pid_and_application_xids() -> None:
    text = (DATA / "dmesg-xid-mixed.txt").read_text()
    events = parse_xid_log(text)
    assert [(e.xid, e.pci_bus, e.pid, e.process_name, e.timestamp, e.critical) for e in events] == [
        (79, "0000:3b:00", None, "unknown", "812.334455", True),
        (13, "0000:5d:00", 3311, "python", "900.100000", False),
        (48, "0000:3b:00", 4410, "python3", "Feb 24 01:02:03", True),
        (94, "0000:bb:00", 4410, "python3", "2025-02-24T01:05:00,123456+00:00", True),
    ]
    assert events[0].message == "GPU has fallen off the bus."
    inv = xid_inventory(text)
    assert inv.warnings == (
        (
            "Xid 13 on PCI:0000:5d:00 x1 (first 900.100000, last 900.100000): Graphics SM Warp "
            "Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address"
        ),
    )
    assert [e.split(":")[0] for e in inv.global_errors] == ["Xid 79 on PCI", "Xid 48 on PCI", "Xid 94 on PCI"]


def test_log_without_xid_is_healthy() -> None:
    assert parse_xid_log("[ 1.0] usb 1-1: new high-speed USB device\n") == []
    inv = xid_inventory("")
    assert (inv.global_errors, inv.healthy, inv.extra["xid_events"]) == ((), True, [])


def test_detect_format() -> None:
    assert [
        detect_format(t)
        for t in (
            "",
            "<x/>",
            "| NVIDIA-SMI 550",
            "NVRM: Xid (PCI:0:0): 1, x",
            "XidCriticalError: Xid=1 on Device=GPU-1",
            "foo",
        )
    ] == ["empty", "nvidia-smi-xml", "nvidia-smi-table", "kernel-log", "device-plugin-log", "unknown"]


# --- NVML and the live chain ------------------------------------------------------------------


class _Mem:
    def __init__(self, total: int, used: int) -> None:
        self.total, self.used = total, used


def fake_pynvml(*, lost_index: int | None = None, ecc: int = 0) -> types.ModuleType:
    mod = types.ModuleType("fake_pynvml")

    class NVMLError(Exception):
        def __init__(self, value: int) -> None:
            self.value = value
            super().__init__({2: "Not Supported", 15: "GPU is lost"}.get(value, "Unknown Error"))

    mod.NVMLError = NVMLError  # type: ignore[attr-defined]
    mod.NVML_ERROR_NOT_SUPPORTED = 2  # type: ignore[attr-defined]

    def not_supported(*_a: object) -> None:
        raise NVMLError(2)

    def handle(i: int) -> int:
        if i == lost_index:
            raise NVMLError(15)
        return i

    def mig_handle(h: int, j: int) -> tuple[int, int]:
        if j > 1:
            raise NVMLError(13)
        return (h, j)

    funcs = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: "550.54.15",
        "nvmlSystemGetCudaDriverVersion": lambda: 12040,
        "nvmlSystemGetNVMLVersion": lambda: b"12.550.54.15",
        "nvmlDeviceGetCount": lambda: 2,
        "nvmlDeviceGetHandleByIndex": handle,
        "nvmlDeviceGetName": lambda h: (
            "NVIDIA H100 80GB HBM3 MIG 1g.10gb" if isinstance(h, tuple) else "NVIDIA H100 80GB HBM3"
        ),
        "nvmlDeviceGetUUID": lambda h: f"MIG-{h[1]}" if isinstance(h, tuple) else f"GPU-{h}",
        "nvmlDeviceGetSerial": not_supported,
        "nvmlDeviceGetPciInfo": lambda h: types.SimpleNamespace(busId=b"00000000:19:00.0"),
        "nvmlDeviceGetMemoryInfo": lambda h: (
            _Mem(10468982784, 11 * 1048576) if isinstance(h, tuple) else _Mem(85520809984, 1048576)
        ),
        "nvmlDeviceGetUtilizationRates": lambda h: types.SimpleNamespace(gpu=7, memory=1),
        "nvmlDeviceGetPowerUsage": lambda h: 72123,
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700000,
        "nvmlDeviceGetRemappedRows": lambda h: (0, 0, 0, 0),
        "nvmlDeviceGetMigMode": lambda h: (1, 1),
        "nvmlDeviceGetTotalEccErrors": lambda h, a, b: ecc,
        "nvmlDeviceGetRetiredPagesPendingStatus": not_supported,
        "nvmlDeviceGetTemperature": lambda h, s: 27,
        "nvmlDeviceGetMaxMigDeviceCount": lambda h: 7,
        "nvmlDeviceGetMigDeviceHandleByIndex": mig_handle,
        "nvmlDeviceGetGpuInstanceId": lambda h: 7 + h[1],
        "nvmlDeviceGetComputeInstanceId": lambda h: 0,
    }
    for name, fn in funcs.items():
        setattr(mod, name, fn)
    return mod


def test_nvml_reads_devices_mig_and_lost_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(lost_index=1, ecc=4))
    inv = probe_nvidia("/nonexistent-root")
    assert (inv.source, inv.driver_version, inv.cuda_version, inv.tool_version, inv.attached_count) == (
        "nvml",
        "550.54.15",
        "12.4",
        "12.550.54.15",
        2,
    )
    g0, g1 = inv.devices
    assert (g0.name, g0.uuid, g0.serial, g0.bus_id, g0.memory_total_mib, g0.memory_used_mib) == (
        "NVIDIA H100 80GB HBM3",
        "GPU-0",
        None,
        "00000000:19:00.0",
        81559,
        1,
    )
    assert (g0.temperature_c, g0.power_w, g0.power_limit_w, g0.utilisation_pct) == (27.0, 72.123, 700.0, 7.0)
    assert (g0.health, g0.errors) == ("critical", ("volatile uncorrectable ECC errors: 4",))
    assert [
        (p.index, p.profile, p.gpu_instance_id, p.uuid, p.memory_total_mib, p.memory_used_mib)
        for p in g0.partitions
    ] == [(0, "1g.10gb", 7, "MIG-0", 9984, 11), (1, "1g.10gb", 8, "MIG-1", 9984, 11)]
    assert (g1.index, g1.health, g1.errors) == (
        1,
        "critical",
        ("Unable to determine the device handle: GPU is lost",),
    )
    assert inv.extra["device_nodes"] == [] and inv.extra["fallback_reasons"] == []


def test_live_falls_back_to_nvidia_smi_xml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexit 0\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidia0").write_text("")
    (tmp_path / "dev" / "nvidiactl").write_text("")
    xml_text = xml("<fb_memory_usage><total>81559 MiB</total></fb_memory_usage>")

    def run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        assert cmd[1:] == ["-q", "-x"] and timeout == 60.0
        return subprocess.CompletedProcess(cmd, 0, xml_text, "")

    inv = probe_nvidia(str(tmp_path), run=run)
    assert (inv.source, inv.devices[0].memory_total_mib) == ("nvidia-smi-xml", 81559)
    assert inv.extra["device_nodes"] == ["/dev/nvidia0", "/dev/nvidiactl"]
    assert inv.extra["fallback_reasons"][0].startswith("NVML: pynvml not importable")


def test_live_smi_failure_message_is_global_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    inv = probe_nvidia(str(tmp_path), run=lambda c, t: subprocess.CompletedProcess(c, 9, msg + "\n", ""))
    assert inv.global_errors == (f"no NVIDIA driver reachable: {msg}",)


def test_live_without_anything(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", str(tmp_path))
    inv = probe_nvidia(str(tmp_path))
    assert inv.source == "none" and not inv.healthy
    assert inv.global_errors[0].startswith("no NVIDIA driver reachable (NVML: pynvml not importable")
    assert inv.global_errors[0].endswith("; nvidia-smi: not found on PATH)")


# --- properties -------------------------------------------------------------------------------

PIECES = st.sampled_from(
    [
        "<nvidia_smi_log>",
        "<gpu id='1'>",
        "</gpu>",
        "<fb_memory_usage><total>1,5 MiB</total>",
        "| NVIDIA-SMI 1 |",
        "|   0  X  On | 0000:01:00.0 Off | ERR! |",
        "|=====|",
        "+---+",
        "N/A",
        "NVRM: Xid (PCI:0:1): 79, pid=1, name=x, y",
        "\n",
        "|",
        "/",
        "MiB",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.lists(st.one_of(PIECES, st.text(max_size=5))).map("".join)))
@example("|   ²  NVIDIA H100 80GB HBM3  On  | 00000000:18:00.0 Off |  0 |\n[²] NVRM: Xid (PCI:0000:18:00): ²³, pid=²")
def test_any_text_gives_inventory_or_parse_error(text: str) -> None:
    for parse in (parse_nvidia_smi, parse_nvidia_smi_table, parse_nvidia_smi_xml):
        try:
            assert isinstance(parse(text), Inventory)
        except ParseError:
            pass
    assert isinstance(xid_inventory(text), Inventory)


def test_xml_after_lost_gpu_line_keeps_both() -> None:
    text = "Unable to determine the device handle for GPU 0000:9B:00.0: GPU is lost.  Reboot the system to recover this GPU\n"
    inv = parse_nvidia_smi(
        text + xml("<fb_memory_usage><total>81559 MiB</total></fb_memory_usage>", attached=2)
    )
    assert (inv.source, inv.attached_count, inv.raw.startswith("Unable")) == ("nvidia-smi-xml", 2, True)
    ok, lost = inv.devices
    assert (ok.index, ok.extra["position"], ok.memory_total_mib, ok.health) == (None, 0, 81559, "ok")
    assert (lost.index, lost.bus_id, lost.health, lost.errors) == (
        None,
        "0000:9B:00.0",
        "critical",
        ("Unable to determine the device handle: GPU is lost.  Reboot the system to recover this GPU",),
    )
    assert inv.warnings == ("attached_gpus=2 but 1 <gpu> element(s) in the output",)


def test_live_xml_with_lost_gpu_on_stderr(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    err = "Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error\n"
    inv = probe_nvidia(str(tmp_path), run=lambda c, t: subprocess.CompletedProcess(c, 15, xml(""), err))
    assert [(d.bus_id, d.health) for d in inv.devices] == [
        ("00000000:3B:00.0", "ok"),
        ("0000:3B:00.0", "critical"),
    ]
    assert not inv.healthy


def test_nvml_count_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = fake_pynvml()

    def broken_count() -> int:
        raise mod.NVMLError(999)

    mod.nvmlDeviceGetCount = broken_count  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    inv = probe_nvidia("/nonexistent")
    assert (inv.source, inv.devices, inv.global_errors) == (
        "nvml",
        (),
        ("NVML could not count the GPUs (nvmlDeviceGetCount: Unknown Error)",),
    )


def test_table_windows_driver_model_and_na_process_memory() -> None:
    inv = parse_nvidia_smi((DATA / "nvidia-smi-table-windows-wddm-na-memory.txt").read_text())
    (gpu,) = inv.devices
    assert (
        gpu.name,
        gpu.extra["driver_model"],
        gpu.extra["persistence_mode"],
        gpu.extra["display_active"],
    ) == (
        "NVIDIA GeForce RTX 4090",
        "WDDM",
        None,
        "On",
    )
    assert (
        gpu.extra["fan_speed_pct"],
        gpu.temperature_c,
        gpu.power_w,
        gpu.extra["ecc_column"],
        gpu.health,
    ) == (
        0.0,
        41.0,
        19.0,
        "Off",
        "ok",
    )
    assert [(p.pid, p.type, p.name, p.used_memory_mib) for p in gpu.processes] == [
        (1460, "C+G", "C:\\Windows\\System32\\dwm.exe", None),
        (9812, "C+G", "...crosoft\\Edge\\Application\\msedge.exe", None),
    ]


def test_xml_v13_split_sram_counters_and_inaccessible_fields() -> None:
    body = (
        "<ecc_errors><volatile><sram_correctable>0</sram_correctable>"
        "<sram_uncorrectable_parity>1</sram_uncorrectable_parity>"
        "<sram_uncorrectable_secded>0</sram_uncorrectable_secded><dram_correctable>0</dram_correctable>"
        "<dram_uncorrectable>0</dram_uncorrectable></volatile><aggregate><sram_uncorrectable>4</sram_uncorrectable>"
        "<sram_uncorrectable_parity>3</sram_uncorrectable_parity>"
        "<sram_uncorrectable_secded>1</sram_uncorrectable_secded></aggregate></ecc_errors>"
        "<gpu_power_readings><average_power_draw>612.20 W</average_power_draw>"
        "<instant_power_draw>618.35 W</instant_power_draw></gpu_power_readings>"
        "<serial>GPU is inaccessible</serial>"
    )
    inv = parse_nvidia_smi_xml(xml(body, dtd=13))
    gpu = inv.devices[0]
    assert inv.warnings == ()
    assert (
        gpu.extra["ecc_volatile_uncorrectable"],
        gpu.extra["ecc_aggregate_uncorrectable"],
        gpu.power_w,
    ) == (
        1,
        4,
        618.35,
    )
    assert (gpu.health, gpu.errors) == (
        "critical",
        ("volatile uncorrectable ECC errors: 1", "serial reads GPU is inaccessible"),
    )


def test_health_and_vendor_tables_cover_every_literal_value() -> None:
    assert set(HEALTH_ORDER) == set(get_args(Health)) and set(DEVICE_KIND) == set(get_args(Vendor))
    assert [Device(vendor, 3).label for vendor in get_args(Vendor)] == ["GPU 3", "NPU 3", "CPU 3"]
    assert (worst(), worst("ok", "unknown"), worst("warning", "critical", "ok")) == ("ok", "unknown", "critical")
