"""The running real node for the benchmarks that time work on it (``tests/infra/realnode.py``).

``realnode()`` loads that module by path (``tests/`` is not a package) and returns its
``ensure_realnode()``: the node's facts, starting it when it is not up.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def realnode() -> Any:
    """The running real node (``tests/infra/realnode.py``'s ``ensure_realnode()``; started when needed)."""
    spec = importlib.util.spec_from_file_location("hetero_realnode", ROOT / "tests" / "infra" / "realnode.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["hetero_realnode"] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.ensure_realnode()
