"""Benchmark: finishing the evidence bundle of a realistic run against writing its evidence the plain way.

The run (not timed) is what a signed local run of N items leaves behind: a real matrix file (resources ×
5 images × 25 models × 20 datasets, sized to N, with a shared entrypoint ``code`` folder and acceptance
file, both copied into the bundle's ``inputs/``), its journal as the gate writes it (run line with the
derived journal key, matrix line, one authenticated line per item, target, end), and three artifacts per
model item (stdout.txt, stderr.txt, outputs.json) recorded with their digests in the items' evidence.

Measured, in interleaved rounds (A then B, B then A, …; the median and the spread min–max of each are
printed, and the ratio of the medians). In process, the ratio is of CPU time of this process (both
sides are single-threaded; on a shared machine other processes disturb it far less than wall time,
which is printed too):

* in process — A: ``json.dumps`` of the assembled evidence document (compact, sorted keys: the bytes
  evidence.json holds), written to a file: the cost of writing the evidence at all, with Python's C encoder
  (``json.dump`` to a file would use the pure-Python encoder, a slower baseline than any writer needs);
  B: what the pytest controller does at session finish, holding the matrix it collected: ``assemble``
  (read and authenticate the journal, untested scope) then ``publish`` (inputs copied,
  evidence.json, report.html, summary.md, junit.xml, ctrf.json, manifest, in-toto statement, Ed25519
  DSSE envelope). ``B / A`` is reported. As the controller's recorder does, the run (not timed) rendered each
  item's JUnit testcase and CTRF test as it journaled it (:mod:`pytest_hetero.reporting.itemtexts`), so B joins
  those texts; their CPU during the run is printed on its own line, not counted in B.
* floor — C: the parts of the finish that no implementation can skip, each done
  the plain way on the same run: ``json.loads`` and an HMAC-SHA256 of every journal line (reading and
  authenticating it), ``json.dumps`` of evidence.json (compact, sorted keys) and of the CTRF document
  (built beforehand, not timed), the JUnit XML rendering (the gate's own, which writes the testcases as
  text: junitparser's per-element objects and ElementTree's serialiser are slower), one ``os.walk`` +
  ``lstat`` of the bundle (the manifest must see every file) and an Ed25519 signature.
  ``floor / json.dumps`` says what ratio any finish writing these outputs starts from; ``finish / floor``
  is what the gate adds (evidence assembly, untested scope, report.html, summary.md, the second walk that
  finds files planted meanwhile, manifest, statement, summary attestations). Target (issue 32, keeping
  every trust step): B ≤ 2× C.
* whole command — the same finish as a user runs it after a crash, ``hetero report --from-journal DIR
  --sign-key KEY`` in a fresh interpreter, against a fresh interpreter that reads the journal's lines
  with ``json.loads`` and ``json.dumps`` the items to a file (the plain way to turn a journal into an evidence
  file); wall time and peak RSS of each child process. Reported, no target (interpreter start and
  imports are in both).

Left out, plainly: the run itself (models, journal writes during the run: see issue 20's run scaling),
``hetero verify`` and ``hetero diff`` (their benchmarks and targets belong to bench_diff / verify).
Earlier figures (docs/benchmarks.md before issue 32) used ``json.dump`` as A and ``B ≤ 3× A`` as the target.
Between rounds the finish's outputs are removed so every round finishes the same folder.

Usage: ``python bench/bench_bundle.py [--items N] [--rounds R] [--keep DIR]``; exits 1 when the
target (finish ≤ 2× floor) is missed.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pytest_hetero.bundle.finish import publish
from pytest_hetero.bundle.signing import generate_keypair, keyid, load_private_key
from pytest_hetero.evidence.inputs import RunInputs
from pytest_hetero.evidence.journal import JournalKey
from pytest_hetero.evidence.recorder import Recorder, assemble
from pytest_hetero.hooks.registry import plugin_manager
from pytest_hetero.matrix.expand import expand
from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.reporting.ctrf import CtrfReport, render_ctrf
from pytest_hetero.reporting.itemtexts import ItemTexts
from pytest_hetero.reporting.junit import render_junit
from pytest_hetero.settings import bundle_settings

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import ArtifactDict, EvidenceDocument, ItemDict
    from pytest_hetero.vocab import Layer

OWNERS = {"discovery": "infrastructure", "scheduling": "platform", "startup": "platform", "model": "algorithm",
          "business": "business"}
IMAGES = 5
TARGET = 2.0
"""Finish over floor (B / C), issue 32's decided target."""
FINISH_OUTPUTS = ("evidence.json", "report.html", "summary.md", "junit.xml", "ctrf.json", "manifest.json",
                  "statement.intoto.json", "attestation.intoto.jsonl", "inputs")


def synthetic_items(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """``n`` item evidence dicts over 20 resources × 5 images × models@datasets; 3% failed, 7% blocked.

    An evidence document's items without a run behind them (no journal, no artifacts): the dossier's
    benchmark and tests render them; this benchmark builds a whole run instead (:func:`write_run`)."""
    rng = random.Random(seed)
    items: list[dict[str, Any]] = []
    prefix = "matrices/bench.matrix.yaml"

    def add(parts: list[str], layer: str, keys: dict[str, str]) -> None:
        roll = rng.random()
        status = "failed" if roll < 0.03 else "blocked" if roll < 0.10 else "passed"
        nodeid = f"{prefix}::{'::'.join(parts)}::{layer}"
        item = {"nodeid": nodeid, "matrix": prefix, "layer": layer, "keys": keys, "owner": OWNERS[layer],
                "status": status, "started_at": "2026-11-29T10:00:00.000000Z",
                "finished_at": "2026-11-29T10:00:00.250000Z", "duration_s": 0.25,
                "records": [{"kind": f"{layer}.observed", "at": "2026-11-29T10:00:00.100000Z",
                             "data": {"device": "gpu-0", "memory_mib": 81559, "driver": "550.54.15",
                                      "note": "x" * rng.randint(20, 200)}},
                            {"kind": f"{layer}.verdict", "at": "2026-11-29T10:00:00.200000Z",
                             "data": {"text": "ok\n" * rng.randint(1, 10)}}],
                "failure": None, "blocked_by": None, "reason": None, "artifacts": []}
        if status == "failed":
            item["failure"] = {"layer": layer, "category": "threshold", "message": "accuracy 0.91 < 0.95",
                               "owner": OWNERS[layer]}
        elif status == "blocked":
            item["blocked_by"] = f"{prefix}::{parts[0]}::discovery"
            item["reason"] = f"blocked by {item['blocked_by']}: driver missing"
        items.append(item)

    r = 0
    while len(items) < n:
        res = f"res-{r:02d}"
        add([res], "discovery", {"resource": res})
        add([res], "scheduling", {"resource": res})
        for i in range(5):
            img = f"img-{i}"
            add([res, img], "startup", {"resource": res, "image": img})
            for m in range(25):
                for d in range(20):
                    keys = {"resource": res, "image": img, "model": f"m{m}", "dataset": f"d{d}"}
                    add([res, img, f"m{m}@d{d}"], "model", keys)
                    add([res, img, f"m{m}@d{d}"], "business", keys)
        r += 1
    return items[:n]


def write_inputs(work: Path, resources: int, models: int = 25, datasets: int = 20) -> Path:
    """The matrix file, its model/dataset files, a code folder and an acceptance file; returns the matrix."""
    (work / "code").mkdir()
    (work / "code" / "infer.py").write_text("import json, sys\n" + "# inference entrypoint\n" * 80)
    (work / "code" / "README.md").write_text("how to run\n" * 40)
    (work / "model.onnx").write_bytes(b"\x08\x01" * 2000)
    (work / "data.csv").write_text("x,y\n" + "1,2\n" * 2000)
    (work / "acceptance.yaml").write_text("rules:\n  - {name: accuracy-floor, metric: accuracy, op: '>=', "
                                          "value: 0.9}\n")
    sha = {p: hashlib.sha256((work / p).read_bytes()).hexdigest() for p in ("model.onnx", "data.csv")}
    spec = {
        "target": {"backend": "local"},
        "resources": [{"name": f"res-{r:02d}", "type": "cpu", "requests": {"cpu": 1}} for r in range(resources)],
        "images": [{"name": f"img-{i}", "reference": "python:current"} for i in range(IMAGES)],
        "models": [{"name": f"m{m}", "version": "1", "uri": "model.onnx", "sha256": sha["model.onnx"],
                    "code": "code", "entrypoint": ["{python}", "{code}/infer.py", "{outputs}"]}
                   for m in range(models)],
        "datasets": [{"name": f"d{d}", "version": "1", "uri": "data.csv", "sha256": sha["data.csv"],
                      "acceptance": "acceptance.yaml"} for d in range(datasets)],
    }
    path = work / "bench.matrix.yaml"
    path.write_text(json.dumps({"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix",
                                "metadata": {"name": "bench"}, "spec": spec}))
    return path


def _artifacts(bundle: Path, parts: list[str], n: int) -> list[ArtifactDict]:
    """Write a model item's stdout, stderr and outputs; return their Artifact dicts (as the gate records)."""
    folder = bundle.joinpath("artifacts", *parts, "model")
    folder.mkdir(parents=True, exist_ok=True)
    contents = {"stdout.txt": f"loading model\nrun {n}\n" + "batch ok\n" * 60,
                "stderr.txt": "warning: provider fallback\n" * 4,
                "outputs.json": json.dumps({"metrics": {"accuracy": 0.96}, "predictions": list(range(120)),
                                            "latency_ms": [1.5] * 60})}
    out: list[ArtifactDict] = []
    for name, text in contents.items():
        data = text.encode()
        (folder / name).write_bytes(data)
        out.append({"name": name, "path": (folder / name).relative_to(bundle).as_posix(), "size": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "media_type": "application/json" if name.endswith(".json") else "text/plain"})
    return out


def _item(prefix: str, parts: list[str], layer: Layer, keys: dict[str, str], n: int) -> ItemDict:
    failed = n % 31 == 0
    return {"nodeid": f"{prefix}::{'::'.join(parts)}::{layer}", "matrix": prefix, "layer": layer, "keys": keys,
            "owner": OWNERS[layer], "status": "failed" if failed else "passed",
            "started_at": "2026-11-29T10:00:00.000000Z", "finished_at": "2026-11-29T10:00:00.250000Z",
            "duration_s": 0.25,
            "records": [{"kind": f"{layer}.observed", "at": "2026-11-29T10:00:00.100000Z",
                         "data": {"device": "cpu-0", "memory_mib": 81559, "note": "x" * (40 + n % 160)}},
                        {"kind": f"{layer}.verdict", "at": "2026-11-29T10:00:00.200000Z",
                         "data": {"text": "ok\n" * (1 + n % 10)}}],
            "failure": {"layer": layer, "category": "threshold", "message": "accuracy 0.91 < 0.95",
                        "owner": OWNERS[layer]} if failed else None,
            "blocked_by": None, "reason": None, "artifacts": []}


def write_run(bundle: Path, matrix: Path, resources: int, key: JournalKey, models: int = 25,
              datasets: int = 20, texts: ItemTexts | None = None) -> int:
    """The journal and artifacts a run of ``matrix`` leaves in ``bundle``; returns the item count. ``texts``
    renders each item's JUnit and CTRF texts as it is journaled, as the controller's recorder does."""
    prefix = matrix.name
    rec = Recorder(bundle, {"id": bundle.name, "tool": "pytest-hetero", "tool_version": "0.1.0", "host": "bench",
                            "started_at": "2026-11-29T10:00:00.000000Z", "git_commit": None}, key, texts)
    rec.matrix(str(matrix), prefix, "bench", hashlib.sha256(matrix.read_bytes()).hexdigest(), False)
    rec.target({"backend": "local", "identity": "bench", "nodes": ["bench"], "versions": {"python": "3.11"}})
    n = 0
    batch: list[ItemDict] = []
    for r in range(resources):
        res = f"res-{r:02d}"
        layers: tuple[Layer, ...] = ("discovery", "scheduling")
        for layer in layers:
            batch.append(_item(prefix, [res], layer, {"resource": res}, n := n + 1))
        for i in range(IMAGES):
            img = f"img-{i}"
            batch.append(_item(prefix, [res, img], "startup", {"resource": res, "image": img}, n := n + 1))
            for m in range(models):
                for d in range(datasets):
                    keys = {"resource": res, "image": img, "model": f"m{m}", "dataset": f"d{d}"}
                    parts = [res, img, f"m{m}@d{d}"]
                    model = _item(prefix, parts, "model", keys, n := n + 1)
                    model["artifacts"] = _artifacts(bundle, parts, n)
                    batch += [model, _item(prefix, parts, "business", keys, n := n + 1)]
            rec.write_entries([{"type": "item", "evidence": e} for e in batch])
            batch = []
    rec.end(1, False)
    return n


def clean(bundle: Path) -> None:
    """Remove what a finish writes, so the next round finishes the same folder."""
    for name in FINISH_OUTPUTS:
        path = bundle / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    shutil.rmtree(bundle.with_name(bundle.name + ".unrecorded"), ignore_errors=True)


PEAK = ("import atexit, sys\n"
        "def _peak():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'):\n"
        "            sys.stderr.write('PEAK ' + line.split()[1] + '\\n')\n"
        "atexit.register(_peak)\n")
"""Prefix of a child's program: its own peak RSS (VmHWM of the image after exec; ``wait4``'s maxrss would
count the pages the child shared with this large process before exec)."""


def child(program: str, argv: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS bytes) of ``python -c PEAK+program argv…``; raises when it fails."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PEAK + program, *argv], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):  # 1: the command's verdict, not a failure to run
        raise RuntimeError(f"{argv[:2]} exited {done.returncode}: {done.stderr[-500:]}")
    peak = [line for line in done.stderr.splitlines() if line.startswith("PEAK ")]
    return wall, int(peak[-1].split()[1]) * 1024


REPORT_COMMAND = ("import runpy\n"
                  "sys.argv = ['hetero', *sys.argv[1:]]\n"
                  "runpy.run_module('pytest_hetero.cli', run_name='__main__')\n")
"""``hetero`` (``python -m pytest_hetero.cli``) with the arguments given."""


BASELINE_COMMAND = ("import json\n"
                    "items = [json.loads(line) for line in open(sys.argv[1], encoding='utf-8')]\n"
                    "with open(sys.argv[2], 'w', encoding='utf-8') as fh:\n"
                    "    fh.write(json.dumps(items))\n")


def during_run(bundle: Path) -> float:
    """CPU seconds the run spent rendering its items' texts as it journaled them (not part of the finish):
    the journal's item lines handed to a fresh :class:`ItemTexts` again, timed."""
    with open(bundle / "journal.jsonl", "rb") as fh:
        lines = [raw for raw in fh if b'"type":"item"' in raw]
    again = ItemTexts()
    cpu = time.process_time()
    for raw in lines:
        again.add(raw)
    took = time.process_time() - cpu
    again.close()
    return took


def floor_work(bundle: Path, evidence: EvidenceDocument, ctrf: CtrfReport, sign: Callable[[bytes], bytes],
               out: Path) -> None:
    """The finish's unavoidable parts done the plain way (see the module docstring, C), writing into ``out``."""
    secret = hashlib.sha256(b"bench").digest()
    with open(bundle / "journal.jsonl", "rb") as fh:
        for raw in fh:
            json.loads(raw)
            hmac.digest(secret, raw, "sha256")
    data = json.dumps(evidence, sort_keys=True, separators=(",", ":")).encode()
    (out / "evidence.json").write_bytes(data)
    (out / "ctrf.json").write_bytes(json.dumps(ctrf, separators=(",", ":")).encode())
    (out / "junit.xml").write_bytes(render_junit(evidence))
    for root, _dirs, names in os.walk(bundle):
        for name in names:
            os.lstat(os.path.join(root, name))
    sign(hashlib.sha256(data).digest())


def spread(values: list[float]) -> str:
    """``median (min–max)`` in seconds."""
    return f"{statistics.median(values):6.2f} s ({min(values):.2f}–{max(values):.2f})"


def interleave(a: Callable[[], float], b: Callable[[], float], rounds: int) -> tuple[list[float], list[float]]:
    """Run ``a`` and ``b`` ``rounds`` times each, alternating which goes first; their measurements."""
    xs: list[float] = []
    ys: list[float] = []
    for n in range(rounds):
        if n % 2:
            ys.append(b())
            xs.append(a())
        else:
            xs.append(a())
            ys.append(b())
    return xs, ys


def main(argv: list[str] | None = None) -> int:
    """Build the run, measure, print medians, spreads and ratios; exit 1 if the target (finish ≤ 2× floor) is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000, help="items, rounded up to whole resources "
                        "(5,007 items each with the default models and datasets)")
    parser.add_argument("--models", type=int, default=25, help="models in the matrix")
    parser.add_argument("--datasets", type=int, default=20, help="datasets in the matrix")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per comparison")
    parser.add_argument("--keep", help="copy the last bundle here")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="hetero-bench-"))
    try:
        per_resource = 2 + IMAGES * (1 + args.models * args.datasets * 2)
        resources = max(1, -(-args.items // per_resource))
        matrix = write_inputs(work, resources, args.models, args.datasets)
        generate_keypair(work / "run.key", work / "run.pub")
        private = load_private_key(work / "run.key")
        bundle = work / "reports" / "bench-run"
        key = JournalKey.derived(private.sign, keyid(private.public_key()), bundle.name)
        texts = ItemTexts()  # the controller's: each item's JUnit and CTRF texts rendered as it is journaled
        items = write_run(bundle, matrix, resources, key, args.models, args.datasets, texts)
        during = during_run(bundle)
        hook = plugin_manager([]).hook
        settings = bundle_settings(bundle, work / "run.key")
        loaded = load_matrix(matrix)
        held = {matrix.name: (loaded, expand(loaded, scheduling_per_image=False))}  # as the controller holds it
        assembled = assemble(bundle, RunInputs(held), key=key)
        # the baselines encode the whole document, its items a list (assembly keeps them on disk, read back lazily)
        evidence = cast("EvidenceDocument", {**assembled, "items": list(assembled["items"])})

        walls: dict[str, list[float]] = {"json.dumps": [], "finish": [], "report": [], "plain": []}

        def baseline() -> float:
            start, cpu = time.perf_counter(), time.process_time()
            with open(work / "baseline.json", "w", encoding="utf-8") as fh:
                fh.write(json.dumps(evidence, sort_keys=True, separators=(",", ":")))
            walls["json.dumps"].append(time.perf_counter() - start)
            return time.process_time() - cpu

        def finish() -> float:
            clean(bundle)
            start, cpu = time.perf_counter(), time.process_time()
            inputs = RunInputs(held, texts)
            doc = assemble(bundle, inputs, key=key)
            failed = publish(hook, doc, settings, inputs)
            walls["finish"].append(time.perf_counter() - start)
            took = time.process_time() - cpu
            if failed:
                raise RuntimeError(f"finish failed: {failed}")
            return took

        ctrf = render_ctrf(evidence)
        floor_out = work / "floor"
        floor_out.mkdir()

        def floor() -> float:
            cpu = time.process_time()
            floor_work(bundle, evidence, ctrf, private.sign, floor_out)
            return time.process_time() - cpu

        files = sum(1 for _ in bundle.rglob("*"))
        base, full = interleave(baseline, finish, args.rounds)
        _, least = interleave(baseline, floor, args.rounds)
        size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
        models = resources * IMAGES * args.models * args.datasets
        entries = sum(1 for _ in bundle.rglob("*"))
        print(f"items: {items} ({resources} resources; {models} model items, {3 * models} artifacts); bundle: "
              f"{size / 1e6:.1f} MB in {entries} entries ({files} before the finish); evidence.json "
              f"{(bundle / 'evidence.json').stat().st_size / 1e6:.1f} MB")
        ratio = statistics.median(full) / statistics.median(base)
        per_round = statistics.median(f / b for f, b in zip(full, base, strict=True))
        over_floor = statistics.median(full) / statistics.median(least)
        print(f"in process  A json.dumps of the evidence     cpu {spread(base)}  wall {spread(walls['json.dumps'])}")
        print(f"in process  B assemble + publish (finish)    cpu {spread(full)}  wall {spread(walls['finish'])}")
        print(f"in process  C the unavoidable parts, plain   cpu {spread(least)}")
        print(f"during the run (not in B): the items' JUnit and CTRF texts, cpu {during:.2f} s "
              f"({during / items * 1e6:.0f} us per item)")
        print(f"ratio bundle_in_process: {ratio:.2f}x json.dumps (median of rounds {per_round:.2f}x; reported)")
        print(f"ratio bundle_floor: {statistics.median(least) / statistics.median(base):.2f}x json.dumps (reported)")
        print(f"ratio bundle_finish_over_floor: {over_floor:.2f}x (target <= {TARGET:.0f}x) "
              f"{'ok' if over_floor <= TARGET else 'MISSED'}")

        rss: dict[str, list[int]] = {"report": [], "plain": []}

        def report_command() -> float:
            clean(bundle)
            wall, peak = child(REPORT_COMMAND, ["report", "--from-journal", str(bundle), "--sign-key",
                                                str(work / "run.key")])
            walls["report"].append(wall)
            rss["report"].append(peak)
            return wall

        def plain_command() -> float:
            wall, peak = child(BASELINE_COMMAND, [str(bundle / "journal.jsonl"), str(work / "plain.json")])
            walls["plain"].append(wall)
            rss["plain"].append(peak)
            return wall

        interleave(plain_command, report_command, max(3, args.rounds // 2))
        print(f"command     plain: python json.loads lines + json.dumps {spread(walls['plain'])}  "
              f"peak RSS {statistics.median(rss['plain']) / 1e6:.0f} MB")
        print(f"command     hetero report --from-journal --sign-key   {spread(walls['report'])}  "
              f"peak RSS {statistics.median(rss['report']) / 1e6:.0f} MB")
        print(f"ratio bundle_command: {statistics.median(walls['report']) / statistics.median(walls['plain']):.2f}x "
              f"wall, {statistics.median(rss['report']) / statistics.median(rss['plain']):.2f}x peak RSS (reported)")
        if args.keep:
            shutil.copytree(bundle, args.keep, dirs_exist_ok=True)
        print(f"max RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3:.0f} MB")
        return 0 if over_floor <= TARGET else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
