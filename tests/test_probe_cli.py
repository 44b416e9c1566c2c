"""`hetero probe` sub-command, probe_host, and compare() of inventories with expectations."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from pytest_hetero.cli import build_parser
from pytest_hetero.errors import SettingsError
from pytest_hetero.probes import probe_host
from pytest_hetero.probes.ascend_table import parse_npu_smi_info
from pytest_hetero.probes.compare import Difference, Expectation, compare, satisfies
from pytest_hetero.probes.model import Device, Inventory, Partition
from pytest_hetero.probes.nvidia import parse_nvidia_smi

REAL = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real"
DATA = Path(__file__).parent / "data" / "probes"


def real(name: str) -> Path:
    path = REAL / name
    if not path.exists():
        pytest.skip(f"shared fixture {path} not present")
    return path


def hetero(*argv: str) -> int:
    args = build_parser().parse_args(list(argv))
    return int(args.func(args))


@pytest.mark.parametrize(
    ("name", "vendor", "rc", "source", "devices"),
    [
        ("nvidia-smi-q-x-a100-sxm4-80gb-mig.xml", "nvidia", 0, "nvidia-smi-xml", 1),
        ("nvidia-smi-table-h100-8gpu.txt", "nvidia", 0, "nvidia-smi-table", 8),
        ("nvidia-smi-table-err-fan.txt", "nvidia", 1, "nvidia-smi-table", 1),  # explain: fan ERR! (warning)
        ("dmesg-xid-119-gsp-timeout-h100.txt", "nvidia", 1, "kernel-log", 0),
        ("device-plugin-log-xid79-marked-unhealthy.txt", "nvidia", 1, "device-plugin-log", 0),
        ("npu-smi-info-910a-8npu-warning.txt", "ascend", 1, "npu-smi", 8),  # explain: NPUs 3 and 7 in Warning
        ("npu-smi-info-310-4chip-v21.txt", "ascend", 0, "npu-smi", 4),
    ],
)
def test_probe_from_real_captures(
    name: str, vendor: str, rc: int, source: str, devices: int, capsys: pytest.CaptureFixture[str]
) -> None:
    path = real(name)
    assert hetero("probe", vendor, "--from", str(path)) == rc
    data = json.loads(capsys.readouterr().out)
    assert (data["source"], len(data["devices"]), data["healthy"], data["raw"]) == (
        source,
        devices,
        rc == 0,
        path.read_text(),
    )


def test_probe_from_own_captures_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert hetero("probe", "nvidia", "--from", str(DATA / "nvidia-smi-table-r418-old.txt"), "--no-raw") == 1
    data = json.loads(capsys.readouterr().out)
    assert ("raw" in data, data["devices"][0]["health"], data["devices"][0]["errors"]) == (
        False,
        "critical",
        ["volatile uncorrectable ECC errors: 2"],
    )
    assert hetero("probe", "ascend", "--from", str(DATA / "npu-smi-info-a3-phyid-shared-npu-row.txt")) == 1
    assert hetero("probe", "ascend", "--from", str(DATA / "npu-smi-board-910b.txt")) == 0
    board = json.loads(capsys.readouterr().out.split("\n}\n")[-2] + "\n}")
    assert (board["source"], board["firmware_version"], board["driver_version"]) == (
        "npu-smi-board",
        "6.4.12.1.241",
        "23.0.rc2",
    )


def test_probe_from_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("No devices were found\n"))
    assert hetero("probe", "nvidia", "--from", "-") == 1
    assert json.loads(capsys.readouterr().out)["global_errors"] == [
        "no NVIDIA devices found: No devices were found"
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("probe", "nvidia", "--from", "{npu}"),
            (
                "hetero probe: {npu}: not a known NVIDIA format: expected nvidia-smi -q "
                "-x XML, plain nvidia-smi, a kernel log with 'NVRM: Xid' lines or a device-plugin log\n"
            ),
        ),
        (
            ("probe", "ascend", "--from", "{xml}"),
            (
                "hetero probe: {xml}: not `npu-smi info` output: no 'npu-smi <version>  "
                "Version: <driver>' line and no 'NPU | Health | Power(W)' header\n  hint: expected the output of `npu-smi info`\n"
            ),
        ),
        (
            ("probe", "ascend", "--from", "/nonexistent/capture.txt"),
            "hetero probe: /nonexistent/capture.txt: cannot read the captured output: missing: no such file\n"
            "  hint: check the path\n",
        ),
        (
            ("probe", "cpu", "--from", "{xml}"),
            (
                "hetero probe: {xml}: --from is not supported for cpu\n  hint: use --root "
                "DIR to read /proc and /sys under DIR\n"
            ),
        ),
    ],
)
def test_unreadable_input_exits_2_naming_the_file(
    argv: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    names = {"npu": str(DATA / "npu-smi-board-910b.txt"), "xml": str(DATA / "nvidia-smi-table-r418-old.txt")}
    argv = tuple(a.format(**names) for a in argv)
    assert hetero(*argv) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", message.format(**names))


def test_empty_capture_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "nvidia-smi.txt"
    empty.write_text("\n  \n")
    assert hetero("probe", "nvidia", "--from", str(empty)) == 2
    assert capsys.readouterr().err == f"hetero probe: {empty}: empty input: no tool output was captured\n"


def test_probe_cpu_with_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_text(
        "processor\t: 0\nmodel name\t: Test CPU\nphysical id\t: 0\ncore id\t: 0\n"
    )
    (tmp_path / "proc" / "meminfo").write_text("MemTotal:        4194304 kB\n")
    assert hetero("probe", "cpu", "--root", str(tmp_path)) == 0
    data = json.loads(capsys.readouterr().out)
    assert (
        data["devices"][0]["name"],
        data["extra"]["memory_total_mib"],
        data["extra"]["cpu_limit_cores"],
    ) == ("Test CPU", 4096, 1.0)


def test_through_the_hetero_command(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_hetero.cli import main

    assert main(["probe", "nvidia", "--from", str(DATA / "nvidia-smi-table-mig-procs.txt"), "--no-raw"]) == 0
    assert json.loads(capsys.readouterr().out)["devices"][0]["partitions"][1]["memory_total_mib"] == 9984


def test_probe_host_vendors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert [
        (probe_host(v, str(tmp_path)).vendor, probe_host(v, str(tmp_path)).source)
        for v in ("nvidia", "GPU", "ascend", "npu", "cpu")
    ] == [("nvidia", "none"), ("nvidia", "none"), ("ascend", "none"), ("ascend", "none"), ("cpu", "proc")]
    with pytest.raises(SettingsError) as info:
        probe_host("amd")
    assert (info.value.message, info.value.hint) == (
        "unknown probe vendor 'amd'",
        "use one of: nvidia, ascend, cpu",
    )


# --- compare ---------------------------------------------------------------------------------


def test_capacity_8_allocatable_7_explained_by_ecc() -> None:
    text = (
        real("nvidia-smi-table-h100-8gpu.txt")
        .read_text()
        .replace(
            "|   00000000:3B:00.0 Off |                    0 |",
            "|   00000000:3B:00.0 Off |                    2 |",
        )
    )
    inv = Inventory(**{**parse_nvidia_smi(text).__dict__, "source": "nvml"})
    diffs = compare(
        inv,
        Expectation(
            count=8,
            capacity=8,
            allocatable=8,
            product="H100",
            min_memory_mib=80000,
            driver_version=">=535",
            cuda_version=">=12.2",
        ),
    )
    assert diffs == [
        Difference(
            "advertised-count",
            "capacity nvidia.com/gpu=8, allocatable=8, NVML sees 8 devices, "
            "GPU 00000000:3B:00.0 has volatile uncorrectable ECC errors: 2",
            expected="8 advertised, 7 allocatable",
            actual="capacity=8, allocatable=8",
        ),
        Difference(
            "device-health",
            "GPU 00000000:3B:00.0 is unhealthy: volatile uncorrectable ECC errors: 2",
            "ok",
            "critical",
            "GPU 00000000:3B:00.0",
        ),
    ]
    assert compare(inv, {"capacity": 8, "allocatable": 7, "count": 8})[0].category == "device-health"
    assert all("owner" not in d.to_dict() for d in diffs)  # the failure table names owners, not the probe


def test_node_advertises_7_of_8() -> None:
    inv = parse_nvidia_smi(real("nvidia-smi-table-h100-8gpu.txt").read_text())
    (diff,) = compare(inv, {"resource": "nvidia.com/gpu", "capacity": 7, "allocatable": 7})
    assert diff.message == "capacity nvidia.com/gpu=7, allocatable=7, nvidia-smi sees 8 devices"
    assert diff.category == "advertised-count"


def test_hami_split_count_and_truncated_name() -> None:
    inv = parse_nvidia_smi(real("nvidia-smi-table-rtxpro6000-hami-vgpu-slice.txt").read_text())
    exp = {
        "allocatable": 10,
        "replicas": 10,
        "product_regex": "RTX PRO 6000 Blackwell",
        "min_memory_mib": 97000,
    }
    assert [(d.category, d.message) for d in compare(inv, exp)] == [
        ("memory", "GPU 00000000:05:00.0 memory 8000 MiB, expected >= 97000 MiB")
    ]
    assert [d.category for d in compare(inv, {"product": "L40S"})] == ["product"]


def test_versions_mig_profiles_and_global_errors() -> None:
    inv = parse_nvidia_smi(real("nvidia-smi-q-x-a100-sxm4-80gb-mig.xml").read_text())
    assert (
        compare(inv, {"mig_profiles": ["1g.20gb"], "driver_version": ">=535,<536", "cuda_version": "12.2"})
        == []
    )
    assert compare(inv, {"resource": "nvidia.com/mig-1g.20gb", "count": 4}) == []
    assert [
        (d.category, d.message)
        for d in compare(inv, {"mig_profiles": "3g.40gb", "cuda_version": ">=12.4", "cann_version": ">=8.0"})
    ] == [
        ("cuda-version", "cuda version 12.2, expected >=12.4"),
        ("cann-version", "cann version not reported, expected >=8.0"),
        ("mig-profile", "no MIG instance of profile 3g.40gb (4 partition(s) seen)"),
    ]
    broken = parse_nvidia_smi("No devices were found\n")
    assert [(d.category, d.message) for d in compare(broken, {"count": 8})] == [
        ("global-error", "no NVIDIA devices found: No devices were found"),
        ("device-count", "expected 8 nvidia.com/gpu, nvidia-smi sees 0"),
    ]


def test_ascend_alarm_and_named_mig_profile() -> None:
    inv = parse_npu_smi_info((DATA / "npu-smi-info-a3-phyid-shared-npu-row.txt").read_text())
    diffs = compare(
        inv,
        {
            "resource": "huawei.com/Ascend910",
            "count": 6,
            "capacity": 6,
            "allocatable": 6,
            "driver_version": ">=24.1.rc1",
        },
    )
    assert diffs[0].message == (
        "capacity huawei.com/Ascend910=6, allocatable=6, npu-smi sees 6 devices, NPU 0000:99:00.0 "
        "has npu-smi health reads Alarm, NPU 0000:9B:00.0 has npu-smi health reads Alarm, "
        "NPU 0000:39:00.0 has npu-smi health reads Critical"
    )
    assert [d.category for d in diffs] == ["advertised-count"] + ["device-health"] * 3
    named = Inventory(
        vendor="nvidia",
        source="nvml",
        devices=(
            Device(
                vendor="nvidia", index=0, health="ok", partitions=(Partition(kind="mig", profile="2g.20gb"),)
            ),
        ),
    )
    assert [d.category for d in compare(named, {"mig_profiles": ("2g.20gb", "1g.10gb")})] == ["mig-profile"]


@pytest.mark.parametrize(
    ("version", "constraint", "ok"),
    [
        ("535.54.03", ">=535", True),
        ("525.125.06", ">=535", False),
        ("12.2", ">=12.10", False),
        ("12.10", ">12.2", True),
        ("12.2.1", "12.2", True),
        ("12.3", "==12.2", False),
        ("24.1.rc1.b030", ">=24.1.rc1", True),
        ("24.1.rc1", ">=24.1.0", False),
        ("550.90.07", ">=535,<560", True),
        ("560.1", ">=535,<560", False),
        ("12.4", "!=12.4", False),
        ("13.0", "<=13", True),
        (None, ">=1", False),
        ("1.0", ">= bad clause", False),
    ],
)
def test_version_constraints(version: str | None, constraint: str, ok: bool) -> None:
    assert satisfies(version, constraint) is ok


def test_probe_from_vnpu_capture_and_vnpu_profile_expectation(capsys: pytest.CaptureFixture[str]) -> None:
    assert hetero("probe", "ascend", "--from", str(DATA / "npu-smi-info-vnpu-310p.txt"), "--no-raw") == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["source"], [p["profile"] for p in data["devices"][0]["partitions"]]) == (
        "npu-smi-vnpu",
        ["vir01", "vir02", "vir04"],
    )
    inv = parse_npu_smi_info((DATA / "npu-smi-info-in-vnpu-container.txt").read_text())
    assert compare(inv, {"mig_profiles": ["vir04"]}) == []
    assert [d.message for d in compare(inv, {"mig_profiles": ["vir02"]})] == [
        "no vNPU instance of profile vir02 (1 partition(s) seen)"
    ]


def test_a_reader_that_stops_early_ends_the_command_quietly() -> None:
    """`hetero probe cpu | head` ended in a BrokenPipeError traceback."""
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "pytest_hetero.cli", "probe", "cpu"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first write (head gone after its first lines)
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
