"""Huawei Ascend error codes: DCMI return codes, ACL/runtime error numbers, CANN ``E?????`` codes, HCCL.

Sources (meanings in our own words):

* DCMI return codes: Huawei "DCMI API reference", section 返回码 (return codes), e.g.
  https://www.hiascend.com/document/detail/zh/Atlas%20200I%20A2/2520/re/api/api_177.html — ``-8001``
  invalid parameter … ``-8020`` DCMI_ERR_CODE_RESOURCE_OCCUPIED ("the device resource is occupied; check
  whether another container or process holds the device") … ``-8255`` not supported. ``npu-smi``
  prints them as ``dcmi model initialized failed, because the device is used. ret is -8020``.
* ACL error numbers: CANN ``acl/acl_base.h`` and ``acl/error_codes/rt_error_codes.h`` (``aclError``:
  1xxxxx parameter errors, 2xxxxx resource errors, 5xxxxx internal errors; ``107xxx``/``207xxx``/
  ``507xxx`` the runtime's).
* CANN error codes ``E<module><n><nnn>`` (``EE9999``, ``EH9999``, ``EI0006``): CANN "Error codes"
  troubleshooting reference — ``E*9999`` are internal errors of the named module; the module letter
  ``E`` is the runtime, ``I`` HCCL.
* HCCL results: ``HcclResult`` in CANN ``hccl/hccl_types.h`` (``HCCL_E_PARA`` = 1 … ``HCCL_E_SUSPENDING``
  = 22); ``errNo[0x0000000005000002]`` carries the HcclResult in its low bits.

Owners: ``platform`` for the runtime environment, device allocation and communication setup (the
driver answered; the container, image or job wiring is wrong), ``infrastructure`` for the device,
firmware and driver faults.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class AscendCode:
    """One vendor code: ``value`` as printed (``-8020``, ``507015``, ``EH9999``, ``2``), ``name``,
    our ``code`` (snake_case), ``failure`` (its class: a category of the failure table,
    :mod:`pytest_hetero.judge.failures`, which gives the owner), ``category`` and one-line ``meaning``."""

    value: str
    name: str
    code: str
    failure: str
    category: str
    meaning: str


def _d(value: int, name: str, failure: str, meaning: str) -> tuple[int, AscendCode]:
    return value, AscendCode(str(value), name, f"dcmi_{name.removeprefix('DCMI_ERR_CODE_').lower()}",
                             failure, "npu-driver" if failure == "npu_driver_fault" else "npu-runtime", meaning)


DCMI_CODES: dict[int, AscendCode] = dict(
    (
        _d(-8001, "DCMI_ERR_CODE_INVALID_PARAMETER", "npu_environment_error",
           "npu-smi/DCMI was called with an invalid parameter"),
        _d(-8002, "DCMI_ERR_CODE_OPER_NOT_PERMITTED", "npu_environment_error",
           "permission denied: the caller (user or container) may not use this DCMI interface"),
        _d(-8003, "DCMI_ERR_CODE_MEM_OPERATE_FAIL", "npu_driver_fault", "DCMI memory operation failed"),
        _d(-8004, "DCMI_ERR_CODE_SECURE_FUN_FAIL", "npu_driver_fault", "DCMI secure function failed"),
        _d(-8005, "DCMI_ERR_CODE_INNER_ERR", "npu_driver_fault", "DCMI internal error in the Ascend driver"),
        _d(-8006, "DCMI_ERR_CODE_TIME_OUT", "npu_driver_fault", "the Ascend driver did not answer in time"),
        _d(-8007, "DCMI_ERR_CODE_INVALID_DEVICE_ID", "npu_environment_error",
           "the NPU id asked for does not exist here"),
        _d(-8008, "DCMI_ERR_CODE_DEVICE_NOT_EXIST", "npu_driver_fault", "the NPU does not exist or is not running"),
        _d(-8009, "DCMI_ERR_CODE_IOCTL_FAIL", "npu_driver_fault", "an ioctl to the Ascend driver failed"),
        _d(-8010, "DCMI_ERR_CODE_SEND_MSG_FAIL", "npu_driver_fault", "sending a message to the NPU failed"),
        _d(-8011, "DCMI_ERR_CODE_RECV_MSG_FAIL", "npu_driver_fault", "receiving a message from the NPU failed"),
        _d(-8012, "DCMI_ERR_CODE_NOT_REDAY", "npu_driver_fault", "the NPU is not ready yet; retry later"),
        _d(-8013, "DCMI_ERR_CODE_NOT_SUPPORT_IN_CONTAINER", "npu_environment_error",
           "this DCMI interface is not supported inside a container"),
        _d(-8015, "DCMI_ERR_CODE_RESET_FAIL", "npu_driver_fault", "resetting the NPU failed"),
        _d(-8016, "DCMI_ERR_CODE_ABORT_OPERATE", "npu_driver_fault", "the NPU reset was cancelled"),
        _d(-8017, "DCMI_ERR_CODE_IS_UPGRADING", "npu_driver_fault", "the NPU firmware is being upgraded"),
        _d(-8020, "DCMI_ERR_CODE_RESOURCE_OCCUPIED", "npu_environment_error",
           "the driver answered, but the NPU is held by another process or container"),
        _d(-8023, "DCMI_ERR_CODE_CONFIG_INFO_NOT_EXIST", "npu_environment_error",
           "the queried configuration does not exist"),
        _d(-8255, "DCMI_ERR_CODE_NOT_SUPPORT", "npu_environment_error", "the device or function is not supported"),
    )
)
"""DCMI return code -> entry."""


def _a(value: int, name: str, failure: str, meaning: str) -> tuple[int, AscendCode]:
    return value, AscendCode(str(value), name, f"acl_{name.removeprefix('ACL_ERROR_').lower()}", failure,
                             "npu-runtime", meaning)


ACL_CODES: dict[int, AscendCode] = dict(
    (
        _a(100000, "ACL_ERROR_INVALID_PARAM", "npu_program_error", "an ACL call got an invalid parameter"),
        _a(100001, "ACL_ERROR_UNINITIALIZE", "npu_program_error", "ACL was used before aclInit"),
        _a(100002, "ACL_ERROR_REPEAT_INITIALIZE", "npu_program_error", "aclInit was called twice"),
        _a(107000, "ACL_ERROR_RT_PARAM_INVALID", "npu_program_error", "a runtime call got an invalid parameter"),
        _a(107001, "ACL_ERROR_RT_INVALID_DEVICEID", "npu_environment_error",
           "the device id is not visible in this container (ASCEND_VISIBLE_DEVICES / device mounts)"),
        _a(107002, "ACL_ERROR_RT_CONTEXT_NULL", "npu_program_error", "no runtime context is set"),
        _a(107022, "ACL_ERROR_RT_DEVICE_TASK_ABORT", "npu_driver_fault",
           "a device task was aborted after an earlier fault"),
        _a(200000, "ACL_ERROR_BAD_ALLOC", "npu_program_error", "host memory allocation failed"),
        _a(200002, "ACL_ERROR_INVALID_DEVICE", "npu_environment_error", "the device is invalid for this call"),
        _a(207000, "ACL_ERROR_RT_FEATURE_NOT_SUPPORT", "npu_environment_error",
           "the runtime feature is not supported here"),
        _a(207001, "ACL_ERROR_RT_MEMORY_ALLOCATION", "npu_program_error",
           "NPU memory allocation failed (out of device memory)"),
        _a(500000, "ACL_ERROR_INTERNAL_ERROR", "npu_environment_error", "ACL internal error"),
        _a(500001, "ACL_ERROR_FAILURE", "npu_environment_error",
           "ACL operation failed (see the CANN error code before it)"),
        _a(500002, "ACL_ERROR_GE_FAILURE", "npu_environment_error", "graph engine failure"),
        _a(500003, "ACL_ERROR_RT_FAILURE", "npu_environment_error", "runtime failure"),
        _a(500004, "ACL_ERROR_DRV_FAILURE", "npu_driver_fault", "Ascend driver failure"),
        _a(507000, "ACL_ERROR_RT_INTERNAL_ERROR", "npu_driver_fault", "runtime internal error on the device"),
        _a(507008, "ACL_ERROR_RT_SOC_VERSION", "npu_environment_error",
           "the CANN build does not match this NPU's SoC version"),
        _a(507010, "ACL_ERROR_RT_LOST_HEARTBEAT", "npu_driver_fault", "the NPU's task scheduler lost its heartbeat"),
        _a(507011, "ACL_ERROR_RT_MODEL_EXECUTE", "npu_program_error", "model execution failed"),
        _a(507014, "ACL_ERROR_RT_AICORE_TIMEOUT", "npu_program_error", "an AI Core task ran past its timeout"),
        _a(507015, "ACL_ERROR_RT_AICORE_EXCEPTION", "npu_program_error", "an AI Core task faulted"),
        _a(507017, "ACL_ERROR_RT_AICPU_TIMEOUT", "npu_program_error", "an AI CPU task ran past its timeout"),
        _a(507018, "ACL_ERROR_RT_AICPU_EXCEPTION", "npu_program_error", "an AI CPU task faulted"),
        _a(507046, "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT", "npu_program_error",
           "the host timed out synchronising a stream"),
        _a(507899, "ACL_ERROR_RT_DRV_INTERNAL_ERROR", "npu_driver_fault", "driver internal error on the NPU"),
    )
)
"""ACL / runtime ``aclError`` number -> entry."""

HCCL_RESULTS: dict[int, str] = {
    0: "HCCL_SUCCESS", 1: "HCCL_E_PARA", 2: "HCCL_E_PTR", 3: "HCCL_E_MEMORY", 4: "HCCL_E_INTERNAL",
    5: "HCCL_E_NOT_SUPPORT", 6: "HCCL_E_NOT_FOUND", 7: "HCCL_E_UNAVAIL", 8: "HCCL_E_SYSCALL",
    9: "HCCL_E_TIMEOUT", 10: "HCCL_E_OPEN_FILE_FAILURE", 11: "HCCL_E_TCP_CONNECT", 12: "HCCL_E_ROCE_CONNECT",
    13: "HCCL_E_TCP_TRANSFER", 14: "HCCL_E_ROCE_TRANSFER", 15: "HCCL_E_RUNTIME", 16: "HCCL_E_DRV",
    17: "HCCL_E_PROFILING", 18: "HCCL_E_CCE", 19: "HCCL_E_NETWORK", 20: "HCCL_E_AGAIN", 21: "HCCL_E_REMOTE",
    22: "HCCL_E_SUSPENDING",
}
"""``HcclResult`` value -> name (CANN ``hccl_types.h``)."""

CANN_MODULES: dict[str, str] = {"E": "runtime", "I": "HCCL", "Z": "operator"}
"""Module letters of CANN error codes this reader names; others are reported as ``CANN module <L>``."""

_DCMI = re.compile(r"dcmi|npu-smi|DCMI", re.IGNORECASE)
_RET = re.compile(r"(?:ret(?:urn)?(?:\s*code)?|err(?:or)?(?:\s*code)?)\s*(?:is|=|:)?\s*(-80\d\d)\b", re.IGNORECASE)
_ANY_80 = re.compile(r"(?<![\d.])(-80\d\d)\b")


def match_dcmi(line: str) -> AscendCode | None:
    """Return the DCMI return code a line reports (``ret is -8020``, ``ret = -8005``), or None.

    ``because the device is used`` without a number is read as ``-8020``. Needs a DCMI / npu-smi word
    on the line. Never raises.
    """
    if not _DCMI.search(line):
        return None
    m = _RET.search(line) or _ANY_80.search(line)
    if m:
        return DCMI_CODES.get(int(m.group(1))) or AscendCode(
            m.group(1), "DCMI error", f"dcmi_error_{m.group(1).lstrip('-')}", "infrastructure", "npu-driver",
            f"DCMI returned {m.group(1)} (not in this table)")
    if "device is used" in line or "device is busy" in line:
        return DCMI_CODES[-8020]
    return None


_ACL = re.compile(r"(?<!\d)([1-5]0[07]\d{3})(?!\d)")


def match_acl(line: str) -> AscendCode | None:
    """Return the ACL/runtime error number a line names (``507015``, ``ACL_ERROR_RT_...``), or None."""
    for name_match in re.finditer(r"ACL_ERROR_\w+", line):
        for entry in ACL_CODES.values():
            if entry.name == name_match.group(0):
                return entry
    for m in _ACL.finditer(line):
        known = ACL_CODES.get(int(m.group(1)))
        if known is not None:
            return known
    return None


_CANN = re.compile(r"\b(E[0-9A-Z])([0-9])(\d{3})\b")


def match_cann(line: str) -> AscendCode | None:
    """Return the CANN error code at a line's start or after ``:``/``[`` (``EH9999: Inner Error!``), or None."""
    m = _CANN.search(line)
    if not m or (m.start() > 0 and line[m.start() - 1] not in " :[(\t"):
        return None
    letter = m.group(1)[1]
    module = CANN_MODULES.get(letter, f"CANN module {letter}")
    value = m.group(0)
    internal = m.group(2) == "9" and m.group(3) == "999"
    meaning = (f"{module} internal error (CANN {value}); the lines after it name the failing step"
               if internal else f"{module} error {value} (see the CANN error-code reference)")
    return AscendCode(value, value, f"cann_{value.lower()}", "cann_error", "npu-runtime", meaning)
