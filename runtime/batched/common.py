"""Small helpers shared by the batched modules: the float32 regions and RoPE rows."""

from __future__ import annotations

import contextlib

import torch

from runtime.rope import RopeTable


def float32_region(x: torch.Tensor):
    """Autocast off: the sites the spec keeps in float32 (mHC coefficients, the gate, the
    ratio-2 compressor's kv/gate, the indexer scores) stay float32 under a bf16 autocast
    of the trainer; outside autocast this is a no-op."""
    if torch.is_autocast_enabled(x.device.type):
        return torch.autocast(x.device.type, enabled=False)
    return contextlib.nullcontext()


class RopeRows:
    """cos/sin [n, rope/2] of positions 0..n-1 for one RoPE variant, taken from the
    runtime's own table (bit-identical values), tabulated once up to ``max_positions`` so
    the forward only slices (no host sync, fixed shapes)."""

    def __init__(self, table: RopeTable, max_positions: int, device: torch.device):
        cos, sin = table.lookup(torch.arange(max_positions), device)
        self.cos, self.sin = cos, sin
        self.max_positions = max_positions

    def rows(self, n: int, device: torch.device, step: int = 1,
             start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin of positions start, start + step, start + 2*step, ... (n of them);
        ``start`` > 0 for the kept rows of a decoder-trimmed prefill."""
        if n == 0:
            return self.cos[:0].to(device), self.sin[:0].to(device)
        last = start + (n - 1) * step
        if last >= self.max_positions:
            raise ValueError(f"batched forward: position {last} beyond the RoPE table "
                             f"({self.max_positions} positions)")
        if self.cos.device != device:
            self.cos, self.sin = self.cos.to(device), self.sin.to(device)
        return self.cos[start : last + 1 : step], self.sin[start : last + 1 : step]
