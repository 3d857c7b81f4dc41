"""Fused sparse attention ("MegaAttention" scope, FlashMLA mega-attention): one online
softmax per query over its SWA window and its top-k compressed entries, gathered straight
from the caches, with the per-head sink in the denominator.

Same signature and math as :func:`runtime.attention.sparse_attention`. The key list of
query t is [window positions p-W+1 .. p (valid iff >= floor)] ++ [topk[t] ids (valid iff
>= 0)]. A program owns one query, BLOCK_H heads (MQA: all heads share the keys, so a key
tile is read once for BLOCK_H heads) and one split of the key list (flash-decoding); with
more than one split a second kernel merges the partial (max, sum, acc) and adds the sink.

Not done here: the caches hold the runtime's fake-quantised values in the model dtype,
so there is no in-kernel FP8/NVFP4 dequant (the reference state stores no packed bytes).
"""

from __future__ import annotations

import torch
import triton.language as tl

from runtime.kernels.backend import jit, next_pow2
from runtime.numerics import Numerics

NEG_BIG = -1.0e30


def _attn_partial_kernel(
    q_ptr, pos_ptr, floor_ptr, swa_ptr, comp_ptr, topk_ptr, sink_ptr,
    out_ptr, m_ptr, l_ptr,
    H, W, K, keys_per_split, scale,
    HD: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, SPLITS: tl.constexpr,
    HAS_TOPK: tl.constexpr, IEEE: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    hb = tl.program_id(1)
    split = tl.program_id(2)
    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = heads < H
    dim = tl.arange(0, HD)
    q = tl.load(q_ptr + (t * H + heads[:, None]) * HD + dim[None, :], mask=h_ok[:, None], other=0.0)
    if IEEE:
        q = q.to(tl.float32)
    p_t = tl.load(pos_ptr + t)
    floor_t = tl.load(floor_ptr + t)
    n_keys = W + K
    start = split * keys_per_split
    end = tl.minimum(start + keys_per_split, n_keys)
    if SPLITS == 1:
        m_i = tl.load(sink_ptr + heads, mask=h_ok, other=0.0).to(tl.float32)
        l_i = tl.full((BLOCK_H,), 1.0, dtype=tl.float32)
    else:
        m_i = tl.full((BLOCK_H,), -1.0e30, dtype=tl.float32)
        l_i = tl.zeros((BLOCK_H,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_H, HD), dtype=tl.float32)
    for j0 in range(start, end, BLOCK_N):
        js = j0 + tl.arange(0, BLOCK_N)
        in_range = js < end
        is_win = js < W
        pos = p_t - (W - 1) + js
        win_ok = is_win & in_range & (pos >= floor_t) & (pos >= 0)
        if HAS_TOPK:
            slot = js - W
            tk_ok = (~is_win) & in_range
            ids = tl.load(topk_ptr + t * K + slot, mask=tk_ok, other=-1)
            comp_ok = tk_ok & (ids >= 0)
            ok = win_ok | comp_ok
            rows_win = swa_ptr + pos.to(tl.int64) * HD
            rows_comp = comp_ptr + ids.to(tl.int64) * HD
            kp = tl.where(is_win, rows_win, rows_comp)
        else:
            ok = win_ok
            kp = swa_ptr + pos.to(tl.int64) * HD
        k = tl.load(kp[:, None] + dim[None, :], mask=ok[:, None], other=0.0)  # [BLOCK_N, HD]
        if IEEE:
            k = k.to(tl.float32)
            s = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        s = tl.where(ok[None, :], s * scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p, k, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(k.dtype), k)
        m_i = m_new
    if SPLITS == 1:
        o = acc / l_i[:, None]
        tl.store(out_ptr + (t * H + heads[:, None]) * HD + dim[None, :], o, mask=h_ok[:, None])
    else:
        part = (t * H + heads) * SPLITS + split
        tl.store(out_ptr + part[:, None] * HD + dim[None, :], acc, mask=h_ok[:, None])
        tl.store(m_ptr + part, m_i, mask=h_ok)
        tl.store(l_ptr + part, l_i, mask=h_ok)


def _attn_merge_kernel(
    part_ptr, m_ptr, l_ptr, sink_ptr, out_ptr, H,
    HD: tl.constexpr, SPLITS: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)  # t * H + h
    h = row % H
    sp = tl.arange(0, SPLITS)
    dim = tl.arange(0, HD)
    m = tl.load(m_ptr + row * SPLITS + sp)
    l_part = tl.load(l_ptr + row * SPLITS + sp)
    sink = tl.load(sink_ptr + h).to(tl.float32)
    top = tl.maximum(tl.max(m, axis=0), sink)
    f = tl.exp(m - top)
    denom = tl.sum(f * l_part, axis=0) + tl.exp(sink - top)
    acc = tl.load(part_ptr + (row * SPLITS + sp[:, None]) * HD + dim[None, :])
    o = tl.sum(f[:, None] * acc, axis=0) / denom
    tl.store(out_ptr + row * HD + dim, o)


class FusedSparseAttention:
    """Callable with :func:`runtime.attention.sparse_attention`'s signature."""

    def __init__(self, splits: int | None = None) -> None:
        """``splits`` forces the key-list split count (a power of two; tests use it to run
        the merge path on CPU); None picks it from the device and the batch."""
        self.forced_splits = splits
        self.partial = jit(_attn_partial_kernel)
        self.merge = jit(_attn_merge_kernel)

    def __call__(self, q, positions, floor, swa, window: int, compressed, topk, sink,
                 num: Numerics) -> torch.Tensor:
        t, n_heads, hd = q.shape
        dev = q.device
        out = torch.empty(t, n_heads, hd, dtype=torch.float32, device=dev)
        if t == 0:
            return out
        if hd != next_pow2(hd):
            raise ValueError(f"fused attention: head_dim {hd} must be a power of two")
        has_topk = topk is not None and compressed is not None
        k_width = topk.shape[1] if has_topk else 0
        dtype = q.dtype
        if swa.dtype != dtype or (has_topk and compressed.dtype != dtype):
            dtype = torch.float32
        q = q.to(dtype).contiguous()
        swa = swa.to(dtype).contiguous()
        comp = compressed.to(dtype).contiguous() if has_topk else swa
        tk = topk.contiguous() if has_topk else positions
        ieee = dtype == torch.float32
        block_h = 16 if n_heads <= 16 else 32
        block_n = 32 if hd <= 128 else 16
        h_blocks = -(-n_heads // block_h)
        n_keys = window + k_width
        # Splits: enough programs to fill the GPU at decode, one split when T is large.
        splits = 1
        if self.forced_splits is not None:
            splits = self.forced_splits
        elif dev.type == "cuda":
            splits = max(1, min(16, 264 // max(1, t * h_blocks)))
            splits = 1 << (splits.bit_length() - 1)
        per_split = -(-n_keys // splits)
        per_split = -(-per_split // block_n) * block_n
        splits = -(-n_keys // per_split)
        splits = 1 << (splits - 1).bit_length() if splits > 1 else 1
        sink_f = sink.float().contiguous()
        pos = positions.long().contiguous()
        flo = floor.long().contiguous()
        if splits == 1:
            self.partial[(t, h_blocks, 1)](
                q, pos, flo, swa, comp, tk, sink_f, out, out, out,
                n_heads, window, k_width, per_split, hd**-0.5,
                HD=hd, BLOCK_H=block_h, BLOCK_N=block_n, SPLITS=1, HAS_TOPK=has_topk, IEEE=ieee,
            )
            return out
        part = torch.empty(t, n_heads, splits, hd, dtype=torch.float32, device=dev)
        m = torch.full((t, n_heads, splits), NEG_BIG, dtype=torch.float32, device=dev)
        lsum = torch.zeros(t, n_heads, splits, dtype=torch.float32, device=dev)
        part.zero_()
        self.partial[(t, h_blocks, splits)](
            q, pos, flo, swa, comp, tk, sink_f, part, m, lsum,
            n_heads, window, k_width, per_split, hd**-0.5,
            HD=hd, BLOCK_H=block_h, BLOCK_N=block_n, SPLITS=splits, HAS_TOPK=has_topk, IEEE=ieee,
        )
        self.merge[(t * n_heads,)](part, m, lsum, sink_f, out, n_heads, HD=hd, SPLITS=splits)
        return out
