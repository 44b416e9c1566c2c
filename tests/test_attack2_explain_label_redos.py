"""Attack round 2, (d)/(e): a 40-character pasted line hangs ``hetero explain``. Block detection tries every line
as a ``key=value`` label line (``blocks.LABEL_LINE``), whose ``(?:\\S+=\\S*\\s*)*`` can split ``a=a=a=…`` into groups
in exponentially many ways; when the line then fails (a last word without ``=``), Python's engine tries them all:
``k=v a=a=…a= y`` with 16 ``a=`` took 5 s, each one more ×3 (20: minutes; 30: years). The pattern now reads the
same lines with one way to split them."""

from __future__ import annotations

import time

from pytest_hetero.explain.blocks import LABEL_LINE
from pytest_hetero.explain.core import explain_text


def test_a_line_that_is_almost_labels_is_read_in_linear_time() -> None:
    line = "k=v " + "a=" * 30 + " y"
    begun = time.process_time()
    assert LABEL_LINE.match(line) is None
    explain_text(line + "\n")
    assert time.process_time() - begun < 2.0


def test_label_lines_are_still_label_lines() -> None:
    for line in ("nvidia.com/gpu.count=8", "  feature.node.kubernetes.io/pci-10de.present=true  ",
                 "beta.kubernetes.io/arch=amd64,kubernetes.io/os=linux,nvidia.com/mig.strategy=mixed",
                 "a=b c=d e==f", "k=v=w", "k=x y=z"):
        assert LABEL_LINE.match(line), line
    for line in ("k=v y", "k= =v", "k=v a= =x"):
        assert not LABEL_LINE.match(line), line
