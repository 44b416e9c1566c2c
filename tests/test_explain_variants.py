"""``hetero explain`` on hand-made inputs (tests/data/explain, see its README) for layouts the real fixtures do
not show, plus inline variants: other driver branches, DCGM 3.x/4.x tables and JSON, localized and wrapped lines,
prompts, CRLF and ANSI noise."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_hetero.explain import Finding, Report, explain_bytes, explain_text

DATA = Path(__file__).resolve().parent / "data" / "explain"


def _read(name: str) -> Report:
    return explain_bytes((DATA / name).read_bytes())


def _one(report: Report, code: str) -> Finding:
    found = [f for f in report.findings if f.code == code]
    assert len(found) == 1, (code, [f.code for f in report.findings])
    return found[0]


def test_syslog_prefix_keeps_wall_clock_and_reads_non_xid_faults() -> None:
    r = _read("syslog-fallen-off-bus-rminit-no-xid.txt")
    off = _one(r, "gpu_fallen_off_bus")
    assert off.timestamps == ("Mar  3 04:11:53",)
    assert dict(off.entity) == {"bus_id": "0000:3b:00", "uuid": "GPU-11111111-2222-3333-4444-555555555555"}
    init = _one(r, "gpu_init_failed")
    assert (init.count, init.quantities["rm_code"], init.owner) == (2, "(0x23:0x65:1426)", "infrastructure")
    api = _one(r, "nvml_version_mismatch")
    assert (api.quantities["client_version"], api.quantities["module_version"]) == ("535.129.03", "550.54.15")
    assert _one(r, "kernel_context").quantities["serials"] == "0000:3b:00=1320000000000"
    assert r.exit_code() == 1


def test_plain_dmesg_old_xid_form_and_driver_version() -> None:
    r = _read("dmesg-plain-uptime-xid31-old-format.txt")
    old = _one(r, "xid_13")
    assert (old.timestamps, dict(old.entity), old.owner) == (("4909.922970",), {"bus_id": "0000:01:00"}, "algorithm")
    mmu = _one(r, "xid_31")
    assert (dict(mmu.entity)["pid"], dict(mmu.entity)["process"], mmu.quantities["channels"]) == ("8812", "python", "00000010")
    assert _one(r, "kernel_context").quantities["driver_version"] == "550.54.15"


def test_dcgm_3x_per_gpu_groups() -> None:
    r = _read("dcgmi-diag-3x-per-gpu-memory-fail.txt")
    head = _one(r, "dcgm_diag_report").quantities
    assert (head["dcgm_version"], head["driver_version"], head["tests"], head["failed"]) == ("3.3.5", "550.54.15", 4, 1)
    fail = _one(r, "dcgm_test_failed")
    assert (fail.quantities["test"], dict(fail.entity)["gpu_index"]) == ("GPU Memory", "1")
    ecc = _one(r, "gpu_ecc_uncorrectable")
    assert ecc.quantities["message"] == "GPU 1 Uncorrectable ECC errors detected: 3. Run a field diagnostic on the GPU."
    assert dict(ecc.entity)["gpu_index"] == "1"


def test_dcgm_4x_entity_rows() -> None:
    r = _read("dcgmi-diag-4x-entity-rows-pcie-fail.txt")
    assert _one(r, "dcgm_diag_report").quantities["dcgm_version"] == "4.2.3"
    assert dict(_one(r, "dcgm_test_failed").entity)["gpu_index"] == "1"
    replay = _one(r, "pcie_replay")
    assert (dict(replay.entity)["gpu_index"], replay.quantities["message"]) == (
        "1", "GPU 1 PCIe replay rate 12 exceeds the limit 8. Check the PCIe link.")


def test_dcgm_json_3x_and_4x() -> None:
    r3 = _read("dcgmi-diag-json-3x.json")
    assert _one(r3, "dcgm_diag_report").quantities["layout"] == "json"
    assert _one(r3, "dcgm_test_failed").quantities["error_ids"] == "46"
    assert dict(_one(r3, "gpu_memory_remap").entity)["gpu_index"] == "1"
    r4 = _read("dcgmi-diag-json-4x.json")
    head = _one(r4, "dcgm_diag_report").quantities
    assert (head["dcgm_version"], head["driver_version"]) == ("4.2.3", "580.82.09")
    link = _one(r4, "nvlink_link_down")
    assert (dict(link.entity)["gpu_index"], link.quantities["links_down"]) == ("3", "7")



def test_dcgm_json_test_entry_of_another_shape_is_named_the_others_still_read() -> None:
    """A ``-j`` document is foreign JSON (an edited or hostile one too): an ``error_id`` of ``true`` raised
    ValueError out of parse_dcgm_json (``int("True")``), so the whole block was unrecognised with no word of why.
    Each test entry is held to DCGM's shape: one that does not fit is an unrecognised finding naming the field,
    and the tests that fit are read."""
    doc = json.loads((DATA / "dcgmi-diag-json-4x.json").read_text())
    tests = doc["DCGM Diagnostic"]["test_categories"][0]["tests"]
    tests.append({"name": "memory", "results": [{"entity_id": 1, "status": "Fail",
                                                  "warnings": [{"warning": "GPU 1 fault", "error_id": True}]}]})
    r = explain_text(json.dumps(doc))
    assert _one(r, "nvlink_link_down").quantities["links_down"] == "7"
    assert _one(r, "unrecognised").meaning == (
        "dcgmi diag -j: the Integration test entry 'memory' is not of DCGM's shape: Expected `int | null`, got "
        "`bool` - at `$.results[0].warnings[0].error_id`")


def test_dcgm_json_test_entry_of_another_shape_keeps_its_fail() -> None:
    """A ``-j`` test entry that does not fit DCGM's shape in a detail (here a warning's ``error_id`` written as
    text, ``"95"``) is named as unrecognised, and its results' statuses are still read: before, the whole entry was
    left out, so a failed Memory test on GPU 0 read as no problem at all (explain exit 0)."""
    doc = {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
        {"name": "Memory", "results": [{"gpu_ids": "0", "status": "Fail", "warnings": [
            {"warning": "Error: GPU 0 had uncorrectable memory errors", "error_id": "95"}]}]}]}]},
        "version": "3.3.0"}
    r = explain_text(json.dumps(doc))
    failed = _one(r, "dcgm_test_failed")
    assert (dict(failed.entity)["gpu_index"], failed.owner) == ("0", "infrastructure")
    assert "Fail" in failed.meaning
    assert "`$.results[0].warnings[0].error_id`" in _one(r, "unrecognised").meaning


def test_a_pasted_object_a_parser_refuses_is_unread_naming_the_field() -> None:
    """A pasted Workload whose ``status.resourceRequests[0].resources`` is a list: the shared parser refuses it with a
    ParseError naming the field, and the finding says which (before: only ``(ParseError)``, the field lost)."""
    text = ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w}\n"
            "status:\n  resourceRequests: [{resources: [1]}]\n")
    meaning = _one(explain_text(text), "unrecognised").meaning
    assert meaning.startswith("the yaml reader could not read this block (ParseError: ")
    assert "status.resourceRequests[].resources is a list, expected a mapping" in meaning

def test_dcmi_8020_behind_coloured_prompt_and_crlf() -> None:
    r = _read("npu-smi-dcmi-8020-crlf-ansi-prompt.txt")
    assert r.blocks[0].kind == "prompt" and r.blocks[0].command == "npu-smi info"
    f = _one(r, "dcmi_resource_occupied")
    assert (f.owner, f.quantities["dcmi_code"]) == ("platform", -8020)
    assert "held by another process or container" in f.meaning and "could not reach" not in f.meaning
    assert f.lines[0].text.endswith("ret is -8020")


def test_localized_full_width_npu_health() -> None:
    r = _read("npu-smi-kv-localized-fullwidth.txt")
    f = _one(r, "npu_health_warning")
    assert (dict(f.entity)["npu_id"], f.quantities["health_status"], f.quantities["error_code"]) == ("2", "Warning", "80E18008")


def test_headerless_event_rows_counts_and_new_codes() -> None:
    r = _read("events-headerless-quota-probe-wrapped.txt")
    quota = _one(r, "quota_exceeded")
    assert (quota.age, quota.owner, quota.quantities["event_reason"], dict(quota.entity)["object"]) == (
        "5d15h", "business", "ExceedsGPUQuota", "pod/train-7f9")
    probe = _one(r, "probe_failed")
    assert (probe.count, probe.age, probe.quantities["repeated_over"], probe.quantities["probe"], probe.owner) == (
        41235, "3m", "5d15h", "startup", "infrastructure")
    sched = _one(r, "insufficient_resource")
    assert (dict(sched.entity)["namespace"], sched.quantities["nodes"]) == ("default", 4)
    assert _one(r, "device_node_unregistered").owner == "platform"
    assert not [f for f in r.findings if f.severity == "unrecognised"]


def test_pod_level_unexpected_admission_not_read_as_podgroup() -> None:
    r = _read("describe-pod-unexpected-admission-requested-no-space.txt")
    pod = [f for f in r.findings if f.kind == "describe-pod"]
    assert [(f.code, f.quantities["requested"], f.quantities["available"]) for f in pod] == [
        ("device_allocation_failed", "1", "0")]
    event = next(f for f in r.findings if f.kind == "events")
    assert (event.age, [line.number for line in event.lines]) == ("41s", [15, 16])
    assert not [f for f in r.findings if f.code in ("gang_unschedulable", "unknown", "unrecognised")]


def test_runtime_errors_each_classified() -> None:
    r = _read("container-runtime-errors-and-torch.txt")
    codes = [(f.code, f.owner) for f in r.findings]
    assert codes == [("device_runtime_error", "infrastructure"), ("device_runtime_error", "infrastructure"),
                     ("nvml_version_mismatch", "infrastructure"), ("cuda_no_driver", "platform"),
                     ("cuda_compat_not_supported_on_device", "platform")]
    assert r.findings[-1].quantities["cuda_error_number"] == 804


def test_get_pods_rows() -> None:
    r = _read("kubectl-get-pods-states.txt")
    assert [(f.code, dict(f.entity)["pod"]) for f in r.findings] == [
        ("crash_loop", "train-0"), ("image_pull_failed", "infer-5d8b"), ("pod_running", "prep-1"),
        ("pod_pending", "big-0")]
    assert r.findings[0].quantities["restarts"] == "7 (2m ago)"


def test_get_pods_rows_name_their_namespace_under_either_header() -> None:
    # a pod table headed NS (the short header read_table accepts) after one headed NAMESPACE: each row names its
    # namespace, as a quota row under either header does (the NS row's was dropped before)
    r = explain_text("NAMESPACE   NAME       READY   STATUS             RESTARTS   AGE\n"
                     "ml          train-0    0/1     CrashLoopBackOff   7          10m\n"
                     "NS   NAME       READY   STATUS             RESTARTS   AGE\n"
                     "ops  big-0      0/1     Pending            0          10m\n")
    assert [(f.kind, f.code, dict(f.entity)) for f in r.findings] == [
        ("kubectl-table", "crash_loop", {"pod": "train-0", "namespace": "ml"}),
        ("kubectl-table", "pod_pending", {"pod": "big-0", "namespace": "ops"})]


def test_docker_run_device_mapping() -> None:
    r = _read("docker-run-ascend-missing-control-devices.txt")
    req = _one(r, "container_device_request")
    assert (req.quantities["devices"], req.quantities["env.ASCEND_VISIBLE_DEVICES"]) == ("/dev/davinci0", "0")
    missing = _one(r, "ascend_control_devices_missing")
    assert (missing.owner, missing.quantities["missing"]) == ("platform", "davinci_manager, devmm_svm, hisi_hdc")
    assert r.exit_code() == 1


def test_bare_startup_errors_are_not_blamed_on_the_scheduler() -> None:
    """Issue 16 case 1: these were 'scheduler: unknown [platform]'."""
    for text, code in (
        (("nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared "
         "object file: no such file or directory: unknown"), "device_runtime_error"),
        ('could not select device driver "" with capabilities: [[gpu]]', "device_runtime_error"),
        ("Failed to initialize NVML: Driver/library version mismatch", "nvml_version_mismatch"),
    ):
        (f,) = explain_text(text).findings
        assert (f.code, f.owner) == (code, "infrastructure"), text


def test_unrecognised_text_has_no_owner_and_exit_2() -> None:
    r = explain_text("the cluster is sad today\nand nobody knows why\n")
    assert [(f.code, f.owner, f.severity) for f in r.findings] == [("unrecognised", None, "unrecognised")]
    assert [line.number for line in r.findings[0].lines] == [1, 2]
    assert (r.readable, r.exit_code()) == (False, 2)


def test_mixed_paste_each_block_read() -> None:
    paste = (
        "root@node-a1:~# nvidia-smi\n"
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
        "NVIDIA driver is installed and running.\n\n"
        "[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n\n"
        "Events:\n  Type     Reason            Age   From               Message\n"
        "  ----     ------            ----  ----               -------\n"
        "  Warning  FailedScheduling  2m    default-scheduler  0/3 nodes are available: 3 Insufficient nvidia.com/gpu.\n"
    )
    r = explain_text(paste.replace("\n", "\r\n"))
    assert [b.kind for b in r.blocks] == ["prompt", "nvidia-smi-table", "kernel-log", "events"]
    assert {f.code for f in r.findings} >= {"nvidia_driver_not_loaded", "xid_79", "insufficient_resource"}
    xid = _one(r, "xid_79")
    assert xid.timestamps == ("Sun Feb 23 16:24:18 2025",) and xid.lines[0].number == 4
    assert _one(r, "nvidia_driver_not_loaded").owner == "infrastructure"  # host nvidia-smi, not a pod


def test_nvidia_smi_err_name_and_prompt_before_timestamp() -> None:
    """Issue 16 case 5: ERR! is not a GPU name; a prompt before the timestamp does not hide it."""
    table = (
        "$ nvidia-smi\n"
        "Mon Jan 20 10:18:26 2025\n"
        "+-----------------------------------------------------------------------------+\n"
        "| NVIDIA-SMI 470.82.01    Driver Version: 470.82.01    CUDA Version: 11.4     |\n"
        "|-------------------------------+----------------------+----------------------+\n"
        "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
        "| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |\n"
        "|===============================+======================+======================|\n"
        "|   0  ERR!                Off  | 00000000:3B:00.0 Off |                 ERR! |\n"
        "|ERR!  ERR!  ERR!    ERR! / ERR! |   ERR! /  32510MiB   |    ERR!      Default |\n"
        "+-------------------------------+----------------------+----------------------+\n"
    )
    r = explain_text(table)
    head = _one(r, "gpu_report")
    assert head.timestamps == ("Mon Jan 20 10:18:26 2025",) and head.quantities["driver_version"] == "470.82.01"
    lost = _one(r, "gpu_lost")
    assert "gpu_name" not in lost.entity and lost.owner == "infrastructure"


def test_probe_cli_reads_the_same_tables() -> None:
    from pytest_hetero.probes import parse_captured

    inv = parse_captured("ascend", (DATA / "npu-smi-dcmi-8020-crlf-ansi-prompt.txt").read_text().replace("\r", ""))
    assert inv.global_errors and "DCMI -8020" in inv.global_errors[0]


def test_probe_from_reads_kernel_log_without_xid_and_keeps_wall_clock() -> None:
    """Issue 16 case 2: 'fallen off the bus' without an Xid was 'not a known NVIDIA format' (exit 2), and syslog
    wall-clock times were replaced by the kernel uptime."""
    from pytest_hetero.probes import parse_captured

    inv = parse_captured("nvidia", (DATA / "syslog-fallen-off-bus-rminit-no-xid.txt").read_text())
    assert inv.source == "kernel-log" and not inv.healthy
    assert any(e.startswith("fallen off bus on PCI:0000:3b:00 (Mar  3 04:11:53)") for e in inv.global_errors)
    xid = parse_captured("nvidia", "Mar  3 04:11:52 node kernel: [1234.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, "
                                   "name=x, GPU has fallen off the bus.\n")
    assert xid.extra["xid_events"][0]["timestamp"] == "Mar  3 04:11:52"


def test_a_containers_state_fields_pasted_alone_are_read() -> None:
    """``kubectl describe pod``'s State / Last State lines copied without ``Containers:`` or the container's name
    above them (indented as kubectl prints them, or not): the OOM kill and the back-off are read, owned by the
    algorithm team as in the whole describe output."""
    fields = ("State:          Waiting\n  Reason:       CrashLoopBackOff\nLast State:     Terminated\n"
              "  Reason:       OOMKilled\n  Exit Code:    137\n  Started:      Mon, 01 Dec 2026 10:00:00 +0000\n"
              "  Finished:     Mon, 01 Dec 2026 10:00:05 +0000\nReady:          False\nRestart Count:  4\n")
    for indent in ("", "    "):
        report = explain_text("".join(indent + line + "\n" for line in fields.splitlines()))
        assert [b.kind for b in report.blocks] == ["describe-pod"]
        assert sorted((f.code, f.owner) for f in report.findings if f.severity != "info") == [
            ("crash_loop", "algorithm"), ("oom_killed", "algorithm")]


def test_pasted_object_conditions_read_as_the_pending_readers_read_them() -> None:
    # hand-written YAML: an unquoted True is a YAML boolean. The pending readers read a condition's status as text
    # ("True"), so they find nothing blocking; the Workload reader compared the raw value and called the admitted
    # workload "not admitted yet"
    r = explain_text("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata:\n  name: w5\nstatus:\n"
                     "  conditions:\n  - type: QuotaReserved\n    status: True\n"
                     "    message: Quota reserved in ClusterQueue cq\n  - type: Admitted\n    status: true\n")
    assert [(f.code, f.severity, f.meaning) for f in r.findings] == [
        ("workload_admitted", "ok", "Workload admitted: Quota reserved in ClusterQueue cq")]
    # a null message is no message (it was printed as the word None)
    r = explain_text('{"kind": "Node", "metadata": {"name": "n1"}, "status": {"conditions": ['
                     '{"type": "MemoryPressure", "status": "True", "message": null}]}}')
    assert [f.meaning for f in r.findings if f.code == "node_pressure"] == ["condition MemoryPressure=True: "]
    r = explain_text('{"kind": "Workload", "metadata": {"name": "w4"}, "status": {"conditions": ['
                     '{"type": "Finished", "status": "True", "reason": "Succeeded", "message": null}]}}')
    assert [f.meaning for f in r.findings] == ["Workload finished: Succeeded"]
