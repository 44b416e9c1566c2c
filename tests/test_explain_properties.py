"""Property tests: any text or bytes -> findings or a clean "unreadable", never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_hetero.explain import explain_bytes, explain_text
from pytest_hetero.explain.model import SEVERITIES, TEAMS

REAL = Path(__file__).resolve().parents[2] / "shared/fixtures/real"
HERE = Path(__file__).resolve().parent / "data"
ALL = sorted(str(p) for root in (REAL, HERE / "explain", HERE / "field") if root.is_dir() for p in root.rglob("*")
             if p.is_file() and p.suffix != ".md" and p.name != "bench-snapshot.json")
"""Every fixture: the real ones (``produced-here/`` included), the hand-made ones and the published outputs."""
_PIECES = [
    "NVRM: Xid (PCI:0000:9b:00): 79, pid=1, name=x, GPU has fallen off the bus.",
    "| NVIDIA-SMI 550.90.07  Driver Version: 550.90.07  CUDA Version: 12.4 |",
    "+-----------+-----------+", "|   0  NVIDIA H100  On | 00000000:19:00.0 Off | 0 |", "Events:",
    "  Warning  FailedScheduling  2m  default-scheduler  0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
    "npu-smi info -t common -i 1", "        NPU ID : 1", "| npu-smi 24.1.rc1  Version: 24.1.rc1 |",
    "Successfully ran diagnostic for group.", "|-----  Metadata  ----------+------|", "apiVersion: v1", "kind: Node",
    "status:", "  capacity:", "    nvidia.com/gpu: 1", "Name: node-a1", "Roles: worker", "Taints: x:NoSchedule",
    "{", "[", "}", "\"a\": \"b\",", "a=b", "$ kubectl get pods", "NAME READY STATUS RESTARTS AGE",
    "x 0/1 Pending 0 1m", "EH9999: Inner Error!", "dcmi model initialized failed, ret is -8020",
    "CUDA error: no kernel image is available for execution on the device", "I0624 22:58:05.486593 1 x.go:1] y",
    "==============NVSMI LOG==============", "GPU 00000000:07:00.0", "    Product Name : A", "<?xml version=\"1.0\"?>",
    "<nvidia_smi_log>", "8 GPUs found.", "| 0 | Name: X |", "Message: 1/2 tasks in gang unschedulable: pod group",
    "", "   ", "\t", "\x1b[31m", "\r", "…", "：", "０",
    "192.0.2.10: ", "Dec  2 06:40:19 node-a1 kubelet[1]: ", "8月 18 16:33:56 node-a1 kernel: ", "[rank1]: ",
    "2026-12-02T06:40:19.1Z ", "6,1811,17257355375,-;", "[pod/a/b] ", "GPU 0: NVIDIA A100 (UUID: GPU-1)",
    "  MIG 1g.10gb     Device  0: (UUID: MIG-GPU-1/7/0)", "| GPU instances:   |", "|   0  MIG 1g.5gb  19  9  2:1 |",
    "GPU  0 Profile ID  0 Placement : {0}:4", "\tGPU0\tGPU1\tCPU Affinity", "GPU0\t X \tNV12\t0-47",
    "|  NvLink Link Status  |", "    gpuId 0:", "        D D U X _", "#Entity  XIDER", "GPU 1   120",
    "| Health Monitor Report |", "|  | PCIe system: Warning - x |", "index, gpu_recovery_action", "1, Reset",
    "CUDA out of memory. Tried to allocate 2 GiB. GPU 0 has a total capacity of 1 GiB of which 0 B is free.",
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=1) ran for 2 "
    "milliseconds before timing out.", "[ERROR] x (PID:1, Device:0, RankID:-1) ERR02200 DIST call hccl api failed.",
    "EI0006: Getting socket times out.", "[INFO]     2025/07/09 20:05:31.842816 1       main.go:193    x",
    "  Admission Checks:", "    State:   Pending", "NAME  QUEUE  ADMITTED BY  AGE", "  ctr:", "    Image:  x",
]


def _check(text: str) -> None:
    report = explain_text(text)
    assert report.exit_code() in (0, 1, 2)
    for finding in report.findings:
        assert finding.severity in SEVERITIES
        assert finding.owner is None or finding.owner in TEAMS
        if finding.severity == "unrecognised":
            assert finding.owner is None
        for line in finding.lines:
            assert 1 <= line.number <= max(report.lines, 1)
    assert report.to_dict()["exit_code"] == report.exit_code()
    if not report.readable:
        assert report.reason


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES) | st.text(max_size=40), max_size=25))
@example(["Events:", "  Warning"])
@example(["{", "\"a\": [1, 2"])
@example(["+---", "| NVIDIA-SMI 1 |", "|   0  ERR! |"])
@example(["Successfully ran diagnostic for group.", "{"])
def test_any_mix_of_pieces(parts: list[str]) -> None:
    _check("\n".join(parts))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_any_text(text: str) -> None:
    _check(text)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes(data: bytes) -> None:
    report = explain_bytes(data)
    assert report.exit_code() in (0, 1, 2)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(ALL) if ALL else st.just(""),
       st.integers(min_value=0, max_value=4000), st.integers(min_value=0, max_value=400))
@example(name=str(REAL / "kueue-workload-pending-hami-vgpu-quota.yaml"), cut=43, drop=0)  # conditions became a dict
def test_truncated_and_spliced_fixtures(name: str, cut: int, drop: int) -> None:
    if not name:
        return
    text = Path(name).read_bytes().decode("utf-8", errors="replace")
    _check(text[:cut])
    _check(text[drop:])
    _check(text[: cut // 2] + text[cut:])


@pytest.mark.parametrize("path", ALL, ids=[Path(p).name for p in ALL])
def test_every_fixture_whole_and_line_by_line(path: str) -> None:
    data = Path(path).read_bytes()
    report = explain_bytes(data)
    assert report.readable, f"{path}: {report.reason}"
    text = data.decode("utf-8", errors="replace")
    _check(text)
    for line in text.splitlines()[:200]:
        _check(line)


def test_every_fixture_folder_is_sampled() -> None:
    assert any("produced-here" in p for p in ALL) and any("/data/explain/" in p for p in ALL)


def test_empty_and_binary_are_unreadable() -> None:
    assert (explain_text("").readable, explain_text("").exit_code()) == (False, 2)
    assert explain_text("\n  \n").reason == "empty input"
    assert explain_bytes(b"\x00\x01\x02binary").exit_code() == 2
    assert explain_bytes("\ufeffnvidia-smi: command not found".encode("utf-8-sig")).findings[0].code == "nvidia_smi_missing"
