"""Fused Engram ("the Engram gather" of docs/model.md §5; vLLM ``engram.py``).

Same signature and math as :func:`runtime.engram.engram`, in three steps:

1. **Gather** (Triton): every (token, column) reads its hashed table row straight into the
   wkv GEMM's input layout [T, cols * head_dim], cast once to the GEMM's dtype. The
   reference builds the same matrix with an advanced-indexing copy, a reshape and a cast;
   the values are bit-identical (one cast of the same table values). Row ids are int64
   (the release's tables have ~3.8e8 rows x 256, far past 2^31 elements).
2. **wkv projection**: ``num.linear``, the very call of the reference on a bit-identical
   input, so the keys and the value are bit-identical too (and row-invariant when the
   model asks for it).
3. **Gate-and-add epilogue** (Triton), one program per (token, stream) and one read of
   the stream row, its key, the value and the q/k weights: rstd of the stream and of the
   key, the weighted dot, signed sqrt with the 1e-6 clamp, sigmoid, X + gate * v, cast to
   the streams' dtype. float32 math in the reference's order; only the three length-D sums
   are reduced in another order, so float32 results agree to ~1e-6 relative (more where a
   dot is near zero: the signed sqrt amplifies its last bits up to 500x; the tests bound
   that per element).

Inputs are checked before launching: shapes against each other (free), and the row-id
range, which on a GPU costs a device sync (a stall per engram layer, and no CUDA-graph
capture). ``check_ids``: True always checks, False never, None (the registry's default)
checks where that needs no device sync, i.e. on CPU tensors. The hasher's ids are in range
by construction; and unchecked, the kernel still never reads outside the table: an
out-of-range id gathers a zero row (the reference would raise IndexError on CPU and hit a
device-side assert on CUDA).
"""

from __future__ import annotations

import torch
import triton.language as tl

from runtime.config import V41Config
from runtime.engram import GATE_CLAMP
from runtime.errors import CheckpointError, StateError
from runtime.kernels.backend import jit, next_pow2
from runtime.kernels.mhc import TL_DTYPES
from runtime.numerics import Numerics

GATHER_TILE = 2048  # table values per gather program (8 rows of 256)


def _gather_rows_kernel(ids_ptr, table_ptr, out_ptr, n_rows, cols, ids_stride_t, ids_stride_c, table_stride,
                        BLOCK_C: tl.constexpr, HD: tl.constexpr, BLOCK_HD: tl.constexpr, DTYPE: tl.constexpr):
    """Program (t, c-block): out[t, c*HD:(c+1)*HD] = table[ids[t, c]] for BLOCK_C columns."""
    t = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = c < cols
    row = tl.load(ids_ptr + t * ids_stride_t + c * ids_stride_c, mask=c_ok, other=0).to(tl.int64)
    row_ok = c_ok & (row >= 0) & (row < n_rows)
    dim = tl.arange(0, BLOCK_HD)
    d_ok = dim < HD
    values = tl.load(table_ptr + row[:, None] * table_stride + dim[None, :],
                     mask=row_ok[:, None] & d_ok[None, :], other=0.0)
    out_at = (t * cols + c[:, None]) * HD + dim[None, :]  # [BLOCK_C, BLOCK_HD]
    tl.store(out_ptr + out_at, values.to(DTYPE), mask=c_ok[:, None] & d_ok[None, :])


def _gate_add_kernel(streams_ptr, kv_ptr, q_w_ptr, k_w_ptr, out_ptr, HC, D, eps, inv_sqrt_d, clamp,
                     BLOCK_D: tl.constexpr, DTYPE: tl.constexpr):
    """Program (t, s): out[t, s] = X + sigmoid(signed_sqrt(dot)) * v, all in float32."""
    # an eager launch passes Python floats as fp32, inductor's (torch.compile) as fp64: pin fp32
    eps, inv_sqrt_d, clamp = tl.cast(eps, tl.float32), tl.cast(inv_sqrt_d, tl.float32), tl.cast(clamp, tl.float32)
    t = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1).to(tl.int64)
    dim = tl.arange(0, BLOCK_D)
    ok = dim < D
    stream_at = (t * HC + s) * D + dim
    kv_row = t * (HC + 1) * D
    h = tl.load(streams_ptr + stream_at, mask=ok, other=0.0).to(tl.float32)  # [D]
    key = tl.load(kv_ptr + kv_row + s * D + dim, mask=ok, other=0.0).to(tl.float32)
    value = tl.load(kv_ptr + kv_row + HC * D + dim, mask=ok, other=0.0).to(tl.float32)
    weight = (tl.load(q_w_ptr + s * D + dim, mask=ok, other=0.0).to(tl.float32)
              * tl.load(k_w_ptr + s * D + dim, mask=ok, other=0.0).to(tl.float32))
    rstd_h = 1.0 / tl.sqrt_rn(tl.sum(h * h, axis=0) / D + eps)
    rstd_k = 1.0 / tl.sqrt_rn(tl.sum(key * key, axis=0) / D + eps)
    dot = tl.sum(h * weight * key, axis=0) * (rstd_h * rstd_k) * inv_sqrt_d
    magnitude = tl.sqrt_rn(tl.maximum(tl.abs(dot), clamp))
    negative = dot.to(tl.int32, bitcast=True) < 0  # copysign: the sign bit, -0.0 included
    signed = tl.where(negative, -magnitude, magnitude)
    gate = 1.0 / (1.0 + tl.exp(-signed))
    tl.store(out_ptr + stream_at, (h + gate * value).to(DTYPE), mask=ok)


class FusedEngram:
    """Callable with :func:`runtime.engram.engram`'s signature (``ops.engram``)."""

    def __init__(self, check_ids: bool | None = None) -> None:
        self.check_ids = check_ids
        self.gather_kernel = jit(_gather_rows_kernel)
        self.gate_kernel = jit(_gate_add_kernel)

    def gather(self, table: torch.Tensor, hash_ids: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """table [rows, head_dim], hash_ids [T, cols] -> [T, cols * head_dim] in ``dtype``
        (the reference's ``table[hash_ids].reshape(T, -1).to(dtype)``)."""
        if table.dim() != 2:
            raise CheckpointError(f"engram.embed.weight: expected [rows, head_dim], got {tuple(table.shape)}")
        if hash_ids.dim() != 2 or hash_ids.dtype not in (torch.int64, torch.int32):
            raise StateError(f"engram hash_ids: expected int64/int32 [T, cols], got "
                             f"{hash_ids.dtype} {tuple(hash_ids.shape)}")
        n_rows, head_dim = table.shape
        t, cols = hash_ids.shape
        out = torch.empty(t, cols * head_dim, dtype=dtype, device=table.device)
        if t == 0 or cols == 0:
            return out
        if self.check_ids or (self.check_ids is None and hash_ids.device.type == "cpu"):
            low, high = (int(v) for v in torch.aminmax(hash_ids))
            if low < 0 or high >= n_rows:
                raise StateError(f"engram hash_ids: row ids must lie in [0, {n_rows}) (the table's rows), "
                                 f"got [{low}, {high}]")
        if table.stride(1) != 1:
            table = table.contiguous()
        block_hd = next_pow2(head_dim)
        block_c = min(next_pow2(cols), max(1, GATHER_TILE // block_hd))
        grid = (t, -(-cols // block_c))
        self.gather_kernel[grid](
            hash_ids, table, out, n_rows, cols, hash_ids.stride(0), hash_ids.stride(1), table.stride(0),
            BLOCK_C=block_c, HD=head_dim, BLOCK_HD=block_hd, DTYPE=TL_DTYPES[dtype],
        )
        return out

    def __call__(self, streams: torch.Tensor, hash_ids: torch.Tensor, w, config: V41Config,
                 num: Numerics) -> torch.Tensor:
        """streams [T, hc, D], hash_ids [T, cols] -> streams with the gated value added."""
        if streams.dim() != 3:
            raise StateError(f"engram streams: expected [T, hc, D], got {tuple(streams.shape)}")
        t, hc, d = streams.shape
        if hash_ids.dim() != 2 or hash_ids.shape[0] != t:
            raise StateError(f"engram hash_ids: expected [{t}, cols] (one row per token of the streams), "
                             f"got {tuple(hash_ids.shape)}")
        _check_weights(w, hc, d, hash_ids.shape[1])
        out = torch.empty_like(streams, memory_format=torch.contiguous_format)
        if t == 0:
            return out
        rows = self.gather(w.embed.weight, hash_ids, w.wkv.weight.dtype)  # [T, cols*head_dim]
        kv = num.linear(rows, w.wkv.weight).contiguous()  # [T, (hc+1)*D]
        block_d = next_pow2(d)
        self.gate_kernel[(t, hc)](
            streams.contiguous(), kv, w.q_weight.contiguous(), w.k_weight.contiguous(), out,
            hc, d, config.rms_norm_eps, d**-0.5, GATE_CLAMP,
            BLOCK_D=block_d, DTYPE=TL_DTYPES[streams.dtype], num_warps=max(4, min(16, block_d // 512)),
        )
        return out


def _check_weights(w, hc: int, d: int, cols: int) -> None:
    """The layer's engram tensors against the streams and the hash columns."""
    head_dim = w.embed.weight.shape[-1]
    expected = {
        "engram.wkv.weight": (w.wkv.weight, ((hc + 1) * d, cols * head_dim)),
        "engram.q_weight": (w.q_weight, (hc, d)),
        "engram.k_weight": (w.k_weight, (hc, d)),
    }
    for name, (tensor, shape) in expected.items():
        if tuple(tensor.shape) != shape:
            raise CheckpointError(f"{name}: expected {shape} for streams [T, {hc}, {d}] and {cols} hash "
                                  f"columns of {head_dim}, got {tuple(tensor.shape)}")
