"""The dossier's chapters after the cover: sign-off roles, the five layers, acceptance results, run-time
operations, acceptance phases and POC scenarios, untested scope, reproduce (see :mod:`.dossier`).

Each function takes the indexed evidence (:class:`~pytest_hetero.reporting.dossier_facts.Facts`) and the
catalogue in one language (:class:`~pytest_hetero.reporting.dossier_text.Text`) and returns plain data
for ``templates/dossier.html.j2``; lists are capped (failures first) and say how many more there are.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, TypeVar

from pytest_hetero import LAYERS
from pytest_hetero.evidence.document import failure_of, matrix_of_item, owner_of
from pytest_hetero.evidence.records import (
    DIGEST,
    ENVIRONMENT,
    IDENTITY,
    IMAGE,
    PENDING,
    PLACED,
    POD,
    PROBE,
    QUEUE_ADMISSION,
    REQUEST,
    ROLLBACK,
    RULES,
    RUN,
    SERVING_AUTH,
    SERVING_USAGE,
    SNAPSHOT,
    SUBMITTED,
    USAGE,
)
from pytest_hetero.evidence.usage import epoch
from pytest_hetero.reporting.docview import dims, signoff_state
from pytest_hetero.reporting.dossier_capacity import capacity
from pytest_hetero.reporting.dossier_charts import queue_charts, usage_charts
from pytest_hetero.reporting.dossier_facts import Facts, cut, digest, number, short, when, where
from pytest_hetero.reporting.dossier_text import Text
from pytest_hetero.reporting.view import provenance_source

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import Entry, ItemDict, RuleResult, UntestedEntry
    from pytest_hetero.evidence.records import ContainerStatus, UsageData
    from pytest_hetero.evidence.views import SignoffView
    from pytest_hetero.reporting.dossier_rows import (
        Chapter,
        Coverage,
        ItemRow,
        Operations,
        QueueRow,
        ResultGroup,
        ResultRow,
        Results,
        Role,
        SignedRow,
        Untested,
        UntestedGroup,
        UsageRow,
    )
    from pytest_hetero.vocab import Status

_E = TypeVar("_E", "ItemDict", "UntestedEntry", "Entry")

ITEM_ROWS = 25
"""Items listed per layer chapter (failures first)."""
RESULT_ITEMS = 60
"""Business items whose rules are listed in the acceptance results (failures first)."""
OPS_ROWS = 40
UNTESTED_GROUPS = 40
PRIORITY: dict[Status, int] = {"failed": 0, "error": 0, "not_run": 1, "blocked": 1, "not_applicable": 2, "skipped": 2,
                                "excluded": 3, "deselected": 3, "passed": 4}
"""Where each status sorts in a list (failures first); every status has one."""
_RANK: dict[str, int] = {status: rank for status, rank in PRIORITY.items()}
""":data:`PRIORITY` for a status as a summary's counts name it (any string: 5, after every status)."""
STATES = ("pending", "signed", "accepted", "accepted_with_conditions", "accepted_with_known_failures", "rejected")
DECISIONS = {"accept": "accepted", "accept-with-conditions": "accepted_with_conditions",
             "accept-with-known-failures": "accepted_with_known_failures", "reject": "rejected"}
"""A sign-off's decision (``hetero sign --decision``) → the state word it reads as."""

EVIDENCE_KINDS: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "discovery": [("ev.device_state", ("discovery.snapshot",)), ("ev.engine_facts", ("discovery.engine",))],
    "scheduling": [("ev.requests_allocated", ("scheduling.placed", "scheduling.allocation")),
                   ("ev.queue_quota", ("scheduling.queue",)), ("ev.pending", ("scheduling.pending",))],
    "startup": [("ev.image_digest", ("startup.environment", "startup.pod", "startup.image")),
                ("ev.input_digests", ("artifact.digest",)), ("ev.device_init", ("startup.device_init",)),
                ("ev.failure_reasons", ("startup.failed",))],
    "model": [("ev.logs", ("model.run",)), ("ev.outputs", ("model.outputs",)), ("ev.usage", ("model.usage",)),
              ("ev.failure_reasons", ("failure",))],
    "business": [("ev.samples", ("business.rules",)), ("ev.failure_reasons", ("failure",))],
}
"""Per layer: the evidence kinds a reviewer asks for and the record kinds that carry them (``failure``:
items with a failure; ``scheduling.queue``: placements or Pending decisions through a queue)."""


def _sorted(items: list[_E]) -> list[_E]:
    return sorted(items, key=lambda i: (PRIORITY[i["status"]], i["nodeid"]))


def _queue(f: Facts, item: Entry) -> str | None:
    """The queue an item's ``scheduling.request`` named (None without a request or a queue)."""
    request = f.first(item, REQUEST)
    return request["queue"] if request else None


def image_digest(f: Facts, item: Entry) -> str:
    """The image digest a startup item recorded (local environment, Docker image or pod container)."""
    recorded = (f.first(item, ENVIRONMENT), f.first(item, IMAGE), f.first(item, POD))
    return next((str(data["digest"]) for data in recorded if data and data["digest"]), "")


# ---------------------------------------------------------------- sign-off


def roles(signoff: SignoffView, t: Text) -> list[Role]:
    """The sign-off view's roles (:class:`~pytest_hetero.evidence.views.RoleView`) as the dossier shows them:
    ``{"role", "owner", "layers", "state", "state_text", "signed": [{"keyid", "names", "decision",
    "decision_text", "conditions" (list), "signed_at", "verified", "why_unverified", "layers"}]}``; decisions
    as ``hetero sign`` writes them (``accept``, ``accept-with-conditions`` …) read as their state word (a line
    without one as ``signed``, any other word as written); a sign-off that names no layer vouches for its
    role's."""
    out: list[Role] = []
    for role in signoff["roles"]:
        signed: list[SignedRow] = []
        for claim in role["signed"]:
            raw = claim["decision"] or "signed"
            decision = DECISIONS.get(raw, raw)
            verified = claim["verified"]
            conditions = claim["conditions"]
            signed.append({
                "keyid": claim["keyid"], "names": list(claim["names"]),
                "decision": decision, "decision_text": t(f"state.{decision}") if decision in STATES else decision,
                "conditions": [conditions] if conditions else [],
                "signed_at": when(claim["signed_at"]), "verified": verified,
                "why_unverified": None if verified else claim["why_unverified"] or t("so.not_checked"),
                "layers": list(claim["layers"] or role["layers"]),
            })
        state = role["state"]
        out.append({"role": role["role"], "owner": role["owner"], "layers": list(role["layers"]), "state": state,
                    "state_text": t(f"state.{state}") if state in STATES else state, "signed": signed})
    return out


# ---------------------------------------------------------------- the five layers


def chapters(f: Facts, t: Text, all_roles: list[Role]) -> list[Chapter]:
    """Per layer: ``{"layer", "name", "claim", "owners", "counts": [(status, text, n)], "evidence":
    [(label, present_count)], "rows": [{"item", "status", "status_text", "fact", "reason", "owner"}],
    "more", "roles": [role]}``."""
    out: list[Chapter] = []
    for layer in LAYERS:
        reported = f.by_layer[layer]
        listed = _sorted([e for e in f.entries if e["layer"] == layer])
        counts = f.by_layer_counts[layer]
        owners = sorted({i["owner"] for i in reported} - {""})
        out.append({
            "layer": layer, "name": t.layer(layer), "claim": t(f"claim.{layer}"),
            "owners": [t.team(o) for o in owners],
            "counts": [(s, t("count.status", count=n, status=t.status(s)))
                       for s, n in sorted(counts.items(), key=lambda kv: _RANK.get(kv[0], 5))],
            "evidence": [(t(label), _present(f, reported, kinds)) for label, kinds in EVIDENCE_KINDS[layer]],
            "rows": [_row(f, t, layer, e) for e in listed[:ITEM_ROWS]], "more": max(0, len(listed) - ITEM_ROWS),
            "roles": [r for r in all_roles if layer in r["layers"]],
        })
    return out


def _present(f: Facts, reported: list[ItemDict], kinds: tuple[str, ...]) -> int:
    if kinds == ("failure",):
        return sum(1 for i in reported if failure_of(i))
    if kinds == ("scheduling.queue",):
        return sum(1 for i in reported if _queue(f, i) or any(d.get("queue_objects") for d in f.all(i, PENDING)))
    ids = {i["nodeid"] for kind in kinds for i in f.with_kind[kind]}  # every kind listed is indexed (KINDS)
    return sum(1 for i in reported if i["nodeid"] in ids)


def _row(f: Facts, t: Text, layer: str, item: Entry) -> ItemRow:
    failure = failure_of(item)
    reason = f"{failure['category']}: {failure['message']}" if failure else (item["reason"] or "")
    return {"item": short(item["nodeid"]), "status": item["status"], "status_text": t.status(item["status"]),
            "fact": _fact(f, t, layer, item), "reason": cut(reason, 220),
            "owner": t.team((failure["owner"] if failure else "") or owner_of(item))}


def _fact(f: Facts, t: Text, layer: str, item: Entry) -> str:
    if item["nodeid"] not in f.records:
        return ""
    if layer == "discovery":
        snap = f.first(item, SNAPSHOT)
        if snap is None:
            count, at = 0, None
        elif "nodes" in snap:  # a node pool's
            count, at = len(snap["nodes"]), snap.get("taken_at")
        else:  # a host probe's
            count, at = len(snap["observed"]["devices"]), snap["observed"]["collected_at"]
        return t("fact.snapshot", devices=count,
                 at=when(at or (item["finished_at"] if "finished_at" in item else None)))
    if layer == "scheduling":
        placed = f.first(item, PLACED)
        return t("fact.placed", node=placed["node"], waited=placed["waited_s"]) if placed else ""
    if layer == "startup":
        found = image_digest(f, item)
        return t("fact.digest", digest=digest(found)) if found else ""
    if layer == "model":
        run = f.first(item, RUN)
        return t("fact.run", exit_code=run["exit_code"], duration=run["duration_s"],
                 rss="—" if run["peak_rss_mib"] is None else run["peak_rss_mib"]) if run else ""
    results = [r for d in f.all(item, RULES) for r in d["results"]]
    return t("fact.rules", passed=sum(r["verdict"] == "pass" for r in results), total=len(results)) \
        if results else ""


# ---------------------------------------------------------------- acceptance results


def results(f: Facts, t: Text) -> Results:
    """``{"groups": [{"heading", "digests", "rows": [{"where", "rule", "threshold", "observed", "verdict",
    "verdict_text", "failing"}]}], "more"}``: one group per matrix × model × dataset."""
    business = _sorted([e for e in f.entries if e["layer"] == "business"])
    shown = business[:RESULT_ITEMS]
    groups: dict[tuple[str, str, str], ResultGroup] = {}
    for item in sorted(shown, key=lambda i: (where(i), PRIORITY[i["status"]])):
        keys = dims(item)
        group_key = (matrix_of_item(item), str(keys.model), str(keys.dataset))
        group = groups.get(group_key)
        if group is None:
            ident = f.identity(item)
            group = groups[group_key] = {
                "heading": t("res.heading", model=keys.model, version=ident["version"] if ident else "?",
                             dataset=keys.dataset, dataset_version=ident["dataset_version"] if ident else "?"),
                "digests": t("res.digests", model_sha=digest(ident.get("sha256"), 16) or "?",
                             dataset_sha=digest(ident["dataset_sha256"], 16) or "?") if ident else "",
                "rows": []}
        group["rows"] += _result_rows(f, t, item)
    return {"groups": list(groups.values()), "more": max(0, len(business) - RESULT_ITEMS)}


def _result_rows(f: Facts, t: Text, item: Entry) -> list[ResultRow]:
    keys = dims(item)
    place = f"{keys.resource or ''} × {keys.image or ''}"
    records = f.all(item, RULES)
    if not records:
        return [{"where": place, "rule": "", "threshold": "", "observed": "", "verdict": item["status"],
                 "verdict_text": t("res.not_run", status=t.status(item["status"]),
                                   reason=cut(item["reason"] or ((fl := failure_of(item)) and fl["message"]), 200)),
                 "failing": ""}]
    rows: list[ResultRow] = []
    for data in records:
        prefix = t("res.sample", run=data["run"]) + " · " if data["run"] else ""
        for r in data["results"]:
            rows.append({"where": place, "rule": prefix + str(r["name"]), "threshold": str(r["expected"] or ""),
                         "observed": observed(t, r), "verdict": "passed" if r["verdict"] == "pass" else "failed",
                         "verdict_text": t("res.pass") if r["verdict"] == "pass" else t("res.fail"),
                         "failing": _failing(r)})
    return rows


def observed(t: Text, result: RuleResult) -> str:
    """A rule's observed value with its unit (latency in ms, accuracy also as a percentage) and where the value
    came from (computed, measured, or self-reported, not verified)."""
    shown = _observed(t, result)
    source = provenance_source(result)
    if result["observed"] is None or source not in ("computed", "measured", "measured_in_workload",
                                                                     "self_reported"):
        return shown
    return f"{shown} · {t(f'prov.{source}')}"


def _observed(t: Text, result: RuleResult) -> str:
    value = result["observed"]
    if value is None:
        return cut(result["detail"], 200)
    if result["kind"] == "latency":
        return t("unit.ms", value=number(value))
    if result["kind"] == "metric" and isinstance(value, (int, float)) and "accuracy" in str(result["expected"]):
        return t("unit.share", value=number(value), percent=number(value * 100, 2))
    return number(value) if isinstance(value, (int, float)) else str(value)


def _failing(result: RuleResult) -> str:
    """The failing golden sample indices (the rule's own, never sample content), else the rule's detail."""
    if result["kind"] != "golden" or result["verdict"] == "pass":
        return ""
    indices = result.get("failing")
    if isinstance(indices, list):
        return ", ".join(map(str, indices))
    return cut(result["detail"], 300)


# ---------------------------------------------------------------- run-time operations


def operations(f: Facts, t: Text) -> Operations:
    """``{"usage": [rows], "usage_more", "scopes": [text], "queue": [rows], "queue_note"}``: per model run or
    service load, the device memory high-water mark and utilisation (or why not available); per placed
    workload, submitted → admitted → placed → started and restarts, from what the engine recorded
    (``scheduling.submitted``, ``scheduling.placed``, the startup item's ``startup.pod`` container
    statuses); a step no record holds reads "not recorded"."""
    runs = _sorted([i for i in f.items if i["layer"] == "model" and i["nodeid"] in f.records])
    usage_rows: list[UsageRow] = []
    scopes: list[str] = []
    sampled: list[tuple[str, UsageData]] = []
    for item in runs:
        for kind in (USAGE, SERVING_USAGE):
            for data in f.all(item, kind):
                sampled.append((short(item["nodeid"]), data))
                usage_rows += _usage_rows(f, t, item, data)
                scope = data["scope"]
                if scope and scope not in scopes:
                    scopes.append(scope)
    queued = _sorted(f.with_kind[SUBMITTED.name])
    queue_rows = [_queue_row(f, t, i) for i in queued]
    note = "" if queue_rows else t("ops.no_queue", backends=", ".join(f.backends))
    usage = f.evidence.get("usage")
    queue = usage.get("queue") if usage else None  # a bundle written before issue 33 has no queue
    ledger = queue["pools"] if queue else {}
    return {"usage": usage_rows[:OPS_ROWS], "usage_more": max(0, len(usage_rows) - OPS_ROWS),
            "scopes": [t("ops.scope", scope=s) for s in scopes[:4]], "queue": queue_rows[:OPS_ROWS],
            "queue_more": max(0, len(queue_rows) - OPS_ROWS), "queue_note": note,
            "none": "" if runs else t("ops.none"), "charts": usage_charts(t, sampled), "backends": f.backends,
            "queue_charts": queue_charts(t, ledger), "capacity": capacity(f, t)}


def _usage_rows(f: Facts, t: Text, item: Entry, data: UsageData) -> list[UsageRow]:
    run = f.first(item, RUN)
    rss = t("ops.mib", value=number(run["peak_rss_mib"], 1)) if run and run["peak_rss_mib"] is not None else ""
    item_id, source = short(item["nodeid"]), str(data["source"])
    if not data["available"]:
        return [{"item": item_id, "source": source, "rss": rss, "device": "",
                 "memory": t("ops.unavailable", why=cut(data["unavailable"], 160)), "util": "", "samples": ""}]
    rows: list[UsageRow] = []
    for dev in data["devices"]:
        high, mean, top = dev["memory_high_water_mib"], dev["utilisation_mean_pct"], dev["utilisation_max_pct"]
        rows.append({"item": item_id, "source": source, "rss": rss, "device": str(dev["name"] or dev["id"]),
                     "memory": t("ops.mib", value=number(high, 1)) if high is not None else t("ops.not_read"),
                     "util": t("ops.pct", mean=number(mean, 1), max=number(top, 1)) if mean is not None
                     else t("ops.not_read"),
                     "samples": t("ops.count", count=data["samples"], interval=number(data["interval_s"]))})
    return rows


def _queue_times(f: Facts, item: Entry) -> tuple[float | None, float | None, float | None, list[ContainerStatus]]:
    """A queued item's submitted, placed and started times (epoch seconds, None when not recorded) and its
    startup pod's container statuses."""
    submitted = f.first(item, SUBMITTED)
    placed = f.first(item, PLACED)
    keys = dims(item)
    startup = f.sibling(item, "startup") or f.combo.get(
        (matrix_of_item(item), keys.resource or "", keys.image or "", "", "", "startup"))
    pod = f.first(startup, POD) if startup else None
    statuses = (pod["container_statuses"] if pod else None) or []
    started = next((((s.get("state") or {}).get("running") or {}).get("startedAt") for s in statuses), None)
    return (epoch(submitted["submitted_at_epoch_s"] if submitted else None),
            epoch((placed["observed_epoch_s"] or placed["decided_at"]) if placed else None), epoch(started),
            statuses)


def _queue_row(f: Facts, t: Text, item: Entry) -> QueueRow:
    """One row of the queue table; ``admitted`` the Kueue admission's time (``scheduling.queue``, written by
    :func:`pytest_hetero.backends.kubernetes.placement.record_admission`; no writer of ``scheduling.placed`` has
    ever written one)."""
    t0, t_placed, t_started, statuses = _queue_times(f, item)
    missing = t("ops.not_recorded")
    waits = [_wait(t, b - t0) for b in (t_placed, t_started) if t0 is not None and b is not None]
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses) if statuses else None
    queue = f.first(item, QUEUE_ADMISSION)
    return {"item": short(item["nodeid"]), "submitted": when(t0) or missing,
            "admitted": when(queue.get("admitted_at") if queue else None) or missing,
            "placed": when(t_placed) or missing,
            "started": when(t_started) or missing, "wait": " / ".join(waits) or missing,
            "restarts": missing if restarts is None else str(restarts)}


def _wait(t: Text, seconds: float) -> str:
    """A wait in seconds; the kubelet and apiserver stamp whole seconds, so a start stamped in the second of
    the submission (a small negative difference) reads as under a second, not as a negative wait."""
    return t("ops.subsecond") if -1.0 < seconds < 0 else t("ops.seconds", value=number(seconds, 2))


# ---------------------------------------------------------------- phases and scenarios


def _coverage(t: Text, state: str, what: str, items: list[ItemDict], detail: str) -> Coverage:
    ids = [short(i["nodeid"]) for i in items]
    return {"what": what, "state": state, "state_text": t(f"cov.{state}"), "proof": ids[:6],
            "more": max(0, len(ids) - 6), "detail": detail}


def phases(f: Facts, t: Text, signoff: SignoffView) -> list[Coverage]:
    """The four acceptance phases, each covered / partly covered / not covered / contradicted, with its items."""
    disc = f.by_layer["discovery"]
    ok = [i for i in disc if i["status"] == "passed"]
    state = "not_covered" if not disc else "covered" if len(ok) == len(disc) else "partial" if ok else "against"
    out = [_coverage(t, state, t("phase.catalogue"), ok, t("d.catalogue", passed=len(ok), total=len(disc)))]
    out.append(_placement(f, t))
    digests = [i for i in f.with_kind[DIGEST.name] if all(
        d["observed"] == d["expected"] or not d["expected"] for d in f.all(i, DIGEST))]
    images = [i for i in f.by_layer["startup"] if image_digest(f, i)]
    read = signoff_state(signoff)
    signed = read.state == "verified"  # a signature nobody checked proves nothing
    state = "covered" if signed and digests else "partial" if signed or digests else "not_covered"
    signature = t("d.signed") if signed else t("d.signed_unverified") if read.run_signer else t("d.unsigned")
    detail = t("d.evidence", signature=signature, digests=len(digests), images=len(images))
    out.append(_coverage(t, state, t("phase.evidence"), digests, detail))
    diff = f.baseline_diff
    if not diff or "error" in diff:
        out.append(_coverage(t, "not_covered", t("phase.expansion"), [], t("d.no_baseline")))
    else:
        counts = diff["counts"]  # every transition's count (bundle.baseline.TransitionCounts)
        bad = counts["regression"] + counts["new_failure"]
        out.append(_coverage(t, "against" if bad else "covered", t("phase.expansion"), [], t(
            "d.expansion", run=diff["baseline"]["run"], regressions=counts["regression"],
            new=counts["new_failure"])))
    return out


def probes(f: Facts, kind: str) -> tuple[list[ItemDict], list[ItemDict]]:
    """(passed, failed or errored) governance probe items of ``kind`` (``governance.probe`` record's
    ``probe_kind``, e.g. ``tenant-isolation``, ``attribution``): the only facts that prove a tenant
    boundary or usage attribution. A probe that was not applicable, blocked or not run is in neither."""
    mine = [i for i in f.with_kind[PROBE.name] if any(d["probe_kind"] == kind for d in f.all(i, PROBE))]
    return ([i for i in mine if i["status"] == "passed"], [i for i in mine if i["status"] in ("failed", "error")])


def _placement(f: Facts, t: Text) -> Coverage:
    """Phase 2: placements and Pending reasons from the placement items (governance probes are not
    placements); "no boundary crossed" only from a tenant-isolation probe that ran and passed."""
    items = [i for i in f.by_layer["scheduling"] if not f.first(i, PROBE)]
    placed = [i for i in items if i["status"] == "passed"]
    failed = [i for i in items if i["status"] in ("failed", "error")]
    unexplained = [i for i in failed if ((fl := failure_of(i)) and fl["category"]) in ("scheduling_timeout", None)]
    mismatch = [i for i in failed if ((fl := failure_of(i)) and fl["category"]) == "allocation_mismatch"]
    tenants, crossed = probes(f, "tenant-isolation")
    if not placed and not failed and not tenants and not crossed:
        return _coverage(t, "not_covered", t("phase.placement"), [], t("d.placement_none", backends=", ".join(
            f.backends)))
    boundary = t("d.boundary_crossed", count=len(crossed)) if crossed else t(
        "d.boundary", count=len(tenants)) if tenants else t("d.boundary_none")
    state = "against" if mismatch or crossed else "covered" if placed and not unexplained and tenants \
        else "partial"
    return _coverage(t, state, t("phase.placement"), placed + [i for i in failed if i not in unexplained] + tenants,
                     t("d.placement", placed=len(placed), explained=len(failed) - len(unexplained),
                       unexplained=len(unexplained)) + t("verdict.join") + boundary)


def scenarios(f: Facts, t: Text) -> list[Coverage]:
    """The four POC scenarios, each with the items that prove it (or "not covered" and why). Usage
    attribution is covered only by an attribution probe that passed; device samples alone prove nothing
    about who the usage is counted to."""
    out = [_new_resource(f, t)]
    queued = [i for i in f.by_layer["scheduling"] if i["status"] == "passed" and _queue(f, i)]
    queues = sorted({str(_queue(f, i)) for i in queued})
    out.append(_coverage(t, "partial", t("scn.training"), queued, t("d.training", queues=", ".join(queues)))
               if queued else _coverage(t, "not_covered", t("scn.training"), [], t("d.training_none")))
    out.append(_inference(f, t))
    sampled = [i for i in f.with_kind[USAGE.name] if any(d["available"] for d in f.all(i, USAGE))]
    attributed, miscounted = probes(f, "attribution")
    if miscounted:
        out.append(_coverage(t, "against", t("scn.usage"), miscounted, t("d.usage_against", count=len(miscounted))))
    elif attributed:
        out.append(_coverage(t, "covered", t("scn.usage"), attributed, t("d.usage", count=len(attributed),
                                                                          samples=len(sampled))))
    else:
        out.append(_coverage(t, "not_covered", t("scn.usage"), [], t("d.usage_none", samples=len(sampled))))
    return out


def _new_resource(f: Facts, t: Text) -> Coverage:
    # per matrix × resource, the statuses of its items of each lower layer (each layer's set, empty without items)
    status: dict[tuple[str, str], dict[str, set[str]]] = {}
    for item in f.items:
        if item["layer"] in ("discovery", "scheduling", "startup"):
            key = (matrix_of_item(item), str(dims(item).resource))
            status.setdefault(key, {"discovery": set(), "scheduling": set(), "startup": set()})[item["layer"]].add(
                item["status"])
    full = [k for k, s in status.items() if all(s[x] == {"passed"} for x in ("discovery", "scheduling", "startup"))]
    part = [k for k, s in status.items() if k not in full and s["discovery"] == {"passed"} and "passed" in s["startup"]]
    proof = [i for i in f.by_layer["discovery"] if (matrix_of_item(i), str(dims(i).resource)) in full + part]
    if full:
        return _coverage(t, "covered", t("scn.new_resource"), proof, t("d.new_resource", count=len(full)))
    if part:
        return _coverage(t, "partial", t("scn.new_resource"), proof, t("d.new_resource_partial", count=len(part)))
    return _coverage(t, "not_covered", t("scn.new_resource"), [], t("d.catalogue", passed=0, total=len(status)))


def _inference(f: Facts, t: Text) -> Coverage:
    served = [i for i in f.by_layer["model"] if (ident := f.first(i, IDENTITY)) and ident.get("serving")]
    if not served:
        return _coverage(t, "not_covered", t("scn.inference"), [], t("d.inference_none"))
    aspects = {
        "version": [i for i in served if i["status"] == "passed"],
        "entry": [i for i in f.by_layer["startup"] if i["status"] == "passed" and f.first(i, SERVING_AUTH) is not None],
        "permission": [i for i in f.with_kind[SERVING_AUTH.name] if any(d["protected"] for d in
                                                                        f.all(i, SERVING_AUTH))],
        "observability": [i for i in f.with_kind["serving.load"] if i["status"] == "passed"],
        "rollback": [i for i in f.with_kind[ROLLBACK.name] if any(d["status"] == "verified" for d in
                                                                  f.all(i, ROLLBACK))],
    }
    notes = t.join([f"{t('aspect.' + k)}: {t('cov.covered') if v else t('cov.not_covered')}"
                    for k, v in aspects.items()])
    state = "covered" if all(aspects.values()) else "partial" if any(aspects.values()) else "not_covered"
    proof = list({i["nodeid"]: i for v in aspects.values() for i in v}.values())
    return _coverage(t, state, t("scn.inference"), proof, notes)


# ---------------------------------------------------------------- untested scope


def untested(f: Facts, t: Text) -> Untested:
    """``{"groups": [{"reason", "count", "examples", "who", "how"}], "more", "never": [lines], "none"}``:
    untested items grouped by why, each with the team or person who can close the group and how, then
    the parts of items that ran but were not proven (``untested.not_proven``, grouped by layer and part).
    "Nothing untested" (``none``) only when there is none of either and nothing is never covered."""
    by_id = {i["nodeid"]: i for i in f.items}
    groups: dict[tuple[str, str], UntestedGroup] = {}
    for entry in f.evidence["untested"]["items"]:
        key, label, who, how = _group(f, t, entry, by_id)
        group = groups.setdefault(key, {"reason": label, "count": 0, "examples": [], "who": who, "how": how})
        group["count"] += 1
        if len(group["examples"]) < 3:
            group["examples"].append(short(entry["nodeid"]))
    ordered = sorted(groups.values(), key=lambda g: (-g["count"], g["reason"]))
    never = [t("un.never", matrix=m, dimension=t(f"dim.{d}") if d in _DIMS else d, values=", ".join(v))
             for m, gaps in sorted(f.evidence["untested"]["never_covered"].items())
             for d, v in sorted(gaps.items())]
    parts: dict[tuple[str, str], UntestedGroup] = {}
    for gap in f.evidence["untested"]["not_proven"]:
        layer, part = str(gap["layer"] or ""), str(gap["part"] or "")
        group = parts.setdefault((layer, part), {
            "reason": t("un.part", layer=t.layer(layer), part=part), "count": 0, "examples": [],
            "who": t.team(owned["owner"] if (owned := by_id.get(str(gap["nodeid"]))) else ""),
            "how": cut(str(gap["reason"] or ""), 300)})
        group["count"] += 1
        if len(group["examples"]) < 3:
            group["examples"].append(short(str(gap["nodeid"] or "")))
    ordered += sorted(parts.values(), key=lambda g: (-g["count"], g["reason"]))
    return {"groups": ordered[:UNTESTED_GROUPS], "more": max(0, len(ordered) - UNTESTED_GROUPS), "never": never,
            "none": "" if ordered or never else t("un.none")}


_DIMS = frozenset({"resource", "image", "model", "dataset", "resource_without_business_pass"})


def _group(f: Facts, t: Text, entry: UntestedEntry, by_id: dict[str, ItemDict]
           ) -> tuple[tuple[str, str], str, str, str]:
    """(group key, reason in words, who can close it, how) of one untested entry."""
    status, layer = entry["status"], entry["layer"]
    reason = str(entry["reason"] or "")
    blocked_by = entry["blocked_by"]
    if status == "blocked" and blocked_by:
        root = by_id.get(blocked_by)
        failure = failure_of(root) if root else None
        return ((status, blocked_by), t("un.blocked", root=short(blocked_by)),
                t.team((failure["owner"] if failure else "") or (root["owner"] if root else "")),
                t("how.blocked", category=failure["category"] if failure else "?"))
    if status == "not_applicable":
        backends = ", ".join(f.backends)
        return ((status, layer), t("un.not_applicable", layer=t.layer(layer), backends=backends),
                t.team(owned["owner"] if (owned := by_id.get(entry["nodeid"])) else ""), t("how.not_applicable",
                                                                                  layer=t.layer(layer)))
    if status == "excluded":
        return (status, reason), t("un.excluded", reason=reason), t("who.matrix"), t("how.excluded")
    key = f"un.{status}" if status in ("deselected", "not_run", "skipped") else "un.skipped"
    how = f"how.{status}" if status in ("deselected", "not_run", "skipped") else "how.skipped"
    return (status, reason), t(key, reason=reason), t("who.runner"), t(how)


# ---------------------------------------------------------------- reproduce


def reproduce(f: Facts, t: Text) -> list[tuple[str, str]]:
    """(label, text) rows: the exact command, where to run it, verify and render commands, matrix digests,
    tool version, source commit, environment and target versions."""
    run = f.run
    invocation = run.invocation
    command = "python -m pytest " + shlex.join(map(str, invocation)) if isinstance(invocation, list) \
        else t("rep.not_recorded")
    rid = str("RUN" if run.id is None else run.id)
    rows = [(t("rep.command"), command), ("", t("rep.cwd", rootdir=run.rootdir or "."))]
    rows.append((t("rep.verify"), f"hetero verify reports/{rid} --key KEY.pub"))
    rows.append((t("rep.render"), f"hetero render reports/{rid} --format dossier --lang {t.lang} --pdf "
                                  f"--out dossier-{rid}-{t.lang}.pdf"))
    rows += [(t("rep.matrix"), f"{m['name']}: sha256 {m['sha256']}") for m in f.matrices]
    tool = "pytest-hetero" if run.tool is None else run.tool
    rows.append((t("rep.tool"), f"{tool} {'?' if run.tool_version is None else run.tool_version}"))
    rows.append((t("rep.git"), str(run.git_commit or t("rep.not_recorded"))))
    rows.append((t("rep.env"), t("rep.env_value", host=_or_unknown(run.host), python=_or_unknown(run.python),
                                 pytest=_or_unknown(run.pytest))))
    for target in f.targets:
        versions = ", ".join(f"{k} {v}" for k, v in sorted((target.versions or {}).items()))
        images = ", ".join(f"{k} {digest(v, 16)}" for k, v in sorted((target.images or {}).items()))
        rows.append((str(target.backend), "; ".join(x for x in (versions, images) if x)))
    return rows


def _or_unknown(value: str | None) -> str:
    """A run field as the reproduce rows show it: ``?`` when the run section lacks it."""
    return "?" if value is None else value
