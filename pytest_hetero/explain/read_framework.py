"""Framework and collective-communication error lines: PyTorch / torch_npu OOM, NCCL, torch_npu ``ERRxxyyy``.

Line recognisers for :mod:`pytest_hetero.explain.read_text` (each ``(line, line.lower()) -> Hit | None``),
anchored on the tools' own message formats, never on loose words:

* PyTorch allocator OOM, every wording since 1.x: ``CUDA out of memory. Tried to allocate X (GPU N; T total
  capacity; A already allocated; F free; [allowed;] R reserved in total by PyTorch)`` (1.x, also with
  ``cached``), the 2.1+ sentences ``… GPU N has a total capacity of T of which F is free. [Process P has M
  memory in use.] Including non-PyTorch memory, this process has M memory in use. Of the allocated memory A
  is allocated by PyTorch, and R is reserved by PyTorch but unallocated.`` (2.1 spells ``capacty``), and
  torch_npu's ``NPU out of memory. Tried to allocate X (NPU N; …; C current active; …)``. Every size is kept
  as printed and in MiB.
* NCCL via ``ProcessGroupNCCL`` (c10d): the watchdog timeout ``WorkNCCL(SeqNum=…, OpType=…, NumelIn=…,
  NumelOut=…, Timeout(ms)=…) ran for N milliseconds``, the ``detected by watchdog at work: N, last enqueued
  NCCL work: E, last completed NCCL work: C`` line, the heartbeat monitor's ``watchdog got stuck``, and
  ``NCCL error in: <file>:<line>, <ncclResult text>, NCCL version X`` with the ``Last error:`` detail
  (``socketStartConnect: Connect to <ip><port> failed : No route to host``); ``NCCL WARN`` lines.
* torch_npu's ``[ERROR] <time> (PID:p, Device:d, RankID:r) ERR<ss><ccc> <SUBMODULE> <message>``
  (``torch_npu/csrc/core/npu/NPUException.h``: sub-modules PTA 00, OPS 01, DIST 02, GRAPH 03, PROF 04; error
  types 001 … 012, 100 ACL, 200 HCCL, 300 GE) and ``HCCL function error: <call>, error code is N``.

A timeout or remote error on a collective cannot name its culprit from one rank's log: their failure category is
``collective_peer_unknown``, an undetermined row of the failure table (candidates and what to read next).
"""

from __future__ import annotations

import re

from pytest_hetero.explain.model import Value
from pytest_hetero.probes.ascend_errors import HCCL_RESULTS

_SIZE = r"(\d+(?:\.\d+)?) ?(bytes|B|KiB|MiB|GiB|TiB)"
_UNITS = {"bytes": 1 / 1048576, "B": 1 / 1048576, "KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0, "TiB": 1048576.0}


def mib(number: str, unit: str) -> float:
    """``number unit`` (bytes … TiB) in MiB, rounded to 2 decimals."""
    return round(float(number) * _UNITS[unit], 2)


_OOM = re.compile(r"(?P<dev>CUDA|NPU|XPU|MPS) out of memory\. Tried to allocate " + _SIZE)
_OLD_PARTS = (
    ("total_capacity", re.compile(_SIZE + r" total capacity")),
    ("allocated_by_pytorch", re.compile(_SIZE + r" already allocated")),
    ("current_active", re.compile(_SIZE + r" current active")),
    ("free", re.compile(_SIZE + r" free")),
    ("allowed", re.compile(_SIZE + r" allowed")),
    ("reserved_by_pytorch", re.compile(_SIZE + r" (?:reserved in total by PyTorch|cached)")),
)
_NEW_PARTS = (
    ("total_capacity", re.compile(r"has a total capac(?:i)?ty of " + _SIZE)),
    ("free", re.compile(r"of which " + _SIZE + r" is free")),
    ("process_in_use", re.compile(r"this process has " + _SIZE + r" memory in use")),
    ("allocated_by_pytorch", re.compile(_SIZE + r" is allocated by PyTorch")),
    ("reserved_unallocated", re.compile(_SIZE + r" is reserved by PyTorch but unallocated")),
)
_DEVICE = re.compile(r"\((?P<kind>GPU|NPU) (?P<index>\d+);|\b(?P<kind2>GPU|NPU) (?P<index2>\d+) has a total capac")
_OTHER_PROCESS = re.compile(r"Process (?P<pid>\d+) has " + _SIZE + r" memory in use")


def oom(line: str) -> tuple[str, dict[str, Value], dict[str, str]] | None:
    """``(device kind, quantities, entity)`` of a PyTorch/torch_npu allocator OOM line, or None.

    Quantities: ``tried_to_allocate`` (as printed) and ``tried_to_allocate_mib``, then for each part printed
    ``total_capacity``, ``free``, ``allocated_by_pytorch``, ``reserved_by_pytorch``, ``reserved_unallocated``,
    ``process_in_use``, ``current_active``, ``allowed`` (as printed, and ``<name>_mib``); ``other_process.<pid>``
    for the 2.1+ ``Process P has M memory in use``. Entity: ``gpu_index`` or ``npu_id``."""
    m = _OOM.search(line)
    if not m:
        return None
    q: dict[str, Value] = {"tried_to_allocate": f"{m.group(2)} {m.group(3)}",
                           "tried_to_allocate_mib": mib(m.group(2), m.group(3))}
    tail = line[m.end():]
    parts = _NEW_PARTS if "has a total capac" in tail else _OLD_PARTS
    for name, pattern in parts:
        p = pattern.search(tail)
        if p:
            q[name] = f"{p.group(1)} {p.group(2)}"
            q[f"{name}_mib"] = mib(p.group(1), p.group(2))
    for other in _OTHER_PROCESS.finditer(tail):
        q[f"other_process.{other.group('pid')}"] = f"{other.group(2)} {other.group(3)}"
    d = _DEVICE.search(tail)
    entity: dict[str, str] = {}
    if d:
        kind, index = d.group("kind") or d.group("kind2"), d.group("index") or d.group("index2")
        entity = {"gpu_index" if kind == "GPU" else "npu_id": index}
    return m.group("dev"), q, entity


NCCL_WATCHDOG = re.compile(
    r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)"
    r"(?:, NumelIn=(?P<in>-?\d+), NumelOut=(?P<out>-?\d+))?, Timeout\(ms\)=(?P<timeout>\d+)\) ran for (?P<ran>\d+) "
    r"milliseconds before timing out")
NCCL_AT_WORK = re.compile(r"detected by watchdog at work: (?P<work>\d+), last enqueued NCCL work: (?P<enq>-?\d+), "
                          r"last completed NCCL work: (?P<done>-?\d+)")
NCCL_STUCK = re.compile(r"(?:ProcessGroupNCCL's )?watchdog got stuck for (?P<s>\d+) seconds")
NCCL_ERROR = re.compile(r"NCCL error in: (?P<where>\S+?):(?P<at>\d+), (?P<what>[^,]+?)(?: \(run with NCCL_DEBUG=\w+ "
                        r"for details\))?(?:, NCCL version (?P<ver>[\w.+-]+))?\s*$|(?P<name>nccl(?:Unhandled\w+|"
                        r"SystemError|InternalError|InvalidArgument|InvalidUsage|RemoteError))\b")
NCCL_NET = re.compile(r"(?:Connect to|connect to) (?P<peer>[\d.:a-fA-F]+)<(?P<port>\d+)> failed\s*:\s*(?P<why>[^\[]+)"
                      r"|Got completion (?:from peer (?P<ibpeer>\S+) )?with (?:error|status=)\s*(?P<ibst>\d+)"
                      r"(?:,? opcode[= ](?P<opcode>\d+))?(?:,? len[= ](?P<len>\d+))?(?:,? vendor err (?P<vendor>\d+))?"
                      r"(?: \((?P<dir>\w+)\))?(?: localGid (?P<lgid>\S+))?(?: remoteGids?\s*(?P<rgid>\S+))?")
"""A socket connect failure, or an IB/RoCE work completion with an error status: NCCL 2.x ``with error 4, opcode
32564, len 32564, vendor err 81 (Send)`` and 2.2x ``with status=12 opcode=1 len=0 vendor err 129 (Send) localGid …
remoteGids …``."""
NCCL_HEAD = re.compile(r"^\s*(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] ")
"""The head NCCL puts on its debug lines (``NCCL_DEBUG``): ``<host>:<pid>:<tid> [<cudaDev>] ``."""
NCCL_VERSION_LINE = re.compile(r"^\s*(?:[\w.-]+:\d+:\d+ \[\d+\] )?NCCL version (?P<ver>[\w.+-]+)\s*$")
"""The banner rank 0 prints at init (``NCCL version 2.5.6+cuda10.2``): informational, part of the trace."""
_NCCL_RANKS = re.compile(r"\bn[Rr]anks (?P<n>\d+)")
_NCCL_NODES = re.compile(r"\bnNodes (?P<n>\d+)")
_NCCL_VIA = re.compile(r"\bvia (?P<t>NET/[\w-]+|P2P|SHM|CollNet|NVLS)\b|NET/(?P<net>IB|Socket) : Using")


def nccl_trace_facts(lines: list[str]) -> dict[str, Value]:
    """Facts of NCCL ``NCCL INFO`` debug lines (NCCL 2.x, ``NCCL_DEBUG=INFO``) that carry no error: ``hosts``
    and ``processes`` (distinct ``host`` / ``host:pid`` of the ``<host>:<pid>:<tid> [<dev>]`` head), the
    ``nccl_version`` banner, ``ranks`` / ``nodes`` of a ``comm … nRanks N [nNodes M]`` line (the largest seen),
    ``init_complete`` (``Init COMPLETE`` lines) and the ``transports`` the rings/trees were built over
    (``via NET/IB/0`` → ``NET/IB``, ``P2P``, ``SHM``…), comma-joined in order of appearance. Keys whose
    source line is absent are left out. Never raises."""
    hosts: dict[str, None] = {}
    procs: dict[str, None] = {}
    transports: dict[str, None] = {}
    facts: dict[str, Value] = {}
    for line in lines:
        head = NCCL_HEAD.match(line)
        if head:
            hosts[head.group("host")] = None
            procs[f"{head.group('host')}:{head.group('pid')}"] = None
        version = NCCL_VERSION_LINE.match(line)
        if version:
            facts["nccl_version"] = version.group("ver")
        for via in _NCCL_VIA.finditer(line):
            transports[(via.group("t") or f"NET/{via.group('net')}").split("/0")[0]] = None
    text = "\n".join(lines)
    ranks = max((int(m.group("n")) for m in _NCCL_RANKS.finditer(text)), default=0)
    nodes = max((int(m.group("n")) for m in _NCCL_NODES.finditer(text)), default=0)
    complete = text.count("Init COMPLETE")
    if hosts:
        facts.update(hosts=len(hosts), processes=len(procs))
    if ranks:
        facts["ranks"] = ranks
    if nodes:
        facts["nodes"] = nodes
    if complete:
        facts["init_complete"] = complete
    if transports:
        facts["transports"] = ", ".join(transports)
    return facts


NCCL_WARN = re.compile(r"NCCL WARN (?P<msg>.*?)\s*$")
"""Any other ``NCCL WARN`` line (the message as printed)."""
RANK = re.compile(r"\[Rank (?P<rank>\d+)\]|\bRank (?P<rank2>\d+)\]")

PEER = "collective_peer_unknown"
"""The undetermined failure category of a collective that one rank's log cannot attribute."""

_NCCL_RESULTS: dict[str, tuple[str, str, str]] = {
    "unhandled cuda error": ("nccl_cuda_error", PEER,
                             "a CUDA call inside NCCL failed (the CUDA error names the cause)"),
    "unhandled system error": ("nccl_system_error", "nccl_network_error",
                               "a system call or the network failed inside NCCL (sockets, IB verbs, shared memory)"),
    "internal error": ("nccl_internal_error", PEER, "NCCL internal error (often a peer or network fault)"),
    "invalid argument": ("nccl_invalid_argument", "nccl_usage_error", "NCCL was called with an invalid argument"),
    "invalid usage": ("nccl_invalid_usage", "nccl_usage_error",
                      "NCCL was used wrongly by the program (mismatched calls)"),
    "remote process exited or there was a network error": (
        "nccl_remote_error", PEER, "a remote rank exited or the network between the ranks failed"),
}
_NCCL_NAMES = {"ncclUnhandledCudaError": "unhandled cuda error", "ncclSystemError": "unhandled system error",
               "ncclInternalError": "internal error", "ncclInvalidArgument": "invalid argument",
               "ncclInvalidUsage": "invalid usage", "ncclRemoteError": "remote process exited or there was a network "
                                                                        "error"}
_NETWORK = re.compile(r"No route to host|Connection refused|Connection timed out|Network is unreachable|"
                      r"Connection reset by peer", re.IGNORECASE)
_SHM = re.compile(r"/dev/shm|shared memory|shm_open|NCCL_SHM", re.IGNORECASE)



def nccl(line: str) -> tuple[str, str, str, dict[str, Value], dict[str, str]] | None:
    """``(code, failure, meaning, quantities, entity)`` for one NCCL/ProcessGroupNCCL line, or None.
    ``failure`` is a failure-table category; :data:`PEER` (undetermined) where one rank's log cannot decide."""
    rank = RANK.search(line)
    rank_id = (rank.group("rank") or rank.group("rank2")) if rank else "?"  # "?" when the line names no rank
    entity = {"rank": rank_id} if rank else {}
    head = NCCL_HEAD.match(line)
    if head:
        entity.update(node=head.group("host"), pid=head.group("pid"), cuda_device=head.group("dev"))
    w = NCCL_WATCHDOG.search(line)
    if w:
        q: dict[str, Value] = {"seq_num": int(w.group("seq")), "op_type": w.group("op"),
                               "numel_in": int(w.group("in")) if w.group("in") else None,
                               "numel_out": int(w.group("out")) if w.group("out") else None,
                               "timeout_ms": int(w.group("timeout")), "ranks": rank_id,
                               f"ran_for_ms.rank{rank_id}": int(w.group("ran")),
                               "next": "read every rank's log: the rank that never reached SeqNum "
                                       f"{w.group('seq')} (or that failed first) is the culprit"}
        return ("nccl_watchdog_timeout", PEER,
                f"collective {w.group('op')} (SeqNum {w.group('seq')}) timed out after {w.group('timeout')} ms: "
                "a rank waited for peers that never joined", q, entity)
    a = NCCL_AT_WORK.search(line)
    if a:
        return ("nccl_watchdog_timeout", PEER, "", {
            "work": int(a.group("work")), "last_enqueued_work": int(a.group("enq")),
            "last_completed_work": int(a.group("done"))}, entity)
    s = NCCL_STUCK.search(line)
    if s:
        return ("nccl_watchdog_stuck", PEER,
                f"the NCCL watchdog made no progress for {s.group('s')} s (a collective or CUDA call hangs)",
                {"stuck_s": int(s.group("s"))},
                entity)
    e = NCCL_ERROR.search(line)
    if e:
        what = (e.group("what") or _NCCL_NAMES.get(e.group("name") or "", "")).strip().lower()
        code, failure, meaning = _NCCL_RESULTS.get(what, ("nccl_error", PEER, f"NCCL error: {what}"))
        q = {"nccl_result": what, "nccl_version": e.group("ver"), "source_file": e.group("where"),
             "source_line": int(e.group("at")) if e.group("at") else None}
        return code, failure, meaning, q, entity
    n = NCCL_NET.search(line)
    if n and ("NCCL" in line or "socket" in line.lower() or "NET/" in line):
        if n.group("ibst"):
            q = {"ib_status": int(n.group("ibst")), "peer": n.group("ibpeer"),
                 "opcode": int(n.group("opcode")) if n.group("opcode") else None,
                 "vendor_err": int(n.group("vendor")) if n.group("vendor") else None, "direction": n.group("dir"),
                 "local_gid": n.group("lgid"), "remote_gid": n.group("rgid")}
            return ("nccl_ib_completion_error", "nccl_network_error",
                    f"an InfiniBand/RoCE work completion failed (status {n.group('ibst')}"
                    + (f", vendor err {n.group('vendor')}" if n.group("vendor") else "")
                    + "): the fabric or a peer's HCA dropped the connection", q, entity)
        return ("nccl_system_error", "nccl_network_error",
                f"NCCL could not connect to peer {n.group('peer')}: {n.group('why').strip()}",
                {"peer": n.group("peer"), "peer_port": int(n.group("port")), "network_error": n.group("why").strip()},
                entity)
    warn = NCCL_WARN.search(line)
    if warn:
        msg = warn.group("msg")
        return ("nccl_warning", "nccl_network_error" if _NETWORK.search(msg) else PEER,
                f"NCCL warning: {msg}", {"message": msg}, entity)
    return None


def nccl_detail(q: dict[str, Value], line: str) -> tuple[str | None, str | None]:
    """``(failure, meaning)`` refinement of an ``nccl_system_error`` by its ``Last error`` detail: a network
    error (no route, refused, timed out) is ``nccl_network_error``; a shared-memory failure is the
    container's ``/dev/shm`` (``nccl_shm_exhausted``); else None."""
    net = _NETWORK.search(line)
    if net:
        return "nccl_network_error", f"the ranks cannot reach each other over the network ({net.group(0)})"
    if _SHM.search(line):
        return ("nccl_shm_exhausted",
                "NCCL could not use shared memory: the container's /dev/shm is too small or missing")
    return None, None


TORCH_NPU_ERR = re.compile(r"\[ERROR\] (?P<ts>\S+) \(PID:(?P<pid>\d+), Device:(?P<dev>-?\d+), "
                           r"RankID:(?P<rank>-?\d+)\) ERR(?P<sub>\d\d)(?P<code>\d{3}) (?P<module>[A-Z]+) "
                           r"(?P<msg>.*?)\.?\s*$")
SUBMODULES = {"00": "PTA", "01": "OPS", "02": "DIST", "03": "GRAPH", "04": "PROF"}
ERROR_TYPES = {1: "invalid parameter", 2: "invalid type", 3: "invalid value", 4: "invalid pointer",
               5: "internal error", 6: "memory error", 7: "feature not supported", 8: "resource not found",
               9: "resource unavailable", 10: "system call failed", 11: "timeout error", 12: "permission error",
               100: "call acl api failed", 200: "call hccl api failed", 300: "call ge api failed"}
HCCL_FUNCTION = re.compile(r"(?:HCCL|OPS) function error: (?P<call>\w+)(?:\(.*?\))?, error code is (?P<code>\d+)")
"""torch_npu's report of a failed HCCL call: ``HCCL function error: hcclCommInitRootInfoConfig(…), error code is 15``
(communicator set-up) or ``OPS function error: HcclAllreduce, error code is 6`` (a collective on an existing one)."""


def torch_npu_err(line: str) -> tuple[dict[str, Value], dict[str, str]] | None:
    """``(quantities, entity)`` of a torch_npu ``[ERROR] … ERRssccc`` line (see the module docstring), or None."""
    m = TORCH_NPU_ERR.search(line)
    if not m:
        return None
    code = int(m.group("code"))
    q: dict[str, Value] = {"torch_npu_code": f"ERR{m.group('sub')}{m.group('code')}",
                           "submodule": SUBMODULES.get(m.group("sub"), m.group("module")),
                           "error_type": ERROR_TYPES.get(code, m.group("msg")), "message": m.group("msg")}
    entity = {"pid": m.group("pid"), "npu_id": m.group("dev")}
    if m.group("rank") != "-1":
        entity["rank"] = m.group("rank")
    else:
        q["rank_id"] = -1
    return q, entity


def hccl_function(line: str) -> dict[str, Value] | None:
    """``HCCL function error: hcclCommInitRootInfoConfig(…), error code is 15`` -> call, code, HcclResult name."""
    m = HCCL_FUNCTION.search(line)
    if not m:
        return None
    value = int(m.group("code"))
    return {"hccl_function": m.group("call"), "hccl_error": value, "hccl_error_name": HCCL_RESULTS.get(value)}
