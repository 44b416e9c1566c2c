"""The acceptance dossier: ``hetero render BUNDLE --format dossier [--lang zh|en]`` (HTML; PDF through Chromium, A4).

Arranged the way a POC or go-live acceptance review is run, from evidence.json and the sign-off view
(:mod:`pytest_hetero.bundle.signoff`, passed in as plain data):

1. cover: scope (targets, pools, backends, profile, matrix digests), the verdict in words with its
   qualification ("passed — scheduling not proven on this backend (local)"), the change since the
   accepted baseline (``baseline_diff``), open conditions (pending or conditional sign-offs);
2. what this run proves / does not prove, from the items and records of the backends and layers that ran;
3. the five layers as chapters: owner team, evidence kinds present, items, sign-off
   (:mod:`pytest_hetero.reporting.dossier_sections`);
4. acceptance results per model × dataset (rule, threshold, observed with unit, verdict, failing golden
   samples) and the run-time operations evidence (device memory, utilisation, queue wait, restarts);
5. acceptance phases and POC scenarios with the items that prove each, or "not covered";
6. untested scope grouped by reason with who can close each group; 7. how to reproduce the run.

Every sentence comes from :mod:`pytest_hetero.reporting.dossier_text` in the language asked for.
Scale: each list is capped (failures first), so a 20,000-item bundle renders in a few times the time
of writing its evidence.json (``bench/bench_dossier.py``); everything is complete in evidence.json.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2
import markupsafe

from pytest_hetero import LAYERS, __version__
from pytest_hetero.evidence.document import failure_of, item_of
from pytest_hetero.evidence.records import (
    CHECKPOINT,
    COMMUNICATION,
    DEVICE_INIT,
    NOT_PROVEN,
    PLACED,
    REQUEST,
    RULES,
    RUN,
    SIMULATION,
    SNAPSHOT,
    USAGE,
)
from pytest_hetero.reporting import dossier_reserve
from pytest_hetero.reporting import dossier_sections as sections
from pytest_hetero.reporting.docview import dims, signoff_state
from pytest_hetero.reporting.dossier_facts import Facts, cut, digest, short, when
from pytest_hetero.reporting.dossier_text import Lang, Text
from pytest_hetero.reporting.view import heatgrid, matrix_of, printable

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import Entry, EvidenceDocument
    from pytest_hetero.evidence.views import SignoffView
    from pytest_hetero.reporting.dossier_rows import Cover, Proof, Role

TEMPLATES = Path(__file__).parent / "templates"
PROVES_LIMIT = 8
"""Statements listed per layer under "what this run proves" (the rest counted)."""
CHANGE_LIMIT = 12


def render_dossier(evidence: EvidenceDocument, signoff: SignoffView, lang: Lang = "en") -> str:
    """The dossier as one self-contained HTML page (no script, no network; A4 print stylesheet).

    ``signoff`` is the sign-off view (:class:`~pytest_hetero.evidence.views.SignoffView`, written by
    :func:`pytest_hetero.bundle.signoff.signoff_context`). Raises ValueError for an unknown ``lang``.
    """
    t = Text(lang)
    f = Facts(evidence)
    roles = sections.roles(signoff, t)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True,
                             finalize=lambda value: value if isinstance(value, markupsafe.Markup)
                             else printable(value) if isinstance(value, str) else value)
    return env.get_template("dossier.html.j2").render(
        t=t, lang=lang, version=__version__, run=f.run_section, css=_css(),
        cover=cover(f, t, signoff, roles), proves=proves(f, t), not_proves=not_proves(f, t),
        chapters=sections.chapters(f, t, roles), results=sections.results(f, t), ops=sections.operations(f, t),
        phases=sections.phases(f, t, signoff), scenarios=sections.scenarios(f, t),
        untested=sections.untested(f, t), reproduce=sections.reproduce(f, t), heat=heatgrid(evidence),
        reserve=dossier_reserve.reserved(f, t),
        layers=LAYERS, signoff=signoff, roles=roles)


def _css() -> str:
    return "\n".join((TEMPLATES / name).read_text(encoding="utf-8") for name in ("dossier.css", "heatgrid.css"))


# ---------------------------------------------------------------- cover


def cover(f: Facts, t: Text, signoff: SignoffView, roles: list[Role]) -> Cover:
    """``{"verdict", "verdict_class", "verification" (sentence), "verification_state", "verified_by", "scope":
    [(label, [lines])], "change": [lines], "conditions": [lines]}``. The verdict of a bundle not verified
    with a trusted key is worded as an unproven claim (``verdict.unverified``)."""
    verdict = f.evidence["summary"]["verdict"]
    quals = qualifications(f, t, signoff)
    words = t(f"verdict.{verdict}") + (t("verdict.sep") + t("verdict.join").join(quals) if quals else "")
    read = signoff_state(signoff)
    state, by = read.state, read.by
    why = str(read.signer_error or t("cover.no_key"))
    if state != "verified":  # an unverified bundle's verdict is a claim, never stated as proven
        words = t("verdict.unverified", verdict=words)
    sentence = t("cover.verified", keyid=by) if state == "verified" else t(
        "cover.unverified", keyid=read.run_signer, why=why) if state == "unverified" else t(
        "cover.unsigned", why=why)
    return {"verdict": words, "verdict_class": verdict if state == "verified" else "unverified",
            "verification": sentence, "verification_state": state, "verified_by": by or "",
            "scope": scope(f, t), "change": change(f, t), "conditions": conditions(f, t, roles)}


def scope(f: Facts, t: Text) -> list[tuple[str, list[str]]]:
    """Rows of the cover's scope table: run, targets, pools, backends, profile, matrices, item counts."""
    run = f.run
    targets = [t("scope.target", backend=x.backend, identity=x.identity,
                 nodes=", ".join(map(str, (x.nodes or [])[:8])) + (
                     f" (+{len(x.nodes) - 8})" if x.nodes and len(x.nodes) > 8 else ""))
               for x in f.targets]
    totals = f.evidence["summary"]["totals"]
    counts = t.counts(totals)
    return [
        (t("scope.run"), [str("" if run.id is None else run.id), t("scope.time", start=when(run.started_at),
                                                                      end=when(run.finished_at))]),
        (t("scope.targets"), targets),
        (t("scope.pools"), pools(f, t)),
        (t("scope.backends"), [", ".join(f.backends)]),
        (t("scope.profile"), [str(run.profile or t("scope.no_profile"))]),
        (t("scope.matrix"), [f"{m['name']} · sha256 {m['sha256']}" for m in f.matrices]),
        (t("scope.items"), [t("scope.counts", total=sum(totals.values()), counts=counts)]),
    ]


def pools(f: Facts, t: Text, limit: int = 20) -> list[str]:
    """One line per resource: its requests, node selector and queue (from ``scheduling.request``), else
    its name as the discovery items know it."""
    seen: dict[str, str] = {}
    for item in f.with_kind["scheduling.request"]:
        data = f.first(item, REQUEST)
        if data is None:  # with_kind holds only items with such a record
            continue
        name = str(data["resource"] or dims(item).resource)
        if name in seen:
            continue
        selector = data["node_selector"]
        extra = t("scope.selector", selector=_pairs(selector)) if selector else ""
        extra += t("scope.queue", queue=data["queue"]) if data["queue"] else ""
        seen[name] = t("scope.pool", resource=name, requests=_pairs(data["requests"] or {}), selector=extra)
    for entry in f.entries:
        name = dims(entry).resource or ""
        if name and name not in seen:
            seen[name] = name
    lines = [seen[k] for k in sorted(seen)]
    return lines[:limit] + ([t("un.more", count=len(lines) - limit)] if len(lines) > limit else [])


def _pairs(mapping: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(mapping.items())) or "{}"


def qualifications(f: Facts, t: Text, signoff: SignoffView) -> list[str]:
    """What qualifies the verdict, in order: failures; layers not proven (not applicable on this backend,
    blocked, deselected, or otherwise); layers proven for only some resources; simulated nodes; parts of
    layers not proven; an interrupted run; an unsigned bundle."""
    totals = f.totals
    quals = []
    if totals["failed"] or totals["error"]:
        quals.append(t("q.failed", failed=totals["failed"], errors=totals["error"]))
    partial: dict[tuple[int, int], list[str]] = {}
    for layer in LAYERS:
        counts = f.by_layer_counts[layer]
        if not counts:
            continue
        if not counts["passed"]:
            quals.append(_not_proven(f, t, layer, counts))
            continue
        passed, total = _resource_coverage(f, layer)
        if passed < total:
            partial.setdefault((passed, total), []).append(t.term(layer))
    quals += [t("q.partial", layer=t.join(names), passed=p, total=n) for (p, n), names in partial.items()]
    nodes = sorted({str(d["node"]) for item in f.with_kind[SIMULATION.name] for d in f.all(item, SIMULATION)})
    if nodes:
        quals.append(t("q.simulated", nodes=", ".join(nodes[:4]) + (" …" if len(nodes) > 4 else "")))
    parts = sorted({(str(d["layer"] or item["layer"]), str(d["part"])) for item in f.with_kind[NOT_PROVEN.name]
                    for d in f.all(item, NOT_PROVEN)})
    quals += [t("q.part", layer=t.term(layer), part=part) for layer, part in parts]
    if f.run.interrupted:
        quals.append(t("q.interrupted"))
    state = signoff_state(signoff).state
    if state != "verified":
        quals.append(t("q.unsigned" if state == "unsigned" else "q.unverified"))
    return quals


def _not_proven(f: Facts, t: Text, layer: str, counts: Counter[str]) -> str:
    statuses = set(counts)
    if "not_applicable" in statuses:
        backends = sorted({b for item in f.by_layer[layer] if item["status"] == "not_applicable"
                           for b in _backends_of(f, item)}) or f.backends
        return t("q.not_applicable", layer=t.term(layer), backends=t.join(backends))
    if statuses == {"blocked"}:
        return t("q.blocked", layer=t.term(layer))
    if statuses == {"deselected"}:
        return t("q.deselected", layer=t.term(layer))
    return t("q.none", layer=t.term(layer), statuses=t.join([t.status(s) for s in sorted(statuses)]))


def _backends_of(f: Facts, item: Entry) -> list[str]:
    """The backend an item ran on: the run's only backend, else the one its matrix names."""
    if len(f.backends) <= 1:
        return f.backends
    return [str(x.backend) for x in f.targets
            if x.matrix in (None, it["matrix"] if (it := item_of(item)) else None)][:1] or f.backends


def _resource_coverage(f: Facts, layer: str) -> tuple[int, int]:
    """(resources with a pass in ``layer``, resources with any item of ``layer``), over every entry."""
    every: set[tuple[str, str]] = set()
    passed: set[tuple[str, str]] = set()
    for entry in f.entries:
        if entry["layer"] != layer:
            continue
        key = (matrix_of(entry), str(dims(entry).resource))
        every.add(key)
        if entry["status"] == "passed":
            passed.add(key)
    return len(passed), len(every)


def change(f: Facts, t: Text) -> list[str]:
    """Lines of the change since the accepted baseline (``baseline_diff`` of evidence.json)."""
    diff = f.baseline_diff
    if not diff:
        return [t("change.none")]
    if "error" in diff:
        return [t("change.error", error=diff["error"])]
    verification = str(diff.get("verification"))
    checked = t(f"change.{verification}") if f"change.{verification}" in _VERIFICATIONS else verification
    lines = [t("change.baseline", run=diff["baseline"]["run"], verification=checked)]
    lines += [t("change.version", what=t(f"change.what.{c['what']}") if c["what"] in _WHATS else c["what"],
                name=c["name"], old=c["old"], new=c["new"]) for c in diff.get("input_changes", [])]
    counts = {k: n for k, n in diff["counts"].items() if n}
    if counts:
        lines.append(t("change.transitions", counts=t.join([t("count.status", count=n, status=t("t." + k))
                                                            for k, n in counts.items()])))
    for name in ("regression", "new_failure", "fixed", "newly_untested", "newly_covered"):
        for e in diff["transitions"][name][:CHANGE_LIMIT]:
            lines.append(t("change.item", transition=t("t." + name), item=short(e["item"]),
                           old=t.status(e["old"]), new=t.status(e["new"])))
    lines += [t("change.metric", rule=m["rule"], item=short(m["item"]), old=m["old"], new=m["new"],
                relative=f"{m['relative_change']:+.1%}") for m in diff["metric_changes"][:CHANGE_LIMIT]]
    lines += [t("change.target", backend=c["backend"], field=c["field"], old=cut(c["old"], 60), new=cut(c["new"], 60))
              for c in diff["target_changes"][:CHANGE_LIMIT]]
    if len(lines) == 1:
        lines.append(t("change.nothing"))
    gate = diff["gate"]
    result = t("verdict.fail") + (": " + "; ".join(gate["reasons"]) if gate["failed"] else "") \
        if gate["failed"] else t("verdict.pass")
    lines.append(t("change.gate", policy=gate["policy"], result=result))
    return lines


_VERIFICATIONS = frozenset({"change.verified", "change.unsigned", "change.unverified"})
_WHATS = frozenset({"model", "dataset", "image", "matrix"})


def conditions(f: Facts, t: Text, roles: list[Role]) -> list[str]:
    """Open conditions: pending sign-offs, sign-offs that did not verify, conditions and known failures
    accepted, rejections (verified sign-offs only), and the failed items of teams that have not accepted them."""
    lines: list[str] = []
    accepted_failures: set[str] = set()
    for role in roles:
        name = t.team(role["role"])
        if role["state"] == "pending":
            lines.append(t("cond.pending", role=name, layers=t.join([t.term(x) for x in role["layers"]])))
        for entry in role["signed"]:
            decision = entry["decision"]
            if not entry["verified"]:
                lines.append(t("cond.unverified", role=name, why=entry["why_unverified"]))
                continue
            lines += [t("cond.condition", role=name, text=c) for c in entry["conditions"]
                      if decision == "accepted_with_conditions"]
            if decision == "accepted_with_known_failures":
                lines.append(t("cond.known_failures", role=name))
                accepted_failures.add(role["role"])
            elif decision == "rejected":
                lines.append(t("cond.rejected", role=name))
    owners = Counter(((fl := failure_of(i)) and fl["owner"]) or i["owner"] or "" for i in f.items
                     if i["status"] in ("failed", "error"))
    lines += [t("cond.failures", count=n, team=t.team(team)) for team, n in sorted(owners.items())
              if team not in accepted_failures]
    return lines or [t("cond.none")]


# ---------------------------------------------------------------- proves / does not prove


def proves(f: Facts, t: Text) -> list[Proof]:
    """Per layer: ``{"layer", "name", "lines": [statement], "more": n}`` for the items that passed."""
    out: list[Proof] = []
    for layer in LAYERS:
        passed = [i for i in f.by_layer[layer] if i["status"] == "passed"]
        lines: list[str] = []
        for item in passed:
            line = _statement(f, t, layer, item)
            if line and line not in lines:
                lines.append(line)
            if len(lines) > PROVES_LIMIT:
                break
        more = max(0, len(passed) - PROVES_LIMIT) if len(lines) > PROVES_LIMIT else 0
        out.append({"layer": layer, "name": t.layer(layer), "lines": lines[:PROVES_LIMIT] or [t("proves.none")],
                    "more": more})
    return out


def _statement(f: Facts, t: Text, layer: str, item: Entry) -> str:
    keys = dims(item)
    res, img = keys.resource or "", keys.image or ""
    if layer == "discovery":
        snap = f.first(item, SNAPSHOT)
        nodes = [str(n["name"]) for n in snap["nodes"]] if snap and "nodes" in snap else []
        place = t("where.nodes", nodes=", ".join(nodes[:4])) if nodes else ", ".join(
            str(x.identity) for x in f.targets) or "?"
        ran = item_of(item)  # an untested-only entry has no times
        return t("proves.discovery", resource=res, where=place, at=when(ran["finished_at"] if ran else None))
    if layer == "scheduling":
        req = f.first(item, REQUEST)
        requests = _pairs((req["requests"] if req else None) or {})
        placed = f.first(item, PLACED)
        if placed:
            return t("proves.scheduling", resource=res, requests=requests, node=placed["node"],
                     waited=placed["waited_s"])
        return t("proves.scheduling_engine", resource=res, backend=", ".join(_backends_of(f, item)), requests=requests)
    if layer == "startup":
        init = f.first(item, DEVICE_INIT) or {}
        image_digest = digest(sections.image_digest(f, item)) or "?"
        framework = init.get("framework")
        if not framework:  # nothing initialised a framework: say only that the image started
            return t("proves.startup_only", resource=res, image=img, digest=image_digest)
        detail = f"{framework}, {init['wanted_provider']}" if init.get("wanted_provider") else framework
        return t("proves.startup", resource=res, image=img, digest=image_digest, init=detail)
    if layer == "model" and keys.check == "communication":  # what a training task type brings
        comm = f.first(item, COMMUNICATION)
        top = (comm["sizes"] if comm else [])[-1:]
        return t("proves.communication", resource=res, image=img, world=comm["world_size"] if comm else "?",
                 backend=comm["backend"] if comm else "?", busbw=top[0]["busbw_gbps"] if top else "?",
                 bytes=top[0]["bytes"] if top else "?")
    if layer == "model" and keys.check == "checkpoint":
        ckpt = f.first(item, CHECKPOINT)
        return t("proves.checkpoint", resource=res, image=img, step=ckpt["resumed_step"] if ckpt else "?",
                 volume=ckpt["volume"] if ckpt else "?")
    ident = f.identity(item)
    if layer == "model":
        run = f.first(item, RUN)
        return t("proves.model", model=ident["model"] if ident else keys.model,
                 version=ident["version"] if ident else "?", dataset=ident["dataset"] if ident else keys.dataset,
                 dataset_version=ident["dataset_version"] if ident else "?", resource=res, image=img,
                 duration=run["duration_s"] if run else "?")
    rules = f.first(item, RULES)
    return t("proves.business", model=keys.model, dataset=keys.dataset, resource=res, image=img,
             rules=len(rules["results"]) if rules else 0)


def not_proves(f: Facts, t: Text) -> list[str]:
    """What this run does not prove, specific to the backends, nodes and layers that ran."""
    lines = []
    for layer in LAYERS:
        counts = f.by_layer_counts[layer]
        if counts and not counts["passed"] and not (layer == "scheduling" and "not_applicable" in counts):
            lines.append(t("dnp.layer", layer=t.layer(layer), statuses=t.join([t.status(s) for s in sorted(counts)])))
    by = f.by_layer_counts
    if by["discovery"]["passed"]:
        lines.append(t("dnp.discovery"))
    if "not_applicable" in by["scheduling"]:
        backends = sorted({b for i in f.by_layer["scheduling"] if i["status"] == "not_applicable"
                           for b in _backends_of(f, i)})
        lines.append(t("dnp.scheduling.none", backends=", ".join(backends)))
    if by["scheduling"]["passed"]:
        lines.append(t("dnp.scheduling"))
    if any(_backends_of(f, i) == ["local"] for i in f.by_layer["startup"] if i["status"] == "passed"):
        lines.append(t("dnp.startup.local"))
    nodes = sorted({str(d["node"]) for i in f.with_kind[SIMULATION.name] for d in f.all(i, SIMULATION)})
    if nodes:
        lines.append(t("dnp.simulated", nodes=", ".join(nodes[:6])))
    for layer, key in (("startup", "dnp.startup"), ("model", "dnp.model"), ("business", "dnp.business")):
        if by[layer]["passed"]:
            lines.append(t(key))
    lines += _parts_not_proven(f, t)
    lines += _usage_gaps(f, t)
    return lines


def _parts_not_proven(f: Facts, t: Text) -> list[str]:
    groups: dict[tuple[str, str], list[str]] = {}
    for item in f.with_kind[NOT_PROVEN.name]:
        for d in f.all(item, NOT_PROVEN):
            groups.setdefault((str(d["layer"] or item["layer"]), str(d["part"])), []).append(str(d["reason"]))
    return [t("dnp.part", layer=t.layer(layer), part=part, count=len(reasons), reason=cut(reasons[0], 200))
            for (layer, part), reasons in sorted(groups.items())]


def _usage_gaps(f: Facts, t: Text) -> list[str]:
    missing = [d for i in f.with_kind[USAGE.name] for d in f.all(i, USAGE) if not d["available"]]
    lines = []
    if missing:
        lines.append(t("dnp.usage", count=len(missing), why=cut(missing[0]["unavailable"], 160)))
    if any(d["source"] == "cgroup" for i in f.with_kind[USAGE.name] for d in f.all(i, USAGE)):
        lines.append(t("dnp.cgroup"))
    return lines

