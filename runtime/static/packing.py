"""The quantise-and-pack on write of a packed static slab (``kv_storage = "packed"``).

The step writes the window KV and the global KV entries right after their RoPE +
fake-quant (the registry's "rope_quant" op). For a packed slab ``PackingQuant`` stands
in for that op: for the packed formats it returns the bytes (``PackedKV``) of the
very values the op would have returned, so the packed slab holds what the dequantized
one holds, value for value:
- fused rope_quant: the same Triton kernel, storing codes and scale bytes instead of
  the dequantised values (``FusedRopeQuant.pack``), one pass as before;
- reference rope_quant: RoPE, then ``runtime.kv_packing.pack`` (the torch quantiser's
  own parts, so its unpacking is ``rope_then_quant`` bit for bit).
Other formats (the MXFP4 index keys) go to the op unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from runtime.kv_packing import FORMATS, PackedKV, pack
from runtime.rope import apply_rope


@dataclass(frozen=True)
class PackingQuant:
    """``rope_then_quant``'s signature; "fp8" and "nvfp4" come back packed."""

    rope_quant: Callable

    @property
    def how(self) -> str:
        """For ``kernels_used``: where the bytes are made."""
        if hasattr(self.rope_quant, "pack"):
            return "packed (rope_quant kernel packs on write; attention decodes in-kernel)"
        return "packed (torch pack on write; attention decodes in-kernel)"

    def __call__(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, fmt: str) -> torch.Tensor | PackedKV:
        if fmt not in FORMATS:
            return self.rope_quant(x, cos, sin, fmt)
        fused_pack = getattr(self.rope_quant, "pack", None)
        if fused_pack is not None:
            return fused_pack(x, cos, sin, fmt)
        return pack(apply_rope(x, cos, sin), fmt)
