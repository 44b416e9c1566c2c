"""CPU probe on fake /proc and /sys trees shaped like real hosts and containers."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_hetero.probes.cgroup import cpulist_count, read_cgroup_limits
from pytest_hetero.probes.cpu import probe_cpu, read_cpu

XEON = "Intel(R) Xeon(R) Gold 6348 CPU @ 2.60GHz"
MEMINFO = "MemTotal:       527422416 kB\nMemFree:        500000000 kB\nMemAvailable:   510000000 kB\n"


def write(root: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(root)


def x86_cpuinfo(sockets: int, cores: int, threads: int) -> str:
    blocks = []
    n = 0
    for thread in range(threads):
        for sock in range(sockets):
            for core in range(cores):
                blocks.append(
                    f"processor\t: {n}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 106\n"
                    f"model name\t: {XEON}\nstepping\t: 6\ncpu MHz\t\t: 2600.000\ncache size\t: 43008 KB\n"
                    f"physical id\t: {sock}\nsiblings\t: {cores * threads}\ncore id\t\t: {core}\n"
                    f"cpu cores\t: {cores}\napicid\t\t: {n * 2 + thread}\nflags\t\t: fpu vme de pse tsc msr\n"
                )
                n += 1
    return "\n".join(blocks) + "\n"


KUNPENG = "".join(
    f"processor\t: {i}\nBogoMIPS\t: 200.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics\n"
    f"CPU implementer\t: 0x48\nCPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: 0xd01\nCPU revision\t: 0\n\n"
    for i in range(4)
)


def test_x86_two_sockets_with_hyperthreads_from_cpuinfo(tmp_path: Path) -> None:
    root = write(tmp_path, {"proc/cpuinfo": x86_cpuinfo(2, 2, 2), "proc/meminfo": MEMINFO})
    facts = read_cpu(root)
    assert (facts.model, facts.sockets, facts.physical_cores, facts.logical_cpus) == (XEON, 2, 4, 8)
    assert (facts.memory_total_mib, facts.numa_nodes, facts.cpu_limit_cores) == (515060, None, 8.0)
    assert facts.warnings == ("/proc/self/cgroup unreadable; no cgroup limits read",)
    inv = probe_cpu(root)
    assert [(d.index, d.name, d.memory_total_mib) for d in inv.devices] == [
        (0, XEON, 515060),
        (1, XEON, 515060),
    ]
    assert (inv.source, inv.attached_count, inv.healthy) == ("proc", 2, True)


def test_kunpeng_arm_topology_from_sysfs_and_numa(tmp_path: Path) -> None:
    files = {"proc/cpuinfo": KUNPENG, "proc/meminfo": "MemTotal:       1048576 kB\n"}
    for cpu, (pkg, core) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
        files[f"sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"] = f"{pkg}\n"
        files[f"sys/devices/system/cpu/cpu{cpu}/topology/core_id"] = f"{core}\n"
    for node in (0, 1):
        files[f"sys/devices/system/node/node{node}/cpulist"] = f"{node * 2}-{node * 2 + 1}\n"
        files[f"sys/devices/system/node/node{node}/meminfo"] = f"Node {node} MemTotal:       524288 kB\n"
    facts = read_cpu(write(tmp_path, files))
    assert (facts.model, facts.sockets, facts.physical_cores, facts.logical_cpus) == (
        "HiSilicon Kunpeng-920",
        2,
        4,
        4,
    )
    assert (facts.numa_nodes, facts.numa, facts.memory_total_mib) == (
        2,
        ({"node": 0, "cpus": 2, "memory_total_mib": 512}, {"node": 1, "cpus": 2, "memory_total_mib": 512}),
        1024,
    )


def test_arm_without_topology_warns(tmp_path: Path) -> None:
    facts = read_cpu(
        write(
            tmp_path,
            {
                "proc/cpuinfo": KUNPENG.replace("0xd01", "0xfff"),
                "proc/meminfo": MEMINFO,
                "proc/self/cgroup": "0::/\n",
                "sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
            },
        )
    )
    assert (facts.model, facts.sockets, facts.physical_cores, facts.logical_cpus) == (
        "ARM implementer 0x48 part 0xfff",
        None,
        None,
        4,
    )
    assert facts.warnings == ("no socket/core topology in /proc/cpuinfo or sysfs; sockets and cores unknown",)


def test_cgroup_v2_namespaced_container(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "proc/cpuinfo": x86_cpuinfo(1, 8, 2),
            "proc/meminfo": MEMINFO,
            "proc/self/cgroup": "0::/\n",
            "sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n",
            "sys/fs/cgroup/cpu.max": "250000 100000\n",
            "sys/fs/cgroup/memory.max": "4294967296\n",
            "sys/fs/cgroup/cpuset.cpus.effective": "0-3\n",
        },
    )
    facts = read_cpu(root)
    assert (
        facts.cgroup.version,
        facts.cgroup.path,
        facts.cgroup.cpu_quota_cores,
        facts.cgroup.cpuset_cpus,
    ) == (2, "/", 2.5, 4)
    assert (
        facts.cpu_limit_cores,
        facts.memory_limit_mib,
        facts.memory_effective_mib,
        facts.logical_cpus,
    ) == (2.5, 4096, 4096, 16)


def test_cgroup_v2_nested_path_parent_limit_wins(tmp_path: Path) -> None:
    pod = "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice"
    leaf = f"{pod}/cri-containerd-abc.scope"
    root = write(
        tmp_path,
        {
            "proc/self/cgroup": "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/"
            "cri-containerd-abc.scope\n",
            "sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
            f"{leaf}/cpu.max": "max 100000\n",
            f"{leaf}/memory.max": "max\n",
            f"{pod}/cpu.max": "150000 100000\n",
            f"{pod}/memory.max": "1073741824\n",
        },
    )
    limits = read_cgroup_limits(root)
    assert (limits.version, limits.cpu_quota_cores, limits.memory_limit_mib, limits.cpuset_cpus) == (
        2,
        1.5,
        1024,
        None,
    )
    assert limits.path is not None and limits.path.endswith("cri-containerd-abc.scope")


def test_cgroup_v2_unlimited(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "proc/cpuinfo": x86_cpuinfo(1, 2, 1),
            "proc/meminfo": MEMINFO,
            "proc/self/cgroup": "0::/user.slice\n",
            "sys/fs/cgroup/cgroup.controllers": "cpu\n",
            "sys/fs/cgroup/user.slice/cpu.max": "max 100000\n",
            "sys/fs/cgroup/user.slice/memory.max": "max\n",
        },
    )
    facts = read_cpu(root)
    assert (
        facts.cgroup.cpu_quota_cores,
        facts.memory_limit_mib,
        facts.cpu_limit_cores,
        facts.memory_effective_mib,
    ) == (None, None, 2.0, 515060)


def test_cgroup_v1_kubernetes_pod(tmp_path: Path) -> None:
    path = "/kubepods/burstable/pod1/abc"
    root = write(
        tmp_path,
        {
            "proc/cpuinfo": x86_cpuinfo(2, 4, 2),
            "proc/meminfo": MEMINFO,
            "proc/self/cgroup": f"12:memory:{path}\n4:cpu,cpuacct:{path}\n3:cpuset:{path}\n1:name=systemd:{path}\n0::/\n",
            f"sys/fs/cgroup/cpu,cpuacct{path}/cpu.cfs_quota_us": "50000\n",
            f"sys/fs/cgroup/cpu,cpuacct{path}/cpu.cfs_period_us": "100000\n",
            f"sys/fs/cgroup/memory{path}/memory.limit_in_bytes": "536870912\n",
            "sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes": "9223372036854771712\n",
            f"sys/fs/cgroup/cpuset{path}/cpuset.cpus": "0-1,4\n",
        },
    )
    facts = read_cpu(root)
    assert (
        facts.cgroup.version,
        facts.cgroup.path,
        facts.cgroup.cpu_quota_cores,
        facts.cgroup.cpuset_cpus,
    ) == (1, path, 0.5, 3)
    assert (facts.cpu_limit_cores, facts.memory_limit_mib, facts.memory_effective_mib) == (0.5, 512, 512)


def test_cgroup_v1_docker_without_cgroupns_reads_mount_root(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "proc/self/cgroup": "4:cpu,cpuacct:/docker/0123abcd\n9:memory:/docker/0123abcd\n",
            "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
            "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
            "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
        },
    )
    limits = read_cgroup_limits(root)
    assert (limits.version, limits.cpu_quota_cores, limits.memory_limit_mib) == (1, None, None)
    write(
        tmp_path,
        {
            "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "200000\n",
            "sys/fs/cgroup/memory/memory.limit_in_bytes": "2147483648\n",
        },
    )
    limits = read_cgroup_limits(root)
    assert (limits.cpu_quota_cores, limits.memory_limit_mib) == (2.0, 2048)


def test_memory_limit_above_host_total(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "proc/meminfo": "MemTotal:        2097152 kB\n",
            "proc/self/cgroup": "0::/\n",
            "sys/fs/cgroup/cgroup.controllers": "memory\n",
            "sys/fs/cgroup/memory.max": "8589934592\n",
        },
    )
    facts = read_cpu(root)
    assert (facts.memory_total_mib, facts.memory_limit_mib, facts.memory_effective_mib) == (2048, 8192, 2048)


def test_empty_root(tmp_path: Path) -> None:
    facts = read_cpu(str(tmp_path))
    assert (facts.model, facts.logical_cpus, facts.memory_total_mib, facts.cpu_limit_cores) == (
        None,
        None,
        None,
        None,
    )
    assert facts.warnings == (
        "/proc/cpuinfo unreadable",
        "/proc/meminfo has no MemTotal",
        "/proc/self/cgroup unreadable; no cgroup limits read",
    )
    assert probe_cpu(str(tmp_path)).devices == ()


def test_cpulist_count() -> None:
    assert [cpulist_count(x) for x in ("0-3,8-11", "5", "", None, "0-x", " 0-1 \n")] == [
        8,
        1,
        None,
        None,
        None,
        2,
    ]


def test_live_host_reads_something() -> None:
    facts = read_cpu("/")
    assert facts.logical_cpus is not None and facts.logical_cpus >= 1
    assert facts.cpu_limit_cores is not None and 0 < facts.cpu_limit_cores <= facts.logical_cpus


@settings(max_examples=150, deadline=None)
@given(st.text(), st.text(), st.text(), st.text())
def test_any_file_content_never_raises(cpuinfo: str, meminfo: str, cgroup: str, cpumax: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = write(
            Path(tmp),
            {
                "proc/cpuinfo": cpuinfo,
                "proc/meminfo": meminfo,
                "proc/self/cgroup": cgroup,
                "sys/fs/cgroup/cpu.max": cpumax,
                "sys/fs/cgroup/memory.max": cpumax,
                "sys/fs/cgroup/cpu/cpu.cfs_quota_us": cpumax,
            },
        )
        facts = read_cpu(root)
        assert facts.logical_cpus is None or facts.logical_cpus >= 1
        assert probe_cpu(root).vendor == "cpu"


def test_cgroup_path_escaping_the_mount_reads_the_mount_root(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "proc/self/cgroup": "0::/../../kubepods.slice/x.scope\n",
            "sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
            "sys/fs/cgroup/cpu.max": "100000 100000\n",
            "kubepods.slice/x.scope/cpu.max": "1 100000\n",
        },
    )
    limits = read_cgroup_limits(root)
    assert (limits.version, limits.cpu_quota_cores, limits.cpuset_cpus) == (2, 1.0, None)
