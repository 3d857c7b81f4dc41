"""Fused Triton kernels behind a per-op registry (see ``registry.py``).

Ops (reference twin in ``reference.py``, fused module in parentheses):
- ``mhc``       Mega-mHC: pending post + coefficients + Sinkhorn + collapse + norm (mhc.py)
- ``gate``      Mega-Gate: GEMM + sqrtsoftplus + bias + top-k + renormalise (gate.py)
- ``indexer``   sparse-MQA logits with the visibility mask (indexer.py)
- ``topk``      top-k ids with the lowest-index tie rule, torch selects (topk.py, not Triton)
- ``attention`` sparse attention over window + top-k entries with the sink, split-K (attention.py)
- ``inv_rope``  inverse RoPE + cast for wo_a's input (inv_rope.py)

Not built: compress + quantise + cache insert, Engram gather, in-kernel FP8/NVFP4 dequant
(the runtime's caches hold fake-quantised values in the model dtype, not packed bytes).
"""

from runtime.kernels.choice import OP_NAMES, fused_by_op, normalise_choice
from runtime.kernels.registry import KernelRegistry

__all__ = ["OP_NAMES", "KernelRegistry", "fused_by_op", "normalise_choice"]
