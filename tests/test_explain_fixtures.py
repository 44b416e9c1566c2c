"""Every real field output in ../shared/fixtures/real/ read by ``hetero explain``: the FACTS.md facts asserted.

One test per file; ``test_every_fixture_has_a_test`` fails when a file is added without its test.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from pytest_hetero.explain import Finding, Report, explain_bytes
from pytest_hetero.judge.failures import TABLE

REAL = Path(__file__).resolve().parents[2] / "shared/fixtures/real"
pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason=f"real fixtures not present at {REAL}")
COVERED: set[str] = set()


@cache
def _read(name: str) -> Report:
    COVERED.add(name)
    return explain_bytes((REAL / name).read_bytes())


def _all(report: Report, code: str) -> list[Finding]:
    return [f for f in report.findings if f.code == code]


def _one(report: Report, code: str) -> Finding:
    found = _all(report, code)
    assert len(found) == 1, (code, [f.code for f in report.findings])
    return found[0]


def _numbers(f: Finding) -> list[int]:
    return [line.number for line in f.lines]


def _problems(report: Report) -> list[tuple[str, str | None]]:
    return [(f.code, f.owner) for f in report.findings if f.severity in ("warning", "error")]


# --- kind 1: nvidia-smi and NVIDIA driver logs -----------------------------------------------------


def test_xml_a100_sxm4_mig() -> None:
    r = _read("nvidia-smi-q-x-a100-sxm4-80gb-mig.xml")
    head = _one(r, "gpu_report")
    assert head.timestamps == ("Fri Aug  4 11:44:30 2023",)
    q = head.quantities
    assert (q["dtd"], q["driver_version"], q["cuda_version"], q["attached_gpus"], q["gpus_listed"]) == (
        "nvsmi_device_v12.dtd", "535.54.03", "12.2", 4, 1)
    gpu = _one(r, "gpu_ok")
    assert dict(gpu.entity)["bus_id"] == "00000000:01:00.0"
    assert dict(gpu.entity)["gpu_name"] == "NVIDIA A100-SXM4-80GB"
    g = gpu.quantities
    assert (g["architecture"], g["minor_number"], g["mig_mode_current"], g["mig_mode_pending"]) == (
        "Ampere", 1, "Enabled", "Enabled")
    assert (g["memory_total_mib"], g["memory_reserved_mib"], g["memory_used_mib"], g["memory_free_mib"]) == (
        81920, 869, 50, 80999)
    assert (g["ecc_mode"], g["ecc_volatile_uncorrectable"], g["ecc_aggregate_uncorrectable"]) == ("Enabled", 0, 0)
    assert (g["temperature_c"], g["power_w"], g["power_limit_w"], g["performance_state"]) == (27.0, 67.03, 500.0, "P0")
    assert (g["persistence_mode"], g["mig_devices"]) == ("Disabled", 4)
    assert "utilisation_pct" not in g and "processes" not in g
    migs = _all(r, "mig_device")
    assert [dict(m.entity)["mig_device"] for m in migs] == ["0", "1", "2", "3"]
    assert [m.quantities["gpu_instance_id"] for m in migs] == [3, 4, 5, 6]
    assert {(m.quantities["compute_instance_id"], m.quantities["multiprocessors"], m.quantities["memory_total_mib"],
             m.quantities["memory_used_mib"]) for m in migs} == {(0, 14, 19968, 12)}
    assert r.exit_code() == 0


def test_xml_tesla_t4_two_processes() -> None:
    r = _read("nvidia-smi-q-x-tesla-t4.xml")
    head = _one(r, "gpu_report")
    assert head.timestamps == ("Mon Apr 24 16:22:39 2023",)
    assert (head.quantities["dtd"], head.quantities["driver_version"], head.quantities["cuda_version"],
            head.quantities["attached_gpus"]) == ("nvsmi_device_v11.dtd", "515.105.01", "11.7", 1)
    gpu = _one(r, "gpu_ok")
    g = gpu.quantities
    assert (dict(gpu.entity)["bus_id"], dict(gpu.entity)["gpu_name"]) == ("00000000:00:1E.0", "Tesla T4")
    assert (g["memory_total_mib"], g["memory_reserved_mib"], g["memory_used_mib"], g["memory_free_mib"]) == (
        15360, 388, 1032, 13939)
    assert (g["temperature_c"], g["power_w"], g["utilisation_pct"], g["performance_state"]) == (40.0, 26.78, 0.0, "P0")
    assert g["ecc_volatile_uncorrectable"] == 0 and "mig_mode_current" not in g
    procs = sorted((p.quantities["used_memory_mib"], dict(p.entity)["pid"], dict(p.entity)["process"], p.quantities["type"])
                   for p in _all(r, "gpu_process"))
    assert procs == [(22, "675", "/usr/lib/xorg/Xorg", "G"), (1005, "5762", "python", "C")]
    assert r.exit_code() == 0 and all(f.severity != "unrecognised" for f in r.findings)


def test_table_h100_8gpu() -> None:
    r = _read("nvidia-smi-table-h100-8gpu.txt")
    head = _one(r, "gpu_report")
    assert head.timestamps == ("Mon Jan 20 10:18:26 2025",)
    assert (head.quantities["tool_version"], head.quantities["driver_version"], head.quantities["cuda_version"]) == (
        "550.90.07", "550.90.07", "12.4")
    gpus = _all(r, "gpu_ok")
    assert [dict(g.entity)["gpu_index"] for g in gpus] == [str(i) for i in range(8)]
    assert [dict(g.entity)["bus_id"][-7:-5] for g in gpus] == ["19", "3B", "4C", "5D", "9B", "BB", "CB", "DB"]
    for g in gpus:
        q = g.quantities
        assert dict(g.entity)["gpu_name"] == "NVIDIA H100 80GB HBM3"
        assert (q["memory_used_mib"], q["memory_total_mib"], q["utilisation_pct"], q["ecc_volatile_uncorrectable"]) == (
            1, 81559, 0.0, 0)
        assert (q["persistence_mode"], q["mig_mode_current"], q["power_limit_w"], q["performance_state"]) == (
            "On", "Disabled", 700.0, "P0")
    assert not _all(r, "gpu_process") and r.exit_code() == 0


def test_table_err_fan() -> None:
    r = _read("nvidia-smi-table-err-fan.txt")
    head = _one(r, "gpu_report")
    assert (head.quantities["driver_version"], head.quantities["cuda_version"], head.quantities["processes_section"]) == (
        "525.125.06", "12.0", False)
    gpu = _one(r, "gpu_field_unreadable")
    assert (gpu.severity, gpu.owner) == ("warning", "infrastructure")
    assert "fan reads ERR!" in gpu.meaning
    assert dict(gpu.entity) == {"gpu_index": "0", "bus_id": "00000000:01:00.0", "gpu_name": "NVIDIA GeForce ..."}
    q = gpu.quantities
    assert (q["persistence_mode"], q["temperature_c"], q["performance_state"], q["power_w"], q["power_limit_w"]) == (
        "Off", 38.0, "P5", 49.0, 450.0)
    assert (q["memory_used_mib"], q["memory_total_mib"], q["utilisation_pct"], q["compute_mode"]) == (
        2021, 23028, 0.0, "E. Process")
    assert (q["ecc_volatile_uncorrectable"], q["name_truncated"]) == (0, True)
    assert "ERR!" in gpu.lines[1].text and r.exit_code() == 1


def test_table_a100_pcie_mig_mixed() -> None:
    r = _read("nvidia-smi-table-a100-pcie-mig-mixed.txt")
    assert _one(r, "gpu_report").timestamps == ("Fri Oct 11 12:04:56 2024",)
    g0, g1 = _all(r, "gpu_ok")
    assert (dict(g0.entity)["bus_id"], g0.quantities["mig_mode_current"], g0.quantities["ecc_column"]) == (
        "00000000:21:00.0", "Enabled", "On")
    assert "utilisation_pct" not in g0.quantities
    assert (g0.quantities["memory_used_mib"], g0.quantities["memory_total_mib"], g0.quantities["power_w"],
            g0.quantities["power_limit_w"]) == (50, 40960, 31.0, 250.0)
    assert (dict(g1.entity)["bus_id"], g1.quantities["mig_mode_current"], g1.quantities["ecc_volatile_uncorrectable"],
            g1.quantities["utilisation_pct"], g1.quantities["memory_used_mib"]) == ("00000000:81:00.0", "Disabled", 0, 0.0, 4)
    migs = _all(r, "mig_device")
    assert [(dict(m.entity)["gpu_index"], m.quantities["gpu_instance_id"], m.quantities["compute_instance_id"],
             dict(m.entity)["mig_device"]) for m in migs] == [("0", 3, 0, "0"), ("0", 4, 0, "1"), ("0", 5, 0, "2"),
                                                               ("0", 6, 0, "3")]
    assert {(m.quantities["memory_used_mib"], m.quantities["memory_total_mib"], m.quantities["multiprocessors"])
            for m in migs} == {(12, 9856, 14)}
    assert not _all(r, "gpu_process")


def test_table_new_header_hami_slice() -> None:
    r = _read("nvidia-smi-table-rtxpro6000-hami-vgpu-slice.txt")
    head = _one(r, "gpu_report")
    assert head.timestamps == ("Tue Jul  7 10:25:15 2026",)
    assert (head.quantities["tool_version"], head.quantities["driver_version"], head.quantities["cuda_version"]) == (
        "610.43.02", "610.43.02", "13.3")
    gpu = _one(r, "gpu_ok")
    q = gpu.quantities
    assert (dict(gpu.entity)["gpu_name"], dict(gpu.entity)["bus_id"]) == ("NVIDIA RTX PRO 6000 Blac...", "00000000:05:00.0")
    assert (q["memory_used_mib"], q["memory_total_mib"], q["power_w"], q["power_limit_w"]) == (0, 8000, 48.0, 600.0)
    assert (q["performance_state"], q["temperature_c"], q["ecc_volatile_uncorrectable"], q["mig_mode_current"]) == (
        "P0", 34.0, 0, "Disabled")
    assert q["persistence_mode"] == "Off"


def test_dmesg_xid_119_gsp() -> None:
    r = _read("dmesg-xid-119-gsp-timeout-h100.txt")
    xid = _one(r, "xid_119")
    assert (xid.count, xid.owner, xid.category, xid.severity) == (5, "infrastructure", "gpu-firmware", "error")
    assert xid.timestamps == ("Sun Feb 23 16:24:18 2025", "Sun Feb 23 16:30:13 2025")
    assert dict(xid.entity) == {"bus_id": "0000:9b:00", "uuid": "GPU-00000000-0000-0000-0000-000000000001",
                                "pid": "2024380,1263500,1240590", "process": "nvidia-smi,cache_mgr_main,gpud"}
    assert xid.quantities["gsp_functions"] == "103 (GSP_RM_ALLOC), 10 (FREE), 76 (GSP_RM_CONTROL)"
    assert (xid.quantities["gpu_label"], xid.quantities["reset_recommended"]) == ("GPU4", True)
    assert any("The GPU likely needs to be reset." in line.text for line in xid.lines)
    assert sum("NVRM: Xid" in line.text for line in xid.lines) == 5
    ctx = _one(r, "kernel_context")
    assert (ctx.quantities["hardware"], ctx.quantities["kernel_release"]) == ("Dell Inc. PowerEdge XE9680",
                                                                              "5.15.0-112-generic")
    assert ctx.quantities["gpus_mapped"] == "0000:9b:00=GPU-00000000-0000-0000-0000-000000000001"


def test_device_plugin_xid79_marked_unhealthy() -> None:
    r = _read("device-plugin-log-xid79-marked-unhealthy.txt")
    xid = _one(r, "xid_79")
    assert (xid.owner, dict(xid.entity)["uuid"], xid.timestamps) == (
        "infrastructure", "GPU-00000000-0000-0000-0000-000000000001", ("I0624 22:58:05.486697",))
    assert (xid.quantities["nvml_event_type"], xid.quantities["nvml_event_data"], xid.quantities["marked_unhealthy"]) == (
        8, 109, True)
    assert _numbers(xid) == [1, 2, 3]
    gone = _one(r, "device_marked_unhealthy")
    assert (gone.quantities["resource"], gone.quantities["allocatable_change"]) == ("nvidia.com/gpu", -1)
    assert gone.timestamps == ("I0624 22:58:05.486727",)
    assert all(ts.startswith("I0624 22:58:05") for f in r.findings for ts in f.timestamps)


def test_dmesg_iso_xid48_63_94_peermem() -> None:
    r = _read("dmesg-iso-xid48-dbe-xid63-row-remap-xid94-peermem.txt")
    x48, x63, x94 = _one(r, "xid_48"), _one(r, "xid_63"), _one(r, "xid_94")
    for x in (x48, x63, x94):
        assert (dict(x.entity)["bus_id"], x.owner) == ("0000:19:00", "infrastructure")
        assert all(ts.startswith("2024-11-15T12:02:03") for ts in x.timestamps)
    assert x48.timestamps == ("2024-11-15T12:02:03,470068+00:00",)
    assert "physAddr 0x12bac1c3e0 partition 2, subpartition 1" in str(x48.quantities["message"])
    assert "reset gpu to activate" in str(x63.quantities["message"]) and x63.quantities["needs_reset"] is True
    assert x94.count == 9
    assert x94.quantities["message"] == "Contained: SM (0x1). RST: No, D-RST: No"
    assert dict(x94.entity)["pid"] == "1248209" and dict(x94.entity)["process"] == "python3.10"
    assert x94.quantities["channels"] == ", ".join(f"0000000{c}" for c in "89abcdef")
    peer = _one(r, "peermem_invalid_context")
    assert (peer.count, peer.severity, peer.owner) == (30, "ok", None)
    assert sum(ts.startswith("2024-11-15T05:39:15") for ts in [line.text[:19] for line in peer.lines]) == 0 or True
    assert sum(line.text.startswith("2024-11-15T05:39:15") for line in peer.lines) == 10
    assert sum(line.text.startswith("2024-11-15T12:02:15") for line in peer.lines) == 20
    assert set(_problems(r)) == {("xid_48", "infrastructure"), ("xid_63", "infrastructure"), ("xid_94", "infrastructure")}


def test_dmesg_decode_xid13_then_xid43() -> None:
    r = _read("dmesg-decode-iso-xid13-out-of-range-then-xid43-excerpt.txt")
    x13, x43 = _one(r, "xid_13"), _one(r, "xid_43")
    assert (x13.count, x13.owner, dict(x13.entity)["bus_id"], x13.quantities["sm_locations"]) == (
        24, "algorithm", "0000:38:00", 8)
    assert "pid" not in x13.entity
    assert (x43.count, x43.owner, dict(x43.entity)["pid"], dict(x43.entity)["process"]) == (
        2, "algorithm", "2815167,2823801", "pt_main_thread")
    assert x43.timestamps == ("2025-01-21T02:21:33,502278+00:00", "2025-01-21T02:44:00,566421+00:00")
    assert x43.quantities["channels"] == "00000008"
    assert set(r.owners()) == {"algorithm"}


def test_kern_xid45_caused_by_nvlink() -> None:
    r = _read("kern-nvrm-xid45-caused-by-previous-xid149-xid145-four-gpus.txt")
    groups = {(dict(f.entity)["bus_id"], f.quantities["caused_by_xid"]): f for f in _all(r, "xid_45")}
    assert set(groups) == {("0000:dc:00", 149), ("0000:ed:00", 145), ("0000:ba:00", 145), ("0000:97:00", 145)}
    assert {bus: (f.count, dict(f.entity)["pid"], f.quantities["channels"]) for (bus, _), f in groups.items()} == {
        "0000:dc:00": (2, "1818990", "00000001, 00000002"),
        "0000:ed:00": (2, "1818992", "0000000c, 00000001"),
        "0000:ba:00": (2, "1818989", "00000002, 00000003"),
        "0000:97:00": (1, "1818987", "00000003"),
    }
    assert all(f.owner == "infrastructure" and f.category == "nvlink" and not f.timestamps for f in groups.values())
    assert all(dict(f.entity)["process"] == "python3" for f in groups.values())


def test_nvidia_smi_failed_in_driver_container() -> None:
    r = _read("nvidia-smi-failed-communicate-driver-in-driver-container-exit-9.txt")
    f = _one(r, "nvidia_driver_not_loaded")
    assert (f.owner, f.severity, f.quantities["exit_code"], f.quantities["gpus_readable"]) == ("platform", "error", 9, 0)
    assert "the NVIDIA driver is not loaded" in f.meaning
    assert _numbers(f) == [1, 3] and not _all(r, "gpu_ok") and r.exit_code() == 1


def test_query_a10_remap_pending() -> None:
    r = _read("nvidia-smi-q-a10-remapped-rows-uncorrectable-pending.txt")
    head = _one(r, "gpu_report")
    assert head.timestamps == ("Wed Sep 25 10:40:24 2024",)
    assert (head.quantities["driver_version"], head.quantities["cuda_version"], head.quantities["attached_gpus"]) == (
        "535.129.03", "12.2", 1)
    gpu = _one(r, "gpu_row_remap_pending")
    assert (gpu.owner, gpu.severity) == ("infrastructure", "error")
    assert dict(gpu.entity)["bus_id"] == "00000000:07:00.0" and dict(gpu.entity)["gpu_name"] == "NVIDIA A10"
    q = gpu.quantities
    assert (q["brand"], q["architecture"], q["display_mode"], q["persistence_mode"], q["virtualization_mode"]) == (
        "NVIDIA", "Ampere", "Enabled", "Enabled", "Pass-Through")
    assert (q["gsp_firmware"], q["pcie_generation"], q["pcie_width"], q["performance_state"]) == (
        "535.129.03", 4, "16x", "P8")
    assert (q["memory_total_mib"], q["memory_reserved_mib"], q["memory_used_mib"], q["memory_free_mib"],
            q["bar1_total_mib"]) == (23028, 512, 4, 22511, 32768)
    assert (q["utilisation_pct"], q["ecc_mode_current"], q["ecc_volatile_uncorrectable"]) == (0.0, "Enabled", 0)
    assert (q["remapped_rows_correctable"], q["remapped_rows_uncorrectable"], q["remapped_rows_pending"],
            q["remapped_rows_failure"], q["reset_required"]) == (0, 4, True, False, False)
    assert (q["temperature_c"], q["power_w"], q["power_limit_w"], q["processes_printed"]) == (33.0, 43.89, 150.0, "None")
    assert "mig_mode_current" not in q and "retired_pages_pending" not in q
    assert any("Pending" in line.text and "Yes" in line.text for line in gpu.lines)


def test_query_h800_legacy_names() -> None:
    r = _read("nvidia-smi-q-i0-h800-525-legacy-field-names.txt")
    assert r.blocks[0].kind == "prompt" and r.blocks[0].command == "nvidia-smi -q -i 0"
    head = _one(r, "gpu_report")
    assert head.timestamps == ("Fri Jun 30 17:20:02 2023",)
    assert (head.quantities["driver_version"], head.quantities["cuda_version"], head.quantities["attached_gpus"],
            head.quantities["gpus_listed"]) == ("525.105.17", "12.0", 8, 1)
    gpu = _one(r, "gpu_ok")
    q = gpu.quantities
    assert (dict(gpu.entity)["bus_id"], dict(gpu.entity)["gpu_name"], q["architecture"]) == (
        "00000000:18:00.0", "NVIDIA H800", "Hopper")
    assert (q["persistence_mode"], q["mig_mode_current"], q["mig_mode_pending"], q["module_id"], q["gsp_firmware"]) == (
        "Enabled", "Disabled", "Disabled", 5, "525.105.17")
    assert "virtualization_mode" not in q and (q["pcie_generation"], q["pcie_width"], q["performance_state"]) == (
        5, "16x", "P0")
    assert (q["memory_total_mib"], q["memory_reserved_mib"], q["memory_used_mib"], q["memory_free_mib"],
            q["bar1_total_mib"]) == (81559, 516, 0, 81042, 131072)
    assert (q["ecc_mode_current"], q["remapped_rows_correctable"], q["remapped_rows_uncorrectable"],
            q["remapped_rows_pending"], q["remapped_rows_failure"], q["remap_histogram_max"]) == (
        "Disabled", 0, 0, False, False, "2560 bank(s)")
    assert "ecc_volatile_uncorrectable" not in q and "reset_required" not in q
    assert (q["clocks_section"], q["temperature_c"], q["memory_temperature_c"], q["power_w"], q["power_limit_w"]) == (
        "Clocks Throttle Reasons", 35.0, 44.0, 74.71, 700.0)
    assert (q["fabric_state"], q["fabric_status"], q["processes_printed"]) == ("Completed", "Success", "None")
    assert r.exit_code() == 0


def test_query_vgpu_host_cuda_not_found() -> None:
    r = _read("nvidia-smi-q-d-memory-performance-vgpu-host-580-cuda-not-found-excerpt.txt")
    assert r.blocks[0].command == "nvidia-smi -q -d MEMORY,PERFORMANCE"
    head = _one(r, "gpu_report")
    assert head.timestamps == ("Wed Jan 14 15:17:09 2026",)
    q = head.quantities
    assert (q["driver_version"], q["cuda_version"], q["attached_gpus"], q["gpus_listed"]) == ("580.105.06", "Not Found", 4, 1)
    assert q["vgpu_driver_capability"] == "Heterogenous Multi-vGPU: Supported"
    gpu = _one(r, "gpu_ok")
    g = gpu.quantities
    assert dict(gpu.entity) == {"gpu_index": "0", "bus_id": "00000000:42:00.0"}
    assert g["performance_state"] == "P8" and "clock_event_reasons_active" not in g  # every reason Not Active
    assert (g["clock_event_counters_us.SW Power Capping"], g["clock_event_counters_us.Sync Boost"],
            g["clock_event_counters_us.SW Thermal Slowdown"], g["clock_event_counters_us.HW Thermal Slowdown"],
            g["clock_event_counters_us.HW Power Braking"]) == (1202176, 0, 0, 0, 0)
    assert r.exit_code() == 0


def test_dcgmi_discovery_h800() -> None:
    r = _read("dcgmi-discovery-l-8x-h800-no-nvswitch.txt")
    assert r.blocks[0].command == "dcgmi discovery -l"
    head = _one(r, "dcgm_discovery")
    assert (head.quantities["gpus"], head.quantities["gpus_listed"], head.quantities["nvswitches"]) == (8, 8, 0)
    gpus = _all(r, "gpu_ok")
    assert [dict(g.entity)["gpu_index"] for g in gpus] == [str(i) for i in range(8)]
    assert {dict(g.entity)["gpu_name"] for g in gpus} == {"NVIDIA H800"}
    assert [dict(g.entity)["bus_id"][9:11] for g in gpus] == ["18", "3E", "51", "65", "98", "BD", "CF", "E2"]
    assert [dict(g.entity)["uuid"] for g in gpus] == [f"GPU-00000000-0000-0000-0000-00000000000{i}" for i in range(1, 9)]
    assert r.exit_code() == 0


def test_dcgmi_diag_pcie_fail_nvlink_down() -> None:
    r = _read("dcgmi-diag-r2-pcie-fail-nvlink-links-down-pcie-a100-dcgm-2-4-6.txt")
    report = _one(r, "dcgm_diag_report")
    assert (report.quantities["tests"], report.quantities["failed"], report.quantities["truncated"]) == (1, 1, True)
    assert "dcgm_version" not in report.quantities
    fail = _one(r, "dcgm_test_failed")
    assert (fail.quantities["test"], fail.quantities["category"], fail.quantities["result"]) == (
        "PCIe", "Integration", "Fail - All")
    assert dict(fail.entity) == {"gpu_index": "all"}
    links = _one(r, "nvlink_link_down")
    assert (links.count, links.quantities["links_down"], dict(links.entity)["gpu_index"], links.owner) == (
        5, "0, 1, 2, 3, 4", "0", "infrastructure")
    assert "GPU 0's NvLink link 4 is currently down Run a field diagnostic on the GPU." in str(links.quantities["message"]) \
        or "link 0 is currently down Run a field diagnostic on the GPU." in str(links.quantities["message"])
    assert _numbers(links) == list(range(3, 12))


# --- kind 2: npu-smi and Ascend runtime --------------------------------------------------------------


def test_npu_910a_two_warnings() -> None:
    r = _read("npu-smi-info-910a-8npu-warning.txt")
    assert _one(r, "npu_report").quantities["tool_version"] == "24.1.RC2"
    ok = _all(r, "npu_ok")
    warn = _all(r, "npu_health_warning")
    assert [dict(f.entity)["npu_id"] for f in ok] == ["0", "1", "2", "4", "5", "6"]
    assert [dict(f.entity)["npu_id"] for f in warn] == ["3", "7"]
    assert {dict(f.entity)["npu_name"] for f in ok + warn} == {"xxx"}
    assert {dict(f.entity)["chip"] for f in ok + warn} == {"0"}
    power: dict[str, Any] = {dict(f.entity)["npu_id"]: f.quantities["power_w"] for f in ok + warn}  # numbers, read
    assert (power["3"], power["7"]) == (206.9, 203.2) and all(64.9 <= p <= 71.2 for k, p in power.items() if k not in "37")
    mem = {dict(f.entity)["npu_id"]: (f.quantities["memory_used_mb"], f.quantities["memory_total_mb"]) for f in ok + warn}
    assert (mem["0"], mem["3"], mem["7"]) == ((4252, 15137), (3616, 15039), (4521, 15039))
    assert {(f.quantities["hbm_used_mb"], f.quantities["hbm_total_mb"], f.quantities["hugepages_used"],
             f.quantities["hugepages_total"]) for f in ok + warn} == {(0, 32768, 1232, 1232)}
    procs = _all(r, "npu_process")
    assert len(procs) == 32 and {p.quantities["used_memory_mb"] for p in procs} == {686}
    assert {dict(p.entity)["process"] for p in procs} == {"hlt_host_devmm_"}
    assert sorted({dict(p.entity)["npu_id"] for p in procs}) == [str(i) for i in range(8)]
    assert (warn[0].owner, r.exit_code()) == ("infrastructure", 1)


def test_npu_310_4chip_v21() -> None:
    r = _read("npu-smi-info-310-4chip-v21.txt")
    assert (_one(r, "npu_report").quantities["tool_version"], _one(r, "npu_report").quantities["driver_version"]) == (
        "21.0.4", "21.0.4.B030")
    chips = _all(r, "npu_ok")
    assert [(dict(c.entity)["npu_id"], dict(c.entity)["chip"], c.quantities["device_id"]) for c in chips] == [
        ("6", "0", 3), ("6", "1", 4), ("6", "2", 5), ("6", "3", 6)]
    assert {dict(c.entity)["npu_name"] for c in chips} == {"310"} and {c.quantities["power_w"] for c in chips} == {12.8}
    assert [c.quantities["temperature_c"] for c in chips] == [73.0, 74.0, 70.0, 65.0]
    assert [(c.quantities["memory_used_mb"], c.quantities["memory_total_mb"]) for c in chips] == [
        (2703, 8192), (2867, 8192), (2867, 8192), (2867, 8192)]
    assert {(c.quantities["hugepages_used"], c.quantities["hugepages_total"]) for c in chips} == {(0, 970)}
    assert "hbm_total_mb" not in chips[0].quantities
    assert [dict(c.entity)["bus_id"] for c in chips] == ["0000:89:00.0", "0000:8A:00.0", "0000:8B:00.0", "0000:8C:00.0"]


def test_npu_310_4chip_v20_legacy() -> None:
    r = _read("npu-smi-info-310-4chip-v20-legacy.txt")
    assert _one(r, "npu_report").quantities["tool_version"] == "20.2.0"
    chips = _all(r, "npu_ok")
    assert [(dict(c.entity)["npu_id"], dict(c.entity)["chip"], c.quantities["device_id"]) for c in chips] == [
        ("215", str(i), i) for i in range(4)]
    assert [c.quantities["temperature_c"] for c in chips] == [56.0, 57.0, 57.0, 55.0]
    assert {(c.quantities["power_w"], c.quantities["memory_used_mb"], c.quantities["memory_total_mb"]) for c in chips} == {
        (12.8, 2703, 8192)}
    assert [dict(c.entity)["bus_id"] for c in chips] == ["0000:DA:00.0", "0000:DC:00.0", "0000:DD:00.0", "0000:DB:00.0"]
    assert "hugepages_total" not in chips[0].quantities


def test_npu_910b3_healthy() -> None:
    r = _read("npu-smi-info-910b3-8npu-healthy.txt")
    assert _one(r, "npu_report").quantities["tool_version"] == "24.1.rc1.b030"
    chips = _all(r, "npu_ok")
    assert len(chips) == 8 and {dict(c.entity)["npu_name"] for c in chips} == {"910B3"}
    assert all(92.0 <= float(str(c.quantities["power_w"])) <= 103.8 for c in chips)
    assert all(39 <= float(str(c.quantities["temperature_c"])) <= 45 for c in chips)
    assert [c.quantities["hbm_used_mb"] for c in chips] == [3318] + [3314] * 6 + [3315]
    assert {(c.quantities["hbm_total_mb"], c.quantities["memory_used_mb"], c.quantities["memory_total_mb"],
             c.quantities["aicore_pct"]) for c in chips} == {(65536, 0, 0, 0.0)}
    assert not _all(r, "npu_process") and r.exit_code() == 0


def test_npu_310p3_v25() -> None:
    r = _read("npu-smi-info-310p3-2npu-v25.txt")
    assert _one(r, "npu_report").quantities["tool_version"] == "25.5.1"
    a, b = _all(r, "npu_ok")
    assert (dict(a.entity)["npu_id"], a.quantities["device_id"], dict(a.entity)["bus_id"]) == ("4", 0, "0000:81:00.0")
    assert (dict(b.entity)["npu_id"], b.quantities["device_id"], dict(b.entity)["bus_id"]) == ("5", 1, "0000:85:00.0")
    assert {dict(x.entity)["npu_name"] for x in (a, b)} == {"310P3"} and "power_w" not in a.quantities
    assert (a.quantities["temperature_c"], b.quantities["temperature_c"]) == (37.0, 40.0)
    assert ((a.quantities["memory_used_mb"], a.quantities["memory_total_mb"]),
            (b.quantities["memory_used_mb"], b.quantities["memory_total_mb"])) == ((1848, 21525), (1849, 21525))
    assert "hbm_total_mb" not in a.quantities


def test_npu_26_wide_layout() -> None:
    r = _read("npu-smi-info-26-0-rc2-wide-layout-a3-ascend910-excerpt.txt")
    head = _one(r, "npu_report")
    assert (head.quantities["tool_version"], head.quantities["table_width"], head.quantities["npus"]) == ("26.0.rc2", 116, 1)
    c0, c1 = _all(r, "npu_ok")
    assert (dict(c0.entity)["chip"], c0.quantities["phy_id"], dict(c0.entity)["bus_id"], c0.quantities["power_w"],
            c0.quantities["hbm_used_mb"]) == ("0", 0, "0000:9D:00.0", 162.6, 3419)
    assert (dict(c1.entity)["chip"], c1.quantities["phy_id"], dict(c1.entity)["bus_id"], c1.quantities["hbm_used_mb"]) == (
        "1", 1, "0000:9F:00.0", 2874)
    assert "power_w" not in c1.quantities
    for c in (c0, c1):
        assert (dict(c.entity)["npu_name"], c.quantities["temperature_c"], c.quantities["hbm_total_mb"],
                c.quantities["hugepages_total"], c.quantities["aicore_pct"]) == ("Ascend910", 34.0, 65536, 0, 0.0)
    assert r.exit_code() == 0


def test_npu_t_common_two_npus() -> None:
    r = _read("npu-smi-info-t-common-two-npus-hbm-aicore-power.txt")
    chips = _all(r, "npu_chip")
    mcus = _all(r, "npu_mcu")
    assert [dict(c.entity)["npu_id"] for c in chips] == ["1", "7"] and [dict(m.entity)["npu_id"] for m in mcus] == ["1", "7"]
    one, seven = chips
    assert (one.quantities["hbm_usage_rate"], one.quantities["aicore_usage_rate"], one.quantities["aicore_freq_mhz"],
            one.quantities["aicore_curfreq_mhz"], one.quantities["aicore_count"], one.quantities["temperature_c"],
            one.quantities["npu_real_time_power_w"], one.quantities["memory_usage_rate"]) == (91, 6, 1800, 1800, 20, 46, 130.4, 0)
    assert (seven.quantities["hbm_usage_rate"], seven.quantities["aicore_usage_rate"], seven.quantities["temperature_c"],
            seven.quantities["npu_real_time_power_w"]) == (82, 70, 66, 331.1)
    assert [m.quantities["temperature_c"] for m in mcus] == [40, 58]
    assert "memory held, compute nearly idle" in one.meaning and "idle" not in seven.meaning
    assert all("health" not in key for c in chips for key in c.quantities) and r.exit_code() == 0


def test_npu_t_usages_and_memory() -> None:
    r = _read("npu-smi-info-t-usages-and-t-memory-npu1-32gb-hbm.txt")
    usages, memory = _all(r, "npu_chip")
    assert (usages.quantities["query"], memory.quantities["query"]) == ("usages", "memory")
    u = usages.quantities
    assert (u["ddr_capacity_mb"], u["ddr_usage_rate"], u["ddr_hugepages_total_page"], u["hbm_capacity_mb"],
            u["hbm_usage_rate"], u["aicore_usage_rate"], u["chip_id"]) == (15079, 14, 0, 32768, 0, 0, 0)
    m = memory.quantities
    assert (m["ddr_capacity_mb"], m["hbm_capacity_mb"], m["hbm_clock_speed_mhz"], m["hbm_temperature_c"],
            m["hbm_manufacturer_id"], m["chip_id"]) == (0, 32768, 1600, 35, "0x57", 0)
    assert {dict(f.entity)["npu_id"] for f in (usages, memory)} == {"1"}


def test_npu_t_topo_full_hccs() -> None:
    r = _read("npu-smi-info-t-topo-8npu-hccs-cpu-affinity.txt")
    topo = _one(r, "npu_topology")
    assert topo.meaning == "8 NPUs in a full HCCS mesh"
    assert (topo.quantities["npus"], topo.quantities["links_hccs"], topo.quantities["pairs"]) == (8, 56, 56)
    assert {k: v for k, v in topo.quantities.items() if k.startswith("cpu_affinity.")} == {
        "cpu_affinity.NPU0": "144-167", "cpu_affinity.NPU1": "144-167", "cpu_affinity.NPU2": "96-119",
        "cpu_affinity.NPU3": "96-119", "cpu_affinity.NPU4": "0-23", "cpu_affinity.NPU5": "0-23",
        "cpu_affinity.NPU6": "48-71", "cpu_affinity.NPU7": "48-71"}
    assert r.exit_code() == 0


def test_torch_npu_eh9999() -> None:
    r = _read("torch-npu-eh9999-init-env-failed-aborted.txt")
    f = _one(r, "cann_eh9999")
    assert (f.owner, f.quantities["cann_code"], f.quantities["acl_error"], f.quantities["process_end"]) == (
        "platform", "EH9999", 500001, "Aborted (core dumped)")
    texts = [line.text for line in f.lines]
    assert "EH9999: Inner Error!" in texts and any("[Init][Env]init env failed!" in t for t in texts)
    assert any("result = 500001" in t for t in texts)
    assert not [x for x in r.findings if x.severity == "unrecognised"]
    assert not [x for x in r.findings if x.code.startswith(("npu_", "gpu_"))]


def test_hccl_comm_init_failed_rank1_of_4() -> None:
    r = _read("hccl-hcclcomminitrootinfo-failed-mindie-310p-rank1-of-4.txt")
    f = _one(r, "hccl_init_failed")
    assert (f.count, _numbers(f), f.owner) == (8, list(range(1, 9)), "platform")
    assert (f.quantities["rank"], f.quantities["rank_size"], f.quantities["hccl_error"],
            f.quantities["hccl_error_name"], f.quantities["errno"], f.quantities["execute_status"]) == (
        1, 4, 2, "HCCL_E_PTR", "0x0000000005000002", 3)
    assert f.timestamps[0] == "2025-05-13-02:25:58.068.817"
    assert dict(f.entity) == {"pid": "36035", "process": "mindie_llm_backend_connector"}
    assert len(r.findings) == 1


# --- kind 3: nodes ----------------------------------------------------------------------------------


def test_labels_h100_mig_mixed() -> None:
    r = _read("node-labels-h100-mig-mixed-gfd.json")
    f = _one(r, "node_labels")
    q = f.quantities
    assert q["labels"] == 197 and dict(f.entity) == {"node": "node-a1"}
    expected = {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.family": "hopper", "nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/cuda.driver.major": "550", "nvidia.com/cuda.driver.minor": "54", "nvidia.com/cuda.driver.rev": "15",
        "nvidia.com/mig.capable": "true", "nvidia.com/mig.strategy": "mixed", "nvidia.com/mig.config": "all-balanced",
        "nvidia.com/mig.config.state": "success", "nvidia.com/mig-1g.10gb.count": "2", "nvidia.com/mig-1g.10gb.memory": "9984",
        "nvidia.com/mig-1g.10gb.multiprocessors": "16", "nvidia.com/mig-2g.20gb.count": "1",
        "nvidia.com/mig-3g.40gb.count": "1", "nvidia.com/mig-3g.40gb.memory": "40320", "nvidia.com/gpu.replicas": "0",
        "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/mps.capable": "false",
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "feature.node.kubernetes.io/kernel-version.full": "5.15.0-102-generic",
    }
    assert {k: q.get(k) for k in expected} == expected
    assert "MIG 2x1g.10gb, 1x2g.20gb, 1x3g.40gb" in f.meaning
    assert not _all(r, "node_resources")


def test_describe_gpu_7_of_8() -> None:
    r = _read("node-describe-gpu-7-of-8-allocatable.txt")
    res = _one(r, "node_resources")
    q = res.quantities
    assert (q["capacity.nvidia.com/gpu"], q["allocatable.nvidia.com/gpu"], q["capacity.cpu"], q["allocatable.cpu"]) == (
        "7", "7", "96", "96")
    assert (q["capacity.memory"], q["allocatable.memory"], q["capacity.pods"]) == ("527422416Ki", "527320016Ki", "110")
    node = _one(r, "node")
    assert (node.quantities["roles"], dict(node.entity)["node"]) == ("worker", "node-a1")
    assert r.exit_code() == 0 and not [f for f in r.findings if f.severity == "unrecognised"]


def test_hami_register_annotation_jsonpath() -> None:
    r = _read("node-hami-register-annotation-rtxpro6000.txt")
    f = _one(r, "hami_devices")
    q = f.quantities
    assert (q["printed_value"], q["vgpu_slots"], q["devices"]) == (10, 10, 1)
    assert (q["device0.count"], q["device0.devmem_mib"], q["device0.devcore"], q["device0.type"], q["device0.mode"],
            q["device0.health"]) == (10, 97887, 100, "NVIDIA RTX PRO 6000 Blackwell Server Edition", "hami-core", True)
    assert _numbers(f) == [1, 2] and r.exit_code() == 0
    assert not any(k.startswith("allocatable.nvidia.com/gpumem") for k in q)


def test_ascend310p_get_nodes_and_labels() -> None:
    r = _read("node-ascend310p-labels-hami.txt")
    node = _one(r, "node")
    q = node.quantities
    assert (dict(node.entity)["node"], q["status"], q["roles"], q["age"], q["version"]) == (
        "node-a1", "Ready", "control-plane,worker", "358d", "v1.28.15")
    assert (q["os_image"], q["kernel_version"], q["container_runtime"]) == (
        "Kylin Linux Advanced Server V10 (Lance)", "4.19.90-52.48.v2207.ky10.aarch64", "containerd://1.7.1")
    labels = _one(r, "node_labels").quantities
    assert (labels["accelerator"], labels["ascend"], labels["servertype"]) == ("huawei-Ascend310P", "on", "Ascend310P-8")


def test_ascend310p_describe_grep() -> None:
    r = _read("node-ascend310p-describe-grep-capacity-allocated.txt")
    q = _one(r, "node_resources").quantities
    assert (q["listed.huawei.com/Ascend310P"], q["listed.huawei.com/Ascend310P-memory"]) == ("14", "43054")
    assert (q["allocated.huawei.com/Ascend310P.requests"], q["allocated.huawei.com/Ascend310P.limits"]) == ("2", "2")
    assert (q["allocated.huawei.com/Ascend310P-memory.requests"], q["allocated.huawei.com/Ascend310P-memory.limits"]) == (
        "16384", "16384")


def test_node_status_yaml_one_gpu() -> None:
    r = _read("node-status-yaml-1-gpu-capacity-allocatable.yaml")
    f = _one(r, "node_resources")
    q = f.quantities
    assert (q["address.InternalIP"], q["address.Hostname"], dict(f.entity)["node"]) == ("192.0.2.10", "node-a1", "node-a1")
    for side in ("allocatable", "capacity"):
        assert (q[f"{side}.nvidia.com/gpu"], q[f"{side}.cpu"], q[f"{side}.memory"], q[f"{side}.pods"],
                q[f"{side}.hugepages-1Gi"], q[f"{side}.hugepages-2Mi"]) == ("1", "16", "32777408Ki", "110", "0", "0")
    assert (q["capacity.ephemeral-storage"], q["allocatable.ephemeral-storage"]) == ("8679376Ki", "8443296967")
    assert [(x.code, x.owner) for x in r.findings] == [("node_resources", None)]


def test_bottlerocket_gpu_shared_128() -> None:
    r = _read("node-describe-capacity-gpu-0-gpu-shared-128-mig-timeslicing-bottlerocket.txt")
    settings = _one(r, "device_plugin_settings").quantities
    assert (settings["device-id-strategy"], settings["device-list-strategy"], settings["device-partitioning-strategy"],
            settings["device-sharing-strategy"], settings["pass-device-specs"], settings["time-slicing.replicas"]) == (
        "index", "volume-mounts", "mig", "time-slicing", True, 4)
    assert (settings["mig.profile.a100.40gb"], settings["mig.profile.g100.80gb"], settings["mig.profile.h100.80gb"]) == (
        "7", "1g.5gb", "4")
    res = _one(r, "node_resources")
    q = res.quantities
    assert (q["capacity.nvidia.com/gpu"], q["allocatable.nvidia.com/gpu"], q["capacity.nvidia.com/gpu.shared"],
            q["allocatable.nvidia.com/gpu.shared"]) == ("0", "0", "128", "128")
    assert (q["capacity.cpu"], q["allocatable.cpu"], q["capacity.memory"], q["allocatable.memory"]) == (
        "192", "191450m", "2097096404Ki", "2095606484Ki")
    assert (q["capacity.ephemeral-storage"], q["allocatable.ephemeral-storage"], q["capacity.pods"]) == (
        "418124376Ki", "384269682460", "100")
    assert "nvidia.com/gpu.shared is offered" in res.meaning
    assert r.exit_code() == 0


def test_hami_handshake_requesting_devices_deleted() -> None:
    r = _read("node-describe-hami-register-annotation-handshake-requesting-gtx-titan-x.txt")
    gone = _one(r, "hami_devices_deleted")
    assert (gone.owner, gone.severity, gone.timestamps) == ("platform", "error", ("2024.03.13 14:41:43", "2024.03.13 14:41:58"))
    assert (gone.quantities["handshake"], gone.quantities["requested_at"]) == ("Requesting", "2024.03.13 14:41:43")
    dev = _one(r, "hami_devices").quantities
    assert (dev["devices"], dev["device0.count"], dev["device0.devmem_mib"], dev["device0.devcore"], dev["device0.type"],
            dev["device0.numa"], dev["device0.health"]) == (1, 10, 12288, 100, "NVIDIA-NVIDIA GeForce GTX TITAN X", 0, True)
    node = _one(r, "node")
    assert (node.quantities["roles"], node.quantities["unschedulable"], node.timestamps) == (
        "<none>", "false", ("Wed, 13 Mar 2024 13:51:50 +0000",))
    assert node.quantities["lease_renew"] == "Wed, 13 Mar 2024 14:41:55 +0000"
    assert _one(r, "node_labels").quantities["gpu"] == "on"
    assert not _all(r, "node_taints") and r.owners() == ("platform",)


def test_notready_unreachable_get_nodes_and_describe() -> None:
    r = _read("node-notready-unreachable-taints-get-nodes-and-describe-excerpt.txt")
    table = _one(r, "node_not_ready")
    assert (dict(table.entity)["node"], table.quantities["roles"], table.quantities["age"], table.quantities["version"]) == (
        "node-a1", "<none>", "17h", "v1.15.11")
    ready = _one(r, "node") if len(_all(r, "node")) == 1 else next(f for f in _all(r, "node") if f.kind == "kubectl-table")
    assert dict(ready.entity)["node"] == "node-b1" and ready.quantities["roles"] == "master"
    cut = _one(r, "node_unreachable")
    assert cut.quantities["taints"] == "node.kubernetes.io/unreachable:NoExecute, node.kubernetes.io/unreachable:NoSchedule"
    assert (cut.owner, dict(cut.entity)["node"]) == ("infrastructure", "node-a1")
    described = next(f for f in _all(r, "node") if f.kind == "describe-node")
    assert described.quantities["unschedulable"] == "false"
    assert described.timestamps == ("Sun, 31 May 2020 19:50:20 +0800",)
    assert described.quantities["lease_renewed_s_after_creation"] == 10
    assert r.blocks[1].kind == "prompt" and r.owners() == ("infrastructure",)


def test_karpenter_g5_not_ready_taints() -> None:
    r = _read("node-describe-g5-xlarge-karpenter-spot-gpu-and-not-ready-taints.txt")
    labels = _one(r, "node_labels").quantities
    assert (labels["node.kubernetes.io/instance-type"], labels["beta.kubernetes.io/instance-type"]) == ("g5.xlarge",) * 2
    assert (labels["topology.kubernetes.io/region"], labels["topology.kubernetes.io/zone"]) == ("eu-west-1", "eu-west-1b")
    assert (labels["karpenter.sh/capacity-type"], labels["karpenter.sh/provisioner-name"], labels["gfd_labels"]) == (
        "spot", "gpu-triton", 0)
    nr = _one(r, "node_not_ready")
    assert (nr.owner, nr.severity) == ("platform", "error")
    assert nr.quantities["taints"] == ("node.kubernetes.io/not-ready:NoExecute, node.kubernetes.io/not-ready:NoSchedule, "
                                       "karpenter.sh/not-ready:NoSchedule")
    tol = _one(r, "node_taints")
    assert tol.quantities["taints"] == "tritonOnly=true:NoExecute, nvidia.com/gpu=true:NoSchedule"
    assert len(_numbers(nr)) == 5
    node = _one(r, "node")
    assert (node.quantities["unschedulable"], node.timestamps) == ("false", ("Thu, 17 Mar 2022 10:11:37 +0100",))
    assert not _all(r, "node_resources")


# --- kind 4: scheduling and admission ----------------------------------------------------------------


def test_hami_card_insufficient_memory() -> None:
    r = _read("event-hami-failedscheduling-cardinsufficientmemory.txt")
    pod = _one(r, "pod_pending")
    assert (dict(pod.entity)["pod"], pod.quantities["ready"], pod.quantities["restarts"], pod.quantities["age"]) == (
        "hami-oversubscribe", "0/1", "0", "15s")
    unfit = _one(r, "device_unfit")
    assert (unfit.age, unfit.quantities["nodes"], unfit.quantities["total_nodes"], unfit.quantities["event_reason"]) == (
        "15s", 1, 1, "FailedScheduling")
    assert _one(r, "preemption_no_victims").quantities["nodes"] == 1
    mem = _one(r, "device_memory_insufficient")
    assert (mem.count, mem.age, mem.quantities["repeated_over"], dict(mem.entity)["node"]) == (2, "16s", "16s", "node-a1")
    assert (mem.quantities["event_reason"], dict(mem.entity)["reporter"]) == ("FilteringFailed", "hami-scheduler")
    assert mem.meaning == "1 nodes CardInsufficientMemory(node-a1)"


def test_kueue_hami_vgpu_quota() -> None:
    r = _read("kueue-workload-pending-hami-vgpu-quota.yaml")
    a, b = _all(r, "queue_quota_insufficient")
    assert (a.quantities["resource"], a.quantities["more_needed"], a.quantities["requested"], a.quantities["flavor"]) == (
        "nvidia.com/gpu", "1", "1", "hami-t4")
    assert (b.quantities["resource"], b.quantities["more_needed"], b.quantities["requested"]) == (
        "nvidia.com/total-gpucores", "50", "50")
    assert {f.owner for f in (a, b)} == {"business"} and a.quantities["condition_reason"] == "Pending"
    assert len(r.findings) == 2


def test_volcano_podgroup_gang_wrapped() -> None:
    r = _read("volcano-podgroup-gang-unschedulable-vgpu.txt")
    (f,) = r.findings
    assert f.code == "gang_unschedulable"
    assert f.meaning == ("1/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable; "
                         "Pending: 1 Schedulable, 1 Unschedulable")
    q = f.quantities
    assert (q["condition_reason"], q["condition_type"], q["phase"]) == ("NotEnoughResources", "Unschedulable", "Inqueue")
    assert (q["unschedulable_tasks"], q["tasks"], q["pending"], q["min_available"], q["pending_schedulable"],
            q["pending_unschedulable"]) == ("1", "2", "2", "2", "1", "1")


def test_timeslicing_quota_report() -> None:
    r = _read("quota-exceeded-timeslicing-tenancy-l4.txt")
    assert _one(r, "context").timestamps == ("2026-09-30T19:41:46Z",)
    res = _one(r, "node_resources").quantities
    assert (res["capacity.nvidia.com/gpu"], res["allocatable.nvidia.com/gpu"]) == ("4", "4")
    labels = _one(r, "node_labels").quantities
    assert (labels["nvidia.com/gpu.product"], labels["nvidia.com/gpu.replicas"], labels["nvidia.com/gpu.sharing-strategy"]) == (
        "NVIDIA-L4-SHARED", "4", "time-slicing")
    config = _one(r, "device_plugin_settings").quantities
    assert (config["ts-4.sharing.timeSlicing.resources[0].replicas"], config["ts-4.flags.migStrategy"]) == (4, "none")
    pods = _all(r, "pod_running")
    assert [dict(p.entity)["pod"] for p in pods] == ["share-a1", "share-a2", "share-b1"]
    assert {dict(p.entity)["node"] for p in pods} == {"node-a1"}
    quotas = {dict(q.entity)["namespace"]: (q.quantities["used.requests.nvidia.com/gpu"],
                                            q.quantities["hard.requests.nvidia.com/gpu"]) for q in _all(r, "quota_usage")}
    assert quotas == {"tenant-a": ("2", "2"), "tenant-b": ("1", "2")}
    deny = _one(r, "quota_exceeded")
    assert (deny.quantities["requested"], deny.quantities["used"], deny.quantities["limited"], deny.quantities["object_name"],
            deny.quantities["resource"], deny.owner) == ("1", "2", "2", "share-a3", "nvidia.com/gpu", "business")
    head = _one(r, "gpu_report")
    assert (head.quantities["driver_version"], head.quantities["cuda_version"]) == ("595.91.07", "13.2")
    gpu = _one(r, "gpu_ok")
    assert (dict(gpu.entity)["gpu_name"], gpu.quantities["memory_used_mib"], gpu.quantities["memory_total_mib"],
            gpu.quantities["utilisation_pct"], gpu.quantities["power_w"], gpu.quantities["power_limit_w"]) == (
        "NVIDIA L4", 7291, 23034, 8.0, 36.0, 72.0)
    procs = _all(r, "gpu_process")
    used: list[Any] = [p.quantities["used_memory_mib"] for p in procs]  # numbers, read from the table
    assert sorted(used) == [1400, 2424, 3448]
    assert {dict(p.entity)["process"] for p in procs} == {"python3"}


def test_kueue_flavors_affinity_and_max_capacity() -> None:
    r = _read("kueue-workload-condition-quotareserved-false-flavors-affinity-and-max-capacity.yaml")
    flavors = _all(r, "queue_flavor_mismatch")
    assert [f.quantities["flavor"] for f in flavors] == ["default-cpu-flavor", "dws-flex-flavor", "spot-flavor"]
    cap = _one(r, "queue_request_exceeds_max")
    assert (cap.quantities["resource"], cap.quantities["flavor"], cap.quantities["previously_requested"],
            cap.quantities["requested"], cap.quantities["maximum"], cap.owner) == (
        "cpu", "reservation-flavor", "2", "5", "4", "business")
    assert cap.quantities["pod_set"] == "gpu-worker-group"
    assert (cap.quantities["condition_type"], cap.quantities["condition_reason"]) == ("QuotaReserved", "Pending")


def test_gatekeeper_denial_two_violations() -> None:
    r = _read("admission-gatekeeper-denied-gpu-pod-no-cpu-memory-limit.txt")
    cpu, mem = _all(r, "webhook_denied")
    for f in (cpu, mem):
        assert (f.owner, f.quantities["webhook"], f.quantities["constraint"]) == (
            "algorithm", "validation.gatekeeper.sh", "userpodlimits")
        assert dict(f.entity)["container"] == "cudasample"
        assert _numbers(f) == [1, 2]
    assert (cpu.quantities["violation"], mem.quantities["violation"]) == (
        "container <cudasample> has no cpu limit", "container <cudasample> has no memory limit")
    assert not _all(r, "quota_exceeded") and "resource" not in cpu.quantities


def test_volcano_queue_capability() -> None:
    r = _read("volcano-queue-describe-gpu-capability-inqueue-1.txt")
    f = _one(r, "volcano_queue_jobs_waiting")
    q = f.quantities
    assert (q["spec.capability.cpu"], q["spec.capability.memory"], q["spec.capability.nvidia.com/gtx-1080-ti"]) == (
        "8", "20Gi", "3")
    assert (q["spec.reclaimable"], q["spec.weight"], q["status.inqueue"], q["status.state"], q["events"]) == (
        "true", "2", "1", "Open", "<none>")
    # a job waits (Inqueue 1) under the queue's capability: a warning owned by the queue's share, business
    # (FACTS.md); it was an "ok" fact carrying an owner (issue 31 item 5)
    assert "status.pending" not in q and (f.severity, f.failure, f.owner) == ("warning", "team_share_exceeded",
                                                                             "business")


def test_volcano_default_queue_status_update_error() -> None:
    r = _read("volcano-default-queue-allocated-zero-and-status-update-error.txt")
    queue = _one(r, "volcano_queue")
    q = queue.quantities
    assert (dict(queue.entity)["queue"], q["allocated.cpu"], q["allocated.memory"], q["state"], q["weight"],
            q["reclaimable"], q["guarantee"]) == ("default", "0", "0", "Open", 1, True, "{}")
    err = _one(r, "queue_status_update_failed")
    assert (err.owner, err.timestamps, dict(err.entity)["queue"]) == ("platform", ("E0912 02:06:30.261244",), "default")
    assert "status.allocated: Required value." in str(err.quantities["why"])
    info = _one(r, "component_log")
    assert info.count == 3 and info.timestamps == ("I0912 02:06:30.246475", "I0912 02:06:30.261286")


def test_hami_insufficient_ascend910b3_memory() -> None:
    r = _read("event-hami-failedscheduling-insufficient-ascend910b3-memory.txt")
    mem = _all(r, "insufficient_resource")
    assert [f.age for f in mem] == ["27s", "25s"]
    for f in mem:
        assert (f.quantities["resource"], f.quantities["nodes"], f.quantities["total_nodes"], f.owner) == (
            "huawei.com/Ascend910B3-memory", 1, 1, "platform")
        assert (dict(f.entity)["reporter"], f.quantities["event_reason"], f.quantities["event_type"]) == (
            "hami-scheduler", "FailedScheduling", "Warning")
    assert [f.age for f in _all(r, "preemption_no_victims")] == ["27s", "25s"]


# --- kind 5: startup failures ------------------------------------------------------------------------


def test_gfd_crashloop_container_cli_timeout() -> None:
    r = _read("pod-describe-gfd-crashloop-nvidia-container-cli-rpc-timeout.txt")
    crash, cause = _one(r, "crash_loop"), _one(r, "device_runtime_error")
    assert (crash.quantities["last_state_reason"], dict(crash.entity)["container"]) == ("StartError", "gpu-feature-discovery")
    assert crash.quantities["image"] == "nvcr.io/nvidia/gpu-feature-discovery:v0.8.0-ubi8"
    assert cause.meaning.endswith("stderr: nvidia-container-cli.real: initialization error: driver rpc error: timed out: unknown")
    assert cause.meaning.startswith("failed to create containerd task: failed to create shim task: OCI runtime create failed")
    assert cause.quantities["state_reason"] == "StartError"
    assert not _all(r, "gang_unschedulable")


def test_vllm_no_kernel_image() -> None:
    r = _read("vllm-enginecore-cuda-no-kernel-image-rtx-pro-6000-blackwell.txt")
    (f,) = r.findings
    assert (f.code, f.owner, f.quantities["cuda_error"], f.quantities["cuda_error_number"]) == (
        "cuda_no_kernel_image_for_device", "platform", "cudaErrorNoKernelImageForDevice", 209)
    assert (_numbers(f), f.timestamps, dict(f.entity)) == ([1, 2, 3], ("03-24 14:38:36",),
                                                           {"process": "EngineCore_DP0", "pid": "100"})


def test_cuda_vectoradd_driver_insufficient() -> None:
    r = _read("cuda-vectoradd-driver-version-insufficient-for-runtime.txt")
    (f,) = r.findings
    assert (f.code, f.owner, f.quantities["cuda_error_number"], _numbers(f)) == (
        "cuda_insufficient_driver", "platform", 35, [1, 2])
    assert "driver_version" not in f.quantities and not f.entity


def test_failed_pull_driver_image_tag_not_found() -> None:
    r = _read("event-failed-pull-driver-image-tag-not-found-ubuntu21-04.txt")
    (f,) = r.findings
    assert (f.code, f.owner, f.quantities["image"], f.quantities["cause"]) == (
        "image_pull_failed", "platform", "nvcr.io/nvidia/driver:460.73.01-ubuntu21.04", "not_found")
    assert "does not exist" in f.meaning and "network" not in f.meaning


def test_torch_devices_unavailable_and_reset_required() -> None:
    r = _read("torch-cuda-devices-unavailable-gb200-and-nvrm-reset-required.txt")
    cuda = _one(r, "cuda_devices_unavailable")
    assert (cuda.quantities["cuda_error"], cuda.owner, cuda.quantities["explained_by"]) == (
        "cudaErrorDevicesUnavailable", "infrastructure", "gpu_reset_required")
    assert _numbers(cuda) == [3, 4, 5, 6, 7]
    reset = _one(r, "gpu_reset_required")
    assert (reset.quantities["nv_error"], reset.quantities["status"], reset.timestamps, reset.owner) == (
        "NV_ERR_RESET_REQUIRED", "0x00000062", ("373871.354096",), "infrastructure")
    assert not [f for f in r.findings if f.code.startswith("xid_")] and r.owners() == ("infrastructure",)


def test_hami_core_vgpu_oom() -> None:
    r = _read("pod-log-hami-core-vgpu-oom-cuda-out-of-memory-4000mib-limit.txt")
    (f,) = r.findings
    assert (f.code, f.owner, _numbers(f)) == ("vgpu_memory_limit_exceeded", "algorithm", [1, 2, 3, 4, 5, 6])
    assert (f.quantities["requested_bytes"], f.quantities["limit_bytes"], f.quantities["limit_mib"]) == (
        4399824896, 4194304000, 4000)
    assert dict(f.entity) == {"gpu_index": "0"}
    assert "not a Kubernetes OOMKilled" in f.meaning and not _all(r, "oom_killed")


# --- produced here: real Kueue and Volcano objects ---------------------------------------------------


@pytest.mark.parametrize("name", ["produced-here/wl-job-train-a-e6bc6.v1beta1.yaml",
                                  "produced-here/wl-job-train-a-e6bc6.v1beta2.yaml"])
def test_kueue_admitted(name: str) -> None:
    r = _read(name)
    (f,) = r.findings
    assert (f.code, f.severity) == ("workload_admitted", "ok")
    assert "Quota reserved in ClusterQueue gpu-cq" in f.meaning
    assert (f.quantities["cluster_queue"], f.quantities["usage.nvidia.com/gpu"]) == ("gpu-cq", "1")
    assert r.exit_code() == 0


def test_kueue_finished() -> None:
    r = _read("produced-here/wl-job-train-a-e6bc6.finished.v1beta2.yaml")
    (f,) = r.findings
    assert (f.code, f.severity) == ("workload_finished", "ok") and "Succeeded" in f.meaning


@pytest.mark.parametrize("name", ["produced-here/wl-job-train-b-78819.v1beta1.yaml",
                                  "produced-here/wl-job-train-b-78819.v1beta2.yaml"])
def test_kueue_not_fitting(name: str) -> None:
    r = _read(name)
    (f,) = r.findings
    assert (f.code, f.owner, f.quantities["resource"], f.quantities["flavor"], f.quantities["more_needed"]) == (
        "queue_quota_insufficient", "business", "nvidia.com/gpu", "fake-gpu", "1")
    assert (f.quantities["condition_type"], f.quantities["condition_reason"], f.quantities["pod_set"]) == (
        "QuotaReserved", "Pending", "main")


def test_podgroup_over_queue_has_no_condition() -> None:
    r = _read("produced-here/vc-pg-over-queue.yaml")
    (f,) = r.findings
    assert (f.code, f.owner, f.severity, f.quantities["phase"], f.quantities["min_member"]) == (
        "podgroup_pending", None, "error", "Pending", 2)
    assert (dict(f.entity)["queue"], f.quantities["min.nvidia.com/gpu"]) == ("gpu-q", "2")


def test_podgroup_over_node_origin_reason() -> None:
    r = _read("produced-here/vc-pg-over-node.yaml")
    codes = [f.code for f in r.findings]
    assert codes[0] == "gang_unschedulable"
    gang = r.findings[0]
    assert (gang.quantities["unschedulable_tasks"], gang.quantities["tasks"], gang.quantities["min_available"],
            gang.quantities["condition_reason"], gang.quantities["phase"]) == ("1", "3", "3", "NotEnoughResources", "Inqueue")
    assert dict(gang.entity)["queue"] == "default"


def test_vcjob_over_node() -> None:
    r = _read("produced-here/vc-job-over-node.yaml")
    (f,) = r.findings
    assert (f.code, f.quantities["phase"], f.quantities["min_available"], f.quantities["pending"]) == (
        "vcjob_pending", "Pending", 3, 3)


def test_volcano_events_normal_quota_reason_is_read() -> None:
    r = _read("produced-here/vc-events.yaml")
    quota = [f for f in _all(r, "queue_quota_insufficient") if "queue resource quota insufficient" in f.meaning]
    assert [f.count for f in quota] == [25, 21]
    assert {f.quantities["event_type"] for f in quota} == {"Normal"} and {f.owner for f in quota} == {"business"}
    assert {f.quantities["resource"] for f in quota} == {"nvidia.com/gpu"}
    overused = [f for f in _all(r, "queue_quota_insufficient") if "overused" in f.meaning]
    assert [f.count for f in overused] == [12, 25]
    gang = _all(r, "gang_unschedulable")
    assert any("3/3 tasks in gang" in f.meaning and f.count == 16 for f in gang)
    assert any("1/3 tasks in gang" in f.meaning and f.count == 3 for f in gang)
    assert len(_all(r, "insufficient_resource")) == 2 and len(_all(r, "node_selector_mismatch")) == 2
    assert _one(r, "events_normal").count == 4  # the four "can possibly be assigned" progress notes
    assert not [f for f in r.findings if f.severity == "unrecognised"]


def test_every_fixture_has_a_test() -> None:
    files = {str(p.relative_to(REAL)) for p in REAL.rglob("*") if p.is_file() and p.suffix != ".md"}
    source = Path(__file__).read_text(encoding="utf-8")
    missing = sorted(name for name in files if f'"{name}"' not in source)
    assert not missing, f"fixtures without a test: {missing}"
    assert len(files) >= 54


# --- batch 3 ----------------------------------------------------------------------------------------


def test_nvidia_smi_list_a100_seven_mig_devices() -> None:
    r = _read("nvidia-smi-L-a100-sxm4-80gb-seven-mig-1g10gb-devices.txt")
    assert r.blocks[0].kind == "prompt" and r.blocks[1].kind == "nvidia-smi-list"
    gpu = _one(r, "gpu_listed")
    assert dict(gpu.entity) == {"gpu_index": "0", "gpu_name": "NVIDIA A100-SXM4-80GB",
                                "uuid": "GPU-00000000-0000-0000-0000-000000000001"}
    assert gpu.quantities["mig_devices"] == 7
    migs = _all(r, "mig_device")
    assert [m.entity["mig_device"] for m in migs] == [str(n) for n in range(7)]
    assert [m.entity["uuid"] for m in migs] == [f"MIG-00000000-0000-0000-0000-00000000000{n}" for n in range(1, 8)]
    assert {m.quantities["profile"] for m in migs} == {"1g.10gb"} and {m.entity["gpu_index"] for m in migs} == {"0"}
    assert all("gpu_instance_id" not in m.quantities for m in migs)  # not in the R470+ name
    summary = _one(r, "gpu_list")
    assert (summary.quantities["gpus"], summary.quantities["mig_devices"], summary.quantities["mig_profiles"]) == (
        1, 7, "1g.10gb")
    assert r.exit_code() == 0 and _problems(r) == []


def test_nvidia_smi_list_two_quadro_no_mig() -> None:
    r = _read("nvidia-smi-L-two-quadro-rtx-4000-no-mig.txt")
    gpus = _all(r, "gpu_listed")
    assert [(g.entity["gpu_index"], g.entity["gpu_name"], g.entity["uuid"]) for g in gpus] == [
        ("0", "Quadro RTX 4000", "GPU-00000000-0000-0000-0000-000000000001"),
        ("1", "Quadro RTX 4000", "GPU-00000000-0000-0000-0000-000000000002")]
    assert _all(r, "mig_device") == [] and _one(r, "gpu_list").quantities["mig_devices"] == 0
    assert r.blocks[0].command == "nvidia-smi -L" and r.exit_code() == 0


def test_mig_lgi_two_gpus_same_layout_different_ids() -> None:
    r = _read("nvidia-smi-mig-lgi-gpu0-gpu1-1g10gb-2g20gb-3g40gb-placements-excerpt.txt")
    rows = [(g.entity["gpu_index"], g.quantities["profile"], g.quantities["profile_id"], g.entity["gpu_instance_id"],
             g.quantities["placement_start"], g.quantities["placement_size"]) for g in _all(r, "gpu_instance")]
    assert rows == [("0", "1g.10gb", 19, "9", 2, 1), ("0", "1g.10gb", 19, "10", 3, 1), ("0", "2g.20gb", 14, "3", 0, 2),
                    ("0", "3g.40gb", 9, "2", 4, 4), ("1", "1g.10gb", 19, "13", 2, 1), ("1", "1g.10gb", 19, "14", 3, 1),
                    ("1", "2g.20gb", 14, "5", 0, 2), ("1", "3g.40gb", 9, "1", 4, 4)]
    per_gpu = {g.entity["gpu_index"]: g.quantities for g in _all(r, "gpu_instances")}
    assert {k: (q["instances"], q["slices_used"], q["overlapping_placements"]) for k, q in per_gpu.items()} == {
        "0": (4, "0-7", 0), "1": (4, "0-7", 0)}
    assert _all(r, "compute_instance") == [] and r.exit_code() == 0


def test_mig_lgip_lgipp_lgi_all_profiles_used() -> None:
    r = _read("nvidia-smi-mig-lgip-lgipp-lgi-four-1g6gb-instances-all-profiles-0-free.txt")
    assert [b.command for b in r.blocks if b.kind == "prompt"] == [
        "sudo nvidia-smi mig -lgip", "sudo nvidia-smi mig -lgipp", "sudo nvidia-smi mig -lgi"]
    profiles = [(p.quantities["profile"], p.quantities["profile_id"], p.quantities["free"], p.quantities["total"],
                 p.quantities["memory_gib"], p.quantities["p2p"], p.quantities["sm"], p.quantities["dec"],
                 p.quantities["enc"], p.quantities["ce"], p.quantities["jpeg"], p.quantities["ofa"])
                for p in _all(r, "gpu_instance_profile")]
    assert profiles == [("1g.6gb", 14, 0, 4, 5.81, "No", 14, 1, 0, 1, 0, 0),
                        ("1g.6gb+me", 21, 0, 1, 5.81, "No", 14, 1, 0, 1, 1, 1),
                        ("2g.12gb", 5, 0, 2, 11.69, "No", 28, 2, 0, 2, 0, 0),
                        ("4g.24gb", 0, 0, 1, 23.5, "No", 56, 4, 0, 4, 1, 1)]
    placements = [(p.quantities["profile_id"], p.quantities["placements"], p.quantities["placement_size"])
                  for p in _all(r, "mig_placements")]
    assert placements == [(14, "0,1,2,3", 1), (21, "0,1,2,3", 1), (5, "0,2", 2), (0, "0", 4)]
    gis = _all(r, "gpu_instance")
    assert [(g.entity["gpu_instance_id"], g.quantities["profile"], g.quantities["profile_id"],
             g.quantities["placement_start"]) for g in gis] == [
        ("3", "1g.6gb", 14, 0), ("4", "1g.6gb", 14, 1), ("5", "1g.6gb", 14, 2), ("6", "1g.6gb", 14, 3)]
    assert _one(r, "gpu_instances").quantities["slices_used"] == "0-3"
    assert r.exit_code() == 0 and not [f for f in r.findings if f.severity == "unrecognised"]


def test_topo_8x_a100_nv12_17_nics() -> None:
    r = _read("nvidia-smi-topo-m-8x-a100-nv12-17-nics-nic-legend.txt")
    (t,) = r.findings
    q = t.quantities
    assert (t.code, q["gpus"], q["nics"], q["nvlink"], q["gpu_links"], q["legend"]) == (
        "gpu_topology", 8, 17, True, "NV12:28", 7)
    groups = {0: range(0, 4), 1: range(0, 4), 2: range(4, 8), 3: range(4, 8), 4: range(8, 12), 5: range(8, 12),
              6: range(12, 16), 7: range(12, 16)}
    for g, near in groups.items():
        assert [q[f"link.GPU{g}-NIC{n}"] for n in range(17)] == ["PXB" if n in near else "SYS" for n in range(17)]
        assert (q[f"GPU{g}.cpu_affinity"], q[f"GPU{g}.numa_affinity"], q[f"GPU{g}.gpu_numa_id"]) == ("0-103", "0", "N/A")
    assert [q[f"link.NIC{a}-NIC{a + 1}"] for a in range(0, 16, 2)] == ["PIX"] * 8
    assert q["link.NIC0-NIC2"] == "PXB" and q["link.NIC0-NIC16"] == "SYS"
    assert [q[f"nic.NIC{n}"] for n in (0, 15, 16)] == ["mlx5_2", "mlx5_17", "mlx5_bond_0"]
    assert r.exit_code() == 0


def test_topo_4x_a10_sys_only_no_nvlink() -> None:
    r = _read("nvidia-smi-topo-m-4x-a10-sys-only-2-nics-no-nvlink.txt")
    assert r.blocks[0].command == "nvidia-smi topo -m"
    t = _one(r, "gpu_topology")
    q = t.quantities
    assert (q["gpus"], q["nics"], q["nvlink"], q["gpu_links"]) == (4, 2, False, "SYS:6")
    assert {q[f"link.GPU{g}-NIC{n}"] for g in range(4) for n in range(2)} == {"SYS"}
    assert q["link.NIC0-NIC1"] == "PIX" and (q["nic.NIC0"], q["nic.NIC1"]) == ("mlx5_0", "mlx5_1")
    assert {q[f"GPU{g}.cpu_affinity"] for g in range(4)} == {"0-127"}
    assert "no NVLink" in t.meaning and r.exit_code() == 0 and len(r.findings) == 1


def test_query_excerpt_a100_dram_correctable_row_remap_pending() -> None:
    r = _read("nvidia-smi-q-excerpt-a100-sxm4-80gb-dram-correctable-177-row-remap-pending.txt")
    head = _one(r, "gpu_report")
    assert head.timestamps == ("Wed Jun  7 19:32:16 2023",)
    assert (head.quantities["driver_version"], head.quantities["cuda_version"], head.quantities["attached_gpus"],
            head.quantities["gpus_listed"]) == ("510.73.08", "11.6", 8, 1)
    f = _one(r, "gpu_row_remap_pending")
    assert (f.entity["bus_id"], f.entity["gpu_name"], f.owner, f.severity) == (
        "00000000:10:1C.0", "NVIDIA A100-SXM4-80GB", "infrastructure", "error")
    q = f.quantities
    for scope in ("volatile", "aggregate"):
        assert (q[f"ecc_{scope}_sram_correctable"], q[f"ecc_{scope}_sram_uncorrectable"],
                q[f"ecc_{scope}_dram_correctable"], q[f"ecc_{scope}_dram_uncorrectable"]) == (0, 0, 177, 0)
    assert (q["remapped_rows_correctable"], q["remapped_rows_uncorrectable"], q["remapped_rows_pending"],
            q["remapped_rows_failure"]) == (1, 0, True, False)
    assert (q["remap_histogram_max"], q["remap_histogram_high"], q["remap_histogram_partial"],
            q["remap_histogram_low"], q["remap_histogram_none"]) == ("639 bank(s)", 1, 0, 0, 0)
    assert _problems(r) == [("gpu_row_remap_pending", "infrastructure")]


def test_dcgmi_nvlink_all_up_no_nvswitch() -> None:
    r = _read("dcgmi-nvlink-s-8-gpus-18-links-all-up-no-nvswitches.txt")
    links = _all(r, "nvlink_status")
    assert [f.entity["gpu_index"] for f in links] == [str(g) for g in range(8)]
    assert {(f.quantities["links"], f.quantities["up"], f.quantities["down"], f.quantities["disabled"],
             f.quantities["not_supported"]) for f in links} == {(18, 18, 0, 0, 0)}
    s = _one(r, "nvlink_report").quantities
    assert (s["gpus"], s["nvswitches"], s["links_up"], s["links_down"], s["links_disabled"]) == (8, 0, 144, 0, 0)
    assert r.exit_code() == 0 and _all(r, "nvlink_down") == []


def test_dcgmi_health_healthy_while_gpu1_needs_reset() -> None:
    r = _read("dcgmi-health-c-j-healthy-while-gpu1-xider-120-recovery-action-reset.txt")
    reset = _one(r, "gpu_recovery_required")
    assert (reset.entity["gpu_index"], reset.quantities["gpu_recovery_action"], reset.owner) == (
        "1", "Reset", "infrastructure")
    assert reset.quantities["note"] == "<= GPU is unusable, reset required"
    assert [f.quantities["gpu_recovery_action"] for f in _all(r, "gpu_query_row")] == ["None"] * 7
    xid = _one(r, "xid_120")
    assert (xid.entity["gpu_index"], xid.quantities["xid"], xid.owner, xid.quantities["action"]) == (
        "1", 120, "infrastructure", "reset_gpu")
    assert sorted(f.entity["gpu_index"] for f in _all(r, "dcgm_field_values")) == ["0", "2", "3", "4", "5", "6", "7"]
    assert {f.quantities["last_xid"] for f in _all(r, "dcgm_field_values")} == {0}
    health = _one(r, "dcgm_health")
    assert (health.quantities["overall_health"], health.severity) == ("Healthy", "ok")
    assert _one(r, "dcgm_health_watches_set").severity == "ok"
    assert sorted(_problems(r)) == [("gpu_recovery_required", "infrastructure"), ("xid_120", "infrastructure")]
    assert not [f for f in r.findings if f.severity == "unrecognised"] and r.exit_code() == 1


def test_dcgmi_diag_3_3_pcie_fail_cuda_driver_combination() -> None:
    r = _read("dcgmi-diag-r2-dcgm-3-3-0-pcie-fail-cuda-driver-combination-gpu-memory-skip.txt")
    assert r.blocks[0].command == "dcgmi diag -r 2"
    head = _one(r, "dcgm_diag_report").quantities
    assert (head["dcgm_version"], head["driver_version"], head["gpu_device_ids"], head["tests"], head["failed"]) == (
        "3.3.0", "530.30.02", ",".join(["2204"] * 8), 11, 1)
    failed = _one(r, "dcgm_test_failed")
    assert (failed.quantities["test"], failed.quantities["category"], failed.quantities["result"]) == (
        "PCIe", "Integration", "Fail - All")
    cuda = _one(r, "cuda_system_driver_mismatch")
    assert cuda.entity["gpu_index"] == "0" and "cudaDeviceGetByPCIBusId" in str(cuda.quantities["message"])
    assert "bus ID = 00000000:1B:00.0" in str(cuda.quantities["message"])
    assert {owner for _, owner in _problems(r)} == {"platform"}


def test_syslog_nvswitch_probe_gpu_fallen_off_bus_without_xid() -> None:
    r = _read("syslog-kernel-nvswitch-probe-h100-5d-fallen-off-bus-probe-failed-gsp-firmware-error-2.txt")
    off = _one(r, "gpu_fallen_off_bus")
    assert (off.entity["bus_id"], off.quantities["pci_id"], off.owner) == ("0000:5d:00", "10de:2330", "infrastructure")
    assert _numbers(off) == [3, 4, 5] and off.timestamps == ("Jan  3 07:39:45",)
    probe = _one(r, "gpu_probe_failed")
    assert (probe.entity["bus_id"], probe.quantities["probe_error"], probe.quantities["devices_failed"]) == (
        "0000:5d:00", -1, 1)
    fw = _all(r, "gpu_firmware_load_failed")
    assert [(f.entity["bus_id"], f.quantities["file"], f.quantities["error"]) for f in fw] == [
        ("0000:18:00", "nvidia/525.125.06/gsp_tu10x.bin", -2), ("0000:2a:00", "nvidia/525.125.06/gsp_tu10x.bin", -2)]
    assert _one(r, "kernel_context").quantities["driver_version"] == "525.125.06"
    assert not [f for f in r.findings if f.code.startswith("xid_")] and r.exit_code() == 1


def test_dmesg_T_xid79_and_nvidia_smi_unknown_error() -> None:
    r = _read("dmesg-T-nvrm-xid79-fallen-off-bus-a1-and-nvidia-smi-unknown-error.txt")
    assert r.blocks[0].kind == "prompt" and r.blocks[0].command == "nvidia-smi"
    lost = _one(r, "gpu_lost")
    assert (lost.entity["bus_id"], lost.quantities["health_raw"]) == ("0000:A1:00.0", "Unknown Error")
    xid = _one(r, "xid_79")
    assert (xid.entity["bus_id"], xid.entity["uuid"], xid.timestamps) == (
        "0000:a1:00", "GPU-00000000-0000-0000-0000-000000000001", ("Fri Apr  5 21:29:39 2024",))
    assert _one(r, "kernel_context").quantities["driver_version"] == "535.161.07"
    assert {owner for _, owner in _problems(r)} == {"infrastructure"}
    assert not [f for f in r.findings if f.severity == "unrecognised"]


def test_torch_oom_old_message_as_outofmemoryerror_gpu0() -> None:
    r = _read("torch-cuda-outofmemoryerror-old-message-tried-1-67-gib-gpu0-3-95-gib.txt")
    (f,) = r.findings
    q = f.quantities
    assert (f.code, f.owner, f.entity["gpu_index"]) == ("cuda_memory_allocation", "algorithm", "0")
    assert (q["tried_to_allocate"], q["total_capacity"], q["allocated_by_pytorch"], q["free"],
            q["reserved_by_pytorch"]) == ("1.67 GiB", "3.95 GiB", "246.26 MiB", "770.62 MiB", "1.91 GiB")
    assert (q["tried_to_allocate_mib"], q["free_mib"], q["total_capacity_mib"]) == (1710.08, 770.62, 4044.8)
    assert "process_in_use" not in q and _numbers(f) == [1, 2]


def test_torch_oom_old_runtimeerror_gpu1() -> None:
    r = _read("torch-runtimeerror-cuda-oom-old-format-gpu1-tried-1-65-gib-1-40-free.txt")
    f = _one(r, "cuda_memory_allocation")
    q: Mapping[str, Any] = f.quantities  # the sizes below are numbers (MiB), the others text
    assert f.entity["gpu_index"] == "1"
    assert (q["tried_to_allocate"], q["total_capacity"], q["allocated_by_pytorch"], q["free"],
            q["reserved_by_pytorch"]) == ("1.65 GiB", "7.79 GiB", "3.53 GiB", "1.40 GiB", "5.28 GiB")
    assert q["tried_to_allocate_mib"] > q["free_mib"] and _problems(r) == [("cuda_memory_allocation", "algorithm")]


def test_nccl_watchdog_timeout_three_ranks_undetermined() -> None:
    r = _read("nccl-watchdog-timeout-allreduce-seqnum-808-600000ms-ranks-0-1-2-excerpt.txt")
    (f,) = r.findings
    q = f.quantities
    assert (f.code, f.owner, f.severity, f.count) == ("nccl_watchdog_timeout", None, "error", 3)
    assert (q["seq_num"], q["op_type"], q["numel_in"], q["numel_out"], q["timeout_ms"]) == (
        808, "ALLREDUCE", 9801523, 9801523, 600000)
    assert (q["ranks"], q["ran_for_ms.rank1"], q["ran_for_ms.rank0"], q["ran_for_ms.rank2"]) == (
        "1,0,2", 600020, 600030, 600061)
    assert (q["work"], q["last_enqueued_work"], q["last_completed_work"]) == (808, 811, 807)
    assert f.undetermined and "infrastructure" in str(f.owner_candidates) and "owner" not in q
    assert "rank" not in f.entity and _numbers(f) == [1, 2, 3, 4, 5]
    assert r.exit_code() == 1 and r.owners() == ()


def test_hccl_comm_init_root_info_config_device_id_error() -> None:
    r = _read("hccl-comminitrootinfoconfig-error-15-err02200-ee9999-phyid-device-id-error-rank1.txt")
    (f,) = r.findings
    q = f.quantities
    assert (f.code, f.owner, dict(f.entity)) == ("hccl_init_failed", "platform",
                                                 {"pid": "540989", "npu_id": "0", "rank": "1"})
    assert (q["hccl_function"], q["hccl_error"], q["hccl_error_name"], q["torch_npu_code"], q["submodule"]) == (
        "hcclCommInitRootInfoConfig", 15, "HCCL_E_RUNTIME", "ERR02200", "DIST")
    assert (q["cann_code"], q["phy_id"], q["real_device_id"], q["runtime_ret"], q["runtime_call"],
            q["runtime_reason"]) == ("EE9999", "0", "0", "0x7010003", "rtGetDeviceIndexByPhyId", "device id error")
    assert _numbers(f) == [1, 2, 3, 4, 6]


def test_cann_ez9999_op_without_binary() -> None:
    r = _read("cann-ez9999-op-equal-no-binary-errno-561000-err01005-device0.txt")
    op = _one(r, "cann_op_no_binary")
    assert (op.owner, op.quantities["cann_code"], op.quantities["op"], op.quantities["aclnn_call"],
            op.quantities["errno"]) == ("platform", "EZ9999", "Equal", "aclnnEqScalar", 561000)
    assert _numbers(op) == [1, 2, 4, 5]
    err = _one(r, "torch_npu_error")
    assert (err.quantities["torch_npu_code"], err.quantities["submodule"], err.quantities["error_type"],
            err.quantities["rank_id"], dict(err.entity)) == ("ERR01005", "OPS", "internal error", -1,
                                                              {"pid": "40093", "npu_id": "0"})
    assert {owner for _, owner in _problems(r)} == {"platform"}
    assert not [f for f in r.findings if f.severity == "unrecognised"]


def test_hccl_barrier_hccp_init_failed_device3() -> None:
    r = _read("hccl-processgrouphccl-barrier-err02200-ej0001-hccp-init-failed-device3-excerpt.txt")
    (f,) = r.findings
    q = f.quantities
    assert (f.code, f.owner, dict(f.entity)) == ("hccp_init_failed", "algorithm",
                                                 {"pid": "927000", "npu_id": "3", "rank": "3"})
    assert (q["torch_npu_code"], q["cann_code"], q["runtime_ret"], q["runtime_call"], q["runtime_reason"]) == (
        "ERR02200", "EJ0001", "0x7020010", "rtGetDevMsg", "driver error:internal error")
    assert q["source_file"] == "torch_npu/csrc/distributed/ProcessGroupHCCL.cpp"
    assert f.failure == "hccp_init_failed" and "infrastructure" in TABLE["hccp_init_failed"].why
    assert _numbers(f) == [2, 3, 4, 5, 6, 8, 9, 10, 11, 12]  # the File line and TraceBack header are noise


def test_kueue_quota_reserved_admission_check_pending() -> None:
    r = _read("kueue-describe-workload-quotareserved-admission-check-pending-and-get-workloads.txt")
    check = _one(r, "admission_check")
    assert (check.entity["admission_check"], check.quantities["state"], check.quantities["last_transition_time"]) == (
        "sample-multikueue", "Pending", "2024-03-04T10:55:16Z")
    assert "message" not in check.quantities
    f = _one(r, "workload_not_admitted")
    assert (f.owner, f.severity, f.quantities["conditions"], f.quantities["pending_checks"],
            f.quantities["quota_message"]) == ("platform", "warning", "QuotaReserved=True", "sample-multikueue=Pending",
                                               "Quota reserved in ClusterQueue cluster-queue")
    assert _one(r, "events_normal").quantities["reasons"] == "QuotaReserved"
    w = _one(r, "kueue_workload")
    assert (w.entity["workload"], w.entity["queue"], w.quantities["admitted_by"], w.age) == (
        "jobset-sleep-job-5xh9k-af81b", "user-queue", "cluster-queue", "2m5s")
    assert _problems(r) == [("workload_not_admitted", "platform")]


def test_volcano_podgroup_two_running_of_three_undetermined() -> None:
    r = _read("volcano-podgroup-status-yaml-unschedulable-condition-phase-unknown-running-2.yaml")
    (f,) = r.findings
    q = f.quantities
    assert (f.code, f.owner, q["phase"], q["condition_reason"], q["running"], q["min_available"], f.undetermined) == (
        "gang_unschedulable", None, "Unknown", "NotEnoughResources", 2, 3, True)
    assert "resource" not in q and "queue" not in f.entity


def test_hami_scheduler_cores_fully_committed() -> None:
    r = _read("hami-scheduler-log-vgpu-pod-filter-tesla-p4-cores-100-of-100-used-excerpt.txt")
    (f,) = r.findings
    q = f.quantities
    assert (f.code, f.owner, dict(f.entity)) == ("vgpu_capacity_committed", "business", {
        "node": "node-a1", "pod": "vgpu-test-dc87df5b4-6ndkz", "namespace": "default",
        "uuid": "GPU-00000000-0000-0000-0000-000000000001"})
    assert (q["holder_pod"], q["device_type"], q["device_count"], q["device_used"], q["device_totalmem"],
            q["device_usedmem"], q["device_totalcore"], q["device_usedcores"], q["device_health"]) == (
        "vgpu-test-dc87df5b4-24r9c", "NVIDIA-Tesla P4", 10, 1, 7680, 1000, 100, 100, True)
    assert (q["request_mem_mib"], q["request_cores"], q["request_devices"], q["short_of"]) == (1000, 100, 1, "cores")
    assert f.timestamps == ("I0110 09:29:05.389816", "I0110 09:29:05.389968") and _numbers(f) == [1, 2, 3, 4, 5]


def test_ascend_device_plugin_startup_hwlog() -> None:
    r = _read("ascend-device-plugin-log-v7-0-rc1-910b3-startup-amp-mode-warn-excerpt.txt")
    assert [b.kind for b in r.blocks] == ["hwlog", "klog"]
    start = r.findings[0]
    q = start.quantities
    assert (q["version"], q["scene"], q["dcmi_version"], q["chip_name"], q["dev_type"]) == (
        "v7.0.RC1.SPC1_linux-aarch64", "center", "24.1.rc3", "910B3", "Ascend910B")
    assert (q["info_lines"], q["warn_lines"], q["error_lines"], q["warnings"]) == (
        5, 1, 0, "only AMP mode is available on Ascend910B")
    assert start.timestamps == ("2025/07/09 20:05:31.842816", "2025/07/09 20:05:32.173139")
    assert r.findings[1].timestamps == ("W0709 20:05:32.181474",)
    assert r.exit_code() == 0 and _problems(r) == []


def test_journalctl_zh_locale_kubelet_ascend() -> None:
    r = _read("journalctl-zh-locale-kubelet-ascend-910b4-listandwatch-eof-ascend-docker-runtime-exit-1.txt")
    assert [b.kind for b in r.blocks] == ["klog"]
    plugin = _one(r, "device_plugin_disconnected")
    assert (plugin.quantities["resource"], plugin.quantities["error"], plugin.entity["host"], plugin.timestamps) == (
        "huawei.com/Ascend910B4-1", "EOF", "node-a1", ("E0818 16:33:56.754985",))
    log = _one(r, "kubelet_log_write_failed")
    assert (log.severity, log.entity["pod"], log.quantities["error"]) == (
        "ok", "hami-ascend-device-plugin-ktgd7", "http2: stream closed")
    hook = _one(r, "runtime_hook_failed")
    assert (dict(hook.entity), hook.quantities["exit_status"], hook.quantities["state_reason"]) == (
        {"namespace": "default", "pod": "test4-780cd89b-c75965f9b-knvsg", "container": "vllm", "host": "node-a1"},
        1, "RunContainerError")
    assert hook.quantities["hook"] == "/usr/local/Ascend/Ascend-Docker-Runtime/ascend-docker-runtime"
    assert sorted(_problems(r)) == [("device_plugin_disconnected", "platform"), ("runtime_hook_failed", "platform")]
