"""``hetero explain``: read anything operators paste from GPU/NPU clusters and say what it means.

:func:`explain_text` / :func:`explain_bytes` split a paste into blocks, detect each block's kind
(nvidia-smi table/``-q``/XML, kernel logs, DCGM, npu-smi, kubectl describe/get/events, Kubernetes
objects, container logs), read each with its reader and return a :class:`Report` of :class:`Finding`
records (see :mod:`pytest_hetero.explain.model`).
"""

from __future__ import annotations

from pytest_hetero.explain.core import explain_bytes, explain_text
from pytest_hetero.explain.model import Block, Finding, Report, SourceLine

__all__ = ["Block", "Finding", "Report", "SourceLine", "explain_bytes", "explain_text"]
