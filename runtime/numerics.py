"""Row-invariant numerics: the switch between the fast path and the batch-invariant path.

On CPU a GEMM's row results depend on how many rows are in the call (BLAS picks a gemv
for one row and other blockings for a few rows), and vectorised transcendental kernels
(exp, sigmoid, silu, cos) treat the tail of a buffer with a scalar loop whose rounding
differs. Measured on this machine (torch 2.13, AVX512): ``F.linear`` on 1-7 rows differs
in the last bits from the same rows inside a larger call, while any call with >= 16 rows
gives row results that depend on the total row count too (1024-deep products differ
between 128 and 416 rows; batched bmm differs with the batch count). What is stable is
one GEMM shape: a fixed tile of rows gives the same row results wherever the row sits in
it. So the invariant path runs every GEMM as a loop over tiles of exactly ``ROW_TILE``
rows (the last one zero-padded), pads row sets to a multiple of the tile (so no row
falls into a vectorised kernel's scalar tail), and pads the key axis of score products. That is what makes
"exact" exact (chunked == one-shot, hit == cold) and requests independent of batching.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

ROW_TILE = 64


@dataclass(frozen=True)
class Numerics:
    """How row-wise ops are run; ``row_tile == 1`` is the plain fast path.

    ``gemm``: the fast path's projection, with the signature of
    ``runtime.kernels.reference.linear`` (the registry's ``linear`` op when it runs fused:
    decode row counts through a skinny Triton GEMM); None is ``F.linear``. The
    batch-invariant path never uses it: its row tiles are what make it invariant."""

    row_tile: int = 1
    gemm: Callable | None = None

    @classmethod
    def for_options(cls, batch_invariant: bool, gemm: Callable | None = None) -> Numerics:
        return cls(ROW_TILE, None) if batch_invariant else cls(1, gemm)

    def padded_rows(self, n: int) -> int:
        """Rows to allocate for ``n`` real rows."""
        if self.row_tile == 1:
            return n
        return max(self.row_tile, -(-n // self.row_tile) * self.row_tile)

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """Zero-pad dim 0 to ``padded_rows``."""
        n = x.shape[0]
        target = self.padded_rows(n)
        if target == n:
            return x
        return torch.cat([x, x.new_zeros((target - n, *x.shape[1:]))])

    def linear(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """x [..., in] @ weight[out, in]^T in the weight's dtype, row-invariant when asked."""
        lead = x.shape[:-1]
        rows = x.reshape(-1, x.shape[-1]).to(weight.dtype)
        n = rows.shape[0]
        if self.row_tile == 1:
            return (self.gemm or F.linear)(rows, weight).reshape(*lead, weight.shape[0])
        padded = self.pad(rows)
        tiles = [F.linear(padded[s : s + self.row_tile], weight) for s in range(0, padded.shape[0], self.row_tile)]
        return torch.cat(tiles)[:n].reshape(*lead, weight.shape[0])

    def grouped_linear(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """x [R, G, K] with weight [G, N, K]: G independent projections -> [R, G*N] (the
        groups' outputs side by side). One grouped launch with a fused ``gemm``, else one
        ``linear`` per group."""
        if self.row_tile == 1 and self.gemm is not None:
            return self.gemm(x, weight).reshape(x.shape[0], -1)
        return torch.cat([self.linear(x[:, g], weight[g]) for g in range(weight.shape[0])], dim=-1)

    def matmul(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """a [M, K] @ b [K, N]; invariant mode: row tiles and N padded to the tile."""
        if self.row_tile == 1:
            return a @ b
        m, n = a.shape[0], b.shape[1]
        b = self.pad(b.t()).t()
        padded = self.pad(a)
        tiles = [padded[s : s + self.row_tile] @ b for s in range(0, padded.shape[0], self.row_tile)]
        return torch.cat(tiles)[:m, :n]


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim, statistics in float32 (weight None: unweighted)."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if weight is None:
        return y.to(x.dtype)
    return weight * y.to(x.dtype)
