"""The renderings of a bundle: report.html, summary.md, junit.xml and ctrf.json, from the evidence document,
and the acceptance dossier on demand.

Rendering only: every rendering is generated from evidence.json (never terminal text) and the
sign-off view, which the caller passes as plain data (see :mod:`pytest_hetero.bundle.signoff`).
The built-in ``pytest_hetero_write_reports`` (:mod:`pytest_hetero.hooks.builtin`) calls
:func:`write_renderings`; ``hetero render`` calls :func:`render`. Each renderer is imported when
its format is rendered.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_hetero.evidence.model import gc_paused

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import EvidenceDocument
    from pytest_hetero.evidence.views import SignoffView
    from pytest_hetero.reporting.itemtexts import ItemTexts

FORMATS: dict[str, str] = {"html": "report.html", "md": "summary.md", "junit": "junit.xml", "ctrf": "ctrf.json"}
"""Rendering format → file name in the bundle."""
HTML_BATCH = 1024
"""Strings of a rendering (report.html's template strings, junit.xml's testcases, ctrf.json's tests) joined into
one piece of :func:`pieces` (bounded memory, few writes)."""
ON_DEMAND: tuple[str, ...] = ("dossier",)
"""Formats rendered only when asked for (``hetero render --format dossier``), never written by a run."""


def render(fmt: str, evidence: EvidenceDocument, signoff: SignoffView, lang: str = "en") -> bytes:
    """Render ``evidence`` in ``fmt`` (a key of FORMATS, or ``dossier``) to bytes; ``signoff`` has the shape of
    :func:`pytest_hetero.bundle.signoff.signoff_context`; ``lang`` (``en``/``zh``) is the dossier's
    language. A character UTF-8 cannot carry (a lone surrogate from a model's outputs) becomes ``?``.
    Raises ValueError for an unknown format or language."""
    return b"".join(pieces(fmt, evidence, signoff, lang))


def pieces(fmt: str, evidence: EvidenceDocument, signoff: SignoffView, lang: str = "en",
           texts: ItemTexts | None = None) -> Iterator[bytes]:
    """:func:`render` as consecutive pieces of bytes, for a writer that need not hold the whole rendering:
    report.html as the template yields it (its whole text was about three times the page at 1,500 detailed
    items), junit.xml and ctrf.json a test at a time (neither their documents nor their texts are held whole),
    each :data:`HTML_BATCH` strings per piece; summary.md and the dossier as one piece. ``texts`` are the
    items' JUnit and CTRF texts rendered during the run (joined, not rendered again: the bytes are the same). Raises as
    :func:`render` does, when iterated."""
    if fmt == "dossier":
        from pytest_hetero.reporting.dossier import render_dossier
        from pytest_hetero.reporting.dossier_text import LANGS

        if lang not in LANGS:
            raise ValueError(f"unknown language {lang!r}; choose from {', '.join(LANGS)}")
        yield render_dossier(evidence, signoff, "zh" if lang == "zh" else "en").encode("utf-8", "replace")
        return
    if lang != "en":
        raise ValueError(f"--lang applies to the dossier only; {fmt} is rendered in English")
    if fmt == "html":
        from pytest_hetero.reporting.html import html_chunks

        # the template yields ~20 strings per item: encoded and written BATCH at a time, not one by one
        yield from _batched(html_chunks(evidence, signoff), "replace")
    elif fmt == "md":
        from pytest_hetero.reporting.markdown import render_markdown

        yield render_markdown(evidence, signoff).encode("utf-8", "replace")
    elif fmt == "junit":
        from pytest_hetero.reporting.junit import junit_text

        yield from _batched(junit_text(evidence, signoff, texts), "strict")  # render_junit's bytes, piece by piece
    elif fmt == "ctrf":
        from pytest_hetero.reporting.ctrf import ctrf_text

        # keys in the fixed order render_ctrf builds them (no sort_keys: the C encoder's fastest path)
        yield from _batched(ctrf_text(evidence, signoff, texts), "replace")
    else:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def _batched(texts: Iterable[str], errors: str) -> Iterator[bytes]:
    """``texts`` encoded as UTF-8 (``errors`` as :meth:`str.encode` takes it), :data:`HTML_BATCH` of them joined
    per piece: the same bytes as encoding their concatenation (UTF-8 encodes each character alone)."""
    batch: list[str] = []
    for text in texts:
        batch.append(text)
        if len(batch) >= HTML_BATCH:
            yield "".join(batch).encode("utf-8", errors)
            batch.clear()
    if batch:
        yield "".join(batch).encode("utf-8", errors)


def write_renderings(evidence: EvidenceDocument, bundle_dir: Path, signoff: SignoffView,
                     texts: ItemTexts | None = None) -> list[Path]:
    """Write every rendering (FORMATS) of ``evidence`` into ``bundle_dir`` (each to a temporary name,
    then renamed); return their paths. ``signoff`` is the sign-off view (run signer or why unsigned,
    owner roles); ``texts`` the items' texts rendered during the run (see :func:`pieces`). Each is written
    piece by piece (:func:`pieces`: the same bytes as :func:`render`); a rendering that fails half-way leaves
    no file behind for the manifest to list."""
    written = []
    with gc_paused():
        for fmt, name in FORMATS.items():
            tmp = bundle_dir / f".hetero-tmp-{name}"
            try:
                with open(tmp, "wb") as fh:
                    for piece in pieces(fmt, evidence, signoff, texts=texts):
                        fh.write(piece)
            except BaseException:
                tmp.unlink(missing_ok=True)  # half a rendering is none: nothing is left to list
                raise
            tmp.replace(bundle_dir / name)
            written.append(bundle_dir / name)
    return written
