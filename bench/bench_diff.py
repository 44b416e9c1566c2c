"""Benchmark: the whole signed ``hetero diff`` of two N-item bundles (default 50,000) against loading their JSON.

Both bundles are written the way a run writes its own: evidence.json (the recorder's writer), three
captured artifacts per model item (stdout, stderr, outputs), the matrix copy, every rendering, the
manifest and the Ed25519-signed in-toto statement. The second run has 2 % of items regressed, 1 %
fixed, 1 % newly untested, shifted metrics and a changed driver version.

Measured, interleaved A/B (``--repeat`` rounds, each round runs both commands in turn), each a fresh
process timed from spawn to exit:

* **A, the plain way**: ``python3 -c 'gc.disable(); json.load(a); json.load(b)'`` on the two evidence.json
  files, with the cyclic GC disabled as the diff command does while it loads (the same work; A'', the same
  load with the GC on, is printed for comparison);
* **B, the gate**: ``hetero diff OLD NEW --key GATE.pub --json`` (the real CLI: verifies each run's
  signature, statement, manifest digest and evidence.json digest, reads nothing else, diffs, prints).

Also measured the same way: ``hetero verify`` of one bundle (every file hashed, the signature checked)
against the same hashing done the plain way: a fresh ``python3`` that walks the bundle and SHA-256s every
file with ``hashlib`` (what ``sha256sum -c`` of a manifest does). Issue #20 compared verify with
``json.dump`` of the evidence, which is not work verify does.

Each command's wall time (spawn to exit), CPU time (user + system, from ``wait4``) and peak RSS (the child's own
VmHWM) are recorded; prints medians with the spread (min–max). The targets are judged on CPU time,
which other processes on a shared machine disturb far less than wall time (the wall-time and memory
ratios are printed too): signed diff ≤ 1.5× loading both JSON files with the GC off, verify ≤ 1.5× hashing
every file the plain way. Exit 1 when a target is missed.
Usage: ``python bench/bench_diff.py [--items N] [--repeat R] [--keep DIR]``.

Measured earlier, against the former baselines (GC-on load; json.dump for verify), on the shared 2-core
development machine (50,000 items per bundle, 30,010 files, about 190 MB; CPU-time medians, min–max;
"before" is main at 14d11db with that benchmark); docs/benchmarks.md has the figures against these ones:

==============================  ======================  =====================
                                before                  after
==============================  ======================  =====================
hetero diff, signed             6.70 s (6.02–7.51)      1.66 s (1.53–1.70)
  vs loading both JSON           4.36x (1.54 s)          1.18x (1.41 s; target 1.5x)
hetero verify                   2.43 s (2.31–2.56)      1.01 s (0.98–1.03)
  vs json.dump                   1.33x (1.83 s)          0.58x (1.76 s; target 1x)
==============================  ======================  =====================

Wall-time ratios of the "after" run: diff 1.14x, verify 0.65x. Against loading with the cyclic GC
disabled (what diff itself does) the diff is 1.87x: the rest is the manifest, hashing and the diff.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pytest_hetero.bundle.finish import finish_bundle
from pytest_hetero.bundle.signing import generate_keypair
from pytest_hetero.bundle.signoff import matrix_owners, run_signoff
from pytest_hetero.evidence.inputs import RunInputs
from pytest_hetero.evidence.recorder import write_evidence
from pytest_hetero.evidence.untested import DOES_NOT_PROVE, summarise
from pytest_hetero.reporting.writers import write_renderings

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import EvidenceDocument, ItemDict, UntestedSection

REPO = Path(__file__).resolve().parents[1]
MATRIX = REPO / "matrices" / "example-cpu.matrix.yaml"
PREFIX = "matrices/example-cpu.matrix.yaml"
LAYERS = ("discovery", "scheduling", "startup", "model", "business")
OWNERS = {"discovery": "infrastructure", "scheduling": "platform", "startup": "platform", "model": "algorithm",
          "business": "business"}
TARGETS = {"diff": 1.5, "verify": 1.5}


def _status(n: int, variant: int) -> str:
    if variant and n % 50 == 1:
        return "failed"  # regressions
    if n % 100 == 2:
        return "failed" if not variant else "passed"  # fixed in the new run
    return "passed"


def _item(n: int, variant: int) -> dict[str, Any]:
    layer = LAYERS[n % 5]
    res, img, model = f"r{n // 500}", f"i{n // 50 % 10}", f"m{n // 5 % 10}@d{n // 5}"
    keys = {"resource": res, "image": img, "model": model.split("@")[0], "dataset": model.split("@")[1]}
    status = _status(n, variant)
    item: dict[str, Any] = {
        "nodeid": f"{PREFIX}::{res}::{img}::{model}::{layer}", "matrix": PREFIX, "layer": layer,
        "owner": OWNERS[layer], "keys": keys, "status": status, "duration_s": 0.5,
        "started_at": "2026-11-29T00:00:00.000000Z", "finished_at": "2026-11-29T00:00:01.000000Z",
        "failure": None if status == "passed" else {"layer": layer, "category": "threshold",
                                                    "message": "accuracy 0.91 < 0.95", "owner": OWNERS[layer]},
        "blocked_by": None, "reason": None, "artifacts": [],
        "records": [{"kind": f"{layer}.observed", "at": "2026-11-29T00:00:00.500000Z",
                     "data": {"python": "3.11.7", "packages_sha256": "ab" * 32, "note": "x" * (40 + n % 120)}}]}
    if layer == "model":
        base = f"artifacts/{res}/{img}/{model}/model"
        item["artifacts"] = [{"name": name, "path": f"{base}/{name}", "size": 0, "sha256": "", "media_type": media}
                             for name, media in (("stdout.txt", "text/plain"), ("stderr.txt", "text/plain"),
                                                 ("outputs.json", "application/json"))]
    if layer == "business":
        shift = 1.2 if variant and n % 7 == 0 else 1.0
        item["records"].append({"kind": "business.rules", "at": "2026-11-29T00:00:01Z", "data": {"results": [
            {"name": "accuracy-floor", "kind": "metric", "expected": ">= 0.95", "observed": 0.97, "verdict": "pass",
             "detail": ""},
            {"name": "latency-p95", "kind": "latency", "expected": "<= 20 ms", "observed": 4.0 * shift,
             "verdict": "pass", "detail": ""}], "run": None}})
    return item


def evidence_doc(items: int, variant: int) -> EvidenceDocument:
    """An evidence document of ``items`` items shaped as the recorder writes it (variant 1: the changed run)."""
    reported, untested = [], []
    for n in range(items):
        item = _item(n, variant)
        if variant and n % 100 == 3:
            untested.append({**{k: item[k] for k in ("nodeid", "layer", "keys")}, "status": "deselected",
                             "reason": "deselected (profile quick)", "blocked_by": None})
        else:
            reported.append(item)
    scope = cast("UntestedSection", {"items": untested, "never_covered": {}, "not_proven": [],
                                     "does_not_prove": dict(DOES_NOT_PROVE)})
    return {"schema": "pytest-hetero/evidence/v1",
            "run": {"id": f"run-{variant}", "tool": "pytest-hetero", "tool_version": "0.1.0", "host": "bench",
                    "started_at": "2026-11-29T00:00:00.000000Z", "finished_at": "2026-11-29T01:00:00.000000Z",
                    "exit_status": 1, "interrupted": False, "git_commit": "abc", "profile": None, "python": None,
                    "pytest": None, "rootdir": None, "invocation": None, "backend_override": None,
                    "finished_at_recovered": False, "stopped": ""},
            "matrices": [{"name": "example-cpu", "path": str(MATRIX), "prefix": PREFIX,
                          "sha256": hashlib.sha256(MATRIX.read_bytes()).hexdigest()}],
            "target": [{"backend": "kubernetes", "identity": "prod", "nodes": [f"n{i}" for i in range(40 + variant)],
                        "versions": {"driver": f"55{variant}.1"}, "images": {}}],
            "items": cast("list[ItemDict]", reported), "untested": scope,
            "summary": summarise(cast("list[ItemDict]", reported), scope), "errors": [], "warnings": []}


def write_bundle(folder: Path, evidence: EvidenceDocument, key: Path) -> None:
    """Write ``evidence`` as a complete signed bundle in ``folder``, as a run finishes its own."""
    folder.mkdir(parents=True)
    for item in evidence["items"]:
        for art in item["artifacts"]:
            path = folder / art["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            body = f"{item['nodeid']} {art['name']}\n".encode() * 20
            path.write_bytes(body)
            art["size"], art["sha256"] = len(body), hashlib.sha256(body).hexdigest()
    (folder / "journal.jsonl").write_text("".join(json.dumps({"type": "item", "evidence": i}) + "\n"
                                                  for i in evidence["items"]), encoding="utf-8")
    write_evidence(folder, evidence)
    inputs = RunInputs()
    kept = inputs.keep(evidence, folder)
    owners = matrix_owners(evidence, inputs)
    write_renderings(evidence, folder, run_signoff(owners, key))
    finish_bundle(evidence, folder, key, owners, kept)


PEAK = ("import atexit, sys\n"
        "def _peak():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'):\n"
        "            sys.stderr.write('PEAK ' + line.split()[1] + '\\n')\n"
        "atexit.register(_peak)\n")
"""Prefix of a child's program that prints its own peak RSS (VmHWM of the image after exec, KiB) to stderr:
``wait4``'s ``ru_maxrss`` would count the pages the child shared with this large process before exec."""


def python_program(argv: list[str]) -> list[str]:
    """``[py, "-c", PEAK + code, args…]`` for ``[py, "-c", code, args…]`` or ``[py, "-m", module, args…]``
    (the module run with :mod:`runpy` as ``python -m`` runs it)."""
    py, flag, target, *rest = argv
    if flag == "-m":
        code = (f"import runpy\nsys.argv = [{target!r}, *sys.argv[1:]]\n"
                f"runpy.run_module({target!r}, run_name='__main__')\n")
        return [py, "-c", PEAK + code, *rest]
    if flag == "-c":
        return [py, "-c", PEAK + target, *rest]
    raise ValueError(f"not a python -c/-m command: {argv[:3]}")


def timed(argv: list[str]) -> tuple[float, float, str, int]:
    """(wall seconds from spawn to exit, CPU seconds user+system of the process, its stdout, its peak RSS in
    KiB, from :data:`PEAK`) of the Python command ``argv`` (``-c`` or ``-m``); raises on a failing exit. The
    CPU time is what the command costs; the wall time on a shared machine also holds the time it waited for a
    core."""
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(python_program(argv), stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        errors = err.read().decode(errors="replace")
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"{argv[:4]} exited {proc.returncode}: {errors[-500:]!r}")
        peak = [line for line in errors.splitlines() if line.startswith("PEAK ")]
        return seconds, usage.ru_utime + usage.ru_stime, out.read().decode(), int(peak[-1].split()[1])


Runs = dict[str, tuple[list[tuple[float, float]], list[tuple[float, float]]]]
Peaks = dict[str, tuple[list[int], list[int]]]


def interleaved(pairs: dict[str, tuple[list[str], list[str]]], repeat: int) -> tuple[Runs, Peaks]:
    """Run each (A, B) pair ``repeat`` times, alternating A and B within each round: [(wall, cpu)] per side,
    and each side's peak RSS (KiB) per round."""
    out: Runs = {name: ([], []) for name in pairs}
    peaks: Peaks = {name: ([], []) for name in pairs}
    for _ in range(repeat):
        for name, (a, b) in pairs.items():
            for side, argv in enumerate((a, b)):
                wall, cpu, _, rss = timed(argv)
                out[name][side].append((wall, cpu))
                peaks[name][side].append(rss)
    return out, peaks


def spread(values: list[float]) -> str:
    """``median s (min–max)``."""
    return f"{statistics.median(values):6.2f} s ({min(values):.2f}–{max(values):.2f})"


def row(label: str, runs: list[tuple[float, float]]) -> str:
    """One line: wall and CPU medians with their spread."""
    return f"{label:<52} wall {spread([w for w, _ in runs])}  cpu {spread([c for _, c in runs])}"


def ratio(a: list[float], b: list[float]) -> float:
    """median(b) / median(a)."""
    return statistics.median(b) / statistics.median(a)


def main(argv: list[str] | None = None) -> int:
    """Write two signed bundles, time the commands interleaved, print medians, spreads and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", help="keep the two bundles in this folder")
    args = parser.parse_args(argv)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="hetero-bench-diff-"))
    try:
        work.mkdir(parents=True, exist_ok=True)
        key, pub = work / "gate.key", work / "gate.pub"
        if not key.exists():
            generate_keypair(key, pub)
        old, new = work / "old", work / "new"
        started = time.perf_counter()
        for folder, variant in ((old, 0), (new, 1)):
            if not (folder / "attestation.intoto.jsonl").exists():
                shutil.rmtree(folder, ignore_errors=True)
                write_bundle(folder, evidence_doc(args.items, variant), key)
        files = sum(1 for _ in old.rglob("*") if _.is_file())
        size = sum(p.stat().st_size for p in old.rglob("*") if p.is_file())
        print(f"bundles: {args.items} items each, {files} files, {size / 1e6:.0f} MB per bundle "
              f"(written in {time.perf_counter() - started:.0f} s)")
        py = sys.executable
        load = [py, "-c", "import json, sys\nfor p in sys.argv[1:]:\n    json.load(open(p, encoding='utf-8'))",
                str(old / "evidence.json"), str(new / "evidence.json")]
        load_nogc = [py, "-c", "import gc, json, sys\ngc.disable()\nfor p in sys.argv[1:]:\n"
                     "    json.load(open(p, encoding='utf-8'))", str(old / "evidence.json"), str(new / "evidence.json")]
        diff = [py, "-m", "pytest_hetero.cli", "diff", str(old), str(new), "--key", str(pub), "--json"]
        hash_all = [py, "-c", "import hashlib, os, sys\nfor top, _, names in os.walk(sys.argv[1]):\n"
                    "    for n in names:\n        with open(os.path.join(top, n), 'rb') as fh:\n"
                    "            hashlib.sha256(fh.read()).hexdigest()", str(old)]
        verify = [py, "-m", "pytest_hetero.cli", "verify", str(old), "--key", str(pub)]
        _, _, out, _ = timed(diff)
        result = json.loads(out)
        print(f"diff result: {json.dumps(result['counts'])}, {len(result['metric_changes'])} metric and "
              f"{len(result['target_changes'])} target change(s), verification {result['verification']}")
        runs, peaks = interleaved({"diff": (load_nogc, diff), "gc": (load, diff), "verify": (hash_all, verify)},
                                  args.repeat)
        nogc_t, diff_t = runs["diff"]
        load_t, diff2_t = runs["gc"]
        diff_t = diff_t + diff2_t
        hash_t, verify_t = runs["verify"]
        print(row("A load both evidence.json, GC off (as diff loads)", nogc_t))
        print(row("A'' the same with the cyclic GC on", load_t))
        print(row("B hetero diff OLD NEW --key --json (signed)", diff_t))
        print(row("  SHA-256 of every file of one bundle (python)", hash_t))
        print(row("  hetero verify BUNDLE --key (every file hashed)", verify_t))
        rss_load, rss_diff = peaks["diff"]
        rss_hash, rss_verify = peaks["verify"]
        med = statistics.median
        print(f"peak RSS: diff {med(rss_diff) / 1024:.0f} MiB vs loading both {med(rss_load) / 1024:.0f} MiB "
              f"({med(rss_diff) / med(rss_load):.2f}x); verify {med(rss_verify) / 1024:.0f} MiB vs hashing "
              f"{med(rss_hash) / 1024:.0f} MiB ({med(rss_verify) / med(rss_hash):.2f}x)")
        cpu = {name: [c for _, c in values] for name, values in
               (("load", load_t), ("nogc", nogc_t), ("diff", diff_t), ("hash", hash_t), ("verify", verify_t))}
        wall = {name: [w for w, _ in values] for name, values in
                (("load", load_t), ("nogc", nogc_t), ("diff", diff_t), ("hash", hash_t), ("verify", verify_t))}
        print(f"wall-time ratios (disturbed by other load on a shared machine): diff "
              f"{ratio(wall['nogc'], wall['diff']):.2f}x, diff vs loading with the GC on "
              f"{ratio(wall['load'], wall['diff']):.2f}x, verify {ratio(wall['hash'], wall['verify']):.2f}x")
        print(f"cpu-time ratio diff vs loading with the GC on: {ratio(cpu['load'], cpu['diff']):.2f}x (informational)")
        ratios = {"diff": ratio(cpu["nogc"], cpu["diff"]), "verify": ratio(cpu["hash"], cpu["verify"])}
        missed = []
        for name, value in ratios.items():
            ok = value <= TARGETS[name]
            missed += [] if ok else [name]
            print(f"ratio {name} (cpu time): {value:.2f}x (target <= {TARGETS[name]}x) {'ok' if ok else 'MISSED'}")
        return 1 if missed else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
