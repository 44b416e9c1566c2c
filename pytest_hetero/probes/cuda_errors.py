"""CUDA runtime errors as frameworks print them, with meaning and failure class (the failure table owns them).

Source: CUDA Runtime API reference, "Data types" / ``enum cudaError``
(https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html): error names, numbers and the
message strings ``cudaGetErrorString`` returns (what PyTorch, vLLM and the CUDA samples print after
``CUDA error:`` or inside ``(error code ...)``). Meanings are our own summaries.

Owners: ``platform`` for a driver/runtime/image mismatch (image built for another architecture,
CUDA runtime newer than the node's driver, forward compatibility on unsupported hardware, fabric
manager not running), ``infrastructure`` for the device itself (ECC, NVLink, a GPU gone),
``algorithm`` for the program's own faults (illegal address, out of memory, invalid argument).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class CudaError:
    """One ``cudaError`` value: ``name`` (``cudaErrorNoKernelImageForDevice``), ``number``, the message
    ``cudaGetErrorString`` prints, our ``code`` (snake_case, prefixed ``cuda_``), ``failure`` (its class:
    a category of the failure table, :mod:`pytest_hetero.judge.failures`, which gives the owner), ``meaning``."""

    name: str
    number: int
    message: str
    code: str
    failure: str
    meaning: str


def _e(name: str, number: int, message: str, failure: str, meaning: str) -> CudaError:
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name.removeprefix("cudaError")).lower()
    return CudaError(name, number, message, "cuda_" + snake, failure, meaning)


CUDA_ERRORS: tuple[CudaError, ...] = (
    _e("cudaErrorInvalidValue", 1, "invalid argument", "cuda_program_error", "a CUDA call got an invalid argument"),
    _e("cudaErrorMemoryAllocation", 2, "out of memory", "cuda_program_error",
       "the program asked for more GPU memory than is free (or than its vGPU slice allows)"),
    _e("cudaErrorInitializationError", 3, "initialization error", "cuda_environment_error",
       "the CUDA driver and runtime could not be initialised in this container"),
    _e("cudaErrorStubLibrary", 34, "CUDA driver is a stub library", "cuda_environment_error",
       "the container loaded the CUDA stub libcuda instead of the node's driver library"),
    _e("cudaErrorInsufficientDriver", 35, "CUDA driver version is insufficient for CUDA runtime version",
       "cuda_environment_error", "the image's CUDA runtime is newer than the node's driver supports"),
    _e("cudaErrorCallRequiresNewerDriver", 36, "API call is not supported in the installed CUDA driver",
       "cuda_environment_error", "the program needs a newer driver than the node has"),
    _e("cudaErrorDevicesUnavailable", 46, "CUDA-capable device(s) is/are busy or unavailable",
       "cuda_environment_error", "the GPU is held exclusively by another process, prohibited, or needs a reset"),
    _e("cudaErrorInvalidDeviceFunction", 98, "invalid device function", "cuda_environment_error",
       "the kernel was not compiled for this GPU architecture"),
    _e("cudaErrorNoDevice", 100, "no CUDA-capable device is detected", "cuda_environment_error",
       "no GPU is visible in the container (no device request, runtime hook or driver)"),
    _e("cudaErrorInvalidDevice", 101, "invalid device ordinal", "cuda_program_error",
       "the program selected a GPU index the container does not have"),
    _e("cudaErrorDeviceNotLicensed", 102, "device doesn't have valid Grid license", "cuda_environment_error",
       "the vGPU has no valid license"),
    _e("cudaErrorStartupFailure", 127, "startup failure in cuda runtime", "cuda_environment_error",
       "the CUDA runtime failed to start"),
    _e("cudaErrorNoKernelImageForDevice", 209, "no kernel image is available for execution on the device",
       "cuda_environment_error", "the image was built without kernels for this GPU architecture"),
    _e("cudaErrorECCUncorrectable", 214, "uncorrectable ECC error encountered", "cuda_device_fault",
       "the GPU reported an uncorrectable memory error"),
    _e("cudaErrorNvlinkUncorrectable", 220, "uncorrectable NVLink error detected during the execution",
       "cuda_device_fault", "an NVLink fault stopped the work"),
    _e("cudaErrorUnsupportedPtxVersion", 222, "the provided PTX was compiled with an unsupported toolchain.",
       "cuda_environment_error", "the PTX in the image needs a newer driver"),
    _e("cudaErrorIllegalAddress", 700, "an illegal memory access was encountered", "cuda_program_error",
       "a kernel accessed memory it does not own"),
    _e("cudaErrorLaunchOutOfResources", 701, "too many resources requested for launch", "cuda_program_error",
       "a kernel launch asked for more registers/shared memory than the GPU has"),
    _e("cudaErrorLaunchTimeout", 702, "the launch timed out and was terminated", "cuda_program_error",
       "a kernel ran past the watchdog limit"),
    _e("cudaErrorAssert", 710, "device-side assert triggered", "cuda_program_error",
       "a device-side assertion failed in the program"),
    _e("cudaErrorIllegalInstruction", 715, "an illegal instruction was encountered", "cuda_program_error",
       "a kernel executed an illegal instruction"),
    _e("cudaErrorMisalignedAddress", 716, "misaligned address", "cuda_program_error",
       "a kernel used a misaligned memory address"),
    _e("cudaErrorLaunchFailure", 719, "unspecified launch failure", "cuda_program_error",
       "a kernel faulted (often an illegal access); the CUDA context is unusable"),
    _e("cudaErrorNotPermitted", 800, "operation not permitted", "cuda_environment_error",
       "the operation is not permitted in this environment"),
    _e("cudaErrorNotSupported", 801, "operation not supported", "cuda_environment_error",
       "the operation is not supported on this device/driver"),
    _e("cudaErrorSystemNotReady", 802, "system not yet initialized", "cuda_device_fault",
       "the system is not ready (NVSwitch systems: fabric manager not running)"),
    _e("cudaErrorSystemDriverMismatch", 803, "system has unsupported display driver / cuda driver combination",
       "cuda_environment_error", "the kernel driver and the user-space CUDA driver in the container differ"),
    _e("cudaErrorCompatNotSupportedOnDevice", 804, "forward compatibility was attempted on non supported HW",
       "cuda_environment_error",
       "the image uses the CUDA forward-compatibility package on a GPU that does not support it"),
    _e("cudaErrorUnknown", 999, "unknown error", "cuda_device_fault",
       "the driver reported an unknown error (often a GPU that needs a reset)"),
)
"""The runtime errors this reader names (the others are read by number/name with a generic meaning)."""

BY_NAME: dict[str, CudaError] = {e.name: e for e in CUDA_ERRORS}
BY_NUMBER: dict[int, CudaError] = {e.number: e for e in CUDA_ERRORS}
BY_MESSAGE: dict[str, CudaError] = {e.message.lower().rstrip("."): e for e in CUDA_ERRORS}

_MESSAGES = re.compile(
    "|".join(re.escape(m) for m in sorted(BY_MESSAGE, key=len, reverse=True)), re.IGNORECASE
)
_NAME = re.compile(r"\bcudaError[A-Z]\w+")
_NUMBER = re.compile(r"(?:CUDA error|cuda runtime error|error code|Error)\s*[:(]?\s*(\d{1,3})\b", re.IGNORECASE)


def match_cuda_error(line: str) -> CudaError | None:
    """Return the CUDA error a line names by enum name (``cudaErrorNoKernelImageForDevice``), by the
    runtime's message (``no kernel image is available ...``) or by ``CUDA error <n>`` number; None if none.

    Message matching needs a CUDA word on the line (``CUDA``, ``cuda``) so that ``out of memory`` from an
    unrelated tool is not read as a CUDA error. Never raises.
    """
    name = _NAME.search(line)
    if name:
        known = BY_NAME.get(name.group(0))
        if known is not None:
            return known
    low = line.lower()
    if "cuda" not in low and "cudart" not in low:
        return None
    message = _MESSAGES.search(line)
    if message:
        return BY_MESSAGE.get(message.group(0).lower().rstrip("."))
    number = _NUMBER.search(line)
    if number:
        return BY_NUMBER.get(int(number.group(1)))
    return None
