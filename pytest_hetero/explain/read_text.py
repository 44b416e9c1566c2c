"""Free text -> findings: container logs, framework tracebacks, CLI errors, bare scheduler messages.

Each line is classified on its own (:func:`classify_line`): CUDA runtime errors (by enum name, runtime
message or number), PyTorch/vLLM wrappers, HAMi-core vGPU limits, Ascend DCMI / ACL / CANN / HCCL codes,
container-runtime and image-pull failures (the startup classifier of :mod:`pytest_hetero.pending.startup`),
scheduler/admission/queue messages (:func:`pytest_hetero.pending.describe.classify_message`), kubectl
errors. Context lines (``Search for `cudaError…'``, ``CUDA kernel errors might be asynchronously
reported``, tracebacks, ``Aborted (core dumped)``, application output around the error) join the
finding they explain; shell and REPL noise is skipped. Consecutive hits of one code become one finding.
What is left is reported ``unrecognised`` with its lines, owner none.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_hetero.explain import read_framework as fw
from pytest_hetero.explain.blocks import Piece
from pytest_hetero.explain.context import Ctx, line_timestamp, make
from pytest_hetero.explain.model import Finding, Value
from pytest_hetero.judge.failures import TABLE
from pytest_hetero.pending.describe import classify_message
from pytest_hetero.pending.model import Reason
from pytest_hetero.pending.startup import classify_startup
from pytest_hetero.probes.ascend_errors import HCCL_RESULTS, match_acl, match_cann, match_dcmi
from pytest_hetero.probes.cuda_errors import BY_NAME, match_cuda_error

NOISE = re.compile(
    r"^\s*(?:>>>|\.\.\.\s|\.{3,}\s*$|…\s*$|Python \d+\.\d+|\[(?:GCC|Clang|MSC) |Type \"help\"|"
    r"[Tt]race[Bb]ack \(most recent call last\)|File \"[^\"]*\", line \d+|During handling of the above exception|"
    r"The above exception was the direct cause|#\s|\^+\s*$|~+\^*\s*$|={3,}\s*$|-{3,}\s*$|\s*$)"
)
CUDA_CONTEXT = re.compile(
    r"Search for `cudaError\w+'|CUDA kernel errors might be asynchronously reported|"
    r"For debugging consider passing CUDA_LAUNCH_BLOCKING|Compile with `TORCH_USE_CUDA_DSA`|"
    r"TORCH_USE_CUDA_DSA|device-side assertions"
)
PROCESS_END = re.compile(r"^\s*(?:Aborted|Segmentation fault|Killed|Bus error|Illegal instruction)"
                         r"(?: \(core dumped\))?\s*$"
                         r"|^\s*command terminated with exit code \d+\s*$|^\s*exit(?:ed)? (?:code|status) \d+\s*$",
                         re.IGNORECASE)
HAMI_OOM = re.compile(r"\[HAMI-core ERROR[^\]]*\]:\s*Device (?P<dev>\d+) OOM (?P<req>\d+) / (?P<limit>\d+)")
HAMI_ANY = re.compile(r"\[HAMI-core (?P<level>ERROR|Warn|WARN|Info|INFO|Msg|MSG)")
APP_OUTPUT = re.compile(r"^\s*(?:Allocated \d+|Hit the limit|\[Vector addition|Test (?:PASSED|FAILED)|Done\b)",
                        re.IGNORECASE)
HCCL = re.compile(r"HCCL|Hccl|hccl|CommPool")
VLLM = re.compile(r"^\((?P<proc>[\w.-]+) pid=(?P<pid>\d+)\)\s+(?P<level>[A-Z]+)\s")
TORCH_NO_DRIVER = re.compile(r"Found no NVIDIA driver on your system|NVIDIA driver on your system is too old|"
                             r"torch\.cuda\.is_available\(\)\s*(?:->|returns?|is|==|:)?\s*False|"
                             r"CUDA initialization: |The NVIDIA driver on your system is too old|"
                             r"Torch not compiled with CUDA enabled", re.IGNORECASE)
RUNTIME = re.compile(r"nvidia-container-cli|could not select device driver|OCI runtime|unknown runtime|"
                     r"no runtime for|RuntimeClass|ascend-docker|Failed to pull image|ErrImagePull|ImagePullBackOff|"
                     r"failed to create containerd task|failed to create shim|error gathering device information|"
                     r"libnvidia-ml\.so|Failed to initialize NVML|back-off pulling image", re.IGNORECASE)
RESOURCE_STATEMENT = re.compile(
    r"^\s*(?P<res>[\w.-]+/[\w.-]+)\s+capacity=(?P<cap>\S+)\s+allocatable=(?P<alloc>\S+)\s*$"
)
KUBECTL_ERROR = re.compile(r"^\s*(?:Error from server|error: |Error: )")


@dataclass
class Hit:
    """One classified line: a finding in the making (``primary`` lines define it, ``context`` lines join)."""

    code: str
    category: str
    failure: str | None
    severity: str
    meaning: str
    family: str
    quantities: dict[str, Value] = field(default_factory=dict)
    entity: dict[str, str] = field(default_factory=dict)
    lines: list[int] = field(default_factory=list)
    timestamps: list[str] = field(default_factory=list)
    count: int = 1
    also: list[Hit] = field(default_factory=list)
    """Further findings of the same line (each reason of a scheduler message keeps its own owner)."""


WORKLOAD_SPEC: frozenset[str] = frozenset({
    "node_selector_mismatch", "node_affinity_mismatch", "node_name_mismatch", "pod_affinity", "topology_spread",
    "port_conflict", "untolerated_taint", "quota_requires_limits", "limitrange_violation", "podsecurity_violation",
    "queue_flavor_mismatch", "device_type_mismatch", "webhook_denied"})
"""Kubernetes reasons that, in a pasted text, show a pod spec the workload's owner wrote being refused
(``workload_spec``); in a gate run the gate writes the spec and the reason's own row applies."""
TEAM_SHARE: frozenset[str] = frozenset({"quota_exceeded", "queue_quota_insufficient", "queue_request_exceeds_max"})
"""Kubernetes reasons that, in a pasted text, show a team's quota or queue share used up (``team_share_exceeded``)."""


def reason_failure(code: str, cause: str | None = None) -> str | None:
    """The failure-table category of a pasted Kubernetes reason: its ``cause`` when pending/'s reader named one
    (an image pull by its cause, a crash loop by its last termination, a probe by a device error), else its
    ``code``; ``workload_spec`` / ``team_share_exceeded`` for the field rows above; None for ``unknown`` and for
    a key the table does not have."""
    key = cause or code
    if key == "unschedulable_unexplained":
        return "scheduler_reason_unprinted"  # no predicate printed: the text cannot decide whose (undetermined)
    if key in WORKLOAD_SPEC:
        return "workload_spec"
    if key in TEAM_SHARE:
        return "team_share_exceeded"
    return key if key in TABLE and key != "unknown" else None


def _reason_hit(reason: Reason, kind_family: str = "kube") -> Hit:
    q: dict[str, Value] = dict(reason.quantities)
    q.update({k: v for k, v in reason.detail.items() if k not in ("container", "image")})
    entity = {k: v for k, v in (("container", reason.detail.get("container")), ("node", ",".join(reason.node_names)),
                                ("queue", reason.detail.get("queue"))) if v}
    if reason.resource:
        q["resource"] = reason.resource
    if reason.nodes is not None:
        q["nodes"] = reason.nodes
    if reason.total_nodes is not None:
        q["total_nodes"] = reason.total_nodes
    if reason.flavor:
        q["flavor"] = reason.flavor
    if reason.taint:
        q["taint"] = reason.taint
    if reason.detail.get("image"):
        q["image"] = reason.detail["image"]
    q["source"] = reason.source
    known = reason.code != "unknown"
    return Hit(reason.code if known else "unrecognised", reason.category, reason_failure(reason.code, reason.cause),
               "error" if known else "unrecognised", reason.message if known else "text no reader understands",
               kind_family, q, entity)


LineKind = Hit | str | None
"""What one line is: a :class:`Hit`, ``"noise"``, ``"context"``, ``"end"`` or None (not this kind)."""


def _noise(line: str, low: str) -> LineKind:
    """Shell/REPL noise and blank lines (``noise``), then a process end line (``end``)."""
    if NOISE.match(line) or ">>> " in line:
        return "noise"
    if PROCESS_END.match(line):
        return "end"
    return None


def _cuda_context(line: str, low: str) -> LineKind:
    """PyTorch's CUDA hints: ``Search for `cudaError…'`` names the error (a count-0 hit that joins the
    finding it explains), the other hints and application output are ``context``."""
    if CUDA_CONTEXT.search(line):
        named = re.search(r"`(cudaError\w+)'", line)
        if named and named.group(1) in BY_NAME:
            err = BY_NAME[named.group(1)]
            return Hit(err.code, "cuda", err.failure, "error", f"CUDA error {err.number} {err.name}: {err.meaning}",
                       "cuda", {"cuda_error": err.name, "cuda_error_number": err.number}, count=0)
        return "context"
    if APP_OUTPUT.match(line):
        return "context"
    return None


def _hami_oom(line: str, low: str) -> LineKind:
    """HAMi-core ``Device N OOM <requested> / <limit>`` (bytes): the vGPU memory slice was exceeded."""
    hami = HAMI_OOM.search(line)
    if not hami:
        return None
    limit = int(hami.group("limit"))
    return Hit("vgpu_memory_limit_exceeded", "gpu-sharing", "vgpu_memory_limit_exceeded", "error",
               "the workload allocated past its HAMi vGPU memory slice (HAMi-core enforced limit, not a "
               "physical GPU exhaustion and not a Kubernetes OOMKilled)", "vgpu",
               {"requested_bytes": int(hami.group("req")), "limit_bytes": limit,
                "limit_mib": limit // (1024 * 1024) if limit % (1024 * 1024) == 0 else round(limit / 1048576, 1)},
               {"gpu_index": hami.group("dev")})


_RUNNER_TAIL = re.compile(r"Runner\S*:\d+ Execute Failed\. st: \d+|node\[\d+\] execute fail, runner name:")
"""MindIE/ATB runner lines that follow an HCCL failure (its consequence; they join the HCCL finding)."""
_PY_SOURCE = re.compile(r"^\s*(?:return|raise|yield|await)\s+[\w.]+\(.*\)\s*$|^\s*[\w.]+\s*=\s*[\w.]+\(.*\)\s*$"
                        r"|^\s+[a-z_][\w.]*\(.*\)\s*$")
"""The source line a Python traceback prints under ``File "…", line N`` (context of the error below it)."""
_CANN_TRACE = re.compile(r"^\s*(?P<fn>\w+) execute failed, reason=\[(?P<reason>[^\]]+)\]")
_RET = re.compile(r"(?:retCode|err|ret|error code)\s*[=:]\s*(?P<hex>0x[0-9a-fA-F]+)")
_ERRNO = re.compile(r"\berrno:\s*(?P<n>\d+)")
_NO_BINARY = re.compile(r"Op (?P<op>\w+) does not has? any binary")
_ACLNN = re.compile(r"call (?P<fn>aclnn\w+) failed")
_DEVICE_ID = re.compile(r"phyid:(?P<phy>\d+) realDeviceId:(?P<real>\d+)")


def _oom_hit(line: str, low: str) -> LineKind:
    """A PyTorch/torch_npu allocator OOM with its numbers (:func:`read_framework.oom`)."""
    found = fw.oom(line)
    if found is None:
        return None
    dev, q, entity = found
    if dev == "NPU":
        return Hit("npu_out_of_memory", "npu-memory", "npu_out_of_memory", "error",
                   f"torch_npu could not allocate {q['tried_to_allocate']} on the NPU (the model's memory demand "
                   "exceeds what is free)", "ascend-oom", q, entity)
    q = {"cuda_error": "cudaErrorMemoryAllocation", "cuda_error_number": 2, **q}
    # PyTorch 2.2+ names this process's use apart ("this process has M"): the "Process P has M" before it are
    # other processes on the device; holding more than this one, the program's demand did not fill the GPU
    others = sum(fw.mib(*str(v).split()) for k, v in q.items() if k.startswith("other_process."))
    own = q.get("process_in_use_mib")
    if isinstance(own, float) and others > own:
        return Hit("cuda_memory_allocation", "cuda", "gpu_memory_held_elsewhere", "error",
                   f"CUDA error 2 cudaErrorMemoryAllocation: another process holds {round(others / 1024, 2)} GiB of "
                   f"the GPU's memory, this process {q['process_in_use']}: the GPU was not free for it", "cuda", q,
                   entity)
    return Hit("cuda_memory_allocation", "cuda", "cuda_program_error", "error",
               f"CUDA error 2 cudaErrorMemoryAllocation: the program asked for {q['tried_to_allocate']} of GPU "
               f"memory" + (f" with {q['free']} free" if "free" in q else ""), "cuda", q, entity)


def _nccl_hit(line: str, low: str) -> LineKind:
    """An NCCL / ProcessGroupNCCL line (:func:`read_framework.nccl`); a ``Last error:`` line is context."""
    if re.match(r"^\s*Last error:\s*$", line):
        return "context"
    if not ("nccl" in low or "watchdog" in low or ("connect to" in low and "socket" in low)):
        return None
    if "NCCL INFO" in line or fw.NCCL_VERSION_LINE.match(line):
        return "context"  # NCCL's debug trace (``-> 6`` return codes, topology): joins the error around it
    n = fw.nccl(line)
    if n is None:
        return None
    code, failure, meaning, q, entity = n
    hit = Hit(code, "collective-communication", failure, "warning" if code == "nccl_warning" else "error", meaning,
              "nccl", dict(q), dict(entity))
    if not meaning:
        hit.count = 0
    if code == "nccl_system_error":
        better, why = fw.nccl_detail(q, line)
        if better:
            hit.failure, hit.meaning = better, why or meaning
    return hit


def _torch_npu_hit(line: str, low: str) -> LineKind:
    """torch_npu ``ERRssccc``, ``HCCL function error`` and ``HCCL error in:`` lines (an Ascend error chain)."""
    err = fw.torch_npu_err(line)
    if err is not None:
        q, entity = err
        return Hit("torch_npu_error", "npu-runtime", "cann_error", "error",
                   f"torch_npu {q['torch_npu_code']}: {q['submodule']} {q['error_type']}", "ascend", q, entity)
    fn = fw.hccl_function(line)
    if fn is not None:
        init = "CommInit" in str(fn["hccl_function"])
        return Hit("hccl_init_failed" if init else "hccl_error", "npu-communication",
                   "hccl_init_failed" if init else "cann_error", "error",
                   ("HCCL communicator creation failed" if init else "an HCCL call failed")
                   + f" ({fn['hccl_function']} returned {fn['hccl_error']} {fn['hccl_error_name'] or ''})".rstrip(),
                   "ascend", fn)
    where = re.search(r"HCCL error in: (?P<file>\S+?):(?P<line>\d+)", line)
    if where:
        return Hit("hccl_error", "npu-communication", "cann_error", "error", "an HCCL call failed", "ascend",
                   {"source_file": where.group("file"), "source_line": int(where.group("line"))})
    return None


def _cann_trace_hit(line: str, low: str) -> LineKind:
    """CANN TraceBack steps (``rtX execute failed, reason=[…]``, ``[FUNC:…][FILE:…][LINE:…]`` lines with a
    ``retCode``/``errno``) join the error above them; a Python traceback's source line is context."""
    if _PY_SOURCE.match(line):
        return "context"
    trace = _CANN_TRACE.match(line)
    if trace:
        return Hit("cann_trace", "npu-runtime", "cann_error", "error", "", "ascend",
                   {"runtime_call": trace.group("fn"), "runtime_reason": trace.group("reason")}, count=0)
    if not _TRACE_LINE.search(line) or fw.TORCH_NPU_ERR.search(line) or re.search(r"(?:^|[\s:\[])E[A-Z]\d{4}\b",
                                                                                   line) or match_acl(line):
        return None
    q: dict[str, Value] = {}
    ret = _RET.search(line)
    if ret:
        q["runtime_ret"] = ret.group("hex")
    errno = _ERRNO.search(line)
    if errno:
        q["errno"] = int(errno.group("n"))
    return Hit("cann_trace", "npu-runtime", "cann_error", "error", "", "ascend", q, count=0) if q else "context"


_TRACE_LINE = re.compile(r"\[FUNC:\w+\]\[FILE:[\w.]+\]\[LINE:\d+\]|^\s*Solution:|^\s+Kernel Run failed\b|"
                         r"^\s+launch failed for\b")


def _cuda_error(line: str, low: str) -> LineKind:
    """CUDA runtime errors: PyTorch's ``CUDA out of memory`` (with ``Tried to allocate``), else any
    error the CUDA table knows by enum name, message or number."""
    if "cuda" not in low and "cudaerror" not in low:
        return None
    if re.search(r"CUDA out of memory|OutOfMemoryError", line):
        tried = re.search(r"Tried to allocate (\S+ \w+)", line)
        return Hit("cuda_memory_allocation", "cuda", "cuda_program_error", "error",
                   "CUDA error 2 cudaErrorMemoryAllocation: the program asked for more GPU memory than is free",
                   "cuda", {"cuda_error": "cudaErrorMemoryAllocation", "cuda_error_number": 2,
                            "tried_to_allocate": tried.group(1) if tried else None})
    found_err = match_cuda_error(line)
    if found_err is None:
        return None
    return Hit(found_err.code, "cuda", found_err.failure, "error",
               f"CUDA error {found_err.number} {found_err.name}: {found_err.meaning}",
               "cuda", {"cuda_error": found_err.name, "cuda_error_number": found_err.number})


def _torch_no_driver(line: str, low: str) -> LineKind:
    """The framework finds no (or too old a) NVIDIA driver: ``torch.cuda.is_available()`` is False."""
    if not TORCH_NO_DRIVER.search(line):
        return None
    return Hit("cuda_no_driver", "cuda", "cuda_environment_error", "error",
               "the framework finds no usable NVIDIA driver in the container (torch.cuda.is_available() is False)",
               "cuda")


def _dcmi(line: str, low: str) -> LineKind:
    """An Ascend DCMI return code (``dcmi model initialized failed, because the device is used. ret is -8020``)."""
    dcmi = match_dcmi(line)
    if dcmi is None:
        return None
    return Hit(dcmi.code, dcmi.category, dcmi.failure, "error", f"DCMI {dcmi.value} {dcmi.name}: {dcmi.meaning}",
               "ascend", {"dcmi_code": int(dcmi.value), "dcmi_name": dcmi.name})


def _hccl_quantities(line: str) -> dict[str, Value]:
    """HCCL error number (``error: N`` or ``errNo[0x…]``, low 16 bits) with its HcclResult name, rank,
    rank size and execute status, as printed on one HCCL line."""
    q: dict[str, Value] = {}
    number = re.search(r"error:\s*(\d+)|errNo\[0x([0-9a-fA-F]+)\]", line)
    if number and number.group(1):
        value = int(number.group(1))
        q["hccl_error"] = value
        q["hccl_error_name"] = HCCL_RESULTS.get(value)
    elif number and number.group(2):
        q["errno"] = f"0x{number.group(2)}"
        q["hccl_error"] = int(number.group(2), 16) & 0xFFFF
        q["hccl_error_name"] = HCCL_RESULTS.get(int(number.group(2), 16) & 0xFFFF)
    rank = re.search(r"rank:\s*(\d+),\s*rankSize:\s*(\d+)", line)
    if rank:
        q["rank"], q["rank_size"] = int(rank.group(1)), int(rank.group(2))
    st = re.search(r"st:\s*(\d+)", line)
    if st:
        q["execute_status"] = int(st.group(1))
    return q


_HCCL_LISTEN = re.compile(r"listen on ip\[(?P<ip>[^\]]+)\] and specific port\[(?P<port>\d+)\] fail")
_HCCL_LINKS = re.compile(r"wait socket establish timeout, role\[\d+\] rank\[(?P<rank>\d+)\] "
                         r"timeout\[(?P<timeout>\d+)\]")
_HCCL_SETUP = re.compile(r"\[(?:InitNic|ServerInit|LinkEstablish|LinksEstablishCompleted|Create\]\[Sockets)\]")
"""HCCL's own plog steps of communicator set-up (socket listen, NIC init, link establishment)."""


def _hccl(line: str, low: str) -> LineKind:
    """An HCCL failure line (communicator init or a collective): error number, rank, process."""
    if not ((HCCL.search(line) or _RUNNER_TAIL.search(line)) and ("fail" in low or "error" in low or "null" in low)):
        return None
    proc = re.search(r"HCCL\((?P<pid>\d+),(?P<name>[\w.-]+)\)", line)
    entity = {"pid": proc.group("pid"), "process": proc.group("name")} if proc else {}
    q = _hccl_quantities(line)
    listen = _HCCL_LISTEN.search(line)
    links = _HCCL_LINKS.search(line)
    if listen:
        q.update(listen_ip=listen.group("ip"), listen_port=int(listen.group("port")))
    if links:
        q.update(peer_rank=int(links.group("rank")), link_timeout_s=int(links.group("timeout")))
    setup = "init" in low or "comm" in low or bool(listen or links or _HCCL_SETUP.search(line))
    meaning = "an HCCL call failed"
    if listen:
        meaning = (f"HCCL could not listen on {listen.group('ip')} port {listen.group('port')} (in use by another "
                   "process, or the address is not this host's): the communicator's sockets were never set up")
    elif links:
        meaning = (f"HCCL's links to rank {links.group('rank')} were not established within {links.group('timeout')} "
                   "s: the communicator could not be set up")
    elif setup:
        meaning = ("HCCL communicator creation failed: a rank could not join the collective (multi-NPU communication "
                   "setup: rank table, network/ports, device visibility)")
    return Hit("hccl_init_failed" if setup else "hccl_error", "npu-communication",
               "hccl_init_failed" if setup else "cann_error", "error", meaning, "hccl", q, entity)


def _cann(line: str, low: str) -> LineKind:
    """A CANN error code (``EH9999``, ``EE1001``…)."""
    cann = match_cann(line)
    if cann is None:
        return None
    q: dict[str, Value] = {"cann_code": cann.value}
    for pattern, keys in ((_NO_BINARY, ("op",)), (_ACLNN, ("aclnn_call",)), (_DEVICE_ID, ("phy_id", "real_device_id")),
                          (_RET, ("runtime_ret",))):
        m = pattern.search(line)
        if m:
            q.update(zip(keys, m.groups(), strict=False))
    return Hit(cann.code, cann.category, cann.failure, "error", cann.meaning, "ascend", q)


def _acl(line: str, low: str) -> LineKind:
    """An ACL error number on a line that reads as a result/error report."""
    acl = match_acl(line)
    if acl is None or not re.search(r"result|ret|error|ACL|code|failed", line, re.IGNORECASE):
        return None
    return Hit(acl.code, acl.category, acl.failure, "error", f"ACL {acl.value} {acl.name}: {acl.meaning}", "ascend",
               {"acl_error": int(acl.value), "acl_name": acl.name})


def _resource_statement(line: str, low: str) -> LineKind:
    """``<resource> capacity=N allocatable=M`` as a script prints a node's extended resource."""
    statement = RESOURCE_STATEMENT.match(line)
    if not statement:
        return None
    res, cap, alloc = statement.group("res"), statement.group("cap"), statement.group("alloc")
    return Hit("node_resources", "node", None, "ok", f"{res}: capacity {cap}, allocatable {alloc}",
               "node", {f"capacity.{res}": cap, f"allocatable.{res}": alloc})


_OPERATOR_IMAGE = re.compile(r"(?:nvcr\.io/nvidia/|registry\.k8s\.io/|k8s\.gcr\.io/|quay\.io/ascend/)")
"""Registries of the images a GPU/NPU operator pulls (a missing tag there is the operator's choice)."""


def _image_detail(hit: Hit, code: str, line: str) -> None:
    """Add the ``image "…"`` a runtime line names to ``hit``; for a failed pull, say whether the tag does
    not exist and, for an operator image, that the operator asked for an unreleased version."""
    image = re.search(r"image \"([^\"]+)\"", line)
    if not image:
        return
    name = image.group(1)
    hit.quantities["image"] = name
    if code != "image_pull_failed":
        return
    not_found = re.search(r"NotFound|not found|manifest unknown", line)
    if _OPERATOR_IMAGE.match(name) and not_found:
        hit.failure = "image_not_found"
        hit.meaning = (f"the image {name} does not exist (tag not published): the operator "
                       "asks for a component version/OS pair that was never released")
    elif not_found:
        hit.meaning = f"the image {name} does not exist (wrong name or tag)"
    hit.quantities["cause"] = "not_found" if not_found else None


_CLI_INVOCATION = re.compile(r"nvidia-container-cli(?:\s+--?[\w.][\w.-]*(?:=\S+)?)*\s+(?:configure|list|info)\b"
                             r"(?:\s+--?[\w.][\w.-]*(?:[=@]\S*)?)*(?:\s+/\S+)?\s*$")
r"""An echoed ``nvidia-container-cli … configure --device=… <rootfs>`` command line (debug logs print the hook's
invocation): the command the runtime ran, not an error. Each option has one way to be split (the name after its
dashes starts with a word character or a dot): with ``--?[\w.-]+``, ``--ab`` split two ways and a line of n options
that is not an invocation cost 2**n backtracking steps."""


def _runtime(line: str, low: str) -> LineKind:
    """Container-runtime and image-pull failures, read by the startup classifier; an echoed
    ``nvidia-container-cli`` invocation with no error in it is context, not a failure."""
    if not RUNTIME.search(line):
        return None
    if _CLI_INVOCATION.search(line) and not re.search(r"error|fail|denied|timed? ?out", low):
        return "context"
    state = "ErrImagePull" if re.search(r"pull|ImagePull", line, re.IGNORECASE) else "StartError"
    reason = classify_startup(state, line)
    if reason is None:
        return None
    hit = _reason_hit(reason, "startup")
    _image_detail(hit, reason.code, line)
    return hit


def _scheduler_message(line: str, low: str) -> LineKind:
    """A scheduler/admission/queue message: one hit per known reason (the others ride in ``also``), so each
    reason keeps its own owner."""
    found = classify_message(line)
    if not found:
        return None
    known = [h for h in (_reason_hit(r) for r in found) if h.code != "unrecognised"]
    if not known:
        return None
    first = known[0]
    first.also = known[1:]
    return first


_LINE_KINDS: tuple[Callable[[str, str], LineKind], ...] = (
    _noise, _cuda_context, _hami_oom, _oom_hit, _nccl_hit, _torch_npu_hit, _cann_trace_hit, _cuda_error,
    _torch_no_driver, _dcmi, _hccl, _cann, _acl,
    _resource_statement, _runtime, _scheduler_message,
)
"""Line recognisers in priority order; each takes ``(line, line.lower())``; the first answer wins."""


def classify_line(line: str) -> Hit | str | None:
    """Classify one line: a :class:`Hit`, ``"noise"``, ``"context"``, ``"end"`` (a process end line)
    or None (not understood). Never raises."""
    low = line.lower()
    for recognise in _LINE_KINDS:
        found = recognise(line, low)
        if found is not None:
            return found
    return None


_ASCEND_CODES = ("cann_", "acl_", "torch_npu_error", "hccl_init_failed", "hccl_error")


def _joins(prev: Hit, hit: Hit) -> bool:
    """True when ``hit`` continues ``prev``, the finding just before it: the same code outside the
    startup/Kubernetes families, a line of the HCCL or vGPU family after one of its family, a CUDA hint
    (count 0) after a CUDA error, PyTorch's CUDA OOM after HAMi's vGPU limit, Ascend CANN/ACL codes in a
    row. A webhook denial always starts its own finding."""
    if hit.code == "webhook_denied":
        return False
    if prev.family == "nccl" and prev.entity.get("node") != hit.entity.get("node"):
        return False  # another node's NCCL line is another finding
    if prev.code == hit.code and hit.family not in ("startup", "kube"):
        return True
    if prev.family == hit.family and hit.family in ("hccl", "vgpu"):
        return True
    if prev.family == "cuda" and hit.count == 0:
        return True
    if prev.family == "ascend" and hit.family == "ascend" and hit.count == 0:
        return True
    if prev.family == "vgpu" and hit.code == "cuda_memory_allocation":
        return True
    return (hit.family == "ascend" and prev.family == "ascend" and hit.code.startswith(_ASCEND_CODES)
            and prev.code.startswith(_ASCEND_CODES))


def _absorb(prev: Hit, hit: Hit) -> None:
    """Fold ``hit`` into ``prev``: lines, timestamps and count add up; quantities and entity keep the
    first value, except a second ACL/CANN code, kept as ``<key>_2``."""
    if prev.family == "nccl" and "network_error" in hit.quantities and "network_error" not in prev.quantities:
        prev.meaning, prev.failure = f"{prev.meaning}: {hit.meaning}", hit.failure  # the Last error names the cause
    prev.lines += hit.lines
    prev.timestamps += hit.timestamps
    prev.count += hit.count
    for key, value in hit.quantities.items():
        if key == "ranks" and key in prev.quantities and str(value) not in str(prev.quantities[key]).split(","):
            prev.quantities[key] = f"{prev.quantities[key]},{value}"
            prev.entity.pop("rank", None)
        elif key not in prev.quantities:
            prev.quantities[key] = value
        elif prev.quantities[key] != value and key in ("acl_error", "cann_code", "torch_npu_code"):
            prev.quantities[key + "_2"] = value
    for key, ent in hit.entity.items():
        if not (key == "rank" and "," in str(prev.quantities.get("ranks", ""))):
            prev.entity.setdefault(key, ent)


def _ascend_verdict(hit: Hit) -> None:
    """The code of a merged Ascend error chain (torch_npu ``ERR…`` + HCCL call + CANN codes + TraceBack) is its
    most specific cause: HCCP could not start because a previous process holds the device (``EJ0001``); an
    operator without a kernel binary (``EZ9999 … does not has any binary``); an HCCL communicator that could
    not map its device (``device id error``); else the first code. The codes all stay in the quantities."""
    q = hit.quantities
    codes = {str(v) for k, v in q.items() if k.startswith("cann_code")}
    if hit.code == "cann_trace":
        hit.code, hit.meaning = "cann_runtime_error", "a CANN runtime call failed"
    remote = codes & {"EI0006", "EI0002"}
    if remote:
        hit.code, hit.category, hit.failure = "hccl_remote_timeout", "npu-communication", "hccl_remote_timeout"
        hit.meaning = (f"HCCL timed out waiting for a remote rank ({', '.join(sorted(remote))}): a peer NPU did not "
                       "connect or did not reach the collective in time; this rank's log cannot say which or why")
        q.update(next="read the plog/log of every rank in the rank table; the first rank that failed is the culprit")
    elif "EJ0001" in codes:
        hit.code, hit.category, hit.failure = "hccp_init_failed", "npu-communication", "hccp_init_failed"
        hit.meaning = ("the HCCP process could not start on the NPU: a previous training process still holds the "
                       "device (per the message); if none runs, the driver error behind it is the node's")
    elif "op" in q and "no binary" not in hit.meaning:
        hit.code, hit.category, hit.failure = "cann_op_no_binary", "npu-runtime", "cann_error"
        hit.meaning = (f"operator {q['op']} has no kernel binary in the installed CANN operator package "
                       "(the image's CANN/ops version does not support it on this NPU)")
    elif str(q.get("runtime_reason", "")).startswith("device id error") and hit.code.startswith(("hccl", "torch")):
        hit.code, hit.category, hit.failure = "hccl_init_failed", "npu-communication", "hccl_init_failed"
        hit.meaning = ("HCCL communicator creation failed: the runtime could not map the rank's physical NPU id to "
                       "a device (device id error): the container's NPU visibility/mapping is wrong")


def _merge(hits: list[Hit]) -> list[Hit]:
    """Consecutive hits that belong together (:func:`_joins`) become one."""
    out: list[Hit] = []
    for hit in hits:
        if out and _joins(out[-1], hit):
            _absorb(out[-1], hit)
        else:
            out.append(hit)
    for hit in out:
        if hit.family == "ascend":
            _ascend_verdict(hit)
    return out


def _admission_groups(lines: list[str], indexes: list[int]) -> tuple[list[Hit], set[int]]:
    """Hits of multi-line admission denials (``… denied the request:`` then ``[rule] message`` lines,
    the Gatekeeper form) read as one message each, and the line indexes they consume."""
    hits: list[Hit] = []
    consumed: set[int] = set()
    for n, i in enumerate(indexes):
        if "denied the request" not in lines[i]:
            continue
        group = [i]
        for j in indexes[n + 1 :]:
            if not re.match(r"^\s*\[[\w.-]+\]", lines[j]):
                break
            group.append(j)
        if len(group) > 1:
            from pytest_hetero.pending.admission import parse_admission_message

            for reason in parse_admission_message("\n".join(lines[k] for k in group)):
                hit = _reason_hit(reason)
                hit.lines = group
                hits.append(hit)
            consumed.update(group)
    return hits, consumed


@dataclass
class _LineScan:
    """What :func:`classify_lines` has gathered, line by line: ``hits`` in order, ``pending_context``
    (context lines seen before any hit; they join the next one), runs of consecutive ``unknown`` lines,
    process ``ends`` (index, text)."""

    hits: list[Hit]
    pending_context: list[int] = field(default_factory=list)
    unknown: list[list[int]] = field(default_factory=list)
    ends: list[tuple[int, str]] = field(default_factory=list)

    def add(self, i: int, line: str, result: Hit | str | None) -> None:
        """Take line ``i`` (text ``line``) classified as ``result`` (see :func:`classify_line`)."""
        if result == "noise":
            return
        if result == "context":
            self._context(i)
        elif result == "end":
            self._end(i, line.strip())
        elif isinstance(result, Hit):
            self._hit(i, line, result)
        else:
            self._unknown(i)

    def _context(self, i: int) -> None:
        if self.hits:
            self.hits[-1].lines.append(i)
        else:
            self.pending_context.append(i)

    def _end(self, i: int, text: str) -> None:
        self.ends.append((i, text))
        if self.hits:
            self.hits[-1].lines.append(i)
            self.hits[-1].quantities.setdefault("process_end", text)

    def _unknown(self, i: int) -> None:
        if self.unknown and self.unknown[-1][-1] == i - 1:
            self.unknown[-1].append(i)
        else:
            self.unknown.append([i])

    def _hit(self, i: int, line: str, hit: Hit) -> None:
        hit.lines = self.pending_context + [i]
        self.pending_context = []
        stamp = line_timestamp(line)
        if stamp:
            hit.timestamps.append(stamp)
        vllm = VLLM.match(line)
        if vllm:
            hit.entity.setdefault("process", vllm.group("proc"))
            hit.entity.setdefault("pid", vllm.group("pid"))
        self.hits.append(hit)
        for extra in hit.also:
            extra.lines, extra.timestamps = list(hit.lines), list(hit.timestamps)
            self.hits.append(extra)
        hit.also = []


def _hit_finding(ctx: Ctx, piece: Piece, kind: str, hit: Hit, indexes: list[int], count: int | None) -> Finding:
    """The finding of one (merged) hit, on the piece's lines ``indexes``."""
    return make(kind, hit.code, category=hit.category, failure=hit.failure, severity=hit.severity,
                meaning=hit.meaning, lines=ctx.src(indexes, piece.start), entity=hit.entity,
                timestamps=hit.timestamps, count=count, quantities=hit.quantities)


def _unknown_findings(ctx: Ctx, piece: Piece, kind: str, lines: list[str], run: list[int]) -> list[Finding]:
    """A run of unrecognised lines: a wrapped message read as one line when that is understood, else one
    ``unrecognised`` finding for the run."""
    if len(run) > 1:
        rescue = classify_message(" ".join(lines[i].strip() for i in run))
        known = [r for r in rescue if r.code != "unknown"]
        if known:
            return [_hit_finding(ctx, piece, kind, _reason_hit(reason), run, None) for reason in known]
    return [make(kind, "unrecognised", category="unrecognised", severity="unrecognised",
                 meaning="text no reader understands", lines=ctx.src(run, piece.start),
                 timestamps=[line_timestamp(lines[run[0]])], count=len(run))]


def classify_lines(ctx: Ctx, piece: Piece, indexes: list[int], kind: str = "text") -> list[Finding]:
    """Findings for the lines ``indexes`` (0-based in ``piece``): hits, merged, with context attached;
    unrecognised runs reported as such; process ends with no hit as ``process_crashed``. Findings are
    ordered by their first source line."""
    lines = ctx.lines(piece)
    admitted, consumed = _admission_groups(lines, indexes)
    scan = _LineScan(admitted)
    for i in indexes:
        if i not in consumed:
            scan.add(i, lines[i], classify_line(lines[i]))
    merged = _merge(scan.hits)
    out = [_hit_finding(ctx, piece, kind, hit, hit.lines, max(hit.count, 1)) for hit in merged]
    if scan.pending_context and merged:
        merged[-1].lines += scan.pending_context
        out[-1] = _hit_finding(ctx, piece, kind, merged[-1], merged[-1].lines, max(merged[-1].count, 1))
    elif scan.pending_context and all("NCCL INFO" in lines[i] or fw.NCCL_VERSION_LINE.match(lines[i])
                                      for i in scan.pending_context):
        trace = [lines[i] for i in scan.pending_context]
        facts = fw.nccl_trace_facts(trace)
        said = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in facts.items())
        out.append(make(kind, "nccl_log", category="log", severity="ok",
                        meaning=f"NCCL debug trace ({len(scan.pending_context)} line(s), no error among them"
                                + (f"; {said}" if said else "") + ")",
                        lines=ctx.src(scan.pending_context, piece.start), count=len(scan.pending_context),
                        quantities=facts))
    elif scan.pending_context:
        scan.unknown.append(scan.pending_context)
    for run in scan.unknown:
        out += _unknown_findings(ctx, piece, kind, lines, run)
    if scan.ends and not scan.hits:
        text = scan.ends[0][1]
        out.append(make(kind, "process_crashed", category="workload", severity="error",
                        meaning=f"a process ended abnormally ({text}); no cause is printed",
                        lines=ctx.src([i for i, _ in scan.ends], piece.start), quantities={"process_end": text}))
    out.sort(key=lambda f: f.lines[0].number if f.lines else 0)
    return out


def read_text(ctx: Ctx, piece: Piece) -> list[Finding]:
    """Read a ``text`` piece: every line classified; a wrapped message is also tried as one line."""
    lines = ctx.lines(piece)
    indexes = [i for i, line in enumerate(lines) if line.strip()]
    return classify_lines(ctx, piece, indexes)


_ = Reason
