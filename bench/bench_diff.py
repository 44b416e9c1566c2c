"""Benchmark: the whole signed ``hetero diff`` of two N-item bundles (default 50,000) against loading their JSON.

Both bundles are written the way a run writes its own: evidence.json (the recorder's writer), three
captured artifacts per model item (stdout, stderr, outputs), the matrix copy, every rendering, the
manifest and the Ed25519-signed in-toto statement. The second run has 2 % of items regressed, 1 %
fixed, 1 % newly untested, shifted metrics and a changed driver version.

Measured, interleaved A/B (``--repeat`` rounds, each round runs both commands in turn), each a fresh
process timed from spawn to exit:

* **A, the plain way**: ``python3 -c 'json.load(a); json.load(b)'`` on the two evidence.json files (and A',
  the same with the cyclic GC disabled, as the diff command does while it loads: printed for comparison);
* **B, the gate**: ``hetero diff OLD NEW --key GATE.pub --json`` (the real CLI: verifies each run's
  signature, statement, manifest digest and evidence.json digest, reads nothing else, diffs, prints).

Also measured the same way: ``hetero verify`` of one bundle (every file hashed) against ``json.dump``
of its evidence document in a fresh process (``python3 -c 'json.dump(json.load(f), out)'`` minus the
same process loading alone, i.e. the dump's own cost, as the baseline issue #20 names).

Each command's wall time (spawn to exit) and CPU time (user + system, from ``wait4``) are recorded;
prints medians with the spread (min–max) of both. The targets are judged on CPU time, which other
processes on a shared machine disturb far less than wall time (the wall-time ratios are printed too):
signed diff ≤ 1.5× loading both JSON files, verify ≤ 1× json.dump of the evidence. Exit 1 when a target
is missed.
Usage: ``python bench/bench_diff.py [--items N] [--repeat R] [--keep DIR]``.

Measured on the shared 2-core development machine (50,000 items per bundle, 30,010 files, about 190 MB;
CPU-time medians, min–max; "before" is main at 14d11db with this same benchmark):

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
TARGETS = {"diff": 1.5, "verify": 1.0}


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
             "verdict": "pass", "detail": ""}]}})
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
    scope = cast("UntestedSection", {"items": untested, "never_covered": {}, "does_not_prove": dict(DOES_NOT_PROVE)})
    return {"schema": "pytest-hetero/evidence/v1",
            "run": {"id": f"run-{variant}", "tool": "pytest-hetero", "tool_version": "0.1.0", "host": "bench",
                    "started_at": "2026-11-29T00:00:00.000000Z", "finished_at": "2026-11-29T01:00:00.000000Z",
                    "exit_status": 1, "interrupted": False, "git_commit": "abc", "profile": None},
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


def timed(argv: list[str]) -> tuple[float, float, str]:
    """(wall seconds from spawn to exit, CPU seconds user+system of the process, its stdout) of ``argv``;
    raises on a failing exit. The CPU time is what the command costs; the wall time on a shared machine
    also holds the time it waited for a core."""
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"{argv[:4]} exited {proc.returncode}: {err.read()[-500:]!r}")
        return seconds, usage.ru_utime + usage.ru_stime, out.read().decode()


Runs = dict[str, tuple[list[tuple[float, float]], list[tuple[float, float]]]]


def interleaved(pairs: dict[str, tuple[list[str], list[str]]], repeat: int) -> Runs:
    """Run each (A, B) pair ``repeat`` times, alternating A and B within each round: [(wall, cpu)] per side."""
    out: Runs = {name: ([], []) for name in pairs}
    for _ in range(repeat):
        for name, (a, b) in pairs.items():
            out[name][0].append(timed(a)[:2])
            out[name][1].append(timed(b)[:2])
    return out


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
        load_one = [py, "-c", "import json, sys\njson.load(open(sys.argv[1], encoding='utf-8'))",
                    str(old / "evidence.json")]
        dump_one = [py, "-c", "import json, sys\nd = json.load(open(sys.argv[1], encoding='utf-8'))\n"
                    "json.dump(d, open(sys.argv[2], 'w', encoding='utf-8'))", str(old / "evidence.json"),
                    str(work / "dump.json")]
        verify = [py, "-m", "pytest_hetero.cli", "verify", str(old), "--key", str(pub)]
        _, _, out = timed(diff)
        result = json.loads(out)
        print(f"diff result: {json.dumps(result['counts'])}, {len(result['metric_changes'])} metric and "
              f"{len(result['target_changes'])} target change(s), verification {result['verification']}")
        runs = interleaved({"diff": (load, diff), "nogc": (load_nogc, diff), "dump": (load_one, dump_one),
                            "verify": (dump_one, verify)}, args.repeat)
        load_t, diff_t = runs["diff"]
        nogc_t, diff2_t = runs["nogc"]
        diff_t = diff_t + diff2_t
        load1_t, dump_t = runs["dump"]
        _, verify_t = runs["verify"]
        dump_cost = [(d[0] - lo[0], d[1] - lo[1]) for d, lo in zip(dump_t, load1_t, strict=True)]
        print(row("A load both evidence.json (python -c json.load ×2)", load_t))
        print(row("A' the same with the cyclic GC disabled (as diff)", nogc_t))
        print(row("B hetero diff OLD NEW --key --json (signed)", diff_t))
        print(row("  json.dump of one evidence document (dump − load)", dump_cost))
        print(row("  hetero verify BUNDLE --key (every file hashed)", verify_t))
        cpu = {name: [c for _, c in values] for name, values in
               (("load", load_t), ("nogc", nogc_t), ("diff", diff_t), ("dump", dump_cost), ("verify", verify_t))}
        wall = {name: [w for w, _ in values] for name, values in
                (("load", load_t), ("nogc", nogc_t), ("diff", diff_t), ("dump", dump_cost), ("verify", verify_t))}
        print(f"wall-time ratios (disturbed by other load on a shared machine): diff "
              f"{ratio(wall['load'], wall['diff']):.2f}x, diff vs GC-less loading "
              f"{ratio(wall['nogc'], wall['diff']):.2f}x, verify {ratio(wall['dump'], wall['verify']):.2f}x")
        print(f"cpu-time ratio diff vs GC-less loading: {ratio(cpu['nogc'], cpu['diff']):.2f}x (informational)")
        ratios = {"diff": ratio(cpu["load"], cpu["diff"]), "verify": ratio(cpu["dump"], cpu["verify"])}
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
