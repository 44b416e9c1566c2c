"""pytest-xdist scheduling that keeps each resource's items on one worker, in dependency order.

Gating reads the dependency's outcome from the dependency item on the same process, so a
resource's subtree (discovery → scheduling → startup → model → business) must not be split.
Items of matrix files are grouped by ``<matrix file>::<resource>``; any other test is its own
scope, which keeps plain tests distributed one by one as with ``--dist load``.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadScopeScheduling

MATRIX_SUFFIX = ".matrix.yaml::"


class ResourceScopeScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """LoadScope scheduling whose scope of a matrix item is its matrix file and resource."""

    def _split_scope(self, nodeid: str) -> str:
        """``m.matrix.yaml::cpu-a::py::startup`` → ``m.matrix.yaml::cpu-a``; other ids → themselves."""
        head, sep, rest = nodeid.partition(MATRIX_SUFFIX)
        if not sep:
            return nodeid
        return head + sep + rest.split("::", 1)[0]


def make_scheduler(config: Any, log: Any) -> ResourceScopeScheduling | None:
    """Our scheduler for the default ``--dist load``; None (xdist decides) for any explicit other mode."""
    if config.getvalue("dist") != "load":
        return None
    return ResourceScopeScheduling(config, log)


SPLITTING_MODES = ("loadgroup", "loadscope", "worksteal", "each")
"""``--dist`` modes that would split a resource's subtree across workers (or run it on each): gating
would then read no dependency outcome, and an item whose dependency failed on another worker would
run as if it had passed. ``load`` (this module's scheduler), ``loadfile`` and ``no`` keep it whole."""


def refused_dist(config: Any) -> str | None:
    """The usage error for a ``--dist`` mode that splits a resource's subtree, else None."""
    mode = config.getvalue("dist")
    if mode not in SPLITTING_MODES:
        return None
    return (f"pytest-hetero: --dist {mode} would split a resource's items (discovery → business) across "
            "workers, so an item whose dependency failed on another worker would run as if it had passed; "
            "use --dist load (the default with -n: each resource's items stay on one worker) or --dist loadfile")
