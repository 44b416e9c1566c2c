"""The training-check tests' image: ``pytest-hetero/py311-jax:1``, the offline py311-onnx image plus jax's CPU
wheels (gloo collectives), built once per machine from the PyPI wheels pinned here.

Why jax and not torch: torch's Linux x86_64 wheel on PyPI (2.15.0: 539 MB, 1.1 GB unpacked) is the CUDA build;
``import torch`` without its nvidia-*/cuda-toolkit dependencies (several GB more) fails (``libcublasLt.so.* not
found``), and the CPU-only wheel is not on PyPI. jax 0.10.2 + jaxlib on CPU (about 106 MB of wheels, 416 MB
unpacked) drives the same gloo library for its CPU collectives. The gate's all-reduce program uses
torch.distributed where the image has torch (gloo/nccl/hccl) and jax otherwise; these tests run the jax path.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from dockerkit import ONNX_IMAGE

JAX_IMAGE = "pytest-hetero/py311-jax:1"
PINS = ("jax==0.10.2", "jaxlib==0.10.2", "ml_dtypes==0.7.0", "numpy==2.4.6", "opt_einsum==3.4.0")
"""Wheels added to the py311-onnx image (cp311, manylinux_2_27 x86_64); scipy is not needed for the CPU path."""
KEY = hashlib.sha256("\n".join((ONNX_IMAGE, *PINS)).encode()).hexdigest()[:16]
LABEL = "pytest-hetero.test-image-key"


def ensure_jax_image(api: Any) -> str:
    """Build :data:`JAX_IMAGE` unless the engine holds it with the current :data:`KEY`; return its name.
    Needs the base image (dockerkit's ``engine`` fixture builds it) and pip's index; about 40 s on a fresh machine."""
    try:
        have = (api.inspect_image(JAX_IMAGE).get("Config") or {}).get("Labels") or {}
        if have.get(LABEL) == KEY:
            return JAX_IMAGE
    except Exception:  # noqa: BLE001 - not there: build it
        pass
    with tempfile.TemporaryDirectory(prefix="hetero-jax-image-") as tmp:
        ctx = Path(tmp)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
                        "--only-binary=:all:", "--python-version", "3.11", "--platform", "manylinux_2_27_x86_64",
                        "--target", str(ctx / "site"), *PINS], check=True, timeout=600)
        (ctx / "Dockerfile").write_text(f"FROM {ONNX_IMAGE}\nCOPY site /usr/local/lib/python3.11/dist-packages/\n"
                                        f'LABEL {LABEL}="{KEY}"\n')
        for chunk in api.build(path=str(ctx), tag=JAX_IMAGE, rm=True, forcerm=True, pull=False, decode=True):
            if "error" in chunk:
                raise RuntimeError(f"building {JAX_IMAGE}: {chunk['error']}")
    return JAX_IMAGE
