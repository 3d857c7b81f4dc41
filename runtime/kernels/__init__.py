"""Fused Triton kernels behind a per-op registry (see ``registry.py``)."""

from runtime.kernels.choice import OP_NAMES, fused_by_op, normalise_choice
from runtime.kernels.registry import KernelRegistry

__all__ = ["OP_NAMES", "KernelRegistry", "fused_by_op", "normalise_choice"]
