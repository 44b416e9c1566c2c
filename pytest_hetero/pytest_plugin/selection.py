"""pytest hooks that apply :mod:`~pytest_hetero.matrix.selection` to a session: parse the options before
collection (a bad value is a usage error before anything runs) and deselect with reasons after
``-k``/``-m`` (the ``selection`` section of evidence.json is the built-in
``pytest_hetero_amend_evidence``). Also the matrix discovery ahead of collection that
``--hetero-baseline`` and the pytest-xdist controller share (:func:`matrices_in_args`). A session
without selection options, baseline or xdist imports no matrix code here.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_hetero.errors import HeteroError
from pytest_hetero.pytest_plugin.claims import claim_prefix
from pytest_hetero.pytest_plugin.stash import AHEAD, DESELECTED, PLANS, RECORDER, SETTINGS

if TYPE_CHECKING:
    from pytest_hetero.matrix.expand import Plan
    from pytest_hetero.matrix.model import Matrix
    from pytest_hetero.matrix.selection import Request, Selection  # noqa: F401 - named in StashKey["…"]
    from pytest_hetero.settings import Settings


def selection_asked(settings: Settings) -> bool:
    """True when a profile, affected-only or shard option was given (some item may be deselected)."""
    return bool(settings.profile or settings.affected or settings.affected_from or settings.shard
                or settings.affected_from_cluster)


def build_request(settings: Settings, current: list[Path] | None = None) -> Request:
    """Parse the run settings into a :class:`Request`; ``current`` are the matrix files of this run, among
    which the old matrix of ``--hetero-affected-from`` finds its own (see
    :func:`~pytest_hetero.matrix.load.load_earlier_version`). Raises HeteroError (SettingsError for bad
    values, MatrixError when that old matrix is invalid)."""
    from pytest_hetero.matrix.load import load_earlier_version
    from pytest_hetero.matrix.selection import Request, parse_selector, parse_shard

    old = load_earlier_version(settings.affected_from, current or []) if settings.affected_from else None
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


REQUEST = pytest.StashKey["Request"]()
SELECTION = pytest.StashKey["Selection"]()


def matrices_in_args(config: pytest.Config) -> list[tuple[str, Matrix, Plan]]:
    """(nodeid prefix, matrix, plan) of the matrix files the session will collect (command-line
    paths matching ``hetero_matrix_glob`` or given with ``--hetero-matrix``, folders searched),
    loaded ahead of collection, once per session (kept in ``config.stash[AHEAD]``, where the
    bundle finds them after the run); files that fail to load are left for collection to report."""
    if AHEAD in config.stash:
        return [(prefix, matrix, plan) for prefix, (matrix, plan) in config.stash[AHEAD].items()]
    from pytest_hetero.matrix.expand import expand
    from pytest_hetero.matrix.load import load_matrix

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
            cls = config.hook.pytest_hetero_backend(name=settings.backend or matrix.backend)
        except Exception:  # noqa: BLE001, S112 - collection reports it with file and line
            continue
        plan = expand(matrix, scheduling_per_image=bool(getattr(cls, "scheduling_per_image", False)))
        try:
            nodeid = path.relative_to(config.rootpath).as_posix()
        except ValueError:
            nodeid = path.as_posix()
        prefix = claim_prefix(config, path, nodeid)
        out.append((prefix, matrix, plan))
    config.stash[AHEAD] = {prefix: (matrix, plan) for prefix, matrix, plan in out}
    return out


def pytest_sessionstart(session: pytest.Session) -> None:
    """Parse profile/affected/shard options and check them against the matrices before collection,
    so a bad value is a usage error before anything runs. On a pytest-xdist controller, which
    collects nothing itself, also journal the matrices and the deselections here."""
    config = session.config
    recorder = config.stash[RECORDER]
    controller = recorder is not None and config.pluginmanager.getplugin("dsession") is not None
    if not (selection_asked(config.stash[SETTINGS]) or controller):
        return
    from pytest_hetero.matrix.selection import Selection, select

    try:
        earlier = matrices_in_args(config) if config.stash[SETTINGS].affected_from else None
        request = build_request(config.stash[SETTINGS], [m.path for _, m, _ in earlier or []])
        if config.stash[SETTINGS].affected_from_cluster is not None:
            from dataclasses import replace

            from pytest_hetero.pytest_plugin.drift import CLUSTER_HITS

            hits, label = config.stash[CLUSTER_HITS]
            request = replace(request, cluster=hits, cluster_label=label)
        config.stash[REQUEST] = request
        plans = (earlier if earlier is not None else matrices_in_args(config)) if request.active or controller else []
        selection = select(request, plans) if request.active and plans else Selection()
    except HeteroError as exc:
        raise usage_error(exc) from None
    if controller and recorder is not None:
        for prefix, matrix, plan in plans:
            recorder.planned(prefix, matrix, plan)
        config.stash[DESELECTED].update(selection.deselected)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The old matrix of ``--hetero-affected-from`` is a reference, never a matrix to run."""
    if config.stash[SETTINGS].affected_from == collection_path.resolve():
        return True
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect what the profile, affected-only and shard leave out, with reasons (after -k/-m)."""
    request = config.stash.get(REQUEST, None)
    if request is None or not request.active:
        return
    from pytest_hetero.matrix.selection import select

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
