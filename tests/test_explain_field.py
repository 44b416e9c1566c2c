"""Published outputs the readers were not built on (``tests/data/field/FACTS.md``): facts and owners."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hetero.explain import Finding, Report, explain_bytes

FIELD = Path(__file__).resolve().parent / "data" / "field"


def _read(name: str) -> Report:
    return explain_bytes((FIELD / name).read_bytes())


def _problems(r: Report) -> list[Finding]:
    return [f for f in r.findings if f.unhealthy]


def test_every_file_is_listed_in_facts() -> None:
    listed = (FIELD / "FACTS.md").read_text()
    assert sorted(p.name for p in FIELD.iterdir() if p.name != "FACTS.md" and p.name not in listed) == []


def test_nccl_ib_completion_errors_per_node() -> None:
    r = _read("nccl-ib-completion-error-4-vendor-err-81-three-hosts.txt")
    found = [(f.code, f.owner, f.entity.get("node"), f.entity.get("pid"), f.entity.get("cuda_device"),
              f.quantities["ib_status"], f.quantities["vendor_err"], f.quantities["direction"]) for f in r.findings]
    assert found == [
        ("nccl_ib_completion_error", "infrastructure", "H100-2", "19989", "1", 4, 81, "Send"),
        ("nccl_ib_completion_error", "infrastructure", "H100-1", "9821", "1", 4, 81, "Send"),
        ("nccl_ib_completion_error", "infrastructure", "H100-5", "68738", "3", 4, 81, "Send")]
    assert [[line.number for line in f.lines] for f in r.findings] == [[1, 2, 3, 4], [6, 7, 8, 9], [11]]
    assert r.exit_code() == 1


def test_nccl_ib_completion_newer_format_with_gids() -> None:
    (f,) = _read("nccl-ib-completion-status-12-vendor-err-129-gids.txt").findings
    q = f.quantities
    assert (f.code, f.owner, q["ib_status"], q["opcode"], q["vendor_err"], q["direction"], q["local_gid"],
            q["remote_gid"]) == ("nccl_ib_completion_error", "infrastructure", 12, 1, 129, "Send",
                                 "::ffff:29.87.4.221", "::ffff:29.87.88.182")


def test_nccl_warnings_under_a_minute_time_column() -> None:
    r = _read("nccl-proxy-service-accept-failed-date-minute-prefix-excerpt.txt")
    assert [(f.code, f.severity) for f in r.findings] == [("nccl_log", "ok")] + [("nccl_warning", "warning")] * 3
    warns = _problems(r)
    assert [f.quantities["message"] for f in warns] == [
        "[Service thread] Accept failed Resource temporarily unavailable",
        "[Service thread] Could not receive type from localRank 0, res=3, closed=0",
        "[Proxy Service 0] Failed to execute operation Close from rank 0, retcode 3"]
    assert {(f.entity["node"], f.entity["pid"], f.entity["cuda_device"], f.owner, f.undetermined) for f in warns} == {
        ("ncivki7qpk7pmo1btv0h0", "173", "0", None, True)}
    assert r.exit_code() == 1 and r.findings[0].count == 4


def test_hccl_allreduce_on_an_existing_communicator_is_a_remote_timeout_not_a_creation_failure() -> None:
    (f,) = _read("hccl-allreduce-error-6-err01100-ei0006-remote-rank-did-not-send-rank1.txt").findings
    q = f.quantities
    assert (f.code, f.owner, f.undetermined, dict(f.entity)) == (
        "hccl_remote_timeout", None, True, {"pid": "1292363", "npu_id": "1", "rank": "1"})
    assert (q["hccl_function"], q["hccl_error"], q["torch_npu_code"], q["cann_code"]) == (
        "HcclAllreduce", 6, "ERR01100", "EI0006")
    assert [line.number for line in f.lines] == [2, 4, 6, 7, 8, 9]  # source lines are context, File lines noise


def test_hccl_socket_listen_failure_is_communicator_setup() -> None:
    (f,) = _read("hccl-socket-listen-port-16666-fail-link-establish-timeout-rank12.txt").findings
    q = f.quantities
    assert (f.code, f.owner, f.count, q["listen_ip"], q["listen_port"], q["peer_rank"], q["link_timeout_s"]) == (
        "hccl_init_failed", "platform", 6, "192.168.20.160", 16666, 12, 120)
    assert dict(f.entity) == {"pid": "2717288", "process": "python3"}
    assert f.timestamps == ("2025-07-23-03:47:57.070.463", "2025-07-23-03:49:57.177.269")


def test_npu_smi_26_two_chip_rows_and_a_power_dash() -> None:
    r = _read("npu-smi-info-26-0-rc2-ascend910-two-chips-power-dash-excerpt.txt")
    report, *chips = r.findings
    assert (report.code, report.quantities["tool_version"], report.quantities["npus"], report.quantities["chips"]) == (
        "npu_report", "26.0.rc2", 1, 2)
    assert [(f.code, f.entity["npu_id"], f.entity["chip"], f.entity["bus_id"], f.entity["npu_name"],
             f.quantities.get("power_w"), f.quantities["temperature_c"], f.quantities["hbm_used_mb"],
             f.quantities["hbm_total_mb"], f.quantities["phy_id"]) for f in chips] == [
        ("npu_ok", "0", "0", "0000:9D:00.0", "Ascend910", 162.6, 34.0, 3419, 65536, 0),
        ("npu_ok", "0", "1", "0000:9F:00.0", "Ascend910", None, 34.0, 2874, 65536, 1)]
    assert r.exit_code() == 0


def test_nvidia_smi_r580_table() -> None:
    r = _read("nvidia-smi-580-126-09-a100-sxm4-40gb-e-process-excerpt.txt")
    report, *gpus = r.findings
    assert (report.quantities["driver_version"], report.quantities["cuda_version"], report.quantities["gpus_listed"],
            report.timestamps) == ("580.126.09", "13.0", 2, ("Thu Feb 19 19:24:54 2026",))
    assert [(f.code, f.entity["bus_id"], f.quantities["memory_used_mib"], f.quantities["memory_total_mib"],
             f.quantities["power_w"], f.quantities["power_limit_w"], f.quantities["utilisation_pct"],
             f.quantities["compute_mode"], f.quantities["mig_mode_current"], f.quantities["ecc_volatile_uncorrectable"])
            for f in gpus] == [
        ("gpu_ok", "00000000:10:1C.0", 598, 40960, 67.0, 400.0, 11.0, "E. Process", "Disabled", 0),
        ("gpu_ok", "00000000:10:1D.0", 602, 40960, 66.0, 400.0, 7.0, "E. Process", "Disabled", 0)]
    assert r.exit_code() == 0 and [b.kind for b in r.blocks] == ["prompt", "nvidia-smi-table"]


def test_nvidia_smi_q_r396_without_cuda_version() -> None:
    r = _read("nvidia-smi-q-396-54-gtx1080-no-cuda-version-excerpt.txt")
    report, gpu = r.findings
    assert (report.quantities["driver_version"], "cuda_version" in report.quantities,
            report.quantities["attached_gpus"]) == ("396.54", False, 1)
    assert (gpu.code, gpu.entity["bus_id"], gpu.entity["gpu_name"], gpu.entity["uuid"],
            gpu.quantities["persistence_mode"]) == (
        "gpu_ok", "00000000:01:00.0", "GeForce GTX 1080", "GPU-0200523e-f473-3a45-9b4a-fbbe0e41ccf8", "Disabled")
    assert r.exit_code() == 0


def test_torch_npu_oom_both_exception_forms() -> None:
    old = [f for f in _read("npu-oom-torch-npu-runtimeerror-60-97-gib-910b.txt").findings if f.unhealthy]
    new = [f for f in _read("npu-oom-torch-outofmemoryerror-no-space-before-hint-a3.txt").findings if f.unhealthy]
    got = [(f.code, f.owner, f.entity["npu_id"], f.quantities["tried_to_allocate"], f.quantities["total_capacity"],
            f.quantities["allocated_by_pytorch"], f.quantities["free"], f.quantities["reserved_by_pytorch"])
           for f in old + new]
    assert got == [
        ("npu_out_of_memory", "algorithm", "0", "35.31 GiB", "60.97 GiB", "26.13 GiB", "33.81 GiB", "26.61 GiB"),
        ("npu_out_of_memory", "algorithm", "0", "72.00 MiB", "61.27 GiB", "56.05 GiB", "5.04 MiB", "58.39 GiB")]


def test_dcgmi_nvlink_every_link_down() -> None:
    r = _read("dcgmi-nvlink-link-status-all-down-2-gpus-18-links.txt")
    down = _problems(r)
    assert [(f.code, f.owner, f.entity["gpu_index"], f.quantities["links"], f.quantities["down"]) for f in down] == [
        ("nvlink_down", "infrastructure", "0", 18, 18), ("nvlink_down", "infrastructure", "1", 18, 18)]
    report = next(f for f in r.findings if f.code == "nvlink_report")
    assert (report.quantities["nvswitches"], report.quantities["links_down"], r.exit_code()) == (0, 36, 1)


def test_dcgmi_diag_3_0_without_metadata() -> None:
    r = _read("dcgmi-diag-r3-dcgm-3-0-4-deployment-only-no-metadata-excerpt.txt")
    (f,) = r.findings
    assert (f.code, f.quantities["tests"], f.quantities["failed"], "dcgm_version" in f.quantities, r.exit_code()) == (
        "dcgm_diag_report", 9, 0, False, 0)
    assert f.lines and f.lines[0].number == 2


def test_npu_smi_info_vnpu_is_read_as_probe_reads_it() -> None:
    """``npu-smi info -t info-vnpu`` (a hand-made capture of the documented layout, tests/data/probes): explain
    read nothing of it while ``probe ascend --from`` did; now both read the resources and the three vNPUs."""
    r = explain_bytes((FIELD.parent / "probes" / "npu-smi-info-vnpu-310p.txt").read_bytes())
    res, *vnpus = r.findings
    assert (res.code, res.quantities["aicore_free"], res.quantities["aicore_total"], res.quantities["memory_total"],
            res.quantities["vnpus_declared"]) == ("npu_vnpu_resources", 1, 8, 21, 3)
    assert [(f.code, f.entity["vnpu_id"], f.quantities["template"]) for f in vnpus] == [
        ("vnpu", "100", "vir01"), ("vnpu", "101", "vir02"), ("vnpu", "102", "vir04")]
    assert r.exit_code() == 0


def _reasons(name: str) -> list[tuple[object, ...]]:
    return [(f.code, f.owner, f.quantities.get("resource"), f.quantities.get("nodes"), f.quantities.get("total_nodes"),
             f.age, f.count) for f in _read(name).findings]


def test_event_rows_without_a_header_keep_every_reason_with_its_owner() -> None:
    assert _reasons("event-failedscheduling-node-selector-and-insufficient-gpu-openshift-3-11.txt") == [
        ("node_selector_mismatch", "algorithm", None, 3, 6, "3s", 5),
        ("insufficient_resource", "infrastructure", "nvidia.com/gpu", 6, 6, "3s", 5)]
    assert _reasons("event-get-events-pod-affinity-and-node-selector-no-header.txt") == [
        ("pod_affinity", "algorithm", None, 1, 20, "11s", 1), ("node_selector_mismatch", "algorithm", None, 19, 20,
                                                             "11s", 1)]
    assert _reasons("events-gpushare-insufficient-aliyun-gpu-mem.txt") == [
        ("insufficient_resource", "infrastructure", "aliyun.com/gpu-mem", 2, 2, "6s", 5)]


def test_pod_status_yaml_with_a_folded_message() -> None:
    assert _reasons("pod-status-yaml-unschedulable-node-selector-and-insufficient-cpu-folded.yaml") == [
        ("node_selector_mismatch", "algorithm", None, 10, 10, None, None),
        ("insufficient_resource", "infrastructure", "cpu", 4, 10, None, None)]


def test_kubernetes_1_5_tabbed_event_rows_and_predicates() -> None:
    """Kubernetes <= 1.6 rows (tab-separated FirstSeen/LastSeen/Count/From/…) are events, and each predicate of
    ``No nodes are available that match all of the following predicates::`` is its own reason, with the code the
    1.9+ wording of the same predicate gets and the failure table's owner."""
    r = _read("events-k8s-1-5-tabbed-predicates-insufficient-cpu-memory-matchnodeselector-excerpt.txt")
    assert [b.kind for b in r.blocks] == ["events"] and r.exit_code() == 1
    assert [(f.code, f.owner, f.quantities.get("resource"), f.quantities["nodes"], f.count, f.age,
             f.quantities["repeated_over"], f.entity["reporter"], f.quantities["event_reason"])
            for f in r.findings] == [
        (code, owner, res, n, count, age, over, "default-scheduler", "FailedScheduling")
        for count, age, over, cpu, mem in ((7, "48m", "2h", 9, 15), (9, "46m", "4h", 9, 16), (48, "42m", "10h", 11, 18))
        for code, owner, res, n in (("insufficient_resource", "infrastructure", "cpu", cpu),
                                    ("insufficient_resource", "infrastructure", "memory", mem),
                                    ("node_selector_mismatch", "algorithm", None, 18))]
    assert {f.quantities["predicate"] for f in r.findings} == {"Insufficient cpu", "Insufficient memory",
                                                               "MatchNodeSelector"}


def test_kubernetes_1_4_braced_reporter_and_a_verdict_without_predicates() -> None:
    (f,) = _read("events-k8s-1-4-describe-tabbed-braced-from-failed-to-fit-no-predicates.txt").findings
    assert (f.kind, f.code, f.failure, f.owner, f.undetermined, f.entity["reporter"], f.count, f.age,
            f.quantities["repeated_over"], f.quantities["event_type"]) == (
        "events", "unschedulable_unexplained", "scheduler_reason_unprinted", None, True, "default-scheduler", 50,
        "37m", "51m", "Warning")
    assert "loudmail-deployment-1671311517-s1nb9" in f.meaning and f.lines[0].number == 3


def test_kubernetes_1_6_fit_failure_summary_and_1_7_predicates_keep_every_reason() -> None:
    r = _read("event-k8s-1-6-fit-failure-summary-matchnodeselector-podtoleratesnodetaints.txt")
    assert [(f.code, f.owner, f.quantities["nodes"], f.quantities["predicate"]) for f in r.findings] == [
        ("node_selector_mismatch", "algorithm", 2, "MatchNodeSelector"),
        ("untolerated_taint", "algorithm", 1, "PodToleratesNodeTaints")]
    r = _read("message-k8s-1-7-predicates-podfitshostports-podtoleratesnodetaints.txt")
    assert [(f.code, f.owner, f.quantities["nodes"], f.quantities["predicate"]) for f in r.findings] == [
        ("port_conflict", "algorithm", 1, "PodFitsHostPorts"),
        ("untolerated_taint", "algorithm", 1, "PodToleratesNodeTaints")]
    assert r.exit_code() == 1


def test_gpu_rows_without_the_table_header() -> None:
    r = _read("nvidia-smi-table-rtx4000-ada-gpu14-fan-err-elided-excerpt.txt")
    gpus = [f for f in r.findings if f.code.startswith("gpu_") and f.code != "gpu_report"]
    assert [(f.code, f.owner, f.entity["gpu_index"], f.entity["bus_id"], f.quantities["temperature_c"],
             f.quantities["power_w"], f.quantities["utilisation_pct"], f.quantities.get("fan_speed_pct")) for f in gpus] == [
        ("gpu_ok", None, "13", "00000000:C9:00.0", 33.0, 4.0, 0.0, 30.0),
        ("gpu_field_unreadable", "infrastructure", "14", "00000000:CC:00.0", 68.0, 99.0, 93.0, None)]
    assert "fan reads ERR!" in gpus[1].meaning and r.exit_code() == 1
    (v100,) = [f for f in _read("nvidia-smi-table-v100-power-err-excerpt.txt").findings if f.unhealthy]
    assert (v100.entity["bus_id"], v100.quantities["memory_used_mib"], v100.quantities["power_limit_w"],
            "power_w" in v100.quantities, v100.owner) == ("00008ED0:00:00.0", 593, 250.0, False, "infrastructure")
    assert "power draw reads ERR!" in v100.meaning


@pytest.mark.parametrize(("name", "facts"), [
    ("nccl-info-ring-trees-init-complete-64-ranks-socket-excerpt.txt",
     {"hosts": 16, "processes": 16, "ranks": 64, "init_complete": 1, "transports": "NET/Socket"}),
    ("nccl-info-bootstrap-mpirun-rank-prefix-nccl-2-5-6-excerpt.txt",
     {"nccl_version": "2.5.6+cuda10.2", "hosts": 1, "processes": 4, "transports": "NET/Socket"}),
    ("nccl-info-ring-trees-p2p-chunksize-comm-mnnvl-h20-two-nodes-excerpt.txt",
     {"hosts": 2, "processes": 3, "ranks": 4, "nodes": 2}),
])
def test_nccl_info_topology_dumps_are_informational(name: str, facts: dict[str, object]) -> None:
    """An NCCL INFO trace with no error in it (rings, trees, bootstrap, the version banner) is one ``ok`` finding
    with its facts, never an unrecognised line and never a problem."""
    r = _read(name)
    (f,) = r.findings
    lines = (FIELD / name).read_text().splitlines()
    assert (f.code, f.severity, f.owner, f.count, dict(f.quantities)) == ("nccl_log", "ok", None, len(lines), facts)
    assert [line.number for line in f.lines] == list(range(1, len(lines) + 1)) and r.exit_code() == 0


def test_nvidia_smi_nvlink_status_inactive_links_on_an_sxm_part() -> None:
    r = _read("nvidia-smi-nvlink-s-v100-sxm2-two-links-inactive-elided.txt")
    (bad,) = _problems(r)
    assert (bad.kind, bad.code, bad.failure, bad.owner, bad.severity, bad.entity["gpu_index"], bad.entity["gpu_name"],
            dict(bad.quantities)) == (
        "nvidia-smi-nvlink", "nvlink_inactive", "nvlink_fault", "infrastructure", "error", "3", "Tesla V100-SXM2-32GB",
        {"links": 6, "active": 4, "inactive": 2, "inactive_links": "3,5", "speed_gbps": 25.781})
    assert [line.number for line in bad.lines] == list(range(3, 10)) and r.exit_code() == 1
    (report,) = [f for f in r.findings if f.code == "nvlink_report"]
    assert dict(report.quantities) == {"gpus": 1, "links_active": 4, "links_inactive": 2}


def test_nvidia_smi_nvlink_status_all_links_up_after_a_prompt() -> None:
    r = _read("nvidia-smi-nvlink-status-h100-18-links-prompt-excerpt.txt")
    assert [(f.code, f.severity, f.entity.get("gpu_index"), f.entity.get("uuid"), f.quantities.get("active"),
             f.quantities.get("speed_gbps")) for f in r.findings] == [
        ("nvlink_status", "ok", "0", "GPU-4039dfe4-0c97-4b1e-683e-eb7d42699053", 18, 26.562),
        ("nvlink_status", "ok", "1", "GPU-dd3b269a-8f3a-d2d5-1518-2713ba03fcf7", 18, 26.562),
        ("nvlink_report", "ok", None, None, None, None)]
    assert r.findings[-1].quantities["links_active"] == 36 and r.exit_code() == 0


def test_nvidia_smi_nvlink_status_family() -> None:
    """The other layouts of the kind: a PCIe card with a bridge on some links (warning), a card with none (ok), an
    SXM part with every link inactive (error), the NVML 'all links are inActive' answer."""
    from pytest_hetero.explain import explain_text

    pcie = ("GPU 0: NVIDIA A100 80GB PCIe (UUID: GPU-a)\n\t Link 0: 25 GB/s\n\t Link 1: <inactive>\n"
            "GPU 1: NVIDIA RTX A6000 (UUID: GPU-b)\n\t Link 0: <inactive>\n\t Link 1: <inactive>\n"
            "GPU 2: NVIDIA A100-SXM4-80GB (UUID: GPU-c)\n\t Link 0: <inactive>\n"
            "GPU 3: NVIDIA H100 80GB HBM3 (UUID: GPU-d)\n"
            "\tNVML: Unable to retrieve NVLink information as all links are inActive\n")
    r = explain_text(pcie)
    assert [(f.code, f.severity, f.owner) for f in r.findings] == [
        ("nvlink_inactive", "warning", "infrastructure"), ("nvlink_status", "ok", None),
        ("nvlink_inactive", "error", "infrastructure"), ("nvlink_inactive", "error", "infrastructure"),
        ("nvlink_report", "ok", None)]
    assert r.findings[3].quantities["all_inactive"] is True


def test_volcano_describe_vcjob_pending_is_undetermined_and_the_podgroup_names_the_gang() -> None:
    r = _read("volcano-describe-vcjob-and-podgroup-not-enough-resources-x78789-elided.txt")
    job, gang = _problems(r)
    assert (job.code, job.failure, job.owner, job.undetermined, job.quantities["status.state.phase"],
            job.quantities["status.min_available"], job.quantities["status.pending"]) == (
        "volcano_job_not_running", "volcano_job_waiting", None, True, "Pending", "1", "1")
    assert "read next: kubectl describe podgroup" in (job.owner_candidates or "")
    assert (gang.code, gang.owner, gang.quantities["unschedulable_tasks"], gang.quantities["tasks"],
            gang.quantities["pending"], gang.quantities["min_available"]) == (
        "gang_unschedulable", "infrastructure", "1", "1", "1", "1")
    assert r.exit_code() == 1 and "volcano_queue" not in [f.code for f in r.findings]


def test_volcano_v0_2_gang_wording_job_is_not_ready() -> None:
    r = _read("volcano-pod-events-gang-job-is-not-ready-v0-2.txt")
    assert [(f.code, f.owner, f.age, f.quantities["unschedulable_tasks"], f.quantities["tasks"],
             f.quantities["min_available"], f.quantities["pending"]) for f in r.findings] == [
        ("gang_unschedulable", "infrastructure", age, "10", n, "10", n)
        for age, n in (("111s", "6"), ("104s", "10"), ("97s", "16"), ("81s", "22"), ("74s", "26"), ("66s", "30"))]
