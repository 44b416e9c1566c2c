"""Other real layouts of the kinds batch 3 brought (other driver/DCGM/torch versions, padding, failures), written
from the tools' documented formats: each reader must handle the whole kind, not the one sample in FACTS.md."""

from __future__ import annotations

from pytest_hetero.explain import Finding, Report, explain_text


def _all(report: Report, code: str) -> list[Finding]:
    return [f for f in report.findings if f.code == code]


def _one(report: Report, code: str) -> Finding:
    found = _all(report, code)
    assert len(found) == 1, (code, [f.code for f in report.findings])
    return found[0]


# --- nvidia-smi -L / mig ------------------------------------------------------------------------------

R460_LIST = """GPU 0: A100-SXM4-40GB (UUID: GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f)
  MIG 3g.20gb Device 0: (UUID: MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/1/0)
  MIG 2g.10gb Device 1: (UUID: MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/5/0)
GPU 1: A100-SXM4-40GB (UUID: GPU-0e7b1f3a-1234-5678-9abc-def012345678)
""".replace("5678)\n", "5678)   \n")  # padded as some drivers print it


def test_list_r460_mig_gpu_uuid_names_carry_gi_and_ci() -> None:
    r = explain_text(R460_LIST)
    migs = _all(r, "mig_device")
    assert [(m.quantities["profile"], m.quantities["gpu_instance_id"], m.quantities["compute_instance_id"],
             m.quantities["parent_uuid"]) for m in migs] == [
        ("3g.20gb", 1, 0, "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f"),
        ("2g.10gb", 5, 0, "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f")]
    assert [g.quantities["mig_devices"] for g in _all(r, "gpu_listed")] == [2, 0]
    assert _one(r, "gpu_list").quantities["mig_profiles"] == "2g.10gb,3g.20gb" and r.exit_code() == 0


def test_list_two_digit_mig_device_index() -> None:
    text = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaaaaaa-0000-0000-0000-000000000001)\n" + "".join(
        f"  MIG 1g.10gb     Device {n:2d}: (UUID: MIG-aaaaaaaa-0000-0000-0000-0000000000{n:02d})\n" for n in range(12))
    r = explain_text(text)
    assert [m.entity["mig_device"] for m in _all(r, "mig_device")] == [str(n) for n in range(12)]


LCI = """+--------------------------------------------------------------------+
| Compute instances:                                                 |
| GPU     GPU       Name             Profile   Instance   Placement  |
|       Instance                       ID        ID       Start:Size |
|         ID                                                         |
|====================================================================|
|   0      1       MIG 1c.3g.20gb       0         0          0:1     |
+--------------------------------------------------------------------+
|   0      1       MIG 1c.3g.20gb       0         1          1:1     |
+--------------------------------------------------------------------+
|   0      2       MIG 3g.20gb          2         0          0:3     |
+--------------------------------------------------------------------+
"""

LCIP = """+--------------------------------------------------------------------------------------+
| Compute instance profiles:                                                           |
| GPU     GPU       Name             Profile  Instances   Exclusive       Shared       |
|       Instance                       ID     Free/Total     SM       DEC   ENC   OFA  |
|         ID                                                          CE    JPEG       |
|======================================================================================|
|   0      1       MIG 1c.3g.20gb       0      1/3           14        2     0     0   |
|                                                                     3     0          |
+--------------------------------------------------------------------------------------+
|   0      1       MIG 3g.20gb          2*     0/1           42        2     0     0   |
|                                                                     3     0          |
+--------------------------------------------------------------------------------------+
"""


def test_mig_lci_and_lcip() -> None:
    r = explain_text(LCI)
    assert [(c.entity["gpu_instance_id"], c.entity["compute_instance_id"], c.quantities["profile"],
             c.quantities["placement_start"], c.quantities["placement_size"]) for c in _all(r, "compute_instance")] == [
        ("1", "0", "1c.3g.20gb", 0, 1), ("1", "1", "1c.3g.20gb", 1, 1), ("2", "0", "3g.20gb", 0, 3)]
    p = explain_text(LCIP)
    assert [(c.quantities["profile"], c.quantities["profile_id"], c.quantities["free"], c.quantities["total"],
             c.quantities["sm"], c.quantities["default"], c.quantities["ce"]) for c in
            _all(p, "compute_instance_profile")] == [("1c.3g.20gb", 0, 1, 3, 14, False, 3),
                                                     ("3g.20gb", 2, 0, 1, 42, True, 3)]


def test_mig_answers_with_nothing_found() -> None:
    r = explain_text("$ sudo nvidia-smi mig -lgi\nNo GPU instances found: Not Found\n")
    f = _one(r, "mig_none")
    assert (f.severity, r.exit_code(), r.blocks[-1].kind) == ("ok", 0, "nvidia-smi-mig")


# --- topo -m --------------------------------------------------------------------------------------------

TOPO_OLD = "\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV18\tPHB\t0-47\t0\nGPU1\tNV18\t X \tPHB\t0-47" \
           "\t0\nmlx5_0\tPHB\tPHB\t X \t\t\n\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set " \
           "of # NVLinks\n"


def test_topo_older_driver_tabs_mlx_columns_no_gpu_numa_id() -> None:
    r = explain_text(TOPO_OLD)
    (f,) = r.findings
    q = f.quantities
    assert (q["gpus"], q["nics"], q["nvlink"], q["gpu_links"], q["link.GPU0-GPU1"], q["link.GPU0-mlx5_0"]) == (
        2, 1, True, "NV18:1", "NV18", "PHB")
    assert (q["GPU1.cpu_affinity"], q["GPU1.numa_affinity"]) == ("0-47", "0") and "GPU1.gpu_numa_id" not in q


# --- dcgmi nvlink / health / dmon -----------------------------------------------------------------------

NVLINK_DOWN = """+----------------------+
|  NvLink Link Status  |
+----------------------+
GPUs:
    gpuId 0:
        D D D D D D D D D D D D
    gpuId 1:
        U U U U U U U U U U U U
NvSwitches:
    physicalId 8:
        U U U U U U U U U U U U U U U U U U X X X X X X X X X X X X X X X X X X _ _ _ _
Key: Up=U, Down=D, Disabled=X, Not Supported=_
"""


def test_nvlink_all_links_down_is_a_finding_not_unreadable() -> None:
    r = explain_text(NVLINK_DOWN)
    down = _one(r, "nvlink_down")
    assert (down.entity["gpu_index"], down.quantities["down"], down.quantities["links"], down.owner) == (
        "0", 12, 12, "infrastructure")
    assert "every link" in down.meaning and r.readable and r.exit_code() == 1
    switch = [f for f in _all(r, "nvlink_status") if "nvswitch" in f.entity][0]
    assert (switch.quantities["up"], switch.quantities["disabled"], switch.quantities["not_supported"]) == (18, 18, 4)
    s = _one(r, "nvlink_report").quantities
    assert (s["gpus"], s["nvswitches"], s["links_down"], s["links_up"]) == (2, 1, 12, 30)


HEALTH_WARN = """+---------------------------+----------------------------------------------------------+
| Health Monitor Report                                                                |
+===========================+==========================================================+
| Group 0                   | Overall Health: Warning                                  |
+===========================+==========================================================+
| GPU ID: 0                 | Warning                                                  |
|                           | PCIe system: Warning - Detected more than 8 PCIe         |
|                           | replays per minute for GPU 0 : 13 Reached rate limit     |
|                           | which is just over 1 per second                          |
+---------------------------+----------------------------------------------------------+
"""

HEALTH_2X = """+---------------------------+----------------------------------------------------------+
| Health Monitor Report                                                                |
+===========================+==========================================================+
| Overall Health            | Healthy                                                  |
+---------------------------+----------------------------------------------------------+
"""


def test_dcgmi_health_box_with_an_incident_and_the_2x_layout() -> None:
    r = explain_text(HEALTH_WARN)
    inc = _one(r, "dcgm_health_incident")
    assert (inc.entity["gpu_index"], inc.quantities["system"], inc.severity, inc.owner) == (
        "0", "PCIe system", "warning", "infrastructure")
    assert inc.quantities["message"] == ("Warning - Detected more than 8 PCIe replays per minute for GPU 0 : 13 "
                                         "Reached rate limit which is just over 1 per second")
    assert _one(r, "dcgm_health").quantities["overall_health"] == "Warning" and r.exit_code() == 1
    ok = explain_text(HEALTH_2X)
    assert (_one(ok, "dcgm_health").quantities["overall_health"], ok.exit_code()) == ("Healthy", 0)


def test_dcgmi_health_json_with_an_incident() -> None:
    text = ('{"body": {"GPU": {"children": {"0": {"children": {"Memory system": {"children": {"Failure": {'
            '"value": "A volatile double-bit ECC error has occurred on GPU 0"}}}}, "value": "Failure"}}}, '
            '"Overall Health": {"value": "Failure"}}, "header": ["Health Monitor Report"]}')
    r = explain_text(text)
    inc = _one(r, "dcgm_health_incident")
    assert (inc.entity["gpu_index"], inc.quantities["system"], inc.severity) == ("0", "Memory system", "error")
    assert _one(r, "dcgm_health").quantities["overall_health"] == "Failure" and r.exit_code() == 1


def test_dcgmi_dmon_several_fields() -> None:
    text = "#Entity   TMPTR  POWER  XIDER\nID\nGPU 0     41     65.2   0\nGPU 1     44     70.1   79\n"
    r = explain_text(text)
    assert _one(r, "xid_79").entity["gpu_index"] == "1"
    row = _one(r, "dcgm_field_values")
    assert (row.quantities["temperature_c"], row.quantities["power_w"], row.quantities["last_xid"]) == (41, "65.2", 0)


def test_query_gpu_csv_with_header_and_units() -> None:
    text = ("index, name, memory.total [MiB], gpu_recovery_action\n0, NVIDIA H100 80GB HBM3, 81559 MiB, None\n"
            "1, NVIDIA H100 80GB HBM3, 81559 MiB, Drain_and_Reset\n")
    r = explain_text(text)
    bad = _one(r, "gpu_recovery_required")
    assert (bad.entity["gpu_index"], bad.quantities["gpu_recovery_action"], bad.quantities["memory.total"]) == (
        "1", "Drain_and_Reset", "81559 MiB")
    assert _one(r, "gpu_query_row").quantities["name"] == "NVIDIA H100 80GB HBM3"


# --- framework errors -----------------------------------------------------------------------------------

OOM_21 = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacty "
          "of 79.15 GiB of which 6.12 MiB is free. Process 12345 has 79.13 GiB memory in use. Of the allocated memory "
          "78.50 GiB is allocated by PyTorch, and 120.30 MiB is reserved by PyTorch but unallocated. If reserved but "
          "unallocated memory is large try setting max_split_size_mb to avoid fragmentation.")
OOM_25 = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of "
          "23.55 GiB of which 1.19 GiB is free. Including non-PyTorch memory, this process has 22.35 GiB memory in "
          "use. Of the allocated memory 21.80 GiB is allocated by PyTorch, and 101.27 MiB is reserved by PyTorch but "
          "unallocated.")
NPU_OOM = ("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 5; 60.97 GiB total capacity; 57.67 GiB "
           "already allocated; 57.67 GiB current active; 1.02 GiB free; 58.38 GiB reserved in total by PyTorch) If "
           "reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.")


def test_torch_oom_new_wordings_and_npu() -> None:
    a = _one(explain_text(OOM_21), "cuda_memory_allocation")
    assert (a.entity["gpu_index"], a.quantities["total_capacity"], a.quantities["free"], a.quantities["free_mib"],
            a.quantities["other_process.12345"], a.quantities["allocated_by_pytorch"],
            a.quantities["reserved_unallocated"]) == ("0", "79.15 GiB", "6.12 MiB", 6.12, "79.13 GiB", "78.50 GiB",
                                                      "120.30 MiB")
    b = _one(explain_text(OOM_25), "cuda_memory_allocation")
    assert (b.entity["gpu_index"], b.quantities["process_in_use"], b.quantities["tried_to_allocate_mib"]) == (
        "3", "22.35 GiB", 2048.0)
    n = _one(explain_text(NPU_OOM), "npu_out_of_memory")
    assert (n.entity["npu_id"], n.owner, n.quantities["current_active"], n.quantities["free"],
            n.quantities["reserved_by_pytorch"]) == ("5", "algorithm", "57.67 GiB", "1.02 GiB", "58.38 GiB")


NCCL_NO_ROUTE = """torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3
ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.
Last error:
socketStartConnect: Connect to 10.0.0.2<43215> failed : No route to host
"""


def test_nccl_unhandled_system_error_no_route_to_host() -> None:
    r = explain_text(NCCL_NO_ROUTE)
    (f,) = r.findings
    assert (f.code, f.owner, f.quantities["nccl_version"], f.quantities["peer"], f.quantities["network_error"]) == (
        "nccl_system_error", "infrastructure", "2.19.3", "10.0.0.2", "No route to host")
    assert "No route to host" in f.meaning and len(f.lines) == 4


def test_nccl_remote_error_and_watchdog_stuck_are_undetermined() -> None:
    r = explain_text("RuntimeError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
                     "remote process exited or there was a network error, NCCL version 2.20.5\n\n"
                     "[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] ProcessGroupNCCL's watchdog got stuck for "
                     "480 seconds without making progress in monitoring enqueued collectives.")
    remote, stuck = r.findings
    assert (remote.code, remote.owner, remote.undetermined, remote.failure) == (
        "nccl_remote_error", None, True, "collective_peer_unknown")
    assert "owner" not in remote.quantities and remote.to_dict()["owner"] == "undetermined"
    assert (stuck.code, stuck.quantities["stuck_s"], stuck.entity["rank"]) == ("nccl_watchdog_stuck", 480, "0")


def test_torch_npu_err_codes_pta_and_ops_acl() -> None:
    r = explain_text("[ERROR] 2024-06-01-10:00:00 (PID:1234, Device:2, RankID:5) ERR00100 PTA call acl api failed\n\n"
                     "[ERROR] 2024-06-01-10:00:01 (PID:1234, Device:2, RankID:5) ERR01100 OPS call acl api failed")
    a, b = _all(r, "torch_npu_error")
    assert (a.quantities["torch_npu_code"], a.quantities["submodule"], a.quantities["error_type"], dict(a.entity)) == (
        "ERR00100", "PTA", "call acl api failed", {"pid": "1234", "npu_id": "2", "rank": "5"})
    assert (b.quantities["torch_npu_code"], b.quantities["submodule"]) == ("ERR01100", "OPS")


def test_cann_runtime_trace_alone_is_not_hccl() -> None:
    r = explain_text("EE1001: 2024-05-21-11:57:54.167.645 The argument is invalid.Reason: rtGetDevMsg execute failed, "
                     "reason=[driver error:internal error]\n        rtGetDevMsg execute failed, reason=[driver error:"
                     "internal error][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]")
    assert not [f for f in r.findings if f.code.startswith("hccl")]
    f = _one(r, "cann_ee1001")
    assert (f.quantities["runtime_call"], f.quantities["runtime_reason"]) == ("rtGetDevMsg", "driver error:internal error")


# --- Kueue ----------------------------------------------------------------------------------------------


def test_kueue_get_workloads_v06_layout() -> None:
    r = explain_text("NAME                QUEUE        RESERVED IN     ADMITTED   FINISHED   AGE\n"
                     "job-train-a-e6bc6   user-queue   cluster-queue   True                  12m\n"
                     "job-train-b-78819   user-queue                                         3m\n")
    a, b = _all(r, "kueue_workload")
    assert (a.quantities["reserved_in"], a.quantities["admitted"], a.age) == ("cluster-queue", "True", "12m")
    assert ("reserved_in" not in b.quantities, b.entity["workload"], b.age) == (True, "job-train-b-78819", "3m")


# --- events and describe fragments --------------------------------------------------------------------


def test_single_space_event_rows() -> None:
    r = explain_text("Warning FailedScheduling 3m default-scheduler 0/3 nodes are available: 3 Insufficient "
                     "nvidia.com/gpu.\nNormal Scheduled 2m default-scheduler Successfully assigned default/x to node-a1"
                     "\nWarning Failed 10s (x3 over 40s) kubelet, node-a1 Error: failed to create containerd task: "
                     "nvidia-container-cli: initialization error: nvml error: driver not loaded")
    assert [(f.code, f.age, f.count, f.entity.get("reporter")) for f in r.findings] == [
        ("insufficient_resource", "3m", 1, "default-scheduler"), ("device_runtime_error", "10s", 3, "kubelet, node-a1"),
        ("events_normal", None, 1, None)]


def test_container_block_without_containers_heading() -> None:
    r = explain_text("  nvidia-device-plugin-ctr:\n    Container ID:   containerd://abc\n"
                     "    Image:          nvcr.io/nvidia/k8s-device-plugin:v0.14.1\n    State:          Waiting\n"
                     "      Reason:       CrashLoopBackOff\n    Last State:     Terminated\n      Reason:       Error\n"
                     "      Message:      nvidia-container-cli: initialization error: nvml error: driver not loaded\n"
                     "      Exit Code:    1\n    Ready:          False\n    Restart Count:  12")
    assert [b.kind for b in r.blocks] == ["describe-pod"]
    assert [(f.code, f.entity["container"]) for f in r.findings] == [
        ("crash_loop", "nvidia-device-plugin-ctr"), ("device_runtime_error", "nvidia-device-plugin-ctr")]
    assert r.findings[1].quantities["exit_code"] == "1"


def test_kueue_eviction_reported_as_a_normal_event_is_a_finding() -> None:
    r = explain_text("Events:\n  Type    Reason                        Age   From             Message\n"
                     "  ----    ------                        ----  ----             -------\n"
                     "  Normal  QuotaReserved                 12m   kueue-admission  Quota reserved in ClusterQueue "
                     "cluster-queue, wait time since queued was 0s\n"
                     "  Normal  EvictedDueToPodsReadyTimeout  2m    kueue-admission  Exceeded the PodsReady timeout "
                     "default/job-train-a-e6bc6\n")
    ev = _one(r, "workload_evicted")
    assert (ev.severity, ev.owner, ev.age, ev.quantities["event_reason"], ev.quantities["event_type"]) == (
        "error", "platform", "2m", "EvictedDueToPodsReadyTimeout", "Normal")
    assert _one(r, "events_normal").quantities["reasons"] == "QuotaReserved" and r.exit_code() == 1


def test_hccl_remote_rank_timeout_is_undetermined() -> None:
    r = explain_text("[ERROR] 2024-06-01-10:00:00 (PID:1234, Device:2, RankID:5) ERR02200 DIST call hccl api failed.\n"
                     "EI0006: 2024-06-01-10:00:00.123.456 Getting socket times out. Reason: 1. The remote does not "
                     "initiate a connect request. some NPUs in the cluster are abnormal.")
    (f,) = r.findings
    assert (f.code, f.owner, f.undetermined, f.quantities["cann_code"], f.entity["rank"]) == (
        "hccl_remote_timeout", None, True, "EI0006", "5")
    assert "infrastructure (a peer NPU" in str(f.owner_candidates)
    assert r.exit_code() == 1 and r.owners() == ()


def test_echoed_nvidia_container_cli_invocation_is_not_an_error() -> None:
    r = explain_text("I0301 10:00:00.000000       1 hook.go:12] running nvidia-container-cli --load-kmods configure "
                     "--ldconfig=@/sbin/ldconfig.real --device=all --compute --utility --require=cuda>=12.0 --pid=1234 "
                     "/run/containerd/rootfs")
    assert [(f.code, f.severity) for f in r.findings] == [("component_log", "ok")] and r.exit_code() == 0
    bad = explain_text("nvidia-container-cli: initialization error: nvml error: driver not loaded")
    assert bad.exit_code() == 1


def test_text_rendering_names_an_undetermined_owner_and_its_candidates() -> None:
    from pytest_hetero.cli.explain import render_text

    r = explain_text("[rank0]:[E626 06:24:44.1 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
                     "timeout: WorkNCCL(SeqNum=8, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran "
                     "for 1800091 milliseconds before timing out.")
    first = render_text(r).splitlines()[0]
    assert first.startswith("ERROR nccl_watchdog_timeout [owner undetermined] rank=0 - collective BROADCAST (SeqNum 8)")
    assert "candidates: infrastructure (a peer GPU" in first and "next: read every rank's log" in first
