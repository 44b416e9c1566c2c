"""Which planned items a run executes: profile (graded depth), affected-only, shard.

Applied in that order, each to what the previous step kept, and the first step that drops an
item gives its reason, recorded in untested scope:

- profile ``quick``: ``deselected (profile quick)`` for layers the profile leaves out and, when
  ``representative``, for every image/combination but the first of each resource;
- affected-only (``--hetero-affected dim=value,…`` or ``--hetero-affected-from OLD``): items
  matching a selector (every dimension it names equals the item's) or whose claim changed since
  the old matrix (its entries, model code folders, acceptance rules, environments: see
  :mod:`pytest_hetero.matrix.diff`), plus their dependencies; others ``deselected (not affected: …)`` /
  ``deselected (unchanged since OLD: … compared)``, naming what was compared;
- shard ``K/N``: whole resource subtrees (so an item never leaves its dependencies), assigned
  by item count, largest first, to the least-loaded shard, ties broken by a stable sha256 of
  ``matrix/resource``; others ``deselected (shard K/N: runs in shard J/N)``.

The pure part (:func:`select`) is shared by the pytest hooks (:mod:`~pytest_hetero.pytest_plugin.selection`)
and ``hetero plan``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from pytest_hetero import LAYERS
from pytest_hetero.errors import SettingsError
from pytest_hetero.matrix.diff import changed_items, compared
from pytest_hetero.matrix.expand import Plan, PlannedItem, expand, plan_uses_image
from pytest_hetero.matrix.model import Matrix, Profile

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
    cluster: dict[str, dict[str, str]] | None = None
    """``--hetero-affected-from-cluster``: matrix name → {item id: the cluster change affecting it}
    (:func:`pytest_hetero.status.drift.affected_items`); a matrix absent here is left as it is."""
    cluster_label: str = ""
    """What the cluster was compared with, for the reason of the others (``bundle <run id>``)."""

    @property
    def active(self) -> bool:
        """True when anything is asked, i.e. some item may be deselected."""
        return bool(self.profile or self.selectors or self.affected_from or self.shard or self.cluster is not None)


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
    if n < 1:
        raise SettingsError(f"--hetero-shard {text}: N must be at least 1 (got N={n})",
                            hint="N is the number of shards, e.g. --hetero-shard 1/4")
    if not 1 <= k <= n:
        raise SettingsError(f"--hetero-shard {text}: K must be between 1 and N (got K={k}, N={n})",
                            hint=f"shards are numbered 1..{n}")
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


def _affected(request: Request, matrix: Matrix, plan: Plan) -> tuple[dict[str, str] | None, str]:
    """Items of ``plan`` that ``--hetero-affected`` selectors or ``--hetero-affected-from`` pick, each
    with why (None: neither option applies to this matrix), and the reason the others are dropped."""
    hits: dict[str, str] | None = None
    why = ""
    if request.selectors:
        texts = [",".join(f"{k}={v}" for k, v in s.items()) for s in request.selectors]
        hits = {i.id: "matches --hetero-affected " + t for i in plan.items
                for s, t in zip(request.selectors, texts, strict=True)
                if all(i.keys.get(k) == v for k, v in s.items())}
        why = f"deselected (not affected: {' | '.join(texts)})"
    old = request.affected_from
    if old is not None and old.name == matrix.name:
        hits = hits or {}
        old_plan = expand(old, scheduling_per_image=plan_uses_image(plan))
        hits.update({k: v for k, v in changed_items(old, old_plan, matrix, plan).items() if k not in hits})
        label = f"unchanged since {old.path.name}: {compared(old, matrix)}" if old.read_from is None else \
            f"unchanged since {old.path.name}, its paths read from {old.read_from.name}/; files it shares with " \
            "this matrix not compared"
        why = (why[:-1] + f" | {label})") if why else f"deselected ({label})"
    if request.cluster is not None and matrix.name in request.cluster:
        hits = hits or {}
        hits.update({k: v for k, v in request.cluster[matrix.name].items() if k not in hits})
        label = f"unchanged since {request.cluster_label}"
        why = (why[:-1] + f" | {label})") if why else f"deselected ({label})"
    return hits, why


def _shard(out: Selection, shard: tuple[int, int], kept_counts: dict[tuple[str, str], int],
           plans: list[tuple[str, Matrix, Plan]]) -> None:
    """Deselect every item whose (matrix, resource) unit runs in another shard than ``shard`` (K, N)."""
    k, n = shard
    out.shard_of = assign_shards(kept_counts, n)
    for prefix, matrix, plan in plans:
        for item in plan.items:
            nodeid = f"{prefix}::{item.id}"
            owner = out.shard_of[(matrix.name, item.keys["resource"])]
            if owner != k and nodeid not in out.deselected:
                out.deselected[nodeid] = f"{SHARD_REASON}{k}/{n}: runs in shard {owner}/{n})"


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
        hits, why = _affected(request, matrix, plan)
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
        _shard(out, request.shard, kept_counts, plans)
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
