"""The one table of kernel ops: each op's name, its reference twin and its fused kernel.

In the spirit of vLLM's ``CustomOp`` (``forward_native`` / ``forward_cuda`` on one op):
every op has a plain-PyTorch reference and a fused implementation with the same
signature, and ``RuntimeOptions.kernels`` picks per op (``runtime.kernels.choice``).
Both sides are named by import path and loaded only when used, so this module (and
``choice``, which validates a choice against it) imports neither torch nor Triton.
Adding an op is one row here plus its two implementations.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass


def _load(path: str):
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class KernelOp:
    """``reference``: ``module:function`` of the plain-PyTorch twin (it fixes the
    signature); ``fused``: ``module:Class`` whose instances are the fused callable."""

    name: str
    reference: str
    fused: str

    def reference_fn(self) -> Callable:
        return _load(self.reference)

    def build_fused(self) -> Callable:
        """A fresh fused callable (imports the fused module, hence Triton)."""
        return _load(self.fused)()


KERNEL_OPS = (
    KernelOp("mhc", "runtime.kernels.reference:mhc_site", "runtime.kernels.mhc:FusedMhc"),
    KernelOp("gate", "runtime.moe:route", "runtime.kernels.gate:FusedGate"),
    KernelOp("indexer", "runtime.kernels.reference:index_logits",
             "runtime.kernels.indexer:FusedIndexLogits"),
    KernelOp("topk", "runtime.kernels.reference:topk_entries", "runtime.kernels.topk:FusedTopk"),
    KernelOp("attention", "runtime.attention:sparse_attention",
             "runtime.kernels.attention:FusedSparseAttention"),
    KernelOp("inv_rope", "runtime.kernels.reference:inverse_rope",
             "runtime.kernels.inv_rope:FusedInverseRope"),
    KernelOp("compress", "runtime.compressor:pool_and_norm",
             "runtime.kernels.compress:FusedPoolNorm"),
    KernelOp("rope_quant", "runtime.compressor:rope_then_quant",
             "runtime.kernels.rope_quant:FusedRopeQuant"),
    KernelOp("engram", "runtime.engram:engram", "runtime.kernels.engram:FusedEngram"),
    KernelOp("linear", "runtime.kernels.reference:linear", "runtime.kernels.skinny:FusedLinear"),
    KernelOp("experts", "runtime.grouped_moe:routed_experts", "runtime.kernels.experts:FusedExperts"),
)
OP_NAMES = tuple(op.name for op in KERNEL_OPS)
BY_NAME = {op.name: op for op in KERNEL_OPS}
