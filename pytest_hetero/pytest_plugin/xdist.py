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
