"""Measure: facts ``hetero explain`` extracts / facts FACTS.md expects, over the batch-3 real fixtures.

Each fixture of ``../shared/fixtures/real/`` FACTS.md "Batch 3" is listed below with the values its "Expected
facts" column names (counts, ids, codes, sizes, versions as printed) and the owner it gives. A value counts as
extracted when some finding of the report carries it, under any key, in its entity, quantities, count, age or
timestamps — so the measure does not depend on this version's finding codes or key names and can be run against
an older checkout. The owner counts as right when the set of teams named by the report's warning/error findings
is exactly the expected one (``()`` for "none" and for "not decidable from the file": the reader must then name
no team) and the exit status is 1 for a file that shows a problem, 0 otherwise.

A second figure: the same facts with ``192.0.2.10: `` (a forwarding host) put before every line.

Usage: ``PYTHONPATH=<checkout> python bench/bench_reader_facts.py [--prefix]`` — prints per file and in total
``facts extracted/expected`` and ``owners right/files``; run it with an older checkout on PYTHONPATH for the
"before" figure. Exit status 0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REAL = Path(__file__).resolve().parents[2] / "shared/fixtures/real"

Fact = object
FACTS: dict[str, tuple[tuple[Fact, ...], tuple[str, ...], int]] = {
    # file: (values a correct reader extracts, owners of its problems, expected exit status)
    "nvidia-smi-L-a100-sxm4-80gb-seven-mig-1g10gb-devices.txt": (
        ("NVIDIA A100-SXM4-80GB", "GPU-00000000-0000-0000-0000-000000000001", "1g.10gb", 7,
         "MIG-00000000-0000-0000-0000-000000000001", "MIG-00000000-0000-0000-0000-000000000007"), (), 0),
    "nvidia-smi-L-two-quadro-rtx-4000-no-mig.txt": (
        ("Quadro RTX 4000", "GPU-00000000-0000-0000-0000-000000000001", "GPU-00000000-0000-0000-0000-000000000002",
         2), (), 0),
    "nvidia-smi-mig-lgi-gpu0-gpu1-1g10gb-2g20gb-3g40gb-placements-excerpt.txt": (
        ("1g.10gb", "2g.20gb", "3g.40gb", 19, 14, 9, "13", "14", "0-7"), (), 0),
    "nvidia-smi-mig-lgip-lgipp-lgi-four-1g6gb-instances-all-profiles-0-free.txt": (
        ("1g.6gb", "1g.6gb+me", "2g.12gb", "4g.24gb", 5.81, 11.69, 23.5, 56, "0,1,2,3", "0,2", "0-3"), (), 0),
    "nvidia-smi-topo-m-8x-a100-nv12-17-nics-nic-legend.txt": (
        ("NV12", "PXB", "SYS", "PIX", "0-103", "mlx5_2", "mlx5_17", "mlx5_bond_0", 8, 17), (), 0),
    "nvidia-smi-topo-m-4x-a10-sys-only-2-nics-no-nvlink.txt": (
        ("SYS", "PIX", "0-127", "mlx5_0", "mlx5_1", 4, 2), (), 0),
    "nvidia-smi-q-excerpt-a100-sxm4-80gb-dram-correctable-177-row-remap-pending.txt": (
        ("Wed Jun  7 19:32:16 2023", "510.73.08", "11.6", 8, "00000000:10:1C.0", "NVIDIA A100-SXM4-80GB", 177, 639,
         "639 bank(s)"), ("infrastructure",), 1),
    "dcgmi-nvlink-s-8-gpus-18-links-all-up-no-nvswitches.txt": ((18, 144, 8), (), 0),
    "dcgmi-health-c-j-healthy-while-gpu1-xider-120-recovery-action-reset.txt": (
        ("Reset", 120, "Healthy"), ("infrastructure",), 1),
    "dcgmi-diag-r2-dcgm-3-3-0-pcie-fail-cuda-driver-combination-gpu-memory-skip.txt": (
        ("3.3.0", "530.30.02", "PCIe", "Fail - All"), ("platform",), 1),
    "syslog-kernel-nvswitch-probe-h100-5d-fallen-off-bus-probe-failed-gsp-firmware-error-2.txt": (
        ("0000:5d:00", "10de:2330", "525.125.06", -1, -2, "nvidia/525.125.06/gsp_tu10x.bin"), ("infrastructure",),
        1),
    "dmesg-T-nvrm-xid79-fallen-off-bus-a1-and-nvidia-smi-unknown-error.txt": (
        ("535.161.07", 79, "0000:a1:00", "GPU-00000000-0000-0000-0000-000000000001", "Unknown Error"),
        ("infrastructure",), 1),
    "torch-cuda-outofmemoryerror-old-message-tried-1-67-gib-gpu0-3-95-gib.txt": (
        ("1.67 GiB", "3.95 GiB", "246.26 MiB", "770.62 MiB", "1.91 GiB", "0"), ("algorithm",), 1),
    "torch-runtimeerror-cuda-oom-old-format-gpu1-tried-1-65-gib-1-40-free.txt": (
        ("1.65 GiB", "7.79 GiB", "3.53 GiB", "1.40 GiB", "5.28 GiB", "1"), ("algorithm",), 1),
    "nccl-watchdog-timeout-allreduce-seqnum-808-600000ms-ranks-0-1-2-excerpt.txt": (
        (808, "ALLREDUCE", 9801523, 600000, 600020, 600030, 600061, 811, 807), (), 1),
    "hccl-comminitrootinfoconfig-error-15-err02200-ee9999-phyid-device-id-error-rank1.txt": (
        (15, "ERR02200", "EE9999", "0x7010003", "1", "0"), ("platform",), 1),
    "cann-ez9999-op-equal-no-binary-errno-561000-err01005-device0.txt": (
        ("EZ9999", 561000, "ERR01005", "Equal", "0", -1), ("platform",), 1),
    "hccl-processgrouphccl-barrier-err02200-ej0001-hccp-init-failed-device3-excerpt.txt": (
        ("ERR02200", "EJ0001", "0x7020010", "3"), ("algorithm",), 1),
    "kueue-describe-workload-quotareserved-admission-check-pending-and-get-workloads.txt": (
        ("sample-multikueue", "Pending", "QuotaReserved", "jobset-sleep-job-5xh9k-af81b", "user-queue",
         "cluster-queue", "2m5s"), ("platform",), 1),
    "volcano-podgroup-status-yaml-unschedulable-condition-phase-unknown-running-2.yaml": (
        ("NotEnoughResources", "Unknown", 2, 3), (), 1),
    "hami-scheduler-log-vgpu-pod-filter-tesla-p4-cores-100-of-100-used-excerpt.txt": (
        ("vgpu-test-dc87df5b4-6ndkz", "vgpu-test-dc87df5b4-24r9c", "node-a1", 7680, 100, 10, 1000,
         "NVIDIA-Tesla P4"), ("business",), 1),
    "ascend-device-plugin-log-v7-0-rc1-910b3-startup-amp-mode-warn-excerpt.txt": (
        ("v7.0.RC1.SPC1_linux-aarch64", "center", "24.1.rc3", "910B3", "Ascend910B", 5), (), 0),
    "journalctl-zh-locale-kubelet-ascend-910b4-listandwatch-eof-ascend-docker-runtime-exit-1.txt": (
        ("huawei.com/Ascend910B4-1", "EOF", "vllm", "test4-780cd89b-c75965f9b-knvsg", 1), ("platform",), 1),
}


def _values(report: object) -> list[object]:
    out: list[object] = []
    for f in getattr(report, "findings", ()):
        out += list(f.entity.values()) + list(f.quantities.values()) + [f.count, f.age] + list(f.timestamps)
    return out


def _has(values: list[object], fact: object) -> bool:
    for v in values:
        if isinstance(fact, bool) or isinstance(v, bool):
            if v is fact:
                return True
        elif isinstance(fact, (int, float)) and isinstance(v, (int, float)) and v == fact:
            return True
        elif isinstance(fact, str) and isinstance(v, str) and v == fact:
            return True
    return False


def measure(prefix: str = "") -> tuple[int, int, int, int]:
    """``(facts extracted, facts expected, owners right, files)`` over :data:`FACTS`, with ``prefix`` before every
    non-blank line."""
    from pytest_hetero.explain import explain_text

    got = want = right = 0
    for name, (facts, owners, exit_code) in FACTS.items():
        text = (REAL / name).read_bytes().decode("utf-8")
        if prefix:
            text = "\n".join(prefix + ln if ln.strip() else ln for ln in text.split("\n"))
        report = explain_text(text)
        values = _values(report)
        found = sum(1 for fact in facts if _has(values, fact))
        teams = set(report.owners())
        ok = teams == set(owners) and report.exit_code() == exit_code
        got, want, right = got + found, want + len(facts), right + ok
        print(f"  {found:2d}/{len(facts):2d}  owner {'ok ' if ok else 'BAD'} {sorted(teams)!s:28} {name}")
    return got, want, right, len(FACTS)


def main(argv: list[str] | None = None) -> int:
    """Print the measure (see the module docstring); 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--prefix", action="store_true", help="also measure with a forwarding host before each line")
    args = parser.parse_args(argv)
    import pytest_hetero

    print(f"explain from {Path(pytest_hetero.__file__).parent}")
    runs = [("bare", "")] + ([("prefixed '192.0.2.10: '", "192.0.2.10: ")] if args.prefix else [])
    for label, prefix in runs:
        print(f"{label}:")
        got, want, right, files = measure(prefix)
        print(f"{label}: facts {got}/{want} = {got / want:.0%}; owners and exit status right {right}/{files}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
