"""pytest-hetero: a five-layer validation gate for heterogeneous AI compute platforms.

The five layers, each proven separately with evidence: discovery, scheduling, startup,
model execution and business sample.
"""

from __future__ import annotations

__version__ = "0.1.0"

from pytest_hetero.vocab import LAYERS

__all__ = ["LAYERS", "__version__"]
