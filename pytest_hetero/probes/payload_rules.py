"""Rules of :func:`pytest_hetero.probes.payload.assess`: what a GPU or NPU container needs.

GPU (NVIDIA container toolkit / GPU Operator): ``/dev/nvidiactl`` and ``/dev/nvidia<N>``,
``libcuda.so``/``libnvidia-ml.so`` mounted in, a working ``nvidia-smi``, and a framework
built with CUDA. NPU (Ascend Docker Runtime / device plugin): ``/dev/davinci<N>`` plus
``davinci_manager``, ``devmm_svm``, ``hisi_hdc``; ``libascend_hal.so`` from the driver, the
CANN runtime (``libascendcl.so``), and torch_npu when torch is used.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_hetero.probes.payload import PayloadReport, ToolRun

Rule = tuple[str, str, str]
"""A finding as ``(category, message, evidence)``; :func:`payload.assess` wraps it. No owner: the
failure table gives it (:data:`pytest_hetero.probes.payload.FAILURE` names the failure category)."""


def _finding(category: str, message: str, evidence: str = "") -> Rule:
    return (category, message, evidence)


def _tool_error(tool: ToolRun) -> str:
    text = tool.text().strip()
    return text.splitlines()[0][:300] if text else f"exit {tool.rc}"


def _framework(report: PayloadReport, accel: str) -> list[Rule]:
    found: list[Rule] = []
    torch = report.framework("torch")
    ort = report.framework("onnxruntime")
    if accel == "gpu":
        if torch.available and not torch.cuda_build:
            found.append(
                _finding(
                    "framework",
                    "torch is a CPU-only build (torch.version.cuda is None)",
                    f"torch {torch.version}",
                )
            )
        elif torch.available and torch.cuda_available is False:
            evidence = f"torch {torch.version} cuda {torch.cuda_build}; {torch.error or ''}"
            found.append(
                _finding(
                    "runtime",
                    "torch was built with CUDA but torch.cuda.is_available() is "
                    "False (driver too old for this CUDA, or no GPU visible)",
                    evidence.strip("; "),
                )
            )
        if ort.available and not any(
            p in (ort.providers or []) for p in ("CUDAExecutionProvider", "TensorrtExecutionProvider")
        ):
            found.append(
                _finding(
                    "framework",
                    "onnxruntime has no CUDA/TensorRT execution provider "
                    "(CPU build; install onnxruntime-gpu)",
                    f"providers {ort.providers}",
                )
            )
    else:
        npu = report.framework("torch_npu")
        if torch.available and not npu.available:
            found.append(
                _finding(
                    "framework",
                    "torch is installed without torch_npu: it cannot use the NPU",
                    npu.error or "",
                )
            )
        elif npu.available and npu.npu_available is False:
            found.append(
                _finding(
                    "runtime",
                    "torch_npu is installed but torch.npu.is_available() is False",
                    npu.error or "",
                )
            )
        if ort.available and "CANNExecutionProvider" not in (ort.providers or []):
            found.append(
                _finding(
                    "framework",
                    "onnxruntime has no CANNExecutionProvider (not an Ascend build)",
                    f"providers {ort.providers}",
                )
            )
    return found


def listed_devices(value: str | None) -> int | None:
    """How many devices a visibility variable names (``"0,1"``, ``"GPU-a,GPU-b"``, ``"0-3"``); None
    when it names none explicitly (unset, empty, ``all``, ``none``, ``void``)."""
    if value is None or value.strip().lower() in ("", "all", "void", "none"):
        return None
    count = 0
    for item in value.split(","):
        lo, sep, hi = item.strip().partition("-")
        count += int(hi) - int(lo) + 1 if sep and lo.isdecimal() and hi.isdecimal() else 1
    return count


def gpu_findings(report: PayloadReport) -> list[Rule]:
    """Return the missing pieces for an NVIDIA GPU container, most basic first."""
    found: list[Rule] = []
    visible = report.env.get("NVIDIA_VISIBLE_DEVICES")
    gpus = [n for n in report.device_nodes if re.fullmatch(r"/dev/nvidia\d+", n)]
    nodes = f"device nodes: {list(report.device_nodes)}"
    asked = listed_devices(visible)
    if not gpus and visible in (None, "", "void", "none"):
        # with CDI injection the variable may be unset while devices are present: only say it when none are
        found.append(
            _finding(
                "visibility",
                f"no /dev/nvidia<N> and NVIDIA_VISIBLE_DEVICES is {visible!r}: the container runtime "
                "was not asked for a GPU (no device plugin allocation / runtimeClass)",
                f"NVIDIA_VISIBLE_DEVICES={visible!r}; {nodes}",
            )
        )
    elif not gpus:
        found.append(
            _finding(
                "device-node",
                f"NVIDIA_VISIBLE_DEVICES={visible!r} but no /dev/nvidia<N> device node: the runtime hook "
                "did not inject the GPUs (is nvidia-container-runtime the container's runtime?)",
                nodes,
            )
        )
    elif asked is not None and len(gpus) < asked:
        found.append(
            _finding(
                "device-node",
                f"{asked} GPU(s) allocated but {len(gpus)} /dev/nvidia<N> node(s)",
                nodes,
            )
        )
    if "/dev/nvidiactl" not in report.device_nodes:
        found.append(
            _finding(
                "device-node",
                "/dev/nvidiactl is missing",
                f"device nodes: {list(report.device_nodes)}",
            )
        )
    for lib in ("libcuda.so", "libnvidia-ml.so"):
        if not report.has_library(lib):
            found.append(
                _finding(
                    "driver-library",
                    f"{lib}* not found: driver libraries were not mounted (nvidia-container-toolkit hook)",
                    "searched LD_LIBRARY_PATH and standard dirs",
                )
            )
    smi = report.tool("nvidia-smi")
    if smi.present and smi.rc not in (0, None):
        found.append(_finding("runtime", "nvidia-smi fails inside the container", _tool_error(smi)))
    return found + _framework(report, "gpu")


def npu_findings(report: PayloadReport) -> list[Rule]:
    """Return the missing pieces for a Huawei Ascend NPU container, most basic first."""
    found: list[Rule] = []
    chips = [n for n in report.device_nodes if re.fullmatch(r"/dev/davinci\d+", n)]
    visible = report.env.get("ASCEND_VISIBLE_DEVICES")
    asked = listed_devices(visible)
    if chips and asked is not None and len(chips) < asked:
        found.append(
            _finding(
                "device-node",
                f"{asked} NPU(s) allocated but {len(chips)} /dev/davinci<N> node(s)",
                f"ASCEND_VISIBLE_DEVICES={visible!r}",
            )
        )
    if not chips:
        found.append(
            _finding(
                "device-node",
                "no /dev/davinci<N> device node in the container",
                f"ASCEND_VISIBLE_DEVICES={visible!r}",
            )
        )
    for node in ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"):
        if node not in report.device_nodes:
            found.append(
                _finding(
                    "device-node", f"{node} is missing", f"device nodes: {list(report.device_nodes)}"
                )
            )
    if not report.has_library("libascend_hal.so"):
        found.append(
            _finding(
                "driver-library",
                "libascend_hal.so not found: the Ascend driver is not mounted (/usr/local/Ascend/driver)",
                "searched LD_LIBRARY_PATH and standard dirs",
            )
        )
    if not report.has_library("libascendcl.so"):
        found.append(
            _finding(
                "runtime",
                "libascendcl.so not found: no CANN runtime in the image or on LD_LIBRARY_PATH",
                f"LD_LIBRARY_PATH={report.env.get('LD_LIBRARY_PATH')!r}",
            )
        )
    smi = report.tool("npu-smi")
    if smi.present and smi.rc not in (0, None):
        found.append(_finding("runtime", "npu-smi info fails inside the container", _tool_error(smi)))
    return found + _framework(report, "npu")
