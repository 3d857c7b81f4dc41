"""Fused Triton kernels behind a per-op registry (see ``registry.py``).

Ops (reference twin in ``reference.py``, fused module in parentheses):
- ``mhc``       Mega-mHC: pending post + coefficients + Sinkhorn + collapse + norm (mhc.py)
- ``gate``      Mega-Gate: GEMM + sqrtsoftplus + bias + top-k + renormalise, split over
                experts and D, the last program per row block selects (gate.py, gate_tiles.py)
- ``indexer``   sparse-MQA logits with the visibility mask (indexer.py)
- ``topk``      top-k ids with the lowest-index tie rule: a radix select, one program per row,
                or with few rows per (row, chunk) then over the chunks' candidates (topk.py;
                when it splits: topk_tiles.py; the register-resident and row-bound selects,
                when the split policy asks: topk_resident.py, topk_rowbound.py)
- ``attention`` sparse attention over window + top-k entries with the sink, split-K (attention.py;
                its tiling per query-count bucket: attention_tiles.py; ``ring``: the static
                decode slab's layout, runtime/static/ring_attention.py)
- ``inv_rope``  inverse RoPE + cast for wo_a's input (inv_rope.py)
- ``compress``  the compressor's group softmax pooling + RMSNorm (compress.py)
- ``rope_quant`` RoPE + the cache's fake-quant in one pass: FP8 window KV, NVFP4 global
                entries, MXFP4 index keys/queries; explicit rounding arithmetic, bit-exact
                with runtime.quant (rope_quant.py)
- ``engram``    Engram: table-row gather straight into the wkv GEMM's input + the
                gate-and-add epilogue (engram.py)
- ``linear``    the projections at decode row counts (1-64 rows), plain and grouped (``wo_a``):
                K split over programs, the last one per tile sums the splits (skinny.py;
                tiling: skinny_tiles.py); ``Numerics.linear`` runs it on the fast path
- ``experts``   the routed experts after routing at few rows (W1|W3 + SwiGLU, then W2 summed
                over the picks, shared expert included), weights read by expert id
                (experts.py); ``grouped_moe`` calls it

The engine's per-request caches hold fake-quantised values in the model dtype and grow
by concatenation; packed FP8 / NVFP4 bytes decoded in the attention kernel and CUDA
graphs are the static decode path's (runtime/static/).
"""

from runtime.kernels.choice import OP_NAMES, fused_by_op, normalise_choice

__all__ = ["OP_NAMES", "KernelRegistry", "fused_by_op", "normalise_choice"]


def __getattr__(name: str):
    """``KernelRegistry`` on first use: it imports torch, and this package is also the
    parent of the light ``choice`` and ``ops`` modules that ``RuntimeOptions`` reads
    (importing ``runtime.kernels.choice`` runs this file first; ``v41val report``
    normalises stored options and must not pay for torch)."""
    if name == "KernelRegistry":
        from runtime.kernels.registry import KernelRegistry

        return KernelRegistry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
