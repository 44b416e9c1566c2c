"""The checks a training or fine-tune task type brings (:mod:`pytest_hetero.matrix.training`), judged once for
every engine that offers the job verbs (:mod:`pytest_hetero.backends.jobs`).

**communication**: a job of ``world_size`` ranks runs the gate's all-reduce benchmark
(:mod:`pytest_hetero.probes.jobs.allreduce`) through the framework the image ships. The gate reads each rank's
raw times and values, checks the sum every rank got (``Σ contributed``), and computes per message size the
collective's time (the slowest rank's median), ``algbw = bytes / time`` and nccl-tests' ``busbw = algbw ×
2(n−1)/n`` (n: devices in the collective; GB/s = 10⁹ B/s); the latency is the time of the smallest size. The
matrix's ``min_busbw_gbps`` is the acceptance rule. Evidence: ``training.communication``.

**checkpoint**: a one-rank job runs the gate's step loop (:mod:`pytest_hetero.probes.jobs.checkpoint`) with
the matrix's volume; once step ``kill_after`` is written the gate kills it (SIGKILL), starts it again over the
same volume, and checks that it resumed at the step it wrote, read back the digest it wrote (and, where the
gate can read the volume itself, the digest the gate computes of the file), and finished. Evidence:
``training.checkpoint`` with write/read times.

A rank that ended in failure is read in order of its end: the first to fail names the cause. A rank killed by
SIGKILL that neither the gate nor its memory limit killed is ``collective_peer_killed``; otherwise its text goes
through :func:`pytest_hetero.explain.read_collective.read_failure` (NCCL/HCCL field readers, gloo, rendezvous,
errno); owners come from the failure table.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from pytest_hetero.backends.jobs import Job, JobSpec, RankExit
from pytest_hetero.layers import usage
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerFailed
from pytest_hetero.matrix.training import Training
from pytest_hetero.probes.jobs import ALLREDUCE, CHECKPOINT, text

if TYPE_CHECKING:  # annotations only (postponed): no run-time dependency on typing_extensions on 3.10
    from typing import NotRequired

SETTLE_S = 10.0
"""Seconds the other ranks get to end once one rank ended in failure (a collective whose peer is gone hangs)."""


def check(ctx: LayerContext) -> None:
    """Run the check ``ctx.planned.keys["check"]`` names. Raises LayerFailed/LayerBroken (category from the failure
    table's training rows or the field readers), NotApplicable (via the engine's Unsupported) where the engine
    runs no jobs of several ranks."""
    which = ctx.planned.keys["check"]
    if which == "communication":
        communication(ctx)
    elif which == "checkpoint":
        checkpoint(ctx)
    else:
        raise LayerBroken(f"unknown training check {which!r}", "harness")


class RankSize(TypedDict):
    """One message size of a rank's result line: bytes, float32 elements, the timed iterations with the median,
    fastest and slowest of their seconds, and the first and last element after a fresh reduction."""

    bytes: int
    elements: int
    iterations: int
    median_s: float
    min_s: float
    max_s: float
    first: float
    last: float


class RankResult(TypedDict):
    """A rank's result line (:mod:`pytest_hetero.probes.jobs.allreduce`, the in-job probe; its ``event`` is
    ``result``): rank, world size, framework and backend, devices in the collective, its share of the expected
    sum, the seconds to initialise, and each message size."""

    rank: int
    world_size: int
    framework: str
    backend: str
    devices: int
    contributed: float
    init_s: float
    sizes: list[RankSize]


class SizeFacts(TypedDict):
    """One message size as the gate measured it over every rank (see :func:`measure`)."""

    bytes: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    spread_us: float
    iterations: int


class CommunicationFacts(TypedDict):
    """The ``training.communication`` record's facts (:func:`measure`)."""

    world_size: int
    devices: int
    framework: str
    backend: str
    init_s: float
    expected: float
    wrong: list[str]
    latency_us: float | None
    busbw_formula: str
    sizes: list[SizeFacts]
    judged_at_bytes: int


class JobEvent(TypedDict):
    """A line of the checkpoint job (:mod:`pytest_hetero.probes.jobs.checkpoint`): ``written`` (step, sha256,
    write_s, bytes), ``resumed`` (step, sha256, read_s, bytes) or ``done`` (step, sha256)."""

    event: str
    step: int
    sha256: str
    bytes: NotRequired[int]
    write_s: NotRequired[float]
    read_s: NotRequired[float]


# -- communication ---------------------------------------------------------------------------------------------
def communication(ctx: LayerContext) -> None:
    """The all-reduce check (module docstring)."""
    t = ctx.model.training
    spec = JobSpec(name="communication", world_size=t.world_size, argv=("{python}", f"/hetero-job/{ALLREDUCE}"),
                   files={ALLREDUCE: text(ALLREDUCE)}, port=t.port, env={
                       "HETERO_SIZES": ",".join(str(s) for s in t.sizes), "HETERO_ITERATIONS": str(t.iterations),
                       "HETERO_WARMUP": str(t.warmup), "HETERO_FRAMEWORK": t.framework, "HETERO_BACKEND": t.backend,
                       "HETERO_RENDEZVOUS_TIMEOUT_S": str(t.rendezvous_timeout_s), "PYTHONUNBUFFERED": "1"})
    exits = _run(ctx, spec)
    results = [_result(e.stdout, e.rank) for e in exits]
    facts = measure(results, t)
    ctx.record("training.communication", **facts)
    if facts["wrong"]:
        raise LayerFailed(f"all-reduce returned a wrong sum: {facts['wrong'][0]}", "collective_wrong_result")
    if t.min_busbw_gbps is not None:
        at = next((s for s in facts["sizes"] if s["bytes"] == t.judged_at), None)
        if at is None:
            raise LayerBroken(f"training.communication.at {t.judged_at} B is none of the measured sizes",
                              "configuration")
        ctx.record("training.rule", name="min_busbw_gbps", at_bytes=t.judged_at, value=t.min_busbw_gbps,
                   measured=at["busbw_gbps"], met=at["busbw_gbps"] >= t.min_busbw_gbps)
        if at["busbw_gbps"] < t.min_busbw_gbps:
            raise LayerFailed(f"bus bandwidth {at['busbw_gbps']:.4g} GB/s at {t.judged_at} B is below the minimum "
                              f"{t.min_busbw_gbps:g} GB/s ({facts['world_size']} ranks, {facts['backend']})",
                              "bus_bandwidth_below_minimum")


def measure(results: list[RankResult], training: Training) -> CommunicationFacts:
    """The gate's numbers from every rank's result line (:mod:`pytest_hetero.probes.jobs.allreduce`):
    ``{"world_size", "devices", "framework", "backend", "init_s" (max), "expected" (Σ contributed), "wrong"
    (messages), "latency_us", "sizes": [{"bytes", "time_us", "algbw_gbps", "busbw_gbps", "spread_us"}]}``.
    ``time_us`` is the slowest rank's median (µs); ``spread_us`` the slowest rank's max − min. Raises LayerFailed
    ``job_rank_failed`` when the ranks disagree on world size or sizes (their number too)."""
    world = {r["world_size"] for r in results}
    if len(world) != 1 or len(results) != next(iter(world)):
        raise LayerFailed(f"ranks report world sizes {sorted(world)} for {len(results)} ranks", "job_rank_failed")
    devices = int(results[0]["devices"])
    expected = float(sum(r["contributed"] for r in results))
    wrong = [f"rank {r['rank']} read {s['first']:g}/{s['last']:g} at {s['bytes']} B, expected {expected:g}"
             for r in results for s in r["sizes"] if s["first"] != expected or s["last"] != expected]
    if len({len(r["sizes"]) for r in results}) != 1:
        raise LayerFailed("ranks measured different message sizes", "job_rank_failed")
    sizes: list[SizeFacts] = []
    for i, first in enumerate(results[0]["sizes"]):
        nbytes = int(first["bytes"])
        if any(r["sizes"][i]["bytes"] != nbytes for r in results):
            raise LayerFailed("ranks measured different message sizes", "job_rank_failed")
        slowest = max((r["sizes"][i] for r in results), key=lambda s: float(s["median_s"]))
        seconds = float(slowest["median_s"])
        algbw = nbytes / seconds / 1e9 if seconds > 0 else 0.0
        busbw = algbw * 2 * (devices - 1) / devices if devices > 1 else 0.0
        sizes.append({"bytes": nbytes, "time_us": round(seconds * 1e6, 2), "algbw_gbps": round(algbw, 6),
                      "busbw_gbps": round(busbw, 6),
                      "spread_us": round((float(slowest["max_s"]) - float(slowest["min_s"])) * 1e6, 2),
                      "iterations": int(slowest["iterations"])})
    return {"world_size": len(results), "devices": devices, "framework": results[0]["framework"],
            "backend": results[0]["backend"], "init_s": round(max(r["init_s"] for r in results), 3),
            "expected": expected, "wrong": wrong[:10],
            "latency_us": min(sizes, key=lambda s: s["bytes"])["time_us"] if sizes else None,
            "busbw_formula": "algbw * 2(n-1)/n (nccl-tests all_reduce)", "sizes": sizes,
            "judged_at_bytes": training.judged_at}


def _result(stdout: str, rank: int | None = None) -> RankResult:
    """The rank's result line (its last ``{"event": "result", …}`` line of ``stdout``). Raises LayerFailed
    ``job_rank_failed`` when there is none, or when it is not a whole JSON object (cut or garbled: the program
    is the gate's, the interpreter and its output stream the image's)."""
    who = "a rank" if rank is None else f"rank {rank}"
    for line in reversed(stdout.splitlines()):
        if line.startswith('{"event": "result"'):
            try:
                data: RankResult = json.loads(line)
            except json.JSONDecodeError as exc:
                raise LayerFailed(f"{who}'s result line is not whole JSON ({len(line)} characters, {exc.msg} at "
                                  f"character {exc.pos}): cut or garbled on its way out of the image",
                                  "job_rank_failed") from None
            except RecursionError:
                raise LayerFailed(f"{who}'s result line nests deeper than the JSON reader goes ({len(line)} "
                                  "characters)", "job_rank_failed") from None
            wrong = _result_shape(data)
            if wrong:
                raise LayerFailed(f"{who}'s result line is not the gate program's shape: {wrong}", "job_rank_failed")
            return data
    raise LayerFailed(f"{who} ended 0 without its result line", "job_rank_failed")


_NUMBER = (int, float)
_RESULT_FIELDS: dict[str, tuple[type, ...]] = {"rank": (int,), "world_size": (int,), "framework": (str,),
                                               "backend": (str,), "devices": (int,), "contributed": _NUMBER,
                                               "init_s": _NUMBER}
_SIZE_FIELDS: dict[str, tuple[type, ...]] = {"bytes": (int,), "elements": (int,), "iterations": (int,),
                                             "median_s": _NUMBER, "min_s": _NUMBER, "max_s": _NUMBER,
                                             "first": _NUMBER, "last": _NUMBER}


_READ_FIELDS = frozenset({"first", "last"})
"""What the devices returned: a NaN or an infinity there is a wrong sum (``collective_wrong_result``), not a garbled
line."""


def _finite(value: float) -> bool:
    """True when ``value`` is a finite float (JSON integers beyond a float's range are not)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _result_shape(data: object) -> str:
    """"" when ``data`` is a :class:`RankResult` (every field of the right JSON type, booleans refused, every number
    finite but the elements read back, which are what the devices returned: JSON readers take ``NaN``, ``Infinity``
    and integers of any size; ``init_s`` and ``min_s`` ≥ 0,
    ``median_s`` > 0 (the bandwidth divides by it), ``min_s`` ≤ ``median_s`` ≤ ``max_s``, ``iterations`` ≥ 1), else
    the first field that is not, named by its path."""
    def bad(obj: object, fields: dict[str, tuple[type, ...]], where: str) -> str:
        if not isinstance(obj, dict):
            return f"{where or 'the line'} is not an object"
        for key, types in fields.items():
            value = obj.get(key)
            if isinstance(value, bool) or not isinstance(value, types):
                return f"{where}{key} is {type(value).__name__ if key in obj else 'missing'}"
            if isinstance(value, int) and not _finite(value):
                return f"{where}{key} is an integer beyond a float"
            if isinstance(value, float) and not _finite(value) and key not in _READ_FIELDS:
                return f"{where}{key} is {value}"
        return ""
    top = bad(data, _RESULT_FIELDS, "")
    if top or not isinstance(data, dict):
        return top
    if data["init_s"] < 0:
        return f"init_s is negative ({data['init_s']})"
    sizes = data.get("sizes")
    if not isinstance(sizes, list) or not sizes:
        return "sizes is not a non-empty list"
    return next((b for i, size in enumerate(sizes)
                 if (b := bad(size, _SIZE_FIELDS, f"sizes[{i}].") or _size_values(size, i))), "")


def _size_values(size: dict[str, Any], i: int) -> str:
    """"" when the well-typed ``sizes[i]`` measured something (``iterations`` ≥ 1, 0 ≤ ``min_s`` ≤ ``median_s`` ≤
    ``max_s``, ``median_s`` > 0 and not so small that ``bytes`` / ``median_s`` overflows), else what it says
    instead."""
    if size["iterations"] < 1:
        return f"sizes[{i}].iterations is {size['iterations']}, not at least 1"
    if not 0 <= size["min_s"] <= size["median_s"] <= size["max_s"] or size["median_s"] <= 0:
        return (f"sizes[{i}] times are not 0 <= min_s <= median_s <= max_s with median_s > 0 (min_s "
                f"{size['min_s']}, median_s {size['median_s']}, max_s {size['max_s']})")
    if not math.isfinite(size["bytes"] / size["median_s"]):  # the bandwidth: its evidence holds a number, never null
        return f"sizes[{i}] gives no finite bandwidth ({size['bytes']} B in median_s {size['median_s']})"
    return ""


# -- the job: run, read every rank ---------------------------------------------------------------------------
def _run(ctx: LayerContext, spec: JobSpec, kill_when: Any = None) -> list[RankExit]:
    """Start ``spec``, optionally kill rank 0 once ``kill_when(log)`` is true, wait, record every rank, remove
    the job; raise the first failing rank's category. Returns the exits when every rank ended 0 (or was the
    gate's kill)."""
    backend = ctx.backend
    job = backend.start_job(ctx, spec)
    ctx.record("training.job", name=spec.name, attempt=spec.attempt, world_size=spec.world_size, ranks=job.ranks,
               rendezvous=f"{job.rendezvous_host}:{spec.port}", where=job.where, volume=spec.volume)
    try:
        if kill_when is not None:
            _kill_when(ctx, job, kill_when)
        exits = backend.wait_job(job, ctx.timeout_s, SETTLE_S)
    finally:
        backend.remove_job(job)
    for e in exits:
        usage.record(ctx, e.usage, run=True)
        ctx.record("training.rank", job=spec.name, attempt=spec.attempt, rank=e.rank, name=e.name,
                   exit_code=e.exit_code, signal=e.signal, oom_killed=e.oom_killed, killed_by_gate=e.killed_by_gate,
                   stopped_after_peer=e.stopped_after_peer, started=e.started, ended=e.ended)
        if e.stdout or e.stderr:
            ctx.artifact(f"{spec.name}-a{spec.attempt}-rank{e.rank}.log",
                         f"--- stdout\n{e.stdout}\n--- stderr\n{e.stderr}")
    raise_first_failure(spec, exits)
    return exits


def _kill_when(ctx: LayerContext, job: Job, ready: Any) -> None:
    deadline = time.monotonic() + ctx.timeout_s
    while time.monotonic() < deadline:
        log = ctx.backend.job_logs(job, 0)
        if ready(log):
            ctx.backend.kill_rank(job, 0)
            return
        if '"event": "done"' in log or 0 not in ctx.backend.job_running(job):
            return
        time.sleep(0.2)


def raise_first_failure(spec: JobSpec, exits: list[RankExit]) -> None:
    """Raise LayerFailed for the first rank of ``exits`` that ended in failure (by end time): SIGKILL from outside
    ``collective_peer_killed``, its memory limit ``oom_killed``, else its text read by
    :func:`~pytest_hetero.explain.read_collective.read_failure` (``job_rank_failed`` when unread); with no failed
    rank, ``job_hung`` when a rank was still running at the timeout. Returns when every rank ended 0 or was the
    gate's kill."""
    failed = sorted((e for e in exits if e.failed), key=lambda e: (e.ended or float("inf"), e.rank))
    if not failed:
        hung = [e.rank for e in exits if e.exit_code is None and not e.killed_by_gate]
        if hung:
            raise LayerFailed(f"job {spec.name}: rank(s) {', '.join(map(str, hung))} still running at the layer "
                              "timeout, no rank failed; stopped by the gate", "job_hung")
        return
    first = failed[0]
    others = [f"rank {e.rank} " + ("stopped by the gate after its peer failed" if e.stopped_after_peer else
                                   f"exit {e.exit_code}") for e in exits if e is not first and not e.killed_by_gate]
    tail = f" ({'; '.join(others)})" if others else ""
    if first.signal == 9 and not first.oom_killed:
        raise LayerFailed(f"job {spec.name}: rank {first.rank} ({first.name}) was killed (SIGKILL, not by its "
                          f"memory limit, not by the gate){tail}", "collective_peer_killed")
    if first.oom_killed:
        raise LayerFailed(f"job {spec.name}: rank {first.rank} ({first.name}) was killed by its memory limit{tail}",
                          "oom_killed")
    from pytest_hetero.explain.read_collective import read_failure  # 0.16 s of regexes: only a failed job reads

    found = read_failure(first.stderr + "\n" + first.stdout)
    category, line = found if found else ("job_rank_failed", _last(first.stderr))
    raise LayerFailed(f"job {spec.name}: rank {first.rank} ({first.name}) exited {first.exit_code}: {line}{tail}",
                      category)


def _last(text: str) -> str:
    lines = [x for x in text.splitlines() if x.strip() and not x.startswith("    @")]
    return lines[-1][:300] if lines else "(no error text)"


# -- checkpoint --------------------------------------------------------------------------------------------------
def checkpoint(ctx: LayerContext) -> None:
    """The checkpoint/resume check (module docstring)."""
    t = ctx.model.training
    if t.kill_after >= t.steps:
        raise LayerBroken(f"training.checkpoint.kill_after ({t.kill_after}) must be below steps ({t.steps}): the job "
                          "would finish before the gate kills it", "configuration")
    scratch = None
    volume = t.volume
    if volume is None:
        scratch = Path(tempfile.mkdtemp(prefix="hetero-ckpt-"))
        scratch.chmod(0o777)
        volume = str(scratch)
    try:
        _checkpoint(ctx, t, volume, scratch is not None)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _events(log: str) -> list[JobEvent]:
    """The checkpoint job's event lines of ``log`` (a line that is not JSON is left out)."""
    out: list[JobEvent] = []
    for line in log.splitlines():
        if line.startswith('{"event"'):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def _checkpoint(ctx: LayerContext, t: Training, volume: str, scratch: bool) -> None:
    base = JobSpec(name="checkpoint", world_size=1, argv=("{python}", f"/hetero-job/{CHECKPOINT}"),
                   files={CHECKPOINT: text(CHECKPOINT)}, volume=volume, port=t.port,
                   env={"HETERO_STEPS": str(t.steps), "HETERO_CHECKPOINT_BYTES": str(t.checkpoint_bytes),
                        "HETERO_STEP_SLEEP_S": str(t.step_pause_s), "PYTHONUNBUFFERED": "1"})
    local = Path(volume)
    if local.is_absolute() and local.is_dir():
        for name in ("ckpt.bin", "ckpt.tmp"):  # a previous run's state would be resumed from
            (local / name).unlink(missing_ok=True)

    def written_enough(log: str) -> bool:
        return any(e["event"] == "written" and e["step"] >= t.kill_after for e in _events(log))

    # attempt 1 starts from nothing: a volume the gate cannot clear itself (a PVC) may hold an earlier run's state
    first = _run(ctx, JobSpec(**{**base.__dict__, "env": {**base.env, "HETERO_CHECKPOINT_FRESH": "1"}}),
                 kill_when=written_enough)[0]
    before = _events(first.stdout)
    written = [e for e in before if e["event"] == "written"]
    if not first.killed_by_gate or not written:
        raise LayerFailed(f"the job ended before the gate could kill it after step {t.kill_after}", "job_rank_failed")
    last = written[-1]
    on_volume = None
    if local.is_absolute() and (local / "ckpt.bin").is_file():  # the gate reads the volume itself where it can
        on_volume = hashlib.sha256((local / "ckpt.bin").read_bytes()).hexdigest()
    second = _run(ctx, JobSpec(**{**base.__dict__, "attempt": 2}))[0]
    after = _events(second.stdout)
    resumed = next((e for e in after if e["event"] == "resumed"), None)
    done = next((e for e in after if e["event"] == "done"), None)
    facts = {"volume": volume, "scratch": scratch, "steps": t.steps, "killed_after_step": last["step"],
             "written_digest": last["sha256"], "digest_on_volume": on_volume,
             "resumed_step": resumed["step"] if resumed else None,
             "read_digest": resumed["sha256"] if resumed else None,
             "final_step": done["step"] if done else None, "bytes": last["bytes"],
             "write_s": {"median": round(statistics.median(e["write_s"] for e in written), 6),
                         "max": round(max(e["write_s"] for e in written), 6), "count": len(written)},
             "read_s": round(resumed["read_s"], 6) if resumed else None}
    ctx.record("training.checkpoint", **facts)
    if resumed is None:
        raise LayerFailed(f"the restarted job found no checkpoint on {volume} (it had written step {last['step']})",
                          "checkpoint_not_resumed")
    if resumed["step"] != last["step"]:
        raise LayerFailed(f"the restarted job resumed at step {resumed['step']}, the last written was {last['step']}",
                          "checkpoint_not_resumed")
    if resumed["sha256"] != last["sha256"] or (on_volume is not None and on_volume != last["sha256"]):
        raise LayerFailed(f"checkpoint digest read back {resumed['sha256'][:16]}… (volume: "
                          f"{(on_volume or '-')[:16]}…) differs from the written {last['sha256'][:16]}…",
                          "checkpoint_corrupted")
    if done is None or done["step"] != t.steps:
        raise LayerFailed(f"the restarted job did not finish its {t.steps} steps", "job_rank_failed")
