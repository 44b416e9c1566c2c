"""payload.sh run under sh with fake roots and PATHs, its reader, and the findings it leads to."""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_hetero.errors import ParseError
from pytest_hetero.judge.failures import owner_category
from pytest_hetero.probes.payload import (
    BEGIN,
    END,
    FRAMEWORKS,
    TOOLS,
    Finding,
    FrameworkName,
    InterpreterFacts,
    PayloadReport,
    ToolName,
    assess,
    parse_payload_output,
    payload_script,
    resource_kind,
    tool_inventory,
)

SCRIPT = Path(__file__).resolve().parents[1] / "pytest_hetero" / "probes" / "payload.sh"
BASIC_TOOLS = ("sh", "sed", "awk", "tr", "cat", "uname", "id", "timeout", "rm")


def toolbox(tmp_path: Path, tools: tuple[str, ...] = BASIC_TOOLS, *, busybox_ok: bool = True) -> Path:
    """A PATH holding only the named tools (busybox applets when busybox exists, else host tools)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    busybox = shutil.which("busybox") if busybox_ok else None
    for name in tools:
        target = busybox or shutil.which(name)
        assert target, f"host lacks {name}"
        (bin_dir / name).symlink_to(target)
    return bin_dir


def fake_tool(bin_dir: Path, name: str, stdout: str, rc: int = 0, stderr: str = "") -> None:
    (bin_dir / f"{name}.out").write_text(stdout)
    (bin_dir / f"{name}.err").write_text(stderr)
    (bin_dir / name).write_text(
        f"#!/bin/sh\ncat '{bin_dir}/{name}.out'\ncat '{bin_dir}/{name}.err' >&2\nexit {rc}\n"
    )
    (bin_dir / name).chmod(0o755)


def run_payload(bin_dir: Path, root: Path, **env: str) -> str:
    done = subprocess.run(
        [str(bin_dir / "sh"), str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": str(bin_dir), "HETERO_ROOT": str(root), **env},
        check=True,
    )
    return done.stdout


def touch(root: Path, *paths: str) -> None:
    for rel in paths:
        path = root / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")


def test_payload_script_is_the_shipped_file() -> None:
    text = payload_script()
    assert text == SCRIPT.read_text() and text.startswith("#!/bin/sh\n")
    assert BEGIN in text and END in text


def test_busybox_only_container_without_devices(tmp_path: Path) -> None:
    out = run_payload(toolbox(tmp_path), tmp_path / "root")
    lines = out.splitlines()
    assert (lines[0], lines[-1], len(lines)) == (BEGIN, END, 3)
    report = parse_payload_output("some banner\n" + out)
    assert (report.device_nodes, report.libraries, report.warnings) == ((), (), ())
    assert report.env == {
        k: None
        for k in (
            "NVIDIA_VISIBLE_DEVICES",
            "CUDA_VISIBLE_DEVICES",
            "NVIDIA_DRIVER_CAPABILITIES",
            "ASCEND_VISIBLE_DEVICES",
            "ASCEND_RT_VISIBLE_DEVICES",
            "LD_LIBRARY_PATH",
        )
    }
    assert report.tools == {
        "nvidia-smi": {"present": False, "rc": None, "output": None, "error": "nvidia-smi not found on PATH"},
        "npu-smi": {"present": False, "rc": None, "output": None, "error": "npu-smi not found on PATH"},
    }
    assert report.python == {
        "present": False,
        "path": None,
        "rc": None,
        "report": None,
        "error": "no python3/python on PATH",
    }
    assert [(f.category, f.failure, owner_category(f.failure, "startup")) for f in assess(report, "nvidia.com/gpu")] == [
        ("visibility", "device_not_visible", "infrastructure"),
        ("device-node", "device_missing", "infrastructure"),
        ("driver-library", "driver_missing", "infrastructure"),
        ("driver-library", "driver_missing", "infrastructure"),
    ]
    assert assess(report, "gpu")[0].message == (
        "no /dev/nvidia<N> and NVIDIA_VISIBLE_DEVICES is None: the container runtime was not asked for a GPU "
        "(no device plugin allocation / runtimeClass)"
    )
    assert [f.message for f in assess(report, "npu")][:2] == [
        "no /dev/davinci<N> device node in the container",
        "/dev/davinci_manager is missing",
    ]
    assert assess(report, "cpu") == []


def test_gpu_container_with_nodes_libs_and_smi_output(tmp_path: Path) -> None:
    root = tmp_path / "root"
    touch(
        root,
        "/dev/nvidia0",
        "/dev/nvidia1",
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15",
        "/opt/lib/libnvidia-ml.so.1",
    )
    bin_dir = toolbox(tmp_path)
    xml = '<?xml version="1.0" ?>\n<nvidia_smi_log>\n\t<gpu id="0">"q" \\ é</gpu>\n</nvidia_smi_log>\n'
    fake_tool(bin_dir, "nvidia-smi", xml, 0, "note on stderr\n")
    report_json = {
        "version": "3.10.12",
        "executable": "/usr/bin/python3",
        "onnxruntime": {
            "available": True,
            "version": "1.18.0",
            "error": None,
            "providers": ["CUDAExecutionProvider", "CPUExecutionProvider"],
        },
        "torch": {
            "available": True,
            "version": "2.3.1+cu121",
            "cuda_build": "12.1",
            "cuda_available": True,
            "device_count": 2,
            "error": None,
        },
        "torch_npu": {"available": False, "error": "ModuleNotFoundError: No module named 'torch_npu'"},
    }
    fake_tool(bin_dir, "python3", json.dumps(report_json))
    out = run_payload(
        bin_dir,
        root,
        NVIDIA_VISIBLE_DEVICES="GPU-1,GPU-2",
        CUDA_VISIBLE_DEVICES="",
        LD_LIBRARY_PATH="/opt/lib:/nonexistent",
    )
    report = parse_payload_output(out)
    assert report.device_nodes == ("/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl")
    assert (
        report.env["NVIDIA_VISIBLE_DEVICES"],
        report.env["CUDA_VISIBLE_DEVICES"],
        report.env["LD_LIBRARY_PATH"],
    ) == ("GPU-1,GPU-2", "", "/opt/lib:/nonexistent")
    assert report.libraries == (
        {"name": "libnvidia-ml.so.1", "path": "/opt/lib/libnvidia-ml.so.1"},
        {"name": "libcuda.so.1", "path": "/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
        {"name": "libcuda.so.550.54.15", "path": "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"},
    )
    assert report.tools["nvidia-smi"] == {
        "present": True,
        "rc": 0,
        "output": xml.rstrip("\n"),
        "error": "note on stderr",
    }
    assert report.python["report"] == report_json and report.python["path"] == str(bin_dir / "python3")
    assert assess(report, "gpu") == []


def test_failing_smi_and_cpu_only_frameworks(tmp_path: Path) -> None:
    root = tmp_path / "root"
    touch(root, "/dev/nvidia0", "/dev/nvidiactl", "/usr/lib64/libcuda.so.1", "/usr/lib64/libnvidia-ml.so.1")
    bin_dir = toolbox(tmp_path)
    fake_tool(bin_dir, "nvidia-smi", "", 9, "Failed to initialize NVML: Driver/library version mismatch\n")
    fake_tool(
        bin_dir,
        "python3",
        json.dumps(
            {
                "version": "3.11.4",
                "onnxruntime": {"available": True, "providers": ["CPUExecutionProvider"]},
                "torch": {
                    "available": True,
                    "version": "2.3.1+cpu",
                    "cuda_build": None,
                    "cuda_available": False,
                },
            }
        ),
    )
    report = parse_payload_output(run_payload(bin_dir, root, NVIDIA_VISIBLE_DEVICES="all"))
    assert assess(report, "nvidia.com/gpu") == [
        Finding(
            "runtime",
            "nvidia-smi fails inside the container",
            "Failed to initialize NVML: Driver/library version mismatch",
        ),
        Finding(
            "framework",
            "torch is a CPU-only build (torch.version.cuda is None)",
            "torch 2.3.1+cpu",
        ),
        Finding(
            "framework",
            "onnxruntime has no CUDA/TensorRT execution provider (CPU build; install onnxruntime-gpu)",
            "providers ['CPUExecutionProvider']",
        ),
    ]


def test_python_printing_garbage_is_reported(tmp_path: Path) -> None:
    bin_dir = toolbox(tmp_path)
    fake_tool(bin_dir, "python3", "Segmentation fault", 139)
    report = parse_payload_output(run_payload(bin_dir, tmp_path / "root"))
    assert report.python == {
        "present": True,
        "path": str(bin_dir / "python3"),
        "rc": 139,
        "report": None,
        "error": "python framework probe printed no JSON (exit 139): Segmentation fault",
    }


def test_npu_container_findings(tmp_path: Path) -> None:
    root = tmp_path / "root"
    touch(
        root,
        "/dev/davinci3",
        "/dev/davinci_manager",
        "/dev/devmm_svm",
        "/usr/local/Ascend/driver/lib64/driver/libascend_hal.so",
    )
    bin_dir = toolbox(tmp_path)
    fake_tool(bin_dir, "npu-smi", "dcmi module initialize failed. ret is -8005\n", 1)
    fake_tool(
        bin_dir,
        "python3",
        json.dumps(
            {
                "version": "3.9.9",
                "torch": {"available": True, "cuda_build": None},
                "torch_npu": {"available": False, "error": "ModuleNotFoundError: torch_npu"},
            }
        ),
    )
    report = parse_payload_output(run_payload(bin_dir, root, ASCEND_VISIBLE_DEVICES="3"))
    assert report.device_nodes == ("/dev/davinci3", "/dev/davinci_manager", "/dev/devmm_svm")
    assert assess(report, "huawei.com/Ascend910") == [
        Finding(
            "device-node",
            "/dev/hisi_hdc is missing",
            "device nodes: ['/dev/davinci3', '/dev/davinci_manager', '/dev/devmm_svm']",
        ),
        Finding(
            "runtime",
            "libascendcl.so not found: no CANN runtime in the image or on LD_LIBRARY_PATH",
            "LD_LIBRARY_PATH=None",
        ),
        Finding(
            "runtime",
            "npu-smi info fails inside the container",
            "dcmi module initialize failed. ret is -8005",
        ),
        Finding(
            "framework",
            "torch is installed without torch_npu: it cannot use the NPU",
            "ModuleNotFoundError: torch_npu",
        ),
    ]


def test_inline_python_probe_with_real_interpreter(tmp_path: Path) -> None:
    bin_dir = toolbox(tmp_path)
    (bin_dir / "python3").symlink_to(sys.executable)
    report = parse_payload_output(run_payload(bin_dir, tmp_path / "root"))
    py = report.python["report"]
    assert isinstance(py, dict)
    assert py["version"] == platform.python_version()
    for name in ("onnxruntime", "torch", "torch_npu"):
        assert py[name]["available"] is (importlib.util.find_spec(name) is not None)


def test_without_sed_and_awk_output_stays_json(tmp_path: Path) -> None:
    touch(tmp_path / "root", "/dev/nvidia0")
    # busybox sh runs its own sed/awk applets even off PATH, so this case needs a non-busybox sh
    report = parse_payload_output(
        run_payload(toolbox(tmp_path, ("sh", "cat"), busybox_ok=False), tmp_path / "root")
    )
    assert report.device_nodes == ("(not escaped: sed/awk/tr missing)",)
    assert report.hostname == "(not escaped: sed/awk/tr missing)"


def test_reader_errors_and_warnings() -> None:
    with pytest.raises(ParseError) as info:
        parse_payload_output('OCI runtime exec failed: exec: "sh": executable file not found in $PATH\n')
    assert info.value.message.startswith(
        "payload output has no ---HETERO-PAYLOAD-BEGIN--- marker line; it starts "
        "with: 'OCI runtime exec failed"
    )
    cut = parse_payload_output(f'{BEGIN}\n{{"schema":"hetero-payload/1","device_nodes":["/dev/nv')
    assert cut.warnings[0] == f"no {END} marker: payload output truncated"
    assert cut.warnings[1].startswith("payload JSON unreadable: Unterminated string")
    # an unreadable payload is the image's (the target's image owner: platform by default), as the table says
    assert [(f.category, f.failure, owner_category(f.failure, "startup")) for f in assess(cut, "cpu")] == [
        ("payload", "payload_failed", "platform")] * 2
    other = parse_payload_output(f'{BEGIN}\n{{"schema":"x/9","device_nodes":"bad"}}\n{END}\n')
    assert (other.warnings, other.device_nodes) == (
        ("payload schema 'x/9', expected 'hetero-payload/1'",),
        (),
    )
    assert parse_payload_output(f"{BEGIN}\n[1]\n{END}").warnings == ("payload JSON is not an object",)


def test_runtime_finding_for_cuda_build_without_gpu() -> None:
    report = PayloadReport(
        device_nodes=("/dev/nvidia0", "/dev/nvidiactl"),
        env={"NVIDIA_VISIBLE_DEVICES": "0"},
        libraries=({"name": "libcuda.so.1"}, {"name": "libnvidia-ml.so.1"}),
        python={
            "report": {
                "torch": {
                    "available": True,
                    "version": "2.4.0",
                    "cuda_build": "12.4",
                    "cuda_available": False,
                    "error": None,
                }
            }
        },
    )
    assert assess(report, "gpu") == [
        Finding(
            "runtime",
            "torch was built with CUDA but torch.cuda.is_available() is False (driver too old "
            "for this CUDA, or no GPU visible)",
            "torch 2.4.0 cuda 12.4",
        )
    ]


def test_resource_kind() -> None:
    assert [
        resource_kind(x)
        for x in ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "huawei.com/Ascend310P", "npu", "cpu", "memory")
    ] == ["gpu", "gpu", "npu", "npu", "cpu", "cpu"]


@settings(max_examples=300, deadline=None)
@given(st.text(), st.booleans())
def test_any_text_gives_report_or_parse_error(text: str, with_marker: bool) -> None:
    source = f"{BEGIN}\n{text}" if with_marker else text
    try:
        report = parse_payload_output(source)
    except ParseError:
        assert BEGIN not in source
        return
    assert isinstance(report, PayloadReport)
    for kind in ("gpu", "npu", "cpu"):
        assert all(isinstance(f, Finding) for f in assess(report, kind))


def test_marker_lines_are_alone_on_their_lines() -> None:
    text = payload_script()
    assert re.search(rf'^echo "{re.escape(BEGIN)}"$', text, re.MULTILINE)
    assert re.search(rf'^echo "{re.escape(END)}"$', text, re.MULTILINE)
    assert os.access(SCRIPT, os.R_OK)


def test_tool_inventory_from_captured_outputs() -> None:
    smi_xml = (
        '<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>550.54.15</driver_version><attached_gpus>1'
        '</attached_gpus><gpu id="00000000:19:00.0"><product_name>NVIDIA H100 80GB HBM3</product_name></gpu>'
        "</nvidia_smi_log>"
    )
    report = PayloadReport(
        tools={
            "nvidia-smi": {"present": True, "rc": 0, "output": smi_xml, "error": ""},
            "npu-smi": {"present": True, "rc": 1, "output": "", "error": "segfault in libdrvdsmi"},
        }
    )
    inv = tool_inventory(report, "nvidia")
    assert inv is not None
    assert (inv.source, inv.driver_version, [d.name for d in inv.devices]) == (
        "nvidia-smi-xml",
        "550.54.15",
        ["NVIDIA H100 80GB HBM3"],
    )
    npu = tool_inventory(report, "ascend")
    assert npu is not None
    assert npu.global_errors == (
        (
            "npu-smi output in the container is unreadable: not `npu-smi info` output: no 'npu-smi <version>  "
            "Version: <driver>' line and no 'NPU | Health | Power(W)' header"
        ),
    )
    assert tool_inventory(PayloadReport(), "nvidia") is None


def _gpu_report(nodes: tuple[str, ...], visible: str | None) -> PayloadReport:
    return PayloadReport(
        device_nodes=nodes,
        env={"NVIDIA_VISIBLE_DEVICES": visible},
        libraries=({"name": "libcuda.so.1"}, {"name": "libnvidia-ml.so.1"}),
    )


def test_visibility_versus_injected_device_nodes() -> None:
    ctl = "/dev/nvidiactl"
    assert assess(_gpu_report(("/dev/nvidia0", ctl), None), "gpu") == []  # CDI: no env, devices present
    assert assess(_gpu_report((ctl,), "all"), "gpu") == [
        Finding(
            "device-node",
            "NVIDIA_VISIBLE_DEVICES='all' but no /dev/nvidia<N> device node: the runtime hook did not inject "
            "the GPUs (is nvidia-container-runtime the container's runtime?)",
            "device nodes: ['/dev/nvidiactl']",
        )
    ]
    assert assess(_gpu_report(("/dev/nvidia0", ctl), "GPU-a,GPU-b"), "gpu") == [
        Finding(
            "device-node",
            "2 GPU(s) allocated but 1 /dev/nvidia<N> node(s)",
            "device nodes: ['/dev/nvidia0', '/dev/nvidiactl']",
        )
    ]
    assert assess(_gpu_report(("/dev/nvidia0", "/dev/nvidia1", ctl), "0-1"), "gpu") == []
    npu = PayloadReport(
        device_nodes=("/dev/davinci0", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"),
        env={"ASCEND_VISIBLE_DEVICES": "0-3"},
        libraries=({"name": "libascend_hal.so"}, {"name": "libascendcl.so"}),
    )
    assert assess(npu, "npu") == [
        Finding(
            "device-node",
            "4 NPU(s) allocated but 1 /dev/davinci<N> node(s)",
            "ASCEND_VISIBLE_DEVICES='0-3'",
        )
    ]


def test_shell_trace_lines_are_not_markers(tmp_path: Path) -> None:
    out = run_payload(toolbox(tmp_path), tmp_path / "root")
    traced = f"+ echo {BEGIN}\n+ printf ...\n{out}+ echo {END}\n"
    report = parse_payload_output(traced)
    assert (report.warnings, report.arch) == ((), platform.machine())


def test_fields_of_another_json_type_are_read_as_text_never_a_traceback() -> None:
    # payload.sh writes env values, hostname and arch as strings or null; an edited or hostile payload may not
    doc = {"schema": "hetero-payload/1", "hostname": ["h"], "arch": 64,
           "env": {"NVIDIA_VISIBLE_DEVICES": 2, "ASCEND_VISIBLE_DEVICES": {"a": 1}, "LD_LIBRARY_PATH": None}}
    report = parse_payload_output(f"{BEGIN}\n{json.dumps(doc)}\n{END}\n")
    assert (report.hostname, report.arch) == ("['h']", "64")
    assert report.env == {"NVIDIA_VISIBLE_DEVICES": "2", "ASCEND_VISIBLE_DEVICES": "{'a': 1}", "LD_LIBRARY_PATH": None}
    assert [f.category for f in assess(report, "gpu")][:1] == ["device-node"]
    assert [f.category for f in assess(report, "npu")][:1] == ["device-node"]


def test_a_document_of_another_shape_is_a_payload_finding_naming_the_field() -> None:
    """The ``python``, ``tools`` and ``libraries`` documents are the container's to write. Each is held to the
    shape payload.sh writes: one with a field of another type (a framework ``version`` as a number, a tool's
    ``rc`` as text, a library name as a list) was read one field at a time, as its text or as unset, with no word
    of it; now the document reads as every field unset and the report says why, naming the field, as a
    ``payload`` finding (payload_failed). The documents that fit are still read."""
    report = PayloadReport(
        env={"NVIDIA_VISIBLE_DEVICES": "0"}, device_nodes=("/dev/nvidia0", "/dev/nvidiactl"),
        libraries=({"name": "libcuda.so.1"}, {"name": ["libnvidia-ml.so.1"]}),
        tools={"nvidia-smi": {"present": True, "rc": "9", "output": "", "error": "failed"}},
        python={"present": True, "error": None,
                "report": {"torch": {"available": True, "version": 2, "cuda_build": "12.4"},
                           "onnxruntime": {"available": True, "version": "1.20.0",
                                           "providers": ["CUDAExecutionProvider"]}}})
    assert report.problems == (
        "payload python report is unreadable: Expected `str | null`, got `int` - at `$.torch.version`",
        "payload tools document is unreadable: Expected `int | null`, got `str` - at `$.nvidia-smi.rc`",
        "payload libraries are unreadable: Expected `str`, got `array` - at `$[1].name`")
    assert report.interpreter() == InterpreterFacts(present=True, error=None)
    assert (report.framework("torch").available, report.framework("onnxruntime").version) == (False, None)
    assert not report.tool("nvidia-smi").present and report.library_names == ()
    found = assess(report, "gpu")
    assert [(f.category, f.failure, f.message) for f in found[:3]] == [
        ("payload", "payload_failed", problem) for problem in report.problems]
    fine = PayloadReport(python={"present": True, "report": {"torch": None, "onnxruntime": {"available": False}}})
    assert fine.problems == () and not fine.framework("torch").available
    # every framework and tool name is read, whatever the report holds
    assert tuple(fine.python_facts.frameworks) == FRAMEWORKS == get_args(FrameworkName)
    assert tuple(fine.tool_runs) == TOOLS == get_args(ToolName)
