"""pytest-hetero: a five-layer validation gate for heterogeneous AI compute platforms.

The five layers, each proven separately with evidence: discovery, scheduling, startup,
model execution and business sample.
"""

from __future__ import annotations

__version__ = "0.1.0"

LAYERS: tuple[str, ...] = ("discovery", "scheduling", "startup", "model", "business")
"""The five layers in dependency order; each layer's items depend on the one before."""
