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
from dataclasses import dataclass, field

from pytest_hetero.explain.blocks import Piece
from pytest_hetero.explain.context import Ctx, line_timestamp, make
from pytest_hetero.explain.model import Finding, Value
from pytest_hetero.pending.describe import classify_message
from pytest_hetero.pending.model import Reason, team_owner
from pytest_hetero.pending.startup import classify_startup
from pytest_hetero.probes.ascend_errors import HCCL_RESULTS, match_acl, match_cann, match_dcmi
from pytest_hetero.probes.cuda_errors import BY_NAME, match_cuda_error

NOISE = re.compile(
    r"^\s*(?:>>>|\.\.\.\s|\.{3,}\s*$|…\s*$|Python \d+\.\d+|\[(?:GCC|Clang|MSC) |Type \"help\"|"
    r"[Tt]race[Bb]ack \(most recent call last\)|File \"[^\"]*\", line \d+|During handling of the above exception|"
    r"The above exception was the direct cause|\^+\s*$|~+\^*\s*$|={3,}\s*$|-{3,}\s*$|\s*$)"
)
CUDA_CONTEXT = re.compile(
    r"Search for `cudaError\w+'|CUDA kernel errors might be asynchronously reported|"
    r"For debugging consider passing CUDA_LAUNCH_BLOCKING|Compile with `TORCH_USE_CUDA_DSA`|"
    r"TORCH_USE_CUDA_DSA|device-side assertions"
)
PROCESS_END = re.compile(r"^\s*(?:Aborted|Segmentation fault|Killed|Bus error|Illegal instruction)(?: \(core dumped\))?\s*$"
                         r"|^\s*command terminated with exit code \d+\s*$|^\s*exit(?:ed)? (?:code|status) \d+\s*$",
                         re.IGNORECASE)
HAMI_OOM = re.compile(r"\[HAMI-core ERROR[^\]]*\]:\s*Device (?P<dev>\d+) OOM (?P<req>\d+) / (?P<limit>\d+)")
HAMI_ANY = re.compile(r"\[HAMI-core (?P<level>ERROR|Warn|WARN|Info|INFO|Msg|MSG)")
APP_OUTPUT = re.compile(r"^\s*(?:Allocated \d+|Hit the limit|\[Vector addition|Test (?:PASSED|FAILED)|Done\b)", re.IGNORECASE)
HCCL = re.compile(r"HCCL|Hccl|hccl|rank:? ?\d+|Execute Failed|execute fail|CommPool")
VLLM = re.compile(r"^\((?P<proc>[\w.-]+) pid=(?P<pid>\d+)\)\s+(?P<level>[A-Z]+)\s")
TORCH_NO_DRIVER = re.compile(r"Found no NVIDIA driver on your system|NVIDIA driver on your system is too old|"
                             r"torch\.cuda\.is_available\(\)\s*(?:->|returns?|is|==|:)?\s*False|"
                             r"CUDA initialization: |The NVIDIA driver on your system is too old|"
                             r"Torch not compiled with CUDA enabled", re.IGNORECASE)
RUNTIME = re.compile(r"nvidia-container-cli|could not select device driver|OCI runtime|unknown runtime|"
                     r"no runtime for|RuntimeClass|ascend-docker|Failed to pull image|ErrImagePull|ImagePullBackOff|"
                     r"failed to create containerd task|failed to create shim|error gathering device information|"
                     r"libnvidia-ml\.so|Failed to initialize NVML|back-off pulling image", re.IGNORECASE)
RESOURCE_STATEMENT = re.compile(r"^\s*(?P<res>[\w.-]+/[\w.-]+)\s+capacity=(?P<cap>\S+)\s+allocatable=(?P<alloc>\S+)\s*$")
KUBECTL_ERROR = re.compile(r"^\s*(?:Error from server|error: |Error: )")


@dataclass
class Hit:
    """One classified line: a finding in the making (``primary`` lines define it, ``context`` lines join)."""

    code: str
    category: str
    owner: str | None
    severity: str
    meaning: str
    family: str
    quantities: dict[str, Value] = field(default_factory=dict)
    entity: dict[str, str] = field(default_factory=dict)
    lines: list[int] = field(default_factory=list)
    timestamps: list[str] = field(default_factory=list)
    count: int = 1


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
    known = reason.code != "unknown"
    return Hit(reason.code if known else "unrecognised", reason.category, team_owner(reason),
               "error" if known else "unrecognised", reason.message if known else "text no reader understands",
               kind_family, q, entity)


def classify_line(line: str) -> Hit | str | None:
    """Classify one line: a :class:`Hit`, ``"noise"``, ``"context"``, ``"end"`` (a process end line)
    or None (not understood). Never raises."""
    if NOISE.match(line) or ">>> " in line:
        return "noise"
    if PROCESS_END.match(line):
        return "end"
    if CUDA_CONTEXT.search(line):
        named = re.search(r"`(cudaError\w+)'", line)
        if named and named.group(1) in BY_NAME:
            err = BY_NAME[named.group(1)]
            return Hit(err.code, "cuda", err.owner, "error", f"CUDA error {err.number} {err.name}: {err.meaning}",
                       "cuda", {"cuda_error": err.name, "cuda_error_number": err.number}, count=0)
        return "context"
    if APP_OUTPUT.match(line):
        return "context"
    hami = HAMI_OOM.search(line)
    if hami:
        limit = int(hami.group("limit"))
        return Hit("vgpu_memory_limit_exceeded", "gpu-sharing", "algorithm", "error",
                   "the workload allocated past its HAMi vGPU memory slice (HAMi-core enforced limit, not a "
                   "physical GPU exhaustion and not a Kubernetes OOMKilled)", "vgpu",
                   {"requested_bytes": int(hami.group("req")), "limit_bytes": limit,
                    "limit_mib": limit // (1024 * 1024) if limit % (1024 * 1024) == 0 else round(limit / 1048576, 1)},
                   {"gpu_index": hami.group("dev")})
    low = line.lower()
    if "cuda" in low or "cudaerror" in low:
        if re.search(r"CUDA out of memory|OutOfMemoryError", line):
            tried = re.search(r"Tried to allocate (\S+ \w+)", line)
            return Hit("cuda_memory_allocation", "cuda", "algorithm", "error",
                       "CUDA error 2 cudaErrorMemoryAllocation: the program asked for more GPU memory than is free",
                       "cuda", {"cuda_error": "cudaErrorMemoryAllocation", "cuda_error_number": 2,
                                "tried_to_allocate": tried.group(1) if tried else None})
        found_err = match_cuda_error(line)
        if found_err is not None:
            return Hit(found_err.code, "cuda", found_err.owner, "error",
                       f"CUDA error {found_err.number} {found_err.name}: {found_err.meaning}",
                       "cuda", {"cuda_error": found_err.name, "cuda_error_number": found_err.number})
    if TORCH_NO_DRIVER.search(line):
        return Hit("cuda_no_driver", "cuda", "platform", "error",
                   "the framework finds no usable NVIDIA driver in the container (torch.cuda.is_available() is False)",
                   "cuda")
    dcmi = match_dcmi(line)
    if dcmi is not None:
        return Hit(dcmi.code, dcmi.category, dcmi.owner, "error", f"DCMI {dcmi.value} {dcmi.name}: {dcmi.meaning}",
                   "ascend", {"dcmi_code": int(dcmi.value), "dcmi_name": dcmi.name})
    if HCCL.search(line) and ("fail" in low or "error" in low or "null" in low):
        number = re.search(r"error:\s*(\d+)|errNo\[0x([0-9a-fA-F]+)\]", line)
        q: dict[str, Value] = {}
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
        proc = re.search(r"HCCL\((?P<pid>\d+),(?P<name>[\w.-]+)\)", line)
        entity = {"pid": proc.group("pid"), "process": proc.group("name")} if proc else {}
        return Hit("hccl_init_failed" if "init" in low or "comm" in low else "hccl_error", "npu-communication",
                   "platform", "error",
                   "HCCL communicator creation failed: a rank could not join the collective (multi-NPU communication "
                   "setup: rank table, network/ports, device visibility)", "hccl", q, entity)
    cann = match_cann(line)
    if cann is not None:
        return Hit(cann.code, cann.category, cann.owner, "error", cann.meaning, "ascend", {"cann_code": cann.value})
    acl = match_acl(line)
    if acl is not None and re.search(r"result|ret|error|ACL|code|failed", line, re.IGNORECASE):
        return Hit(acl.code, acl.category, acl.owner, "error", f"ACL {acl.value} {acl.name}: {acl.meaning}", "ascend",
                   {"acl_error": int(acl.value), "acl_name": acl.name})
    statement = RESOURCE_STATEMENT.match(line)
    if statement:
        return Hit("node_resources", "node", None, "ok",
                   f"{statement.group('res')}: capacity {statement.group('cap')}, allocatable {statement.group('alloc')}",
                   "node", {f"capacity.{statement.group('res')}": statement.group("cap"),
                            f"allocatable.{statement.group('res')}": statement.group("alloc")})
    if RUNTIME.search(line):
        state = "ErrImagePull" if re.search(r"pull|ImagePull", line, re.IGNORECASE) else "StartError"
        reason = classify_startup(state, line)
        if reason is not None:
            hit = _reason_hit(reason, "startup")
            image = re.search(r"image \"([^\"]+)\"", line)
            if image:
                hit.quantities["image"] = image.group(1)
                if reason.code == "image_pull_failed":
                    operator = re.match(r"(?:nvcr\.io/nvidia/|registry\.k8s\.io/|k8s\.gcr\.io/|quay\.io/ascend/)", image.group(1))
                    not_found = re.search(r"NotFound|not found|manifest unknown", line)
                    if operator and not_found:
                        hit.owner = "platform"
                        hit.meaning = (f"the image {image.group(1)} does not exist (tag not published): the operator "
                                       "asks for a component version/OS pair that was never released")
                    elif not_found:
                        hit.meaning = f"the image {image.group(1)} does not exist (wrong name or tag)"
                    hit.quantities["cause"] = "not_found" if not_found else None
            return hit
    found = classify_message(line)
    if found:
        hits = [_reason_hit(r) for r in found]
        known = [h for h in hits if h.code != "unrecognised"]
        if known:
            first = known[0]
            first.quantities.update({f"also_{i}": h.code for i, h in enumerate(known[1:], 1)})
            return first
    return None


def _merge(hits: list[Hit]) -> list[Hit]:
    out: list[Hit] = []
    for hit in hits:
        prev = out[-1] if out else None
        if prev is not None and hit.code == "webhook_denied":
            out.append(hit)
            continue
        same = prev is not None and (
            (prev.code == hit.code and hit.family not in ("startup", "kube")) or (prev.family == hit.family and hit.family in ("hccl", "vgpu"))
            or (prev.family == "cuda" and hit.count == 0 and prev.code == hit.code)
        )
        if prev is not None and hit.count == 0 and prev.family == "cuda":
            same = True
        if prev is not None and prev.family == "vgpu" and hit.code == "cuda_memory_allocation":
            same = True
        if prev is not None and hit.family == "ascend" and prev.family == "ascend" and hit.code.startswith(
                ("cann_", "acl_")) and prev.code.startswith(("cann_", "acl_")):
            same = True
        if same and prev is not None:
            prev.lines += hit.lines
            prev.timestamps += hit.timestamps
            prev.count += hit.count
            for key, value in hit.quantities.items():
                if key not in prev.quantities:
                    prev.quantities[key] = value
                elif prev.quantities[key] != value and key in ("acl_error", "cann_code"):
                    prev.quantities[key + "_2"] = value
            for key, ent in hit.entity.items():
                prev.entity.setdefault(key, ent)
            continue
        out.append(hit)
    return out


def classify_lines(ctx: Ctx, piece: Piece, indexes: list[int], kind: str = "text") -> list[Finding]:
    """Findings for the lines ``indexes`` (0-based in ``piece``): hits, merged, with context attached;
    unrecognised runs reported as such."""
    lines = ctx.lines(piece)
    hits: list[Hit] = []
    pending_context: list[int] = []
    unknown: list[list[int]] = []
    ends: list[tuple[int, str]] = []
    consumed: set[int] = set()
    for n, i in enumerate(indexes):
        if "denied the request" in lines[i]:
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
    for i in indexes:
        if i in consumed:
            continue
        line = lines[i]
        result = classify_line(line)
        if result == "noise":
            continue
        if result == "context":
            if hits:
                hits[-1].lines.append(i)
            else:
                pending_context.append(i)
            continue
        if result == "end":
            ends.append((i, line.strip()))
            if hits:
                hits[-1].lines.append(i)
                hits[-1].quantities.setdefault("process_end", line.strip())
            continue
        if result is None or isinstance(result, str):
            if unknown and unknown[-1][-1] == i - 1:
                unknown[-1].append(i)
            else:
                unknown.append([i])
            continue
        result.lines = pending_context + [i]
        pending_context = []
        stamp = line_timestamp(line)
        if stamp:
            result.timestamps.append(stamp)
        vllm = VLLM.match(line)
        if vllm:
            result.entity.setdefault("process", vllm.group("proc"))
            result.entity.setdefault("pid", vllm.group("pid"))
        hits.append(result)
    merged = _merge(hits)
    if pending_context and merged:
        merged[-1].lines += pending_context
    elif pending_context:
        unknown.append(pending_context)
    out: list[Finding] = []
    if len(merged) >= 1 and any(h.family == "vgpu" for h in merged):
        pass
    for hit in merged:
        out.append(make(kind, hit.code, category=hit.category, owner=hit.owner, severity=hit.severity,
                        meaning=hit.meaning, lines=ctx.src(hit.lines, piece.start), entity=hit.entity,
                        timestamps=hit.timestamps, count=max(hit.count, 1), quantities=hit.quantities))
    for run in unknown:
        joined = " ".join(lines[i].strip() for i in run)
        if len(run) > 1:
            rescue = classify_message(joined)
            known = [r for r in rescue if r.code != "unknown"]
            if known:
                for reason in known:
                    hit = _reason_hit(reason)
                    out.append(make(kind, hit.code, category=hit.category, owner=hit.owner, severity=hit.severity,
                                    meaning=hit.meaning, lines=ctx.src(run, piece.start), entity=hit.entity,
                                    quantities=hit.quantities))
                continue
        out.append(make(kind, "unrecognised", category="unrecognised", owner=None, severity="unrecognised",
                        meaning="text no reader understands", lines=ctx.src(run, piece.start),
                        timestamps=[line_timestamp(lines[run[0]])], count=len(run)))
    if ends and not hits:
        idx = [i for i, _ in ends]
        out.append(make(kind, "process_crashed", category="workload", owner=None, severity="error",
                        meaning=f"a process ended abnormally ({ends[0][1]}); no cause is printed",
                        lines=ctx.src(idx, piece.start), quantities={"process_end": ends[0][1]}))
    out.sort(key=lambda f: f.lines[0].number if f.lines else 0)
    return out


def read_text(ctx: Ctx, piece: Piece) -> list[Finding]:
    """Read a ``text`` piece: every line classified; a wrapped message is also tried as one line."""
    lines = ctx.lines(piece)
    indexes = [i for i, line in enumerate(lines) if line.strip()]
    return classify_lines(ctx, piece, indexes)


_ = Reason
