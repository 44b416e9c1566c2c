"""The matrices of one run, each read at most once after the run, and their copies kept in the bundle.

Assembly (re-planning untested scope), the ``selection`` section (profiles), the sign-off owners
and the copies under ``inputs/`` all need the run's matrices. The pytest controller already holds
them (collected, or loaded ahead of collection under pytest-xdist), so they are handed in here;
a matrix it does not hold (``hetero report --from-journal``, ``hetero merge``) is loaded from its
file once, on first use.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_hetero.errors import MatrixError

if TYPE_CHECKING:
    from pytest_hetero.matrix.expand import Plan
    from pytest_hetero.matrix.model import Matrix

INPUTS = "inputs"
"""Bundle folder holding a copy of each matrix file (secrets redacted)."""


class RunInputs:
    """The run's matrices by journal entry (``{"path", "prefix", "name", "sha256"}``, as in
    evidence.json's ``matrices`` list and the journal's ``matrix`` lines).

    ``held`` maps a nodeid prefix to the (Matrix, Plan) the caller already has; it answers for an
    entry with the same prefix, path and sha256. Anything else is loaded from the entry's path
    once (a file that no longer loads raises the same MatrixError each time it is asked for).
    """

    def __init__(self, held: Mapping[str, tuple[Matrix, Plan]] | None = None) -> None:
        self._held = dict(held or {})
        self._loaded: dict[str, Matrix | MatrixError] = {}
        self.kept: list[tuple[str, str]] = []
        """``[(bundle path, statement digest)]`` of the matrix copies :meth:`keep` wrote."""

    def _held_for(self, entry: Mapping[str, Any]) -> tuple[Matrix, Plan] | None:
        held = self._held.get(str(entry.get("prefix")))
        if held is None or held[0].sha256 != entry.get("sha256") or str(held[0].path) != str(entry.get("path")):
            return None
        return held

    def matrix(self, entry: Mapping[str, Any]) -> Matrix:
        """The Matrix of ``entry``. Raises MatrixError when it is not held and its file no longer loads."""
        held = self._held_for(entry)
        if held is not None:
            return held[0]
        path = str(entry["path"])
        if path not in self._loaded:
            from pytest_hetero.matrix.load import load_matrix

            try:
                self._loaded[path] = load_matrix(path)
            except MatrixError as exc:
                self._loaded[path] = exc
        found = self._loaded[path]
        if isinstance(found, MatrixError):
            raise found
        return found

    def plan(self, entry: Mapping[str, Any], scheduling_per_image: bool) -> Plan:
        """The plan of ``entry``'s matrix as collection expanded it (``scheduling_per_image`` as the
        backend planned). Raises MatrixError like :meth:`matrix`."""
        from pytest_hetero.matrix.expand import expand, plan_uses_image

        held = self._held_for(entry)
        if held is not None and plan_uses_image(held[1]) == scheduling_per_image:
            return held[1]
        return expand(self.matrix(entry), scheduling_per_image=scheduling_per_image)

    def copy(self, entry: Mapping[str, Any]) -> tuple[bytes, str]:
        """The bytes kept in ``inputs/`` for ``entry`` and the sha256 the signed statement records for them.

        Secrets in the file (URL credentials or a bearer token in a description, environment
        secrets, the matrix's own ``spec.redact`` patterns) are redacted. The digest is that of the
        kept bytes when the file is still the one that ran, else the sha256 recorded at run time
        (so verification shows a matrix edited after the run). Raises OSError when the file is
        unreadable.
        """
        from pytest_hetero.evidence.model import sha256_text
        from pytest_hetero.redact import Redactor

        raw = Path(entry["path"]).read_bytes()
        try:
            extra: tuple[tuple[str, str], ...] = self.matrix(entry).redact
        except MatrixError:
            extra = ()
        kept = Redactor(extra=extra).bytes(raw)
        return kept, sha256_text(kept) if sha256_text(raw) == entry["sha256"] else str(entry["sha256"])

    def keep(self, evidence: dict[str, Any], bundle_dir: Path) -> list[tuple[str, str]]:
        """Copy each matrix of ``evidence`` (secrets redacted) to ``inputs/<name>.matrix.yaml`` under
        ``bundle_dir``; return and remember in :attr:`kept` ``[(bundle path, statement digest)]``
        (see :meth:`copy`). A file that cannot be read is reported on stderr and left out."""
        import sys

        self.kept = []
        for m in evidence["matrices"]:
            rel = f"{INPUTS}/{m['name']}.matrix.yaml"
            (bundle_dir / INPUTS).mkdir(exist_ok=True)
            try:
                data, digest = self.copy(m)
                (bundle_dir / rel).write_bytes(data)
            except OSError as exc:
                sys.stderr.write(f"pytest-hetero: cannot copy matrix {m['path']} into the bundle: {exc.strerror}\n")
                continue
            self.kept.append((rel, digest))
        return self.kept
