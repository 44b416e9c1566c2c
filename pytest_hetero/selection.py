"""Which planned items a run executes: profile (graded depth), affected-only, shard.

Applied in that order, each to what the previous step kept, and the first step that drops an
item gives its reason, recorded in untested scope:

- profile ``quick``: ``deselected (profile quick)`` for layers the profile leaves out and, when
  ``representative``, for every image/combination but the first of each resource;
- affected-only (``--hetero-affected dim=value,…`` or ``--hetero-affected-from OLD``): items
  matching a selector (every dimension it names equals the item's) or whose claim changed since
  the old matrix, plus their dependencies; others ``deselected (not affected: …)`` /
  ``deselected (unchanged since OLD)``;
- shard ``K/N``: whole resource subtrees (so an item never leaves its dependencies), assigned
  by item count, largest first, to the least-loaded shard, ties broken by a stable sha256 of
  ``matrix/resource``; others ``deselected (shard K/N: runs in shard J/N)``.

The pure part (:func:`select`) is shared by the pytest hook and ``hetero plan``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_hetero import LAYERS
from pytest_hetero.errors import HeteroError, SettingsError
from pytest_hetero.matrix.diff import changed_items
from pytest_hetero.matrix.expand import Plan, PlannedItem, expand
from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.matrix.model import Matrix, Profile
from pytest_hetero.stash import DESELECTED, PLANS, RECORDER, SETTINGS

BUILTIN_PROFILES: dict[str, Profile] = {
    "quick": Profile("quick", ("discovery", "scheduling", "startup"), representative=True),
    "nightly": Profile("nightly", LAYERS),
    "full": Profile("full", LAYERS, repeat=3),
}
"""Profiles every matrix has unless it declares one of the same name under ``spec.profiles``."""
DIMENSIONS = ("resource", "image", "model", "dataset")
SHARD_REASON = "deselected (shard "
_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Request:
    """What the user asked: profile name, affected selectors (dimension → value, ANDed within
    one selector, ORed across), an old matrix to diff against, and ``shard`` as (K, N), 1-based."""

    profile: str | None = None
    selectors: tuple[dict[str, str], ...] = ()
    affected_from: Matrix | None = None
    shard: tuple[int, int] | None = None

    @property
    def active(self) -> bool:
        """True when anything is asked, i.e. some item may be deselected."""
        return bool(self.profile or self.selectors or self.affected_from or self.shard)


@dataclass
class Selection:
    """Outcome over all matrices: ``deselected`` and ``affected`` map ``prefix::item id`` to the
    reason; ``shard_of`` maps ``(matrix name, resource)`` to its 1-based shard."""

    deselected: dict[str, str] = field(default_factory=dict)
    affected: dict[str, str] = field(default_factory=dict)
    shard_of: dict[tuple[str, str], int] = field(default_factory=dict)
    profiles: dict[str, str] = field(default_factory=dict)


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` → (K, N) with 1 ≤ K ≤ N. Raises SettingsError otherwise (e.g. ``3/2``)."""
    m = _SHARD.match(text)
    if not m:
        raise SettingsError(f"--hetero-shard {text!r} is not K/N", hint="e.g. --hetero-shard 1/4")
    k, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= k <= n:
        raise SettingsError(f"--hetero-shard {text}: K must be between 1 and N (got K={k}, N={n})",
                            hint=f"shards are numbered 1..{max(n, 1)}")
    return k, n


def parse_selector(text: str) -> dict[str, str]:
    """``"resource=a,image=b"`` → ``{"resource": "a", "image": "b"}``. Raises SettingsError for
    an unknown dimension, a missing ``=`` or a dimension given twice."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        dim, sep, value = part.partition("=")
        dim, value = dim.strip(), value.strip()
        if not sep or not value:
            raise SettingsError(f"--hetero-affected {text!r}: {part!r} is not DIMENSION=VALUE",
                                hint="e.g. --hetero-affected image=py311,resource=gpu-a100")
        if dim not in DIMENSIONS:
            raise SettingsError(f"--hetero-affected {text!r}: unknown dimension {dim!r}",
                                hint=f"dimensions are {', '.join(DIMENSIONS)}")
        if dim in out:
            raise SettingsError(f"--hetero-affected {text!r}: {dim} given twice",
                                hint="repeat --hetero-affected for alternatives")
        out[dim] = value
    if not out:
        raise SettingsError("--hetero-affected needs at least one DIMENSION=VALUE")
    return out


def resolve_profile(matrix: Matrix, name: str) -> Profile:
    """The matrix's profile ``name``, else the built-in one. Raises SettingsError when neither."""
    if name in matrix.profiles:
        return matrix.profiles[name]
    if name in BUILTIN_PROFILES:
        return BUILTIN_PROFILES[name]
    known = sorted(set(matrix.profiles) | set(BUILTIN_PROFILES))
    raise SettingsError(f"--hetero-profile {name!r}: matrix {matrix.name} has no such profile",
                        hint=f"known profiles: {', '.join(known)}")


def _representative(plan: Plan) -> dict[str, tuple[str, str | None]]:
    rep: dict[str, tuple[str, str | None]] = {}
    for item in plan.items:
        res = item.keys["resource"]
        if item.layer == "startup" and res not in rep:
            rep[res] = (item.keys["image"], None)
        elif item.layer == "model" and res in rep and rep[res][1] is None \
                and item.keys["image"] == rep[res][0]:
            rep[res] = (rep[res][0], f"{item.keys['model']}@{item.keys['dataset']}")
    return rep


def _by_profile(profile: Profile, plan: Plan) -> dict[str, str]:
    reason = f"deselected (profile {profile.name})"
    rep = _representative(plan) if profile.representative else {}
    out: dict[str, str] = {}
    for item in plan.items:
        image, combo = rep.get(item.keys["resource"], (None, None))
        if item.layer not in profile.layers or profile.representative and (
                ("image" in item.keys and item.keys["image"] != image)
                or ("model" in item.keys and f"{item.keys['model']}@{item.keys['dataset']}" != combo)):
            out[item.id] = reason
    return out


def _with_dependencies(ids: set[str], by_id: dict[str, PlannedItem]) -> set[str]:
    out = set(ids)
    for start in ids:
        dep = by_id[start].depends_on
        while dep is not None and "::".join(dep) in by_id:
            out.add("::".join(dep))
            dep = by_id["::".join(dep)].depends_on
    return out


def _check_selectors(selectors: tuple[dict[str, str], ...], matrices: list[Matrix]) -> None:
    for sel in selectors:
        for dim, value in sel.items():
            known = sorted({v.name for m in matrices for v in getattr(m, dim + "s")})
            if value not in known:
                raise SettingsError(f"--hetero-affected: unknown {dim} {value!r} (not in any collected matrix)",
                                    hint=f"known {dim}s: {', '.join(known)}")


def _plan_uses_image(plan: Plan) -> bool:
    return any(i.layer == "scheduling" and "image" in i.keys for i in plan.items)


def select(request: Request, plans: list[tuple[str, Matrix, Plan]]) -> Selection:
    """Apply ``request`` to ``plans`` (matrix nodeid prefix, matrix, plan). Raises SettingsError
    for an unknown profile, a selector value in no matrix, or an old matrix of another name."""
    out = Selection()
    _check_selectors(request.selectors, [m for _, m, _ in plans])
    if request.affected_from is not None and not any(m.name == request.affected_from.name for _, m, _ in plans):
        raise SettingsError(f"--hetero-affected-from: old matrix is {request.affected_from.name!r}, "
                            f"collected: {', '.join(m.name for _, m, _ in plans) or 'none'}",
                            hint="pass an earlier version of the same matrix (same metadata.name)")
    kept_counts: dict[tuple[str, str], int] = {}
    for prefix, matrix, plan in plans:
        by_id = plan.by_id()
        drop: dict[str, str] = {}
        if request.profile:
            profile = resolve_profile(matrix, request.profile)
            out.profiles[matrix.name] = profile.name
            drop.update(_by_profile(profile, plan))
        hits: dict[str, str] | None = None
        why = ""
        if request.selectors:
            texts = [",".join(f"{k}={v}" for k, v in s.items()) for s in request.selectors]
            hits = {i.id: "matches --hetero-affected " + t for i in plan.items
                    for s, t in zip(request.selectors, texts)
                    if all(i.keys.get(k) == v for k, v in s.items())}
            why = f"deselected (not affected: {' | '.join(texts)})"
        old = request.affected_from
        if old is not None and old.name == matrix.name:
            hits = hits or {}
            old_plan = expand(old, scheduling_per_image=_plan_uses_image(plan))
            hits.update({k: v for k, v in changed_items(old, old_plan, matrix, plan).items() if k not in hits})
            why = (why[:-1] + f" | unchanged since {old.path.name})") if why else \
                f"deselected (unchanged since {old.path.name})"
        if hits is not None:
            keep = _with_dependencies(set(hits), by_id)
            for item in plan.items:
                if item.id in keep and item.id not in drop:
                    out.affected[f"{prefix}::{item.id}"] = hits.get(item.id, "dependency of an affected item")
                elif item.id not in keep:
                    drop.setdefault(item.id, why)
        for item in plan.items:
            unit = (matrix.name, item.keys["resource"])
            kept_counts.setdefault(unit, 0)
            if item.id not in drop:
                kept_counts[unit] += 1
        out.deselected.update({f"{prefix}::{i}": r for i, r in drop.items()})
    if request.shard:
        k, n = request.shard
        out.shard_of = assign_shards(kept_counts, n)
        for prefix, matrix, plan in plans:
            for item in plan.items:
                nodeid = f"{prefix}::{item.id}"
                owner = out.shard_of[(matrix.name, item.keys["resource"])]
                if owner != k and nodeid not in out.deselected:
                    out.deselected[nodeid] = f"{SHARD_REASON}{k}/{n}: runs in shard {owner}/{n})"
    return out


def assign_shards(counts: dict[tuple[str, str], int], n: int) -> dict[tuple[str, str], int]:
    """Map each (matrix name, resource) unit with its item count to a shard 1..N: largest first
    to the least-loaded shard (lowest number on ties); units of equal count ordered by
    sha256 of ``matrix/resource``, so every shard computes the same split."""
    def stable(unit: tuple[str, str]) -> str:
        return hashlib.sha256(f"{unit[0]}/{unit[1]}".encode()).hexdigest()

    load = [0] * n
    out: dict[tuple[str, str], int] = {}
    for unit in sorted(counts, key=lambda u: (-counts[u], stable(u))):
        target = min(range(n), key=lambda s: (load[s], s))
        load[target] += counts[unit]
        out[unit] = target + 1
    return out


def build_request(settings: Any) -> Request:
    """Parse the run settings into a :class:`Request`. Raises HeteroError (SettingsError for bad
    values, MatrixError when the old matrix of ``--hetero-affected-from`` is invalid)."""
    old = load_matrix(settings.affected_from) if settings.affected_from else None
    return Request(profile=settings.profile, selectors=tuple(parse_selector(s) for s in settings.affected),
                   affected_from=old, shard=parse_shard(settings.shard) if settings.shard else None)


def usage_error(exc: HeteroError) -> pytest.UsageError:
    """A UsageError with the error's text (file:line prefix only when it has a file)."""
    text = exc.render() if exc.location.file else exc.message + (f"\n  hint: {exc.hint}" if exc.hint else "")
    return pytest.UsageError(text)


def in_bundle(path: Path, report_dir: Path) -> bool:
    """True for files inside the report folder or an evidence bundle (bundles keep matrix copies)."""
    resolved = path.resolve()
    return report_dir in resolved.parents or any((p / "journal.jsonl").exists() for p in resolved.parents)


REQUEST = pytest.StashKey[Request]()
SELECTION = pytest.StashKey[Selection]()


def matrices_in_args(config: pytest.Config) -> list[tuple[str, Matrix, Plan]]:
    """(nodeid prefix, matrix, plan) of the matrix files the session will collect (command-line
    paths matching ``hetero_matrix_glob`` or given with ``--hetero-matrix``, folders searched),
    loaded ahead of collection; files that fail to load are left for collection to report."""
    settings = config.stash[SETTINGS]
    found: list[Path] = []
    for arg in config.args:
        path = Path(str(arg).split("::", 1)[0]).resolve()
        if path.is_dir():
            found += sorted(p for p in path.rglob(settings.matrix_glob)
                            if not in_bundle(p, settings.report_dir) and p.resolve() != settings.affected_from)
        elif path.is_file() and (fnmatch.fnmatch(path.name, settings.matrix_glob) or path in settings.matrices):
            found.append(path)
    out = []
    for path in dict.fromkeys(found):
        try:
            matrix = load_matrix(path)
            cls = config.hook.pytest_hetero_backend_class(name=settings.backend or matrix.backend)
        except Exception:  # noqa: BLE001, S112 - collection reports it with file and line
            continue
        plan = expand(matrix, scheduling_per_image=bool(getattr(cls, "scheduling_per_image", False)))
        try:
            prefix = path.relative_to(config.rootpath).as_posix()
        except ValueError:
            prefix = path.as_posix()
        out.append((prefix, matrix, plan))
    return out


def pytest_sessionstart(session: pytest.Session) -> None:
    """Parse profile/affected/shard options and check them against the matrices before collection,
    so a bad value is a usage error before anything runs. On a pytest-xdist controller, which
    collects nothing itself, also journal the matrices and the deselections here."""
    config = session.config
    recorder = config.stash.get(RECORDER, None)
    controller = recorder is not None and config.pluginmanager.getplugin("dsession") is not None
    try:
        request = config.stash[REQUEST] = build_request(config.stash[SETTINGS])
        plans = matrices_in_args(config) if request.active or controller else []
        selection = select(request, plans) if request.active and plans else Selection()
    except HeteroError as exc:
        raise usage_error(exc) from None
    if controller and recorder is not None:
        for prefix, matrix, plan in plans:
            recorder.matrix(str(matrix.path), prefix, matrix.name, matrix.sha256, _plan_uses_image(plan))
        config.stash[DESELECTED].update(selection.deselected)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The old matrix of ``--hetero-affected-from`` is a reference, never a matrix to run."""
    settings = config.stash.get(SETTINGS, None)
    if settings is not None and settings.affected_from == collection_path.resolve():
        return True
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect what the profile, affected-only and shard leave out, with reasons (after -k/-m)."""
    request = config.stash[REQUEST]
    if not request.active:
        return
    plans = [(prefix, matrix, plan) for prefix, (matrix, plan) in config.stash[PLANS].items()]
    try:
        selection = select(request, plans)
    except HeteroError as exc:
        raise usage_error(exc) from None
    config.stash[SELECTION] = selection
    def key(item: pytest.Item) -> str:
        return str(getattr(item, "claim_id", item.nodeid))  # xdist may decorate nodeid

    keep = [i for i in items if key(i) not in selection.deselected]
    dropped = [i for i in items if key(i) in selection.deselected]
    if dropped:
        items[:] = keep
        config.hook.pytest_deselected(items=dropped)
        for item in dropped:
            config.stash[DESELECTED][key(item)] = selection.deselected[key(item)]


@pytest.hookimpl(tryfirst=True)
def pytest_hetero_write_reports(evidence: dict[str, Any], bundle_dir: Any, settings: Any) -> None:
    """Add the ``selection`` section (what was asked, deselections by reason) to evidence.json."""
    if not (settings.profile or settings.affected or settings.affected_from or settings.shard):
        return
    from pytest_hetero.baseline import rewrite_evidence

    reasons: dict[str, int] = {}
    for entry in evidence["untested"]["items"]:
        if entry["status"] == "deselected":
            reasons[entry["reason"]] = reasons.get(entry["reason"], 0) + 1
    evidence["selection"] = {
        "profile": settings.profile, "affected": list(settings.affected),
        "affected_from": str(settings.affected_from) if settings.affected_from else None,
        "shard": settings.shard.replace(" ", "") if settings.shard else None, "deselected": reasons,
        "profiles": _profiles(evidence, settings.profile)}
    rewrite_evidence(bundle_dir, evidence)


def _profiles(evidence: dict[str, Any], name: str | None) -> dict[str, dict[str, Any]]:
    """Matrix name → the profile that ran (layers, representative, repeat: with ``repeat`` > 1 each
    model item runs that many times and its business item judges every sample)."""
    out: dict[str, dict[str, Any]] = {}
    if name is None:
        return out
    for entry in evidence.get("matrices", []):
        try:
            profile = resolve_profile(load_matrix(entry["path"]), name)
        except HeteroError:
            continue
        out[entry["name"]] = {"name": profile.name, "layers": list(profile.layers),
                              "representative": profile.representative, "repeat": profile.repeat}
    return out
